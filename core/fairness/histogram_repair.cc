// L∞ isotonic repair of a noisy CDF into a pmf (ALGORITHMS.md §2 step 4).
#include "core/fairness/histogram_repair.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace fairvault::core::fairness {

std::vector<double> RepairCdfToPmf(absl::Span<const double> masses, double weight) {
  const size_t k = masses.size();
  if (k == 0) return {};
  const bool finite =
      std::all_of(masses.begin(), masses.end(), [](double m) { return std::isfinite(m); });
  if (!finite || !std::isfinite(weight) || weight <= 0) {
    return std::vector<double>(k, 1.0 / static_cast<double>(k));
  }
  std::vector<double> cdf(k);
  double running = 0;
  for (size_t j = 0; j < k; ++j) {
    running += masses[j];
    cdf[j] = running / weight;
  }
  // The best monotone fit in sup norm is the midpoint of the running max from the left and the
  // running min from the right (both non-decreasing, so their midpoint is too).
  std::vector<double> min_right(k);
  min_right[k - 1] = cdf[k - 1];
  for (size_t j = k - 1; j-- > 0;) min_right[j] = std::min(cdf[j], min_right[j + 1]);
  double max_left = cdf[0];
  for (size_t j = 0; j < k; ++j) {
    max_left = std::max(max_left, cdf[j]);
    cdf[j] = std::clamp((max_left + min_right[j]) / 2, 0.0, 1.0);
  }
  cdf[k - 1] = 1.0;
  std::vector<double> pmf(k);
  double previous = 0;
  for (size_t j = 0; j < k; ++j) {
    // Clipping keeps the sequence monotone, so each difference is >= 0; max() only guards
    // against a rounding artifact of the midpoint.
    pmf[j] = std::max(cdf[j] - previous, 0.0);
    previous = cdf[j];
  }
  return pmf;
}

}  // namespace fairvault::core::fairness
