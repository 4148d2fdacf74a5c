// Tests for the IntegerNoise implementations and their validating factories.
#include "core/dp/integer_noise.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fairvault::core::dp {
namespace {

using ::fairvault::testing::StatusIs;

TEST(ZeroNoiseTest, ReturnsValueUnchanged) {
  auto noise = MakeZeroNoise();
  std::mt19937_64 engine(1);
  for (int64_t v :
       {int64_t{0}, int64_t{-7}, int64_t{123456789}, std::numeric_limits<int64_t>::max()}) {
    EXPECT_EQ(noise->AddNoise(v, engine), v);
  }
  EXPECT_EQ(noise->Name(), "none");
  EXPECT_EQ(noise->Scale(), 0.0);
}

TEST(DiscreteLaplaceNoiseTest, NameAndScaleOfTheRationalUsed) {
  auto exact = MakeDiscreteLaplaceNoise(2.0);
  ASSERT_OK(exact);
  EXPECT_EQ((*exact)->Name(), "discrete_laplace");
  EXPECT_EQ((*exact)->Scale(), 2.0);
  // Rounded up, never down, by less than max(2^-39 relative, 2^-40 absolute).
  for (double scale : {1e-6, 0.1, 2.0 / 3.0, 6.6666, 1e5, 1e12}) {
    auto noise = MakeDiscreteLaplaceNoise(scale);
    ASSERT_OK(noise);
    EXPECT_GE((*noise)->Scale(), scale);
    EXPECT_LE((*noise)->Scale(), scale + std::max(scale * 0x1p-39, 0x1p-40)) << scale;
  }
}

// 100k draws around 1000 with scale 3: mean within 5 standard errors of 1000
// and variance within 5 standard errors of 2q/(1-q)^2, q = e^{-1/3} (SE from
// the exact fourth moment, normal approximation; false failure ~6e-7 each).
TEST(DiscreteLaplaceNoiseTest, SeededDrawsHaveTheRightSpread) {
  auto noise = MakeDiscreteLaplaceNoise(3.0);
  ASSERT_OK(noise);
  std::mt19937_64 engine(2024);
  constexpr int kN = 100000;
  double sum = 0, sum_sq = 0;
  for (int i = 0; i < kN; ++i) {
    const double d = static_cast<double>((*noise)->AddNoise(1000, engine) - 1000);
    sum += d;
    sum_sq += d * d;
  }
  double m2 = 0, m4 = 0;
  for (int x = 1; x < 400; ++x) {
    const double p = 2 * DiscreteLaplacePmf(x, 3.0);
    m2 += p * x * x;
    m4 += p * x * x * x * x;
  }
  const double q = std::exp(-1.0 / 3.0);
  ASSERT_NEAR(m2, 2 * q / ((1 - q) * (1 - q)), 1e-9);
  const double mean = sum / kN;
  EXPECT_NEAR(mean, 0, 5 * std::sqrt(m2 / kN));
  EXPECT_NEAR(sum_sq / kN - mean * mean, m2, 5 * std::sqrt((m4 - m2 * m2) / kN));
}

TEST(DiscreteLaplaceNoiseTest, AddNoiseSaturatesInsteadOfOverflowing) {
  auto noise = MakeDiscreteLaplaceNoise(100.0);
  ASSERT_OK(noise);
  std::mt19937_64 engine(3);
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  bool saw_max = false, saw_min = false;
  for (int i = 0; i < 200; ++i) {
    const int64_t hi = (*noise)->AddNoise(kMax, engine);
    const int64_t lo = (*noise)->AddNoise(kMin, engine);
    EXPECT_GT(hi, kMax - 100000);
    EXPECT_LT(lo, kMin + 100000);
    saw_max |= hi == kMax;
    saw_min |= lo == kMin;
  }
  EXPECT_TRUE(saw_max);  // half the draws are >= 0; all 200 negative has prob 2^-200
  EXPECT_TRUE(saw_min);
}

TEST(DiscreteGaussianNoiseTest, NameAndScaleOfTheRationalUsed) {
  auto exact = MakeDiscreteGaussianNoise(3.0);
  ASSERT_OK(exact);
  EXPECT_EQ((*exact)->Name(), "discrete_gaussian");
  EXPECT_EQ((*exact)->Scale(), 3.0);
  // sigma^2 is rounded up by less than max(2^-39 relative, 2^-40 absolute).
  for (double sigma : {1e-5, 0.1, 0.8, 7.3, 1e4, 1048576.0}) {
    auto noise = MakeDiscreteGaussianNoise(sigma);
    ASSERT_OK(noise);
    const double used = (*noise)->Scale();
    EXPECT_GE(used, sigma);
    EXPECT_LE(used * used, sigma * sigma + std::max(sigma * sigma * 0x1p-39, 0x1p-40) +
                               4 * sigma * sigma * 0x1p-53)  // double rounding slack
        << sigma;
  }
}

// sigma = 5: the discrete Gaussian's variance is sigma^2 up to e^{-2 pi^2 25};
// SE(variance) ~ sigma^2 sqrt(2/n); tolerance 5 SE for mean and variance.
TEST(DiscreteGaussianNoiseTest, SeededDrawsHaveTheRightSpread) {
  auto noise = MakeDiscreteGaussianNoise(5.0);
  ASSERT_OK(noise);
  std::mt19937_64 engine(77);
  constexpr int kN = 100000;
  double sum = 0, sum_sq = 0;
  for (int i = 0; i < kN; ++i) {
    const double d = static_cast<double>((*noise)->AddNoise(-42, engine) + 42);
    sum += d;
    sum_sq += d * d;
  }
  const double mean = sum / kN;
  EXPECT_NEAR(mean, 0, 5 * 5.0 / std::sqrt(kN));
  EXPECT_NEAR(sum_sq / kN - mean * mean, 25.0, 5 * 25.0 * std::sqrt(2.0 / kN));
}

TEST(IntegerNoiseFactoryTest, RejectsInvalidScales) {
  EXPECT_THAT(MakeDiscreteLaplaceNoise(-1), StatusIs(absl::StatusCode::kInvalidArgument,
                                                     "scale must be finite and > 0 (got -1)"));
  EXPECT_THAT(MakeDiscreteLaplaceNoise(0), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(MakeDiscreteLaplaceNoise(NAN), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(MakeDiscreteLaplaceNoise(INFINITY), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(MakeDiscreteLaplaceNoise(2e12),
              StatusIs(absl::StatusCode::kInvalidArgument, "too large"));
  EXPECT_THAT(MakeDiscreteGaussianNoise(-2), StatusIs(absl::StatusCode::kInvalidArgument,
                                                      "sigma must be finite and > 0 (got -2)"));
  EXPECT_THAT(MakeDiscreteGaussianNoise(0), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(MakeDiscreteGaussianNoise(NAN), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(MakeDiscreteGaussianNoise(2e6),
              StatusIs(absl::StatusCode::kInvalidArgument, "sigma must be <= 2^20"));
}

// Half-widths against the exact pmf: w covers >= 95 % and w - 1 does not (Laplace:
// P(|X| > w) = 2 q^(w+1) / (1 + q), q = e^(-1/t); Gaussian: the pmf summed directly).
TEST(NoiseHalfWidthTest, IsTheSmallestCoveringWidth) {
  for (const double t : {0.5, 2.0, 10.0, 1234.5}) {
    auto noise = MakeDiscreteLaplaceNoise(t);
    ASSERT_OK(noise);
    const double scale = (*noise)->Scale();
    const double q = std::exp(-1 / scale);
    const int64_t w = (*noise)->HalfWidth(0.95);
    const auto covered = [&](int64_t width) {
      return 1 - 2 * std::pow(q, static_cast<double>(width + 1)) / (1 + q);
    };
    EXPECT_GE(covered(w), 0.95) << t;
    if (w > 0) {
      EXPECT_LT(covered(w - 1), 0.95) << t;
    }
    // The continuous Laplace quantile t ln(20) is within one step.
    EXPECT_NEAR(static_cast<double>(w), scale * std::log(20.0), 1.5) << t;
  }
  for (const double sigma : {0.3, 3.0, 40.0}) {
    auto noise = MakeDiscreteGaussianNoise(sigma);
    ASSERT_OK(noise);
    const int64_t w = (*noise)->HalfWidth(0.95);
    double total = 0, inside = 0, inside_less = 0;
    for (int64_t k = -2000; k <= 2000; ++k) {
      const double p = std::exp(-static_cast<double>(k * k) / (2 * sigma * sigma));
      total += p;
      if (std::abs(k) <= w) inside += p;
      if (std::abs(k) <= w - 1) inside_less += p;
    }
    EXPECT_GE(inside / total, 0.95) << sigma;
    if (w > 0) {
      EXPECT_LT(inside_less / total, 0.95) << sigma;
    }
  }
  auto big = MakeDiscreteGaussianNoise(5000);
  ASSERT_OK(big);
  EXPECT_EQ((*big)->HalfWidth(0.95), 9800);  // ceil(1.959964 * 5000)
  EXPECT_EQ(MakeZeroNoise()->HalfWidth(0.95), 0);
}

// Seeded coverage: 20,000 discrete Laplace draws at t = 7 fall within the 95 % half-width
// at the exact covered rate, within 4 standard errors.
TEST(NoiseHalfWidthTest, SeededDrawsAreCoveredAtTheStatedRate) {
  auto noise = MakeDiscreteLaplaceNoise(7);
  ASSERT_OK(noise);
  const int64_t w = (*noise)->HalfWidth(0.95);
  std::mt19937_64 engine(2026);
  constexpr int kN = 20000;
  int inside = 0;
  for (int i = 0; i < kN; ++i) inside += std::abs((*noise)->AddNoise(0, engine)) <= w;
  // Exact coverage at w is >= 0.95 (a little more, from discreteness).
  const double q = std::exp(-1 / (*noise)->Scale());
  const double exact = 1 - 2 * std::pow(q, static_cast<double>(w + 1)) / (1 + q);
  EXPECT_NEAR(static_cast<double>(inside) / kN, exact, 4 * std::sqrt(exact * (1 - exact) / kN));
}

TEST(NoiseHalfWidthTest, ByMechanismName) {
  auto laplace = NoiseHalfWidth("discrete_laplace", 10, 0.95);
  ASSERT_OK(laplace);
  EXPECT_EQ(*laplace, (*MakeDiscreteLaplaceNoise(10))->HalfWidth(0.95));
  auto gaussian = NoiseHalfWidth("gaussian", 2, 0.95);
  ASSERT_OK(gaussian);
  EXPECT_EQ(*gaussian, 4);  // ceil(3.92)
  EXPECT_THAT(NoiseHalfWidth("exponential", 1, 0.95),
              StatusIs(absl::StatusCode::kInvalidArgument, "mechanism"));
  EXPECT_THAT(NoiseHalfWidth("discrete_laplace", 1, 1.5),
              StatusIs(absl::StatusCode::kInvalidArgument, "confidence"));
}

}  // namespace
}  // namespace fairvault::core::dp
