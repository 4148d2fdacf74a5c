// Tests for the noise-aware rate intervals: the closed-form noise-ball probability against a
// brute-force convolution, Clopper–Pearson against published values, and the interval's
// containment, width and edge cases.
#include "core/fairness/count_interval.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/dp/discrete_samplers.h"
#include "gtest/gtest.h"

namespace fairvault::core::fairness {
namespace {

// pmf of the sum of `cells` discrete Laplace draws on [-span, span], by convolution.
std::vector<double> NoisePmf(double scale, int cells, int span) {
  std::vector<double> one(2 * span + 1);
  for (int z = -span; z <= span; ++z) one[z + span] = dp::DiscreteLaplacePmf(z, scale);
  if (cells == 1) return one;
  std::vector<double> two(2 * span + 1, 0.0);
  for (int z = -span; z <= span; ++z) {
    for (int d = -span; d <= span; ++d) {
      const int rest = z - d;
      if (rest >= -span && rest <= span) two[z + span] += one[d + span] * one[rest + span];
    }
  }
  return two;
}

TEST(NoisePairCoverageTest, MatchesBruteForceConvolution) {
  const int span = 400;  // the tails beyond are below 1e-40 at these scales
  for (double scale : {0.7, 2.0, 8.0}) {
    for (int cells : {1, 2}) {
      const std::vector<double> pmf = NoisePmf(scale, cells, span);
      for (int64_t r : {0, 1, 2, 5, 13, 40}) {
        double brute = 0;
        for (int z1 = -span; z1 <= span; ++z1) {
          for (int z2 = -span; z2 <= span; ++z2) {
            if (std::abs(z1) + std::abs(z2) <= r) brute += pmf[z1 + span] * pmf[z2 + span];
          }
        }
        EXPECT_NEAR(NoisePairCoverage({scale, cells}, r), brute, 1e-12)
            << "scale " << scale << " cells " << cells << " r " << r;
      }
    }
  }
}

TEST(NoisePairCoverageTest, RadiusIsTheSmallestReachingTheLevel) {
  for (double scale : {0.5, 2.0, 40.0, 2e6}) {
    for (int cells : {1, 2}) {
      const CountNoise noise{scale, cells};
      const int64_t r = NoisePairRadius(noise, 0.95);
      EXPECT_GE(NoisePairCoverage(noise, r), 0.95);
      if (r > 0) {
        EXPECT_LT(NoisePairCoverage(noise, r - 1), 0.95);
      }
    }
  }
  EXPECT_EQ(NoisePairRadius({0, 1}, 0.95), 0);
  EXPECT_EQ(NoisePairCoverage({0, 2}, 0), 1);
}

TEST(ClopperPearsonTest, MatchesPublishedValues) {
  EXPECT_NEAR(RegularizedIncompleteBeta(2, 3, 0.5), 0.6875, 1e-14);
  // n = 10, x = 5 at 95%: [0.187086, 0.812914] (Clopper and Pearson 1934; R binom.test).
  RateBounds b = ClopperPearson(5, 10, 0.05);
  EXPECT_NEAR(b.lo, 0.1870860, 1e-6);
  EXPECT_NEAR(b.hi, 0.8129140, 1e-6);
  // x = 0 of 1 at 90%: [0, 1 − 0.05] — the one-row interval is wide, as it must be.
  b = ClopperPearson(0, 1, 0.1);
  EXPECT_EQ(b.lo, 0);
  EXPECT_NEAR(b.hi, 0.95, 1e-9);
  b = ClopperPearson(3, 3, 0.1);
  EXPECT_NEAR(b.lo, std::pow(0.05, 1.0 / 3), 1e-9);
  EXPECT_EQ(b.hi, 1);
  b = ClopperPearson(0, 0, 0.1);
  EXPECT_EQ(b.lo, 0);
  EXPECT_EQ(b.hi, 1);
  // A large n stays accurate: x = 300000 of 10^6 at 95% is 0.3 ± 1.96·sqrt(0.21/10^6) ≈ ±0.0009.
  b = ClopperPearson(300000, 1000000, 0.05);
  EXPECT_NEAR(b.lo, 0.3 - 1.96 * std::sqrt(0.21e-6), 2e-5);
  EXPECT_NEAR(b.hi, 0.3 + 1.96 * std::sqrt(0.21e-6), 2e-5);
}

TEST(RateIntervalTest, WithoutNoiseIsClopperPearson) {
  const RateBounds cp = ClopperPearson(7, 20, 0.1);
  const RateBounds r = RateInterval(7, 13, 0, 0.1);
  EXPECT_EQ(r.lo, cp.lo);
  EXPECT_EQ(r.hi, cp.hi);
}

TEST(RateIntervalTest, ContainsEveryAdmittedPlugInRateAndNeverCollapses) {
  // The example: released cells give x̃ = 2, ỹ = 0 (selection 1.0 [1, 1] before).
  for (int64_t x = -5; x <= 40; x += 3) {
    for (int64_t y = -5; y <= 40; y += 4) {
      for (int64_t radius : {0, 3, 9, 200}) {
        const RateBounds b = RateInterval(x, y, radius, 0.05);
        EXPECT_LT(b.lo, b.hi) << x << " " << y << " " << radius;
        for (int64_t tx = std::max<int64_t>(0, x - radius); tx <= x + radius; ++tx) {
          const int64_t left = radius - std::abs(tx - x);
          for (int64_t ty = std::max<int64_t>(0, y - left); ty <= y + left; ++ty) {
            if (tx + ty == 0) continue;
            const double rate = static_cast<double>(tx) / static_cast<double>(tx + ty);
            ASSERT_LE(b.lo, rate + 1e-12) << x << " " << y << " " << radius << " " << tx;
            ASSERT_GE(b.hi, rate - 1e-12) << x << " " << y << " " << radius << " " << tx;
          }
        }
      }
    }
  }
}

TEST(RateIntervalTest, ImplausibleReleaseOrPossiblyEmptyGroupGivesUnitInterval) {
  RateBounds b = RateInterval(-30, -30, 10, 0.05);  // no true pair within the radius
  EXPECT_EQ(b.lo, 0);
  EXPECT_EQ(b.hi, 1);
  b = RateInterval(1, 1, 2, 0.05);  // (0, 0) is admitted: nothing is known
  EXPECT_EQ(b.lo, 0);
  EXPECT_EQ(b.hi, 1);
}

TEST(RateIntervalTest, LargeRadiusUsesConservativeCells) {
  // Radius 5000 takes the 64-cell path; the bound must not exceed the exact minimum.
  const RateBounds b = RateInterval(20000, 60000, 5000, 0.05);
  double exact_lo = 1;
  for (int64_t x = 15000; x <= 20000; x += 1) {
    exact_lo = std::min(exact_lo, ClopperPearson(x, 2 * x + 60000 + 5000 - 20000, 0.05).lo);
  }
  EXPECT_LE(b.lo, exact_lo);
  EXPECT_GT(b.lo, exact_lo - 0.01);
}

}  // namespace
}  // namespace fairvault::core::fairness
