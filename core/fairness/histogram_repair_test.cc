// Tests for the L∞ isotonic CDF repair shared by the audits and the statistical-parity
// post-processor.
#include "core/fairness/histogram_repair.h"

#include <cmath>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fairvault::core::fairness {
namespace {

using ::testing::DoubleNear;
using ::testing::ElementsAre;

TEST(RepairCdfToPmfTest, NonNegativeMassesAreNormalised) {
  EXPECT_THAT(RepairCdfToPmf({1, 2, 0, 5}, 8),
              ElementsAre(DoubleNear(0.125, 1e-15), DoubleNear(0.25, 1e-15), DoubleNear(0, 1e-15),
                          DoubleNear(0.625, 1e-15)));
  // Scale invariance: fractions of n with the weight in the same units.
  EXPECT_THAT(RepairCdfToPmf({0.01, 0.02, 0, 0.05}, 0.08),
              ElementsAre(DoubleNear(0.125, 1e-12), DoubleNear(0.25, 1e-12), DoubleNear(0, 1e-12),
                          DoubleNear(0.625, 1e-12)));
}

TEST(RepairCdfToPmfTest, NegativeMassIsRepairedByLInfinityIsotonicRegression) {
  // CDF 0.5, 0.3, 0.6, 1.0: running max 0.5 0.5 0.6 1.0, running min 0.3 0.3 0.6 1.0, midpoints
  // 0.4 0.4 0.6 1.0 -> pmf 0.4 0 0.2 0.4 (the sup-norm error 0.1 is the least possible).
  EXPECT_THAT(RepairCdfToPmf({5, -2, 3, 4}, 10),
              ElementsAre(DoubleNear(0.4, 1e-15), DoubleNear(0, 1e-15), DoubleNear(0.2, 1e-15),
                          DoubleNear(0.4, 1e-15)));
}

TEST(RepairCdfToPmfTest, ClipsToUnitIntervalAndEndsAtOne) {
  // CDF -0.5, 0.25, 1.5, 0.75 (weight smaller than the masses' total): isotonic midpoints
  // -0.5, 0.25, 1.125, 1.125 -> clipped 0, 0.25, 1, 1 and the last set to 1.
  EXPECT_THAT(RepairCdfToPmf({-2, 3, 5, -3}, 4),
              ElementsAre(DoubleNear(0, 1e-15), DoubleNear(0.25, 1e-15), DoubleNear(0.75, 1e-15),
                          DoubleNear(0, 1e-15)));
  // Total below the weight: the missing mass lands in the last bin.
  EXPECT_THAT(RepairCdfToPmf({1, 1}, 4),
              ElementsAre(DoubleNear(0.25, 1e-15), DoubleNear(0.75, 1e-15)));
}

TEST(RepairCdfToPmfTest, AlwaysAValidPmf) {
  const std::vector<std::vector<double>> cases = {
      {-3, -1, -7}, {0, 0, 0}, {100, -50, 3, -80, 9, 0.5}, {1e-9}, {-1}};
  for (const auto& masses : cases) {
    std::vector<double> pmf = RepairCdfToPmf(masses, 1);
    ASSERT_EQ(pmf.size(), masses.size());
    double total = 0;
    for (double p : pmf) {
      EXPECT_GE(p, 0);
      total += p;
    }
    EXPECT_NEAR(total, 1, 1e-12);
  }
}

TEST(RepairCdfToPmfTest, EmptyAndBadWeight) {
  EXPECT_TRUE(RepairCdfToPmf({}, 1).empty());
  EXPECT_THAT(RepairCdfToPmf({1, 3}, 0), ElementsAre(0.5, 0.5));
  EXPECT_THAT(RepairCdfToPmf({1, 3}, -1), ElementsAre(0.5, 0.5));
  EXPECT_THAT(RepairCdfToPmf({1, NAN}, 1), ElementsAre(0.5, 0.5));
  EXPECT_THAT(RepairCdfToPmf({1, 3}, INFINITY), ElementsAre(0.5, 0.5));
}

}  // namespace
}  // namespace fairvault::core::fairness
