// Mironov (2012) floating-point fix: real statistics are snapped to a power-of-two grid and
// receive integer noise in units of the grid, so the output set does not depend on the data
// through floating-point rounding artifacts.
#ifndef FAIRVAULT_CORE_DP_GRANULARITY_H_
#define FAIRVAULT_CORE_DP_GRANULARITY_H_

#include <cstdint>

#include "absl/status/statusor.h"

namespace fairvault::core::dp {

// The smallest power of two >= `scale` / 2^`bits_below` (a noise scale of `scale` then spans
// at least 2^bits_below grid steps). InvalidArgument unless scale is finite and > 0.
absl::StatusOr<double> PowerOfTwoGranularity(double scale, int bits_below = 20);

// round(value / granularity) as an integer number of grid steps; InvalidArgument for
// non-finite input or a result outside ±2^52.
absl::StatusOr<int64_t> SnapToGrid(double value, double granularity);

// steps * granularity (exact: granularity is a power of two and |steps| <= 2^52).
double FromGrid(int64_t steps, double granularity);

}  // namespace fairvault::core::dp

#endif  // FAIRVAULT_CORE_DP_GRANULARITY_H_
