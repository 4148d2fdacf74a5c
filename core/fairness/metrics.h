// Fairness metrics for binary classifiers over K groups: per-group rates, equalized-odds and
// demographic-parity violations (max over pairs of groups).
#ifndef FAIRVAULT_CORE_FAIRNESS_METRICS_H_
#define FAIRVAULT_CORE_FAIRNESS_METRICS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace fairvault::core::fairness {

struct GroupRates {
  int64_t n = 0;          // rows in the group
  int64_t positives = 0;  // label 1
  int64_t negatives = 0;  // label 0
  int64_t predicted_positive = 0;
  int64_t true_positive = 0;
  int64_t false_positive = 0;
  double selection_rate = 0;  // P(ŷ=1 | a); 0 if n = 0
  double tpr = 0;             // P(ŷ=1 | y=1, a); 0 if no positives
  double fpr = 0;             // P(ŷ=1 | y=0, a); 0 if no negatives
  double error = 0;           // P(ŷ≠y | a); 0 if n = 0
};

// Counts n[ŷ][a][y] over K = num_groups groups, flattened as ((ŷ * K) + a) * 2 + y (size 4K).
// prediction and label must be 0/1, group in [0, num_groups), all of the same length;
// InvalidArgument otherwise (naming the first bad row).
absl::StatusOr<std::vector<int64_t>> CountConfusion(absl::Span<const int> prediction,
                                                    absl::Span<const int> label,
                                                    absl::Span<const int> group, int num_groups);

// Per-group rates, from CountConfusion's counts. prediction and label must be 0/1, group in [0, num_groups), all of the same
// length; InvalidArgument otherwise (naming the first bad row).
absl::StatusOr<std::vector<GroupRates>> ComputeGroupRates(absl::Span<const int> prediction,
                                                          absl::Span<const int> label,
                                                          absl::Span<const int> group,
                                                          int num_groups);

// Overall error rate of predictions against labels (0 for empty input).
double ErrorRate(absl::Span<const int> prediction, absl::Span<const int> label);

// max over pairs of groups with rows of max(|TPR_a - TPR_b|, |FPR_a - FPR_b|). Groups with no
// positives (negatives) are skipped for the TPR (FPR) comparison.
double EqualizedOddsViolation(absl::Span<const GroupRates> rates);
// max over pairs of non-empty groups of |selection_a - selection_b|.
double DemographicParityViolation(absl::Span<const GroupRates> rates);

}  // namespace fairvault::core::fairness

#endif  // FAIRVAULT_CORE_FAIRNESS_METRICS_H_
