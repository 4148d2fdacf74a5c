// Tests of the issue-3 use-cases on a real SQLite store: the statistical-parity
// post-processor, the private audits, and the decision path with its access log. Bad inputs
// are refused with the field named and nothing charged.
#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "server/app/vault_test_fixture.h"

namespace fairvault::server::testing {
namespace {

using ::testing::HasSubstr;

class VaultPostprocessTest : public VaultTest {
 protected:
  void SetUp() override {
    VaultTest::SetUp();
    if (HasFatalFailure()) return;
    // A score table: subject i has score 0.1 + 0.8 * (i % 10) / 9, plus two scores outside
    // [0, 1] that must be clipped and counted.
    v1::TableHeader header;
    header.set_dataset("census");
    v1::ColumnSpec* c = header.add_columns();
    c->set_name("score");
    c->set_type(v1::COLUMN_TYPE_NUMERIC);
    v1::TableChunk chunk;
    v1::ColumnValues* values = chunk.add_columns();
    for (size_t i = 0; i < subjects_.size(); ++i) {
      chunk.add_subject_keys(subjects_[i].key);
      double s = 0.1 + 0.8 * static_cast<double>(i % 10) / 9;
      if (i == 3) s = -0.5;
      if (i == 4) s = 1.7;
      values->add_numeric(s);
      scores_.push_back(s);
    }
    auto uploaded = Upload(acme_, header, {chunk});
    ASSERT_OK(uploaded);
    score_handle_ = uploaded->table_handle();
  }

  v1::FitStatisticalParityRequest SpRequest(const std::string& key) {
    v1::FitStatisticalParityRequest req;
    req.set_idempotency_key(key);
    req.set_table_handle(score_handle_);
    req.set_score_column("score");
    req.add_attributes("sex");
    req.set_lo(0);
    req.set_hi(1);
    req.set_bins(5);
    req.set_epsilon(kHugeEpsilon);
    return req;
  }

  v1::Artifact FitEo(double floor) {
    auto req = FitRequest(absl::StrCat("eo-for-decide-", floor));
    req.set_decision_floor(floor);
    auto resp = vault_->FitEqualizedOdds(acme_, req);
    EXPECT_OK(resp);
    return resp.ok() ? resp->artifact() : v1::Artifact();
  }

  v1::DecideRequest DecideAll(const std::string& artifact_id, bool eo) {
    v1::DecideRequest req;
    req.set_artifact_id(artifact_id);
    for (size_t i = 0; i < subjects_.size(); ++i) {
      req.add_subject_keys(subjects_[i].key);
      req.add_values(eo ? rows_[i].pred : scores_[i]);
    }
    return req;
  }

  std::string score_handle_;
  std::vector<double> scores_;
};

// ---- FitStatisticalParityPostProcessor -----------------------------------------------------

TEST_F(VaultPostprocessTest, StatisticalParityFitReturnsAValidArtifactAndCountsClipping) {
  auto resp = vault_->FitStatisticalParity(acme_, SpRequest("sp-1"));
  ASSERT_OK(resp);
  EXPECT_EQ(resp->scores_clipped(), 2);
  const auto& sp = resp->artifact().statistical_parity();
  EXPECT_EQ(sp.scores_clipped(), 2);
  ASSERT_EQ(sp.groups_size(), 2);
  EXPECT_EQ(sp.solver(), v1::SP_SOLVER_QUANTILE);  // auto picks the quantile solver at alpha 0
  EXPECT_EQ(sp.n(), 30);
  for (const auto& g : sp.groups()) {
    ASSERT_EQ(g.transport_size(), 25);
    for (int j = 0; j < 5; ++j) {
      double row = 0;
      for (int l = 0; l < 5; ++l) row += g.transport(j * 5 + l);
      EXPECT_NEAR(row, 1, 1e-9);
    }
    // alpha = 0: every group is sent onto the barycenter.
    for (int l = 0; l < 5; ++l) EXPECT_NEAR(g.target(l), sp.barycenter(l), 1e-9);
  }
  EXPECT_THAT(sp.warnings(), ::testing::Contains(HasSubstr("alpha = 0")));
  EXPECT_EQ(BudgetOf(acme_).releases(), 1);

  v1::GetArtifactRequest get;
  get.set_artifact_id(resp->artifact().id());
  auto again = vault_->GetArtifact(acme_, get);
  ASSERT_OK(again);
  EXPECT_EQ(again->artifact().SerializeAsString(), resp->artifact().SerializeAsString());
}

TEST_F(VaultPostprocessTest, StatisticalParitySolversAgreeOnTheObjective) {
  auto lp_req = SpRequest("sp-lp");
  lp_req.set_solver(v1::SP_SOLVER_LINEAR_PROGRAM);
  auto lp = vault_->FitStatisticalParity(acme_, lp_req);
  ASSERT_OK(lp);
  auto q_req = SpRequest("sp-q");
  q_req.set_solver(v1::SP_SOLVER_QUANTILE);
  auto q = vault_->FitStatisticalParity(acme_, q_req);
  ASSERT_OK(q);
  EXPECT_EQ(lp->artifact().statistical_parity().solver(), v1::SP_SOLVER_LINEAR_PROGRAM);
  // Huge epsilon: both fit the same (noise-free) histogram.
  EXPECT_NEAR(lp->artifact().statistical_parity().objective(),
              q->artifact().statistical_parity().objective(), 1e-6);
}

// The transport is solved after the charge commits. When its response cannot be stored (a
// failed write, or a process stopped in between), the charge and the noisy histogram stay
// stored, and the retry finishes that same histogram: no new noise, no second charge.
TEST_F(VaultPostprocessTest, StatisticalParityRetryFinishesTheChargedHistogram) {
  ASSERT_NO_FATAL_FAILURE(FailFinishes());
  auto req = SpRequest("sp-finish");
  req.set_epsilon(1);  // noise of scale 2 on 30 subjects: a fresh draw would show
  req.set_solver(v1::SP_SOLVER_LINEAR_PROGRAM);
  req.set_alpha(0.1);
  auto failed = vault_->FitStatisticalParity(acme_, req);
  ASSERT_FALSE(failed.ok());
  EXPECT_THAT(std::string(failed.status().message()), HasSubstr("the disk is gone"));
  EXPECT_EQ(BudgetOf(acme_).releases(), 1);
  const auto charged = PendingRelease<v1::FitStatisticalParityResponse>(acme_, "sp-finish");
  const auto& histogram = charged.artifact().statistical_parity();
  ASSERT_EQ(histogram.groups_size(), 2);
  EXPECT_EQ(histogram.groups(0).transport_size(), 0);  // not solved yet
  v1::GetArtifactRequest get;
  get.set_artifact_id(charged.artifact().id());
  EXPECT_THAT(vault_->GetArtifact(acme_, get), StatusIs(absl::StatusCode::kNotFound));

  ASSERT_NO_FATAL_FAILURE(AllowFinishes());
  auto retry = vault_->FitStatisticalParity(acme_, req);
  ASSERT_OK(retry);
  EXPECT_EQ(BudgetOf(acme_).releases(), 1);
  const auto& sp = retry->artifact().statistical_parity();
  EXPECT_EQ(retry->artifact().id(), charged.artifact().id());
  EXPECT_EQ(retry->charge().ledger_seq(), charged.charge().ledger_seq());
  ASSERT_EQ(sp.groups_size(), 2);
  for (int a = 0; a < 2; ++a) {
    EXPECT_THAT(sp.groups(a).noisy_counts(),
                ::testing::ElementsAreArray(histogram.groups(a).noisy_counts()));
    EXPECT_EQ(sp.groups(a).transport_size(), 25);
  }
  EXPECT_EQ(sp.solver(), v1::SP_SOLVER_LINEAR_PROGRAM);
  auto kept = vault_->GetArtifact(acme_, get);
  ASSERT_OK(kept);
  EXPECT_EQ(kept->artifact().SerializeAsString(), retry->artifact().SerializeAsString());
  auto replay = vault_->FitStatisticalParity(acme_, req);
  ASSERT_OK(replay);
  EXPECT_EQ(replay->SerializeAsString(), retry->SerializeAsString());
  EXPECT_EQ(BudgetOf(acme_).releases(), 1);
}

TEST_F(VaultPostprocessTest, StatisticalParityRefusesBadInputsWithoutCharging) {
  auto with = [&](auto mutate) {
    return [this, mutate] {
      auto req = SpRequest("sp-bad");
      mutate(req);
      return vault_->FitStatisticalParity(acme_, req);
    };
  };
  using R = v1::FitStatisticalParityRequest;
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  ExpectRefusedWithoutCharge(acme_, with([](R& r) { r.set_lo(1); }), kInvalid, "lo");
  ExpectRefusedWithoutCharge(acme_, with([](R& r) { r.set_hi(NAN); }), kInvalid, "hi");
  ExpectRefusedWithoutCharge(acme_,
                             with([](R& r) { r.set_lo(-std::numeric_limits<double>::infinity()); }),
                             kInvalid, "lo");
  ExpectRefusedWithoutCharge(acme_, with([](R& r) { r.set_bins(0); }), kInvalid, "bins");
  ExpectRefusedWithoutCharge(acme_, with([](R& r) { r.set_bins(1001); }), kInvalid, "bins");
  ExpectRefusedWithoutCharge(acme_, with([](R& r) { r.set_alpha(1.5); }), kInvalid, "alpha");
  ExpectRefusedWithoutCharge(acme_, with([](R& r) { r.set_alpha(-0.1); }), kInvalid, "alpha");
  ExpectRefusedWithoutCharge(acme_, with([](R& r) {
                               r.set_alpha(0.2);
                               r.set_solver(v1::SP_SOLVER_QUANTILE);
                             }),
                             kInvalid, "alpha");
  ExpectRefusedWithoutCharge(acme_, with([](R& r) { r.set_epsilon(0); }), kInvalid, "epsilon");
  ExpectRefusedWithoutCharge(acme_, with([](R& r) { r.set_score_column("nope"); }), kInvalid,
                             "nope");
  ExpectRefusedWithoutCharge(acme_, with([](R& r) { r.set_decision_floor(1e-9); }), kInvalid,
                             "decision_floor must be 0 or at least 1e-06");
  ExpectRefusedWithoutCharge(acme_, with([](R& r) { r.set_decision_floor(1); }), kInvalid,
                             "decision_floor");
}

// ---- audits --------------------------------------------------------------------------------

TEST_F(VaultPostprocessTest, ClassifierAuditWithHugeEpsilonMatchesTheExactRates) {
  v1::AuditClassifierRequest req;
  req.set_idempotency_key("audit-c");
  req.set_table_handle(handle_);
  req.set_prediction_column("pred");
  req.set_label_column("label");
  req.add_attributes("sex");
  req.set_epsilon(kHugeEpsilon);
  auto resp = vault_->AuditClassifier(acme_, req);
  ASSERT_OK(resp);
  const auto& report = resp->report();
  ASSERT_EQ(report.groups_size(), 2);
  EXPECT_EQ(report.m(), 30);
  EXPECT_DOUBLE_EQ(report.confidence(), 0.95);
  for (int g = 0; g < 2; ++g) {
    const char* sex = g == 0 ? "F" : "M";
    double n = 0, selected = 0;
    for (size_t i = 0; i < subjects_.size(); ++i) {
      if (subjects_[i].sex != sex) continue;
      ++n;
      selected += rows_[i].pred;
    }
    const auto& rate = report.groups(g).selection_rate();
    EXPECT_NEAR(rate.estimate(), selected / n, 1e-12);
    EXPECT_LE(rate.lo(), rate.estimate());
    EXPECT_GE(rate.hi(), rate.estimate());
  }
  EXPECT_EQ(resp->charge().cost().epsilon(), kHugeEpsilon);
}

TEST_F(VaultPostprocessTest, RegressorAuditIsOneComposedRelease) {
  v1::AuditRegressorRequest req;
  req.set_idempotency_key("audit-r");
  req.set_table_handle(score_handle_);
  req.set_score_column("score");
  req.add_attributes("sex");
  req.set_lo(0);
  req.set_hi(1);
  req.set_bins(4);
  req.set_epsilon(2);
  auto resp = vault_->AuditRegressor(acme_, req);
  ASSERT_OK(resp);
  EXPECT_EQ(resp->scores_clipped(), 2);
  ASSERT_EQ(resp->report().groups_size(), 2);
  for (const auto& g : resp->report().groups()) {
    EXPECT_EQ(g.histogram_size(), 4);
    EXPECT_GE(g.mean().estimate(), 0);
    EXPECT_LE(g.mean().estimate(), 1);
  }
  // Two parts at half the epsilon each, one ledger charge of the total.
  const v1::Cost& cost = resp->charge().cost();
  EXPECT_DOUBLE_EQ(cost.epsilon(), 2);
  ASSERT_EQ(cost.parts_size(), 2);
  EXPECT_EQ(cost.parts(0).name(), "histogram");
  EXPECT_DOUBLE_EQ(cost.parts(0).epsilon(), 1);
  EXPECT_DOUBLE_EQ(cost.parts(0).noise_scale(), 2);
  EXPECT_EQ(cost.parts(1).name(), "sums");
  EXPECT_DOUBLE_EQ(cost.parts(1).epsilon(), 1);
  EXPECT_EQ(ChargeRows(), 1);
}

// The audits' bootstrap runs after the charge, from the stored noisy counts (and sums): a
// finish that could not be stored leaves the charged release pending, and the retry finishes
// that release (the same noisy values, one charge) instead of drawing fresh noise.
TEST_F(VaultPostprocessTest, AuditRetriesFinishTheChargedRelease) {
  ASSERT_NO_FATAL_FAILURE(FailFinishes());
  v1::AuditClassifierRequest c;
  c.set_idempotency_key("audit-c-finish");
  c.set_table_handle(handle_);
  c.set_prediction_column("pred");
  c.set_label_column("label");
  c.add_attributes("sex");
  c.set_epsilon(1);  // noise of scale 2 on 30 subjects: a fresh draw would show
  v1::AuditRegressorRequest r;
  r.set_idempotency_key("audit-r-finish");
  r.set_table_handle(score_handle_);
  r.set_score_column("score");
  r.add_attributes("sex");
  r.set_lo(0);
  r.set_hi(1);
  r.set_bins(4);
  r.set_epsilon(1);
  auto c_failed = vault_->AuditClassifier(acme_, c);
  auto r_failed = vault_->AuditRegressor(acme_, r);
  ASSERT_FALSE(c_failed.ok());
  ASSERT_FALSE(r_failed.ok());
  EXPECT_THAT(std::string(c_failed.status().message()), HasSubstr("the disk is gone"));
  EXPECT_THAT(std::string(r_failed.status().message()), HasSubstr("the disk is gone"));
  EXPECT_EQ(BudgetOf(acme_).releases(), 2);
  const auto classifier = PendingRelease<v1::AuditClassifierResponse>(acme_, "audit-c-finish");
  const auto regressor = PendingRelease<v1::AuditRegressorResponse>(acme_, "audit-r-finish");
  ASSERT_EQ(classifier.report().groups_size(), 2);
  ASSERT_EQ(regressor.report().groups_size(), 2);
  // The release alone: no interval, no repaired histogram yet.
  EXPECT_FALSE(classifier.report().has_demographic_parity_violation());
  EXPECT_FALSE(classifier.report().groups(0).has_selection_rate());
  EXPECT_FALSE(regressor.report().has_max_ks());
  EXPECT_EQ(regressor.report().groups(0).histogram_size(), 0);
  EXPECT_EQ(regressor.report().groups(0).noisy_counts_size(), 4);
  EXPECT_GT(regressor.report().score_sum_granularity(), 0);

  ASSERT_NO_FATAL_FAILURE(AllowFinishes());
  auto c_retry = vault_->AuditClassifier(acme_, c);
  auto r_retry = vault_->AuditRegressor(acme_, r);
  ASSERT_OK(c_retry);
  ASSERT_OK(r_retry);
  EXPECT_EQ(BudgetOf(acme_).releases(), 2);
  EXPECT_EQ(c_retry->charge().ledger_seq(), classifier.charge().ledger_seq());
  EXPECT_EQ(r_retry->charge().ledger_seq(), regressor.charge().ledger_seq());
  for (int a = 0; a < 2; ++a) {
    const auto& g = c_retry->report().groups(a);
    const auto& charged = classifier.report().groups(a);
    EXPECT_EQ(g.noisy_pred0_label0(), charged.noisy_pred0_label0());
    EXPECT_EQ(g.noisy_pred0_label1(), charged.noisy_pred0_label1());
    EXPECT_EQ(g.noisy_pred1_label0(), charged.noisy_pred1_label0());
    EXPECT_EQ(g.noisy_pred1_label1(), charged.noisy_pred1_label1());
    EXPECT_EQ(g.noisy_rows(), charged.noisy_pred0_label0() + charged.noisy_pred0_label1() +
                                  charged.noisy_pred1_label0() + charged.noisy_pred1_label1());
    EXPECT_LE(g.selection_rate().lo(), g.selection_rate().hi());
    const auto& rg = r_retry->report().groups(a);
    EXPECT_THAT(rg.noisy_counts(),
                ::testing::ElementsAreArray(regressor.report().groups(a).noisy_counts()));
    EXPECT_EQ(rg.noisy_score_sum(), regressor.report().groups(a).noisy_score_sum());
    EXPECT_EQ(rg.histogram_size(), 4);
    // The mean is the stored sum over the stored counts (api.md), clamped to the range.
    int64_t n = 0;
    for (int64_t count : rg.noisy_counts()) n += count;
    const double mean = std::clamp(rg.noisy_score_sum() * r_retry->report().score_sum_granularity() /
                                       static_cast<double>(std::max<int64_t>(n, 1)),
                                   0.0, 1.0);
    EXPECT_DOUBLE_EQ(rg.mean().estimate(), mean);
  }
  EXPECT_TRUE(c_retry->report().has_demographic_parity_violation());
  EXPECT_TRUE(r_retry->report().has_max_ks());
  // Finished once: a replay returns the stored bytes.
  auto c_replay = vault_->AuditClassifier(acme_, c);
  auto r_replay = vault_->AuditRegressor(acme_, r);
  ASSERT_OK(c_replay);
  ASSERT_OK(r_replay);
  EXPECT_EQ(c_replay->SerializeAsString(), c_retry->SerializeAsString());
  EXPECT_EQ(r_replay->SerializeAsString(), r_retry->SerializeAsString());
  EXPECT_EQ(BudgetOf(acme_).releases(), 2);
}

TEST_F(VaultPostprocessTest, AuditsRefuseBadInputsWithoutCharging) {
  v1::AuditClassifierRequest c;
  c.set_idempotency_key("bad-audit");
  c.set_table_handle(handle_);
  c.set_prediction_column("pred");
  c.set_label_column("label");
  c.set_epsilon(1);
  c.set_confidence(1.5);
  ExpectRefusedWithoutCharge(
      acme_, [&] { return vault_->AuditClassifier(acme_, c); }, absl::StatusCode::kInvalidArgument,
      "confidence");
  c.set_confidence(0.9);
  c.set_label_column("tier");  // categorical
  ExpectRefusedWithoutCharge(
      acme_, [&] { return vault_->AuditClassifier(acme_, c); }, absl::StatusCode::kInvalidArgument,
      "tier");
  v1::AuditRegressorRequest r;
  r.set_idempotency_key("bad-audit-r");
  r.set_table_handle(score_handle_);
  r.set_score_column("score");
  r.set_lo(2);
  r.set_hi(1);
  r.set_bins(4);
  r.set_epsilon(1);
  ExpectRefusedWithoutCharge(
      acme_, [&] { return vault_->AuditRegressor(acme_, r); }, absl::StatusCode::kInvalidArgument,
      "lo");
  // An epsilon so small that the sum's noise scale leaves the exact sampler's range: the
  // refusal names epsilon and the smallest usable value.
  r.set_lo(0);
  r.set_hi(1);
  r.set_epsilon(2e-6);
  ExpectRefusedWithoutCharge(
      acme_, [&] { return vault_->AuditRegressor(acme_, r); }, absl::StatusCode::kInvalidArgument,
      "epsilon 2e-06 is too small for this release");
  // More histogram cells than the bootstrap's bound (4,000: 100 draws each) inside the charge:
  // refused before it, from the public schema (sex x race: 6 groups, whichever the rows have)
  // and the request's bins.
  r.set_epsilon(1);
  r.add_attributes("sex");
  r.add_attributes("race");
  r.set_bins(667);
  ExpectRefusedWithoutCharge(
      acme_, [&] { return vault_->AuditRegressor(acme_, r); }, absl::StatusCode::kInvalidArgument,
      "groups x bins = 4002 histogram cells exceed the audits' limit of 4000");
}

// ---- FitEqualizedOdds: groups the noise cannot resolve (issue 8 §3) ------------------------

TEST_F(VaultPostprocessTest, EqualizedOddsExcludesGroupsBelowTheThresholdByLabel) {
  // With the noise at zero the released counts are exact, so the groups below an explicit
  // threshold of 3 subjects per label are known in advance.
  std::map<std::string, std::array<int64_t, 2>> per_label;
  std::map<std::string, std::string> group_of;
  for (const Subject& s : subjects_) group_of[s.key] = s.sex + "|" + s.race;
  for (const Row& r : rows_) ++per_label[group_of[r.key]][static_cast<int>(r.label)];
  auto req = FitRequest("eo-threshold");
  req.set_min_group_count(3);
  auto resp = vault_->FitEqualizedOdds(acme_, req);
  ASSERT_OK(resp);
  const auto& eo = resp->artifact().equalized_odds();
  EXPECT_EQ(eo.min_group_count(), 3);
  std::vector<std::string> expected_excluded;
  for (const auto& g : eo.groups()) {
    SCOPED_TRACE(g.group());
    const auto& n = per_label[g.group()];
    const bool small = std::min(n[0], n[1]) < 3;
    EXPECT_EQ(g.excluded(), small);
    if (!small) continue;
    expected_excluded.push_back(g.group());
    EXPECT_EQ(g.p_flip_to_1_given_0(), 0);
    EXPECT_EQ(g.p_keep_1_given_1(), 1);
    EXPECT_THAT(g.excluded_reason(), HasSubstr("below min_group_count = 3"));
    EXPECT_THAT(eo.warnings(), ::testing::Contains(
                                   HasSubstr(absl::StrCat("group '", g.group(), "' is excluded"))));
  }
  ASSERT_FALSE(expected_excluded.empty()) << "the fixture should have a small group";
  EXPECT_THAT(eo.excluded_groups(), ::testing::ElementsAreArray(expected_excluded));
  for (const std::string& w : eo.warnings()) {
    EXPECT_THAT(w, ::testing::Not(::testing::ContainsRegex("group [0-9]"))) << "by label";
  }
  if (eo.groups(0).excluded()) {
    EXPECT_GT(eo.reference_group(), 0);
    EXPECT_FALSE(eo.groups(eo.reference_group()).excluded());
  } else {
    EXPECT_EQ(eo.reference_group(), 0);
  }

  // At epsilon = 1 the default threshold 8 ln(4·6/0.05)/1 ≈ 49 excludes every group of this
  // 30-subject table: nothing is constrained and the artifact keeps every prediction, up to the
  // decision floor. Every group then has the same probabilities, so a decision reveals nothing
  // about the group: Decide's bound is 0 (at most log((1 − F)/F) in general).
  req = FitRequest("eo-default-threshold");
  req.set_epsilon(1);
  req.set_decision_floor(0.1);
  resp = vault_->FitEqualizedOdds(acme_, req);
  ASSERT_OK(resp);
  const auto& all_out = resp->artifact().equalized_odds();
  EXPECT_NEAR(all_out.min_group_count(), 8 * std::log(24 / 0.05), 1e-9);
  EXPECT_EQ(all_out.excluded_groups_size(), all_out.groups_size());
  EXPECT_EQ(all_out.reference_group(), -1);
  for (const auto& g : all_out.groups()) {
    EXPECT_DOUBLE_EQ(g.p_flip_to_1_given_0(), 0.1);
    EXPECT_DOUBLE_EQ(g.p_keep_1_given_1(), 0.9);
  }
  EXPECT_EQ(all_out.decision_log_ratio_bound(), 0);
  EXPECT_THAT(all_out.warnings(), ::testing::Contains(HasSubstr("no group is resolvable")));

  // 0 switches the policy off.
  req = FitRequest("eo-no-threshold");
  req.set_min_group_count(0);
  resp = vault_->FitEqualizedOdds(acme_, req);
  ASSERT_OK(resp);
  EXPECT_EQ(resp->artifact().equalized_odds().excluded_groups_size(), 0);
}

TEST_F(VaultPostprocessTest, EqualizedOddsRefusesABadThresholdWithoutCharging) {
  for (double bad :
       {-1.0, std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()}) {
    auto req = FitRequest("eo-bad-threshold");
    req.set_min_group_count(bad);
    ExpectRefusedWithoutCharge(
        acme_, [&] { return vault_->FitEqualizedOdds(acme_, req); },
        absl::StatusCode::kInvalidArgument, "min_group_count");
  }
}

// ---- Decide --------------------------------------------------------------------------------

TEST_F(VaultPostprocessTest, DecideRefusesAnArtifactWhoseDecisionsRevealGroupsExactly) {
  // floor 0 with a huge epsilon: the LP puts mixing probabilities at 0 and 1.
  const v1::Artifact artifact = FitEo(/*floor=*/0);
  ASSERT_FALSE(std::isfinite(artifact.equalized_odds().decision_log_ratio_bound()));
  ExpectRefusedWithoutCharge(
      acme_, [&] { return vault_->Decide(acme_, DecideAll(artifact.id(), true)); },
      absl::StatusCode::kFailedPrecondition, "decision_floor");
}

TEST_F(VaultPostprocessTest, DecideChargesTheLicenceOncePinsDecisionsAndLogsEveryCall) {
  const v1::Artifact artifact = FitEo(/*floor=*/0.1);
  const auto& eo = artifact.equalized_odds();
  EXPECT_DOUBLE_EQ(eo.decision_floor(), 0.1);
  for (const auto& g : eo.groups()) {
    EXPECT_GE(g.p_flip_to_1_given_0(), 0.1 - 1e-9);
    EXPECT_LE(g.p_keep_1_given_1(), 0.9 + 1e-9);
  }
  const double bound = eo.decision_log_ratio_bound();
  ASSERT_TRUE(std::isfinite(bound));
  EXPECT_LE(bound, std::log(9.0) + 1e-9);  // probabilities in [0.1, 0.9]

  const v1::Budget before = BudgetOf(acme_);
  auto first = vault_->Decide(acme_, DecideAll(artifact.id(), /*eo=*/true));
  ASSERT_OK(first);
  ASSERT_EQ(first->outputs_size(), 30);
  for (double o : first->outputs()) EXPECT_TRUE(o == 0 || o == 1);
  EXPECT_EQ(first->rows_already_decided(), 0);
  EXPECT_DOUBLE_EQ(first->decision_log_ratio_bound(), bound);
  // The licence: epsilon = the bound rounded up to micro-units, charged once.
  EXPECT_NEAR(first->charge().cost().epsilon(), bound, 1e-6);
  EXPECT_GE(first->charge().cost().epsilon(), bound);
  EXPECT_EQ(first->charge().cost().mechanism(), "randomized_decisions");
  EXPECT_TRUE(first->licence_charged());
  const v1::Budget after_first = BudgetOf(acme_);
  EXPECT_EQ(after_first.releases(), before.releases() + 1);

  // Asking again returns the stored decisions and charges nothing more.
  auto second = vault_->Decide(acme_, DecideAll(artifact.id(), true));
  ASSERT_OK(second);
  EXPECT_EQ(second->rows_already_decided(), 30);
  for (int i = 0; i < 30; ++i) EXPECT_EQ(second->outputs(i), first->outputs(i));
  EXPECT_EQ(second->charge().ledger_seq(), first->charge().ledger_seq());
  EXPECT_FALSE(second->licence_charged());
  EXPECT_EQ(BudgetOf(acme_).releases(), after_first.releases());
  EXPECT_GT(second->access_log_seq(), first->access_log_seq());

  // The other input for an already decided subject is refused (it would double the leak).
  auto flipped = DecideAll(artifact.id(), true);
  flipped.set_values(6, 1 - flipped.values(6));
  EXPECT_THAT(vault_->Decide(acme_, flipped),
              StatusIs(absl::StatusCode::kInvalidArgument, "row 7 was already decided"));

  v1::ListAccessLogRequest log_req;
  auto log = vault_->ListAccessLog(regulator_, log_req);
  ASSERT_OK(log);
  ASSERT_EQ(log->entries_size(), 2);
  EXPECT_EQ(log->entries(0).account(), "acme");
  EXPECT_EQ(log->entries(0).artifact_id(), artifact.id());
  EXPECT_EQ(log->entries(0).rows(), 30);
  EXPECT_EQ(log->entries(0).new_decisions(), 30);
  EXPECT_EQ(log->entries(1).rows(), 30);
  EXPECT_EQ(log->entries(1).new_decisions(), 0);  // all returned from storage
  EXPECT_EQ(log->entries(0).dataset(), "census");
  EXPECT_THAT(vault_->ListAccessLog(acme_, log_req), StatusIs(absl::StatusCode::kPermissionDenied));
}

// Decisions stored one row per subject key (before schema version 7) still pin their
// subjects: returned as stored, never drawn again, and the other input is refused.
TEST_F(VaultPostprocessTest, DecideHonoursDecisionsStoredByKeyBeforeBatches) {
  const v1::Artifact artifact = FitEo(/*floor=*/0.1);
  // 0.5 cannot be a fresh equalized-odds decision (0 or 1): seeing it proves the stored row.
  // As a server before version 7 wrote them (the guard against new ones lifted).
  EXPECT_EQ(RawSql(absl::StrCat(
                "DROP TRIGGER decisions_read_only; "
                "INSERT INTO decisions(artifact_id, subject_key, input, output) VALUES('",
                artifact.id(), "', '", subjects_[3].key, "', ", rows_[3].pred, ", 0.5)")),
            "");

  auto decided = vault_->Decide(acme_, DecideAll(artifact.id(), /*eo=*/true));
  ASSERT_OK(decided);
  EXPECT_EQ(decided->outputs(3), 0.5);
  EXPECT_EQ(decided->rows_already_decided(), 1);
  auto flipped = DecideAll(artifact.id(), true);
  flipped.set_values(3, 1 - flipped.values(3));
  EXPECT_THAT(vault_->Decide(acme_, flipped),
              StatusIs(absl::StatusCode::kInvalidArgument, "row 4 was already decided"));
}

// A key repeated within one call is one subject: one draw, its output on every row, and one
// stored decision.
TEST_F(VaultPostprocessTest, DecideGivesARepeatedKeyOneDecisionWithinTheCall) {
  const v1::Artifact artifact = FitEo(/*floor=*/0.1);
  v1::DecideRequest req;
  req.set_artifact_id(artifact.id());
  for (int copy = 0; copy < 20; ++copy) {
    req.add_subject_keys(subjects_[5].key);
    req.add_values(rows_[5].pred);
  }
  req.add_subject_keys(subjects_[6].key);
  req.add_values(rows_[6].pred);
  // Independent draws for the 20 copies would all agree with probability at most
  // 0.9^19 + 0.1^19 < 0.14 (probabilities in [0.1, 0.9]); one draw always agrees.
  auto decided = vault_->Decide(acme_, req);
  ASSERT_OK(decided);
  for (int i = 1; i < 20; ++i) EXPECT_EQ(decided->outputs(i), decided->outputs(0)) << i;
  v1::ListAccessLogRequest log_req;
  auto log = vault_->ListAccessLog(regulator_, log_req);
  ASSERT_OK(log);
  ASSERT_EQ(log->entries_size(), 1);
  EXPECT_EQ(log->entries(0).rows(), 21);
  EXPECT_EQ(log->entries(0).new_decisions(), 2);
  auto again = vault_->Decide(acme_, req);
  ASSERT_OK(again);
  EXPECT_EQ(again->rows_already_decided(), 21);
  EXPECT_EQ(again->outputs(0), decided->outputs(0));
}

// Two vaults on one database (as two replicas are): each reads the decision batches the other
// stored before deciding, so a subject keeps the decision it got from either.
TEST_F(VaultPostprocessTest, DecideSeesTheDecisionsAnotherVaultStored) {
  const v1::Artifact artifact = FitEo(/*floor=*/0.1);
  Vault other(store_.get(), &clock_, absl::BitGenRef(gen_));
  v1::DecideRequest first_ten;
  first_ten.set_artifact_id(artifact.id());
  for (int i = 0; i < 10; ++i) {
    first_ten.add_subject_keys(subjects_[i].key);
    first_ten.add_values(rows_[i].pred);
  }
  auto by_other = other.Decide(acme_, first_ten);
  ASSERT_OK(by_other);
  auto by_this = vault_->Decide(acme_, DecideAll(artifact.id(), /*eo=*/true));
  ASSERT_OK(by_this);
  EXPECT_EQ(by_this->rows_already_decided(), 10);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(by_this->outputs(i), by_other->outputs(i)) << i;
  // The other vault has the first ten in memory and reads the rest from the store.
  auto again = other.Decide(acme_, DecideAll(artifact.id(), true));
  ASSERT_OK(again);
  EXPECT_EQ(again->rows_already_decided(), 30);
  for (int i = 0; i < 30; ++i) EXPECT_EQ(again->outputs(i), by_this->outputs(i)) << i;
  EXPECT_FALSE(again->licence_charged());
}

// A clock that, at its `at`-th read, first runs `once` (here: another replica's Decide). A
// Decide by keys reads the vault's clock twice: for the licence's charge, just after its replay
// check found the licence unpaid, and for the access-log row, just before its decisions are
// stored.
class ClockThatRunsOnce final : public Clock {
 public:
  ClockThatRunsOnce(const Clock* base, int at, std::function<void()> once)
      : base_(base), at_(at), once_(std::move(once)) {}
  int64_t NowMicros() const override {
    std::function<void()> run;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (++reads_ == at_) run = std::move(once_);
    }
    if (run) run();
    return base_->NowMicros();
  }

 private:
  const Clock* base_;
  const int at_;
  mutable std::mutex mu_;
  mutable int reads_ = 0;
  mutable std::function<void()> once_;
};

// A retry that waits for another call's finish, or for a post-processing slot, stops by its
// deadline: the charge stands, the release stays pending, and a later retry gets it. The call
// that charged finishes whatever its deadline. The vault's first clock read in a retry of a
// pending statistical-parity release is its finish's (the artifact's time), made while the
// retry holds the release and the only slot.
TEST_F(VaultPostprocessTest, ARetryStopsWaitingForAFinishByItsDeadlineTheChargingCallDoesNot) {
  ASSERT_NO_FATAL_FAILURE(FailFinishes());
  auto a = SpRequest("sp-wait-a");
  auto b = SpRequest("sp-wait-b");
  b.set_bins(4);
  ASSERT_FALSE(vault_->FitStatisticalParity(acme_, a).ok());
  ASSERT_FALSE(vault_->FitStatisticalParity(acme_, b).ok());
  ASSERT_NO_FATAL_FAILURE(AllowFinishes());
  EXPECT_EQ(BudgetOf(acme_).releases(), 2);

  Vault* vault = nullptr;
  Caller hurried = acme_;
  hurried.wait_limit.deadline = absl::Now() - absl::Seconds(1);
  auto c = SpRequest("sp-wait-c");  // charged while the slot is taken
  c.set_bins(3);
  absl::StatusOr<v1::FitStatisticalParityResponse> same_release, other_release, charged;
  std::thread charging;
  ClockThatRunsOnce racing(&clock_, /*at=*/1, [&] {
    same_release = vault->FitStatisticalParity(hurried, a);
    other_release = vault->FitStatisticalParity(hurried, b);
    charging = std::thread([&] { charged = vault->FitStatisticalParity(hurried, c); });
    // Until c, charged, waits in the slot's queue (at most 60 s).
    FinishGate& gate = vault->finish_gate_for_testing();
    for (int i = 0; i < 60'000 && gate.Waiting() == 0; ++i) absl::SleepFor(absl::Milliseconds(1));
    EXPECT_EQ(gate.Waiting(), 1);
  });
  VaultOptions options;
  options.max_concurrent_finishes = 1;
  Vault one_slot(store_.get(), &racing, absl::BitGenRef(gen_), options);
  vault = &one_slot;
  auto finished = one_slot.FitStatisticalParity(acme_, a);
  ASSERT_TRUE(charging.joinable()) << "the retry's first clock read was not its finish's";
  charging.join();
  ASSERT_OK(finished);
  EXPECT_THAT(same_release, StatusIs(absl::StatusCode::kDeadlineExceeded,
                                     "another call's finish of this release"));
  EXPECT_THAT(other_release, StatusIs(absl::StatusCode::kDeadlineExceeded,
                                      "a free post-processing slot"));
  EXPECT_TRUE(IsCounted(same_release.status()));  // after the charge: not a refusal
  EXPECT_TRUE(IsCounted(other_release.status()));
  // c waited for the slot past its deadline and finished: it charged.
  ASSERT_OK(charged);
  EXPECT_EQ(charged->artifact().statistical_parity().groups(0).transport_size(), 9);
  EXPECT_EQ(BudgetOf(acme_).releases(), 3);
  // b is still pending; its retry finishes it, and neither retry is charged.
  PendingRelease<v1::FitStatisticalParityResponse>(acme_, "sp-wait-b");
  ASSERT_OK(one_slot.FitStatisticalParity(acme_, b));
  auto again = one_slot.FitStatisticalParity(acme_, a);
  ASSERT_OK(again);
  EXPECT_EQ(again->SerializeAsString(), finished->SerializeAsString());
  EXPECT_EQ(BudgetOf(acme_).releases(), 3);
}

// The first `rows` subjects of the fixture with their predictions, for `artifact_id`.
v1::DecideRequest FirstRows(const std::string& artifact_id, int rows,
                            const std::vector<Subject>& subjects,
                            const std::vector<Row>& table) {
  v1::DecideRequest req;
  req.set_artifact_id(artifact_id);
  for (int i = 0; i < rows; ++i) {
    req.add_subject_keys(subjects[i].key);
    req.add_values(table[i].pred);
  }
  return req;
}

// Two replicas deciding with one artifact for the first time at once: the other replica pays
// the licence after this one found it unpaid and before this one charges it, and stops before
// storing its decisions (as if it died then: had it stored them, this call would restart on
// the taken batch and find the licence paid). The store returns the other's licence (a replay,
// as the metrics show); this call charged nothing and says so.
TEST_F(VaultPostprocessTest, DecideSaysTheLicenceWasNotChargedWhenAnotherReplicaPaidItFirst) {
  const v1::Artifact artifact = FitEo(/*floor=*/0.1);
  const v1::Budget before = BudgetOf(acme_);
  Vault other(store_.get(), &clock_, absl::BitGenRef(gen_));
  absl::StatusOr<v1::DecideResponse> by_other;
  ClockThatRunsOnce racing(&clock_, /*at=*/1, [&] {
    by_other = other.Decide(acme_, FirstRows(artifact.id(), 10, subjects_, rows_));
    EXPECT_EQ(RawSql(absl::StrCat("DELETE FROM decision_batches WHERE artifact_id = '",
                                  artifact.id(), "'")),
              "");
  });
  Metrics metrics({});
  VaultOptions options;
  options.metrics = &metrics;
  Vault vault(store_.get(), &racing, absl::BitGenRef(gen_), options);
  auto by_this = vault.Decide(acme_, DecideAll(artifact.id(), /*eo=*/true));
  ASSERT_OK(by_other);
  ASSERT_OK(by_this);
  // The other paid inside this call's charge, not before its replay check.
  EXPECT_THAT(metrics.Text(), HasSubstr("fairvault_replays_total{kind=\"DecisionLicence\"} 1"));
  EXPECT_TRUE(by_other->licence_charged());
  EXPECT_FALSE(by_this->licence_charged());
  EXPECT_EQ(by_this->charge().ledger_seq(), by_other->charge().ledger_seq());
  EXPECT_EQ(BudgetOf(acme_).releases(), before.releases() + 1);
  EXPECT_EQ(by_this->outputs_size(), 30);
}

// The other way round: this call pays the licence, then another replica stores its decisions
// first (this call's decision batch is taken, so it starts over and its replay check now finds
// the licence paid). It still says it paid, as it did.
TEST_F(VaultPostprocessTest, DecideSaysItPaidTheLicenceWhenItStartedOverAfterPaying) {
  const v1::Artifact artifact = FitEo(/*floor=*/0.1);
  const v1::Budget before = BudgetOf(acme_);
  Vault other(store_.get(), &clock_, absl::BitGenRef(gen_));
  absl::StatusOr<v1::DecideResponse> by_other;
  ClockThatRunsOnce racing(&clock_, /*at=*/2, [&] {
    by_other = other.Decide(acme_, FirstRows(artifact.id(), 10, subjects_, rows_));
  });
  Vault vault(store_.get(), &racing, absl::BitGenRef(gen_));
  auto by_this = vault.Decide(acme_, DecideAll(artifact.id(), /*eo=*/true));
  ASSERT_OK(by_other);
  ASSERT_OK(by_this);
  EXPECT_FALSE(by_other->licence_charged());
  EXPECT_TRUE(by_this->licence_charged());
  EXPECT_EQ(by_this->charge().ledger_seq(), by_other->charge().ledger_seq());
  EXPECT_EQ(BudgetOf(acme_).releases(), before.releases() + 1);
  // Started over: the other's ten decisions are this call's too.
  EXPECT_EQ(by_this->rows_already_decided(), 10);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(by_this->outputs(i), by_other->outputs(i)) << i;
}

TEST_F(VaultPostprocessTest, DecideFrequenciesFollowTheArtifact) {
  // Many subjects through one group's rule: the share of ones matches p within 5 standard
  // errors (false-failure probability below 1e-6). Uses the 30 subjects of the fixture across
  // 40 artifacts, each subject decided once per artifact.
  double expected = 0, ones = 0, n = 0;
  for (int t = 0; t < 40; ++t) {
    auto req = FitRequest(absl::StrCat("eo-freq-", t));
    req.set_epsilon(1);
    req.set_decision_floor(0.2);
    auto fit = vault_->FitEqualizedOdds(acme_, req);
    ASSERT_OK(fit);
    std::map<std::string, const v1::EqualizedOddsGroup*> rule;
    for (const auto& g : fit->artifact().equalized_odds().groups()) rule[g.group()] = &g;
    auto resp = vault_->Decide(acme_, DecideAll(fit->artifact().id(), true));
    ASSERT_OK(resp);
    for (size_t i = 0; i < subjects_.size(); ++i) {
      const auto* g = rule[subjects_[i].sex + "|" + subjects_[i].race];
      expected += rows_[i].pred == 1 ? g->p_keep_1_given_1() : g->p_flip_to_1_given_0();
      ones += resp->outputs(i);
      ++n;
    }
  }
  EXPECT_NEAR(ones / n, expected / n, 5 * std::sqrt(0.25 / n));
}

TEST_F(VaultPostprocessTest, DecideWithAStatisticalParityArtifactReturnsBinCentres) {
  auto req = SpRequest("sp-decide");
  req.set_decision_floor(0.5);
  auto fit = vault_->FitStatisticalParity(acme_, req);
  ASSERT_OK(fit);
  const auto& sp = fit->artifact().statistical_parity();
  // Every transport entry is at least floor / k, so one decision reveals at most
  // log((1 - floor + floor / k) / (floor / k)).
  EXPECT_LE(sp.decision_log_ratio_bound(), std::log((0.5 + 0.1) / 0.1) + 1e-9);
  auto resp = vault_->Decide(acme_, DecideAll(fit->artifact().id(), /*eo=*/false));
  ASSERT_OK(resp);
  const std::set<double> centres = {0.1, 0.3, 0.5, 0.7, 0.9};
  for (double o : resp->outputs()) {
    bool is_centre = false;
    for (double c : centres) is_centre = is_centre || std::abs(o - c) < 1e-12;
    EXPECT_TRUE(is_centre) << o;
  }
}

TEST_F(VaultPostprocessTest, DecideRefusesBadRowsNamingThemWithoutCharging) {
  const v1::Artifact artifact = FitEo(/*floor=*/0.1);
  auto req = DecideAll(artifact.id(), true);
  req.set_subject_keys(4, "nobody");
  ExpectRefusedWithoutCharge(
      acme_, [&] { return vault_->Decide(acme_, req); }, absl::StatusCode::kInvalidArgument,
      "row 5 is not in dataset");
  req = DecideAll(artifact.id(), true);
  req.set_values(2, 0.5);
  ExpectRefusedWithoutCharge(
      acme_, [&] { return vault_->Decide(acme_, req); }, absl::StatusCode::kInvalidArgument,
      "row 3");
  req = DecideAll(artifact.id(), true);
  req.set_values(7, NAN);
  ExpectRefusedWithoutCharge(
      acme_, [&] { return vault_->Decide(acme_, req); }, absl::StatusCode::kInvalidArgument,
      "row 8");
  req = DecideAll(artifact.id(), true);
  req.add_values(1);
  EXPECT_THAT(vault_->Decide(acme_, req), StatusIs(absl::StatusCode::kInvalidArgument));
  // The same subject twice with different inputs in one request.
  req = DecideAll(artifact.id(), true);
  req.add_subject_keys(req.subject_keys(0));
  req.add_values(1 - req.values(0));
  EXPECT_THAT(vault_->Decide(acme_, req),
              StatusIs(absl::StatusCode::kInvalidArgument, "already decided"));
  // Another company's artifact.
  EXPECT_THAT(vault_->Decide(globex_, DecideAll(artifact.id(), true)),
              StatusIs(absl::StatusCode::kPermissionDenied));
  // Refused calls leave no access-log row.
  auto log = vault_->ListAccessLog(regulator_, v1::ListAccessLogRequest());
  ASSERT_OK(log);
  EXPECT_EQ(log->entries_size(), 0);
}

// ---- Decide by table_handle ------------------------------------------------------------------

v1::DecideRequest DecideTable(const std::string& artifact_id, const std::string& handle,
                              const std::string& column, int64_t first_row = 0,
                              int64_t row_count = 0) {
  v1::DecideRequest req;
  req.set_artifact_id(artifact_id);
  req.set_table_handle(handle);
  req.set_value_column(column);
  req.set_first_row(first_row);
  req.set_row_count(row_count);
  return req;
}

// A call by table gives exactly the decisions of a call sending the table's keys and values:
// the same stored decision per subject, whichever way it was asked first.
TEST_F(VaultPostprocessTest, DecideByTableIsDecideWithTheTablesKeysAndValues) {
  const v1::Artifact artifact = FitEo(/*floor=*/0.1);
  // The first half by keys, then the whole table by handle.
  v1::DecideRequest half = DecideAll(artifact.id(), /*eo=*/true);
  half.mutable_subject_keys()->DeleteSubrange(15, 15);
  half.mutable_values()->Truncate(15);
  auto by_keys = vault_->Decide(acme_, half);
  ASSERT_OK(by_keys);
  EXPECT_TRUE(by_keys->licence_charged());
  EXPECT_EQ(by_keys->table_rows(), 0);
  const v1::Budget after_licence = BudgetOf(acme_);

  // Priced by table as by keys: the licence is paid, nothing more.
  v1::PreviewReleaseRequest preview;
  *preview.mutable_decide() = DecideTable(artifact.id(), handle_, "pred");
  auto priced = vault_->PreviewRelease(acme_, preview);
  ASSERT_OK(priced);
  EXPECT_TRUE(priced->admitted());
  EXPECT_EQ(priced->replay_of_ledger_seq(), by_keys->charge().ledger_seq());

  auto by_table = vault_->Decide(acme_, DecideTable(artifact.id(), handle_, "pred"));
  ASSERT_OK(by_table);
  ASSERT_EQ(by_table->outputs_size(), 30);
  EXPECT_EQ(by_table->table_rows(), 30);
  EXPECT_EQ(by_table->rows_already_decided(), 15);
  EXPECT_FALSE(by_table->licence_charged());
  EXPECT_EQ(by_table->charge().ledger_seq(), by_keys->charge().ledger_seq());
  for (int i = 0; i < 15; ++i) EXPECT_EQ(by_table->outputs(i), by_keys->outputs(i)) << i;
  for (double o : by_table->outputs()) EXPECT_TRUE(o == 0 || o == 1);

  // All of it by keys now: every subject was decided, by one path or the other.
  auto all_by_keys = vault_->Decide(acme_, DecideAll(artifact.id(), true));
  ASSERT_OK(all_by_keys);
  EXPECT_EQ(all_by_keys->rows_already_decided(), 30);
  for (int i = 0; i < 30; ++i) EXPECT_EQ(all_by_keys->outputs(i), by_table->outputs(i)) << i;

  // A range, and a row_count past the table's end (stops there).
  auto middle = vault_->Decide(acme_, DecideTable(artifact.id(), handle_, "pred", 10, 5));
  ASSERT_OK(middle);
  ASSERT_EQ(middle->outputs_size(), 5);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(middle->outputs(i), by_table->outputs(10 + i));
  auto tail = vault_->Decide(acme_, DecideTable(artifact.id(), handle_, "pred", 25, 100));
  ASSERT_OK(tail);
  ASSERT_EQ(tail->outputs_size(), 5);
  EXPECT_EQ(tail->outputs(4), by_table->outputs(29));
  EXPECT_EQ(BudgetOf(acme_).releases(), after_licence.releases());

  // Each call is one access-log row, the table's rows counted as rows.
  auto log = vault_->ListAccessLog(regulator_, v1::ListAccessLogRequest());
  ASSERT_OK(log);
  ASSERT_EQ(log->entries_size(), 5);
  EXPECT_EQ(log->entries(1).rows(), 30);
  EXPECT_EQ(log->entries(1).new_decisions(), 15);
  EXPECT_EQ(log->entries(3).rows(), 5);
  EXPECT_EQ(log->entries(3).new_decisions(), 0);
}

TEST_F(VaultPostprocessTest, DecideByTableRefusesBadRequestsBeforeChargingNamingTheField) {
  const v1::Artifact artifact = FitEo(/*floor=*/0.1);
  auto refused = [&](v1::DecideRequest req, absl::StatusCode code, const std::string& text) {
    ExpectRefusedWithoutCharge(
        acme_, [&] { return vault_->Decide(acme_, req); }, code, text);
  };
  v1::DecideRequest both = DecideTable(artifact.id(), handle_, "pred");
  both.add_subject_keys("s0");
  both.add_values(1);
  refused(both, absl::StatusCode::kInvalidArgument, "not both");
  v1::DecideRequest stray = DecideAll(artifact.id(), true);
  stray.set_value_column("pred");
  refused(stray, absl::StatusCode::kInvalidArgument, "go with table_handle");
  refused(DecideTable(artifact.id(), handle_, "nope"), absl::StatusCode::kInvalidArgument,
          "value_column: unknown column 'nope'");
  refused(DecideTable(artifact.id(), handle_, "tier"), absl::StatusCode::kInvalidArgument,
          "value_column: column 'tier' must be numeric");
  refused(DecideTable(artifact.id(), handle_, "pred", 30), absl::StatusCode::kInvalidArgument,
          "first_row must be in [0, 30)");
  refused(DecideTable(artifact.id(), handle_, "pred", 0, -1), absl::StatusCode::kInvalidArgument,
          "row_count >= 0");
  // Scores where an equalized-odds artifact takes 0/1 predictions: named by table row.
  refused(DecideTable(artifact.id(), score_handle_, "score"), absl::StatusCode::kInvalidArgument,
          "value_column 'score': table row 0 (from 0) is 0.1; predictions must be 0 or 1");
  // A bad value past the rows asked for: the whole column is checked before the licence, so a
  // first call cannot charge it when a later one would be refused.
  auto later_bad = Upload(acme_, TableHeaderFor("census"),
                          {Chunk({rows_[0], rows_[1], Row{rows_[2].key, 0.5, 1, "x"}})});
  ASSERT_OK(later_bad);
  refused(DecideTable(artifact.id(), later_bad->table_handle(), "pred", 0, 1),
          absl::StatusCode::kInvalidArgument,
          "value_column 'pred': table row 2 (from 0) is 0.5; predictions must be 0 or 1 (nothing "
          "was decided or charged)");
  refused(DecideTable(artifact.id(), "tbl_none", "pred"), absl::StatusCode::kNotFound, "");
  // A row whose key is not a subject.
  v1::TableChunk chunk = Chunk({rows_[0], Row{"nobody", 1, 1, "x"}, rows_[2]});
  auto stranger = Upload(acme_, TableHeaderFor("census"), {chunk});
  ASSERT_OK(stranger);
  refused(DecideTable(artifact.id(), stranger->table_handle(), "pred"),
          absl::StatusCode::kInvalidArgument,
          "the subject key of table row 1 (from 0) is not in dataset 'census'");
  // Rows before it are decided when asked for alone.
  EXPECT_OK(vault_->Decide(acme_, DecideTable(artifact.id(), stranger->table_handle(), "pred", 0, 1)));
  // A subject decided with the other input before.
  v1::DecideRequest flipped = DecideAll(artifact.id(), true);
  flipped.mutable_subject_keys()->DeleteSubrange(7, 23);
  flipped.mutable_values()->Truncate(7);
  flipped.set_values(6, 1 - flipped.values(6));
  ASSERT_OK(vault_->Decide(acme_, flipped));
  refused(DecideTable(artifact.id(), handle_, "pred"), absl::StatusCode::kInvalidArgument,
          "the subject key of table row 6 (from 0) was already decided");
  // A table uploaded against another dataset (acme has a grant on it).
  MakeNeighbourDataset("elsewhere", "F", /*subjects=*/2);
  auto foreign = Upload(acme_, TableHeaderFor("elsewhere"), {Chunk({rows_[0]})});
  ASSERT_OK(foreign);
  refused(DecideTable(artifact.id(), foreign->table_handle(), "pred"),
          absl::StatusCode::kFailedPrecondition, "upload the table against that dataset");
  // An expired table.
  auto brief = Upload(acme_, TableHeaderFor("census", /*ttl_seconds=*/60), {Chunk({rows_[0]})});
  ASSERT_OK(brief);
  clock_.Advance(61'000'000);
  refused(DecideTable(artifact.id(), brief->table_handle(), "pred"),
          absl::StatusCode::kFailedPrecondition, "expired");
  // Another company's table.
  auto other = Upload(globex_, TableHeaderFor("census"), {Chunk({rows_[0]})});
  ASSERT_OK(other);
  refused(DecideTable(artifact.id(), other->table_handle(), "pred"),
          absl::StatusCode::kPermissionDenied, "belongs to another company");
  // Only the two accepted calls left access-log rows.
  auto log = vault_->ListAccessLog(regulator_, v1::ListAccessLogRequest());
  ASSERT_OK(log);
  EXPECT_EQ(log->entries_size(), 2);
}

// The table's join is redone when the dataset grows: a row refused for want of a subject is
// decided once the regulator imports that subject.
TEST_F(VaultPostprocessTest, DecideByTableSeesSubjectsImportedAfterTheUpload) {
  const v1::Artifact artifact = FitEo(/*floor=*/0.1);
  auto table = Upload(acme_, TableHeaderFor("census"),
                      {Chunk({rows_[0], Row{"newcomer", 1, 1, "x"}})});
  ASSERT_OK(table);
  const auto req = DecideTable(artifact.id(), table->table_handle(), "pred");
  EXPECT_THAT(vault_->Decide(acme_, req),
              StatusIs(absl::StatusCode::kInvalidArgument, "table row 1 (from 0) is not in dataset"));
  ASSERT_OK(Import("b3", {"sex", "race"}, {Rows({{"newcomer", "F", "A"}})}));
  auto decided = vault_->Decide(acme_, req);
  ASSERT_OK(decided);
  EXPECT_EQ(decided->outputs_size(), 2);
  EXPECT_EQ(decided->rows_already_decided(), 0);
}

TEST_F(VaultPostprocessTest, ReservedIdempotencyKeysAreRefused) {
  auto req = CountsRequest("vault:decide:art_x");
  EXPECT_THAT(vault_->NoisyCounts(acme_, req),
              StatusIs(absl::StatusCode::kInvalidArgument, "reserved"));
}

}  // namespace
}  // namespace fairvault::server::testing
