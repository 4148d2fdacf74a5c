// What the vault counts for the operators' metrics: charges (not replays), replays, the
// privacy filter's refusals by reason, and training jobs; and which failures it leaves to the
// gRPC handler (marked or not).
#include <string>

#include "absl/strings/str_cat.h"
#include "server/metrics/metrics.h"
#include "server/app/vault_test_fixture.h"
#include "tests/metrics_scrape.h"

namespace fairvault::server::testing {
namespace {

using ::fairvault::testing::SampleValue;
using ::testing::HasSubstr;
using ::testing::Not;

class VaultMetricsTest : public VaultTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(VaultTest::SetUp());
    // The fixture's data stays in the store; the vault that serves it now counts.
    VaultOptions options;
    options.metrics = &metrics_;
    options.max_pending_jobs = 1;
    vault_ = std::make_unique<Vault>(store_.get(), &clock_, absl::BitGenRef(gen_), options);
  }

  double Sample(const std::string& series) { return SampleValue(metrics_.Text(), series); }
  double Charges(const std::string& kind, const char* outcome = "released") {
    return Sample(
        absl::StrCat("fairvault_charges_total{kind=\"", kind, "\",outcome=\"", outcome, "\"}"));
  }
  double Replays(const std::string& kind) {
    return Sample(absl::StrCat("fairvault_replays_total{kind=\"", kind, "\"}"));
  }
  double Refusals(const std::string& kind, const char* reason) {
    return Sample(
        absl::StrCat("fairvault_refusals_total{kind=\"", kind, "\",reason=\"", reason, "\"}"));
  }

  v1::FitFairModelRequest EmRequest(const std::string& key, double epsilon) {
    v1::FitFairModelRequest req;
    req.set_idempotency_key(key);
    req.set_table_handle(handle_);
    req.set_algorithm(v1::FAIR_MODEL_ALGORITHM_EXPONENTIAL_MECHANISM);
    req.set_label_column("label");
    req.add_attributes("sex");
    req.add_hypothesis_columns("pred");
    req.add_hypothesis_columns("label");
    req.set_em_delta(0.01);
    req.set_epsilon(epsilon);
    return req;
  }

  // Waits (at most 10 s) until the runner has no job queued or running.
  void WaitForIdleRunner() {
    for (int i = 0; i < 5000; ++i) {
      if (Sample("fairvault_jobs_running") == 0 && Sample("fairvault_jobs_queued") == 0) return;
      absl::SleepFor(absl::Milliseconds(2));
    }
    ADD_FAILURE() << "the job runner did not become idle";
  }

  Metrics metrics_{{}};
};

TEST_F(VaultMetricsTest, CountsAChargeOnceAndItsRetryAsAReplay) {
  ASSERT_OK(vault_->NoisyCounts(acme_, CountsRequest("c1")));
  EXPECT_EQ(Charges("NoisyCounts"), 1);
  EXPECT_EQ(Replays("NoisyCounts"), 0);
  ASSERT_OK(vault_->NoisyCounts(acme_, CountsRequest("c1")));
  ASSERT_OK(vault_->NoisyCounts(acme_, CountsRequest("c1")));
  EXPECT_EQ(Charges("NoisyCounts"), 1);
  EXPECT_EQ(Replays("NoisyCounts"), 2);
  ASSERT_OK(vault_->FitEqualizedOdds(acme_, FitRequest("eo1")));
  EXPECT_EQ(Charges("FitEqualizedOddsPostProcessor"), 1);
  EXPECT_EQ(Charges("NoisyCounts"), 1);
  EXPECT_EQ(ChargeRows(), 2);  // the ledger agrees
}

TEST_F(VaultMetricsTest, CountsTheFiltersRefusalsByReasonAndMarksThem) {
  // The grant: acme has spent 1e5 of 1e5 + 1 after one release.
  ASSERT_OK(vault_->NoisyCounts(acme_, CountsRequest("c1")));
  ASSERT_OK(Grant("acme", kHugeEpsilon + 1, 0));
  auto refused = vault_->NoisyCounts(acme_, CountsRequest("c2"));
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kResourceExhausted, "grant"));
  EXPECT_TRUE(IsCounted(refused.status()));
  EXPECT_EQ(Refusals("NoisyCounts", "budget_exhausted"), 1);
  EXPECT_EQ(Refusals("NoisyCounts", "cap_exhausted"), 0);

  // The dataset cap: globex's own grant (100) has room for 2, the cap does not.
  v1::SetDatasetCapRequest cap;
  cap.set_dataset("census");
  cap.set_epsilon(kHugeEpsilon + 1.5);
  cap.set_delta(1e-6);
  ASSERT_OK(vault_->SetDatasetCap(regulator_, cap));
  auto uploaded = Upload(globex_, TableHeaderFor("census"), {Chunk(rows_)});
  ASSERT_OK(uploaded);
  v1::NoisyCountsRequest globex = CountsRequest("g1");
  globex.set_table_handle(uploaded->table_handle());
  globex.set_epsilon(2);
  refused = vault_->NoisyCounts(globex_, globex);
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kResourceExhausted, "dataset-wide cap"));
  EXPECT_TRUE(IsCounted(refused.status()));
  EXPECT_EQ(Refusals("NoisyCounts", "cap_exhausted"), 1);
  EXPECT_EQ(Refusals("NoisyCounts", "budget_exhausted"), 1);

  // Gaussian noise under acme's delta-0 grant.
  v1::NoisyCountsRequest gaussian = CountsRequest("c3");
  gaussian.set_noise(v1::NOISE_KIND_DISCRETE_GAUSSIAN);
  gaussian.set_epsilon(0.5);
  refused = vault_->NoisyCounts(acme_, gaussian);
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kFailedPrecondition, "delta"));
  EXPECT_EQ(Refusals("NoisyCounts", "delta_required"), 1);

  EXPECT_EQ(Charges("NoisyCounts"), 1);
}

// Failures before the charge path's decision are not counted by the vault and not marked: the
// gRPC handler counts them by their code.
TEST_F(VaultMetricsTest, LeavesOtherFailuresUnmarked) {
  v1::NoisyCountsRequest bad = CountsRequest("c1");
  bad.set_epsilon(-1);
  auto refused = vault_->NoisyCounts(acme_, bad);
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_FALSE(IsCounted(refused.status()));
  bad = CountsRequest("c2");
  bad.set_table_handle("tbl_nope");
  refused = vault_->NoisyCounts(acme_, bad);
  EXPECT_FALSE(refused.ok());
  EXPECT_FALSE(IsCounted(refused.status()));
  refused = vault_->NoisyCounts(regulator_, CountsRequest("c3"));
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kPermissionDenied));
  EXPECT_FALSE(IsCounted(refused.status()));
  // A key reused with other parameters is the caller's mistake, not a replay.
  ASSERT_OK(vault_->NoisyCounts(acme_, CountsRequest("c4")));
  v1::NoisyCountsRequest other = CountsRequest("c4");
  other.set_epsilon(kHugeEpsilon / 2);
  refused = vault_->NoisyCounts(acme_, other);
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kFailedPrecondition, "different parameters"));
  EXPECT_FALSE(IsCounted(refused.status()));
  EXPECT_EQ(Replays("NoisyCounts"), 0);
  EXPECT_THAT(metrics_.Text(), Not(HasSubstr("fairvault_refusals_total{")));
}

TEST_F(VaultMetricsTest, CountsJobsByOutcomeAndTheQueueLimit) {
  // Before the workers start, a submitted job waits; with max_pending_jobs = 1 the next one
  // is refused before its charge.
  auto queued = vault_->FitFairModel(acme_, EmRequest("em-queued", kHugeEpsilon));
  ASSERT_OK(queued);
  EXPECT_EQ(Charges("FitFairModel"), 1);
  auto refused = vault_->FitFairModel(acme_, EmRequest("em-full", kHugeEpsilon));
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kResourceExhausted, "limit"));
  EXPECT_TRUE(IsCounted(refused.status()));
  EXPECT_EQ(Refusals("FitFairModel", "job_queue_full"), 1);
  EXPECT_EQ(Charges("FitFairModel"), 1);

  v1::CancelJobRequest cancel;
  cancel.set_job_id(queued->job().id());
  ASSERT_OK(vault_->CancelJob(acme_, cancel));
  ASSERT_OK(vault_->CancelJob(acme_, cancel));  // already cancelled: counted once
  EXPECT_EQ(Sample("fairvault_jobs_finished_total{state=\"cancelled\"}"), 1);

  ASSERT_OK(vault_->StartJobs());
  auto good = vault_->FitFairModel(acme_, EmRequest("em-good", kHugeEpsilon));
  ASSERT_OK(good);
  EXPECT_EQ(WaitForJob(acme_, good->job().id()).state(), v1::JOB_STATE_SUCCEEDED);
  // The store has the outcome before the worker is free (and has counted it).
  WaitForIdleRunner();
  EXPECT_EQ(Sample("fairvault_jobs_finished_total{state=\"succeeded\"}"), 1);
  // The exponential mechanism's released M falls below 1 on skewed data: the job fails
  // (charged).
  auto bad = vault_->FitFairModel(acme_, SkewedEmRequest("em-bad"));
  ASSERT_OK(bad);
  EXPECT_EQ(WaitForJob(acme_, bad->job().id()).state(), v1::JOB_STATE_FAILED);
  WaitForIdleRunner();
  EXPECT_EQ(Sample("fairvault_jobs_finished_total{state=\"succeeded\"}"), 1);
  EXPECT_EQ(Sample("fairvault_jobs_finished_total{state=\"failed\"}"), 1);
  EXPECT_EQ(Sample("fairvault_jobs_finished_total{state=\"cancelled\"}"), 1);
  EXPECT_EQ(Charges("FitFairModel"), 3);
  EXPECT_EQ(Sample("fairvault_jobs_queued"), 0);
  EXPECT_EQ(Sample("fairvault_jobs_running"), 0);
}

}  // namespace
}  // namespace fairvault::server::testing
