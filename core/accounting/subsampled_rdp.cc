// Subsampled RDP without replacement (Wang-Balle-Kasiviswanathan 2019, Theorem 9) in log space,
// its extension to the accountant's non-integer orders, and Gaussian calibration. The formula and
// the validity argument for each step are in subsampled_rdp.h.
#include "core/accounting/subsampled_rdp.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/accounting/accountant.h"
#include "core/util/status_macros.h"
#include "core/util/validate.h"

namespace fairvault::core::accounting {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kLog2 = 0.6931471805599453;
constexpr double kLog4 = 1.3862943611198906;

// Orders above this get the un-amplified value only (still valid): Theorem 9 costs O(alpha) per
// order, and the accountant's grid stops at 4096.
constexpr double kMaxAmplifiedOrder = 1 << 16;

// Theorem 27's moments are computed for even l up to here (O(l) quadrature points each); higher
// terms keep Theorem 9's factor, still a valid bound. autodp stops at 100 (its default m).
constexpr int64_t kMaxPearsonVajdaOrder = 256;

bool ValidGamma(double gamma) { return gamma > 0 && gamma <= 1; }

// log(e^x - 1) for x >= 0; -inf at 0, +inf at +inf.
double LogExpm1(double x) {
  if (x > 35) return x + std::log1p(-std::exp(-x));
  return std::log(std::expm1(x));
}

// log(1 + e^x) without overflow or loss at tiny x; 0 at -inf, +inf at +inf.
double Log1pExp(double x) {
  if (x <= -37) return std::exp(x);
  if (x <= 18) return std::log1p(std::exp(x));
  return x + std::log1p(std::exp(-x));
}

// A base or final value that is NaN or negative is a bug upstream: fail closed.
double FiniteNonNegativeOrInf(double v) { return (v >= 0 && v < kInf) ? v : kInf; }

// Theorem 9 at integer alpha >= 2 (gamma already checked), with eps(j) = base(j). With
// `log_pearson_vajda` non-empty (entry l = log E_Q[(P/Q - 1)^l] of the tight pair, used at even l
// only) it is Theorem 27: each j >= 3 factor is also min'd with 4 sqrt(B(2 floor(j/2))
// B(2 ceil(j/2))) where both moments are available; terms beyond keep Theorem 9's factor.
double Theorem9(absl::FunctionRef<double(int64_t)> base, double eps_inf, double log_gamma,
                int64_t alpha, absl::Span<const double> log_pearson_vajda = {}) {
  const double log_expm1_inf = LogExpm1(eps_inf);  // log(e^{eps(inf)} - 1)
  // Log of each term of the sum after the leading 1; the maximum is tracked for log-sum-exp.
  std::vector<double> terms;
  terms.reserve(static_cast<size_t>(alpha) - 1);
  double top = -kInf;
  double log_binom = 0;  // log C(alpha, j), built up j by j
  for (int64_t j = 1; j <= alpha; ++j) {
    log_binom += std::log(static_cast<double>(alpha - j + 1) / static_cast<double>(j));
    if (j == 1) continue;
    const double eps_j = base(j);
    if (!(eps_j >= 0)) return kInf;  // negative or NaN base: unknown
    double factor;                   // log of the min{...} factor times e^{(j-1) eps(j)}
    if (j == 2) {
      factor = std::min(kLog4 + LogExpm1(eps_j), eps_j + std::min(kLog2, 2 * log_expm1_inf));
    } else {
      const double cap = std::min(kLog2, static_cast<double>(j) * log_expm1_inf);
      // cap = -inf only when eps(inf) = 0 (a constant mechanism): the term is exactly 0, and
      // must not become -inf + inf = NaN.
      factor = cap == -kInf ? -kInf : static_cast<double>(j - 1) * eps_j + cap;
      const auto hi = static_cast<size_t>(2 * ((j + 1) / 2));
      if (hi < log_pearson_vajda.size()) {
        const double improved = kLog4 + 0.5 * (log_pearson_vajda[static_cast<size_t>(2 * (j / 2))] +
                                               log_pearson_vajda[hi]);
        if (!std::isnan(improved)) factor = std::min(factor, improved);
      }
    }
    const double term = static_cast<double>(j) * log_gamma + log_binom + factor;
    if (std::isnan(term) || term == kInf) return kInf;
    terms.push_back(term);
    top = std::max(top, term);
  }
  double log_sum = -kInf;  // log of the sum over j = 2..alpha
  if (top > -kInf) {
    double sum = 0;
    for (double t : terms) sum += std::exp(t - top);
    log_sum = top + std::log(sum);
  }
  return FiniteNonNegativeOrInf(Log1pExp(log_sum) / static_cast<double>(alpha - 1));
}

// log E[(e^{s Z - s^2/2} - 1)^l] for Z ~ N(0, 1), even l >= 2: the Pearson-Vajda moment of
// the Gaussian's tight pair, N(Delta, sigma^2) against N(0, sigma^2), s = Delta / sigma. The
// binomial expansion sum_i C(l,i) (-1)^{l-i} e^{i(i-1) s^2/2} (autodp's route) cancels
// catastrophically at small s (terms ~2^l, result ~s^l (l-1)!!), so this integrates the
// non-negative integrand instead: the trapezoid rule with step h on the grid z = s/2 + k h
// (where the integrand vanishes; u = s z - s^2/2 = s k h exactly). The integrand is entire and
// Gaussian-tailed, so the rule's error is below e^{-2 pi^2 / h^2} = e^{-7895} times 2^l / B(l);
// the log-integrand is concave on each side of s/2, so each side stops once past its peak and
// 60 below it (the neglected tail is < e^{-60} of the sum). The result is raised by a relative
// 1e-9 (kQuadratureMargin) to cover rounding. +inf (the caller then keeps Theorem 9) if s is too
// small for the grid (s h < 1e-200), if e^{s k h} overflows, or if the walk does not end.
constexpr double kQuadratureStep = 0.05;
constexpr double kQuadratureMargin = 1e-9;
constexpr double kLogSqrt2Pi = 0.91893853320467274;

double LogGaussianPearsonVajda(double s, int64_t l) {
  if (!(s * kQuadratureStep >= 1e-200) || !std::isfinite(s) || l < 2 || l % 2 != 0) return kInf;
  const double z0 = s / 2;
  double top = -kInf, sum = 0;  // running log-sum-exp
  const auto add = [&](double v) {
    if (v > top) {
      sum = sum * std::exp(top - v) + 1;
      top = v;
    } else {
      sum += std::exp(v - top);
    }
  };
  constexpr int64_t kMaxSteps = 1 << 24;
  for (const double dir : {1.0, -1.0}) {
    double side_top = -kInf, previous = -kInf;
    for (int64_t k = 1;; ++k) {
      if (k > kMaxSteps) return kInf;
      const double kh = static_cast<double>(k) * kQuadratureStep;
      const double z = z0 + dir * kh;
      const double v =
          -z * z / 2 + static_cast<double>(l) * std::log(std::fabs(std::expm1(dir * s * kh)));
      // e^{s kh} overflowed before the peak: the walk could not end (+inf after kMaxSteps, seconds
      // later), so +inf now.
      if (!(v < kInf)) return kInf;
      add(v);
      side_top = std::max(side_top, v);
      if (v < previous && v < side_top - 60) break;
      previous = v;
    }
  }
  return top + std::log(sum) + std::log(kQuadratureStep) - kLogSqrt2Pi +
         std::log1p(kQuadratureMargin);
}

// The curve at `orders` from an integer-order bound `theorem(k)` (k >= 2) and the base curve: at
// integers min(eps(k), theorem(k)); elsewhere the chord of the cumulant, min'd with eps(a) (see
// the file comment of the header). gamma has been checked.
std::vector<double> CurveFromIntegerBounds(absl::FunctionRef<double(double)> base_rdp,
                                           absl::FunctionRef<double(int64_t)> theorem,
                                           int64_t max_int, absl::Span<const double> base_int,
                                           absl::Span<const double> orders) {
  std::vector<double> out(orders.size(), kInf);
  std::vector<double> bound_int(static_cast<size_t>(max_int) + 1, std::nan(""));
  const auto integer_bound = [&](int64_t k) {  // eps'(k), k >= 2, min'd with eps(k)
    if (std::isnan(bound_int[k])) bound_int[k] = std::min(base_int[k], theorem(k));
    return bound_int[k];
  };
  for (size_t i = 0; i < orders.size(); ++i) {
    const double a = orders[i];
    if (!(a > 1)) continue;  // also NaN
    const double base_a = FiniteNonNegativeOrInf(base_rdp(a));
    if (a > kMaxAmplifiedOrder) {
      out[i] = base_a;
      continue;
    }
    const double f = std::floor(a);
    const auto fi = static_cast<int64_t>(f);
    if (f == a) {
      out[i] = integer_bound(fi);
      continue;
    }
    // Chord of the convex cumulant K between f and f + 1; K(1) = 0.
    const double c = f + 1;
    const double k_f = fi == 1 ? 0.0 : (f - 1) * integer_bound(fi);
    const double k_c = (c - 1) * integer_bound(fi + 1);
    const double chord = ((c - a) * k_f + (a - f) * k_c) / (a - 1);
    out[i] = std::min(base_a, FiniteNonNegativeOrInf(chord));
  }
  return out;
}

// The largest integer the curve needs at `orders` (at least 2).
int64_t MaxIntegerOrder(absl::Span<const double> orders) {
  int64_t max_int = 2;
  for (double a : orders) {
    if (a > 1 && a <= kMaxAmplifiedOrder) {
      max_int = std::max(max_int, static_cast<int64_t>(std::ceil(a)));
    }
  }
  return max_int;
}

bool ValidGaussian(double sensitivity, double sigma) {
  return std::isfinite(sensitivity) && sensitivity > 0 && std::isfinite(sigma) && sigma > 0;
}

// log E[(P/Q - 1)^l] of the Gaussian's tight pair at even l <= min(max_int + 1,
// kMaxPearsonVajdaOrder) (odd entries NaN, unused); s = Delta / sigma.
std::vector<double> GaussianPearsonVajdaTable(double s, int64_t max_int) {
  const int64_t top = std::min<int64_t>(max_int + 1, kMaxPearsonVajdaOrder);
  std::vector<double> table(static_cast<size_t>(std::max<int64_t>(top, 0)) + 1, std::nan(""));
  for (int64_t l = 2; l <= top; l += 2) {
    table[static_cast<size_t>(l)] = l == 2 ? std::log(std::expm1(s * s))  // exact: e^{s^2} - 1
                                           : LogGaussianPearsonVajda(s, l);
  }
  return table;
}

double GaussianTheorem27(double sensitivity, double sigma, double log_gamma, int64_t alpha,
                         absl::Span<const double> log_pearson_vajda) {
  const double ratio = sensitivity / sigma;
  const double half_ratio_sq = ratio * ratio / 2;
  return Theorem9([half_ratio_sq](int64_t j) { return static_cast<double>(j) * half_ratio_sq; },
                  kInf, log_gamma, alpha, log_pearson_vajda);
}

}  // namespace

double GaussianPearsonVajdaMoment(double ratio, int64_t l) {
  if (!std::isfinite(ratio) || !(ratio > 0) || l < 2 || l % 2 != 0) return kInf;
  if (l == 2) return std::expm1(ratio * ratio);
  return std::exp(LogGaussianPearsonVajda(ratio, l));
}

double WangBalleKasiviswanathanGaussianBound(double sensitivity, double sigma, double gamma,
                                             int64_t alpha) {
  if (!ValidGamma(gamma) || alpha < 2 || !ValidGaussian(sensitivity, sigma)) return kInf;
  const std::vector<double> table = GaussianPearsonVajdaTable(sensitivity / sigma, alpha);
  return GaussianTheorem27(sensitivity, sigma, std::log(gamma), alpha, table);
}

double WangBalleKasiviswanathanBound(absl::FunctionRef<double(int64_t)> base_rdp,
                                     double base_eps_inf, double gamma, int64_t alpha) {
  if (!ValidGamma(gamma) || alpha < 2 || !(base_eps_inf >= 0)) return kInf;
  return Theorem9(base_rdp, base_eps_inf, std::log(gamma), alpha);
}

std::vector<double> SubsampledWithoutReplacementRdp(absl::FunctionRef<double(double)> base_rdp,
                                                    double base_eps_inf, double gamma,
                                                    absl::Span<const double> orders) {
  if (!ValidGamma(gamma) || !(base_eps_inf >= 0)) return std::vector<double>(orders.size(), kInf);
  if (gamma == 1) {
    // No subsampling: the bound is the base curve itself (min(eps(alpha), Theorem 9) is eps(alpha)
    // at gamma = 1), without Theorem 9's O(alpha) sums at every integer order.
    std::vector<double> out(orders.size(), kInf);
    for (size_t i = 0; i < orders.size(); ++i) {
      if (orders[i] > 1) out[i] = FiniteNonNegativeOrInf(base_rdp(orders[i]));
    }
    return out;
  }
  const double log_gamma = std::log(gamma);
  // The base curve at the integers the bound needs.
  const int64_t max_int = MaxIntegerOrder(orders);
  std::vector<double> base_int(static_cast<size_t>(max_int) + 1, kInf);
  for (int64_t j = 2; j <= max_int; ++j) {
    base_int[j] = FiniteNonNegativeOrInf(base_rdp(static_cast<double>(j)));
  }
  return CurveFromIntegerBounds(
      base_rdp,
      [&](int64_t k) {
        return Theorem9([&](int64_t j) { return base_int[j]; }, base_eps_inf, log_gamma, k);
      },
      max_int, base_int, orders);
}

std::vector<double> SubsampledGaussianRdp(double sensitivity, double sigma, double gamma,
                                          absl::Span<const double> orders) {
  if (!std::isfinite(sensitivity) || !(sensitivity > 0) || !std::isfinite(sigma) || !(sigma > 0)) {
    return std::vector<double>(orders.size(), kInf);
  }
  // As GaussianRdp: the ratio first, so that sensitivity^2 alone cannot overflow.
  const double ratio = sensitivity / sigma;
  const double half_ratio_sq = ratio * ratio / 2;
  return SubsampledWithoutReplacementRdp([half_ratio_sq](double a) { return a * half_ratio_sq; },
                                         kInf, gamma, orders);
}

std::vector<double> SubsampledContinuousGaussianRdp(double sensitivity, double sigma, double gamma,
                                                    absl::Span<const double> orders) {
  if (!ValidGaussian(sensitivity, sigma) || !ValidGamma(gamma)) {
    return std::vector<double>(orders.size(), kInf);
  }
  const double ratio = sensitivity / sigma;
  const double half_ratio_sq = ratio * ratio / 2;
  const auto base = [half_ratio_sq](double a) { return a * half_ratio_sq; };
  const int64_t max_int = MaxIntegerOrder(orders);
  std::vector<double> base_int(static_cast<size_t>(max_int) + 1, kInf);
  for (int64_t j = 2; j <= max_int; ++j) {
    base_int[j] = FiniteNonNegativeOrInf(base(static_cast<double>(j)));
  }
  const std::vector<double> table = GaussianPearsonVajdaTable(ratio, max_int);
  const double log_gamma = std::log(gamma);
  return CurveFromIntegerBounds(
      base, [&](int64_t k) { return GaussianTheorem27(sensitivity, sigma, log_gamma, k, table); },
      max_int, base_int, orders);
}

std::vector<double> ComposeRdp(absl::Span<const double> rdp, int64_t steps) {
  std::vector<double> out(rdp.size(), kInf);
  if (steps < 1) return out;
  for (size_t i = 0; i < rdp.size(); ++i) {
    out[i] = FiniteNonNegativeOrInf(static_cast<double>(steps) * rdp[i]);
  }
  return out;
}

namespace {

using CurveFn = std::vector<double> (*)(double, double, double, absl::Span<const double>);

constexpr double kHugeMultiplier = 1e12;

double EpsilonOf(CurveFn curve, double sensitivity, double sigma, double gamma, int64_t steps,
                 double delta) {
  const std::vector<double>& orders = RdpOrders();
  return RdpToEpsilon(orders, ComposeRdp(curve(sensitivity, sigma, gamma, orders), steps), delta);
}

absl::StatusOr<double> Calibrate(CurveFn curve, double epsilon, double delta, double sensitivity,
                                 double gamma, int64_t steps) {
  RETURN_IF_ERROR(ValidateIsFiniteAndPositive(epsilon, "epsilon"));
  RETURN_IF_ERROR(ValidateInOpenRange(delta, 0, 1, "delta"));
  RETURN_IF_ERROR(ValidateIsFiniteAndPositive(sensitivity, "sensitivity"));
  if (!ValidGamma(gamma)) {
    return absl::InvalidArgumentError(absl::StrCat("sampling ratio gamma must be in (0, 1] (got ",
                                                   gamma, "); pass batch size / n"));
  }
  if (steps < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("steps must be >= 1 (got ", steps, "); pass the number of noisy steps"));
  }
  // As sigma grows every curve entry tends to 0 (the min with the un-amplified curve), so the
  // conversion tends to the floor that the grid's largest order sets, as for
  // CalibrateGaussianSigma.
  const std::vector<double>& orders = RdpOrders();
  const double floor = RdpToEpsilon(orders, std::vector<double>(orders.size(), 0.0), delta);
  if (!(epsilon > floor)) {
    return absl::InvalidArgumentError(
        absl::StrCat("epsilon ", epsilon, " is not above ", floor,
                     ", the smallest epsilon any Gaussian noise reaches at delta ", delta,
                     " on the accountant's orders; raise epsilon or delta"));
  }
  return CalibrateMultiplier(
      [&](double sigma) { return ComposeRdp(curve(sensitivity, sigma, gamma, orders), steps); },
      epsilon, delta, sensitivity);
}

}  // namespace

absl::StatusOr<double> CalibrateMultiplier(absl::FunctionRef<std::vector<double>(double)> curve,
                                           double epsilon, double delta, double start) {
  RETURN_IF_ERROR(ValidateIsFiniteAndPositive(epsilon, "epsilon"));
  RETURN_IF_ERROR(ValidateInOpenRange(delta, 0, 1, "delta"));
  RETURN_IF_ERROR(ValidateIsFiniteAndPositive(start, "start"));
  const std::vector<double>& orders = RdpOrders();
  const auto spent = [&](double z) { return RdpToEpsilon(orders, curve(z), delta); };
  if (spent(kHugeMultiplier) > epsilon) {
    return absl::InvalidArgumentError(
        absl::StrCat("epsilon ", epsilon, " at delta ", delta,
                     " is below what any noise multiplier reaches for this release (its fixed "
                     "parts and the accountant's orders set a floor); raise epsilon or delta"));
  }
  // Bisection on log(z) with the invariant spent(lo) > epsilon >= spent(hi); the curves are
  // non-increasing in z, and only the hi end, which has been checked, is returned.
  double hi = start;
  while (spent(hi) > epsilon) {
    hi *= 2;
    if (hi > kHugeMultiplier) return kHugeMultiplier;
  }
  double lo = hi;
  while (!(spent(lo) > epsilon)) {
    lo /= 2;  // z -> 0 spends +inf
    if (lo < 1e-300) return hi;
  }
  while (hi - lo > 1e-9 * lo) {
    const double mid = std::sqrt(lo) * std::sqrt(hi);
    if (!(mid > lo && mid < hi)) break;
    if (spent(mid) > epsilon) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return hi;
}

double SubsampledGaussianEpsilon(double sensitivity, double sigma, double gamma, int64_t steps,
                                 double delta) {
  return EpsilonOf(&SubsampledGaussianRdp, sensitivity, sigma, gamma, steps, delta);
}

absl::StatusOr<double> CalibrateSubsampledGaussianSigma(double epsilon, double delta,
                                                        double sensitivity, double gamma,
                                                        int64_t steps) {
  return Calibrate(&SubsampledGaussianRdp, epsilon, delta, sensitivity, gamma, steps);
}

double SubsampledContinuousGaussianEpsilon(double sensitivity, double sigma, double gamma,
                                           int64_t steps, double delta) {
  return EpsilonOf(&SubsampledContinuousGaussianRdp, sensitivity, sigma, gamma, steps, delta);
}

absl::StatusOr<double> CalibrateSubsampledContinuousGaussianSigma(double epsilon, double delta,
                                                                  double sensitivity, double gamma,
                                                                  int64_t steps) {
  return Calibrate(&SubsampledContinuousGaussianRdp, epsilon, delta, sensitivity, gamma, steps);
}

}  // namespace fairvault::core::accounting
