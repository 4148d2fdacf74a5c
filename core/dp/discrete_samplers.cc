// Exact discrete Laplace / discrete Gaussian sampling after Canonne, Kamath,
// Steinke 2020 (arXiv 2004.00010), Algorithms 1-3, with a fixed sequence of draws per
// attempt so that the running time does not depend on the value drawn. Every decision is
// a comparison of uniform integers drawn with absl::Uniform; floating point appears only
// in RationalAtLeast and the pmfs.
// Over 500 lines as one file: both samplers are built on the same fixed-work Bernoulli and
// geometric draws, which must stay beside them.
#include "core/dp/discrete_samplers.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <limits>
#include <utility>

#include "absl/base/optimization.h"
#include "absl/numeric/int128.h"
#include "absl/random/bernoulli_distribution.h"
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

// Work independent of the drawn value (docs/privacy.md §4, "Timing"). A rejection
// sampler's accepted value is independent of how many attempts it took and of everything
// the rejected attempts drew, so its running time reveals nothing about the value as long
// as an attempt that is ACCEPTED makes the same calls on the generator (the same bounds in
// the same order) whatever values they return; a rejected attempt may stop at the draw
// that rejects it. So each loop of Algorithms 1-3 whose length depends on a drawn value
// runs to a fixed number of trials before it lets an attempt through, ignoring the results
// it does not need; only when a fixed run is too short does the exact algorithm carry on.
// The runs are long enough that this happens with probability below 2^-64 per loop:
// - Algorithm 1 on gamma in [0, 1] stops at the first failed Bernoulli(gamma/K) trial,
//   K > 21 with probability <= 1/21! < 2^-65;
// - a product of `whole` Bernoulli(exp(-1)) trials, or the geometric count V of
//   Algorithm 2, needs more than 45 trials only when the first 45 all succeed: e^-45 <
//   2^-64.
// Where the number of rejections itself depends on the data (the exponential mechanism's
// proposals, whose acceptance rates are the utilities), every trial must make the same
// draws whether it succeeds or not: Work::kFixed.
constexpr uint64_t kUnitTrials = 21;
constexpr uint64_t kWholeTrials = 45;
constexpr uint64_t kGaussianGeometricTrials = 10;  // see SampleDiscreteGaussian

enum class Work {
  kFixed,          // the same draws whatever the outcome
  kFixedIfPassed,  // the same draws whenever the outcome is true; a false one may stop early
};

// The samplers return plain values (they sit in hot loops), so a malformed
// parameter is a caller bug; sampling anyway could silently void the privacy
// guarantee.
void CheckOrDie(bool ok, const char* what) {
  if (ABSL_PREDICT_FALSE(!ok)) {
    std::fprintf(stderr, "fairvault: discrete sampler precondition violated: %s\n", what);
    std::abort();
  }
}

// Uniform on {0, ..., bound - 1}; bound >= 1: Lemire's multiply-and-reject on raw words
// (Lemire 2019, "Fast random integer generation in an interval"), exact. The number of words it
// takes is independent of the value it returns (every value has the same number of accepted
// words). Raw words rather than absl::Uniform: the samplers below make dozens of these draws
// per value, and absl's distribution call through BitGenRef costs two indirect calls each.
inline uint64_t UniformBelow(uint64_t bound, absl::BitGenRef gen) {
  absl::uint128 product = absl::uint128(gen()) * bound;
  uint64_t low = absl::Uint128Low64(product);
  if (ABSL_PREDICT_FALSE(low < bound)) {
    const uint64_t threshold = (uint64_t{0} - bound) % bound;  // 2^64 mod bound
    while (low < threshold) {
      product = absl::uint128(gen()) * bound;
      low = absl::Uint128Low64(product);
    }
  }
  return absl::Uint128High64(product);
}

// Uniform on {0, ..., bound - 1} for a 128-bit bound >= 1, by rejection from
// two 64-bit words (acceptance >= 1/2 per round). The number of rounds is
// independent of the value returned. Bounds below 2^64 take one draw.
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

constexpr uint64_t kFactorial[21] = {1,
                                     1,
                                     2,
                                     6,
                                     24,
                                     120,
                                     720,
                                     5040,
                                     40320,
                                     362880,
                                     3628800,
                                     39916800,
                                     479001600,
                                     6227020800,
                                     87178291200,
                                     1307674368000,
                                     20922789888000,
                                     355687428096000,
                                     6402373705728000,
                                     121645100408832000,
                                     2432902008176640000};  // 20! < 2^63

// Inside the fixed runs below every step is branch-free arithmetic on the drawn values (bitwise
// & and |, masks, comparisons to 0/1 integers; no short-circuit && or ||, no division by a
// drawn value), so that not only the draws but the instructions executed are the same whatever
// the values drawn: measured with callgrind, which counts instructions, the exponential
// mechanism executes the same count on neighbouring datasets (docs/privacy.md §4).

// All ones if `bit` is 1, 0 if it is 0.
inline uint64_t Mask(uint64_t bit) { return uint64_t{0} - bit; }

// floor(x / d) and x mod d for d >= 1, by schoolbook division over 64 fixed steps: the
// hardware divider's latency depends on its operands.
inline uint64_t DivModFixed64(uint64_t x, uint64_t d, uint64_t* remainder) {
  absl::uint128 r = 0;
  uint64_t q = 0;
  for (int i = 63; i >= 0; --i) {
    r = (r << 1) | ((x >> i) & 1);
    // r < 2d <= 2^65: r >= d is the borrow of r - d.
    const uint64_t ge = 1 - static_cast<uint64_t>(absl::Uint128High64(r - d) >> 63);
    r -= absl::uint128(Mask(ge)) & d;
    q |= ge << i;
  }
  *remainder = absl::Uint128Low64(r);
  return q;
}

// The same for 128 bits, d < 2^126.
inline absl::uint128 DivModFixed128(absl::uint128 x, absl::uint128 d, absl::uint128* remainder) {
  absl::uint128 r = 0, q = 0;
  for (int i = 127; i >= 0; --i) {
    r = (r << 1) | ((x >> i) & 1);
    const uint64_t ge = 1 - static_cast<uint64_t>(absl::Uint128High64(r - d) >> 63);
    r -= absl::MakeUint128(Mask(ge), Mask(ge)) & d;
    q |= absl::uint128(ge) << i;
  }
  *remainder = r;
  return q;
}

// #{j in 1..20 : w < 20!/j!}, with the thresholds as constants (no loop whose length
// depends on w).
template <size_t... I>
inline uint64_t CountBelowThresholds(uint64_t w, std::index_sequence<I...>) {
  return (uint64_t{0} + ... + static_cast<uint64_t>(w < kFactorial[20] / kFactorial[I + 1]));
}

// Bernoulli(exp(-1)): Algorithm 1 with gamma = 1. Trial 1, Bernoulli(1/1), always
// succeeds and trial K >= 2 succeeds with probability 1/K, so the first failure K has
// P(K >= k) = 1/(k-1)!. One uniform w on [0, 20!) gives K for K <= 20 exactly: K >= k iff w
// < 20!/(k-1)!, an event of probability 1/(k-1)! (the thresholds are nested integers), so
// K = 1 + #{j in 1..20 : w < 20!/j!}. One draw and twenty comparisons whatever the outcome;
// only w = 0 (K >= 21, probability 1/20!) draws trials 21, 22, ... one at a time. Returns 1
// for true.
inline uint64_t BernoulliExpMinusOne(absl::BitGenRef gen) {
  const uint64_t w = UniformBelow(kFactorial[20], gen);
  uint64_t k = 1 + CountBelowThresholds(w, std::make_index_sequence<20>());
  if (ABSL_PREDICT_FALSE(k == 21)) {
    while (UniformBelow(k, gen) == 0) ++k;
  }
  return k & 1;
}

// Algorithm 1 for gamma = num/den in [0, 1] (num <= den <= 2^40): K is the first failed
// Bernoulli(gamma/K) trial; P(K odd) = exp(-gamma). Always kUnitTrials draws (the ones after
// the first failure are ignored; stopping at an even K, which rejects an attempt, would save
// draws, but the compiler turns that test into branches whose count depends on K); the exact
// loop continues only if all of them succeed.
inline bool BernoulliExpUnit64(uint64_t num, uint64_t den, absl::BitGenRef gen) {
  uint64_t first_failure = 0;
  for (uint64_t k = 1; k <= kUnitTrials; ++k) {
    const uint64_t failed = static_cast<uint64_t>(UniformBelow(den * k, gen) >= num);
    first_failure |= Mask(failed & static_cast<uint64_t>(first_failure == 0)) & k;
  }
  if (ABSL_PREDICT_FALSE(first_failure == 0)) {
    uint64_t k = kUnitTrials + 1;
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
    first_failure = k;
  }
  return (first_failure & 1) != 0;
}

// As BernoulliExpUnit64 for 128-bit num <= den. Bernoulli(gamma/K) is always
// split into Bernoulli(1/K) and Bernoulli(num/den), so den * K never has to be
// formed; both are drawn on every trial.
bool BernoulliExpUnit128(absl::uint128 num, absl::uint128 den, absl::BitGenRef gen) {
  uint64_t first_failure = 0;
  for (uint64_t k = 1; k <= kUnitTrials; ++k) {
    // Trial 1 is Bernoulli(gamma): its 1/K factor is 1, and k is public.
    const uint64_t one_in_k = k == 1 ? 1 : static_cast<uint64_t>(UniformBelow(k, gen) == 0);
    const uint64_t below = static_cast<uint64_t>(UniformBelow128(den, gen) < num);
    const uint64_t failed = 1 ^ (one_in_k & below);
    first_failure |= Mask(failed & static_cast<uint64_t>(first_failure == 0)) & k;
  }
  if (ABSL_PREDICT_FALSE(first_failure == 0)) {
    uint64_t k = kUnitTrials + 1;
    while (UniformBelow(k, gen) == 0 && UniformBelow128(den, gen) < num) ++k;
    first_failure = k;
  }
  return (first_failure & 1) != 0;
}

// exp(-1)^whole: `whole` independent Bernoulli(exp(-1)) trials that must all succeed.
// kWholeTrials draws (those beyond `whole` are ignored; kFixedIfPassed stops at the first
// failure, which rejects); more only when whole > kWholeTrials and the first kWholeTrials all
// succeeded.
template <Work kWork>
bool AllOfExpMinusOne(absl::uint128 whole, absl::BitGenRef gen) {
  const uint64_t big = static_cast<uint64_t>(whole > kWholeTrials);
  const uint64_t needed =
      (Mask(big) & (kWholeTrials + 1)) | (~Mask(big) & absl::Uint128Low64(whole));
  uint64_t all = 1;
  for (uint64_t i = 0; i < kWholeTrials; ++i) {
    const uint64_t success = BernoulliExpMinusOne(gen);
    all &= success | static_cast<uint64_t>(i >= needed);
    if (kWork == Work::kFixedIfPassed && all == 0) return false;
  }
  if (ABSL_PREDICT_FALSE((all & big) != 0)) {
    for (absl::uint128 i = kWholeTrials; i < whole && all != 0; ++i) {
      all = BernoulliExpMinusOne(gen);
    }
  }
  return all != 0;
}

// Bernoulli(exp(-num/2^log2_den)) = exp(-1)^floor(num/2^log2_den) * exp(-frac): independent
// trials that must all succeed, each with its fixed run of draws.
bool BernoulliExpFixed(absl::uint128 num, int log2_den, absl::BitGenRef gen) {
  const uint64_t den = uint64_t{1} << log2_den;
  const bool whole = AllOfExpMinusOne<Work::kFixed>(num >> log2_den, gen);
  const bool frac = BernoulliExpUnit64(absl::Uint128Low64(num) & (den - 1), den, gen);
  return whole & frac;
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
// because every rejection redraws all of U, D, V and B. An attempt that passes D
// makes the same draws: U, kUnitTrials for D, `geometric_trials` for V (V counts the
// leading successes among them); one that fails D stops there. V needs more trials only if
// they all succeed, probability e^-geometric_trials.
int64_t SampleLaplaceImpl(uint64_t t, uint64_t s, uint64_t geometric_trials,
                          absl::BitGenRef gen) {
  while (true) {
    const uint64_t r = UniformBelow(2 * t, gen);
    const uint64_t u = r >> 1;
    const bool negative = (r & 1) != 0;
    // D ~ Bernoulli(exp(-U/t))
    if (!BernoulliExpUnit64(u, t, gen)) continue;
    uint64_t v = 0;  // V ~ Geometric(1 - exp(-1))
    uint64_t running = 1;
    for (uint64_t i = 0; i < geometric_trials; ++i) {
      running &= BernoulliExpMinusOne(gen);
      v += running;
    }
    if (ABSL_PREDICT_FALSE(running != 0)) {
      while (v <= kMaxGeometric && BernoulliExpMinusOne(gen) != 0) ++v;
      if (ABSL_PREDICT_FALSE(v > kMaxGeometric)) continue;
    }
    const uint64_t x = u + t * v;  // Geometric(1 - exp(-1/t)) on {0, 1, ...}
    uint64_t unused;
    const uint64_t y = s == 1 ? x : DivModFixed64(x, s, &unused);  // s is public
    // "-0" is rejected, so that 0 is not counted twice (a rejection: it may branch); the sign
    // of an accepted value is applied without a branch.
    if ((static_cast<uint64_t>(negative) & static_cast<uint64_t>(y == 0)) != 0) continue;
    const int64_t m = -static_cast<int64_t>(negative);  // 0 or all ones
    return (static_cast<int64_t>(y) ^ m) - m;
  }
}

// z^2 = whole * den + frac for z < 2^105 and 1 <= den < 2^104 (z^2 may need 210 bits);
// `whole` saturates at 2^128 - 1.
void SquareDivMod(absl::uint128 z, absl::uint128 den, absl::uint128* whole, absl::uint128* frac) {
  if (absl::Uint128High64(z) == 0) {
    const absl::uint128 square = z * z;  // < 2^128
    *whole = DivModFixed128(square, den, frac);
    return;
  }
  // Only when the exponent z^2/den exceeds 2^20 (an attempt then fails but with
  // probability below e^-(2^20)): schoolbook squaring and bitwise long division.
  const uint64_t z_hi = absl::Uint128High64(z), z_lo = absl::Uint128Low64(z);
  const absl::uint128 ll = absl::uint128(z_lo) * z_lo;
  const absl::uint128 lh = absl::uint128(z_lo) * z_hi;  // counted twice
  const absl::uint128 hh = absl::uint128(z_hi) * z_hi;
  // square = hh * 2^128 + 2 lh * 2^64 + ll, as four 64-bit limbs, most significant first.
  absl::uint128 mid = (lh << 1);
  const uint64_t mid_carry = absl::Uint128High64(lh) >> 63;  // bit 128 of 2 lh
  absl::uint128 low = ll + (mid << 64);
  const uint64_t low_carry = low < ll ? 1 : 0;
  absl::uint128 high = hh + absl::Uint128High64(mid) + (absl::uint128(mid_carry) << 64) + low_carry;
  absl::uint128 quotient = 0, remainder = 0;
  bool saturated = false;
  for (int bit = 255; bit >= 0; --bit) {
    const uint64_t b = bit >= 128 ? static_cast<uint64_t>((high >> (bit - 128)) & 1)
                                  : static_cast<uint64_t>((low >> bit) & 1);
    remainder = (remainder << 1) | b;  // remainder < 2 den < 2^105: no overflow
    saturated = saturated || absl::Uint128High64(quotient) >> 63 != 0;
    quotient <<= 1;
    if (remainder >= den) {
      remainder -= den;
      quotient |= 1;
    }
  }
  if (saturated) {
    // A quotient of 2^128 or more: the attempt succeeds with probability below
    // e^{-2^128}, which this rounds to e^{-(2^128 - 1)}.
    quotient = ~absl::uint128(0);
  }
  *whole = quotient;
  *frac = remainder;
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
  uint64_t frac = 0;
  const uint64_t whole = DivModFixed64(gamma.num, gamma.den, &frac);
  const bool whole_ok = AllOfExpMinusOne<Work::kFixed>(whole, gen);
  const bool frac_ok = BernoulliExpUnit64(frac, gamma.den, gen);
  return whole_ok & frac_ok;
}

bool SampleBernoulliExpDyadic(absl::uint128 num, int log2_den, absl::BitGenRef gen) {
  CheckOrDie(log2_den >= 0 && log2_den <= 40,
             "SampleBernoulliExpDyadic: log2_den must be in [0, 40]");
  return BernoulliExpFixed(num, log2_den, gen);
}

bool SampleBernoulli(double p, absl::BitGenRef gen) {
  if (!(p > 0)) return false;
  if (p >= 1) return true;
  if (p < 0x1p-73) return absl::Bernoulli(gen, p);
  // p = m·2^(e-53) with e >= -72, so p·2^126 is an integer below 2^126: hi·2^63 + lo with
  // hi = floor(p·2^63) and lo = (p·2^63 − hi)·2^63, each computed exactly in doubles (scaling
  // by a power of two and subtracting a value's own integer part lose nothing) and each below
  // 2^63 (signed conversions: no branch on whether p >= 1/2). A uniform integer below 2^126
  // from two words is below p·2^126 with probability p exactly.
  const double scaled = p * 0x1p63;
  const auto hi = static_cast<int64_t>(scaled);
  const auto lo = static_cast<int64_t>((scaled - static_cast<double>(hi)) * 0x1p63);
  const uint64_t u_hi = absl::Uniform<uint64_t>(gen) >> 1;
  const uint64_t u_lo = absl::Uniform<uint64_t>(gen) >> 1;
  const uint64_t t_hi = static_cast<uint64_t>(hi), t_lo = static_cast<uint64_t>(lo);
  return ((static_cast<uint64_t>(u_hi < t_hi)) |
          (static_cast<uint64_t>(u_hi == t_hi) & static_cast<uint64_t>(u_lo < t_lo))) != 0;
}

int64_t SampleDiscreteLaplace(const Rational& scale, absl::BitGenRef gen) {
  CheckOrDie(scale.num >= 1 && scale.num <= kMaxPart && scale.den >= 1 && scale.den <= kMaxPart,
             "SampleDiscreteLaplace: scale num and den must be in [1, 2^40]");
  uint64_t t = scale.num;
  uint64_t s = scale.den;
  StripCommonTwos(t, s);
  return SampleLaplaceImpl(t, s, kWholeTrials, gen);
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
  // / (2 sigma^2)) = exp(-z^2 / (2 n d t^2)) with z = |Y| d t - n: the exponent is the
  // rational z^2 / den, whole part and remainder exact (z < 2^104, den < 2^103). An
  // accepted attempt draws the Laplace (whose draws do not depend on Y), kWholeTrials
  // Bernoulli(exp(-1)) and kUnitTrials pairs for the remainder, whatever Y is; a rejected
  // one stops at the trial that rejects it.
  const absl::uint128 dt = absl::uint128(d) * t;              // <= 2^41
  const absl::uint128 den = 2 * absl::uint128(n) * dt * t;  // < 2^103
  // m·den for m = 0..kWholeTrials + 1: the whole part of an exponent below 2^128 is read by
  // comparisons with these (no division: the divider's latency depends on its operands).
  absl::uint128 multiples[kWholeTrials + 2];
  for (uint64_t m = 0; m < kWholeTrials + 2; ++m) multiples[m] = den * m;  // < 2^109
  while (true) {
    // With V >= 10 multiples of t > sigma in |Y|, the exponent below is at least (V - 1)^2/2
    // >= 40.5: an attempt whose V needed more than 10 trials is accepted with probability
    // below e^-10 e^-40.5 < 2^-72. So 10 trials for V are enough here.
    const int64_t y = SampleLaplaceImpl(t, 1, kGaussianGeometricTrials, gen);  // |y| < 2^63
    const uint64_t sign = static_cast<uint64_t>(y) >> 63;  // |y| without a branch on the sign
    const uint64_t abs_y = (static_cast<uint64_t>(y) ^ (uint64_t{0} - sign)) + sign;
    const absl::uint128 ydt = absl::uint128(abs_y) * dt;  // < 2^104
    const absl::uint128 z = ydt >= n ? ydt - n : n - ydt;
    // The whole part, capped at kWholeTrials + 1, and the remainder (exact when not capped).
    const uint64_t small = static_cast<uint64_t>(absl::Uint128High64(z) == 0);
    const absl::uint128 square = z * z;  // exact when small
    uint64_t capped = 0;
    for (uint64_t m = 1; m < kWholeTrials + 2; ++m) {
      capped += static_cast<uint64_t>(multiples[m] <= square);
    }
    capped |= Mask(1 ^ small) & (kWholeTrials + 1);
    capped = std::min<uint64_t>(capped, kWholeTrials + 1);
    absl::uint128 frac = 0;
    for (uint64_t m = 0; m < kWholeTrials + 1; ++m) {
      const uint64_t pick = Mask(static_cast<uint64_t>(m == capped));
      frac |= absl::MakeUint128(pick, pick) & (square - multiples[m]);
    }
    if (!AllOfExpMinusOne<Work::kFixedIfPassed>(capped, gen)) continue;
    if (ABSL_PREDICT_FALSE(capped > kWholeTrials)) {
      // All 45 trials passed though the exponent is over 45 (probability below e^-45): the
      // exact whole part and remainder, and the rest of its trials.
      absl::uint128 whole;
      SquareDivMod(z, den, &whole, &frac);
      bool all = true;
      for (absl::uint128 i = kWholeTrials + 1; i < whole && all; ++i) {
        all = BernoulliExpMinusOne(gen) != 0;
      }
      if (!all) continue;
    }
    if (BernoulliExpUnit128(frac, den, gen)) return y;
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
