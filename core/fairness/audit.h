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

// A point estimate with a two-sided confidence interval.
struct Interval {
  double estimate = 0;
  double lo = 0;
  double hi = 0;
};

// One fresh draw of the release's noise (e.g. IntegerNoise::AddNoise(0, gen)), used to
// simulate the DP error.
using NoiseDraw = std::function<int64_t(absl::BitGenRef)>;

struct AuditOptions {
  double confidence = 0.95;  // in (0, 1)
  int bootstrap_draws = 1000;  // in [100, 100000]
  absl::Status Validate() const;
};

struct ClassifierGroupAudit {
  Interval selection_rate;  // P(ŷ=1 | a)
  Interval tpr;             // P(ŷ=1 | y=1, a)
  Interval fpr;             // P(ŷ=1 | y=0, a)
  Interval error;           // P(ŷ≠y | a)
  double noisy_rows = 0;    // Σ of the group's clamped noisy cells
};

struct ClassifierAudit {
  std::vector<ClassifierGroupAudit> groups;
  Interval demographic_parity_violation;  // max pair |selection_a - selection_b|
  Interval equalized_odds_violation;      // max pair max(|ΔTPR|, |ΔFPR|)
};

// From noisy counts n[ŷ][a][y] flattened as ((ŷ*K)+a)*2+y (the EoCounts layout) released
// with `noise` on each cell.
absl::StatusOr<ClassifierAudit> AuditClassifier(absl::Span<const int64_t> noisy_counts,
                                                int num_groups, const NoiseDraw& noise,
                                                const AuditOptions& options, absl::BitGenRef gen);

struct RegressorGroupAudit {
  Interval mean;
  std::vector<double> histogram;  // repaired pmf over the k bins
  double noisy_rows = 0;
};

struct RegressorAudit {
  std::vector<RegressorGroupAudit> groups;
  Interval max_ks;  // max over pairs of groups of the KS distance between their histograms
};

// From noisy histogram counts[a*k + j] (noise `count_noise` per cell) and noisy per-group sums
// of (score - lo) in grid units of `sum_granularity` (noise `sum_noise` per group), over the
// bin grid [lo, hi] with k bins.
absl::StatusOr<RegressorAudit> AuditRegressor(absl::Span<const int64_t> noisy_counts,
                                              absl::Span<const int64_t> noisy_sum_steps,
                                              int num_groups, double lo, double hi, int k,
                                              double sum_granularity,
                                              const NoiseDraw& count_noise,
                                              const NoiseDraw& sum_noise,
                                              const AuditOptions& options, absl::BitGenRef gen);

}  // namespace fairvault::core::fairness

#endif  // FAIRVAULT_CORE_FAIRNESS_AUDIT_H_
