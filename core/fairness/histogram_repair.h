// Repair of a noisy histogram into a valid pmf (ALGORITHMS.md §2 step 4, Xian, Li, Kamath, Zhao
// 2024, Alg. 1): the noisy CDF is made monotone by L∞ isotonic regression. Shared by the private
// audits and the statistical-parity post-processor so the repair exists once.
#ifndef FAIRVAULT_CORE_FAIRNESS_HISTOGRAM_REPAIR_H_
#define FAIRVAULT_CORE_FAIRNESS_HISTOGRAM_REPAIR_H_

#include <vector>

#include "absl/types/span.h"

namespace fairvault::core::fairness {

// From per-bin masses (noisy counts or fractions of n, any sign) and the group's weight w (in
// the same units, e.g. w_a = max(Σ_j h[a][j], 1e-6)): c_j = Σ_{l<=j} masses_l / w, then the L∞
// isotonic regression of c ((running max from the left + running min from the right) / 2),
// clipped to [0, 1], with c_{k-1} = 1; returns the differences, a pmf of size k: entries >= 0
// summing to 1 (up to rounding). Empty input gives an empty result. Precondition: weight finite
// and > 0 and masses finite; otherwise (a caller bug) the uniform pmf is returned, so that no
// NaN can leak into a release. Pure and thread-safe.
std::vector<double> RepairCdfToPmf(absl::Span<const double> masses, double weight);

}  // namespace fairvault::core::fairness

#endif  // FAIRVAULT_CORE_FAIRNESS_HISTOGRAM_REPAIR_H_
