// RDP amplification by subsampling WITHOUT replacement of a fixed-size batch, under the
// replace-one neighbouring relation (the vault's, ALGORITHMS.md §0): the general upper bound of
// Wang, Balle, Kasiviswanathan, "Subsampled Renyi Differential Privacy and Analytical Moments
// Accountant", AISTATS 2019 (arXiv 1808.00087), Theorem 9, and its use for the Gaussian mechanism.
//
// Setting. A dataset of n records; each step draws a batch of m records uniformly at random
// without replacement (gamma = m / n) and runs a mechanism M on the batch. M satisfies
// (j, eps(j))-RDP for the replace-one relation on batches, at every order j, and eps(inf) is its
// pure-DP epsilon (+inf if it has none). Theorem 9: for every INTEGER alpha >= 2 the subsampled
// mechanism satisfies (alpha, eps'(alpha))-RDP with
//
//   eps'(alpha) <= 1/(alpha-1) * log( 1
//       + gamma^2 C(alpha,2) min{ 4 (e^{eps(2)} - 1), e^{eps(2)} min{2, (e^{eps(inf)} - 1)^2} }
//       + sum_{j=3..alpha} gamma^j C(alpha,j) e^{(j-1) eps(j)} min{2, (e^{eps(inf)} - 1)^j} ).
//
// For the Gaussian mechanism eps(j) = j Delta^2 / (2 sigma^2) and eps(inf) = +inf, so both inner
// minima are 2 (the second-order one is min{4(e^{eps(2)} - 1), 2 e^{eps(2)}}).
//
// What the functions here add to the theorem, each a valid bound on its own:
//   * min with the un-amplified eps(alpha): subsampling never hurts (the subsampled outputs of two
//     neighbours are a mixture of pairs that are neighbours or equal, and e^{(alpha-1) D_alpha}
//     is jointly convex). This matters: the j >= 3 terms do not vanish as sigma -> infinity
//     (the factor 2 stays), so Theorem 9 alone tends to log(1 + 2 sum_{j>=3} C(alpha,j) gamma^j)
//     / (alpha-1), about gamma at large alpha, while the Gaussian's own curve tends to 0.
//   * non-integer orders (the accountant's grid has 1.1, 1.2, ..., 10.9): the cumulant
//     K(a) = (a-1) D_a(P||Q) = log E_Q[(P/Q)^a] is convex in a with K(1) = 0, so between the
//     integers f = floor(a) and c = f + 1 it lies below the chord:
//       (a-1) eps'(a) <= (c-a) (f-1) eps'(f) + (a-f) (c-1) eps'(c),
//     with eps'(f) the integer-order bound (itself already min'd with the un-amplified value)
//     and the (f-1) eps'(f) term 0 for f = 1. The result is again min'd with eps(a).
//     The authors' library (autodp, rdp_acct.py) does the same.
// Not included: autodp also caps the curve by the amplified pure epsilon
// log(1 + gamma (e^{eps(inf)} - 1)) when eps(inf) is finite (never for the Gaussian).
//
// Theorem 27 (same paper, appendix; autodp's improved_bound_flag=True, whose docstring states the
// condition). Condition (Definition 26): M has a pair of neighbouring inputs that is the worst
// case simultaneously for every Renyi divergence D_j and every Pearson-Vajda moment
// B(l) = E_Q[(P/Q - 1)^l], and the RDP curve is tight, eps(j) = D_j(P||Q) for that pair. Then
// B(l) = sum_{i=0..l} C(l,i) (-1)^{l-i} e^{(i-1) eps(i)} (the binomial expansion of the tight
// pair's moments, (i-1) eps(i) read as 0 at i = 0, 1), and for every integer alpha >= 2
//
//   eps'(alpha) <= 1/(alpha-1) * log( 1 + [the same j = 2 term as Theorem 9]
//       + sum_{j=3..alpha} gamma^j C(alpha,j) min{ 4 sqrt(B(2 floor(j/2)) B(2 ceil(j/2))),
//                                                  e^{(j-1) eps(j)} min{2, (e^{eps(inf)} - 1)^j} }
//                                                  ).
//
// (For even j the first entry is 4 B(j); for odd j, Cauchy-Schwarz on E|P/Q - 1|^j.) The
// continuous Gaussian N(f(X), sigma^2 I) with L2 sensitivity Delta satisfies the condition: every
// D_j and every B(l) depends only on s = |f(X) - f(X')| / sigma and is non-decreasing in s (B(l)
// is a power series in s^2 with non-negative coefficients, through the Hermite expansion of
// e^{sZ - s^2/2}), so a pair at distance Delta is the common worst case (at the sup if no pair
// reaches it, where the values at Delta are upper bounds), and eps(j) = j Delta^2 / (2 sigma^2)
// is its exact Renyi divergence. Then B(l) = E[(e^{sZ - s^2/2} - 1)^l], Z ~ N(0, 1), s = Delta /
// sigma. Unlike Theorem 9's, these terms vanish as sigma grows (B(l) ~ s^l (l-1)!! at small s).
//
// The condition is NOT established for the discrete Gaussian (CKS 2020 give only the upper bound
// eps(j) <= j Delta^2 / (2 sigma^2), not tightness, and its Pearson-Vajda moments are not known to
// be at most the continuous ones; in several dimensions it does not reduce to one direction).
// So Theorem 27 is offered under its own names (SubsampledContinuousGaussian*), and
// SubsampledGaussianRdp, which DP-FERMI (server/app/models/stochastic_job.cc) uses for DISCRETE
// Gaussian noise, stays on Theorem 9, valid for any mechanism with that RDP upper bound.
//
// Computing B(l): the binomial expansion (autodp's route, forward differences in log space)
// cancels catastrophically at small s (terms ~2^l, result ~s^l (l-1)!!); here B(2) = e^{s^2} - 1
// exactly and B(l), l >= 4 even, is the integral of its non-negative integrand by the trapezoid
// rule (see subsampled_rdp.cc for the error bound), raised by a relative 1e-9. Moments are
// computed for l <= 256; terms with 2 ceil(j/2) > 256 keep Theorem 9's factor (autodp stops at
// l = 100). The Gaussian curve is min(eps(alpha), Theorem 27), which is also <= Theorem 9 term by
// term, with the same chord at non-integer orders.
//
// The DP-FERMI shape (gamma = 1024/32561, 200 epochs of 32 steps = 6,400 steps, epsilon 1,
// delta 1e-5, sensitivity 1), calibrated sigma: Theorem 9 (SubsampledGaussianRdp) 323.63, no
// amplification (the full-batch sigma); Theorem 27 (SubsampledContinuousGaussianRdp) 20.506.
// Pinned in subsampled_rdp_test.cc (DpFermiShape).
//
// Sensitivity. `sensitivity` is the L2 sensitivity of the query on one BATCH under replace-one
// (one record of the batch replaced by another), which is what Theorem 9 assumes of M.
//
// Numerics: every term is summed in log space (log-sum-exp, log1p), binomial coefficients are
// built as sums of logarithms (no lgamma: glibc's lgamma writes the global `signgam`, a data
// race when accountants run on several threads). Functions are thread-safe and allocate only
// their results and scratch vectors. Values that are not finite come back as +infinity.
#ifndef FAIRVAULT_CORE_ACCOUNTING_SUBSAMPLED_RDP_H_
#define FAIRVAULT_CORE_ACCOUNTING_SUBSAMPLED_RDP_H_

#include <cstdint>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace fairvault::core::accounting {

// The right-hand side of Theorem 9 at integer order `alpha` >= 2, as an RDP value (already
// divided by alpha - 1), with no min against the un-amplified curve. `base_rdp(j)` is eps(j) of
// the base mechanism at integer order j (called for j = 2..alpha, must be >= 0), `base_eps_inf`
// its pure epsilon or +inf. +infinity if gamma is not in (0, 1], alpha < 2, a base value is
// negative or NaN, or the bound is not finite.
double WangBalleKasiviswanathanBound(absl::FunctionRef<double(int64_t)> base_rdp,
                                     double base_eps_inf, double gamma, int64_t alpha);

// The RDP of one step of the subsampled base mechanism at each of `orders` (all > 1): at integer
// orders min(eps(alpha), Theorem 9); at other orders the convexity chord between the neighbouring
// integers, min'd with eps(alpha) (see the file comment). `base_rdp(a)` is the base mechanism's
// RDP at any real order a > 1 (it is called at the grid's orders and at integers up to
// ceil(max order)). Orders above 65536 (none on the accountant's grid) get the un-amplified
// eps(a), to bound the O(alpha) cost. +infinity at orders <= 1 or NaN, everywhere if gamma is
// not in (0, 1].
std::vector<double> SubsampledWithoutReplacementRdp(absl::FunctionRef<double(double)> base_rdp,
                                                    double base_eps_inf, double gamma,
                                                    absl::Span<const double> orders);

// SubsampledWithoutReplacementRdp for the Gaussian mechanism with L2 sensitivity `sensitivity`
// (replace-one, on a batch) and std `sigma`: base eps(a) = a sensitivity^2 / (2 sigma^2), pure
// epsilon +inf. All +infinity if sensitivity or sigma is not finite and > 0, or gamma is not in
// (0, 1]. With gamma = 1 this is exactly GaussianRdp.
std::vector<double> SubsampledGaussianRdp(double sensitivity, double sigma, double gamma,
                                          absl::Span<const double> orders);

// B(l) = E[(e^{rZ - r^2/2} - 1)^l], Z ~ N(0, 1), for even l >= 2: the Pearson-Vajda moment of
// N(r, 1) against N(0, 1), as used by Theorem 27 (l = 2 exact, l >= 4 by quadrature with a
// relative 1e-9 upward margin). +infinity if r is not finite and > 0 or l is odd or < 2.
double GaussianPearsonVajdaMoment(double ratio, int64_t l);

// Theorem 27 for the continuous Gaussian at integer `alpha` >= 2, as an RDP value, without the
// min against the un-amplified curve (with the term-wise min against Theorem 9). +infinity on
// invalid inputs (as SubsampledContinuousGaussianRdp).
double WangBalleKasiviswanathanGaussianBound(double sensitivity, double sigma, double gamma,
                                             int64_t alpha);

// As SubsampledGaussianRdp but with Theorem 27 at integer orders (min(eps(alpha), Theorem 27),
// chord in between). Only for the CONTINUOUS Gaussian mechanism N(f, sigma^2 I) with L2
// sensitivity `sensitivity` on a batch (replace-one); not for the discrete Gaussian (see the file
// comment). Never above SubsampledGaussianRdp. All +infinity on invalid inputs.
std::vector<double> SubsampledContinuousGaussianRdp(double sensitivity, double sigma, double gamma,
                                                    absl::Span<const double> orders);

// Composition of `steps` releases with the same curve: steps * rdp (RDP adds up). Entries stay
// +infinity where rdp is; all +infinity if steps < 1 (a caller bug, fail closed).
std::vector<double> ComposeRdp(absl::Span<const double> rdp, int64_t steps);

// Epsilon at `delta` spent by `steps` steps of the subsampled Gaussian, on RdpOrders() through
// RdpToEpsilon. +infinity on invalid inputs.
double SubsampledGaussianEpsilon(double sensitivity, double sigma, double gamma, int64_t steps,
                                 double delta);

// The smallest sigma (to relative precision 1e-9; the returned value always satisfies the
// budget as computed) such that `steps` steps of the Gaussian mechanism with L2 sensitivity
// `sensitivity` on batches drawn without replacement with ratio `gamma` spend at most `epsilon`
// at `delta` (SubsampledGaussianEpsilon). InvalidArgument for non-positive or non-finite
// epsilon or sensitivity, delta outside (0, 1), gamma outside (0, 1], steps < 1, or an epsilon
// at or below the floor no noise reaches on the accountant's orders.
absl::StatusOr<double> CalibrateSubsampledGaussianSigma(double epsilon, double delta,
                                                        double sensitivity, double gamma,
                                                        int64_t steps);

// The smallest noise multiplier z (relative precision 1e-9, starting the search at `start`; the
// returned value always satisfies the budget as computed) such that the composed RDP curve
// `curve(z)` on RdpOrders() spends at most `epsilon` at `delta` (RdpToEpsilon). `curve` must be
// non-increasing in z at every order (e.g. a sum of subsampled or plain Gaussian curves of std
// proportional to z and fixed pure parts). InvalidArgument if epsilon is not finite and > 0,
// delta outside (0, 1), or epsilon below what z = 1e12 reaches.
absl::StatusOr<double> CalibrateMultiplier(absl::FunctionRef<std::vector<double>(double)> curve,
                                           double epsilon, double delta, double start = 1);

// SubsampledGaussianEpsilon and CalibrateSubsampledGaussianSigma on
// SubsampledContinuousGaussianRdp (Theorem 27): only for the continuous Gaussian mechanism.
// Same contracts and errors.
double SubsampledContinuousGaussianEpsilon(double sensitivity, double sigma, double gamma,
                                           int64_t steps, double delta);
absl::StatusOr<double> CalibrateSubsampledContinuousGaussianSigma(double epsilon, double delta,
                                                                  double sensitivity, double gamma,
                                                                  int64_t steps);

}  // namespace fairvault::core::accounting

#endif  // FAIRVAULT_CORE_ACCOUNTING_SUBSAMPLED_RDP_H_
