// Privacy accounting: RDP curves on a fixed grid of orders, exact integer composition and
// conversion to (epsilon, delta). Formulas and the conversion are restated in ALGORITHMS.md §0.
#include "core/accounting/accountant.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <initializer_list>
#include <limits>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/util/status_macros.h"
#include "core/util/validate.h"

namespace fairvault::core::accounting {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Integer entries saturate here; the saturated value means "unknown or unbounded" and converts to
// +infinity, so a saturated cost can only ever be refused (fail closed).
constexpr int64_t kSaturated = std::numeric_limits<int64_t>::max();

// Largest epsilon EpsilonToMicro accepts.
constexpr double kMaxEpsilon = 1e6;

int64_t SaturatingAdd(int64_t a, int64_t b) {
  // Both operands are >= 0 here (costs are validated on entry).
  if (a == kSaturated || b == kSaturated || a > kSaturated - b) return kSaturated;
  return a + b;
}

// ceil(value * scale) as int64, saturating; NaN saturates too (fail closed), and values below zero
// (only ever floating-point noise around a true 0) become 0.
int64_t CeilScaled(double value, int64_t scale) {
  if (std::isnan(value)) return kSaturated;
  if (value <= 0) return 0;
  const double scaled = std::ceil(value * static_cast<double>(scale));
  // 2^63 is exactly representable; anything at or above it does not fit.
  if (!(scaled < 9223372036854775808.0)) return kSaturated;
  return static_cast<int64_t>(scaled);
}

// A cost with every entry saturated: what malformed mechanism parameters are charged, so the filter
// refuses them instead of undercharging.
PrivacyCost SaturatedCost(bool pure) {
  PrivacyCost cost;
  if (pure) cost.pure_epsilon_micro = kSaturated;
  cost.rdp_nano.assign(RdpOrders().size(), kSaturated);
  return cost;
}

PrivacyCost CostFromCurve(const std::vector<double>& rdp) {
  PrivacyCost cost;
  cost.rdp_nano.reserve(rdp.size());
  for (double r : rdp) cost.rdp_nano.push_back(CeilScaled(r, kNano));
  return cost;
}

// Adds `cost` into `sum`. An empty `sum` means all zeros; entries the sum has but `cost` lacks (or
// has negative) are unknown and saturate: every order is an independent bound, so an infinite entry
// only loses tightness, never validity.
void AddCurve(absl::Span<const int64_t> cost, std::vector<int64_t>& sum) {
  const size_t n = RdpOrders().size();
  if (sum.empty()) sum.assign(n, 0);
  if (sum.size() < n) sum.resize(n, kSaturated);
  for (size_t i = 0; i < sum.size(); ++i) {
    const int64_t c = (i < cost.size() && cost[i] >= 0) ? cost[i] : kSaturated;
    sum[i] = SaturatingAdd(sum[i], c);
  }
}

bool IsZeroCurve(const std::vector<int64_t>& curve) {
  return std::all_of(curve.begin(), curve.end(), [](int64_t v) { return v == 0; });
}

// Empty and all-zero curves compare equal; otherwise sizes and entries must match.
bool SameCurve(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  if (a.empty() || b.empty()) return IsZeroCurve(a) && IsZeroCurve(b);
  return a == b;
}

// The conversion's terms at order `a` that depend on delta alone: at that order a curve value
// r converts to (r + first) - second. RdpToEpsilon and CurveToEpsilon both use this, so that
// cached terms give bit for bit what fresh ones do.
std::pair<double, double> ConversionTerms(double a, double log_delta) {
  // log(delta * a) as a sum, so a tiny delta cannot underflow to log(0).
  return {std::log1p(-1 / a), (log_delta + std::log(a)) / (a - 1)};
}

// The smallest epsilon over the orders whose terms are given; orders with a non-finite curve
// value are skipped (each order is an independent valid bound, so skipping one only loses
// tightness).
double MinOverOrders(absl::Span<const std::pair<double, double>> terms,
                     absl::Span<const double> rdp) {
  double best = kInf;
  const size_t n = std::min(terms.size(), rdp.size());
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(rdp[i])) continue;
    best = std::min(best, rdp[i] + terms[i].first - terms[i].second);
  }
  return std::max(best, 0.0);
}

// Epsilon (real units) of a stored curve at `delta`. Saturated entries and orders the curve lacks
// are +infinity. The orders' terms are computed once per thread and delta (a grant's delta
// rarely changes; every admission converts two curves at it).
double CurveToEpsilon(const std::vector<int64_t>& curve_nano, double delta) {
  if (!(delta > 0)) return kInf;  // !(delta > 0) also catches NaN
  const std::vector<double>& orders = RdpOrders();
  thread_local double cached_delta = 0;
  thread_local std::vector<std::pair<double, double>> terms;
  if (terms.empty() || cached_delta != delta) {
    const double log_delta = std::log(delta);
    terms.clear();
    for (double a : orders) terms.push_back(ConversionTerms(a, log_delta));
    cached_delta = delta;
  }
  thread_local std::vector<double> rdp;
  rdp.assign(orders.size(), 0.0);  // empty curve: all zeros
  if (!curve_nano.empty()) {
    for (size_t i = 0; i < rdp.size(); ++i) {
      rdp[i] = (i < curve_nano.size() && curve_nano[i] != kSaturated)
                   ? static_cast<double>(curve_nano[i]) / kNano
                   : kInf;
    }
  }
  return MinOverOrders(terms, rdp);
}

// log(1 - e^{-x}) for x > 0, accurate at both ends (Maechler's log1mexp).
double Log1mExp(double x) {
  return x < 0.6931471805599453 ? std::log(-std::expm1(-x)) : std::log1p(-std::exp(-x));
}

// A curve entry that is unknown (negative: only a corrupt or hand-built value) saturates.
int64_t NonNegativeOrSaturated(int64_t v) { return v >= 0 ? v : kSaturated; }

double GaussianEpsilon(double sensitivity, double sigma, double delta) {
  const std::vector<double>& orders = RdpOrders();
  return RdpToEpsilon(orders, GaussianRdp(sensitivity, sigma, orders), delta);
}

}  // namespace

absl::StatusOr<int64_t> EpsilonToMicro(double epsilon) {
  if (!std::isfinite(epsilon) || epsilon <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("epsilon must be finite and > 0 (got ", epsilon,
                                                   "); pass a positive privacy budget"));
  }
  if (epsilon > kMaxEpsilon) {
    return absl::InvalidArgumentError(
        absl::StrCat("epsilon must be <= 1e6 (got ", epsilon,
                     "); such a budget gives no protection, use a meaningful epsilon"));
  }
  const int64_t micro = std::llround(epsilon * static_cast<double>(kMicro));
  if (micro < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("epsilon must be at least 1e-6 after rounding to micro-units (got ", epsilon,
                     "); use epsilon >= 0.000001"));
  }
  return micro;
}

// The grid (177 orders), in this order:
//   (10 + x) / 10 for x = 1..99       1.1, 1.2, ..., 10.9 (dp_accounting's defaults)
//   every integer 11..63
//   64 * 2^k * (4 + j) / 4            64, 80, 96, 112, 128, 160, ..., 3584
//     for k = 0..5, j = 0..3
//   4096
// Quarter-octave steps above 64 keep the conversion tight for small epsilons (optimal orders in the
// hundreds); the top order 4096 puts the smallest reachable epsilon at delta=1e-6 near 0.0011.
// Stored curves are indexed by position: never change or reorder this list.
const std::vector<double>& RdpOrders() {
  static const std::vector<double>* const kOrders = [] {
    auto* orders = new std::vector<double>;
    for (int x = 1; x <= 99; ++x) orders->push_back((10 + x) / 10.0);
    for (int a = 11; a <= 63; ++a) orders->push_back(a);
    for (int octave = 64; octave < 4096; octave *= 2) {
      for (int j = 0; j < 4; ++j) orders->push_back(octave * (4 + j) / 4);
    }
    orders->push_back(4096);
    return orders;
  }();
  return *kOrders;
}

std::vector<double> PureDpRdp(double epsilon, absl::Span<const double> orders) {
  std::vector<double> rdp;
  rdp.reserve(orders.size());
  for (double a : orders) {
    // With R = (e^{a eps} + e^{(1-a) eps}) / (1 + e^eps) the curve is log(R) / (a-1), and with
    // u = (a-1) eps
    //   R - 1 = expm1(u) * expm1(a eps) * e^{-u} / (1 + e^eps),
    //   log(R - 1) = log(expm1(u)) + tail,  tail = log(1 - e^{-a eps}) - log1p(e^{-eps}) <= 0,
    // a sum of terms that neither overflow nor cancel. For u <= 1 the curve is
    // log1p(R - 1) / (a-1), which keeps full relative precision at tiny eps (where it is about
    // a eps^2 / 2 and the textbook form eps + (...)/(a-1) cancels). For u > 1 we write
    // log(R - 1) = u + d, d = log(1 - e^{-u}) + tail, and use log R = u + d + log1p(e^{-(u+d)})
    // divided through by a-1, so eps itself is never recomputed from u: at huge eps the curve is
    // exactly eps, and it never exceeds eps through rounding of u / (a-1).
    const double u = (a - 1) * epsilon;
    const double tail = Log1mExp(u + epsilon) - std::log1p(std::exp(-epsilon));
    double value;
    if (u > 1) {
      const double d = Log1mExp(u) + tail;
      value = epsilon + (d + std::log1p(std::exp(-(u + d)))) / (a - 1);
    } else {
      value = std::log1p(std::exp(std::log(std::expm1(u)) + tail)) / (a - 1);
    }
    // Mathematically the value is in [0, epsilon]; clamp rounding noise. Clamping at epsilon
    // stays valid: an epsilon-DP mechanism has RDP at most epsilon at every order.
    rdp.push_back(std::clamp(value, 0.0, epsilon));
  }
  return rdp;
}

std::vector<double> LaplaceRdp(double epsilon, absl::Span<const double> orders) {
  std::vector<double> rdp;
  rdp.reserve(orders.size());
  for (double a : orders) {
    // expm1 of a non-positive argument lies in [-1, 0], so nothing overflows for any epsilon: for
    // large a*epsilon the log1p term tends to log(1/2)/(a-1) and the curve to epsilon.
    // Mathematically the value is in [0, epsilon]; clamp rounding noise.
    const double inner = (a - 1) * std::expm1((1 - 2 * a) * epsilon) / (2 * a - 1);
    const double value = epsilon + std::log1p(inner) / (a - 1);
    rdp.push_back(std::clamp(value, 0.0, epsilon));
  }
  return rdp;
}

std::vector<double> GaussianRdp(double sensitivity, double sigma, absl::Span<const double> orders) {
  // The ratio first: sensitivity^2 alone may overflow where the ratio does not.
  const double ratio = sensitivity / sigma;
  const double half_ratio_sq = ratio * ratio / 2;
  std::vector<double> rdp;
  rdp.reserve(orders.size());
  for (double a : orders) rdp.push_back(a * half_ratio_sq);
  return rdp;
}

double RdpToEpsilon(absl::Span<const double> orders, absl::Span<const double> rdp, double delta) {
  // !(delta > 0) also catches NaN.
  if (!(delta > 0)) return kInf;
  const double log_delta = std::log(delta);
  std::vector<std::pair<double, double>> terms;
  terms.reserve(orders.size());
  for (double a : orders) {
    // An order that is not a finite a > 1 bounds nothing: its terms make it +infinity.
    terms.push_back(a > 1 && std::isfinite(a) ? ConversionTerms(a, log_delta)
                                              : std::make_pair(kInf, 0.0));
  }
  return MinOverOrders(terms, rdp);
}

PrivacyCost PureDpCost(int64_t epsilon_micro) {
  // EpsilonToMicro never yields < 1; anything else is a caller bug, charged as unbounded.
  if (epsilon_micro < 1) return SaturatedCost(/*pure=*/true);
  // The curve is a function of epsilon alone (about 180 orders of logs and exps, a tenth of a
  // small charge's work): each thread keeps the last few it computed.
  constexpr size_t kKept = 64;
  thread_local absl::flat_hash_map<int64_t, PrivacyCost> kept;
  if (auto it = kept.find(epsilon_micro); it != kept.end()) return it->second;
  // Not the continuous-Laplace curve: the discrete Laplace's privacy loss for an integer shift is
  // two-point (+-eps), like randomized response, whose curve lies above the Laplace one.
  PrivacyCost cost = CostFromCurve(PureDpRdp(MicroToEpsilon(epsilon_micro), RdpOrders()));
  cost.pure_epsilon_micro = epsilon_micro;
  if (kept.size() >= kKept) kept.clear();
  kept.emplace(epsilon_micro, cost);
  return cost;
}

PrivacyCost LaplaceCost(int64_t epsilon_micro) { return PureDpCost(epsilon_micro); }

PrivacyCost GaussianCost(double sensitivity, double sigma) {
  // Sensitivity 0 is a legitimate zero cost; negative or non-finite parameters are caller bugs,
  // charged as unbounded. Tiny sigma saturates through CeilScaled.
  if (!std::isfinite(sensitivity) || sensitivity < 0 || !(sigma > 0)) {
    return SaturatedCost(/*pure=*/false);
  }
  return CostFromCurve(GaussianRdp(sensitivity, sigma, RdpOrders()));
}

PrivacyCost RdpCurveCost(const std::vector<double>& rdp) {
  if (rdp.size() != RdpOrders().size()) return SaturatedCost(/*pure=*/false);
  return CostFromCurve(rdp);
}

void Spend::Add(const PrivacyCost& cost) {
  releases = SaturatingAdd(releases, 1);
  AddCurve(cost.rdp_nano, rdp_all_nano);
  if (cost.pure_epsilon_micro.has_value()) {
    const int64_t pure = *cost.pure_epsilon_micro;
    pure_micro = SaturatingAdd(pure_micro, pure >= 0 ? pure : kSaturated);
  } else {
    AddCurve(cost.rdp_nano, rdp_nonpure_nano);
  }
  // Keep the non-pure curve sized alongside the full one so equal spends look equal.
  if (rdp_nonpure_nano.empty()) rdp_nonpure_nano.assign(RdpOrders().size(), 0);
}

void Spend::Merge(const Spend& other) {
  // Entries below zero only come from corrupt storage: unknown, so saturated before anything is
  // added to them (a negative entry plus a positive one could otherwise pass as a small spend).
  for (std::vector<int64_t>* curve : {&rdp_all_nano, &rdp_nonpure_nano}) {
    for (int64_t& v : *curve) v = NonNegativeOrSaturated(v);
  }
  releases =
      SaturatingAdd(NonNegativeOrSaturated(releases), NonNegativeOrSaturated(other.releases));
  pure_micro =
      SaturatingAdd(NonNegativeOrSaturated(pure_micro), NonNegativeOrSaturated(other.pure_micro));
  // An empty curve of `other` is all zeros and adds nothing; AddCurve sizes ours and saturates the
  // orders `other` lacks or has negative.
  if (!other.rdp_all_nano.empty()) AddCurve(other.rdp_all_nano, rdp_all_nano);
  if (!other.rdp_nonpure_nano.empty()) AddCurve(other.rdp_nonpure_nano, rdp_nonpure_nano);
}

bool Spend::operator==(const Spend& other) const {
  return releases == other.releases && pure_micro == other.pure_micro &&
         SameCurve(rdp_all_nano, other.rdp_all_nano) &&
         SameCurve(rdp_nonpure_nano, other.rdp_nonpure_nano);
}

int64_t SpentEpsilonMicro(const Spend& spend, double delta) {
  // (a) RDP conversion of everything.
  const int64_t rdp_bound = CeilScaled(CurveToEpsilon(spend.rdp_all_nano, delta), kMicro);
  // (b) Basic composition of the pure sum with the RDP conversion of the rest. An all-zero non-pure
  // curve means those releases are 0-DP (Renyi divergence 0 forces equal distributions), so they
  // add exactly nothing and (b) is the exact pure sum.
  int64_t basic_bound = spend.pure_micro;
  if (!IsZeroCurve(spend.rdp_nonpure_nano)) {
    basic_bound = SaturatingAdd(basic_bound,
                                CeilScaled(CurveToEpsilon(spend.rdp_nonpure_nano, delta), kMicro));
  }
  return std::min(rdp_bound, basic_bound);
}

absl::StatusOr<double> CalibrateGaussianSigma(double epsilon, double delta, double sensitivity) {
  RETURN_IF_ERROR(ValidateIsFiniteAndPositive(epsilon, "epsilon"));
  RETURN_IF_ERROR(ValidateInOpenRange(delta, 0, 1, "delta"));
  RETURN_IF_ERROR(ValidateIsFiniteAndPositive(sensitivity, "sensitivity"));

  // As sigma grows the curve vanishes and the conversion tends to this floor, which the grid's
  // largest order sets; no sigma reaches an epsilon at or below it.
  const std::vector<double>& orders = RdpOrders();
  const double floor = RdpToEpsilon(orders, std::vector<double>(orders.size(), 0.0), delta);
  if (!(epsilon > floor)) {
    return absl::InvalidArgumentError(
        absl::StrCat("epsilon ", epsilon, " is not above ", floor,
                     ", the smallest epsilon any Gaussian noise reaches at delta ", delta,
                     " on the accountant's orders; raise epsilon or delta"));
  }

  // The converted epsilon is non-increasing in sigma (every step is monotone in floating point
  // too), so bisection on log(sigma) keeps the invariant eps(lo) > epsilon >= eps(hi). Brackets
  // terminate: tiny sigma overflows the curve to +inf, huge sigma underflows it to 0 (the floor,
  // below epsilon).
  double hi = sensitivity;
  while (GaussianEpsilon(sensitivity, hi, delta) > epsilon) hi *= 2;
  double lo = hi;
  while (!(GaussianEpsilon(sensitivity, lo, delta) > epsilon)) lo /= 2;
  while (hi - lo > 1e-9 * lo) {
    const double mid = std::sqrt(lo) * std::sqrt(hi);  // geometric mean without overflow
    if (!(mid > lo && mid < hi)) break;                // adjacent doubles
    if (GaussianEpsilon(sensitivity, mid, delta) > epsilon) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return hi;  // the safe end
}

PrivacyCost ComposedPureDpCost(absl::Span<const PureDpRepetition> releases) {
  const std::vector<double>& orders = RdpOrders();
  std::vector<double> curve(orders.size(), 0.0);
  double pure = 0;
  for (const PureDpRepetition& r : releases) {
    if (!std::isfinite(r.epsilon) || !(r.epsilon > 0) || r.count < 1) {
      return SaturatedCost(/*pure=*/true);
    }
    const std::vector<double> one = PureDpRdp(r.epsilon, orders);
    for (size_t i = 0; i < orders.size(); ++i) curve[i] += static_cast<double>(r.count) * one[i];
    pure += static_cast<double>(r.count) * r.epsilon;
  }
  PrivacyCost cost = CostFromCurve(curve);
  cost.pure_epsilon_micro = CeilScaled(pure, kMicro);
  return cost;
}

absl::StatusOr<double> CalibrateRepeatedPureDp(int64_t total_micro, double delta,
                                               absl::Span<const PureDpRepetition> fixed,
                                               int64_t count) {
  if (count < 1) return absl::InvalidArgumentError("count must be >= 1");
  if (total_micro < 1) return absl::InvalidArgumentError("total epsilon must be >= 1e-6");
  std::vector<PureDpRepetition> all(fixed.begin(), fixed.end());
  all.push_back({0, count});
  const auto spent = [&](double epsilon0) {
    all.back().epsilon = epsilon0;
    Spend spend;
    spend.Add(ComposedPureDpCost(all));
    return SpentEpsilonMicro(spend, delta);
  };
  // Spend is non-decreasing in epsilon0; bracket, then bisect on log(epsilon0).
  double lo = MicroToEpsilon(total_micro) / static_cast<double>(count);  // fits without fixed
  while (spent(lo) > total_micro) {
    lo /= 2;
    if (lo < 1e-300) {
      return absl::InvalidArgumentError(
          "the fixed releases alone exceed the total epsilon; raise epsilon or lower their share");
    }
  }
  double hi = lo;
  while (!(spent(hi) > total_micro)) hi *= 2;
  while (hi - lo > 1e-9 * lo) {
    const double mid = std::sqrt(lo) * std::sqrt(hi);
    if (!(mid > lo && mid < hi)) break;
    if (spent(mid) > total_micro) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  return lo;
}

}  // namespace fairvault::core::accounting
