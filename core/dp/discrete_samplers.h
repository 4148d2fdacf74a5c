// Exact samplers for the discrete Laplace and discrete Gaussian distributions
// (Canonne, Kamath, Steinke 2020, "The Discrete Gaussian for Differential Privacy",
// arXiv 2004.00010, Algorithms 1-3). Parameters are rationals so that sampling involves no
// floating point: only uniform integers drawn from the supplied generator.
//
// Timing: the calls a sampler makes on the generator (their number, bounds and order) do
// not depend on the value it returns, except with probability below 2^-50 per draw: the
// attempt a rejection sampler accepts makes the same draws whatever its value, and the
// attempts it rejects before are independent of that value. SampleBernoulliExp makes the
// same draws, and executes the same instructions, for every gamma with the same denominator
// and floor(gamma) <= 45, whatever it returns (the exponential mechanism's proposals rely on
// this).
// docs/privacy.md §4 ("Timing") has the argument.
#ifndef FAIRVAULT_CORE_DP_DISCRETE_SAMPLERS_H_
#define FAIRVAULT_CORE_DP_DISCRETE_SAMPLERS_H_

#include <cstdint>

#include "absl/numeric/int128.h"
#include "absl/random/bit_gen_ref.h"
#include "absl/status/statusor.h"

namespace fairvault::core::dp {

// A positive rational num/den. Both in [1, 2^40] so products stay inside 128-bit integers.
struct Rational {
  uint64_t num = 1;
  uint64_t den = 1;
  double ToDouble() const { return static_cast<double>(num) / static_cast<double>(den); }
};

// Smallest rational with denominator `den` that is >= x (rounding the noise scale up is the
// safe direction). InvalidArgument unless x is finite and > 0 and fits.
absl::StatusOr<Rational> RationalAtLeast(double x, uint64_t den = uint64_t{1} << 20);

// Bernoulli(exp(-gamma)) for rational gamma >= 0 (CKS Algorithm 1).
bool SampleBernoulliExp(const Rational& gamma, absl::BitGenRef gen);
// The same for gamma = num / 2^log2_den with a 128-bit numerator (log2_den in [0, 40]).
bool SampleBernoulliExpDyadic(absl::uint128 num, int log2_den, absl::BitGenRef gen);

// Bernoulli(p) for a double p, exactly, with the same draws and instructions whatever p is
// for p in [2^-73, 1) (two 64-bit words compared with p·2^126, an integer there); p <= 0 gives
// false, p >= 1 true, and p in (0, 2^-73) falls back to absl::Bernoulli (exact, but its work
// depends on p). For draws whose probability depends on the protected attribute (Decide).
bool SampleBernoulli(double p, absl::BitGenRef gen);

// Discrete Laplace with scale t: P(x) ∝ exp(-|x|/t), x ∈ Z (CKS Algorithm 2).
int64_t SampleDiscreteLaplace(const Rational& scale, absl::BitGenRef gen);

// Discrete Gaussian with variance parameter sigma^2: P(x) ∝ exp(-x^2/(2 sigma^2)), x ∈ Z
// (CKS Algorithm 3).
int64_t SampleDiscreteGaussian(const Rational& sigma_squared, absl::BitGenRef gen);

// Exact pmfs, for tests and docs: discrete Laplace P(x) = (1-e^{-1/t})/(1+e^{-1/t}) e^{-|x|/t};
// discrete Gaussian normalised numerically over |x| <= 60 sigma + 10.
double DiscreteLaplacePmf(int64_t x, double scale);
double DiscreteGaussianPmf(int64_t x, double sigma);

}  // namespace fairvault::core::dp

#endif  // FAIRVAULT_CORE_DP_DISCRETE_SAMPLERS_H_
