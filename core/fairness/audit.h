// Private fairness audits computed from one noisy release: per-group classifier rates or
// regressor means/histograms, the fairness violations, and confidence intervals that account
// for both the DP noise and sampling error (parametric bootstrap over both; post-processing,
// so free of privacy cost).
#ifndef FAIRVAULT_CORE_FAIRNESS_AUDIT_H_
#define FAIRVAULT_CORE_FAIRNESS_AUDIT_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/random/bit_gen_ref.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace fairvault::core::fairness {

// A point estimate with a two-sided confidence interval, clipped to the statistic's range.
// Per-group classifier rates get an exact noise-aware interval (count_interval.h): the union of
// Clopper–Pearson intervals over every true count pair the released pair is consistent with at
// the public noise scale; it covers both the group's rate on the audited rows and its
// population rate with at least the nominal probability, at every group size. Regressor means
// get the basic (pivot) bootstrap interval [2θ̂ − q_{1−α/2}, 2θ̂ − q_{α/2}], or the whole
// range [lo, hi] where that would collapse to a point (every draw clamped at one end). The max-over-pairs statistics (the
// violations and KS) are not smooth where groups tie, and the noise biases them upward, so a
// pivot interval for them can miss badly (e.g. [0, 0] at an estimate of 0). They get the range
// of the statistic over a simultaneous (max-t) bootstrap band on the per-group quantities they
// are made of (rates, or CDFs at each bin edge): conservative, and it always contains the
// estimate.
struct Interval {
  double estimate = 0;
  double lo = 0;
  double hi = 0;
};

// One fresh draw of the release's noise (e.g. IntegerNoise::AddNoise(0, gen)), used to
// simulate the DP error.
using NoiseDraw = std::function<int64_t(absl::BitGenRef)>;

struct AuditOptions {
  double confidence = 0.95;    // in (0, 1)
  int bootstrap_draws = 1000;  // in [100, 100000]
  absl::Status Validate() const;
};

struct ClassifierGroupAudit {
  Interval selection_rate;  // P(ŷ=1 | a)
  Interval tpr;             // P(ŷ=1 | y=1, a)
  Interval fpr;             // P(ŷ=1 | y=0, a)
  Interval error;           // P(ŷ≠y | a)
  double noisy_rows = 0;    // Σ of the group's four raw noisy cells (unbiased; may be < 0)
  bool small_group = false;  // noisy_rows < SmallGroupThreshold(scale, 4)
};

struct ClassifierAudit {
  std::vector<ClassifierGroupAudit> groups;
  Interval demographic_parity_violation;  // max pair |selection_a - selection_b|
  Interval equalized_odds_violation;      // max pair max(|ΔTPR|, |ΔFPR|)
  // Its two parts, max pair |ΔTPR| and max pair |ΔFPR|, from the same simultaneous band (so
  // equalized_odds_violation is their MaxOf, interval and all).
  Interval tpr_difference;
  Interval fpr_difference;
};

// The public size below which a group is flagged small: 10 standard deviations of the noise
// on its noisy size, the sum of `cells` discrete Laplace draws of scale `laplace_scale` (0: no
// noise, threshold 0). Below it the noise is a sizable share of the group's counts, so its
// intervals are wide. Depends on the noise scale only (ε and sensitivity), never on the data.
double SmallGroupThreshold(double laplace_scale, int64_t cells);

// From noisy counts n[ŷ][a][y] flattened as ((ŷ*K)+a)*2+y (the EoCounts layout) released
// with discrete Laplace noise of scale `laplace_scale` on each cell (0 if none), whose draws
// `noise` returns. Estimates: cells are clamped at 0 and every rate's denominator is floored at
// 1, so a group with an empty (noisy) denominator gets rate 0 and still takes part in the
// violations (unlike metrics.h, which skips it). Per-group intervals: RateInterval at noise
// level sqrt(confidence) and sampling level sqrt(confidence) (all of it to sampling without
// noise), hulled with the estimate. InvalidArgument for bad options, sizes, counts beyond ±2^52,
// a negative or non-finite scale or an empty `noise`. Thread-safe if `gen` and `noise` are.
absl::StatusOr<ClassifierAudit> AuditClassifier(absl::Span<const int64_t> noisy_counts,
                                                int num_groups, double laplace_scale,
                                                const NoiseDraw& noise,
                                                const AuditOptions& options, absl::BitGenRef gen);

struct RegressorGroupAudit {
  Interval mean;
  std::vector<double> histogram;  // repaired pmf over the k bins
  double noisy_rows = 0;          // Σ of the group's raw noisy bins (unbiased), floored at 0
};

struct RegressorAudit {
  std::vector<RegressorGroupAudit> groups;
  Interval max_ks;  // max over pairs of groups of the KS distance between their histograms
};

// From noisy histogram counts[a*k + j] (noise `count_noise` per cell) and noisy per-group sums
// of (score - lo) in grid units of `sum_granularity` (noise `sum_noise` per group), over the
// bin grid [lo, hi] with k bins. Histogram: RepairCdfToPmf (histogram_repair.h) of the raw
// noisy counts with weight max(Σ_j counts, 1). Mean: lo + sum · granularity / max(N_a, 1) with
// N_a the group's clamped count total, clamped to [lo, hi]. InvalidArgument for bad options,
// sizes, grid, granularity, values beyond ±2^52 or an empty noise function. Thread-safe if `gen`
// and the noise functions are.
absl::StatusOr<RegressorAudit> AuditRegressor(absl::Span<const int64_t> noisy_counts,
                                              absl::Span<const int64_t> noisy_sum_steps,
                                              int num_groups, double lo, double hi, int k,
                                              double sum_granularity, const NoiseDraw& count_noise,
                                              const NoiseDraw& sum_noise,
                                              const AuditOptions& options, absl::BitGenRef gen);

}  // namespace fairvault::core::fairness

#endif  // FAIRVAULT_CORE_FAIRNESS_AUDIT_H_
