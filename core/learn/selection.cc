#include "core/learn/selection.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/learn/exponential_mechanism.h"
#include "core/util/status_macros.h"
#include "core/util/validate.h"

namespace fairvault::core::learn {
namespace {

// The floor M sits this many noise scales below the smallest released count: a Laplace draw
// exceeds it with probability 1/40 per cell. M only trades accuracy (a floor above a true count
// shrinks that cell's rate); the privacy of the selection holds for any M >= 1.
const double kFloorScales = std::log(20.0);

// The largest spread across groups of the rates pos_c / max(n_c, floor): equalized odds over
// each label's cells, demographic parity over the groups' rows.
double Gap(ReductionConstraint constraint, int k, const std::vector<double>& positives,
           const std::vector<double>& rows, double floor) {
  double gap = 0;
  if (constraint == ReductionConstraint::kEqualizedOdds) {
    for (int y = 0; y < 2; ++y) {
      double lo = 1, hi = 0;
      for (int a = 0; a < k; ++a) {
        const int c = 2 * a + y;
        const double rate = std::clamp(positives[c] / std::max(rows[c], floor), 0.0, 1.0);
        lo = std::min(lo, rate);
        hi = std::max(hi, rate);
      }
      gap = std::max(gap, hi - lo);
    }
  } else {
    double lo = 1, hi = 0;
    for (int a = 0; a < k; ++a) {
      const double rate = std::clamp((positives[2 * a] + positives[2 * a + 1]) /
                                         std::max(rows[2 * a] + rows[2 * a + 1], floor),
                                     0.0, 1.0);
      lo = std::min(lo, rate);
      hi = std::max(hi, rate);
    }
    gap = hi - lo;
  }
  return gap;
}

std::vector<uint8_t> DecideRows(const ValidationRows& validation, const Eigen::VectorXd& w) {
  const Eigen::VectorXd margin = validation.x * w;
  std::vector<uint8_t> out(margin.size());
  for (Eigen::Index i = 0; i < margin.size(); ++i) out[i] = margin(i) > 0 ? 1 : 0;
  return out;
}

// Positives and rows per cell 2a+y (branch-free: the work does not depend on the groups).
void CellTotals(const ValidationRows& validation, const std::vector<uint8_t>& decisions,
                std::vector<double>* positives, std::vector<double>* rows) {
  positives->assign(2 * validation.k, 0.0);
  rows->assign(2 * validation.k, 0.0);
  for (size_t i = 0; i < validation.y.size(); ++i) {
    const int c = 2 * validation.group[i] + validation.y[i];
    (*positives)[c] += decisions[i];
    (*rows)[c] += 1;
  }
}

}  // namespace

absl::Status SelectionOptions::Validate() const {
  RETURN_IF_ERROR(ValidateIsFiniteAndNonNegative(target, "selection_target"));
  if (target > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("selection_target is a gap between rates: at most 1 (got ", target, ")"));
  }
  RETURN_IF_ERROR(ValidateIsFiniteAndPositive(penalty, "selection_penalty"));
  if (penalty < 1e-3 || penalty > 1e6) {
    return absl::InvalidArgumentError(
        absl::StrCat("selection_penalty must be in [0.001, 1e6] (got ", penalty, ")"));
  }
  if (candidates < 2 || candidates > 100) {
    return absl::InvalidArgumentError(
        absl::StrCat("selection_candidates must be in 2..100 (got ", candidates, ")"));
  }
  return absl::OkStatus();
}

double SelectionFloorCap(const ValidationRows& validation, ReductionConstraint constraint) {
  const int k = std::max(validation.k, 1);
  double label_rows[2] = {0, 0};
  for (int y : validation.y) label_rows[y] += 1;
  const double cap = constraint == ReductionConstraint::kEqualizedOdds
                         ? std::min(std::floor(label_rows[0] / k), std::floor(label_rows[1] / k))
                         : std::floor((label_rows[0] + label_rows[1]) / k);
  return std::max(1.0, cap);
}

absl::Status CheckSelectionFeasible(const ValidationRows& validation,
                                    const SelectionOptions& options) {
  RETURN_IF_ERROR(options.Validate());
  const double cap = SelectionFloorCap(validation, options.constraint);
  if ((1 + options.penalty) * cap / options.penalty > std::ldexp(1.0, 32)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "selection_penalty: ", options.penalty, " is too small for ", validation.y.size(),
        " validation rows (the exponential mechanism's exact sampler would overflow); use "
        "selection_penalty >= ",
        cap / (std::ldexp(1.0, 32) - cap) * 1.01));
  }
  return absl::OkStatus();
}

std::vector<double> SelectionScales(int candidates) {
  std::vector<double> scales = {0.0};
  if (candidates == 2) {
    scales.push_back(1.0);
    return scales;
  }
  for (int j = 0; j + 1 < candidates; ++j) {
    scales.push_back(std::exp2(-3.0 + 6.0 * j / (candidates - 2)));
  }
  return scales;
}

std::vector<double> SelectionUtilities(const ValidationRows& validation,
                                       const std::vector<std::vector<uint8_t>>& decisions,
                                       const SelectionOptions& options, double floor) {
  const double n = std::max<double>(1, static_cast<double>(validation.y.size()));
  std::vector<double> utility;
  std::vector<double> positives, rows;
  for (const std::vector<uint8_t>& h : decisions) {
    double errors = 0;
    for (size_t i = 0; i < h.size(); ++i) errors += h[i] != validation.y[i];
    CellTotals(validation, h, &positives, &rows);
    const double gap = Gap(options.constraint, validation.k, positives, rows, floor);
    utility.push_back(errors / n + options.penalty * std::max(0.0, gap - options.target));
  }
  return utility;
}

absl::StatusOr<SelectionResult> RunSelection(const GameData& data, const ReleasedCells& cells,
                                             absl::Span<const double> lambda_average,
                                             const ValidationRows& validation,
                                             const SelectionOptions& options,
                                             const SelectionNoises& noises, absl::BitGenRef gen) {
  RETURN_IF_ERROR(CheckSelectionFeasible(validation, options));
  if (noises.counts == nullptr || noises.score == nullptr || !(noises.epsilon_select > 0)) {
    return absl::InternalError("the selection needs its three releases");
  }
  const int k = validation.k;
  const int64_t n = static_cast<int64_t>(validation.y.size());
  if (k != cells.k || validation.x.cols() != data.d || validation.x.rows() != n ||
      static_cast<int64_t>(validation.group.size()) != n || n == 0) {
    return absl::InternalError("the validation rows do not match the game");
  }
  SelectionResult result;
  // 1. The validation counts, and the floor M below the smallest cell (group).
  std::vector<std::vector<int64_t>> exact(2 * k, std::vector<int64_t>(1, 0));
  for (int64_t i = 0; i < n; ++i) exact[2 * validation.group[i] + validation.y[i]][0] += 1;
  const std::vector<std::vector<double>> noisy = ReleaseGroupCells(exact, *noises.counts, gen);
  result.noisy_counts.resize(2 * k);
  for (int c = 0; c < 2 * k; ++c) result.noisy_counts[c] = noisy[c][0];
  double smallest = INFINITY;
  for (int a = 0; a < k; ++a) {
    if (options.constraint == ReductionConstraint::kEqualizedOdds) {
      smallest = std::min({smallest, noisy[2 * a][0], noisy[2 * a + 1][0]});
    } else {
      smallest = std::min(smallest, noisy[2 * a][0] + noisy[2 * a + 1][0]);
    }
  }
  const double spread = noises.counts->Scale() *
                        (options.constraint == ReductionConstraint::kEqualizedOdds ? 1 : 2);
  result.floor = std::clamp(std::floor(smallest - kFloorScales * spread), 1.0,
                            SelectionFloorCap(validation, options.constraint));
  result.sensitivity = 2 * options.penalty / result.floor;

  // 2. The candidates (post-processing of the cells), their public errors, and the choice.
  result.scales = SelectionScales(options.candidates);
  std::vector<std::vector<uint8_t>> decisions;
  std::vector<double> lambda(lambda_average.size());
  const bool with_constant =
      options.intercept_column >= 0 && options.intercept_column < validation.x.cols();
  if (with_constant) result.scales.push_back(-1);  // the constant classifier, last
  for (double scale : result.scales) {
    Eigen::VectorXd w;
    if (scale < 0) {
      // The validation majority's constant classifier (the company's labels: public).
      int64_t ones = 0;
      for (int y : validation.y) ones += y;
      w = Eigen::VectorXd::Zero(validation.x.cols());
      w(options.intercept_column) = 2 * ones >= n ? 1 : -1;
    } else {
      for (size_t c = 0; c < lambda.size(); ++c) lambda[c] = scale * lambda_average[c];
      ASSIGN_OR_RETURN(w, ReductionBestResponse(data, cells, options.constraint, lambda));
    }
    std::vector<uint8_t> h = DecideRows(validation, w);
    double errors = 0, positives = 0;
    for (int64_t i = 0; i < n; ++i) {
      errors += h[i] != validation.y[i];
      positives += h[i];
    }
    result.errors.push_back(errors / static_cast<double>(n));
    result.positive_rates.push_back(positives / static_cast<double>(n));
    result.weights.push_back(std::move(w));
    decisions.push_back(std::move(h));
  }
  // A public pre-selection: with the constant classifier among the candidates, every candidate
  // erring at least as much as it on the validation rows is dropped (the errors are the
  // company's own: public). The mechanism then never returns a model worse than predicting
  // one class for everyone.
  const double constant_error = with_constant ? result.errors.back() : 2.0;
  std::vector<std::vector<uint8_t>> eligible_decisions;
  for (size_t j = 0; j < decisions.size(); ++j) {
    const bool is_constant = with_constant && j + 1 == decisions.size();
    if (is_constant || result.errors[j] < constant_error) {
      result.eligible.push_back(static_cast<int>(j));
      eligible_decisions.push_back(decisions[j]);
    }
  }
  const std::vector<double> utility =
      SelectionUtilities(validation, eligible_decisions, options, result.floor);
  ASSIGN_OR_RETURN(const int pick, SampleExponentialMechanism(utility, result.sensitivity,
                                                              noises.epsilon_select, gen));
  result.chosen = result.eligible[pick];

  // 3. The chosen candidate's positives per cell, released; its noisy gap (post-processing).
  std::vector<double> positives, rows;
  CellTotals(validation, decisions[result.chosen], &positives, &rows);
  std::vector<std::vector<int64_t>> exact_positives(2 * k, std::vector<int64_t>(1, 0));
  for (int c = 0; c < 2 * k; ++c) exact_positives[c][0] = static_cast<int64_t>(positives[c]);
  const std::vector<std::vector<double>> noisy_positives =
      ReleaseGroupCells(exact_positives, *noises.score, gen);
  for (int c = 0; c < 2 * k; ++c) positives[c] = noisy_positives[c][0];
  result.noisy_gap = Gap(options.constraint, k, positives, result.noisy_counts, result.floor);
  return result;
}

}  // namespace fairvault::core::learn
