// Tests for the private fairness audits: exact agreement with metrics.h without noise,
// empirical coverage of the bootstrap intervals under real discrete Laplace noise, interval
// widths against ε and n, regressor histograms/means/KS, and argument validation.
// Over 500 lines as one file: the coverage suites share the noisy populations they draw.
#include "core/fairness/audit.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "core/dp/granularity.h"
#include "core/dp/integer_noise.h"
#include "core/fairness/metrics.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fairvault::core::fairness {
namespace {

using ::fairvault::testing::StatusIs;
using ::testing::HasSubstr;

int64_t NoNoise(absl::BitGenRef) { return 0; }

NoiseDraw DrawFrom(const dp::IntegerNoise& noise) {
  return [&noise](absl::BitGenRef gen) { return noise.AddNoise(0, gen); };
}

std::unique_ptr<dp::IntegerNoise> Laplace(double scale) {
  auto noise = dp::MakeDiscreteLaplaceNoise(scale);
  EXPECT_TRUE(noise.ok()) << noise.status();
  return *std::move(noise);
}

// n[ŷ][a][y] at ((ŷ*K)+a)*2+y, the EoCounts layout.
std::vector<int64_t> EoCountsOf(const std::vector<int>& prediction, const std::vector<int>& label,
                                const std::vector<int>& group, int num_groups) {
  std::vector<int64_t> n(4 * num_groups, 0);
  for (size_t i = 0; i < prediction.size(); ++i) {
    ++n[(prediction[i] * num_groups + group[i]) * 2 + label[i]];
  }
  return n;
}

double Width(const Interval& interval) { return interval.hi - interval.lo; }

// Per-group population model of a binary classifier.
struct ClassifierModel {
  int rows;
  double base_rate;  // P(y=1)
  double tpr;        // P(ŷ=1 | y=1)
  double fpr;        // P(ŷ=1 | y=0)
};

std::vector<int64_t> SampleClassifierCounts(const std::vector<ClassifierModel>& model,
                                            std::mt19937_64& gen) {
  const int k = static_cast<int>(model.size());
  std::vector<int64_t> n(4 * k, 0);
  std::uniform_real_distribution<double> u(0, 1);
  for (int a = 0; a < k; ++a) {
    for (int i = 0; i < model[a].rows; ++i) {
      const int y = u(gen) < model[a].base_rate;
      const int yhat = u(gen) < (y ? model[a].tpr : model[a].fpr);
      ++n[(yhat * k + a) * 2 + y];
    }
  }
  return n;
}

// Exact regressor release without noise: counts[a*k + j] and sums of (score - lo) on the grid.
struct RegressorData {
  std::vector<int64_t> counts;
  std::vector<int64_t> sum_steps;
  std::vector<double> exact_sum;  // Σ (score - lo) per group
};

RegressorData Tabulate(const std::vector<std::vector<double>>& scores, double lo, double hi, int k,
                       double granularity) {
  RegressorData data;
  const int groups = static_cast<int>(scores.size());
  data.counts.assign(groups * k, 0);
  const double width = (hi - lo) / k;
  for (int a = 0; a < groups; ++a) {
    double sum = 0;
    for (double s : scores[a]) {
      const int j = std::clamp(static_cast<int>(std::floor((s - lo) / width)), 0, k - 1);
      ++data.counts[a * k + j];
      sum += s - lo;
    }
    data.exact_sum.push_back(sum);
    auto steps = dp::SnapToGrid(sum, granularity);
    EXPECT_TRUE(steps.ok()) << steps.status();
    data.sum_steps.push_back(*steps);
  }
  return data;
}

TEST(AuditOptionsTest, AcceptsDefaultsAndBounds) {
  EXPECT_OK(AuditOptions{}.Validate());
  EXPECT_OK((AuditOptions{0.5, 100}.Validate()));
  EXPECT_OK((AuditOptions{0.999, 100000}.Validate()));
}

TEST(AuditOptionsTest, RejectsBadConfidenceAndDraws) {
  for (double confidence : {0.0, 1.0, -0.1, 1.5, std::nan("")}) {
    EXPECT_THAT((AuditOptions{confidence, 1000}.Validate()),
                StatusIs(absl::StatusCode::kInvalidArgument, "confidence"))
        << confidence;
  }
  for (int draws : {0, 99, 100001}) {
    EXPECT_THAT((AuditOptions{0.9, draws}.Validate()),
                StatusIs(absl::StatusCode::kInvalidArgument, "bootstrap_draws"))
        << draws;
  }
}

TEST(AuditClassifierTest, ZeroNoiseEstimatesEqualMetricsRates) {
  // Three groups with different rates; every group has positives and negatives, so metrics.h
  // skips none of them and the violations must agree too.
  std::vector<int> prediction, label, group;
  std::mt19937_64 data_gen(7);
  std::uniform_real_distribution<double> u(0, 1);
  const double base[3] = {0.3, 0.5, 0.6}, tpr[3] = {0.8, 0.6, 0.7}, fpr[3] = {0.1, 0.3, 0.25};
  for (int a = 0; a < 3; ++a) {
    for (int i = 0; i < 200 + 50 * a; ++i) {
      const int y = u(data_gen) < base[a];
      prediction.push_back(u(data_gen) < (y ? tpr[a] : fpr[a]));
      label.push_back(y);
      group.push_back(a);
    }
  }
  auto rates = ComputeGroupRates(prediction, label, group, 3);
  ASSERT_OK(rates);
  std::mt19937_64 gen(1);
  auto audit = AuditClassifier(EoCountsOf(prediction, label, group, 3), 3, 0, NoNoise,
                               AuditOptions{0.9, 200}, gen);
  ASSERT_OK(audit);
  ASSERT_EQ(audit->groups.size(), 3u);
  for (int a = 0; a < 3; ++a) {
    const ClassifierGroupAudit& g = audit->groups[a];
    const GroupRates& r = (*rates)[a];
    ASSERT_GT(r.positives, 0);
    ASSERT_GT(r.negatives, 0);
    EXPECT_EQ(g.selection_rate.estimate, r.selection_rate) << a;
    EXPECT_EQ(g.tpr.estimate, r.tpr) << a;
    EXPECT_EQ(g.fpr.estimate, r.fpr) << a;
    EXPECT_EQ(g.error.estimate, r.error) << a;
    EXPECT_EQ(g.noisy_rows, static_cast<double>(r.n)) << a;
    // Sampling error alone still gives a non-degenerate interval inside [0, 1].
    EXPECT_LT(g.tpr.lo, g.tpr.hi);
    EXPECT_GE(g.tpr.lo, 0);
    EXPECT_LE(g.tpr.hi, 1);
  }
  EXPECT_EQ(audit->demographic_parity_violation.estimate, DemographicParityViolation(*rates));
  EXPECT_EQ(audit->equalized_odds_violation.estimate, EqualizedOddsViolation(*rates));
}

TEST(AuditClassifierTest, ClampsNegativeCellsAndFloorsDenominators) {
  // Group 0: TP 8, FN 2, FP 1, TN 9. Group 1: noise drove its positives negative: no positives
  // after clamping, so TPR = 0/1 = 0, and the group still counts in the EO gap (skip nothing).
  const int k = 2;
  std::vector<int64_t> n(8, 0);
  auto at = [&](int yhat, int a, int y) -> int64_t& { return n[(yhat * k + a) * 2 + y]; };
  at(1, 0, 1) = 8, at(0, 0, 1) = 2, at(1, 0, 0) = 1, at(0, 0, 0) = 9;
  at(1, 1, 1) = -3, at(0, 1, 1) = -1, at(1, 1, 0) = 5, at(0, 1, 0) = 15;
  std::mt19937_64 gen(2);
  auto audit = AuditClassifier(n, k, 0, NoNoise, AuditOptions{0.9, 100}, gen);
  ASSERT_OK(audit);
  EXPECT_EQ(audit->groups[0].tpr.estimate, 0.8);
  EXPECT_EQ(audit->groups[1].tpr.estimate, 0.0);
  EXPECT_EQ(audit->groups[1].fpr.estimate, 0.25);
  EXPECT_EQ(audit->groups[1].noisy_rows, 16);  // raw sum: the negative cells count
  EXPECT_EQ(audit->groups[1].selection_rate.estimate, 0.25);
  EXPECT_EQ(audit->groups[1].error.estimate, 0.25);
  EXPECT_DOUBLE_EQ(audit->equalized_odds_violation.estimate, 0.8);
  EXPECT_DOUBLE_EQ(audit->demographic_parity_violation.estimate, 0.45 - 0.25);
}

TEST(AuditClassifierTest, EqualizedOddsSplitsIntoItsTprAndFprParts) {
  // Group 0: TPR 0.8, FPR 0.1; group 1: TPR 0.5, FPR 0.3. |dTPR| = 0.3 > |dFPR| = 0.2.
  const int k = 2;
  std::vector<int64_t> n(8, 0);
  auto at = [&](int yhat, int a, int y) -> int64_t& { return n[(yhat * k + a) * 2 + y]; };
  at(1, 0, 1) = 80, at(0, 0, 1) = 20, at(1, 0, 0) = 10, at(0, 0, 0) = 90;
  at(1, 1, 1) = 50, at(0, 1, 1) = 50, at(1, 1, 0) = 30, at(0, 1, 0) = 70;
  std::mt19937_64 gen(3);
  const auto laplace = Laplace(2.0);
  auto audit = AuditClassifier(n, k, 2.0, DrawFrom(*laplace), AuditOptions{0.95, 400}, gen);
  ASSERT_OK(audit);
  EXPECT_DOUBLE_EQ(audit->tpr_difference.estimate, 0.3);
  EXPECT_NEAR(audit->fpr_difference.estimate, 0.2, 1e-12);
  for (const Interval* part : {&audit->tpr_difference, &audit->fpr_difference}) {
    EXPECT_LE(part->lo, part->estimate);
    EXPECT_GE(part->hi, part->estimate);
    EXPECT_LT(part->lo, part->hi);  // noise and sampling: a real interval
  }
  // The violation is the larger part, bounds and all (the same simultaneous band).
  EXPECT_EQ(audit->equalized_odds_violation.estimate, audit->tpr_difference.estimate);
  EXPECT_EQ(audit->equalized_odds_violation.lo,
            std::max(audit->tpr_difference.lo, audit->fpr_difference.lo));
  EXPECT_EQ(audit->equalized_odds_violation.hi,
            std::max(audit->tpr_difference.hi, audit->fpr_difference.hi));
}

TEST(AuditClassifierTest, EmptyGroupGetsZeroRates) {
  std::vector<int64_t> n = {10, 0, 0, 0, 0, 0, 0, -2};  // K = 2, group 1 all <= 0
  std::mt19937_64 gen(3);
  auto audit = AuditClassifier(n, 2, 0, NoNoise, AuditOptions{0.9, 100}, gen);
  ASSERT_OK(audit);
  EXPECT_EQ(audit->groups[1].noisy_rows, -2);
  EXPECT_EQ(audit->groups[1].selection_rate.estimate, 0);
  EXPECT_EQ(audit->groups[1].tpr.estimate, 0);
  // An empty group has no rate: its intervals say nothing is known rather than [0, 0].
  EXPECT_EQ(audit->groups[1].selection_rate.lo, 0);
  EXPECT_EQ(audit->groups[1].selection_rate.hi, 1);
  EXPECT_EQ(audit->groups[1].tpr.lo, 0);
  EXPECT_EQ(audit->groups[1].tpr.hi, 1);
}

// Empirical coverage at 90% nominal over 300 independent datasets from a known population, each
// released with discrete Laplace noise at ε = 0.5 (counts: scale 2/ε; sums: L1 sensitivity
// 2(hi − lo), scale 2(hi − lo)/ε on a 2^-18 grid). Group 0 is small enough that sampling error
// and noise both matter (TPR on ≈100 positives: sampling sd ≈ 0.046, noise sd ≈ 0.043; mean of
// 600 scores U²: sampling sd ≈ 0.012, noise sd ≈ 0.013).
// 1. With true coverage 0.90 the number of covering trials is Binomial(300, 0.9): it falls
//    outside [240, 291] with probability 1e-6 per check (2.5e-4 at a true 0.87, 8e-4 at 0.93).
// 2. On the same datasets, an audit told the release had no noise must cover clearly less
//    often (measured ≈ 0.77 for the TPR, ≈ 0.70 for the mean, vs ≈ 0.90): asserting a gap of at
//    least 0.05 fails falsely with probability ≈ 1e-4 (the paired gap is ≈ 3.8 sd above 0.05).
// Seeds are fixed, so the outcome is deterministic; the probabilities are for a new seed.
TEST(AuditCoverageTest, TprAndMeanIntervalsCoverAtNominalRate) {
  const double epsilon = 0.5;
  const int trials = 300;
  const AuditOptions options{0.9, 300};
  const std::vector<ClassifierModel> model = {{250, 0.4, 0.7, 0.2}, {800, 0.3, 0.6, 0.1}};
  const double lo = 0, hi = 1;
  const int bins = 10;
  const double true_mean0 = 1.0 / 3;  // group 0 scores U², group 1 scores U
  auto count_noise = Laplace(2 / epsilon);
  auto granularity = dp::PowerOfTwoGranularity(2 * (hi - lo) / epsilon, 20);
  ASSERT_OK(granularity);
  auto sum_noise = Laplace(2 * (hi - lo) / epsilon / *granularity);

  std::mt19937_64 gen(20240601);
  std::uniform_real_distribution<double> u(0, 1);
  auto covers = [](const Interval& interval, double truth) {
    return interval.lo <= truth && truth <= interval.hi;
  };
  int tpr_covered = 0, mean_covered = 0, tpr_blind_covered = 0, mean_blind_covered = 0;
  int eo_covered = 0, dp_covered = 0, ks_covered = 0;
  double eo_width = 0, ks_width = 0;
  // True violations of the model: TPR and FPR gaps 0.1, selection rates 0.40 and 0.25; the
  // binned KS of U² against U on 10 bins is max_j (sqrt(j/10) − j/10), at j = 3.
  const double true_eo = 0.1, true_dp = 0.15, true_ks = std::sqrt(0.3) - 0.3;
  for (int t = 0; t < trials; ++t) {
    std::vector<int64_t> counts = SampleClassifierCounts(model, gen);
    for (int64_t& c : counts) c = count_noise->AddNoise(c, gen);
    auto classifier =
        AuditClassifier(counts, 2, count_noise->Scale(), DrawFrom(*count_noise), options, gen);
    ASSERT_OK(classifier);
    tpr_covered += covers(classifier->groups[0].tpr, 0.7);
    eo_covered += covers(classifier->equalized_odds_violation, true_eo);
    eo_width += Width(classifier->equalized_odds_violation) / trials;
    dp_covered += covers(classifier->demographic_parity_violation, true_dp);
    auto blind = AuditClassifier(counts, 2, 0, NoNoise, options, gen);
    ASSERT_OK(blind);
    tpr_blind_covered += covers(blind->groups[0].tpr, 0.7);

    std::vector<std::vector<double>> scores(2);
    for (int i = 0; i < 600; ++i) scores[0].push_back(std::pow(u(gen), 2));
    for (int i = 0; i < 800; ++i) scores[1].push_back(u(gen));
    RegressorData data = Tabulate(scores, lo, hi, bins, *granularity);
    for (int64_t& c : data.counts) c = count_noise->AddNoise(c, gen);
    for (int64_t& s : data.sum_steps) s = sum_noise->AddNoise(s, gen);
    auto regressor = AuditRegressor(data.counts, data.sum_steps, 2, lo, hi, bins, *granularity,
                                    DrawFrom(*count_noise), DrawFrom(*sum_noise), options, gen);
    ASSERT_OK(regressor);
    mean_covered += covers(regressor->groups[0].mean, true_mean0);
    ks_covered += covers(regressor->max_ks, true_ks);
    ks_width += Width(regressor->max_ks) / trials;
    auto regressor_blind = AuditRegressor(data.counts, data.sum_steps, 2, lo, hi, bins,
                                          *granularity, NoNoise, NoNoise, options, gen);
    ASSERT_OK(regressor_blind);
    mean_blind_covered += covers(regressor_blind->groups[0].mean, true_mean0);
  }
  const double tpr_coverage = static_cast<double>(tpr_covered) / trials;
  const double mean_coverage = static_cast<double>(mean_covered) / trials;
  // The per-group rate intervals are exact and conservative (count_interval.h): at least
  // nominal, and here at the top (measured 1.000); audit_coverage_test.cc covers small groups.
  EXPECT_GE(tpr_coverage, 0.80);
  EXPECT_GE(mean_coverage, 0.80);
  EXPECT_LE(mean_coverage, 0.97);
  EXPECT_GE(tpr_coverage - static_cast<double>(tpr_blind_covered) / trials, 0.05);
  EXPECT_GE(mean_coverage - static_cast<double>(mean_blind_covered) / trials, 0.05);
  std::printf("coverage at 90%%: TPR %.3f (noise-blind %.3f), mean %.3f (noise-blind %.3f)\n",
              tpr_coverage, static_cast<double>(tpr_blind_covered) / trials, mean_coverage,
              static_cast<double>(mean_blind_covered) / trials);
  // The max-over-pairs intervals come from simultaneous bands, so they are conservative: they
  // must cover at least at the nominal rate (same binomial bound as above, one-sided).
  std::printf(
      "coverage at 90%%: EO violation %.3f (mean width %.3f), DP violation %.3f, max KS %.3f "
      "(mean width %.3f)\n",
      static_cast<double>(eo_covered) / trials, eo_width, static_cast<double>(dp_covered) / trials,
      static_cast<double>(ks_covered) / trials, ks_width);
  EXPECT_GE(eo_covered, 240);
  EXPECT_GE(dp_covered, 240);
  EXPECT_GE(ks_covered, 240);
}

// With two identical groups the true violations are 0. Intervals that account for sampling
// and noise must reach down to 0 in at least the nominal share of trials (Binomial(200, ≥ 0.9)
// falls below 165 with probability < 1e-6), and must not collapse to [0, 0] when the estimate
// happens to be 0.
TEST(AuditCoverageTest, ViolationIntervalsReachZeroForIdenticalGroups) {
  const AuditOptions options{0.9, 300};
  const std::vector<ClassifierModel> model = {{500, 0.4, 0.7, 0.2}, {500, 0.4, 0.7, 0.2}};
  auto noise = Laplace(2 / 0.5);
  std::mt19937_64 gen(20240602);
  int eo_reaches_zero = 0, dp_reaches_zero = 0;
  for (int t = 0; t < 200; ++t) {
    std::vector<int64_t> counts = SampleClassifierCounts(model, gen);
    for (int64_t& c : counts) c = noise->AddNoise(c, gen);
    auto audit = AuditClassifier(counts, 2, noise->Scale(), DrawFrom(*noise), options, gen);
    ASSERT_OK(audit);
    for (const Interval* v :
         {&audit->equalized_odds_violation, &audit->demographic_parity_violation}) {
      EXPECT_LE(v->lo, v->estimate);
      EXPECT_GE(v->hi, v->estimate);
      EXPECT_GT(v->hi, 0.02);  // sampling sd of a TPR gap here is ≈ 0.04
    }
    eo_reaches_zero += audit->equalized_odds_violation.lo == 0;
    dp_reaches_zero += audit->demographic_parity_violation.lo == 0;
  }
  EXPECT_GE(eo_reaches_zero, 165);
  EXPECT_GE(dp_reaches_zero, 165);
}

// Expected counts of the model (no sampling), so only the audit's own draws vary.
std::vector<int64_t> ExpectedCounts(const std::vector<ClassifierModel>& model) {
  const int k = static_cast<int>(model.size());
  std::vector<int64_t> n(4 * k);
  for (int a = 0; a < k; ++a) {
    const ClassifierModel& m = model[a];
    const double pos = m.rows * m.base_rate, neg = m.rows - pos;
    n[(1 * k + a) * 2 + 1] = std::llround(pos * m.tpr);
    n[(0 * k + a) * 2 + 1] = std::llround(pos * (1 - m.tpr));
    n[(1 * k + a) * 2 + 0] = std::llround(neg * m.fpr);
    n[(0 * k + a) * 2 + 0] = std::llround(neg * (1 - m.fpr));
  }
  return n;
}

// Widths scale like sqrt(sampling variance + noise variance). The asserted factor 1.5 is far
// below the measured ratios (TPR: 4.7 for ε 0.5 → 0.05, 5.5 for n 1000 → 100; mean: 5.8 and
// 6.7), and with 2000 draws a width is estimated to within a few percent, so a false failure on
// another seed is practically impossible (< 1e-9).
TEST(AuditClassifierTest, IntervalsWidenAsEpsilonOrNShrinks) {
  const AuditOptions options{0.9, 2000};
  auto tpr_width = [&](int rows, double epsilon) {
    auto noise = Laplace(2 / epsilon);
    std::mt19937_64 gen(11);
    auto audit = AuditClassifier(ExpectedCounts({{rows, 0.4, 0.7, 0.2}, {rows, 0.4, 0.6, 0.1}}), 2,
                                 noise->Scale(), DrawFrom(*noise), options, gen);
    EXPECT_OK(audit);
    return Width(audit->groups[0].tpr);
  };
  const double base = tpr_width(1000, 0.5);
  EXPECT_GT(base, 0.02);
  EXPECT_GT(tpr_width(1000, 0.05), 1.5 * base);
  EXPECT_GT(tpr_width(100, 0.5), 1.5 * base);
}

TEST(AuditRegressorTest, IntervalsWidenAsEpsilonOrNShrinks) {
  const AuditOptions options{0.9, 2000};
  const double lo = 0, hi = 1;
  const int bins = 10;
  auto mean_width = [&](int rows, double epsilon) {
    // Deterministic scores: the quantiles of U², as if sampled without error.
    std::vector<std::vector<double>> scores(2);
    for (int i = 0; i < rows; ++i) {
      const double q = (i + 0.5) / rows;
      scores[0].push_back(q * q);
      scores[1].push_back(q);
    }
    auto granularity = dp::PowerOfTwoGranularity(2 * (hi - lo) / epsilon, 20);
    EXPECT_OK(granularity);
    RegressorData data = Tabulate(scores, lo, hi, bins, *granularity);
    auto count_noise = Laplace(2 / epsilon);
    auto sum_noise = Laplace(2 * (hi - lo) / epsilon / *granularity);
    std::mt19937_64 gen(12);
    auto audit = AuditRegressor(data.counts, data.sum_steps, 2, lo, hi, bins, *granularity,
                                DrawFrom(*count_noise), DrawFrom(*sum_noise), options, gen);
    EXPECT_OK(audit);
    return Width(audit->groups[0].mean);
  };
  const double base = mean_width(1000, 0.5);
  EXPECT_GT(base, 0.01);
  EXPECT_GT(mean_width(1000, 0.05), 1.5 * base);
  EXPECT_GT(mean_width(100, 0.5), 1.5 * base);
}

TEST(AuditRegressorTest, ZeroNoiseGivesEmpiricalPmfAndMean) {
  const double lo = -2, hi = 6, granularity = 1.0 / 1024;
  const int bins = 8;
  std::mt19937_64 data_gen(5);
  std::normal_distribution<double> normal(2, 1.5);
  std::vector<std::vector<double>> scores(3);
  for (int a = 0; a < 3; ++a) {
    for (int i = 0; i < 300 + 100 * a; ++i) {
      scores[a].push_back(std::clamp(normal(data_gen) + 0.5 * a, lo, hi));
    }
  }
  RegressorData data = Tabulate(scores, lo, hi, bins, granularity);
  std::mt19937_64 gen(6);
  auto audit = AuditRegressor(data.counts, data.sum_steps, 3, lo, hi, bins, granularity, NoNoise,
                              NoNoise, AuditOptions{0.9, 200}, gen);
  ASSERT_OK(audit);
  for (int a = 0; a < 3; ++a) {
    const RegressorGroupAudit& g = audit->groups[a];
    const double n = static_cast<double>(scores[a].size());
    EXPECT_EQ(g.noisy_rows, n);
    ASSERT_EQ(g.histogram.size(), static_cast<size_t>(bins));
    for (int j = 0; j < bins; ++j) {
      EXPECT_NEAR(g.histogram[j], data.counts[a * bins + j] / n, 1e-12) << a << " " << j;
    }
    // Snapping the sum moves it by at most granularity / 2, so the mean by granularity / (2n).
    const double true_mean = lo + data.exact_sum[a] / n;
    EXPECT_NEAR(g.mean.estimate, true_mean, granularity / (2 * n) + 1e-12) << a;
    EXPECT_LE(g.mean.lo, g.mean.hi);
    EXPECT_GE(g.mean.lo, lo);
    EXPECT_LE(g.mean.hi, hi);
  }
  EXPECT_GT(audit->max_ks.estimate, 0);
}

TEST(AuditRegressorTest, KsIsZeroForIdenticalAndOneForDisjointGroups) {
  const int bins = 6;
  // Identical histograms (and sums) in both groups.
  std::vector<int64_t> same = {5, 10, 20, 20, 10, 5, 5, 10, 20, 20, 10, 5};
  std::mt19937_64 gen(8);
  auto identical = AuditRegressor(same, {100, 100}, 2, 0, 6, bins, 1, NoNoise, NoNoise,
                                  AuditOptions{0.9, 100}, gen);
  ASSERT_OK(identical);
  EXPECT_EQ(identical->max_ks.estimate, 0);
  // 70 rows per group leave room for a sizeable KS distance between the true distributions:
  // the interval starts at 0 and does not collapse onto the estimate (a pivot interval would
  // be [0, 0] here). Two samples of 70 from one distribution differ by KS ≈ 0.2 at the 90th
  // percentile, so the upper end must be well above 0.1 and, with 6 bins, below 0.5.
  EXPECT_EQ(identical->max_ks.lo, 0);
  EXPECT_GT(identical->max_ks.hi, 0.1);
  EXPECT_LT(identical->max_ks.hi, 0.5);
  EXPECT_EQ(identical->groups[0].histogram, identical->groups[1].histogram);
  EXPECT_EQ(identical->groups[0].mean.estimate, identical->groups[1].mean.estimate);
  // Group 0 below bin 3, group 1 from bin 3 on.
  std::vector<int64_t> disjoint = {4, 7, 9, 0, 0, 0, 0, 0, 0, 3, 8, 1};
  auto apart = AuditRegressor(disjoint, {20, 48}, 2, 0, 6, bins, 1, NoNoise, NoNoise,
                              AuditOptions{0.9, 100}, gen);
  ASSERT_OK(apart);
  EXPECT_EQ(apart->max_ks.estimate, 1);
  EXPECT_EQ(apart->max_ks.hi, 1);
  // A single group has no pairs.
  auto single =
      AuditRegressor({1, 2, 3}, {4}, 1, 0, 3, 3, 1, NoNoise, NoNoise, AuditOptions{0.9, 100}, gen);
  ASSERT_OK(single);
  EXPECT_EQ(single->max_ks.estimate, 0);
}

// One group of 1000 scores, all 0.8, on 100 bins at ε = 1 (count noise scale 4, sums at ε/2):
// 99 bins are empty, so a row count that clamped each noisy bin at 0 first would be ≈ 1000 +
// 99·E[max(noise, 0)] ≈ 1200 and put the mean near 0.67. With the raw sum the estimate is
// unbiased: its sd is ≈ 0.8·sqrt(100·2·4²)/1000 ≈ 0.045, so the mean of 200 trials is within
// 0.015 of 0.8 (about 5 standard errors) and the 90% interval covers 0.8 in at least 160 of
// 200 trials (Binomial(200, 0.9) falls below 160 with probability < 1e-4).
TEST(AuditRegressorTest, MeanIsUnbiasedWhenMostBinsAreEmpty) {
  const double lo = 0, hi = 1, epsilon = 1;
  const int bins = 100, trials = 200;
  auto count_noise = Laplace(2 / (epsilon / 2));
  auto granularity = dp::PowerOfTwoGranularity(hi - lo, 20);
  ASSERT_OK(granularity);
  auto sum_noise = Laplace(2 * (hi - lo) / (epsilon / 2) / *granularity);
  std::mt19937_64 gen(77);
  double mean_of_estimates = 0;
  int covered = 0;
  for (int t = 0; t < trials; ++t) {
    RegressorData data = Tabulate({std::vector<double>(1000, 0.8)}, lo, hi, bins, *granularity);
    for (int64_t& c : data.counts) c = count_noise->AddNoise(c, gen);
    for (int64_t& s : data.sum_steps) s = sum_noise->AddNoise(s, gen);
    auto audit =
        AuditRegressor(data.counts, data.sum_steps, 1, lo, hi, bins, *granularity,
                       DrawFrom(*count_noise), DrawFrom(*sum_noise), AuditOptions{0.9, 200}, gen);
    ASSERT_OK(audit);
    mean_of_estimates += audit->groups[0].mean.estimate / trials;
    covered += audit->groups[0].mean.lo <= 0.8 && 0.8 <= audit->groups[0].mean.hi;
  }
  EXPECT_NEAR(mean_of_estimates, 0.8, 0.015);
  EXPECT_GE(covered, 160);
}

// Issue 8: tiny groups. Released with real noise (ε = 0.5), a group of 2 rows has noisy
// totals near 0 and most bootstrap means clamp at an end of the range; the interval must
// still never be a single point (it falls back to [lo, hi] where the pivot would collapse).
TEST(AuditRegressorTest, MeanIntervalOfATinyGroupNeverCollapses) {
  const double epsilon = 0.5, lo = 0, hi = 1;
  const int bins = 4;
  auto granularity = dp::PowerOfTwoGranularity(hi - lo, 20);
  ASSERT_OK(granularity);
  auto count_noise = Laplace(2 / (epsilon / 2));
  auto sum_noise = Laplace(2 * (hi - lo) / (epsilon / 2) / *granularity);
  std::mt19937_64 gen(808);
  int zero_width = 0;
  for (int t = 0; t < 200; ++t) {
    RegressorData data = Tabulate({{0.9, 0.95}, {0.2, 0.4, 0.6}}, lo, hi, bins, *granularity);
    for (int64_t& c : data.counts) c = count_noise->AddNoise(c, gen);
    for (int64_t& s : data.sum_steps) s = sum_noise->AddNoise(s, gen);
    auto audit = AuditRegressor(data.counts, data.sum_steps, 2, lo, hi, bins, *granularity,
                                DrawFrom(*count_noise), DrawFrom(*sum_noise),
                                AuditOptions{0.9, 100}, gen);
    ASSERT_OK(audit);
    for (const RegressorGroupAudit& g : audit->groups) {
      zero_width += !(g.mean.hi > g.mean.lo);
      EXPECT_LE(g.mean.lo, g.mean.estimate);
      EXPECT_GE(g.mean.hi, g.mean.estimate);
    }
  }
  EXPECT_EQ(zero_width, 0);
}

TEST(AuditRegressorTest, RepairsNegativeNoisyBinsAndClampsMean) {
  // Noisy bins with a negative cell: the histogram is still a pmf; a sum beyond hi clamps.
  std::mt19937_64 gen(9);
  auto audit = AuditRegressor({10, -4, 6, 8}, {1000}, 1, 0, 4, 4, 1, NoNoise, NoNoise,
                              AuditOptions{0.9, 100}, gen);
  ASSERT_OK(audit);
  double total = 0;
  for (double p : audit->groups[0].histogram) {
    EXPECT_GE(p, 0);
    total += p;
  }
  EXPECT_NEAR(total, 1, 1e-12);
  EXPECT_EQ(audit->groups[0].noisy_rows, 20);  // raw sum: the negative bin counts
  EXPECT_EQ(audit->groups[0].mean.estimate, 4);
}

// The audit depends on the scores only through (score - lo) / (hi - lo): on [2^700, 2^701] it
// must give the intervals it gives on [0, 1], mapped. (Centres squared in the scores' own units
// overflowed to infinity there, and the bootstrap's sums became NaN: found by fuzz_spending.)
TEST(AuditRegressorTest, AFarRangeGivesTheSameAuditMapped) {
  const std::vector<int64_t> counts = {12, 30, 25, 8, 3, 9, 20, 31};
  const AuditOptions options{0.9, 200};
  auto sum_noise = Laplace(2.0 * (1 << 20) / 0.5);
  auto audit_on = [&](double lo, double hi, const std::vector<int64_t>& sum_steps) {
    auto granularity = dp::PowerOfTwoGranularity(hi - lo, 20);
    EXPECT_OK(granularity);
    std::mt19937_64 gen(31);
    auto audit = AuditRegressor(counts, sum_steps, 2, lo, hi, 4, *granularity, NoNoise,
                                DrawFrom(*sum_noise), options, gen);
    EXPECT_OK(audit);
    return *std::move(audit);
  };
  const std::vector<int64_t> sum_steps = {int64_t{30} << 20, int64_t{40} << 20};
  const RegressorAudit near = audit_on(0, 1, sum_steps);
  const double lo = std::ldexp(1.0, 700), scale = lo;
  const RegressorAudit far = audit_on(lo, 2 * lo, sum_steps);
  for (int a = 0; a < 2; ++a) {
    const Interval& n = near.groups[a].mean;
    const Interval& f = far.groups[a].mean;
    EXPECT_GT(n.hi, n.lo) << a;
    EXPECT_NEAR((f.estimate - lo) / scale, n.estimate, 1e-12) << a;
    EXPECT_NEAR((f.lo - lo) / scale, n.lo, 1e-12) << a;
    EXPECT_NEAR((f.hi - lo) / scale, n.hi, 1e-12) << a;
  }
  EXPECT_EQ(far.max_ks.lo, near.max_ks.lo);
  EXPECT_EQ(far.max_ks.hi, near.max_ks.hi);
  // A noise draw as large as an int64 holds, added to a bootstrap sum: the sum saturates (int64
  // arithmetic overflowed here, which the sanitizer build's UBSan stops), so every bootstrap
  // mean sits at hi and the interval falls back to the whole range.
  std::mt19937_64 gen(32);
  auto extreme = AuditRegressor(
      counts, sum_steps, 2, 0, 1, 4, std::ldexp(1.0, -20), NoNoise,
      [](absl::BitGenRef) { return std::numeric_limits<int64_t>::max(); }, options, gen);
  ASSERT_OK(extreme);
  for (const RegressorGroupAudit& g : extreme->groups) {
    EXPECT_EQ(g.mean.lo, 0);
    EXPECT_EQ(g.mean.hi, 1);
  }
  EXPECT_THAT(AuditRegressor(counts, sum_steps, 2, -1e308, 1e308, 4, 1, NoNoise, NoNoise, options,
                             gen)
                  .status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "hi - lo finite"));
}

// The bootstrap draws a group's sum with the variance of its scores: from the repaired
// histogram at the bin centres plus w²/12 within a bin. For scores spread evenly over [0, 1]
// that is the uniform's variance 1/12 whatever the bin count (one bin: all of it from the w²/12
// term), so the 90% interval of the mean of n = 400 is 2 · 1.645 · sqrt(1/12) / sqrt(400) =
// 0.0475 wide. 2000 bootstrap draws estimate the 5% and 95% quantiles to about ±3% of that
// width; the tolerance is ±10%.
TEST(AuditRegressorTest, TheSpreadOfAnEvenGroupIsTheUniformsForAnyBinCount) {
  const double n = 400, granularity = std::ldexp(1.0, -20);
  const double expected_width = 2 * 1.6448536 * std::sqrt(1.0 / 12) / std::sqrt(n);
  for (int bins : {1, 2, 4, 16}) {
    SCOPED_TRACE(bins);
    const std::vector<int64_t> counts(bins, static_cast<int64_t>(n) / bins);
    const std::vector<int64_t> sum_steps = {std::llround(n * 0.5 / granularity)};
    std::mt19937_64 gen(41);
    auto audit = AuditRegressor(counts, sum_steps, 1, 0, 1, bins, granularity, NoNoise, NoNoise,
                                AuditOptions{0.9, 2000}, gen);
    ASSERT_OK(audit);
    const Interval& mean = audit->groups[0].mean;
    EXPECT_DOUBLE_EQ(mean.estimate, 0.5);
    EXPECT_NEAR(Width(mean), expected_width, 0.1 * expected_width);
  }
}

TEST(AuditClassifierTest, RejectsBadArguments) {
  std::mt19937_64 gen(10);
  const std::vector<int64_t> ok(8, 5);
  EXPECT_THAT(AuditClassifier(ok, 0, 0, NoNoise, AuditOptions{}, gen),
              StatusIs(absl::StatusCode::kInvalidArgument, "num_groups"));
  EXPECT_THAT(AuditClassifier(std::vector<int64_t>(7, 5), 2, 0, NoNoise, AuditOptions{}, gen),
              StatusIs(absl::StatusCode::kInvalidArgument, "noisy_counts must have 4"));
  EXPECT_THAT(AuditClassifier(ok, 2, 0, NoiseDraw(), AuditOptions{}, gen),
              StatusIs(absl::StatusCode::kInvalidArgument, "noise must be set"));
  EXPECT_THAT(AuditClassifier(ok, 2, 0, NoNoise, AuditOptions{1.0, 1000}, gen),
              StatusIs(absl::StatusCode::kInvalidArgument, "confidence"));
  EXPECT_THAT(AuditClassifier(ok, 2, 0, NoNoise, AuditOptions{0.9, 10}, gen),
              StatusIs(absl::StatusCode::kInvalidArgument, "bootstrap_draws"));
  std::vector<int64_t> huge = ok;
  huge[3] = int64_t{1} << 60;
  EXPECT_THAT(AuditClassifier(huge, 2, 0, NoNoise, AuditOptions{}, gen),
              StatusIs(absl::StatusCode::kInvalidArgument, "noisy_counts[3]"));
}

TEST(AuditRegressorTest, RejectsBadArguments) {
  std::mt19937_64 gen(11);
  const std::vector<int64_t> counts(6, 5), sums(2, 10);
  const AuditOptions options{0.9, 100};
  auto audit = [&](absl::Span<const int64_t> c, absl::Span<const int64_t> s, int groups, double lo,
                   double hi, int k, double granularity, const NoiseDraw& count_noise,
                   const NoiseDraw& sum_noise, const AuditOptions& o) {
    return AuditRegressor(c, s, groups, lo, hi, k, granularity, count_noise, sum_noise, o, gen)
        .status();
  };
  EXPECT_OK(audit(counts, sums, 2, 0, 1, 3, 0.5, NoNoise, NoNoise, options));
  EXPECT_THAT(audit(counts, sums, 0, 0, 1, 3, 0.5, NoNoise, NoNoise, options),
              StatusIs(absl::StatusCode::kInvalidArgument, "num_groups"));
  EXPECT_THAT(audit(counts, sums, 2, 0, 1, 0, 0.5, NoNoise, NoNoise, options),
              StatusIs(absl::StatusCode::kInvalidArgument, "k must be"));
  EXPECT_THAT(audit(counts, sums, 2, 1, 1, 3, 0.5, NoNoise, NoNoise, options),
              StatusIs(absl::StatusCode::kInvalidArgument, "lo and hi"));
  EXPECT_THAT(audit(counts, sums, 2, 0, INFINITY, 3, 0.5, NoNoise, NoNoise, options),
              StatusIs(absl::StatusCode::kInvalidArgument, "lo and hi"));
  EXPECT_THAT(audit(counts, sums, 2, 0, 1, 3, 0, NoNoise, NoNoise, options),
              StatusIs(absl::StatusCode::kInvalidArgument, "sum_granularity"));
  EXPECT_THAT(audit(counts, sums, 2, 0, 1, 4, 0.5, NoNoise, NoNoise, options),
              StatusIs(absl::StatusCode::kInvalidArgument, "noisy_counts must have"));
  EXPECT_THAT(audit(counts, std::vector<int64_t>(3, 1), 2, 0, 1, 3, 0.5, NoNoise, NoNoise, options),
              StatusIs(absl::StatusCode::kInvalidArgument, "noisy_sum_steps must have"));
  EXPECT_THAT(audit(counts, sums, 2, 0, 1, 3, 0.5, NoiseDraw(), NoNoise, options),
              StatusIs(absl::StatusCode::kInvalidArgument, "count_noise"));
  EXPECT_THAT(audit(counts, sums, 2, 0, 1, 3, 0.5, NoNoise, NoiseDraw(), options),
              StatusIs(absl::StatusCode::kInvalidArgument, "sum_noise"));
  EXPECT_THAT(audit(counts, sums, 2, 0, 1, 3, 0.5, NoNoise, NoNoise, AuditOptions{0.9, 100001}),
              StatusIs(absl::StatusCode::kInvalidArgument, "bootstrap_draws"));
  EXPECT_THAT(audit(counts, {10, -(int64_t{1} << 53)}, 2, 0, 1, 3, 0.5, NoNoise, NoNoise, options),
              StatusIs(absl::StatusCode::kInvalidArgument, "noisy_sum_steps[1]"));
}

}  // namespace
}  // namespace fairvault::core::fairness
