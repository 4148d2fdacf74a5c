// Exact discrete Laplace / discrete Gaussian sampling after Canonne, Kamath,
// Steinke 2020 (arXiv 2004.00010), Algorithms 1-3. Every decision is a
// comparison of uniform integers drawn with absl::Uniform; floating point
// appears only in RationalAtLeast and the pmfs.
#include "core/dp/discrete_samplers.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "absl/base/optimization.h"
#include "absl/numeric/int128.h"
#include "absl/random/distributions.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/util/status_macros.h"
#include "core/util/validate.h"

namespace fairvault::core::dp {
namespace {

constexpr uint64_t kMaxPart = uint64_t{1} << 40;

// Largest geometric count V in Algorithm 2 before the attempt is redrawn: keeps
// U + t*V < 2^63 for t <= 2^40. Reaching it has probability e^{-2^22}, so the
// truncation changes the output distribution by less than 10^{-1,800,000}.
constexpr uint64_t kMaxGeometric = uint64_t{1} << 22;

// The samplers return plain values (they sit in hot loops), so a malformed
// parameter is a caller bug; sampling anyway could silently void the privacy
// guarantee.
void CheckOrDie(bool ok, const char* what) {
  if (ABSL_PREDICT_FALSE(!ok)) {
    std::fprintf(stderr, "fairvault: discrete sampler precondition violated: %s\n", what);
    std::abort();
  }
}

// Uniform on {0, ..., bound - 1}; bound >= 1.
inline uint64_t UniformBelow(uint64_t bound, absl::BitGenRef gen) {
  return absl::Uniform<uint64_t>(gen, 0, bound);
}

// Uniform on {0, ..., bound - 1} for a 128-bit bound >= 1, by rejection from
// two 64-bit words (acceptance >= 1/2 per round).
absl::uint128 UniformBelow128(absl::uint128 bound, absl::BitGenRef gen) {
  const absl::uint128 max = bound - 1;
  const uint64_t hi_max = absl::Uint128High64(max);
  if (hi_max == 0) {
    return absl::Uniform<uint64_t>(absl::IntervalClosed, gen, 0, absl::Uint128Low64(max));
  }
  while (true) {
    const uint64_t hi = absl::Uniform<uint64_t>(absl::IntervalClosed, gen, 0, hi_max);
    const uint64_t lo = absl::Uniform<uint64_t>(gen);
    const absl::uint128 v = absl::MakeUint128(hi, lo);
    if (v <= max) return v;
  }
}

constexpr uint64_t kTwentyFactorial = 2432902008176640000;  // 20! < 2^63

// Bernoulli(exp(-1)): Algorithm 1 with gamma = 1. Trial K = 1, Bernoulli(1/1),
// always succeeds; trial K >= 2 succeeds iff a uniform d_K on {0..K-1} is 0.
// The d_K for K = 2..20 are read from ONE uniform w on [0, 20!) in the
// factorial number system (w = d_2 + 2! d_3 + 3! d_4 + ... + 19! d_20, a
// bijection, so they are independent and uniform): trials 2..K all succeed iff
// K! divides w. This is the hot loop of the discrete Laplace sampler and costs
// one draw instead of e - 1 on average.
inline bool BernoulliExpMinusOne(absl::BitGenRef gen) {
  const uint64_t w = UniformBelow(kTwentyFactorial, gen);
  if (w & 1) return false;  // d_2 != 0: K = 2
  uint64_t k = 3;
  uint64_t k_factorial = 6;
  while (w % k_factorial == 0) {
    if (k == 20) {
      // w == 0 (probability 1/20!): draw d_21, d_22, ... one at a time.
      k = 21;
      while (UniformBelow(k, gen) == 0) ++k;
      break;
    }
    ++k;
    k_factorial *= k;
  }
  return (k & 1) != 0;
}

// Algorithm 1 for gamma = num/den in [0, 1] (num <= den <= 2^40): K counts the
// successful Bernoulli(gamma/K) trials; P(K odd) = exp(-gamma).
inline bool BernoulliExpUnit64(uint64_t num, uint64_t den, absl::BitGenRef gen) {
  if (num == 0) return true;
  uint64_t k = 1;
  while (true) {
    bool success;
    if (ABSL_PREDICT_TRUE(k < (uint64_t{1} << 23))) {
      success = UniformBelow(den * k, gen) < num;  // den * k < 2^63
    } else {
      // Probability < 1/(2^23)!: split Bernoulli(gamma/K) = Bernoulli(1/K) *
      // Bernoulli(gamma).
      success = UniformBelow(k, gen) == 0 && UniformBelow(den, gen) < num;
    }
    if (!success) break;
    ++k;
  }
  return (k & 1) != 0;
}

// exp(-num/den) = exp(-1)^floor(num/den) * exp(-frac): independent trials, all
// must succeed.
bool BernoulliExp64(uint64_t num, uint64_t den, absl::BitGenRef gen) {
  for (uint64_t whole = num / den; whole > 0; --whole) {
    if (!BernoulliExpMinusOne(gen)) return false;
  }
  return BernoulliExpUnit64(num % den, den, gen);
}

// As BernoulliExpUnit64 for 128-bit num <= den. Bernoulli(gamma/K) is always
// split into Bernoulli(1/K) and Bernoulli(num/den), so den * K never has to be
// formed.
bool BernoulliExpUnit128(absl::uint128 num, absl::uint128 den, absl::BitGenRef gen) {
  if (num == 0) return true;
  uint64_t k = 1;
  while ((k == 1 || UniformBelow(k, gen) == 0) && UniformBelow128(den, gen) < num) ++k;
  return (k & 1) != 0;
}

bool BernoulliExp128(absl::uint128 num, absl::uint128 den, absl::BitGenRef gen) {
  for (absl::uint128 whole = num / den; whole > 0; --whole) {
    if (!BernoulliExpMinusOne(gen)) return false;
  }
  return BernoulliExpUnit128(num % den, den, gen);
}

// Divides out common factors of two: a cheap partial reduction that makes the
// common dyadic rationals (RationalAtLeast(2.0) = 2^21/2^20) as cheap to sample
// as 2/1.
inline void StripCommonTwos(uint64_t& num, uint64_t& den) {
  const int shift = __builtin_ctzll(num | den);
  num >>= shift;
  den >>= shift;
}

// Algorithm 2: discrete Laplace with scale t/s, 1 <= t, s <= 2^40. The sign bit
// B is drawn together with U (one uniform on [0, 2t)); that is the same law
// because every rejection redraws all of U, D, V and B.
int64_t SampleLaplaceImpl(uint64_t t, uint64_t s, absl::BitGenRef gen) {
  while (true) {
    const uint64_t r = UniformBelow(2 * t, gen);
    const uint64_t u = r >> 1;
    const bool negative = (r & 1) != 0;
    if (!BernoulliExpUnit64(u, t, gen)) continue;  // D ~ Bernoulli(exp(-U/t))
    uint64_t v = 0;                                // V ~ Geometric(1 - exp(-1))
    while (v <= kMaxGeometric && BernoulliExpMinusOne(gen)) ++v;
    if (ABSL_PREDICT_FALSE(v > kMaxGeometric)) continue;
    const uint64_t x = u + t * v;  // Geometric(1 - exp(-1/t)) on {0, 1, ...}
    const uint64_t y = s == 1 ? x : x / s;
    if (negative) {
      if (y == 0) continue;  // so that 0 is not counted twice
      return -static_cast<int64_t>(y);
    }
    return static_cast<int64_t>(y);
  }
}

// floor(sqrt(q)) for q < 2^53.
uint64_t IntegerSqrt(uint64_t q) {
  uint64_t r = static_cast<uint64_t>(std::sqrt(static_cast<double>(q)));
  while (r * r > q) --r;
  while ((r + 1) * (r + 1) <= q) ++r;
  return r;
}

// sum_{x in Z} exp(-x^2 / (2 sigma^2)).
double GaussianNormaliser(double sigma) {
  // Poisson summation: the sum equals sqrt(2 pi) sigma (1 + 2 sum_{m>=1} exp(-2
  // pi^2 sigma^2 m^2)); for sigma >= 8 the correction is below 10^-500, so the
  // closed form equals the truncated sum over |x| <= 60 sigma + 10 to double
  // precision, without 10^8 terms.
  if (sigma >= 8) return std::sqrt(2 * M_PI) * sigma;
  const int64_t limit = static_cast<int64_t>(60 * sigma + 10);
  double tail = 0;
  for (int64_t x = limit; x >= 1; --x) {  // smallest terms first
    const double xd = static_cast<double>(x);
    tail += std::exp(-xd * xd / (2 * sigma * sigma));
  }
  return 1 + 2 * tail;
}

}  // namespace

absl::StatusOr<Rational> RationalAtLeast(double x, uint64_t den) {
  RETURN_IF_ERROR(ValidateIsFiniteAndPositive(x, "scale"));
  if (den < 1 || den > kMaxPart) {
    return absl::InvalidArgumentError(
        absl::StrCat("denominator must be in [1, 2^40] (got ", den, ")"));
  }
  // x = mantissa * 2^(exponent - 53) exactly, with 2^52 <= mantissa < 2^53.
  int exponent = 0;
  const double fraction = std::frexp(x, &exponent);
  const uint64_t mantissa = static_cast<uint64_t>(std::ldexp(fraction, 53));
  const int shift = 53 - exponent;
  // num = ceil(mantissa * den / 2^shift), computed exactly. mantissa * den >=
  // 2^52 > 2^40, so shift <= 0 always overflows the bound.
  absl::uint128 num = kMaxPart + 1;
  if (shift >= 128) {
    num = 1;  // 0 < x * den < 2^93 / 2^128
  } else if (shift > 0) {
    const absl::uint128 product = absl::uint128(mantissa) * den;
    const absl::uint128 low_mask = (absl::uint128(1) << shift) - 1;
    num = (product >> shift) + ((product & low_mask) != 0 ? 1 : 0);
  }
  if (num > kMaxPart) {
    return absl::InvalidArgumentError(
        absl::StrCat("scale ", x, " is too large for denominator ", den,
                     ": the numerator must stay <= 2^40 (use a smaller "
                     "denominator or a smaller scale)"));
  }
  return Rational{static_cast<uint64_t>(num), den};
}

bool SampleBernoulliExp(const Rational& gamma, absl::BitGenRef gen) {
  CheckOrDie(gamma.den >= 1 && gamma.den <= kMaxPart,
             "SampleBernoulliExp: gamma.den must be in [1, 2^40]");
  return BernoulliExp64(gamma.num, gamma.den, gen);
}

int64_t SampleDiscreteLaplace(const Rational& scale, absl::BitGenRef gen) {
  CheckOrDie(scale.num >= 1 && scale.num <= kMaxPart && scale.den >= 1 && scale.den <= kMaxPart,
             "SampleDiscreteLaplace: scale num and den must be in [1, 2^40]");
  uint64_t t = scale.num;
  uint64_t s = scale.den;
  StripCommonTwos(t, s);
  return SampleLaplaceImpl(t, s, gen);
}

int64_t SampleDiscreteGaussian(const Rational& sigma_squared, absl::BitGenRef gen) {
  CheckOrDie(sigma_squared.num >= 1 && sigma_squared.num <= kMaxPart && sigma_squared.den >= 1 &&
                 sigma_squared.den <= kMaxPart,
             "SampleDiscreteGaussian: sigma_squared num and den must be in [1, 2^40]");
  uint64_t n = sigma_squared.num;  // sigma^2 = n / d
  uint64_t d = sigma_squared.den;
  StripCommonTwos(n, d);
  const uint64_t t = IntegerSqrt(n / d) + 1;  // floor(sigma) + 1 <= 2^20 + 1
  // Algorithm 3 accepts Y ~ Lap_Z(t) with probability exp(-(|Y| - sigma^2/t)^2
  // / (2 sigma^2)) = exp(-z^2 / (2 n d t^2)) with z = |Y| d t - n. z^2 can
  // exceed 128 bits, so write |z| = w * (d t) + f (0 <= f < d t) and split the
  // exponent into three terms, each a 128-bit rational, sampled as independent
  // Bernoullis that must all succeed:
  //   z^2 / (2 n d t^2) = d w^2 / (2 n) + w f / (n t) + f^2 / (2 n d t^2).
  const absl::uint128 dt = absl::uint128(d) * t;                 // <= 2^41
  const absl::uint128 nt = absl::uint128(n) * t;                 // < 2^61
  const absl::uint128 two_ndtt = 2 * absl::uint128(n) * dt * t;  // < 2^103
  while (true) {
    const int64_t y = SampleLaplaceImpl(t, 1, gen);  // |y| < 2^63
    const uint64_t abs_y = y < 0 ? uint64_t{0} - static_cast<uint64_t>(y) : y;
    const absl::uint128 ydt = absl::uint128(abs_y) * dt;  // < 2^104
    const absl::uint128 z = ydt >= n ? ydt - n : n - ydt;
    const absl::uint128 w = z / dt;  // <= max(|y|, sigma^2 / t) < 2^63
    const absl::uint128 f = z % dt;
    if (w != 0) {
      // d w^2 / (2n) fits in 128 bits while w < 2^40 (always, in practice);
      // otherwise use exp(-d w^2/(2n)) = exp(-d w/(2n))^w.
      if (w < kMaxPart) {
        if (!BernoulliExp128(d * w * w, 2 * absl::uint128(n), gen)) continue;
      } else {
        bool all = true;
        for (absl::uint128 i = 0; i < w && all; ++i) {
          all = BernoulliExp128(d * w, 2 * absl::uint128(n), gen);
        }
        if (!all) continue;
      }
      if (f != 0 && !BernoulliExp128(w * f, nt, gen)) continue;
    }
    if (f != 0 && !BernoulliExp128(f * f, two_ndtt, gen)) continue;
    return y;
  }
}

double DiscreteLaplacePmf(int64_t x, double scale) {
  if (!std::isfinite(scale) || scale <= 0) return std::numeric_limits<double>::quiet_NaN();
  // (1 - e^{-1/t}) / (1 + e^{-1/t}) = tanh(1/(2t)), accurate for large t.
  return std::tanh(0.5 / scale) * std::exp(-std::fabs(static_cast<double>(x)) / scale);
}

double DiscreteGaussianPmf(int64_t x, double sigma) {
  if (!std::isfinite(sigma) || sigma <= 0) return std::numeric_limits<double>::quiet_NaN();
  const double xd = static_cast<double>(x);
  return std::exp(-xd * xd / (2 * sigma * sigma)) / GaussianNormaliser(sigma);
}

}  // namespace fairvault::core::dp
