// Privacy accounting: costs as RDP curves on a fixed grid of orders plus an optional pure
// epsilon, exact integer composition, and conversion to (epsilon, delta)
// (Canonne-Kamath-Steinke 2020, Prop. 12). Pure releases carry the randomized-response curve,
// which bounds every epsilon-DP mechanism; the Gaussian curve is dp_accounting's. See
// ALGORITHMS.md §0.
#ifndef FAIRVAULT_CORE_ACCOUNTING_ACCOUNTANT_H_
#define FAIRVAULT_CORE_ACCOUNTING_ACCOUNTANT_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace fairvault::core::accounting {

// Budgets and pure epsilons are stored as integers in micro-units so that 10 x 0.1 spends
// exactly 1. RDP values are stored as integers in nano-units, rounded up.
inline constexpr int64_t kMicro = 1'000'000;
inline constexpr int64_t kNano = 1'000'000'000;

// epsilon (finite, > 0) to micro-units, rounded to nearest; InvalidArgument if the result
// is < 1 micro-unit or > 1e6 (epsilon above 1e6 is meaningless).
absl::StatusOr<int64_t> EpsilonToMicro(double epsilon);
inline double MicroToEpsilon(int64_t micro) { return static_cast<double>(micro) / kMicro; }

// The fixed grid of RDP orders (all > 1) on which the ledger stores curves. Never reorder:
// stored curves are indexed by position.
const std::vector<double>& RdpOrders();

// RDP at each order of ANY pure epsilon-DP mechanism (epsilon finite, > 0): the Renyi
// divergence of binary randomized response (Mironov 2017, Table II), which is the worst case
// among all epsilon-DP mechanisms (Bun & Steinke 2016, Prop. 3.3 and its proof; tightness:
// Steinke, "Tight RDP & zCDP bounds from pure DP", differentialprivacy.org 2024, Thm. 4):
//   RDP(a) = log[(sinh(a eps) - sinh((a-1) eps)) / sinh(eps)] / (a-1)
//          = log[(e^{a eps} + e^{(1-a) eps}) / (1 + e^eps)] / (a-1).
// It lies in [0, eps], tends to eps as a -> inf, to eps tanh(eps/2) as a -> 1, and behaves
// like a eps^2 / 2 for small eps. This is the curve the ledger charges the discrete Laplace
// with: its privacy loss for an integer shift takes only the values +-eps (two-point, like
// randomized response), so the continuous-Laplace curve below does NOT bound it.
// Relative error about 1e-14 or better for every eps and order; no overflow for large a*eps.
std::vector<double> PureDpRdp(double epsilon, absl::Span<const double> orders);
// RDP of the continuous Laplace mechanism with epsilon = sensitivity/scale, at each order:
// eps + log1p((a-1) expm1((1-2a) eps) / (2a-1)) / (a-1) (Mironov 2017, Table II). Valid for
// the continuous Laplace only, not for the discrete Laplace or any other epsilon-DP mechanism;
// kept for reference and comparison. The ledger never uses it.
std::vector<double> LaplaceRdp(double epsilon, absl::Span<const double> orders);
// RDP of the Gaussian mechanism with L2 sensitivity `sensitivity` and std `sigma`:
// a * sensitivity^2 / (2 sigma^2). Holds for the discrete Gaussian too (CKS Thm 4).
std::vector<double> GaussianRdp(double sensitivity, double sigma, absl::Span<const double> orders);

// min over orders of rdp(a) + log1p(-1/a) - log(delta a)/(a-1), clamped at >= 0.
// +infinity if delta <= 0 or no order is finite. Orders must be > 1.
double RdpToEpsilon(absl::Span<const double> orders, absl::Span<const double> rdp, double delta);

// The cost of one release, as the ledger stores it.
struct PrivacyCost {
  // Set iff the mechanism is pure epsilon-DP.
  std::optional<int64_t> pure_epsilon_micro;
  // RDP(a) on RdpOrders(), in nano-units rounded up.
  std::vector<int64_t> rdp_nano;
};

// Cost of a release by any pure epsilon-DP mechanism (epsilon in micro-units, >= 1): the pure
// value plus PureDpRdp on RdpOrders(). Anything < 1 is a caller bug, charged as unbounded.
PrivacyCost PureDpCost(int64_t epsilon_micro);
// The cost of a discrete Laplace release: the same as PureDpCost (kept for existing callers).
PrivacyCost LaplaceCost(int64_t epsilon_micro);
// Cost of a Gaussian release.
PrivacyCost GaussianCost(double sensitivity, double sigma);
// Cost of a release that is not pure, from its RDP curve on RdpOrders() (e.g. a composition
// of subsampled Gaussian steps), rounded up; entries that are not finite saturate.
PrivacyCost RdpCurveCost(const std::vector<double>& rdp);

// The composition of many costs, kept as exact integer sums.
struct Spend {
  int64_t releases = 0;
  // Sum of pure epsilons of the pure releases.
  int64_t pure_micro = 0;
  // Sum of RDP curves of all releases, and of the releases that are not pure.
  std::vector<int64_t> rdp_all_nano;
  std::vector<int64_t> rdp_nonpure_nano;

  // Adds one cost (exact, order-independent).
  void Add(const PrivacyCost& cost);
  // Adds every release of `other` (e.g. another company's spend on the same dataset), with the
  // semantics of Add: integer sums saturate at INT64_MAX (which converts to +infinity, so an
  // overflowing total can only be refused, never wraps to a small or negative spend). Negative
  // entries (on either side) and grid orders a non-empty curve of `other` lacks are unknown and
  // saturate too; an empty curve means all zeros. Used for dataset-wide totals over companies.
  void Merge(const Spend& other);
  bool operator==(const Spend& other) const;
};

// Epsilon spent at `delta`, in micro-units rounded up: the smaller of two valid bounds,
// (a) the RDP conversion of all releases and (b) the pure sum plus the RDP conversion of the
// non-pure releases (basic composition). With only pure releases (b) is the exact sum.
// Returns INT64_MAX when neither bound is finite (e.g. Gaussian releases with delta 0).
int64_t SpentEpsilonMicro(const Spend& spend, double delta);

// The smallest sigma (to relative precision 1e-9) such that one Gaussian release with L2
// sensitivity `sensitivity` costs at most `epsilon` at `delta` on RdpOrders().
// InvalidArgument for non-positive inputs or delta outside (0, 1).
absl::StatusOr<double> CalibrateGaussianSigma(double epsilon, double delta, double sensitivity);

// `count` releases by pure epsilon-DP mechanisms of `epsilon` each (e.g. a learner's T noisy
// best responses).
struct PureDpRepetition {
  double epsilon = 0;
  int64_t count = 0;
};
// The composed cost of several such groups of releases, charged as one ledger row: the pure
// epsilon is the sum (rounded up to micro-units) and the RDP curve the sum of the PureDpRdp
// curves (rounded up), so the ledger's spend is the smaller of basic and RDP composition.
// Non-finite or non-positive epsilons, or counts < 1, are caller bugs, charged as unbounded.
PrivacyCost ComposedPureDpCost(absl::Span<const PureDpRepetition> releases);

// The largest epsilon0 (to relative precision 1e-9) such that `fixed` plus `count` releases
// of epsilon0 spend at most `total_micro` as SpentEpsilonMicro converts at `delta` (0: basic
// composition only). This is the per-round noise of a learner derived from its total budget
// by the accountant. InvalidArgument if count < 1 or if `fixed` alone does not fit.
absl::StatusOr<double> CalibrateRepeatedPureDp(int64_t total_micro, double delta,
                                               absl::Span<const PureDpRepetition> fixed,
                                               int64_t count);

}  // namespace fairvault::core::accounting

#endif  // FAIRVAULT_CORE_ACCOUNTING_ACCOUNTANT_H_
