// PreviewRelease: the price and accuracy of a spending request, without charging; and the
// replay flag the charge path reports beside a response.
#include <string>

#include "server/app/vault_test_fixture.h"

namespace fairvault::server::testing {
namespace {

class VaultPreviewTest : public VaultTest {
 protected:
  absl::StatusOr<v1::PreviewReleaseResponse> PreviewCounts(const v1::NoisyCountsRequest& req,
                                                           const Caller* as = nullptr) {
    v1::PreviewReleaseRequest preview;
    *preview.mutable_noisy_counts() = req;
    return vault_->PreviewRelease(as ? *as : acme_, preview);
  }

  // Everything a preview could write: ledger rows, access-log rows, jobs, artifacts.
  struct Footprint {
    size_t ledger = 0, access_log = 0, jobs = 0;
    double spent = 0;
    bool operator==(const Footprint& o) const {
      return ledger == o.ledger && access_log == o.access_log && jobs == o.jobs && spent == o.spent;
    }
  };
  Footprint Snapshot() {
    Footprint f;
    f.ledger = Ledger().size();
    auto log = vault_->ListAccessLog(regulator_, v1::ListAccessLogRequest());
    EXPECT_OK(log);
    if (log.ok()) f.access_log = log->entries_size();
    auto jobs = vault_->ListJobs(acme_, v1::ListJobsRequest());
    EXPECT_OK(jobs);
    if (jobs.ok()) f.jobs = jobs->jobs_size();
    f.spent = BudgetOf(acme_).epsilon_spent();
    return f;
  }
};

TEST_F(VaultPreviewTest, CountsPreviewPricesExactlyWhatTheCallThenCharges) {
  v1::NoisyCountsRequest req = CountsRequest("p1");
  req.set_epsilon(0.5);
  const Footprint before = Snapshot();
  auto preview = PreviewCounts(req);
  ASSERT_OK(preview);
  EXPECT_TRUE(Snapshot() == before) << "a preview wrote something";
  EXPECT_TRUE(preview->admitted());
  EXPECT_EQ(preview->replay_of_ledger_seq(), 0);
  EXPECT_EQ(preview->rows(), 30);
  EXPECT_EQ(preview->groups(), 6);  // sex x race
  EXPECT_EQ(preview->cost().epsilon(), 0.5);
  EXPECT_EQ(preview->cost().mechanism(), "discrete_laplace");
  EXPECT_EQ(preview->cost().noise_scale(), 4);  // sensitivity 2 / epsilon 0.5
  ASSERT_EQ(preview->accuracy_size(), 1);
  // t = 4: P(|X| > w) = 2 q^(w+1) / (1 + q) with q = e^(-1/4) first drops to <= 0.05 at w = 12
  // (1.124 q^12 = 0.056, 1.124 q^13 = 0.044).
  EXPECT_EQ(preview->accuracy(0).half_width_95(), 12);
  EXPECT_DOUBLE_EQ(preview->accuracy(0).relative_to_average_group(), 12.0 / 5.0);
  EXPECT_EQ(preview->budget_now().epsilon_spent(), before.spent);
  EXPECT_EQ(preview->budget_after().epsilon_spent(), before.spent + 0.5);

  auto real = vault_->NoisyCounts(acme_, req);
  ASSERT_OK(real);
  EXPECT_EQ(real->charge().cost().SerializeAsString(), preview->cost().SerializeAsString());
  EXPECT_EQ(real->charge().budget_after().SerializeAsString(),
            preview->budget_after().SerializeAsString());
  EXPECT_EQ(real->noise_half_width(), preview->accuracy(0).half_width_95());
  EXPECT_EQ(real->confidence(), 0.95);
  for (const v1::CountCell& cell : real->cells()) {
    EXPECT_EQ(cell.ci_high(), cell.noisy_count() + 12);
    EXPECT_EQ(cell.ci_low(), std::max<int64_t>(0, cell.noisy_count() - 12));
  }

  // The same key again: a replay of that ledger row, charging nothing.
  auto again = PreviewCounts(req);
  ASSERT_OK(again);
  EXPECT_EQ(again->replay_of_ledger_seq(), real->charge().ledger_seq());
  EXPECT_TRUE(again->admitted());
  EXPECT_EQ(again->cost().epsilon(), 0.5);
  EXPECT_EQ(again->budget_after().epsilon_spent(), again->budget_now().epsilon_spent());
}

TEST_F(VaultPreviewTest, CountsWithHugeEpsilonHaveTightIntervalsAroundTheTruth) {
  auto resp = vault_->NoisyCounts(acme_, CountsRequest("tight"));
  ASSERT_OK(resp);
  EXPECT_EQ(resp->noise_half_width(), 0);
  const auto exact = ExactCounts(rows_);
  for (const v1::CountCell& cell : resp->cells()) {
    const int64_t truth = exact.at({cell.values(0), cell.group()});
    EXPECT_EQ(cell.ci_low(), truth);
    EXPECT_EQ(cell.ci_high(), truth);
  }
}

TEST_F(VaultPreviewTest, APreviewBeyondTheBudgetSaysSoAndChargesNothing) {
  ASSERT_OK(vault_->NoisyCounts(acme_, CountsRequest("spent")));  // 1e5 of the 1e6 grant
  v1::NoisyCountsRequest req = CountsRequest("over");
  req.set_epsilon(1e6);
  const Footprint before = Snapshot();
  auto preview = PreviewCounts(req);
  ASSERT_OK(preview);
  EXPECT_FALSE(preview->admitted());
  EXPECT_EQ(preview->refusal_code(), "RESOURCE_EXHAUSTED");
  EXPECT_THAT(preview->refusal(), ::testing::HasSubstr("left"));
  EXPECT_EQ(preview->budget_after().SerializeAsString(), preview->budget_now().SerializeAsString());
  EXPECT_TRUE(Snapshot() == before);
  // The call itself gets the refusal the preview announced.
  EXPECT_THAT(vault_->NoisyCounts(acme_, req),
              StatusIs(absl::StatusCode::kResourceExhausted, preview->refusal()));
}

TEST_F(VaultPreviewTest, InvalidRequestsGetTheRequestsOwnErrors) {
  v1::NoisyCountsRequest req = CountsRequest("bad");
  req.clear_columns();
  req.add_columns("nope");
  EXPECT_THAT(PreviewCounts(req), StatusIs(absl::StatusCode::kInvalidArgument, "columns"));
  EXPECT_THAT(vault_->PreviewRelease(acme_, v1::PreviewReleaseRequest()),
              StatusIs(absl::StatusCode::kInvalidArgument, "request: set the spending request"));
  EXPECT_THAT(PreviewCounts(CountsRequest("reg"), &regulator_),
              StatusIs(absl::StatusCode::kPermissionDenied));
}

TEST_F(VaultPreviewTest, AuditAndFitPreviewsDescribeEveryPartWithoutWriting) {
  v1::PreviewReleaseRequest audit;
  v1::AuditClassifierRequest* a = audit.mutable_audit_classifier();
  a->set_idempotency_key("audit");
  a->set_table_handle(handle_);
  a->set_prediction_column("pred");
  a->set_label_column("label");
  a->add_attributes("sex");
  a->set_epsilon(1);
  const Footprint before = Snapshot();
  auto priced = vault_->PreviewRelease(acme_, audit);
  ASSERT_OK(priced);
  EXPECT_EQ(priced->groups(), 2);
  EXPECT_EQ(priced->rows(), 30);
  EXPECT_EQ(priced->cost().epsilon(), 1);
  ASSERT_GE(priced->accuracy_size(), 1);
  for (const v1::NoiseAccuracy& acc : priced->accuracy()) {
    EXPECT_GT(acc.half_width_95(), 0);
    EXPECT_DOUBLE_EQ(acc.relative_to_average_group(), acc.half_width_95() / 15.0);
  }
  auto charged = vault_->AuditClassifier(acme_, audit.audit_classifier());
  ASSERT_OK(charged);
  EXPECT_EQ(charged->charge().cost().SerializeAsString(), priced->cost().SerializeAsString());

  // A training job: priced, but no job is created.
  v1::PreviewReleaseRequest fit;
  v1::FitFairModelRequest* f = fit.mutable_fit_fair_model();
  f->set_idempotency_key("fit");
  f->set_table_handle(handle_);
  f->set_algorithm(v1::FAIR_MODEL_ALGORITHM_DP_ORACLE_LEARNER);
  f->set_label_column("label");
  f->add_feature_columns("pred");
  f->add_attributes("sex");
  f->set_rounds(5);
  f->set_epsilon(3);
  const Footprint mid = Snapshot();
  auto fit_price = vault_->PreviewRelease(acme_, fit);
  ASSERT_OK(fit_price);
  EXPECT_TRUE(Snapshot() == mid);
  EXPECT_EQ(fit_price->cost().epsilon(), 3);
  EXPECT_GE(fit_price->cost().parts_size(), 2);
  EXPECT_FALSE(fit_price->accuracy().empty());
  (void)before;
}

TEST_F(VaultPreviewTest, DecidePreviewPricesTheLicenceOnceAndStoresNoDecision) {
  v1::FitEqualizedOddsRequest fit = FitRequest("eo-floor");
  fit.set_decision_floor(0.1);
  auto fitted = vault_->FitEqualizedOdds(acme_, fit);
  ASSERT_OK(fitted);
  v1::PreviewReleaseRequest preview;
  v1::DecideRequest* d = preview.mutable_decide();
  d->set_artifact_id(fitted->artifact().id());
  for (int i = 0; i < 5; ++i) {
    d->add_subject_keys(subjects_[i].key);
    d->add_values(i % 2);
  }
  const Footprint before = Snapshot();
  auto priced = vault_->PreviewRelease(acme_, preview);
  ASSERT_OK(priced);
  EXPECT_TRUE(Snapshot() == before) << "a decide preview stored decisions or a log row";
  EXPECT_TRUE(priced->admitted());
  EXPECT_EQ(priced->replay_of_ledger_seq(), 0);
  EXPECT_GT(priced->cost().epsilon(), 0);

  auto decided = vault_->Decide(acme_, preview.decide());
  ASSERT_OK(decided);
  EXPECT_EQ(decided->charge().cost().epsilon(), priced->cost().epsilon());
  // Once the licence is paid, a preview says the call charges nothing more.
  auto after = vault_->PreviewRelease(acme_, preview);
  ASSERT_OK(after);
  EXPECT_EQ(after->replay_of_ledger_seq(), decided->charge().ledger_seq());
}

// The preview is a function of the declared request, the caller's budget and public sizes: on
// neighbouring vaults (one subject's attribute changed) it is the same bytes.
TEST_F(VaultPreviewTest, PreviewsAreIdenticalOnNeighbouringVaults) {
  MakeNeighbourDataset("pop", "F", 41);
  MakeNeighbourDataset("pop-neighbour", "M", 41);
  std::string bytes[2];
  const char* names[2] = {"pop", "pop-neighbour"};
  for (int v = 0; v < 2; ++v) {
    v1::TableHeader header = TableHeaderFor(names[v]);
    std::vector<Row> rows;
    for (int i = 0; i < 41; ++i) {
      rows.push_back({absl::StrCat("p", i), static_cast<double>(i % 2),
                      static_cast<double>(i % 3 == 0), i % 5 == 0 ? "y" : "x"});
    }
    auto table = Upload(acme_, header, {Chunk(rows)});
    ASSERT_OK(table);
    v1::PreviewReleaseRequest preview;
    v1::FitEqualizedOddsRequest* eo = preview.mutable_fit_equalized_odds();
    eo->set_idempotency_key("same-key");
    eo->set_table_handle(table->table_handle());
    eo->set_prediction_column("pred");
    eo->set_label_column("label");
    eo->set_epsilon(0.7);
    eo->set_gamma(0.05);
    auto priced = vault_->PreviewRelease(acme_, preview);
    ASSERT_OK(priced);
    priced->mutable_budget_now()->clear_dataset();
    priced->mutable_budget_after()->clear_dataset();
    bytes[v] = priced->SerializeAsString();
  }
  EXPECT_EQ(bytes[0], bytes[1]);
}

TEST_F(VaultPreviewTest, TheChargePathReportsReplaysBesideTheResponse) {
  CallOutputs first_out;
  Caller with = acme_;
  with.outputs = &first_out;
  v1::NoisyCountsRequest req = CountsRequest("flag");
  auto first = vault_->NoisyCounts(with, req);
  ASSERT_OK(first);
  EXPECT_FALSE(first_out.replayed_ledger_seq.has_value());
  CallOutputs again_out;
  with.outputs = &again_out;
  auto again = vault_->NoisyCounts(with, req);
  ASSERT_OK(again);
  ASSERT_TRUE(again_out.replayed_ledger_seq.has_value());
  EXPECT_EQ(*again_out.replayed_ledger_seq, first->charge().ledger_seq());
  EXPECT_EQ(again->SerializeAsString(), first->SerializeAsString());
}

}  // namespace
}  // namespace fairvault::server::testing
