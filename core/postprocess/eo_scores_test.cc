// Tests of equalized odds from scores: the LP on exact histograms against brute force and
// against the binary post-processor (scores that take two values), constraint satisfaction,
// the decision floor's log-ratio bound, the noisy fit, and input validation.
#include "core/postprocess/eo_scores.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "core/postprocess/equalized_odds.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fairvault::core::postprocess {
namespace {

using ::fairvault::testing::StatusIs;

constexpr double kInf = std::numeric_limits<double>::infinity();

// A histogram with counts[(2a + y) * k + j] from per-(a, y) rows.
std::vector<int64_t> Hist(const std::vector<std::vector<int64_t>>& rows) {
  std::vector<int64_t> out;
  for (const auto& r : rows) out.insert(out.end(), r.begin(), r.end());
  return out;
}

int64_t Sum(const std::vector<int64_t>& v) {
  int64_t s = 0;
  for (int64_t x : v) s += x;
  return s;
}

// Exact error and rates of a decision rule p[a][j] on an exact histogram.
struct Evaluated {
  double error = 0;
  std::vector<double> fpr, tpr;
};
Evaluated Evaluate(const std::vector<int64_t>& h, int groups, int k,
                   const std::vector<std::vector<double>>& p) {
  Evaluated e;
  double m = static_cast<double>(Sum(h));
  for (int a = 0; a < groups; ++a) {
    double n0 = 0, n1 = 0, fp = 0, tp = 0;
    for (int j = 0; j < k; ++j) {
      n0 += h[EoScoreCell(a, 0, j, k)];
      n1 += h[EoScoreCell(a, 1, j, k)];
      fp += h[EoScoreCell(a, 0, j, k)] * p[a][j];
      tp += h[EoScoreCell(a, 1, j, k)] * p[a][j];
    }
    e.fpr.push_back(fp / n0);
    e.tpr.push_back(tp / n1);
    e.error += (fp + (n1 - tp)) / m;
  }
  return e;
}

std::vector<std::vector<double>> Rule(const EoScoresSolution& s) {
  std::vector<std::vector<double>> p;
  for (const auto& g : s.groups) p.push_back(g.p);
  return p;
}

const ScoreGrid kTwoBins{0, 1, 2};
const ScoreGrid kThreeBins{0, 1, 3};

TEST(EoScoresTest, UnconstrainedOptimumIsTheBayesRuleOfEachBin) {
  // gamma = 1 never binds: each bin is decided by its majority label.
  const auto h = Hist({{50, 30, 5}, {10, 20, 40}, {40, 10, 2}, {5, 25, 60}});
  EoScoresOptions options;
  options.gamma = 1;
  options.monotone = false;
  auto s = SolveEqualizedOddsFromScores(h, 2, kThreeBins, Sum(h), options);
  ASSERT_OK(s);
  EXPECT_THAT(s->groups[0].p, ::testing::ElementsAre(0, 0, 1));  // bin 1: 30 negatives, 20 positives
  EXPECT_THAT(s->groups[1].p, ::testing::ElementsAre(0, 1, 1));
  const Evaluated e = Evaluate(h, 2, 3, Rule(*s));
  EXPECT_NEAR(s->noisy_error, e.error, 1e-12);
  EXPECT_NEAR(e.error, (10.0 + 20 + 5 + 5 + 10 + 2) / Sum(h), 1e-12);
  EXPECT_TRUE(s->warnings.empty());  // exact counts: no noise warnings
}

// Brute force over p in {0, 0.05, ..., 1}^(2·2): the LP's optimum is feasible, and no grid point
// satisfying the constraints beats it.
TEST(EoScoresTest, ExactLpMatchesBruteForceOnASmallInstance) {
  const auto h = Hist({{60, 20}, {15, 45}, {30, 10}, {20, 40}});
  for (bool monotone : {false, true}) {
    for (double gamma : {0.0, 0.05, 0.2}) {
      EoScoresOptions options;
      options.gamma = gamma;
      options.monotone = monotone;
      auto s = SolveEqualizedOddsFromScores(h, 2, kTwoBins, Sum(h), options);
      ASSERT_OK(s);
      const Evaluated lp = Evaluate(h, 2, 2, Rule(*s));
      EXPECT_NEAR(lp.error, s->noisy_error, 1e-9);
      EXPECT_LE(std::abs(lp.fpr[0] - lp.fpr[1]), gamma + 1e-9);
      EXPECT_LE(std::abs(lp.tpr[0] - lp.tpr[1]), gamma + 1e-9);
      double best = kInf;
      const int steps = 20;
      for (int i0 = 0; i0 <= steps; ++i0) {
        for (int i1 = 0; i1 <= steps; ++i1) {
          for (int i2 = 0; i2 <= steps; ++i2) {
            for (int i3 = 0; i3 <= steps; ++i3) {
              std::vector<std::vector<double>> p = {{i0 / 20.0, i1 / 20.0}, {i2 / 20.0, i3 / 20.0}};
              if (monotone && (i0 > i1 || i2 > i3)) continue;
              const Evaluated e = Evaluate(h, 2, 2, p);
              if (std::abs(e.fpr[0] - e.fpr[1]) > gamma + 1e-12) continue;
              if (std::abs(e.tpr[0] - e.tpr[1]) > gamma + 1e-12) continue;
              best = std::min(best, e.error);
            }
          }
        }
      }
      EXPECT_LE(lp.error, best + 1e-9) << "gamma " << gamma << " monotone " << monotone;
    }
  }
}

// Scores taking two values are a binary classifier: without the monotone constraint the LP is the
// binary post-processor's LP (ALGORITHMS.md §1) at epsilon = inf.
TEST(EoScoresTest, TwoBinsAgreeWithTheBinaryPostProcessorWithoutNoise) {
  const auto h = Hist({{600, 150}, {90, 260}, {300, 80}, {70, 120}, {200, 90}, {30, 95}});
  EoCounts binary;
  binary.num_groups = 3;
  binary.n.assign(12, 0);
  for (int a = 0; a < 3; ++a) {
    for (int y = 0; y < 2; ++y) {
      for (int yhat = 0; yhat < 2; ++yhat) binary.at(yhat, a, y) = h[EoScoreCell(a, y, yhat, 2)];
    }
  }
  for (bool all_pairs : {false, true}) {
    for (double gamma : {0.0, 0.02, 0.1}) {
      EoOptions eo;
      eo.gamma = gamma;
      eo.epsilon = kInf;
      eo.m = Sum(h);
      eo.all_pairs = all_pairs;
      auto expected = SolveEqualizedOddsLp(binary, eo);
      ASSERT_OK(expected);
      EoScoresOptions options;
      options.gamma = gamma;
      options.all_pairs = all_pairs;
      options.monotone = false;
      auto s = SolveEqualizedOddsFromScores(h, 3, kTwoBins, Sum(h), options);
      ASSERT_OK(s);
      EXPECT_NEAR(s->noisy_error, expected->noisy_error, 1e-9);
      for (int a = 0; a < 3; ++a) {
        EXPECT_NEAR(s->groups[a].derived_fpr, Evaluate(h, 3, 2, Rule(*s)).fpr[a], 1e-12);
      }
    }
  }
}

TEST(EoScoresTest, RandomHistogramsSatisfyTheConstraintsFloorAndMonotonicity) {
  std::mt19937_64 gen(7);
  std::uniform_int_distribution<int64_t> count(0, 200);
  const ScoreGrid grid{0, 1, 12};
  for (int trial = 0; trial < 20; ++trial) {
    const int groups = 2 + trial % 3;
    std::vector<int64_t> h(2 * groups * grid.k);
    for (auto& c : h) c = count(gen);
    EoScoresOptions options;
    options.gamma = 0.01 * (trial % 4);
    options.all_pairs = trial % 2 == 1;
    options.decision_floor = trial % 5 == 0 ? 0 : 0.05;
    auto s = SolveEqualizedOddsFromScores(h, groups, grid, Sum(h), options);
    ASSERT_OK(s);
    const Evaluated e = Evaluate(h, groups, grid.k, Rule(*s));
    EXPECT_NEAR(e.error, s->noisy_error, 1e-9);
    for (int a = 0; a < groups; ++a) {
      // Exact counts: the repaired pmf is the empirical one, so the LP's rates are the true ones.
      EXPECT_NEAR(s->groups[a].derived_fpr, e.fpr[a], 1e-9);
      EXPECT_NEAR(s->groups[a].derived_tpr, e.tpr[a], 1e-9);
      for (int j = 0; j < grid.k; ++j) {
        EXPECT_GE(s->groups[a].p[j], options.decision_floor);
        EXPECT_LE(s->groups[a].p[j], 1 - options.decision_floor);
        if (j > 0) {
          EXPECT_GE(s->groups[a].p[j], s->groups[a].p[j - 1]);
        }
      }
      for (int b = 0; b < a; ++b) {
        if (!options.all_pairs && b != 0) continue;
        EXPECT_LE(std::abs(e.fpr[a] - e.fpr[b]), options.gamma + 1e-7);
        EXPECT_LE(std::abs(e.tpr[a] - e.tpr[b]), options.gamma + 1e-7);
      }
    }
  }
}

// What Decide charges: max over bins, outcomes and group pairs of |log P(out|j,a) − log P(out|j,b)|.
double LogRatioBound(const EoScoresSolution& s) {
  double bound = 0;
  for (size_t a = 0; a < s.groups.size(); ++a) {
    for (size_t b = 0; b < s.groups.size(); ++b) {
      for (size_t j = 0; j < s.groups[a].p.size(); ++j) {
        const double pa = s.groups[a].p[j], pb = s.groups[b].p[j];
        bound = std::max({bound, std::abs(std::log(pa) - std::log(pb)),
                          std::abs(std::log1p(-pa) - std::log1p(-pb))});
      }
    }
  }
  return bound;
}

TEST(EoScoresTest, DecisionFloorMakesTheLogRatioBoundFinite) {
  // Group 1's scores are much higher: the unfloored LP gives deterministic decisions that differ
  // between the groups in some bin (an infinite log-ratio).
  const auto h = Hist({{80, 40, 10, 2}, {5, 10, 30, 40}, {10, 20, 60, 30}, {2, 5, 20, 80}});
  const ScoreGrid grid{0, 1, 4};
  EoScoresOptions options;
  options.gamma = 0.01;
  auto unfloored = SolveEqualizedOddsFromScores(h, 2, grid, Sum(h), options);
  ASSERT_OK(unfloored);
  EXPECT_TRUE(std::isinf(LogRatioBound(*unfloored)));
  for (double floor : {0.01, 0.1, 0.3}) {
    options.decision_floor = floor;
    auto s = SolveEqualizedOddsFromScores(h, 2, grid, Sum(h), options);
    ASSERT_OK(s);
    const double bound = LogRatioBound(*s);
    EXPECT_TRUE(std::isfinite(bound));
    EXPECT_LE(bound, std::log((1 - floor) / floor) + 1e-12);
    EXPECT_GE(s->noisy_error, unfloored->noisy_error - 1e-12);  // a floor can only cost
  }
}

TEST(EoScoresTest, NoisyFitReleasesOneDrawPerCellAndZeroNoiseIsExact) {
  const auto h = Hist({{50, 30, 5}, {10, 20, 40}, {40, 10, 2}, {5, 25, 60}});
  EoScoresOptions options;
  options.gamma = 0.02;
  std::mt19937_64 gen(1);
  std::vector<int64_t> noisy;
  auto zero = FitEqualizedOddsFromScores(h, 2, kThreeBins, Sum(h), options, *dp::MakeZeroNoise(),
                                         gen, &noisy);
  ASSERT_OK(zero);
  EXPECT_EQ(noisy, h);
  auto exact = SolveEqualizedOddsFromScores(h, 2, kThreeBins, Sum(h), options);
  ASSERT_OK(exact);
  EXPECT_EQ(zero->noisy_error, exact->noisy_error);

  auto laplace = dp::MakeDiscreteLaplaceNoise(2.0);
  ASSERT_OK(laplace);
  auto fit = FitEqualizedOddsFromScores(h, 2, kThreeBins, Sum(h), options, **laplace, gen, &noisy);
  ASSERT_OK(fit);
  EXPECT_EQ(noisy.size(), h.size());
  EXPECT_NE(noisy, h);  // P(all 12 draws are 0) = tanh(1/4)^12 < 1e-7
  // Small noisy groups are named, and gamma = 0 would warn; here each group is far from noise.
  for (const auto& g : fit->groups) {
    double total = 0;
    for (double v : g.pmf_positive) total += v;
    EXPECT_NEAR(total, 1, 1e-12);
  }
  EXPECT_THAT(FitEqualizedOddsFromScores(h, 2, kThreeBins, Sum(h) + 1, options,
                                         *dp::MakeZeroNoise(), gen, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, "m ("));
}

TEST(EoScoresTest, CountsFollowTheCellLayoutAndRefuseBadRows) {
  const std::vector<double> scores = {0.1, 0.9, 0.5, -3, 0.7};
  const std::vector<int> labels = {0, 1, 1, 0, 1};
  const std::vector<int> groups = {0, 0, 1, 1, 1};
  int64_t clipped = 0;
  auto counts = EoScoreCounts(scores, labels, groups, 2, kTwoBins, &clipped);
  ASSERT_OK(counts);
  EXPECT_EQ(clipped, 1);
  EXPECT_THAT(*counts, ::testing::ElementsAre(1, 0, 0, 1, 1, 0, 0, 2));
  EXPECT_THAT(EoScoreCounts(scores, {0, 1, 2, 0, 1}, groups, 2, kTwoBins),
              StatusIs(absl::StatusCode::kInvalidArgument, "label at row 2"));
  EXPECT_THAT(EoScoreCounts(scores, labels, {0, 0, 2, 1, 1}, 2, kTwoBins),
              StatusIs(absl::StatusCode::kInvalidArgument, "group at row 2"));
  EXPECT_THAT(EoScoreCounts({0.1, NAN}, {0, 1}, {0, 1}, 2, kTwoBins),
              StatusIs(absl::StatusCode::kInvalidArgument, "score at row 1"));
}

TEST(EoScoresTest, RejectsBadOptionsAndSizes) {
  const auto h = Hist({{1, 1}, {1, 1}, {1, 1}, {1, 1}});
  EoScoresOptions options;
  options.gamma = -0.1;
  EXPECT_THAT(SolveEqualizedOddsFromScores(h, 2, kTwoBins, 8, options),
              StatusIs(absl::StatusCode::kInvalidArgument, "gamma"));
  options.gamma = 0;
  options.decision_floor = 0.5;
  EXPECT_THAT(SolveEqualizedOddsFromScores(h, 2, kTwoBins, 8, options),
              StatusIs(absl::StatusCode::kInvalidArgument, "decision_floor"));
  options.decision_floor = NAN;
  EXPECT_THAT(SolveEqualizedOddsFromScores(h, 2, kTwoBins, 8, options),
              StatusIs(absl::StatusCode::kInvalidArgument, "decision_floor"));
  options.decision_floor = 0;
  EXPECT_THAT(SolveEqualizedOddsFromScores(h, 2, kThreeBins, 8, options),
              StatusIs(absl::StatusCode::kInvalidArgument, "cells"));
  EXPECT_THAT(SolveEqualizedOddsFromScores(h, 2, kTwoBins, 0, options),
              StatusIs(absl::StatusCode::kInvalidArgument, "m must be > 0"));
  options.all_pairs = true;
  EXPECT_THAT(CheckEoScoresProblemSize(400, ScoreGrid{0, 1, 1000}, options),
              StatusIs(absl::StatusCode::kInvalidArgument, "fewer bins or groups"));
  EXPECT_OK(CheckEoScoresProblemSize(2, ScoreGrid{0, 1, 1000}, options));
}

}  // namespace
}  // namespace fairvault::core::postprocess
