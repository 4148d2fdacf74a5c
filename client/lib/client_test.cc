// Tests of the client against in-process fake services: metadata, chunking of the two
// uploads, status conversion, and validation before anything is sent.
#include "client/lib/client.h"

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"

namespace fairvault::client {
namespace {

using ::fairvault::testing::StatusIs;
using ::testing::ElementsAre;

std::string Authorization(const grpc::ServerContext* context) {
  auto it = context->client_metadata().find("authorization");
  if (it == context->client_metadata().end()) return "";
  return std::string(it->second.data(), it->second.size());
}

class FakeRegulator final : public v1::RegulatorService::Service {
 public:
  grpc::Status ImportAttributes(grpc::ServerContext* context,
                                grpc::ServerReader<v1::ImportAttributesRequest>* reader,
                                v1::ImportAttributesResponse* response) override {
    std::lock_guard<std::mutex> lock(mu);
    authorization = Authorization(context);
    v1::ImportAttributesRequest message;
    int64_t rows = 0;
    while (reader->Read(&message)) {
      rows += message.rows().subject_keys_size();
      messages.push_back(message);
    }
    response->set_rows_imported(rows_reported >= 0 ? rows_reported : rows);
    return grpc::Status::OK;
  }
  grpc::Status GrantBudget(grpc::ServerContext* context, const v1::GrantBudgetRequest* request,
                           v1::GrantBudgetResponse* response) override {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED, "only the regulator may grant");
  }
  std::mutex mu;
  std::string authorization;
  std::vector<v1::ImportAttributesRequest> messages;
  int64_t rows_reported = -1;  // >= 0: report this row count instead of the true one
};

class FakeCompany final : public v1::CompanyService::Service {
 public:
  grpc::Status UploadTable(grpc::ServerContext* context,
                           grpc::ServerReader<v1::UploadTableRequest>* reader,
                           v1::UploadTableResponse* response) override {
    std::lock_guard<std::mutex> lock(mu);
    ++upload_calls;
    v1::UploadTableRequest message;
    if (reject_upload) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "column 'x' is not allowed");
    }
    int64_t rows = 0;
    while (reader->Read(&message)) {
      rows += message.chunk().subject_keys_size();
      messages.push_back(message);
    }
    response->set_table_handle("tbl_1");
    response->set_row_count(rows);
    return grpc::Status::OK;
  }
  grpc::Status NoisyCounts(grpc::ServerContext* context, const v1::NoisyCountsRequest* request,
                           v1::NoisyCountsResponse* response) override {
    authorization = Authorization(context);
    // A table handle naming a status text: how newer gRPC reports its size limits.
    if (absl::StartsWith(request->table_handle(), "say:")) {
      return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, request->table_handle().substr(4));
    }
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        "epsilon 2 exceeds the remaining budget 1.5");
  }
  // A replay when the idempotency key is "replayed": the trailing metadata names seq 42.
  grpc::Status AuditClassifier(grpc::ServerContext* context,
                               const v1::AuditClassifierRequest* request,
                               v1::AuditClassifierResponse* response) override {
    if (request->idempotency_key() == "replayed") {
      context->AddTrailingMetadata(kReplayedLedgerSeqMetadata, "42");
    }
    response->mutable_charge()->set_ledger_seq(42);
    return grpc::Status::OK;
  }
  // A stored failure replayed: an error status with the replay metadata.
  grpc::Status FitEqualizedOddsPostProcessor(grpc::ServerContext* context,
                                             const v1::FitEqualizedOddsRequest* request,
                                             v1::FitEqualizedOddsResponse* response) override {
    context->AddTrailingMetadata(kReplayedLedgerSeqMetadata, "7");
    return grpc::Status(grpc::StatusCode::INTERNAL, "glpk: the LP failed (charged)");
  }
  // Doubles each value; the n-th call (0-based) reports bound 0.1 * n and access-log seq
  // 100 + n, and fails when n == fail_decide_call.
  grpc::Status Decide(grpc::ServerContext* context, const v1::DecideRequest* request,
                      v1::DecideResponse* response) override {
    std::lock_guard<std::mutex> lock(mu);
    const int n = static_cast<int>(decide_requests.size());
    decide_requests.push_back(*request);
    if (n == fail_decide_call) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "subject key 'k9' is not in the vault");
    }
    for (double v : request->values()) response->add_outputs(2 * v);
    response->set_decision_log_ratio_bound(0.1 * n);
    response->set_access_log_seq(100 + n);
    return grpc::Status::OK;
  }
  // Echoes the job id with the caller's key, so a test can tell which service answered.
  grpc::Status GetJob(grpc::ServerContext* context, const v1::GetJobRequest* request,
                      v1::GetJobResponse* response) override {
    response->mutable_job()->set_id(request->job_id());
    response->mutable_job()->set_state(v1::JOB_STATE_RUNNING);
    response->mutable_job()->set_company(Authorization(context));
    return grpc::Status::OK;
  }
  grpc::Status CancelJob(grpc::ServerContext* context, const v1::CancelJobRequest* request,
                         v1::CancelJobResponse* response) override {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "job 'job_1' already SUCCEEDED; nothing to cancel");
  }
  std::mutex mu;
  int upload_calls = 0;
  int fail_decide_call = -1;
  std::vector<v1::DecideRequest> decide_requests;
  bool reject_upload = false;
  std::string authorization;
  std::vector<v1::UploadTableRequest> messages;
};

class FakeAuditor final : public v1::AuditorService::Service {
 public:
  grpc::Status ListJobs(grpc::ServerContext* context, const v1::ListJobsRequest* request,
                        v1::ListJobsResponse* response) override {
    v1::Job* job = response->add_jobs();
    job->set_id("job_audited");
    job->set_company(request->company());
    job->set_dataset(request->dataset());
    return grpc::Status::OK;
  }
};

class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    builder.RegisterService(&regulator_);
    builder.RegisterService(&company_);
    builder.RegisterService(&auditor_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ClientOptions options;
    options.api_key = "fv_test_key";
    options.deadline_seconds = 30;
    absl::StatusOr<std::unique_ptr<Client>> client =
        Client::CreateWithChannel(server_->InProcessChannel(grpc::ChannelArguments()), options);
    ASSERT_OK(client);
    client_ = *std::move(client);
  }
  void TearDown() override { server_->Shutdown(); }

  FakeRegulator regulator_;
  FakeCompany company_;
  FakeAuditor auditor_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<Client> client_;
};

TEST_F(ClientTest, ImportSendsHeaderThenChunksWithBearerKey) {
  v1::ImportHeader header;
  header.set_dataset("adult");
  header.set_batch_id("b1");
  header.add_attributes("sex");
  header.add_attributes("race");
  const std::vector<std::string> keys = {"k0", "k1", "k2", "k3", "k4"};
  const std::vector<std::string> categories = {"F", "W", "M", "B", "F", "A", "M", "W", "F", "B"};
  absl::StatusOr<v1::ImportAttributesResponse> response =
      client_->ImportAttributes(header, keys, categories, /*chunk_rows=*/2);
  ASSERT_OK(response);
  EXPECT_EQ(response->rows_imported(), 5);
  EXPECT_EQ(regulator_.authorization, "Bearer fv_test_key");
  ASSERT_EQ(regulator_.messages.size(), 5u);
  EXPECT_TRUE(regulator_.messages[0].has_header());
  EXPECT_EQ(regulator_.messages[0].header().dataset(), "adult");
  EXPECT_THAT(regulator_.messages[1].rows().subject_keys(), ElementsAre("k0", "k1"));
  EXPECT_THAT(regulator_.messages[1].rows().categories(), ElementsAre("F", "W", "M", "B"));
  EXPECT_THAT(regulator_.messages[2].rows().subject_keys(), ElementsAre("k2", "k3"));
  EXPECT_THAT(regulator_.messages[2].rows().categories(), ElementsAre("F", "A", "M", "W"));
  EXPECT_THAT(regulator_.messages[3].rows().subject_keys(), ElementsAre("k4"));
  EXPECT_THAT(regulator_.messages[3].rows().categories(), ElementsAre("F", "B"));
  // The stream ends with what was sent, so the server can tell a whole stream from a cut one.
  ASSERT_TRUE(regulator_.messages[4].has_end());
  EXPECT_EQ(regulator_.messages[4].end().chunks(), 3);
  EXPECT_EQ(regulator_.messages[4].end().rows(), 5);
}

TEST_F(ClientTest, ImportFailsWhenTheServerReportsOtherRowCount) {
  regulator_.rows_reported = 3;
  v1::ImportHeader header;
  header.set_batch_id("b1");
  header.add_attributes("sex");
  EXPECT_THAT(client_->ImportAttributes(header, {"k0", "k1", "k2", "k3"}, {"F", "M", "F", "M"}),
              StatusIs(absl::StatusCode::kDataLoss, "reports 3 rows stored but the client sent 4"));
}

TEST_F(ClientTest, ProducerErrorCancelsTheStreamAndKeepsTheError) {
  v1::ImportHeader header;
  header.add_attributes("sex");
  int calls = 0;
  absl::StatusOr<v1::ImportAttributesResponse> response =
      client_->ImportAttributesStream(header, [&](v1::SubjectRows* rows) -> absl::StatusOr<bool> {
        if (++calls == 3) return absl::InvalidArgumentError("f.csv:7: not UTF-8");
        rows->add_subject_keys(absl::StrCat("k", calls));
        rows->add_categories("F");
        return true;
      });
  EXPECT_THAT(response, StatusIs(absl::StatusCode::kInvalidArgument, "f.csv:7: not UTF-8"));
  // No end message was sent: the server cannot mistake the cut stream for a whole one.
  for (const auto& m : regulator_.messages) EXPECT_FALSE(m.has_end());
}

TEST_F(ClientTest, ImportRejectsSizeMismatchBeforeSending) {
  v1::ImportHeader header;
  header.add_attributes("sex");
  EXPECT_THAT(client_->ImportAttributes(header, {"k0", "k1"}, {"F"}),
              StatusIs(absl::StatusCode::kInvalidArgument, "got 1"));
  EXPECT_THAT(client_->ImportAttributes(header, {"k0"}, {"F"}, 0),
              StatusIs(absl::StatusCode::kInvalidArgument, "chunk_rows"));
  EXPECT_TRUE(regulator_.messages.empty());
}

TEST_F(ClientTest, UploadSlicesEveryColumnPerChunk) {
  v1::TableHeader header;
  header.set_dataset("adult");
  v1::ColumnSpec* pred = header.add_columns();
  pred->set_name("prediction");
  pred->set_type(v1::COLUMN_TYPE_NUMERIC);
  v1::ColumnSpec* job = header.add_columns();
  job->set_name("job");
  job->set_type(v1::COLUMN_TYPE_CATEGORICAL);
  std::vector<v1::ColumnValues> columns(2);
  for (double v : {1.0, 0.0, 1.0}) columns[0].add_numeric(v);
  for (const char* v : {"a", "b", "c"}) columns[1].add_categorical(v);
  absl::StatusOr<v1::UploadTableResponse> response =
      client_->UploadTable(header, {"k0", "k1", "k2"}, columns, /*chunk_rows=*/2);
  ASSERT_OK(response);
  EXPECT_EQ(response->table_handle(), "tbl_1");
  ASSERT_EQ(company_.messages.size(), 4u);
  EXPECT_EQ(company_.messages[3].end().rows(), 3);
  EXPECT_EQ(company_.messages[0].header().columns_size(), 2);
  const v1::TableChunk& first = company_.messages[1].chunk();
  EXPECT_THAT(first.subject_keys(), ElementsAre("k0", "k1"));
  ASSERT_EQ(first.columns_size(), 2);
  EXPECT_THAT(first.columns(0).numeric(), ElementsAre(1.0, 0.0));
  EXPECT_TRUE(first.columns(0).categorical().empty());
  EXPECT_THAT(first.columns(1).categorical(), ElementsAre("a", "b"));
  const v1::TableChunk& second = company_.messages[2].chunk();
  EXPECT_THAT(second.subject_keys(), ElementsAre("k2"));
  EXPECT_THAT(second.columns(0).numeric(), ElementsAre(1.0));
  EXPECT_THAT(second.columns(1).categorical(), ElementsAre("c"));
}

TEST_F(ClientTest, UploadRejectsWrongColumnKindBeforeSending) {
  v1::TableHeader header;
  v1::ColumnSpec* pred = header.add_columns();
  pred->set_name("prediction");
  pred->set_type(v1::COLUMN_TYPE_NUMERIC);
  std::vector<v1::ColumnValues> columns(1);
  columns[0].add_categorical("1");
  EXPECT_THAT(client_->UploadTable(header, {"k0"}, columns),
              StatusIs(absl::StatusCode::kInvalidArgument, "column 'prediction' (numeric)"));
  EXPECT_EQ(company_.upload_calls, 0);
}

TEST_F(ClientTest, ServerErrorDuringUploadKeepsCodeAndMessage) {
  company_.reject_upload = true;
  v1::TableHeader header;
  v1::ColumnSpec* pred = header.add_columns();
  pred->set_name("x");
  pred->set_type(v1::COLUMN_TYPE_NUMERIC);
  std::vector<v1::ColumnValues> columns(1);
  std::vector<std::string> keys;
  for (int i = 0; i < 1000; ++i) {
    keys.push_back("key" + std::to_string(i));
    columns[0].add_numeric(i);
  }
  EXPECT_THAT(client_->UploadTable(header, keys, columns, /*chunk_rows=*/10),
              StatusIs(absl::StatusCode::kInvalidArgument, "column 'x' is not allowed"));
}

TEST_F(ClientTest, UnaryErrorsKeepCodeAndMessage) {
  EXPECT_THAT(
      client_->NoisyCounts(v1::NoisyCountsRequest()),
      StatusIs(absl::StatusCode::kResourceExhausted, "epsilon 2 exceeds the remaining budget 1.5"));
  EXPECT_EQ(company_.authorization, "Bearer fv_test_key");
  EXPECT_THAT(client_->GrantBudget(v1::GrantBudgetRequest()),
              StatusIs(absl::StatusCode::kPermissionDenied, "only the regulator may grant"));
  // Not implemented by the fake: gRPC's own UNIMPLEMENTED passes through.
  EXPECT_THAT(client_->AuditorVerifyLedger(), StatusIs(absl::StatusCode::kUnimplemented));
}

TEST_F(ClientTest, DecideInChunksSplitsRowsAndConcatenatesOutputs) {
  std::vector<std::string> keys;
  std::vector<double> values;
  for (int i = 0; i < 7; ++i) {
    keys.push_back("k" + std::to_string(i));
    values.push_back(i);
  }
  absl::StatusOr<DecideResult> result =
      client_->DecideInChunks("art_1", keys, values, /*chunk_rows=*/3);
  ASSERT_OK(result);
  EXPECT_THAT(result->outputs, ElementsAre(0, 2, 4, 6, 8, 10, 12));
  EXPECT_DOUBLE_EQ(result->decision_log_ratio_bound, 0.2);  // the largest of 0, 0.1, 0.2
  EXPECT_THAT(result->access_log_seqs, ElementsAre(100, 101, 102));
  ASSERT_EQ(company_.decide_requests.size(), 3u);
  EXPECT_EQ(company_.decide_requests[0].artifact_id(), "art_1");
  EXPECT_THAT(company_.decide_requests[0].subject_keys(), ElementsAre("k0", "k1", "k2"));
  EXPECT_THAT(company_.decide_requests[1].values(), ElementsAre(3, 4, 5));
  EXPECT_THAT(company_.decide_requests[2].subject_keys(), ElementsAre("k6"));
  EXPECT_THAT(company_.decide_requests[2].values(), ElementsAre(6));
}

TEST_F(ClientTest, DecideInChunksUsesOneCallUpToTheDefaultChunk) {
  ASSERT_OK(client_->DecideInChunks("art_1", {"a", "b"}, {1, 0}));
  EXPECT_EQ(company_.decide_requests.size(), 1u);
}

TEST_F(ClientTest, DecideInChunksReportsRowsDecidedBeforeALaterFailure) {
  company_.fail_decide_call = 1;
  EXPECT_THAT(client_->DecideInChunks("art_1", {"k0", "k1", "k2", "k3"}, {1, 1, 0, 0}, 2),
              StatusIs(absl::StatusCode::kNotFound,
                       "rows 2..3: subject key 'k9' is not in the vault (rows 0..1 were already "
                       "decided in 1 call(s), access-log seqs 100..100)"));
}

TEST_F(ClientTest, DecideInChunksRejectsMismatchBeforeSending) {
  EXPECT_THAT(client_->DecideInChunks("art_1", {"k0", "k1"}, {1}),
              StatusIs(absl::StatusCode::kInvalidArgument, "2 keys and 1 values"));
  EXPECT_THAT(client_->DecideInChunks("art_1", {}, {}),
              StatusIs(absl::StatusCode::kInvalidArgument, "at least one row"));
  EXPECT_THAT(client_->DecideInChunks("art_1", {"k0"}, {1}, 0),
              StatusIs(absl::StatusCode::kInvalidArgument, "chunk_rows"));
  EXPECT_TRUE(company_.decide_requests.empty());
}

TEST_F(ClientTest, JobCallsGoToTheirServiceWithTheKey) {
  v1::GetJobRequest get;
  get.set_job_id("job_1");
  absl::StatusOr<v1::GetJobResponse> job = client_->GetJob(get);
  ASSERT_OK(job);
  EXPECT_EQ(job->job().id(), "job_1");
  EXPECT_EQ(job->job().state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(job->job().company(), "Bearer fv_test_key");
  v1::CancelJobRequest cancel;
  cancel.set_job_id("job_1");
  EXPECT_THAT(client_->CancelJob(cancel),
              StatusIs(absl::StatusCode::kFailedPrecondition, "already SUCCEEDED"));
  // The auditor's ListJobs is the auditor service's; the company's is not implemented here.
  v1::ListJobsRequest list;
  list.set_company("acme");
  list.set_dataset("adult");
  absl::StatusOr<v1::ListJobsResponse> jobs = client_->AuditorListJobs(list);
  ASSERT_OK(jobs);
  ASSERT_EQ(jobs->jobs_size(), 1);
  EXPECT_EQ(jobs->jobs(0).id(), "job_audited");
  EXPECT_EQ(jobs->jobs(0).company(), "acme");
  EXPECT_EQ(jobs->jobs(0).dataset(), "adult");
  EXPECT_THAT(client_->ListJobs(), StatusIs(absl::StatusCode::kUnimplemented));
  EXPECT_THAT(client_->AuditorGetJob(get), StatusIs(absl::StatusCode::kUnimplemented));
  EXPECT_THAT(client_->BestResponse(v1::BestResponseRequest()),
              StatusIs(absl::StatusCode::kUnimplemented));
  EXPECT_THAT(client_->FitFairModel(v1::FitFairModelRequest()),
              StatusIs(absl::StatusCode::kUnimplemented));
}

TEST_F(ClientTest, ReplayedLedgerSeqComesFromTrailingMetadata) {
  v1::AuditClassifierRequest req;
  req.set_idempotency_key("fresh");
  CallInfo info;
  info.replayed_ledger_seq = -1;  // overwritten by every call
  ASSERT_OK(client_->AuditClassifier(req, &info));
  EXPECT_EQ(info.replayed_ledger_seq, 0);
  req.set_idempotency_key("replayed");
  ASSERT_OK(client_->AuditClassifier(req, &info));
  EXPECT_EQ(info.replayed_ledger_seq, 42);
  ASSERT_OK(client_->AuditClassifier(req));  // info is optional

  // A replayed stored failure: the status says so too, and stays the vault's.
  absl::StatusOr<v1::FitEqualizedOddsResponse> failed =
      client_->FitEqualizedOddsPostProcessor(v1::FitEqualizedOddsRequest(), &info);
  EXPECT_THAT(failed, StatusIs(absl::StatusCode::kInternal, "glpk"));
  EXPECT_EQ(info.replayed_ledger_seq, 7);
  EXPECT_EQ(ReplayedLedgerSeq(failed.status()), 7);
  EXPECT_TRUE(IsFromVault(failed.status()));
  EXPECT_EQ(ReplayedLedgerSeq(WithMessage(failed.status(), "other words")), 7);
  // A fresh failure carries no replay.
  absl::StatusOr<v1::NoisyCountsResponse> refused =
      client_->NoisyCounts(v1::NoisyCountsRequest(), &info);
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_EQ(info.replayed_ledger_seq, 0);
  EXPECT_EQ(ReplayedLedgerSeq(refused.status()), 0);
}

TEST_F(ClientTest, OnlyRpcStatusesAreFromTheVault) {
  EXPECT_TRUE(IsFromVault(client_->CancelJob(v1::CancelJobRequest()).status()));
  // Refused by the library before anything is sent.
  absl::StatusOr<DecideResult> local = client_->DecideInChunks("art_1", {"k0"}, {});
  EXPECT_THAT(local, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_FALSE(IsFromVault(local.status()));
  EXPECT_FALSE(IsFromVault(absl::NotFoundError("cannot open 'x.csv'")));
}

TEST(FromGrpcStatusTest, MapsEveryCodeOneToOne) {
  EXPECT_OK(FromGrpcStatus(grpc::Status::OK));
  for (int code = 1; code <= 16; ++code) {
    absl::Status s = FromGrpcStatus(grpc::Status(static_cast<grpc::StatusCode>(code), "m"));
    EXPECT_EQ(static_cast<int>(s.code()), code);
    EXPECT_EQ(s.message(), "m");
  }
  EXPECT_EQ(FromGrpcStatus(grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "x")).code(),
            absl::StatusCode::kUnauthenticated);
}

// gRPC's own size limit on a message is RESOURCE_EXHAUSTED, like a budget refusal. The client's
// own request refused before it left: nothing sent, fewer rows per message. An answer too large
// for the client's limit, after the vault ran the call: UNKNOWN, perhaps charged.
TEST_F(ClientTest, AMessageOverGrpcsLimitIsNoBudgetRefusal) {
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(64);
  ClientOptions options;
  options.api_key = "fv_test_key";
  auto small = Client::CreateWithChannel(server_->InProcessChannel(args), options);
  ASSERT_OK(small);
  v1::NoisyCountsRequest req;
  req.set_table_handle(std::string(200, 't'));
  absl::StatusOr<v1::NoisyCountsResponse> sent = (*small)->NoisyCounts(req);
  EXPECT_THAT(sent, StatusIs(absl::StatusCode::kInvalidArgument, "Sent message larger than max"));
  EXPECT_THAT(sent.status().message(), ::testing::HasSubstr("nothing was charged"));
  EXPECT_FALSE(IsFromVault(sent.status()));

  // The fake vault answers a replayed AuditClassifier with a response; a receive limit below
  // its size fails the call after the vault ran it.
  grpc::ChannelArguments narrow;
  narrow.SetMaxReceiveMessageSize(1);
  auto receiving = Client::CreateWithChannel(server_->InProcessChannel(narrow), options);
  ASSERT_OK(receiving);
  v1::AuditClassifierRequest audit;
  audit.set_idempotency_key("replayed");
  absl::StatusOr<v1::AuditClassifierResponse> answer = (*receiving)->AuditClassifier(audit);
  EXPECT_THAT(answer, StatusIs(absl::StatusCode::kUnknown, "Received message larger than max"));
  EXPECT_THAT(answer.status().message(), ::testing::HasSubstr("may have charged"));
  EXPECT_EQ(SentIdempotencyKey(answer.status()), "replayed");

  // Newer gRPC names the side: the client's send and the server's receive refused the request
  // itself (not charged), whatever its size; the client's receive came after the vault ran it.
  for (const char* refused : {"CLIENT: Sent message larger than max (9 vs. 8)",
                              "SERVER: Received message larger than max (9 vs. 8)"}) {
    v1::NoisyCountsRequest named;
    named.set_table_handle(absl::StrCat("say:", refused));
    EXPECT_THAT(client_->NoisyCounts(named),
                StatusIs(absl::StatusCode::kInvalidArgument, "nothing was charged"))
        << refused;
  }
  for (const char* after : {"CLIENT: Received message larger than max (9 vs. 8)",
                            "SERVER: Sent message larger than max (9 vs. 8)",
                            "Sent message larger than max (9 vs. 8)"}) {
    v1::NoisyCountsRequest named;
    named.set_table_handle(absl::StrCat("say:", after));
    named.set_idempotency_key("k");
    absl::StatusOr<v1::NoisyCountsResponse> answer = client_->NoisyCounts(named);
    EXPECT_THAT(answer, StatusIs(absl::StatusCode::kUnknown, "may have charged")) << after;
    EXPECT_EQ(SentIdempotencyKey(answer.status()), "k");
  }
  // A budget refusal stays one.
  EXPECT_THAT(FromGrpcStatus(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                          "request costs epsilon=2")),
              StatusIs(absl::StatusCode::kResourceExhausted));
}

TEST(ClientOptionsTest, ValidatesDeadlineMessageSizeAndKey) {
  ClientOptions options;
  EXPECT_OK(options.Validate());
  options.deadline_seconds = 0;
  EXPECT_THAT(options.Validate(), StatusIs(absl::StatusCode::kInvalidArgument, "deadline"));
  options = ClientOptions();
  options.max_message_bytes = 0;
  EXPECT_THAT(options.Validate(), StatusIs(absl::StatusCode::kInvalidArgument, "max_message"));
  options = ClientOptions();
  options.api_key = "fv_abc\n";
  EXPECT_THAT(options.Validate(), StatusIs(absl::StatusCode::kInvalidArgument, "api_key"));
  EXPECT_THAT(Client::Create(options), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace fairvault::client
