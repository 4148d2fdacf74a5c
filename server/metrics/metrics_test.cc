// The metrics registry: series and fixed label sets, the text format, the status marks and the
// refusal classification, and the HTTP endpoint serving it.
#include "server/metrics/metrics.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/metrics/endpoint.h"
#include "tests/metrics_scrape.h"

namespace fairvault::server {
namespace {

using ::fairvault::testing::HttpGet;
using ::fairvault::testing::SampleValue;
using ::fairvault::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kCounts[] = "/fairvault.v1.CompanyService/NoisyCounts";

Metrics MakeMetrics() { return Metrics({kCounts, "/fairvault.v1.CompanyService/GetBudget"}); }

TEST(MetricsTest, CountsRpcsPerMethodAndCodeWithLatency) {
  Metrics metrics = MakeMetrics();
  metrics.RecordRpc(kCounts, 0, 0.003);
  metrics.RecordRpc(kCounts, 0, 0.2);
  metrics.RecordRpc(kCounts, 8, 0.001);
  const std::string text = metrics.Text();
  const std::string ok = absl::StrCat("{code=\"OK\",method=\"", kCounts, "\"}");
  const std::string exhausted =
      absl::StrCat("{code=\"RESOURCE_EXHAUSTED\",method=\"", kCounts, "\"}");
  EXPECT_EQ(SampleValue(text, absl::StrCat("fairvault_grpc_requests_total", ok)), 2) << text;
  EXPECT_EQ(SampleValue(text, absl::StrCat("fairvault_grpc_requests_total", exhausted)), 1);
  EXPECT_EQ(SampleValue(text, absl::StrCat("fairvault_grpc_request_duration_seconds_count", ok)),
            2);
  EXPECT_NEAR(SampleValue(text, absl::StrCat("fairvault_grpc_request_duration_seconds_sum", ok)),
              0.203, 1e-9);
  // 0.003 s falls in le=0.005 but not le=0.0025; 0.2 s first in le=0.25.
  const std::string bucket = absl::StrCat(
      "fairvault_grpc_request_duration_seconds_bucket{code=\"OK\",method=\"", kCounts, "\",le=\"");
  EXPECT_THAT(text, HasSubstr(absl::StrCat(bucket, "0.0025\"} 0\n"))) << text;
  EXPECT_EQ(SampleValue(text, absl::StrCat(bucket, "0.005\"}")), 1);
  EXPECT_EQ(SampleValue(text, absl::StrCat(bucket, "0.1\"}")), 1);
  EXPECT_EQ(SampleValue(text, absl::StrCat(bucket, "0.25\"}")), 2);
  EXPECT_EQ(SampleValue(text, absl::StrCat(bucket, "300\"}")), 2);
  EXPECT_EQ(SampleValue(text, absl::StrCat(bucket, "+Inf\"}")), 2);
}

// A method name is whatever the client put on the wire; only the served ones become labels.
TEST(MetricsTest, UnknownMethodsAndCodesCollapseIntoFixedValues) {
  Metrics metrics = MakeMetrics();
  metrics.RecordRpc("/fairvault.v1.CompanyService/subj-7f3a9", 12, 0.001);
  metrics.RecordRpc("/x/y", 99, 0.001);
  const std::string text = metrics.Text();
  EXPECT_THAT(text, Not(HasSubstr("subj-7f3a9")));
  EXPECT_THAT(text, Not(HasSubstr("/x/y")));
  EXPECT_EQ(SampleValue(text,
                        "fairvault_grpc_requests_total{code=\"UNIMPLEMENTED\","
                        "method=\"unknown\"}"),
            1)
      << text;
  EXPECT_EQ(SampleValue(text, "fairvault_grpc_requests_total{code=\"UNKNOWN\",method=\"unknown\"}"),
            1);
}

TEST(MetricsTest, ChargesReplaysAndRefusalsPerKind) {
  Metrics metrics = MakeMetrics();
  const std::string before = metrics.Text();
  // Every known kind's charge and replay series exists from the start, at 0.
  for (const std::string& kind : ChargedRequestKinds()) {
    EXPECT_THAT(before, HasSubstr(absl::StrCat("fairvault_charges_total{kind=\"", kind,
                                               "\",outcome=\"released\"} 0")));
    EXPECT_THAT(before, HasSubstr(absl::StrCat("fairvault_replays_total{kind=\"", kind, "\"} 0")));
  }
  metrics.RecordCharge("NoisyCounts", false);
  metrics.RecordCharge("NoisyCounts", false);
  metrics.RecordCharge("AuditClassifier", true);
  metrics.RecordReplay("NoisyCounts");
  metrics.RecordRefusal("FitFairModel", Refusal::kCapExhausted);
  metrics.RecordRefusal("FitFairModel", Refusal::kCapExhausted);
  metrics.RecordRefusal("NoisyCounts", Refusal::kInvalidArgument);
  // A kind the charge path does not know (a caller's string, say) is "other".
  metrics.RecordCharge("acme-secret-kind", false);
  const std::string text = metrics.Text();
  EXPECT_EQ(SampleValue(text, "fairvault_charges_total{kind=\"NoisyCounts\",outcome=\"released\"}"),
            2);
  EXPECT_EQ(
      SampleValue(text, "fairvault_charges_total{kind=\"AuditClassifier\",outcome=\"failed\"}"), 1);
  EXPECT_EQ(
      SampleValue(text, "fairvault_charges_total{kind=\"AuditClassifier\",outcome=\"released\"}"),
      0);
  EXPECT_EQ(SampleValue(text, "fairvault_replays_total{kind=\"NoisyCounts\"}"), 1);
  EXPECT_EQ(
      SampleValue(text, "fairvault_refusals_total{kind=\"FitFairModel\",reason=\"cap_exhausted\"}"),
      2);
  EXPECT_EQ(SampleValue(
                text, "fairvault_refusals_total{kind=\"NoisyCounts\",reason=\"invalid_argument\"}"),
            1);
  EXPECT_EQ(SampleValue(text, "fairvault_charges_total{kind=\"other\",outcome=\"released\"}"), 1);
  EXPECT_THAT(text, Not(HasSubstr("acme-secret-kind")));
}

TEST(MetricsTest, JobGaugesAndFinishedJobs) {
  Metrics metrics = MakeMetrics();
  metrics.SetJobLoad(3, 1);
  metrics.RecordJobFinished(JobOutcome::kSucceeded);
  metrics.RecordJobFinished(JobOutcome::kCancelled);
  metrics.RecordJobFinished(JobOutcome::kCancelled);
  std::string text = metrics.Text();
  EXPECT_EQ(SampleValue(text, "fairvault_jobs_queued"), 3);
  EXPECT_EQ(SampleValue(text, "fairvault_jobs_running"), 1);
  EXPECT_EQ(SampleValue(text, "fairvault_jobs_finished_total{state=\"succeeded\"}"), 1);
  EXPECT_EQ(SampleValue(text, "fairvault_jobs_finished_total{state=\"failed\"}"), 0);
  EXPECT_EQ(SampleValue(text, "fairvault_jobs_finished_total{state=\"cancelled\"}"), 2);
  metrics.SetJobLoad(0, 0);
  text = metrics.Text();
  EXPECT_EQ(SampleValue(text, "fairvault_jobs_queued"), 0);
  EXPECT_THAT(text, HasSubstr("fairvault_jobs_queued 0"));
}

TEST(MetricsTest, SqliteWalGaugeStartsAtZeroAndShowsTheLastSize) {
  Metrics metrics = MakeMetrics();
  EXPECT_THAT(metrics.Text(), HasSubstr("fairvault_sqlite_wal_bytes 0\n"));
  metrics.SetSqliteWalBytes(int64_t{5} << 30);  // 5 GiB: past what an int holds
  EXPECT_EQ(SampleValue(metrics.Text(), "fairvault_sqlite_wal_bytes"), 5368709120.0);
  metrics.SetSqliteWalBytes(1234);
  EXPECT_EQ(SampleValue(metrics.Text(), "fairvault_sqlite_wal_bytes"), 1234);
}

TEST(MetricsTest, MarksOnlyFailures) {
  EXPECT_FALSE(IsCounted(absl::InvalidArgumentError("x")));
  const absl::Status marked = MarkCounted(absl::ResourceExhaustedError("x"));
  EXPECT_TRUE(IsCounted(marked));
  EXPECT_THAT(marked, StatusIs(absl::StatusCode::kResourceExhausted, "x"));
  EXPECT_TRUE(MarkCounted(absl::OkStatus()).ok());
}

// The wording is storage::AdmitCharge's; names cannot contain a space, so they cannot fake it.
TEST(MetricsTest, ClassifiesThePrivacyFiltersRefusals) {
  EXPECT_EQ(FilterRefusal(absl::PermissionDeniedError(
                "company 'acme' has no budget grant on dataset 'pop'; ask the regulator")),
            Refusal::kNoGrant);
  EXPECT_EQ(FilterRefusal(absl::ResourceExhaustedError(
                "request costs epsilon=1 (delta=0) but the grant on dataset 'dataset-wide-cap' "
                "has epsilon 0.5 left of 5; ask for less or for a larger grant")),
            Refusal::kBudgetExhausted);
  EXPECT_EQ(FilterRefusal(absl::ResourceExhaustedError(
                "request costs epsilon=1 but the dataset-wide cap on 'pop' (all companies "
                "together) does not admit it; ask the regulator")),
            Refusal::kCapExhausted);
  EXPECT_EQ(FilterRefusal(absl::ResourceExhaustedError(
                "the vault is running its limit of 16 training jobs; retry later (nothing was "
                "charged)")),
            Refusal::kJobQueueFull);
  EXPECT_EQ(FilterRefusal(absl::FailedPreconditionError(
                "the dataset-wide cap on 'pop' has delta 0, which admits only pure-epsilon "
                "releases")),
            Refusal::kDeltaRequired);
  EXPECT_EQ(FilterRefusal(absl::FailedPreconditionError(
                "idempotency_key 'k' was already used with different parameters")),
            std::nullopt);
  EXPECT_EQ(FilterRefusal(absl::InternalError("database is locked")), std::nullopt);
  EXPECT_EQ(RefusalFromCode(absl::StatusCode::kInvalidArgument), Refusal::kInvalidArgument);
  EXPECT_EQ(RefusalFromCode(absl::StatusCode::kUnauthenticated), Refusal::kUnauthenticated);
  EXPECT_EQ(RefusalFromCode(absl::StatusCode::kPermissionDenied), Refusal::kPermissionDenied);
  EXPECT_EQ(RefusalFromCode(absl::StatusCode::kNotFound), Refusal::kNotFound);
  EXPECT_EQ(RefusalFromCode(absl::StatusCode::kFailedPrecondition), Refusal::kFailedPrecondition);
  EXPECT_EQ(RefusalFromCode(absl::StatusCode::kInternal), Refusal::kOther);
}

TEST(MetricsEndpointTest, ServesTheRegistryAtSlashMetricsOnly) {
  Metrics metrics = MakeMetrics();
  metrics.RecordCharge("NoisyCounts", false);
  auto endpoint = MetricsEndpoint::Start("127.0.0.1:0", metrics.registry());
  ASSERT_TRUE(endpoint.ok()) << endpoint.status();
  ASSERT_GT((*endpoint)->port(), 0);
  auto got = HttpGet((*endpoint)->port(), "/metrics");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->status, 200);
  EXPECT_EQ(
      SampleValue(got->body, "fairvault_charges_total{kind=\"NoisyCounts\",outcome=\"released\"}"),
      1)
      << got->body;
  metrics.RecordCharge("NoisyCounts", false);
  got = HttpGet((*endpoint)->port(), "/metrics");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(
      SampleValue(got->body, "fairvault_charges_total{kind=\"NoisyCounts\",outcome=\"released\"}"),
      2);
  auto other = HttpGet((*endpoint)->port(), "/");
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(other->status, 404);

  // The same port again cannot be bound.
  auto second =
      MetricsEndpoint::Start(absl::StrCat("127.0.0.1:", (*endpoint)->port()), metrics.registry());
  EXPECT_THAT(second.status(), StatusIs(absl::StatusCode::kUnavailable));
}

TEST(MetricsEndpointTest, RefusesAddressesThatAreNotIpv4AndPort) {
  Metrics metrics = MakeMetrics();
  for (const char* address : {"", "9464", "localhost:9464", "127.0.0.1", "127.0.0.1:",
                              "127.0.0.1:65536", "127.0.0.1:-1", "[::1]:9464", "127.0.0.1:94x"}) {
    EXPECT_THAT(MetricsEndpoint::Start(address, metrics.registry()).status(),
                StatusIs(absl::StatusCode::kInvalidArgument))
        << address;
  }
}

}  // namespace
}  // namespace fairvault::server
