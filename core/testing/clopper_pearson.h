// One-sided Clopper-Pearson bounds for the empirical privacy audits: a release is run many times
// on two neighbouring datasets, and an event's frequencies bound the ε it really has from below
// by log(lower(p_D) / upper(p_D')).
#ifndef FAIRVAULT_CORE_TESTING_CLOPPER_PEARSON_H_
#define FAIRVAULT_CORE_TESTING_CLOPPER_PEARSON_H_

#include <algorithm>
#include <cmath>

namespace fairvault::testing {

// The standard normal CDF and its inverse (bisection; |x| <= 40), for the audits' Gaussian
// trade-off checks: an event with probability q under D' has at most Φ(Φ⁻¹(q) + μ) under D for
// a μ-GDP release.
inline double Phi(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }
inline double PhiInverse(double p) {
  double lo = -40, hi = 40;
  for (int it = 0; it < 200; ++it) {
    const double mid = (lo + hi) / 2;
    (Phi(mid) < p ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

// P(Binomial(n, p) <= k), summed in log space.
inline double BinomialCdf(int k, int n, double p) {
  if (p <= 0) return 1;
  if (p >= 1) return k >= n ? 1 : 0;
  double total = 0;
  for (int i = 0; i <= k; ++i) {
    total += std::exp(std::lgamma(n + 1.0) - std::lgamma(i + 1.0) - std::lgamma(n - i + 1.0) +
                      i * std::log(p) + (n - i) * std::log1p(-p));
  }
  return std::min(total, 1.0);
}

// One-sided Clopper-Pearson bounds on p from k successes in n trials at level 1 − alpha.
inline double ClopperPearsonLower(int k, int n, double alpha) {
  if (k == 0) return 0;
  double lo = 0, hi = 1;
  for (int it = 0; it < 60; ++it) {
    const double mid = (lo + hi) / 2;
    // P(X >= k | mid) = 1 − P(X <= k−1 | mid); the bound is where it equals alpha.
    (1 - BinomialCdf(k - 1, n, mid) < alpha ? lo : hi) = mid;
  }
  return lo;
}
inline double ClopperPearsonUpper(int k, int n, double alpha) {
  if (k == n) return 1;
  double lo = 0, hi = 1;
  for (int it = 0; it < 60; ++it) {
    const double mid = (lo + hi) / 2;
    (BinomialCdf(k, n, mid) > alpha ? lo : hi) = mid;
  }
  return hi;
}

}  // namespace fairvault::testing

#endif  // FAIRVAULT_CORE_TESTING_CLOPPER_PEARSON_H_
