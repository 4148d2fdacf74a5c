// Exact noise-aware rate intervals: an L1 ball of released-count pairs whose probability under
// the public discrete Laplace noise is computed in closed form, and Clopper–Pearson intervals
// (by inverting the regularised incomplete beta function) over the true count pairs it admits.
#include "core/fairness/count_interval.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace fairvault::core::fairness {
namespace {

// Continued fraction of I_x(a, b) (modified Lentz), as in Numerical Recipes §6.4; converges in
// O(sqrt(max(a, b))) terms for x < (a + 1) / (a + b + 2).
double BetaContinuedFraction(double a, double b, double x) {
  constexpr int kMaxTerms = 1'000'000;
  constexpr double kEps = 1e-15, kTiny = 1e-300;
  const double qab = a + b, qap = a + 1, qam = a - 1;
  double c = 1, d = 1 - qab * x / qap;
  if (std::abs(d) < kTiny) d = kTiny;
  d = 1 / d;
  double h = d;
  for (int m = 1; m <= kMaxTerms; ++m) {
    const double m2 = 2.0 * m;
    double aa = m * (b - m) * x / ((qam + m2) * (a + m2));
    d = 1 + aa * d;
    if (std::abs(d) < kTiny) d = kTiny;
    c = 1 + aa / c;
    if (std::abs(c) < kTiny) c = kTiny;
    d = 1 / d;
    h *= d * c;
    aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
    d = 1 + aa * d;
    if (std::abs(d) < kTiny) d = kTiny;
    c = 1 + aa / c;
    if (std::abs(c) < kTiny) c = kTiny;
    d = 1 / d;
    const double del = d * c;
    h *= del;
    if (std::abs(del - 1) < kEps) break;
  }
  return h;
}

// The Clopper–Pearson lower bound: the p with P(Bin(trials, p) >= successes) = alpha / 2, i.e.
// the alpha/2 quantile of Beta(successes, trials − successes + 1); 0 for no successes.
double ClopperPearsonLower(int64_t successes, int64_t trials, double alpha) {
  if (successes <= 0 || trials <= 0) return 0;
  const double a = static_cast<double>(successes);
  const double b = static_cast<double>(trials - successes) + 1;
  const double target = alpha / 2;
  double lo = 0, hi = 1;
  for (int i = 0; i < 200 && hi - lo > 1e-13 * hi; ++i) {
    const double mid = (lo + hi) / 2;
    if (RegularizedIncompleteBeta(a, b, mid) < target) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return lo;  // the side where I_p < alpha/2: never above the exact bound
}

// min of ClopperPearsonLower(x, x + y) over (x, y) in N² with |x − x̃| + |y − ỹ| <= r; the set
// is non-empty. CP's lower bound increases with x and decreases with the trials, so for each x
// only y = ỹ + r − |x − x̃| matters, and x > x̃ never does better than x = x̃ (same trials).
double LowerOverBall(int64_t x_obs, int64_t y_obs, int64_t r, double alpha) {
  if (x_obs <= 0) return 0;  // x = 0 is in the set
  const int64_t x_first = std::max<int64_t>({0, x_obs - r - std::min<int64_t>(y_obs, 0)});
  if (x_first == 0) return 0;
  const int64_t c = y_obs + r - x_obs;  // trials at x: x + (ỹ + r − (x̃ − x)) = 2x + c
  const int64_t count = x_obs - x_first + 1;
  constexpr int64_t kCells = 64;
  double best = 1;
  if (count <= kCells) {
    for (int64_t x = x_first; x <= x_obs; ++x) {
      best = std::min(best, ClopperPearsonLower(x, 2 * x + c, alpha));
    }
    return best;
  }
  // Cells of consecutive x: the smallest x and the most trials in the cell bound every point of
  // it from below (a valid, slightly wider, bound).
  for (int64_t i = 0; i < kCells; ++i) {
    const int64_t from = x_first + count * i / kCells;
    const int64_t to = x_first + count * (i + 1) / kCells - 1;
    if (to < from) continue;
    best = std::min(best, ClopperPearsonLower(from, 2 * to + c, alpha));
  }
  return best;
}

}  // namespace

double RegularizedIncompleteBeta(double a, double b, double x) {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const double log_front =
      std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) + b * std::log1p(-x);
  const double front = std::exp(log_front);
  if (x < (a + 1) / (a + b + 2)) return front * BetaContinuedFraction(a, b, x) / a;
  return 1 - front * BetaContinuedFraction(b, a, 1 - x) / b;
}

RateBounds ClopperPearson(int64_t successes, int64_t trials, double alpha) {
  if (trials <= 0) return {0, 1};
  return {ClopperPearsonLower(successes, trials, alpha),
          1 - ClopperPearsonLower(trials - successes, trials, alpha)};
}

double NoisePairCoverage(const CountNoise& noise, int64_t radius) {
  if (radius < 0) return 0;
  if (!(noise.laplace_scale > 0)) return 1;
  using Real = long double;
  const Real t = noise.laplace_scale;
  const Real q = std::exp(-1 / t);
  const Real omq = -std::expm1(-1 / t);  // 1 − q without cancellation
  const Real kappa = omq / (1 + q);      // P(Z = 0) for one draw
  const Real r = static_cast<Real>(radius);
  const Real q_r1 = std::pow(q, r + 1);
  // P(|Z1| + |Z2| <= r) = P(|Z1| <= r) − 2 Σ_{|z| <= r} P(Z1 = z) P(Z2 >= r − |z| + 1).
  if (noise.cells == 1) {
    // P(Z = z) = κ q^|z| and P(Z >= u) = q^u / (1 + q): every term of the sum is κ q^(r+1)/(1+q).
    const Real tail = q_r1 / (1 + q);
    return static_cast<double>(1 - 2 * tail - 2 * (2 * r + 1) * kappa * tail);
  }
  // Two draws: P(Z = z) = κ² q^|z| (|z| + A) with A = (1 + q²) / (1 − q²), and
  // P(Z >= u) = κ² q^u [(u(1 − q) + q) / (1 − q)² + A / (1 − q)].
  const Real big_a = (1 + q * q) / (omq * (1 + q));
  const Real e = q / (omq * omq) + big_a / omq;
  const Real tail = kappa * kappa * q_r1 * (((r + 1) * omq + q) / (omq * omq) + big_a / omq);
  // Σ_{|z| <= r} (s + A)((r + 1 − s)/(1 − q) + E) with s = |z|, in closed form.
  const Real f = (r + 1) / omq + e;
  const Real s1 = r * (r + 1) / 2, s2 = r * (r + 1) * (2 * r + 1) / 6;
  const Real positive = f * s1 - s2 / omq + big_a * f * r - big_a * s1 / omq;
  const Real sum = big_a * f + 2 * positive;
  const Real k4 = kappa * kappa * kappa * kappa;
  return static_cast<double>(1 - 2 * tail - 2 * k4 * q_r1 * sum);
}

int64_t NoisePairRadius(const CountNoise& noise, double level) {
  if (!(noise.laplace_scale > 0) || NoisePairCoverage(noise, 0) >= level) return 0;
  int64_t hi = 1;
  constexpr int64_t kMaxRadius = int64_t{1} << 60;
  while (NoisePairCoverage(noise, hi) < level && hi < kMaxRadius) hi *= 2;
  int64_t lo = hi / 2;  // coverage(lo) < level <= coverage(hi)
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (NoisePairCoverage(noise, mid) >= level) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  return hi;
}

RateBounds RateInterval(int64_t noisy_x, int64_t noisy_y, int64_t radius, double sampling_alpha) {
  // Distance from the released pair to N²: beyond the radius, no true pair is plausible.
  const int64_t distance = std::max<int64_t>(0, -noisy_x) + std::max<int64_t>(0, -noisy_y);
  if (distance > radius) return {0, 1};
  // The upper bound is the lower bound of the complementary rate y / (x + y).
  return {LowerOverBall(noisy_x, noisy_y, radius, sampling_alpha),
          1 - LowerOverBall(noisy_y, noisy_x, radius, sampling_alpha)};
}

}  // namespace fairvault::core::fairness
