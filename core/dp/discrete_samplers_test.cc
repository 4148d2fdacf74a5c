// Tests for the CKS samplers: exact draws with mocked uniforms, goodness of fit
// against the exact pmfs (chi-square), moments, and RationalAtLeast's exact
// rounding and errors. Statistical tests use fixed seeds and fail a correct
// sampler with probability <= 1e-4 each.
#include "core/dp/discrete_samplers.h"

#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <vector>

#include "absl/random/bit_gen_ref.h"
#include "absl/random/mock_distributions.h"
#include "absl/random/mocking_bit_gen.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fairvault::core::dp {
namespace {

using ::fairvault::testing::StatusIs;
using ::testing::InSequence;
using ::testing::Return;

constexpr uint64_t k2To20 = uint64_t{1} << 20;
constexpr uint64_t k2To40 = uint64_t{1} << 40;
constexpr int kSamples = 200000;

// Upper 1e-4 quantile of chi-square with `dof` degrees of freedom, by the
// Wilson-Hilferty approximation chi2_p ~= k (1 - 2/(9k) + z_p sqrt(2/(9k)))^3
// with z_{1-1e-4} = 3.7190165. It errs on the safe side: the exact tail mass
// beyond it is 0.65e-4 (k = 2), 0.85e-4 (k = 10), 0.97e-4 (k = 80).
double ChiSquareCritical1e4(int dof) {
  const double k = dof;
  const double a = 2.0 / (9.0 * k);
  const double c = 1.0 - a + 3.7190165 * std::sqrt(a);
  return k * c * c * c;
}

struct FitResult {
  double statistic = 0;
  int dof = 0;
};

// Pearson chi-square of `samples` against `pmf` (symmetric, unimodal at 0).
// Values are binned individually while a bin and the tail beyond it both expect
// >= 5 draws; each tail beyond that is one pooled bin. `support` bounds where
// the pmf has non-negligible mass.
template <typename Pmf>
FitResult ChiSquare(const std::vector<int64_t>& samples, Pmf pmf, int64_t support) {
  const double n = static_cast<double>(samples.size());
  // Mass of {x >= m} for m >= 0 (by symmetry also of {x <= -m}).
  std::vector<double> upper_tail(support + 2, 0.0);
  for (int64_t x = support; x >= 0; --x) upper_tail[x] = upper_tail[x + 1] + pmf(x);
  int64_t hi = 0;  // values in [-hi, hi] get their own bin
  while (hi + 1 <= support && n * pmf(hi + 1) >= 5 && n * upper_tail[hi + 2] >= 5) ++hi;
  std::map<int64_t, int64_t> counts;
  for (int64_t s : samples) counts[s < -hi - 1 ? -hi - 1 : (s > hi + 1 ? hi + 1 : s)]++;
  FitResult result;
  for (int64_t x = -hi - 1; x <= hi + 1; ++x) {
    const double expected = n * (std::llabs(x) == hi + 1 ? upper_tail[hi + 1] : pmf(x));
    const double diff = counts[x] - expected;
    result.statistic += diff * diff / expected;
  }
  result.dof = static_cast<int>(2 * hi + 3) - 1;
  return result;
}

struct Moments {
  double mean = 0;
  double variance = 0;
};

Moments SampleMoments(const std::vector<int64_t>& samples) {
  double sum = 0, sum_sq = 0;
  for (int64_t s : samples) {
    sum += s;
    sum_sq += static_cast<double>(s) * s;
  }
  const double n = samples.size();
  Moments m;
  m.mean = sum / n;
  m.variance = sum_sq / n - m.mean * m.mean;
  return m;
}

// Exact second and fourth moments of a symmetric pmf on Z (mean 0).
template <typename Pmf>
std::pair<double, double> PmfMoments24(Pmf pmf, int64_t support) {
  double m2 = 0, m4 = 0;
  for (int64_t x = support; x >= 1; --x) {
    const double p = 2 * pmf(x), x2 = static_cast<double>(x) * x;
    m2 += p * x2;
    m4 += p * x2 * x2;
  }
  return {m2, m4};
}

// Checks fit, mean and variance of `samples` against `pmf`. Mean and variance
// tolerances are 5 standard errors (normal approximation; false failure ~6e-7
// each): SE(mean) = sqrt(m2/n), SE(variance) = sqrt((m4 - m2^2)/n).
template <typename Pmf>
void ExpectMatchesPmf(const std::vector<int64_t>& samples, Pmf pmf, int64_t support) {
  const FitResult fit = ChiSquare(samples, pmf, support);
  ASSERT_GE(fit.dof, 2);
  EXPECT_LT(fit.statistic, ChiSquareCritical1e4(fit.dof)) << "dof " << fit.dof;
  const auto [m2, m4] = PmfMoments24(pmf, support);
  const double n = samples.size();
  const Moments got = SampleMoments(samples);
  EXPECT_NEAR(got.mean, 0.0, 5 * std::sqrt(m2 / n));
  EXPECT_NEAR(got.variance, m2, 5 * std::sqrt((m4 - m2 * m2) / n));
}

// A URBG that counts how often it is called.
struct CountingUrbg {
  using result_type = uint64_t;
  static constexpr result_type min() { return 0; }
  static constexpr result_type max() { return UINT64_MAX; }
  result_type operator()() {
    ++calls;
    return engine();
  }
  std::mt19937_64 engine{1};
  int calls = 0;
};

TEST(SampleBernoulliExpTest, GammaZeroReturnsTrueWithoutRandomness) {
  CountingUrbg urbg;
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(SampleBernoulliExp(Rational{0, 1}, urbg));
  EXPECT_TRUE(SampleBernoulliExp(Rational{0, k2To40}, urbg));
  EXPECT_EQ(urbg.calls, 0);
}

constexpr uint64_t kTwentyFactorial = 2432902008176640000;

// gamma = 1: trial 1 (Bernoulli(1/1)) is skipped, and trials K = 2..20 are read
// from one uniform w on [0, 20!): they all succeed up to K iff K! divides w.
TEST(SampleBernoulliExpTest, ForcedUniformsGiveExactOutcome) {
  absl::MockingBitGen gen;
  {
    InSequence seq;
    EXPECT_CALL(absl::MockUniform<uint64_t>(), Call(gen, uint64_t{0}, kTwentyFactorial))
        .WillOnce(Return(1))    // odd: trial 2 fails, K = 2 even -> false
        .WillOnce(Return(2))    // 2 | w, 6 does not: K = 3 odd -> true
        .WillOnce(Return(24))   // 4! | w, 5! does not: K = 5 -> true
        .WillOnce(Return(48))   // same: K = 5 -> true
        .WillOnce(Return(720))  // 6! | w, 7! does not: K = 7 -> true
        .WillOnce(Return(120))  // 5! | w, 6! does not: K = 6 -> false
        .WillOnce(Return(0));   // all of trials 2..20 succeed: continue with fresh draws
    EXPECT_CALL(absl::MockUniform<uint64_t>(), Call(gen, uint64_t{0}, uint64_t{21}))
        .WillOnce(Return(0));  // trial 21 succeeds
    EXPECT_CALL(absl::MockUniform<uint64_t>(), Call(gen, uint64_t{0}, uint64_t{22}))
        .WillOnce(Return(5));  // trial 22 fails: K = 22 even -> false
  }
  EXPECT_FALSE(SampleBernoulliExp(Rational{1, 1}, gen));
  EXPECT_TRUE(SampleBernoulliExp(Rational{1, 1}, gen));
  EXPECT_TRUE(SampleBernoulliExp(Rational{1, 1}, gen));
  EXPECT_TRUE(SampleBernoulliExp(Rational{7, 7}, gen));
  EXPECT_TRUE(SampleBernoulliExp(Rational{1, 1}, gen));
  EXPECT_FALSE(SampleBernoulliExp(Rational{1, 1}, gen));
  EXPECT_FALSE(SampleBernoulliExp(Rational{1, 1}, gen));
}

// gamma = 3/10 <= 1: trial K=1 draws uniform on [0, 10) and succeeds iff < 3.
TEST(SampleBernoulliExpTest, ForcedFractionalTrialUsesDenominatorTimesK) {
  absl::MockingBitGen gen;
  {
    InSequence seq;
    EXPECT_CALL(absl::MockUniform<uint64_t>(), Call(gen, uint64_t{0}, uint64_t{10}))
        .WillOnce(Return(2));  // success: K = 2
    EXPECT_CALL(absl::MockUniform<uint64_t>(), Call(gen, uint64_t{0}, uint64_t{20}))
        .WillOnce(Return(3));  // 3 >= 3 fails: K = 2 even
  }
  EXPECT_FALSE(SampleBernoulliExp(Rational{3, 10}, gen));
}

// Frequency of true vs exp(-gamma), 200k draws each; tolerance 5 standard
// errors (false failure ~6e-7 per gamma). gamma = 0 must be exactly always
// true.
TEST(SampleBernoulliExpTest, FrequencyMatchesExpMinusGamma) {
  std::mt19937_64 engine(20240601);
  const std::vector<Rational> gammas = {{0, 1},
                                        {3, 10},
                                        {1, 1},
                                        {27, 10},
                                        {11, 2},                      // 5.5: floor part 5
                                        {12345, k2To40},              // tiny, big denominator
                                        {k2To40, 3 * (k2To40 / 4)}};  // 4/3
  for (const Rational& gamma : gammas) {
    int hits = 0;
    for (int i = 0; i < kSamples; ++i) hits += SampleBernoulliExp(gamma, engine) ? 1 : 0;
    const double p = std::exp(-gamma.ToDouble());
    const double se = std::sqrt(p * (1 - p) / kSamples);
    EXPECT_NEAR(static_cast<double>(hits) / kSamples, p, 5 * se + 1e-12)
        << "gamma " << gamma.num << "/" << gamma.den;
  }
}

// scale 1/1: U is always 0 (the first draw only gives the sign); V counts
// successes of Bernoulli(exp(-1)), one uniform on [0, 20!) each. The first
// attempt is "-0", which must be redrawn.
TEST(SampleDiscreteLaplaceTest, ForcedUniformsGiveExactDraws) {
  absl::MockingBitGen gen;
  {
    InSequence seq;
    EXPECT_CALL(absl::MockUniform<uint64_t>(), Call(gen, uint64_t{0}, uint64_t{2}))
        .WillOnce(Return(1));  // U = 0, negative
    EXPECT_CALL(absl::MockUniform<uint64_t>(), Call(gen, uint64_t{0}, kTwentyFactorial))
        .WillOnce(Return(1));  // Bernoulli(exp(-1)) false: V = 0 -> "-0", rejected
    EXPECT_CALL(absl::MockUniform<uint64_t>(), Call(gen, uint64_t{0}, uint64_t{2}))
        .WillOnce(Return(1));  // U = 0, negative
    EXPECT_CALL(absl::MockUniform<uint64_t>(), Call(gen, uint64_t{0}, kTwentyFactorial))
        .WillOnce(Return(2))   // true: V = 1
        .WillOnce(Return(3));  // false: V stays 1
  }
  EXPECT_EQ(SampleDiscreteLaplace(Rational{1, 1}, gen), -1);
}

// Scale 3/2 with U forced: r = 4 on [0, 6) gives U = 2 and a positive sign. D ~
// Bernoulli(exp(-2/3)) runs trials Bernoulli(2/(3K)) as uniforms on [0, 3K)
// compared with 2. Y = floor(X / 2).
TEST(SampleDiscreteLaplaceTest, ForcedUniformsUseNumeratorAndDenominator) {
  absl::MockingBitGen gen;
  {
    InSequence seq;
    EXPECT_CALL(absl::MockUniform<uint64_t>(), Call(gen, uint64_t{0}, uint64_t{6}))
        .WillOnce(Return(4));  // U = 2, positive
    EXPECT_CALL(absl::MockUniform<uint64_t>(), Call(gen, uint64_t{0}, uint64_t{3}))
        .WillOnce(Return(0));  // 0 < 2: K = 2
    EXPECT_CALL(absl::MockUniform<uint64_t>(), Call(gen, uint64_t{0}, uint64_t{6}))
        .WillOnce(Return(5));  // 5 >= 2: stop, K = 2 even -> D = 0, redraw
    EXPECT_CALL(absl::MockUniform<uint64_t>(), Call(gen, uint64_t{0}, uint64_t{6}))
        .WillOnce(Return(5));  // U = 2, negative
    EXPECT_CALL(absl::MockUniform<uint64_t>(), Call(gen, uint64_t{0}, uint64_t{3}))
        .WillOnce(Return(2));  // 2 >= 2: K = 1 odd -> D = 1
    EXPECT_CALL(absl::MockUniform<uint64_t>(), Call(gen, uint64_t{0}, kTwentyFactorial))
        .WillOnce(Return(2))   // V = 1
        .WillOnce(Return(1));  // V stays 1: X = 2 + 3 * 1 = 5, Y = 2
  }
  EXPECT_EQ(SampleDiscreteLaplace(Rational{3, 2}, gen), -2);
}

struct LaplaceCase {
  Rational scale;
  uint64_t seed;
};

TEST(SampleDiscreteLaplaceTest, MatchesExactPmf) {
  const std::vector<LaplaceCase> cases = {
      {Rational{k2To20 / 2, k2To20}, 11},  // 0.5, as RationalAtLeast(0.5) returns it
      {Rational{2, 1}, 12},
      {Rational{10, 3}, 13},                    // denominator not a power of two
      {Rational{10 * k2To20 + 1, k2To20}, 14},  // 10 + 2^-20, large numerator
  };
  for (const LaplaceCase& c : cases) {
    SCOPED_TRACE(::testing::Message() << "scale " << c.scale.num << "/" << c.scale.den);
    std::mt19937_64 engine(c.seed);
    std::vector<int64_t> samples(kSamples);
    for (int64_t& s : samples) s = SampleDiscreteLaplace(c.scale, engine);
    const double t = c.scale.ToDouble();
    ExpectMatchesPmf(
        samples, [t](int64_t x) { return DiscreteLaplacePmf(x, t); },
        static_cast<int64_t>(60 * t + 60));
  }
}

struct GaussianCase {
  Rational sigma_squared;
  uint64_t seed;
};

TEST(SampleDiscreteGaussianTest, MatchesExactPmf) {
  const std::vector<GaussianCase> cases = {
      {Rational{671089, k2To20}, 21},  // RationalAtLeast(0.64): sigma ~ 0.8
      {Rational{9, 1}, 22},            // sigma = 3
      {Rational{7, 3}, 23},            // sigma^2 with a non-dyadic denominator
      {Rational{400, 1}, 24},          // sigma = 20
  };
  for (const GaussianCase& c : cases) {
    SCOPED_TRACE(::testing::Message()
                 << "sigma^2 " << c.sigma_squared.num << "/" << c.sigma_squared.den);
    std::mt19937_64 engine(c.seed);
    std::vector<int64_t> samples(kSamples);
    for (int64_t& s : samples) s = SampleDiscreteGaussian(c.sigma_squared, engine);
    const double sigma = std::sqrt(c.sigma_squared.ToDouble());
    ExpectMatchesPmf(
        samples, [sigma](int64_t x) { return DiscreteGaussianPmf(x, sigma); },
        static_cast<int64_t>(60 * sigma + 10));
  }
}

// Large parameters near the 2^40 limits exercise the 128-bit paths; only the
// spread is checked (variance of the discrete Gaussian equals sigma^2 to within
// e^{-2 pi^2 sigma^2}).
TEST(SampleDiscreteGaussianTest, HandlesLargeNumeratorsAndDenominators) {
  std::mt19937_64 engine(31);
  const Rational sigma_squared{k2To40 - 1, k2To40 / 1024 - 3};  // sigma^2 ~ 1024, sigma ~ 32
  constexpr int kN = 20000;
  std::vector<int64_t> samples(kN);
  for (int64_t& s : samples) s = SampleDiscreteGaussian(sigma_squared, engine);
  const Moments got = SampleMoments(samples);
  const double var = sigma_squared.ToDouble();
  // SE(mean) = sigma/sqrt(n); SE(variance) = sigma^2 sqrt(2/n); 5 SE each.
  EXPECT_NEAR(got.mean, 0, 5 * std::sqrt(var / kN));
  EXPECT_NEAR(got.variance, var, 5 * var * std::sqrt(2.0 / kN));
}

TEST(DiscretePmfTest, LaplacePmfIsNormalisedWithRatioExpMinusOneOverT) {
  for (double t : {0.3, 1.0, 7.5, 1000.0}) {
    double total = 0;
    for (int64_t x = -static_cast<int64_t>(80 * t + 50); x <= 80 * t + 50; ++x) {
      total += DiscreteLaplacePmf(x, t);
    }
    EXPECT_NEAR(total, 1.0, 1e-12) << "t " << t;
    EXPECT_NEAR(DiscreteLaplacePmf(3, t) / DiscreteLaplacePmf(2, t), std::exp(-1 / t), 1e-14);
    EXPECT_DOUBLE_EQ(DiscreteLaplacePmf(-4, t), DiscreteLaplacePmf(4, t));
  }
  EXPECT_TRUE(std::isnan(DiscreteLaplacePmf(0, -1)));
}

TEST(DiscretePmfTest, GaussianPmfIsNormalisedOnBothSidesOfTheClosedFormSwitch) {
  for (double sigma : {0.2, 1.0, 7.99, 8.0, 33.3}) {
    double total = 0;
    for (int64_t x = -static_cast<int64_t>(40 * sigma + 10); x <= 40 * sigma + 10; ++x) {
      total += DiscreteGaussianPmf(x, sigma);
    }
    EXPECT_NEAR(total, 1.0, 1e-12) << "sigma " << sigma;
    EXPECT_DOUBLE_EQ(DiscreteGaussianPmf(-3, sigma), DiscreteGaussianPmf(3, sigma));
  }
  // sigma = 0.2: P(0) = 1 / (1 + 2 e^{-12.5} + ...).
  EXPECT_NEAR(DiscreteGaussianPmf(0, 0.2), 1 / (1 + 2 * std::exp(-12.5) + 2 * std::exp(-50.0)),
              1e-15);
  EXPECT_TRUE(std::isnan(DiscreteGaussianPmf(0, 0)));
}

TEST(RationalAtLeastTest, RoundsUpExactly) {
  auto half = RationalAtLeast(0.5);
  ASSERT_OK(half);
  EXPECT_EQ(half->num, k2To20 / 2);
  EXPECT_EQ(half->den, k2To20);
  // The double 0.1 is 0.1000000000000000055..., strictly above 1/10: the answer
  // is 2/10.
  auto tenth = RationalAtLeast(0.1, 10);
  ASSERT_OK(tenth);
  EXPECT_EQ(tenth->num, 2u);
  // The double 0.3 is 0.2999999999999999888..., below 3/10.
  auto three_tenths = RationalAtLeast(0.3, 10);
  ASSERT_OK(three_tenths);
  EXPECT_EQ(three_tenths->num, 3u);
  EXPECT_EQ(three_tenths->den, 10u);
  auto tiny = RationalAtLeast(1e-300, 7);
  ASSERT_OK(tiny);
  EXPECT_EQ(tiny->num, 1u);
  auto largest = RationalAtLeast(static_cast<double>(k2To40), 1);
  ASSERT_OK(largest);
  EXPECT_EQ(largest->num, k2To40);
}

TEST(RationalAtLeastTest, IsTheSmallestAtLeastX) {
  std::mt19937_64 engine(41);
  std::uniform_real_distribution<double> value(1e-3, 1e3);
  for (int i = 0; i < 10000; ++i) {
    const double x = value(engine);
    const uint64_t den = 1 + engine() % 2000;  // x * den has <= 64 significant bits
    auto r = RationalAtLeast(x, den);
    ASSERT_OK(r);
    // num/den >= x and (num-1)/den < x, compared exactly in long double (64-bit
    // mantissa).
    const long double lx = x;
    EXPECT_GE(static_cast<long double>(r->num), lx * den);
    EXPECT_LT(static_cast<long double>(r->num - 1), lx * den);
  }
}

TEST(RationalAtLeastTest, RejectsBadInput) {
  EXPECT_THAT(RationalAtLeast(-1), StatusIs(absl::StatusCode::kInvalidArgument,
                                            "scale must be finite and > 0 (got -1)"));
  EXPECT_THAT(RationalAtLeast(0), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(RationalAtLeast(std::nan("")), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(RationalAtLeast(INFINITY), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(RationalAtLeast(1.0, 0),
              StatusIs(absl::StatusCode::kInvalidArgument, "denominator must be in [1, 2^40]"));
  EXPECT_THAT(RationalAtLeast(1.0, k2To40 + 1), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(RationalAtLeast(static_cast<double>(k2To40) + 1, 1),
              StatusIs(absl::StatusCode::kInvalidArgument, "too large"));
  EXPECT_THAT(RationalAtLeast(2.0, k2To40), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace fairvault::core::dp
