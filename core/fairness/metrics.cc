// Per-group confusion counts and the equalized-odds / demographic-parity gaps computed from them.
#include "core/fairness/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/util/status_macros.h"

namespace fairvault::core::fairness {
namespace {

double Ratio(int64_t numerator, int64_t denominator) {
  return denominator == 0 ? 0.0 : static_cast<double>(numerator) / static_cast<double>(denominator);
}

// Largest |value(a) - value(b)| over pairs of groups for which `include` holds; 0 when fewer than
// two groups qualify. Equal to max - min over the qualifying groups.
template <typename Include, typename Value>
double MaxPairwiseGap(absl::Span<const GroupRates> rates, Include include, Value value) {
  double lo = std::numeric_limits<double>::infinity();
  double hi = -std::numeric_limits<double>::infinity();
  int qualifying = 0;
  for (const GroupRates& r : rates) {
    if (!include(r)) continue;
    ++qualifying;
    lo = std::min(lo, value(r));
    hi = std::max(hi, value(r));
  }
  return qualifying < 2 ? 0.0 : hi - lo;
}

}  // namespace

absl::StatusOr<std::vector<int64_t>> CountConfusion(absl::Span<const int> prediction,
                                                    absl::Span<const int> label,
                                                    absl::Span<const int> group, int num_groups) {
  if (num_groups < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_groups must be >= 1 (got ", num_groups, ")"));
  }
  if (label.size() != prediction.size() || group.size() != prediction.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("prediction, label and group must have the same length (got ",
                     prediction.size(), ", ", label.size(), ", ", group.size(), ")"));
  }
  std::vector<int64_t> n(4 * static_cast<size_t>(num_groups), 0);
  for (size_t i = 0; i < prediction.size(); ++i) {
    const int yhat = prediction[i], y = label[i], a = group[i];
    if (yhat != 0 && yhat != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("prediction at row ", i, " must be 0 or 1 (got ", yhat, ")"));
    }
    if (y != 0 && y != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("label at row ", i, " must be 0 or 1 (got ", y, ")"));
    }
    if (a < 0 || a >= num_groups) {
      return absl::InvalidArgumentError(
          absl::StrCat("group at row ", i, " must be in [0, ", num_groups, ") (got ", a, ")"));
    }
    ++n[(static_cast<size_t>(yhat) * num_groups + a) * 2 + y];
  }
  return n;
}

absl::StatusOr<std::vector<GroupRates>> ComputeGroupRates(absl::Span<const int> prediction,
                                                          absl::Span<const int> label,
                                                          absl::Span<const int> group,
                                                          int num_groups) {
  ASSIGN_OR_RETURN(const std::vector<int64_t> n,
                   CountConfusion(prediction, label, group, num_groups));
  auto count = [&](int yhat, int a, int y) {
    return n[(static_cast<size_t>(yhat) * num_groups + a) * 2 + y];
  };
  std::vector<GroupRates> rates(num_groups);
  for (int a = 0; a < num_groups; ++a) {
    GroupRates& r = rates[a];
    r.true_positive = count(1, a, 1);
    r.false_positive = count(1, a, 0);
    r.positives = count(0, a, 1) + r.true_positive;
    r.negatives = count(0, a, 0) + r.false_positive;
    r.predicted_positive = r.true_positive + r.false_positive;
    r.n = r.positives + r.negatives;
  }
  for (GroupRates& r : rates) {
    r.selection_rate = Ratio(r.predicted_positive, r.n);
    r.tpr = Ratio(r.true_positive, r.positives);
    r.fpr = Ratio(r.false_positive, r.negatives);
    // Errors are false positives plus false negatives (positives not predicted positive).
    r.error = Ratio(r.false_positive + (r.positives - r.true_positive), r.n);
  }
  return rates;
}

double ErrorRate(absl::Span<const int> prediction, absl::Span<const int> label) {
  // The header gives no status channel: mismatched lengths are a caller bug, reported as NaN so
  // that it cannot pass for a real error rate.
  if (prediction.size() != label.size()) return std::numeric_limits<double>::quiet_NaN();
  if (prediction.empty()) return 0.0;
  int64_t errors = 0;
  for (size_t i = 0; i < prediction.size(); ++i) errors += prediction[i] != label[i];
  return static_cast<double>(errors) / static_cast<double>(prediction.size());
}

double EqualizedOddsViolation(absl::Span<const GroupRates> rates) {
  const double tpr_gap = MaxPairwiseGap(
      rates, [](const GroupRates& r) { return r.positives > 0; },
      [](const GroupRates& r) { return r.tpr; });
  const double fpr_gap = MaxPairwiseGap(
      rates, [](const GroupRates& r) { return r.negatives > 0; },
      [](const GroupRates& r) { return r.fpr; });
  return std::max(tpr_gap, fpr_gap);
}

double DemographicParityViolation(absl::Span<const GroupRates> rates) {
  return MaxPairwiseGap(
      rates, [](const GroupRates& r) { return r.n > 0; },
      [](const GroupRates& r) { return r.selection_rate; });
}

}  // namespace fairvault::core::fairness
