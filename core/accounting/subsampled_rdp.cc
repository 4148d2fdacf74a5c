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

// Theorem 9 at integer alpha >= 2 (gamma already checked), with eps(j) = base(j).
double Theorem9(absl::FunctionRef<double(int64_t)> base, double eps_inf, double log_gamma,
                int64_t alpha) {
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

}  // namespace

double WangBalleKasiviswanathanBound(absl::FunctionRef<double(int64_t)> base_rdp,
                                     double base_eps_inf, double gamma, int64_t alpha) {
  if (!ValidGamma(gamma) || alpha < 2 || !(base_eps_inf >= 0)) return kInf;
  return Theorem9(base_rdp, base_eps_inf, std::log(gamma), alpha);
}

std::vector<double> SubsampledWithoutReplacementRdp(absl::FunctionRef<double(double)> base_rdp,
                                                    double base_eps_inf, double gamma,
                                                    absl::Span<const double> orders) {
  std::vector<double> out(orders.size(), kInf);
  if (!ValidGamma(gamma) || !(base_eps_inf >= 0)) return out;
  const double log_gamma = std::log(gamma);

  // The base curve at the integers the bound needs, and the integer-order bounds, on demand.
  int64_t max_int = 2;
  for (double a : orders) {
    if (a > 1 && a <= kMaxAmplifiedOrder) {
      max_int = std::max(max_int, static_cast<int64_t>(std::ceil(a)));
    }
  }
  std::vector<double> base_int(static_cast<size_t>(max_int) + 1, kInf);
  for (int64_t j = 2; j <= max_int; ++j) {
    base_int[j] = FiniteNonNegativeOrInf(base_rdp(static_cast<double>(j)));
  }
  std::vector<double> bound_int(base_int.size(), std::nan(""));
  const auto integer_bound = [&](int64_t k) {  // eps'(k), k >= 2, min'd with eps(k)
    if (std::isnan(bound_int[k])) {
      const double theorem =
          Theorem9([&](int64_t j) { return base_int[j]; }, base_eps_inf, log_gamma, k);
      bound_int[k] = std::min(base_int[k], theorem);
    }
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

std::vector<double> ComposeRdp(absl::Span<const double> rdp, int64_t steps) {
  std::vector<double> out(rdp.size(), kInf);
  if (steps < 1) return out;
  for (size_t i = 0; i < rdp.size(); ++i) {
    out[i] = FiniteNonNegativeOrInf(static_cast<double>(steps) * rdp[i]);
  }
  return out;
}

double SubsampledGaussianEpsilon(double sensitivity, double sigma, double gamma, int64_t steps,
                                 double delta) {
  const std::vector<double>& orders = RdpOrders();
  return RdpToEpsilon(
      orders, ComposeRdp(SubsampledGaussianRdp(sensitivity, sigma, gamma, orders), steps), delta);
}

absl::StatusOr<double> CalibrateSubsampledGaussianSigma(double epsilon, double delta,
                                                        double sensitivity, double gamma,
                                                        int64_t steps) {
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
  const auto spent = [&](double sigma) {
    return SubsampledGaussianEpsilon(sensitivity, sigma, gamma, steps, delta);
  };
  // Bisection on log(sigma) with the invariant spent(lo) > epsilon >= spent(hi); the bound is
  // non-increasing in sigma (every term of Theorem 9 and the base curve are), and only the hi end,
  // which has been checked, is returned.
  double hi = sensitivity;
  while (spent(hi) > epsilon) {
    hi *= 2;
    if (!std::isfinite(hi)) {
      return absl::InvalidArgumentError(absl::StrCat("no finite sigma reaches epsilon ", epsilon,
                                                     " for sensitivity ", sensitivity,
                                                     "; lower the sensitivity or raise epsilon"));
    }
  }
  double lo = hi;
  while (!(spent(lo) > epsilon)) lo /= 2;  // sigma -> 0 spends +inf
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

}  // namespace fairvault::core::accounting
