// Statistical demonstration for issue 8 §3: on 20,000 subjects with one group of 30, the default
// min_group_count keeps the tiny group's predictions in every run, the equalized-odds violation
// over the resolvable groups falls, and no resolvable group ends further from the others than
// without post-processing; without the policy the tiny group is re-mapped from noise.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <random>
#include <vector>

#include "absl/strings/str_format.h"
#include "core/dp/integer_noise.h"
#include "core/postprocess/equalized_odds.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fairvault::core::postprocess {
namespace {

struct GroupSpec {
  int64_t n;
  double base, tpr, fpr;
};

// Three large groups with unequal error rates and one group of 30 (0.15% of the rows).
constexpr std::array<GroupSpec, 4> kGroups = {{{9985, 0.40, 0.85, 0.10},
                                               {5991, 0.30, 0.65, 0.25},
                                               {3994, 0.50, 0.75, 0.15},
                                               {30, 0.30, 0.60, 0.20}}};
constexpr int kTiny = 3;
constexpr int kK = 4;

EoCounts ExactTable() {
  EoCounts c;
  c.num_groups = kK;
  c.n.assign(4 * kK, 0);
  for (int a = 0; a < kK; ++a) {
    const GroupSpec& g = kGroups[a];
    const int64_t pos = std::llround(g.base * g.n), neg = g.n - pos;
    const int64_t tp = std::llround(g.tpr * pos), fp = std::llround(g.fpr * neg);
    c.at(1, a, 1) = tp;
    c.at(0, a, 1) = pos - tp;
    c.at(1, a, 0) = fp;
    c.at(0, a, 0) = neg - fp;
  }
  return c;
}

struct Rates {
  double fpr, tpr, error;
};

// True rates of the derived predictor (expected over its coins) from the exact table.
std::vector<Rates> TrueRates(const EoCounts& c, const std::vector<EoGroupResult>* p) {
  std::vector<Rates> out;
  for (int a = 0; a < c.num_groups; ++a) {
    const double p0 = p ? (*p)[a].p0 : 0.0, p1 = p ? (*p)[a].p1 : 1.0;
    const double neg = c.at(0, a, 0) + c.at(1, a, 0), pos = c.at(0, a, 1) + c.at(1, a, 1);
    const double fp = c.at(1, a, 0) * p1 + c.at(0, a, 0) * p0;
    const double tp = c.at(1, a, 1) * p1 + c.at(0, a, 1) * p0;
    out.push_back({fp / neg, tp / pos, (fp + pos - tp) / (neg + pos)});
  }
  return out;
}

double Gap(const Rates& a, const Rates& b) {
  return std::max(std::abs(a.fpr - b.fpr), std::abs(a.tpr - b.tpr));
}

// Largest gap between `a` and any other member of `set`.
double GapToOthers(const std::vector<Rates>& r, int a, const std::vector<int>& set) {
  double gap = 0;
  for (int b : set) {
    if (b != a) gap = std::max(gap, Gap(r[a], r[b]));
  }
  return gap;
}

double Violation(const std::vector<Rates>& r, const std::vector<int>& set) {
  double v = 0;
  for (int a : set) v = std::max(v, GapToOthers(r, a, set));
  return v;
}

struct Summary {
  double sum = 0, sum_sq = 0, max = -1e9;
  int n = 0;
  void Add(double v) {
    sum += v;
    sum_sq += v * v;
    max = std::max(max, v);
    ++n;
  }
  double Mean() const { return sum / n; }
  double Sd() const { return std::sqrt(std::max(0.0, sum_sq / n - Mean() * Mean())); }
};

TEST(EoTinyGroupStatisticalTest, ViolationFallsAndNoGroupIsLeftWorseOff) {
  // 50 fixed seeds per ε; discrete Laplace of scale 2/ε on the 16 counts, as the server draws.
  // Tolerances: the mean violation after must be below the violation before (0.20) by 0.03 at
  // ε = 0.1, where the LP may spend gamma + a noise allowance of up to 0.13, and be below half
  // of it at ε = 1 (allowance ≤ 0.013); a resolvable group's gap to the others may exceed its gap
  // before by at most 0.02 in any single run; the tiny group (9 positives) must be excluded in
  // every run, which fails only if the noise on its count exceeds 8 ln(320) − 9 ≥ 37 at ε = 1.
  // False-failure probability: each check needs a > 5-standard-deviation excursion of the noise
  // (the means' standard errors are ≤ 0.003); < 1e-5 in all.
  constexpr int kSeeds = 50;
  constexpr double kGamma = 0.02;
  const EoCounts exact = ExactTable();
  int64_t m = 0;
  for (int64_t v : exact.n) m += v;
  const std::vector<Rates> before = TrueRates(exact, nullptr);
  const std::vector<int> resolvable = {0, 1, 2}, all = {0, 1, 2, 3};

  std::cout << "eps | EO violation, resolvable groups: before -> after (mean ± sd) | worst change "
               "of a resolvable group's gap to the others | tiny group kept | violation, all "
               "groups: after | worst group error change | paper LP (no exclusion): violation, "
               "all groups, after; runs re-mapping the tiny group\n";
  for (double epsilon : {0.1, 1.0}) {
    auto noise = dp::MakeDiscreteLaplaceNoise(2.0 / epsilon);
    ASSERT_OK(noise);
    Summary after, after_all, paper_after_all, worst_gap_change, worst_error_change;
    int tiny_kept = 0, paper_tiny_moved = 0;
    for (int seed = 1; seed <= kSeeds; ++seed) {
      SCOPED_TRACE(absl::StrFormat("epsilon %g seed %d", epsilon, seed));
      EoOptions options;
      options.m = m;
      options.epsilon = epsilon;
      options.gamma = kGamma;
      std::mt19937_64 gen(seed);
      EoCounts noisy;
      auto s = FitEqualizedOdds(exact, options, **noise, gen, &noisy);
      ASSERT_OK(s);
      // The policy: the tiny group (9 positives, threshold 8 ln(16/0.05)/ε ≥ 46) is excluded and
      // keeps its predictions exactly; the large groups (≥ 1,797 per label) never are.
      ASSERT_TRUE(s->groups[kTiny].excluded);
      EXPECT_EQ(s->groups[kTiny].p0, 0.0);
      EXPECT_EQ(s->groups[kTiny].p1, 1.0);
      for (int a : resolvable) ASSERT_FALSE(s->groups[a].excluded);
      const std::vector<Rates> derived = TrueRates(exact, &s->groups);
      tiny_kept += derived[kTiny].fpr == before[kTiny].fpr &&
                   derived[kTiny].tpr == before[kTiny].tpr &&
                   derived[kTiny].error == before[kTiny].error;
      after.Add(Violation(derived, resolvable));
      after_all.Add(Violation(derived, all));
      double worst_error = -1;
      for (int a : all) worst_error = std::max(worst_error, derived[a].error - before[a].error);
      worst_error_change.Add(worst_error);
      double worst = -1;
      for (int a : resolvable) {
        const double change =
            GapToOthers(derived, a, resolvable) - GapToOthers(before, a, resolvable);
        EXPECT_LE(change, 0.02) << "group " << a;
        worst = std::max(worst, change);
      }
      worst_gap_change.Add(worst);

      // The same noisy counts through the paper's LP (no group excluded).
      options.min_group_count = 0;
      auto paper = SolveEqualizedOddsLp(noisy, options);
      ASSERT_OK(paper);
      paper_after_all.Add(Violation(TrueRates(exact, &paper->groups), all));
      paper_tiny_moved += paper->groups[kTiny].p0 != 0.0 || paper->groups[kTiny].p1 != 1.0;
    }
    EXPECT_EQ(tiny_kept, kSeeds);
    const double before_res = Violation(before, resolvable);
    EXPECT_LT(after.Mean(), epsilon < 1 ? before_res - 0.03 : 0.5 * before_res)
        << "epsilon " << epsilon;
    std::cout << absl::StrFormat(
        "%g | %.3f -> %.3f ± %.3f | %+.3f (max) | %d/%d | %.3f -> %.3f ± %.3f | %+.3f (max) | "
        "%.3f ± %.3f; %d/%d\n",
        epsilon, before_res, after.Mean(), after.Sd(), worst_gap_change.max, tiny_kept, kSeeds,
        Violation(before, all), after_all.Mean(), after_all.Sd(), worst_error_change.max,
        paper_after_all.Mean(), paper_after_all.Sd(), paper_tiny_moved, kSeeds);
  }
}

}  // namespace
}  // namespace fairvault::core::postprocess
