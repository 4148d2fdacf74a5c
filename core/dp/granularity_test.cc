// Tests for power-of-two granularity, snapping to the grid and exact
// reconstruction.
#include "core/dp/granularity.h"

#include <cmath>
#include <cstdint>
#include <random>

#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fairvault::core::dp {
namespace {

using ::fairvault::testing::StatusIs;

constexpr double k2To52 = 4503599627370496.0;

TEST(PowerOfTwoGranularityTest, ExactPowersAndRoundingUp) {
  EXPECT_EQ(*PowerOfTwoGranularity(1.0), std::ldexp(1.0, -20));  // default bits_below = 20
  EXPECT_EQ(*PowerOfTwoGranularity(4.0, 0), 4.0);
  EXPECT_EQ(*PowerOfTwoGranularity(3.0, 0), 4.0);
  EXPECT_EQ(*PowerOfTwoGranularity(4.000001, 0), 8.0);
  EXPECT_EQ(*PowerOfTwoGranularity(0.75, 2), 0.25);                  // 0.1875 -> 0.25
  EXPECT_EQ(*PowerOfTwoGranularity(0.1, 10), std::ldexp(1.0, -13));  // 9.8e-5 -> 1.2e-4
}

// For many scales: g is a power of two and scale/2^b <= g < 2 * scale/2^b.
TEST(PowerOfTwoGranularityTest, IsSmallestPowerOfTwoAtLeastScaleOverTwoToBits) {
  std::mt19937_64 engine(7);
  std::uniform_real_distribution<double> log_scale(-30, 30);
  for (int i = 0; i < 10000; ++i) {
    const double scale = std::exp(log_scale(engine));
    const int bits = static_cast<int>(engine() % 41);
    auto g = PowerOfTwoGranularity(scale, bits);
    ASSERT_OK(g);
    int exponent = 0;
    EXPECT_EQ(std::frexp(*g, &exponent), 0.5);
    const double target = std::ldexp(scale, -bits);  // exact: stays a normal double
    EXPECT_GE(*g, target);
    EXPECT_LT(*g, 2 * target);
  }
}

TEST(PowerOfTwoGranularityTest, RejectsBadScaleAndOutOfRangeResults) {
  EXPECT_THAT(PowerOfTwoGranularity(-1),
              StatusIs(absl::StatusCode::kInvalidArgument, "scale must be finite and > 0"));
  EXPECT_THAT(PowerOfTwoGranularity(0), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(PowerOfTwoGranularity(NAN), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(PowerOfTwoGranularity(INFINITY), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(PowerOfTwoGranularity(1e-300, 100),
              StatusIs(absl::StatusCode::kInvalidArgument, "outside the range"));
  EXPECT_THAT(PowerOfTwoGranularity(1e300, -100),
              StatusIs(absl::StatusCode::kInvalidArgument, "outside the range"));
}

TEST(SnapToGridTest, RoundsToNearestStepTiesAwayFromZero) {
  EXPECT_EQ(*SnapToGrid(1.3, 0.25), 5);    // 5.2
  EXPECT_EQ(*SnapToGrid(1.375, 0.25), 6);  // 5.5
  EXPECT_EQ(*SnapToGrid(-1.375, 0.25), -6);
  EXPECT_EQ(*SnapToGrid(-1.3, 0.25), -5);
  EXPECT_EQ(*SnapToGrid(0.0, 1.0), 0);
  EXPECT_EQ(*SnapToGrid(1e-320, 1.0), 0);  // subnormal input
  EXPECT_EQ(*SnapToGrid(k2To52, 1.0), int64_t{1} << 52);
  EXPECT_EQ(*SnapToGrid(-k2To52, 1.0), -(int64_t{1} << 52));
}

TEST(SnapToGridTest, RejectsNonFiniteValuesBadGridsAndTooManySteps) {
  EXPECT_THAT(SnapToGrid(NAN, 1.0), StatusIs(absl::StatusCode::kInvalidArgument, "finite"));
  EXPECT_THAT(SnapToGrid(INFINITY, 1.0), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(SnapToGrid(1.0, 0.1), StatusIs(absl::StatusCode::kInvalidArgument, "power of two"));
  EXPECT_THAT(SnapToGrid(1.0, 0.0), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(SnapToGrid(1.0, -0.5), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(SnapToGrid(1.0, INFINITY), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(SnapToGrid(k2To52 + 2, 1.0), StatusIs(absl::StatusCode::kInvalidArgument, "2^52"));
  EXPECT_THAT(SnapToGrid(1e300, std::ldexp(1.0, -1000)),  // quotient overflows to inf
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(FromGridTest, IsExactAndInvertsSnap) {
  EXPECT_EQ(FromGrid(5, 0.25), 1.25);
  EXPECT_EQ(FromGrid(-(int64_t{1} << 52), std::ldexp(1.0, -20)), -std::ldexp(1.0, 32));
  EXPECT_EQ(FromGrid((int64_t{1} << 52) - 1, 1.0),
            k2To52 - 1);  // no rounding at 2^52 - 1
  std::mt19937_64 engine(9);
  for (int i = 0; i < 10000; ++i) {
    const int64_t steps = static_cast<int64_t>(engine() >> 12) - (int64_t{1} << 51);
    const double g = std::ldexp(1.0, static_cast<int>(engine() % 80) - 60);
    const double value = FromGrid(steps, g);
    auto back = SnapToGrid(value, g);
    ASSERT_OK(back);
    EXPECT_EQ(*back, steps);
  }
}

}  // namespace
}  // namespace fairvault::core::dp
