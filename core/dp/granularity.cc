// Power-of-two grids for real-valued releases (Mironov 2012). All arithmetic
// here is exact: exponents are computed with frexp/ldexp and dividing by a
// power of two only shifts it.
#include "core/dp/granularity.h"

#include <cmath>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/util/status_macros.h"
#include "core/util/validate.h"

namespace fairvault::core::dp {
namespace {

constexpr double kMaxSteps = 4503599627370496.0;  // 2^52

bool IsPowerOfTwo(double g) {
  if (!std::isfinite(g) || g <= 0) return false;
  int exponent = 0;
  return std::frexp(g, &exponent) == 0.5;
}

}  // namespace

absl::StatusOr<double> PowerOfTwoGranularity(double scale, int bits_below) {
  RETURN_IF_ERROR(ValidateIsFiniteAndPositive(scale, "scale"));
  // scale = fraction * 2^exponent with fraction in [0.5, 1), so scale /
  // 2^bits_below lies in [2^(k-1), 2^k) for k = exponent - bits_below, and
  // equals 2^(k-1) iff fraction is 0.5.
  int exponent = 0;
  const double fraction = std::frexp(scale, &exponent);
  // In int64_t: an extreme bits_below must not overflow.
  const int64_t e = int64_t{exponent} - bits_below - (fraction == 0.5 ? 1 : 0);
  // Normal doubles only, so that the grid and every multiple of it used later
  // stay exact.
  if (e < -1022 || e > 1023) {
    return absl::InvalidArgumentError(absl::StrCat("granularity 2^", e, " for scale ", scale,
                                                   " and bits_below ", bits_below,
                                                   " is outside the range of normal doubles; use a "
                                                   "bits_below closer to log2(scale)"));
  }
  return std::ldexp(1.0, static_cast<int>(e));
}

absl::StatusOr<int64_t> SnapToGrid(double value, double granularity) {
  if (!IsPowerOfTwo(granularity)) {
    return absl::InvalidArgumentError(
        absl::StrCat("granularity must be a positive power of two (got ", granularity,
                     "); obtain it from PowerOfTwoGranularity"));
  }
  if (!std::isfinite(value)) {
    return absl::InvalidArgumentError(absl::StrCat("value must be finite (got ", value, ")"));
  }
  // Dividing by a power of two is exact unless the quotient is subnormal, and a
  // subnormal quotient rounds to 0 either way. std::round breaks ties away from
  // zero.
  const double steps = std::round(value / granularity);
  if (!(std::fabs(steps) <= kMaxSteps)) {
    return absl::InvalidArgumentError(
        absl::StrCat("value ", value, " is ", value / granularity, " grid steps of ", granularity,
                     ", beyond the limit of 2^52 steps; use a coarser granularity"));
  }
  return static_cast<int64_t>(steps);
}

double FromGrid(int64_t steps, double granularity) {
  return static_cast<double>(steps) * granularity;
}

}  // namespace fairvault::core::dp
