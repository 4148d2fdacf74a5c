// Exit statuses by class, the field a message names, and the JSON error object.
#include "client/cli/cli_exit.h"

#include <memory>

#include "client/cli/cli_flags.h"
#include "client/lib/client.h"
#include "grpcpp/grpcpp.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fairvault::client::cli {
namespace {

absl::Status Vault(grpc::StatusCode code, const std::string& message) {
  return FromGrpcStatus(grpc::Status(code, message));
}

TEST(ExitCodeForTest, MapsTheVaultsCodesByClass) {
  EXPECT_EQ(ExitCodeFor(Vault(grpc::StatusCode::RESOURCE_EXHAUSTED, "request costs epsilon=9")),
            kExitBudget);
  EXPECT_EQ(ExitCodeFor(Vault(grpc::StatusCode::PERMISSION_DENIED, "role")), kExitPermission);
  EXPECT_EQ(ExitCodeFor(Vault(grpc::StatusCode::UNAUTHENTICATED, "key")), kExitPermission);
  EXPECT_EQ(ExitCodeFor(Vault(grpc::StatusCode::NOT_FOUND, "artifact")), kExitNotFound);
  EXPECT_EQ(ExitCodeFor(Vault(grpc::StatusCode::UNAVAILABLE, "down")), kExitUnavailable);
  EXPECT_EQ(ExitCodeFor(Vault(grpc::StatusCode::DEADLINE_EXCEEDED, "slow")), kExitUnavailable);
  for (grpc::StatusCode other :
       {grpc::StatusCode::INVALID_ARGUMENT, grpc::StatusCode::FAILED_PRECONDITION,
        grpc::StatusCode::ALREADY_EXISTS, grpc::StatusCode::INTERNAL, grpc::StatusCode::DATA_LOSS,
        grpc::StatusCode::CANCELLED, grpc::StatusCode::UNIMPLEMENTED}) {
    EXPECT_EQ(ExitCodeFor(Vault(other, "m")), kExitError) << other;
  }
}

TEST(ExitCodeForTest, LocalInputErrorsAreUsageErrors) {
  EXPECT_EQ(ExitCodeFor(UsageError("--epsilon must be > 0")), kExitUsage);
  // The CLI's own checks of files and CSV fields, before any call.
  EXPECT_EQ(ExitCodeFor(absl::InvalidArgumentError("a.csv:3: column 'x' must be a number")),
            kExitUsage);
  EXPECT_EQ(ExitCodeFor(absl::NotFoundError("cannot open 'a.csv' for reading")), kExitUsage);
  EXPECT_EQ(ExitCodeFor(absl::FailedPreconditionError("cannot open 'o.csv' for writing")),
            kExitUsage);
  // Not input: a local timeout (job wait), a failed job, a read error.
  EXPECT_EQ(ExitCodeFor(absl::DeadlineExceededError("job has not ended")), kExitUnavailable);
  EXPECT_EQ(ExitCodeFor(absl::AbortedError("job FAILED")), kExitError);
  EXPECT_EQ(ExitCodeFor(absl::DataLossError("error while reading")), kExitError);
  // A vault status keeps its class through WithMessage.
  EXPECT_EQ(ExitCodeFor(WithMessage(Vault(grpc::StatusCode::NOT_FOUND, "a"), "b")), kExitNotFound);
  EXPECT_EQ(ExitCodeFor(WithMessage(Vault(grpc::StatusCode::INVALID_ARGUMENT, "a"), "b")),
            kExitError);
}

TEST(FieldOfTest, NamesTheFieldAMessageStartsWith) {
  EXPECT_EQ(FieldOf(Vault(grpc::StatusCode::INVALID_ARGUMENT, "masses_key: no such release")),
            "masses_key");
  EXPECT_EQ(FieldOf(Vault(grpc::StatusCode::INVALID_ARGUMENT,
                          "header.ttl_seconds must be in [1, 604800]")),
            "header.ttl_seconds");
  EXPECT_EQ(FieldOf(Vault(grpc::StatusCode::INVALID_ARGUMENT, "lambda[3]: must be >= 0")),
            "lambda[3]");
  EXPECT_EQ(FieldOf(Vault(grpc::StatusCode::RESOURCE_EXHAUSTED,
                          "request costs epsilon=9 (delta=0) but the grant ...")),
            "epsilon");
  EXPECT_EQ(FieldOf(UsageError("--lo must be below --hi (got [1, 0])")), "lo");
  EXPECT_EQ(FieldOf(UsageError("unknown flag --bogus")), "");
  EXPECT_EQ(FieldOf(absl::InvalidArgumentError("data.csv:3: column 'x' is empty")), "");
  EXPECT_EQ(FieldOf(Vault(grpc::StatusCode::NOT_FOUND, "unknown table handle 'tbl_x'")), "");
  EXPECT_EQ(FieldOf(Vault(grpc::StatusCode::UNAVAILABLE, "failed to connect to all addresses")),
            "");
}

TEST(JsonStringTest, EscapesAndReplacesInvalidUtf8) {
  EXPECT_EQ(JsonString("a\"b\\c\nd\x01"), "\"a\\\"b\\\\c\\nd\\u0001\"");
  EXPECT_EQ(JsonString("caf\xC3\xA9"), "\"caf\xC3\xA9\"");
  EXPECT_EQ(JsonString("bad\xE9!"), "\"bad\\ufffd!\"");
  EXPECT_EQ(JsonString("cut\xE2\x82"), "\"cut\\ufffd\\ufffd\"");
}

TEST(ErrorJsonTest, OneLineObjectWithCodeClassFieldAndReplay) {
  absl::Status refused =
      Vault(grpc::StatusCode::RESOURCE_EXHAUSTED, "request costs epsilon=9 (delta=0) but ...");
  EXPECT_EQ(ErrorJson(refused, ExitCodeFor(refused)),
            "{\"error\":{\"code\":\"RESOURCE_EXHAUSTED\",\"exit_code\":3,\"class\":\"budget\","
            "\"message\":\"request costs epsilon=9 (delta=0) but ...\",\"from_vault\":true,"
            "\"field\":\"epsilon\",\"hint\":\"refused: nothing was charged; `fairvault budget` "
            "shows what is left, and --dry-run prices a request before sending it\"}}\n");

  absl::Status usage = UsageError("--epsilon must be > 0 (got -1)");
  EXPECT_EQ(ErrorJson(usage, ExitCodeFor(usage)),
            "{\"error\":{\"code\":\"INVALID_ARGUMENT\",\"exit_code\":2,\"class\":\"usage\","
            "\"message\":\"--epsilon must be > 0 (got -1)\",\"from_vault\":false,"
            "\"field\":\"epsilon\"}}\n");
}

// A vault whose every FitEqualizedOddsPostProcessor is a replayed stored failure (seq 9).
class ReplayingCompany final : public v1::CompanyService::Service {
 public:
  grpc::Status FitEqualizedOddsPostProcessor(grpc::ServerContext* context,
                                             const v1::FitEqualizedOddsRequest*,
                                             v1::FitEqualizedOddsResponse*) override {
    context->AddTrailingMetadata(kReplayedLedgerSeqMetadata, "9");
    return grpc::Status(grpc::StatusCode::INTERNAL, "glpk: the LP failed");
  }
};

TEST(ErrorOutputTest, AReplayedStoredFailureSaysSo) {
  ReplayingCompany company;
  grpc::ServerBuilder builder;
  builder.RegisterService(&company);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  ClientOptions options;
  options.api_key = "fv_test_key";
  auto client =
      Client::CreateWithChannel(server->InProcessChannel(grpc::ChannelArguments()), options);
  ASSERT_TRUE(client.ok());
  const absl::Status failed =
      (*client)->FitEqualizedOddsPostProcessor(v1::FitEqualizedOddsRequest()).status();
  EXPECT_EQ(ExitCodeFor(failed), kExitError);
  EXPECT_EQ(ErrorText(failed),
            "error: INTERNAL: glpk: the LP failed\nstored failure from ledger seq 9: this "
            "idempotency key's first call was charged and failed; this call returned that "
            "outcome again and was not charged again\n");
  EXPECT_EQ(ErrorJson(failed, ExitCodeFor(failed)),
            "{\"error\":{\"code\":\"INTERNAL\",\"exit_code\":1,\"class\":\"error\","
            "\"message\":\"glpk: the LP failed\",\"from_vault\":true,"
            "\"replayed\":true,\"replayed_ledger_seq\":9}}\n");
  // The stored outcome itself: no key to repeat the call with.
  EXPECT_EQ(ErrorText(WithDrawnIdempotencyKey(failed, "cli-k")), ErrorText(failed));
  server->Shutdown();
}

// A random idempotency key the user never saw is named where the call may have been charged
// (so that repeating the command with it gets the outcome without a second charge), and only
// there: a refusal charges nothing, a replay is already the stored outcome.
TEST(WithDrawnIdempotencyKeyTest, NamesTheKeyOnlyWhereTheCallMayHaveBeenCharged) {
  const absl::Status timed_out =
      WithDrawnIdempotencyKey(Vault(grpc::StatusCode::DEADLINE_EXCEEDED, "Deadline Exceeded"),
                              "cli-0123456789abcdef0123456789abcdef");
  EXPECT_EQ(ErrorText(timed_out),
            "error: DEADLINE_EXCEEDED: Deadline Exceeded\nidempotency key: "
            "cli-0123456789abcdef0123456789abcdef (if the vault charged this call before it "
            "failed, repeat the command with --idempotency-key "
            "cli-0123456789abcdef0123456789abcdef to get its outcome without a second charge)\n");
  EXPECT_EQ(ErrorJson(timed_out, ExitCodeFor(timed_out)),
            "{\"error\":{\"code\":\"DEADLINE_EXCEEDED\",\"exit_code\":6,\"class\":"
            "\"unavailable\",\"message\":\"Deadline Exceeded\",\"from_vault\":true,"
            "\"idempotency_key\":\"cli-0123456789abcdef0123456789abcdef\"}}\n");
  for (grpc::StatusCode code :
       {grpc::StatusCode::UNAVAILABLE, grpc::StatusCode::CANCELLED, grpc::StatusCode::UNKNOWN,
        grpc::StatusCode::INTERNAL, grpc::StatusCode::ABORTED, grpc::StatusCode::DATA_LOSS}) {
    EXPECT_THAT(ErrorText(WithDrawnIdempotencyKey(Vault(code, "failed"), "cli-k")),
                ::testing::HasSubstr("--idempotency-key cli-k"))
        << code;
  }
  for (grpc::StatusCode code :
       {grpc::StatusCode::INVALID_ARGUMENT, grpc::StatusCode::FAILED_PRECONDITION,
        grpc::StatusCode::RESOURCE_EXHAUSTED, grpc::StatusCode::PERMISSION_DENIED,
        grpc::StatusCode::UNAUTHENTICATED, grpc::StatusCode::NOT_FOUND,
        grpc::StatusCode::ALREADY_EXISTS, grpc::StatusCode::OUT_OF_RANGE}) {
    const absl::Status refused = Vault(code, "refused");
    EXPECT_EQ(ErrorText(WithDrawnIdempotencyKey(refused, "cli-k")), ErrorText(refused)) << code;
  }
  // No key drawn (the user gave --idempotency-key, or the command sends none), a usage error.
  const absl::Status unavailable = Vault(grpc::StatusCode::UNAVAILABLE, "failed to connect");
  EXPECT_EQ(ErrorText(WithDrawnIdempotencyKey(unavailable, "")), ErrorText(unavailable));
  EXPECT_EQ(ErrorText(WithDrawnIdempotencyKey(UsageError("--table is required"), "cli-k")),
            "error: usage: --table is required\n");
}

TEST(ErrorTextTest, SaysCodeMessageAndHint) {
  EXPECT_EQ(ErrorText(UsageError("no API key")), "error: usage: no API key\n");
  EXPECT_EQ(ErrorText(Vault(grpc::StatusCode::UNAVAILABLE, "failed to connect")),
            "error: UNAVAILABLE: failed to connect\n(is the vault running? set --server or "
            "FAIRVAULT_SERVER; a TLS vault needs --tls-ca)\n");
  EXPECT_EQ(ErrorText(absl::UnavailableError("the server is NOT_SERVING")),
            "error: UNAVAILABLE: the server is NOT_SERVING\n");
}

}  // namespace
}  // namespace fairvault::client::cli
