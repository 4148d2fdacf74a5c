// Private fairness audits: point estimates from one noisy release and parametric-bootstrap
// confidence intervals that simulate both the sampling of the data and the DP noise. Everything
// here post-processes an already released table, so it costs no privacy.
// Over 500 lines as one file: the classifier's and the regressor's reports share the one bootstrap
// that simulates sampling and noise together.
#include "core/fairness/audit.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/random/distributions.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/fairness/count_interval.h"
#include "core/fairness/histogram_repair.h"
#include "core/fairness/metrics.h"
#include "core/random/chacha20_stream.h"
#include "core/util/status_macros.h"
#include "core/util/validate.h"

namespace fairvault::core::fairness {
namespace {

// Released counts and sums must be exactly representable as doubles (and their sums must not
// overflow int64); real releases are many orders of magnitude smaller.
constexpr int64_t kMaxAbsRelease = int64_t{1} << 52;
constexpr int kMinDraws = 100;
constexpr int kMaxDraws = 100000;
// A group is small when its noisy size is below this many noise standard deviations.
constexpr double kSmallGroupNoiseSds = 10;

absl::Status ValidateRelease(absl::Span<const int64_t> values, absl::string_view field) {
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i] > kMaxAbsRelease || values[i] < -kMaxAbsRelease) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, "[", i, "] must be within ±2^52 (got ", values[i], ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateNoiseDraw(const NoiseDraw& noise, absl::string_view field) {
  if (!noise) {
    return absl::InvalidArgumentError(absl::StrCat(
        field,
        " must be set: pass the release's noise (a function returning 0 if none was added)"));
  }
  return absl::OkStatus();
}

// Exact multinomial draws over cells with probabilities weights[i] / Σ weights (weights >= 0),
// by successive conditional binomials: x_i ~ Bin(total − Σ_{l<i} x_l, w_i / Σ_{l>=i} w_l), the
// last cell with weight taking the rest. The conditional probabilities are computed once from
// suffix sums (no accumulated rounding), so a draw costs one binomial per cell.
class MultinomialSampler {
 public:
  explicit MultinomialSampler(absl::Span<const double> weights)
      : conditional_(weights.size(), 0.0), last_(weights.size()) {
    double suffix = 0;
    for (size_t i = weights.size(); i-- > 0;) {
      if (!(weights[i] > 0)) continue;
      if (last_ == weights.size()) last_ = i;
      suffix += weights[i];
      conditional_[i] = std::min(weights[i] / suffix, 1.0);
    }
  }

  // Fills `out` (one entry per weight) with a draw of `total` items.
  void Sample(int64_t total, absl::Span<int64_t> out, absl::BitGenRef gen) const {
    std::fill(out.begin(), out.end(), 0);
    if (last_ == conditional_.size() || total <= 0) return;
    int64_t remaining = total;
    for (size_t i = 0; i < last_ && remaining > 0; ++i) {
      if (conditional_[i] == 0) continue;
      out[i] = std::binomial_distribution<int64_t>(remaining, conditional_[i])(gen);
      remaining -= out[i];
    }
    out[last_] += remaining;
  }

 private:
  std::vector<double> conditional_;
  size_t last_;  // the last cell with positive weight; size() if none
};

// The q-quantile of `values` (linear interpolation between order statistics, "type 7"), in
// expected O(n) by selection; reorders `values`.
double Quantile(std::vector<double>* values_ptr, double q) {
  std::vector<double>& values = *values_ptr;
  const double h = q * static_cast<double>(values.size() - 1);
  const size_t i = static_cast<size_t>(std::floor(h));
  std::nth_element(values.begin(), values.begin() + i, values.end());
  const double below = values[i];
  if (i + 1 >= values.size()) return below;
  const double above = *std::min_element(values.begin() + i + 1, values.end());
  return below + (h - static_cast<double>(i)) * (above - below);
}

// Basic (pivot) bootstrap interval [2θ̂ − q_{1−α/2}, 2θ̂ − q_{α/2}], clipped to [lo, hi].
Interval BasicInterval(double estimate, std::vector<double>* draws, double confidence, double lo,
                       double hi) {
  const double alpha = 1 - confidence;
  const double q_low = Quantile(draws, alpha / 2);
  const double q_high = Quantile(draws, 1 - alpha / 2);
  Interval interval;
  interval.estimate = estimate;
  interval.lo = std::clamp(2 * estimate - q_high, lo, hi);
  interval.hi = std::clamp(2 * estimate - q_low, lo, hi);
  return interval;
}

// A simultaneous ("max-t") bootstrap band over a family of statistics θ_p: θ̂_p ± c·s_p, with
// s_p the bootstrap standard deviation of θ*_p and c the `confidence` quantile over draws of
// max_p |θ*_p − θ̂_p| / s_p. All θ_p lie in their bands at once with the stated confidence
// (asymptotically), so a function of the family, such as a max over pairs of groups, lies
// between its smallest and largest value over the bands. Statistics with s_p = 0 do not vary
// under the bootstrap and get a zero-width band. Two passes over the same draws: Moments() for
// every draw, then Deviation() for every draw in the same order.
class SimultaneousBand {
 public:
  explicit SimultaneousBand(std::vector<double> estimates)
      : estimates_(std::move(estimates)),
        mean_(estimates_.size(), 0.0),
        m2_(estimates_.size(), 0.0) {}

  // Pass 1: accumulates the draw's mean and variance (Welford).
  void Moments(absl::Span<const double> draw) {
    ++draws_;
    for (size_t p = 0; p < draw.size(); ++p) {
      const double delta = draw[p] - mean_[p];
      mean_[p] += delta / static_cast<double>(draws_);
      m2_[p] += delta * (draw[p] - mean_[p]);
    }
  }
  // Pass 2: the draw's largest standardised deviation from the estimates.
  void Deviation(absl::Span<const double> draw) {
    if (sd_.empty()) {
      sd_.resize(m2_.size());
      for (size_t p = 0; p < m2_.size(); ++p) {
        sd_[p] = draws_ > 1 ? std::sqrt(m2_[p] / static_cast<double>(draws_ - 1)) : 0.0;
      }
    }
    double t = 0;
    for (size_t p = 0; p < draw.size(); ++p) {
      if (sd_[p] > 0) t = std::max(t, std::abs(draw[p] - estimates_[p]) / sd_[p]);
    }
    max_deviation_.push_back(t);
  }
  // After both passes: the critical value c.
  void Finish(double confidence) {
    critical_ = max_deviation_.empty() ? 0.0 : Quantile(&max_deviation_, confidence);
  }
  double estimate(size_t p) const { return estimates_[p]; }
  double lo(size_t p, double floor) const {
    return std::max(floor, estimates_[p] - critical_ * sd_[p]);
  }
  double hi(size_t p, double ceiling) const {
    return std::min(ceiling, estimates_[p] + critical_ * sd_[p]);
  }

 private:
  std::vector<double> estimates_, mean_, m2_, sd_, max_deviation_;
  int64_t draws_ = 0;
  double critical_ = 0;
};

// The interval of max_{a,b} |θ_a − θ_b| = max_a θ_a − min_a θ_a over statistics
// `members` of a band whose values lie in [0, 1]: the range's smallest and largest value over
// the band. It contains the estimate, and is [0, 0] only when no member varies in the
// bootstrap.
Interval RangeInterval(const SimultaneousBand& band, absl::Span<const size_t> members) {
  double max_est = 0, min_est = 1, max_lo = 0, min_hi = 1, max_hi = 0, min_lo = 1;
  for (size_t p : members) {
    max_est = std::max(max_est, band.estimate(p));
    min_est = std::min(min_est, band.estimate(p));
    max_lo = std::max(max_lo, band.lo(p, 0));
    min_hi = std::min(min_hi, band.hi(p, 1));
    max_hi = std::max(max_hi, band.hi(p, 1));
    min_lo = std::min(min_lo, band.lo(p, 0));
  }
  Interval interval;
  if (members.size() < 2) return interval;
  interval.estimate = max_est - min_est;
  interval.lo = std::clamp(max_lo - min_hi, 0.0, interval.estimate);
  interval.hi = std::clamp(max_hi - min_lo, interval.estimate, 1.0);
  return interval;
}

// The interval of max(X, Y) given intervals of X and Y that hold simultaneously.
Interval MaxOf(const Interval& x, const Interval& y) {
  return Interval{std::max(x.estimate, y.estimate), std::max(x.lo, y.lo), std::max(x.hi, y.hi)};
}

// ---- Classifier -------------------------------------------------------------------------------

// Cells of one group, clamped at 0: cell[yhat * 2 + y].
using GroupCells = std::array<int64_t, 4>;

GroupCells ClampedCells(absl::Span<const int64_t> counts, int num_groups, int a) {
  GroupCells cells;
  for (int yhat = 0; yhat < 2; ++yhat) {
    for (int y = 0; y < 2; ++y) {
      cells[yhat * 2 + y] = std::max<int64_t>(counts[(yhat * num_groups + a) * 2 + y], 0);
    }
  }
  return cells;
}

// metrics.h's GroupRates from clamped noisy cells, with every denominator floored at 1: a group
// whose (noisy) denominator is 0 gets rate 0, as in metrics.h, but still takes part in the
// pairwise gaps, since after noise "no rows" cannot be told from "a few rows".
GroupRates RatesFromCells(const GroupCells& c) {
  GroupRates r;
  r.true_positive = c[3];
  r.false_positive = c[2];
  r.predicted_positive = c[2] + c[3];
  r.positives = std::max<int64_t>(c[1] + c[3], 1);
  r.negatives = std::max<int64_t>(c[0] + c[2], 1);
  r.n = std::max<int64_t>(c[0] + c[1] + c[2] + c[3], 1);
  const double n = static_cast<double>(r.n);
  r.selection_rate = static_cast<double>(r.predicted_positive) / n;
  r.tpr = static_cast<double>(r.true_positive) / static_cast<double>(r.positives);
  r.fpr = static_cast<double>(r.false_positive) / static_cast<double>(r.negatives);
  r.error = static_cast<double>(c[2] + c[1]) / n;  // false positives + false negatives
  return r;
}

// Statistic s of the classifier audit: 4 per group (selection, TPR, FPR, error), then the
// demographic-parity and equalized-odds violations.
void ClassifierStatistics(absl::Span<const GroupRates> rates, std::vector<double>* out_ptr) {
  std::vector<double>& out = *out_ptr;
  out.clear();
  for (const GroupRates& r : rates) {
    out.push_back(r.selection_rate);
    out.push_back(r.tpr);
    out.push_back(r.fpr);
    out.push_back(r.error);
  }
  out.push_back(DemographicParityViolation(rates));
  out.push_back(EqualizedOddsViolation(rates));
}

// ---- Regressor --------------------------------------------------------------------------------

// The repaired pmf of one group from its raw noisy bin counts (any sign), with the group weight
// floored at one row (ALGORITHMS.md §2 steps 3-4 on counts instead of fractions of n).
std::vector<double> GroupPmf(absl::Span<const double> raw) {
  double total = 0;
  for (double x : raw) total += x;
  return RepairCdfToPmf(raw, std::max(total, 1.0));
}

// max over pairs of groups of max_t |CDF_a(t) − CDF_b(t)| = max_t (max_a CDF_a(t) − min_a
// CDF_a(t)).
double MaxPairwiseKs(const std::vector<std::vector<double>>& pmfs, int k) {
  if (pmfs.size() < 2) return 0;
  std::vector<double> cdf(pmfs.size(), 0.0);
  double ks = 0;
  for (int j = 0; j < k; ++j) {
    double lo = 1, hi = 0;
    for (size_t a = 0; a < pmfs.size(); ++a) {
      cdf[a] += pmfs[a][j];
      lo = std::min(lo, cdf[a]);
      hi = std::max(hi, cdf[a]);
    }
    ks = std::max(ks, hi - lo);
  }
  return std::clamp(ks, 0.0, 1.0);
}

double GroupMean(double sum_steps, double rows, double lo, double hi, double granularity) {
  return std::clamp(lo + sum_steps * granularity / std::max(rows, 1.0), lo, hi);
}

}  // namespace

absl::Status AuditOptions::Validate() const {
  RETURN_IF_ERROR(ValidateInOpenRange(confidence, 0, 1, "confidence"));
  if (bootstrap_draws < kMinDraws || bootstrap_draws > kMaxDraws) {
    return absl::InvalidArgumentError(absl::StrCat("bootstrap_draws must be in [", kMinDraws, ", ",
                                                   kMaxDraws, "] (got ", bootstrap_draws, ")"));
  }
  return absl::OkStatus();
}

double SmallGroupThreshold(double laplace_scale, int64_t cells) {
  if (!(laplace_scale > 0) || cells < 1) return 0;
  // Variance of one discrete Laplace draw of scale t: 2q / (1 − q)² with q = e^{−1/t}.
  const double q = std::exp(-1 / laplace_scale);
  const double one_minus_q = -std::expm1(-1 / laplace_scale);
  const double variance = 2 * q / (one_minus_q * one_minus_q);
  return kSmallGroupNoiseSds * std::sqrt(static_cast<double>(cells) * variance);
}

absl::StatusOr<ClassifierAudit> AuditClassifier(absl::Span<const int64_t> noisy_counts,
                                                int num_groups, double laplace_scale,
                                                const NoiseDraw& noise,
                                                const AuditOptions& options, absl::BitGenRef gen) {
  RETURN_IF_ERROR(options.Validate());
  RETURN_IF_ERROR(ValidateIsFiniteAndNonNegative(laplace_scale, "laplace_scale"));
  if (num_groups < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_groups must be >= 1 (got ", num_groups, ")"));
  }
  if (noisy_counts.size() != 4 * static_cast<size_t>(num_groups)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "noisy_counts must have 4 * num_groups = ", 4 * static_cast<size_t>(num_groups),
        " entries, n[ŷ][a][y] at ((ŷ*K)+a)*2+y (got ", noisy_counts.size(), ")"));
  }
  RETURN_IF_ERROR(ValidateRelease(noisy_counts, "noisy_counts"));
  RETURN_IF_ERROR(ValidateNoiseDraw(noise, "noise"));

  std::vector<int64_t> totals(num_groups);
  std::vector<MultinomialSampler> population;
  std::vector<GroupRates> rates(num_groups);
  for (int a = 0; a < num_groups; ++a) {
    const GroupCells cells = ClampedCells(noisy_counts, num_groups, a);
    totals[a] = cells[0] + cells[1] + cells[2] + cells[3];
    std::array<double, 4> weights;
    for (int c = 0; c < 4; ++c) weights[c] = static_cast<double>(cells[c]);
    population.emplace_back(weights);
    rates[a] = RatesFromCells(cells);
  }
  std::vector<double> estimate;
  ClassifierStatistics(rates, &estimate);

  // Parametric bootstrap: the clamped noisy cells stand in for the population; each draw
  // resamples every group's table (multinomial with the group's total and cell proportions),
  // adds fresh release noise to each cell and recomputes every statistic. O(B · 4K) time and
  // memory.
  const int draws = options.bootstrap_draws;
  std::vector<std::vector<double>> samples(estimate.size(), std::vector<double>(draws));
  std::vector<GroupRates> sample_rates(num_groups);
  std::vector<double> statistics;
  for (int b = 0; b < draws; ++b) {
    for (int a = 0; a < num_groups; ++a) {
      GroupCells resampled;
      population[a].Sample(totals[a], absl::MakeSpan(resampled), gen);
      for (int64_t& x : resampled) x = std::max<int64_t>(x + noise(gen), 0);
      sample_rates[a] = RatesFromCells(resampled);
    }
    ClassifierStatistics(sample_rates, &statistics);
    for (size_t s = 0; s < statistics.size(); ++s) samples[s][b] = statistics[s];
  }
  // The violations: simultaneous bands over the selection rates, and over the TPRs and FPRs
  // together (both enter the equalized-odds violation), before BasicInterval reorders samples.
  std::vector<size_t> selection, tpr, fpr, rates_of_eo;
  for (int a = 0; a < num_groups; ++a) {
    selection.push_back(4 * a);
    tpr.push_back(4 * a + 1);
    fpr.push_back(4 * a + 2);
  }
  rates_of_eo = tpr;
  rates_of_eo.insert(rates_of_eo.end(), fpr.begin(), fpr.end());
  auto band_over = [&](const std::vector<size_t>& members) {
    std::vector<double> estimates(estimate.size(), 0.0);
    for (size_t p : members) estimates[p] = estimate[p];
    SimultaneousBand band(std::move(estimates));
    std::vector<double> draw(estimate.size(), 0.0);
    for (int pass = 0; pass < 2; ++pass) {
      for (int b = 0; b < draws; ++b) {
        for (size_t p : members) draw[p] = samples[p][b];
        if (pass == 0) {
          band.Moments(draw);
        } else {
          band.Deviation(draw);
        }
      }
    }
    band.Finish(options.confidence);
    return band;
  };
  const Interval dp_violation = RangeInterval(band_over(selection), selection);
  const SimultaneousBand eo_band = band_over(rates_of_eo);
  const Interval tpr_difference = RangeInterval(eo_band, tpr);
  const Interval fpr_difference = RangeInterval(eo_band, fpr);
  const Interval eo_violation = MaxOf(tpr_difference, fpr_difference);

  // Per-group rates: exact noise-aware intervals from the raw released cells (count_interval.h).
  // The noise and the sampling are independent, so levels sqrt(c) each give coverage >= c.
  const bool noisy = laplace_scale > 0;
  const double noise_level = noisy ? std::sqrt(options.confidence) : 1;
  const double sampling_alpha = noisy ? 1 - noise_level : 1 - options.confidence;
  const int64_t radius_one = NoisePairRadius({laplace_scale, 1}, noise_level);
  const int64_t radius_two = NoisePairRadius({laplace_scale, 2}, noise_level);
  const double small_below = SmallGroupThreshold(laplace_scale, 4);
  auto interval_of = [&](double estimate, int64_t x, int64_t y, int64_t radius) {
    const RateBounds bounds = RateInterval(x, y, radius, sampling_alpha);
    return Interval{estimate, std::min(bounds.lo, estimate), std::max(bounds.hi, estimate)};
  };
  ClassifierAudit audit;
  audit.groups.resize(num_groups);
  for (int a = 0; a < num_groups; ++a) {
    // Raw cells (any sign): n00 n01 n10 n11 as cell[yhat * 2 + y].
    std::array<int64_t, 4> raw;
    for (int yhat = 0; yhat < 2; ++yhat) {
      for (int y = 0; y < 2; ++y) raw[yhat * 2 + y] = noisy_counts[(yhat * num_groups + a) * 2 + y];
    }
    ClassifierGroupAudit& g = audit.groups[a];
    g.selection_rate =
        interval_of(estimate[4 * a], raw[2] + raw[3], raw[0] + raw[1], radius_two);
    g.tpr = interval_of(estimate[4 * a + 1], raw[3], raw[1], radius_one);
    g.fpr = interval_of(estimate[4 * a + 2], raw[2], raw[0], radius_one);
    g.error = interval_of(estimate[4 * a + 3], raw[2] + raw[1], raw[0] + raw[3], radius_two);
    g.noisy_rows = static_cast<double>(raw[0] + raw[1] + raw[2] + raw[3]);
    g.small_group = g.noisy_rows < small_below;
  }
  audit.demographic_parity_violation = dp_violation;
  audit.equalized_odds_violation = eo_violation;
  audit.tpr_difference = tpr_difference;
  audit.fpr_difference = fpr_difference;
  return audit;
}

absl::StatusOr<RegressorAudit> AuditRegressor(absl::Span<const int64_t> noisy_counts,
                                              absl::Span<const int64_t> noisy_sum_steps,
                                              int num_groups, double lo, double hi, int k,
                                              double sum_granularity, const NoiseDraw& count_noise,
                                              const NoiseDraw& sum_noise,
                                              const AuditOptions& options, absl::BitGenRef gen) {
  RETURN_IF_ERROR(options.Validate());
  if (num_groups < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_groups must be >= 1 (got ", num_groups, ")"));
  }
  if (k < 1) return absl::InvalidArgumentError(absl::StrCat("k must be >= 1 (got ", k, ")"));
  if (!std::isfinite(hi - lo) || !(lo < hi)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "lo and hi must be finite with lo < hi and hi - lo finite (got [", lo, ", ", hi, "])"));
  }
  RETURN_IF_ERROR(ValidateIsFiniteAndPositive(sum_granularity, "sum_granularity"));
  const size_t cells = static_cast<size_t>(num_groups) * static_cast<size_t>(k);
  if (noisy_counts.size() != cells) {
    return absl::InvalidArgumentError(
        absl::StrCat("noisy_counts must have num_groups * k = ", cells,
                     " entries, counts[a*k + j] (got ", noisy_counts.size(), ")"));
  }
  if (noisy_sum_steps.size() != static_cast<size_t>(num_groups)) {
    return absl::InvalidArgumentError(
        absl::StrCat("noisy_sum_steps must have num_groups = ", num_groups, " entries (got ",
                     noisy_sum_steps.size(), ")"));
  }
  RETURN_IF_ERROR(ValidateRelease(noisy_counts, "noisy_counts"));
  RETURN_IF_ERROR(ValidateRelease(noisy_sum_steps, "noisy_sum_steps"));
  RETURN_IF_ERROR(ValidateNoiseDraw(count_noise, "count_noise"));
  RETURN_IF_ERROR(ValidateNoiseDraw(sum_noise, "sum_noise"));

  const double width = (hi - lo) / k;
  RegressorAudit audit;
  audit.groups.resize(num_groups);
  std::vector<int64_t> rows(num_groups, 0);
  std::vector<std::vector<double>> pmfs(num_groups);
  // Per group, the bootstrap model of the exact sum in grid steps: mean and standard deviation
  // of N_a scores drawn from the estimated distribution.
  std::vector<double> sum_mean(num_groups), sum_sd(num_groups);
  std::vector<double> raw(k);
  for (int a = 0; a < num_groups; ++a) {
    // N_a sums the raw noisy cells: the noise has mean 0, so the sum is unbiased. Clamping each
    // cell first would add E[max(noise, 0)] per empty bin, and with many bins bias the mean.
    for (int j = 0; j < k; ++j) {
      raw[j] = static_cast<double>(noisy_counts[a * k + j]);
      rows[a] += noisy_counts[a * k + j];
    }
    rows[a] = std::max<int64_t>(rows[a], 0);
    RegressorGroupAudit& g = audit.groups[a];
    g.noisy_rows = static_cast<double>(rows[a]);
    g.histogram = pmfs[a] = GroupPmf(raw);
    g.mean.estimate =
        GroupMean(static_cast<double>(noisy_sum_steps[a]), g.noisy_rows, lo, hi, sum_granularity);
    // Score variance from the repaired histogram at the bin centres, plus w²/12 for the spread
    // inside a bin (exact for scores uniform within bins; the centres alone understate it).
    // Computed in bins from lo, then scaled by w: in the scores' own units a range far from 0
    // (lo = 1e200) squares the centres past the largest double, and m2 - m1² cancels.
    double m1 = 0, m2 = 0;
    for (int j = 0; j < k; ++j) {
      const double centre = j + 0.5;
      m1 += pmfs[a][j] * centre;
      m2 += pmfs[a][j] * centre * centre;
    }
    const double sd_in_bins = std::sqrt(std::max(m2 - m1 * m1, 0.0) + 1.0 / 12);
    sum_mean[a] = g.noisy_rows * (g.mean.estimate - lo) / sum_granularity;
    sum_sd[a] = std::sqrt(g.noisy_rows) * sd_in_bins * (width / sum_granularity);
  }
  const double ks_estimate = MaxPairwiseKs(pmfs, k);
  std::vector<MultinomialSampler> population;
  for (int a = 0; a < num_groups; ++a) population.emplace_back(pmfs[a]);

  // Parametric bootstrap as for the classifier, with the repaired pmfs and the totals N_a
  // as the population (so the bootstrap world's KS and means are exactly the estimates); the sum is
  // redrawn as a normal with the variance of N_a scores (by the CLT; a multinomial over the bins
  // fixes N_a, and the mean uses only the group's total, so drawing the sum independently of the
  // histogram loses nothing), rounded to the grid, plus fresh sum noise. O(B · K · k) time, O(B ·
  // K) memory.
  //
  // The KS interval comes from a simultaneous band over every group's CDF at every inner bin
  // edge, which takes two passes over the same draws: the draws come from a ChaCha20 stream
  // keyed once from `gen` and replayed for the second pass. O(B · K · k) time per pass, O(K · k + B
  // · K) memory.
  const int draws = options.bootstrap_draws;
  const size_t edges = static_cast<size_t>(k - 1);  // the CDF at the last edge is always 1
  auto cdfs_of = [&](std::vector<double>* out) {
    out->assign(static_cast<size_t>(num_groups) * edges, 0.0);
    for (int a = 0; a < num_groups; ++a) {
      double cdf = 0;
      for (size_t t = 0; t < edges; ++t) (*out)[a * edges + t] = cdf += pmfs[a][t];
    }
  };
  std::vector<double> cdf;
  cdfs_of(&cdf);
  SimultaneousBand ks_band(cdf);
  std::vector<std::vector<double>> mean_samples(num_groups, std::vector<double>(draws));
  std::vector<int64_t> resampled(k);
  constexpr double kMaxSteps = 4611686018427387904.0;  // 2^62, far past any release (2^52)
  const ChaCha20Stream::Key key = ChaCha20Stream::NewKey(gen);
  for (int pass = 0; pass < 2; ++pass) {
    ChaCha20Stream sim(key);  // the same secure stream in both passes
    for (int b = 0; b < draws; ++b) {
      for (int a = 0; a < num_groups; ++a) {
        population[a].Sample(rows[a], absl::MakeSpan(resampled), sim);
        double sample_rows = 0;
        for (int j = 0; j < k; ++j) {
          raw[j] = static_cast<double>(resampled[j] + count_noise(sim));
          sample_rows += raw[j];  // GroupMean floors it at one row
        }
        pmfs[a] = GroupPmf(raw);
        const double exact_sum = std::clamp(sum_mean[a] + sum_sd[a] * absl::Gaussian<double>(sim),
                                            -kMaxSteps, kMaxSteps);
        // In doubles: a release's noise can be as large as an int64 holds.
        const double noisy_sum =
            std::round(exact_sum) + static_cast<double>(sum_noise(sim));
        if (pass == 0) {
          mean_samples[a][b] = GroupMean(noisy_sum, sample_rows, lo, hi, sum_granularity);
        }
      }
      cdfs_of(&cdf);
      if (pass == 0) {
        ks_band.Moments(cdf);
      } else {
        ks_band.Deviation(cdf);
      }
    }
  }
  ks_band.Finish(options.confidence);
  for (int a = 0; a < num_groups; ++a) {
    Interval& mean = audit.groups[a].mean;
    mean = BasicInterval(mean.estimate, &mean_samples[a], options.confidence, lo, hi);
    // The pivot interval collapses to a point when every draw is clamped at one end of the
    // range (a group whose noisy size is near 0): the release then says nothing about the mean.
    if (!(mean.hi > mean.lo)) {
      mean.lo = lo;
      mean.hi = hi;
    }
  }
  // KS = max over edges t of the range over groups of CDF_a(t).
  audit.max_ks = Interval{ks_estimate, 0, 0};
  if (num_groups >= 2) {
    std::vector<size_t> at_edge(num_groups);
    for (size_t t = 0; t < edges; ++t) {
      for (int a = 0; a < num_groups; ++a) at_edge[a] = a * edges + t;
      audit.max_ks = MaxOf(audit.max_ks, RangeInterval(ks_band, at_edge));
    }
  }
  audit.max_ks.estimate = ks_estimate;
  audit.max_ks.lo = std::min(audit.max_ks.lo, ks_estimate);
  audit.max_ks.hi = std::max(audit.max_ks.hi, ks_estimate);
  return audit;
}

}  // namespace fairvault::core::fairness
