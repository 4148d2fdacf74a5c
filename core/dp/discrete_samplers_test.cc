// Tests for the CKS samplers: exact draws with mocked uniforms, goodness of fit
// against the exact pmfs (chi-square), moments, and RationalAtLeast's exact
// rounding and errors. Statistical tests use fixed seeds and fail a correct
// sampler with probability <= 1e-4 each.
// Over 500 lines as one file: the exact pmfs and the chi-square check are shared by both samplers'
// suites.
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

// The draws a Bernoulli(exp(-gamma)) makes do not depend on gamma (for one denominator and
// floor(gamma) <= 45): the same seed consumes the same generator words for every gamma,
// including 0 (which is always true).
TEST(SampleBernoulliExpTest, MakesTheSameDrawsWhateverGamma) {
  std::vector<int> calls;
  for (const Rational& gamma : {Rational{0, 10}, Rational{3, 10}, Rational{10, 10},
                                Rational{27, 10}, Rational{449, 10}}) {
    CountingUrbg urbg;
    int hits = 0;
    for (int i = 0; i < 1000; ++i) hits += SampleBernoulliExp(gamma, urbg) ? 1 : 0;
    if (gamma.num == 0) {
      EXPECT_EQ(hits, 1000);
    }
    calls.push_back(urbg.calls);
  }
  for (int c : calls) EXPECT_EQ(c, calls[0]);
  // 45 Bernoulli(exp(-1)) trials and 21 unit trials per draw (plus the uniforms' rare
  // rejections, the same for every gamma here).
  EXPECT_GE(calls[0], 1000 * (45 + 21));
  // The dyadic 128-bit form gives the same outcomes from the same draws as the rational one.
  CountingUrbg wide, narrow;
  for (int i = 0; i < 1000; ++i) {
    EXPECT_EQ(SampleBernoulliExpDyadic(absl::uint128(27), 3, wide),
              SampleBernoulliExp(Rational{27, 8}, narrow));
  }
  EXPECT_EQ(wide.calls, narrow.calls);
}

constexpr uint64_t kTwentyFactorial = 2432902008176640000;

// A URBG that returns scripted 64-bit words, then ~0 (which gives bound - 1 for any bound up to
// 2^63), to force the samplers' uniforms exactly.
class Words {
 public:
  using result_type = uint64_t;
  explicit Words(std::vector<uint64_t> words) : words_(std::move(words)) {}
  static constexpr result_type min() { return 0; }
  static constexpr result_type max() { return ~uint64_t{0}; }
  result_type operator()() { return next_ < words_.size() ? words_[next_++] : ~uint64_t{0}; }

 private:
  std::vector<uint64_t> words_;
  size_t next_ = 0;
};

// The word that the samplers' uniform below `bound` (Lemire's multiply-and-reject) turns into
// `value` on its first try: the largest x with floor(x·bound / 2^64) = value, whose low part
// 2^64 − bound or more is above the rejection threshold (2^64 mod bound) for bound <= 2^63.
uint64_t WordFor(uint64_t value, uint64_t bound) {
  const absl::uint128 top = (absl::uint128(value + 1) << 64) - 1;
  return absl::Uint128Low64(top / bound);
}

std::vector<uint64_t> Repeat(uint64_t word, int times) { return std::vector<uint64_t>(times, word); }

std::vector<uint64_t> Concat(std::initializer_list<std::vector<uint64_t>> parts) {
  std::vector<uint64_t> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

constexpr uint64_t kFail = kTwentyFactorial - 1;         // Bernoulli(exp(-1)) false (K = 2)
constexpr uint64_t kPass = kTwentyFactorial / 2 - 1;     // Bernoulli(exp(-1)) true (K = 3)

// gamma = 1 is one Bernoulli(exp(-1)) and a trivial unit part (numerator 0). Trial 1 of
// Bernoulli(exp(-1)) always succeeds and trial K succeeds with probability 1/K, so its first
// failure K has P(K >= k) = 1/(k-1)!: one uniform w on [0, 20!) gives K >= k iff w <
// 20!/(k-1)!. The first of the 45 fixed draws on [0, 20!) decides; the others are drawn and
// ignored, then come the 21 unit trials.
TEST(SampleBernoulliExpTest, ForcedUniformsGiveExactOutcome) {
  constexpr uint64_t kHalf = kTwentyFactorial / 2, kSixth = kTwentyFactorial / 6,
                     kTwentyFourth = kTwentyFactorial / 24;
  const std::vector<std::pair<uint64_t, bool>> cases = {
      {kTwentyFactorial - 1, false},  // w >= 20!/2: trial 2 fails, K = 2 even
      {kHalf, false},                 // the same, at the threshold
      {kHalf - 1, true},              // trial 2 succeeds, trial 3 fails: K = 3 odd
      {kSixth, true},                 // the same, at the next threshold
      {kSixth - 1, false},            // K = 4
      {kTwentyFourth - 1, true},      // K = 5
      {20, true},                     // below 20!/18! = 380, not 20!/19! = 20: K = 19
      {1, false}                      // K = 20
  };
  for (const auto& [w, expected] : cases) {
    Words gen({WordFor(w, kTwentyFactorial)});
    EXPECT_EQ(SampleBernoulliExp(Rational{1, 1}, gen), expected) << "w " << w;
  }
  // w = 0: all of trials 2..20 succeed, and fresh draws continue the trials: trial 21 succeeds
  // (0 on [0, 21)), trial 22 fails (5 on [0, 22)): K = 22 even -> false.
  Words gen({WordFor(0, kTwentyFactorial), WordFor(0, 21), WordFor(5, 22)});
  EXPECT_FALSE(SampleBernoulliExp(Rational{1, 1}, gen));
}

// gamma = 3/10 <= 1: the 45 whole-part draws are ignored, then trial K draws a uniform on
// [0, 10 K) and succeeds iff it is < 3. All 21 trials are drawn; the first failure decides.
TEST(SampleBernoulliExpTest, ForcedFractionalTrialUsesDenominatorTimesK) {
  Words fails_at_two(Concat({Repeat(WordFor(kFail, kTwentyFactorial), 45),
                             {WordFor(2, 10), WordFor(3, 20)}}));  // success, then 3 >= 3
  EXPECT_FALSE(SampleBernoulliExp(Rational{3, 10}, fails_at_two));  // K = 2 even
  Words fails_at_three(Concat({Repeat(WordFor(kFail, kTwentyFactorial), 45),
                               {WordFor(0, 10), WordFor(1, 20), WordFor(29, 30)}}));
  EXPECT_TRUE(SampleBernoulliExp(Rational{3, 10}, fails_at_three));  // K = 3 odd
}

// scale 1/1: U is always 0 (the first draw only gives the sign), so D succeeds (the 21 unit
// trials on [0, K) compare with numerator 0); V counts the leading successes among 45
// Bernoulli(exp(-1)), one uniform on [0, 20!) each. The first attempt is "-0", which must
// be redrawn.
TEST(SampleDiscreteLaplaceTest, ForcedUniformsGiveExactDraws) {
  const uint64_t fail = WordFor(kFail, kTwentyFactorial), pass = WordFor(kPass, kTwentyFactorial);
  Words gen(Concat({{WordFor(1, 2)},  // U = 0, negative
                    Repeat(~uint64_t{0}, 21),
                    Repeat(fail, 45),  // V = 0 -> "-0", rejected
                    {WordFor(1, 2)},   // U = 0, negative
                    Repeat(~uint64_t{0}, 21),
                    {pass, fail},        // V = 1
                    Repeat(pass, 43)}));  // after a failure: ignored
  EXPECT_EQ(SampleDiscreteLaplace(Rational{1, 1}, gen), -1);
}

// Scale 3/2 with U forced: r = 4 on [0, 6) gives U = 2 and a positive sign. D ~
// Bernoulli(exp(-2/3)) runs 21 trials Bernoulli(2/(3K)) as uniforms on [0, 3K) compared with 2;
// a D that fails (K even) rejects the attempt before V is drawn. Y = floor(X / 2).
TEST(SampleDiscreteLaplaceTest, ForcedUniformsUseNumeratorAndDenominator) {
  Words gen(Concat({{WordFor(4, 6),   // U = 2, positive
                     WordFor(0, 3),   // 0 < 2: K = 2
                     WordFor(5, 6)},  // 5 >= 2: first failure K = 2, even -> D = 0, redraw
                    Repeat(~uint64_t{0}, 19),
                    {WordFor(5, 6),   // U = 2, negative
                     WordFor(2, 3)},  // 2 >= 2: K = 1 odd -> D = 1 (20 more trials drawn)
                    Repeat(~uint64_t{0}, 20),
                    {WordFor(kPass, kTwentyFactorial),    // V = 1
                     WordFor(kFail, kTwentyFactorial)}}));  // X = 2 + 3 * 1 = 5, Y = 2
  EXPECT_EQ(SampleDiscreteLaplace(Rational{3, 2}, gen), -2);
}

// Pearson correlation of two samples.
double Correlation(const std::vector<double>& a, const std::vector<double>& b) {
  const double n = static_cast<double>(a.size());
  double ma = 0, mb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ma += a[i] / n;
    mb += b[i] / n;
  }
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    sab += (a[i] - ma) * (b[i] - mb);
    saa += (a[i] - ma) * (a[i] - ma);
    sbb += (b[i] - mb) * (b[i] - mb);
  }
  return sab / std::sqrt(saa * sbb);
}

// The generator calls a draw makes (its running time) do not depend on the value drawn: a
// caller who times a release learns nothing about its noise. Under independence the
// sample correlation of (calls, |value|) over n draws has standard error 1/sqrt(n) = 0.0022;
// the bound 0.015 is 6.7 of them (false failure < 1e-10). The samplers before issue 19 ran
// one more trial per multiple of the scale in |value|: correlation 0.3 to 0.6.
template <typename Draw>
void ExpectCallsUncorrelatedWithValue(Draw draw) {
  constexpr int kN = 200000;
  CountingUrbg urbg;
  std::vector<double> calls(kN), magnitude(kN);
  for (int i = 0; i < kN; ++i) {
    const int before = urbg.calls;
    magnitude[i] = std::fabs(static_cast<double>(draw(urbg)));
    calls[i] = urbg.calls - before;
  }
  EXPECT_LT(std::fabs(Correlation(calls, magnitude)), 0.015);
  // And the tails: draws beyond twice the mean magnitude take as many calls on average as
  // the others (within 6 standard errors of the difference).
  double mean_magnitude = 0;
  for (double m : magnitude) mean_magnitude += m / kN;
  double sum[2] = {0, 0}, sum2[2] = {0, 0}, count[2] = {0, 0};
  for (int i = 0; i < kN; ++i) {
    const int tail = magnitude[i] > 2 * mean_magnitude ? 1 : 0;
    sum[tail] += calls[i];
    sum2[tail] += calls[i] * calls[i];
    count[tail] += 1;
  }
  ASSERT_GT(count[1], 1000);
  double se2 = 0;
  for (int t = 0; t < 2; ++t) {
    const double mean = sum[t] / count[t];
    se2 += (sum2[t] / count[t] - mean * mean) / count[t];
  }
  EXPECT_LT(std::fabs(sum[1] / count[1] - sum[0] / count[0]), 6 * std::sqrt(se2));
}

TEST(SampleDiscreteLaplaceTest, CallsDoNotDependOnTheValue) {
  for (const Rational& scale : {Rational{2, 1}, Rational{10, 3}, Rational{1000, 1}}) {
    SCOPED_TRACE(::testing::Message() << "scale " << scale.num << "/" << scale.den);
    ExpectCallsUncorrelatedWithValue(
        [&](CountingUrbg& urbg) { return SampleDiscreteLaplace(scale, urbg); });
  }
}

TEST(SampleDiscreteGaussianTest, CallsDoNotDependOnTheValue) {
  for (const Rational& sigma_squared : {Rational{9, 1}, Rational{7, 3}, Rational{160000, 1}}) {
    SCOPED_TRACE(::testing::Message() << "sigma^2 " << sigma_squared.num << "/"
                                      << sigma_squared.den);
    ExpectCallsUncorrelatedWithValue(
        [&](CountingUrbg& urbg) { return SampleDiscreteGaussian(sigma_squared, urbg); });
  }
}

// Bernoulli(p) for the doubles Decide draws with: exact (two words against p·2^126), the same
// two calls whatever p is; frequencies within 5 standard errors over 200k draws.
TEST(SampleBernoulliTest, ExactThresholdAndTheSameCallsForEveryP) {
  absl::MockingBitGen gen;
  // p = 3/4: true iff the first word's top 63 bits are below 3·2^61.
  {
    InSequence seq;
    EXPECT_CALL(absl::MockUniform<uint64_t>(), Call(gen))
        .WillOnce(Return((uint64_t{3} << 62) - 2))  // top 63 bits 3·2^61 − 1: below
        .WillOnce(Return(~uint64_t{0}))
        .WillOnce(Return(uint64_t{3} << 62))  // exactly 3·2^61, low word irrelevant (lo = 0)
        .WillOnce(Return(0))
        .RetiresOnSaturation();
  }
  EXPECT_TRUE(SampleBernoulli(0.75, gen));
  EXPECT_FALSE(SampleBernoulli(0.75, gen));
  std::vector<int> calls;
  for (double p : {1e-6, 0.1, 0.5, 0.75, 1 - 1e-6}) {
    CountingUrbg urbg;
    int hits = 0;
    for (int i = 0; i < kSamples; ++i) hits += SampleBernoulli(p, urbg) ? 1 : 0;
    calls.push_back(urbg.calls);
    const double se = std::sqrt(p * (1 - p) / kSamples);
    EXPECT_NEAR(static_cast<double>(hits) / kSamples, p, 5 * se + 1e-12) << "p " << p;
  }
  for (int c : calls) EXPECT_EQ(c, 2 * kSamples);
  CountingUrbg edges;
  EXPECT_FALSE(SampleBernoulli(0, edges));
  EXPECT_TRUE(SampleBernoulli(1, edges));
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
