// DP equalized-odds post-processing (Jagielski et al. 2019, Alg. 1; ALGORITHMS.md §1): builds the
// mixing LP over p[ŷ][a] from a (noisy) count table and solves it with GLPK's primal simplex.
#include "core/postprocess/equalized_odds.h"
#include "core/postprocess/decision_floor.h"

#include <glpk.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/fairness/metrics.h"
#include "core/postprocess/glpk_util.h"
#include "core/util/status_macros.h"

namespace fairvault::core::postprocess {
namespace {

// A sparse row of the LP: columns are 1-based GLPK indices.
struct LpRow {
  std::vector<std::pair<int, double>> entries;
  int type;  // GLP_UP or GLP_LO
  double bound;
};

// Minimises objective·x over x_j ∈ [lower_j, upper_j] subject to `rows` (lower_j == upper_j fixes
// x_j). Returns x (clamped to the box, which only removes rounding-level excursions of the
// simplex's basic solution).
absl::StatusOr<std::vector<double>> SolveBoxLp(const std::vector<double>& objective,
                                               const std::vector<LpRow>& rows,
                                               const std::vector<double>& lower,
                                               const std::vector<double>& upper) {
  glpk::ScopedGlpk scoped_glpk;  // before the problem: it must outlive it
  glpk::ProbPtr lp(glp_create_prob());
  glp_set_obj_dir(lp.get(), GLP_MIN);
  const int n = static_cast<int>(objective.size());
  glp_add_cols(lp.get(), n);
  for (int j = 1; j <= n; ++j) {
    const double lo = lower[j - 1], hi = upper[j - 1];
    glp_set_col_bnds(lp.get(), j, lo == hi ? GLP_FX : GLP_DB, lo, hi);
    glp_set_obj_coef(lp.get(), j, objective[j - 1]);
  }
  if (!rows.empty()) {
    glp_add_rows(lp.get(), static_cast<int>(rows.size()));
    // glp_load_matrix reads (ia[k], ja[k], ar[k]) for k = 1..ne; element 0 is unused.
    std::vector<int> ia(1, 0), ja(1, 0);
    std::vector<double> ar(1, 0.0);
    for (size_t i = 0; i < rows.size(); ++i) {
      const int row = static_cast<int>(i) + 1;
      if (rows[i].type == GLP_UP) {
        glp_set_row_bnds(lp.get(), row, GLP_UP, 0.0, rows[i].bound);
      } else {
        glp_set_row_bnds(lp.get(), row, GLP_LO, rows[i].bound, 0.0);
      }
      for (const auto& [col, value] : rows[i].entries) {
        ia.push_back(row);
        ja.push_back(col);
        ar.push_back(value);
      }
    }
    const int ne = static_cast<int>(ar.size()) - 1;
    if (ne > 0) glp_load_matrix(lp.get(), ne, ia.data(), ja.data(), ar.data());
  }

  RETURN_IF_ERROR(glpk::RunSimplex(lp.get(), glpk::QuietSimplexParams(), "the equalized-odds LP"));
  // The LP is always feasible (p = ½ on every constrained group, inside any box we build; fixed
  // columns belong to groups no row mentions) and bounded (a box), so any failure above is the
  // solver's, not bad input.
  std::vector<double> x(n);
  for (int j = 1; j <= n; ++j) {
    x[j - 1] = std::clamp(glp_get_col_prim(lp.get(), j), lower[j - 1], upper[j - 1]);
  }
  return x;
}

// --- Counts -------------------------------------------------------------------------------------

absl::Status ValidateCountsShape(const EoCounts& counts) {
  if (counts.num_groups < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("counts.num_groups must be >= 1 (got ", counts.num_groups, ")"));
  }
  const size_t expected = 4 * static_cast<size_t>(counts.num_groups);
  if (counts.n.size() != expected) {
    return absl::InvalidArgumentError(absl::StrCat("counts.n must hold 4 * num_groups = ", expected,
                                                   " cells (got ", counts.n.size(), ")"));
  }
  return absl::OkStatus();
}

// The masses the LP works with, all derived from the released counts by post-processing (no
// privacy cost). Noisy counts can be negative or, per group and label, add up to less than one
// of their cells; we therefore
//   * clamp every cell at 0 (a negative mass has no meaning as a fraction of subjects),
//   * floor q_ay = q[0][a][y] + q[1][a][y] at 1/m, the public floor, so rates and slacks stay
//     finite when a noisy group is empty,
//   * clamp the rate numerator q[1][a][y] to [0, q_ay]; with cells clamped at 0 this only matters
//     when both cells are 0 and the floor kicks in (the rate is then 0).
// The objective uses the same clamped cells, so objective and rates describe one table.
struct Masses {
  int k = 0;
  std::vector<double> cell;    // q[ŷ][a][y] >= 0, index as EoCounts
  std::vector<double> group;   // q_ay, index 2a + y, >= 1/m
  std::vector<double> fp, tp;  // noisy FP_a, TP_a
  double Cell(int yhat, int a, int y) const { return cell[(yhat * k + a) * 2 + y]; }
  double Group(int a, int y) const { return group[2 * a + y]; }
};

Masses ComputeMasses(const EoCounts& counts, int64_t m) {
  Masses q;
  q.k = counts.num_groups;
  const double md = static_cast<double>(m);
  q.cell.resize(counts.n.size());
  for (size_t i = 0; i < counts.n.size(); ++i) {
    q.cell[i] = std::max<double>(static_cast<double>(counts.n[i]), 0.0) / md;
  }
  q.group.resize(2 * q.k);
  q.fp.resize(q.k);
  q.tp.resize(q.k);
  for (int a = 0; a < q.k; ++a) {
    for (int y = 0; y < 2; ++y) {
      q.group[2 * a + y] = std::max(q.Cell(0, a, y) + q.Cell(1, a, y), 1.0 / md);
    }
    q.fp[a] = std::clamp(q.Cell(1, a, 0), 0.0, q.Group(a, 0)) / q.Group(a, 0);
    q.tp[a] = std::clamp(q.Cell(1, a, 1), 0.0, q.Group(a, 1)) / q.Group(a, 1);
  }
  return q;
}

// GLPK refuses (by abort()) problems past 100 million rows, and the simplex would be far too slow
// long before that; all_pairs grows as 2K(K−1) rows. This bound admits K ≈ 300 with all_pairs.
constexpr int64_t kMaxRows = 200'000;

// A constraint row counts as active (binding), and a probability as equal to its bound, within
// this distance: well above GLPK's primal feasibility tolerance (1e-7 relative) on our O(1) rows.
constexpr double kActiveTolerance = 1e-6;

// GLPK column (1-based) of p[ŷ][a].
int Column(int yhat, int a, int k) { return yhat * k + a + 1; }

// Rows |R_a(p) − R_b(p)| <= bound for the rate R with noisy base rates `rate`:
// R_a(p) = rate[a]·p[1][a] + (1 − rate[a])·p[0][a].
void AddAbsRows(const std::vector<double>& rate, int a, int b, int k, double bound,
                std::vector<LpRow>* rows) {
  std::vector<std::pair<int, double>> entries;
  auto add = [&](int col, double value) {
    if (value != 0.0) entries.emplace_back(col, value);  // keep the matrix free of explicit zeros
  };
  add(Column(1, a, k), rate[a]);
  add(Column(0, a, k), 1.0 - rate[a]);
  add(Column(1, b, k), -rate[b]);
  add(Column(0, b, k), -(1.0 - rate[b]));
  rows->push_back(LpRow{entries, GLP_UP, bound});
  rows->push_back(LpRow{std::move(entries), GLP_LO, -bound});
}

}  // namespace

absl::StatusOr<EoCounts> CountEo(absl::Span<const int> prediction, absl::Span<const int> label,
                                 absl::Span<const int> group, int num_groups) {
  EoCounts counts;
  counts.num_groups = num_groups;
  ASSIGN_OR_RETURN(counts.n, fairness::CountConfusion(prediction, label, group, num_groups));
  return counts;
}

absl::Status EoOptions::Validate() const {
  if (!std::isfinite(gamma) || gamma < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("gamma must be finite and >= 0 (got ", gamma,
                     "); it is the allowed gap in FPR and TPR between groups, 0 for the tightest"));
  }
  if (!(beta > 0 && beta < 1)) {
    return absl::InvalidArgumentError(absl::StrCat("beta must be in (0, 1) (got ", beta,
                                                   "); it is the failure probability, e.g. 0.05"));
  }
  if (!(epsilon > 0)) {  // also rejects NaN; +inf is allowed and means exact counts
    return absl::InvalidArgumentError(
        absl::StrCat("epsilon must be > 0 (got ", epsilon,
                     "); pass the epsilon the counts were noised with, or +inf for exact counts"));
  }
  if (m <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("m must be > 0 (got ", m, "); pass the number of subjects in the request"));
  }
  if (!(decision_floor >= 0 && decision_floor < 0.5)) {  // also rejects NaN and infinities
    return absl::InvalidArgumentError(
        absl::StrCat("decision_floor must be finite and in [0, 0.5) (got ", decision_floor,
                     "); it keeps every mixing probability in [floor, 1 - floor], 0 for no floor"));
  }
  if (decision_floor > 0 && decision_floor < kMinDecisionFloor) {
    // Decide draws exactly, with the same work for every group, only probabilities of at least
    // 2^-73 (docs/privacy.md §4, "Timing"): a floor of 1e-6 keeps them there.
    return absl::InvalidArgumentError(absl::StrCat("decision_floor must be 0 or at least ",
                                                   kMinDecisionFloor, " (got ", decision_floor,
                                                   ")"));
  }
  if (min_group_count.has_value() &&
      !(*min_group_count >= 0 && std::isfinite(*min_group_count))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "min_group_count must be finite and >= 0 (got ", *min_group_count,
        "); groups with fewer noisy subjects per label keep their predictions, 0 excludes none"));
  }
  return absl::OkStatus();
}

double DefaultMinGroupCount(int num_groups, double beta, double epsilon) {
  if (!std::isfinite(epsilon)) return 0;
  return 8.0 * std::log(4.0 * num_groups / beta) / epsilon;
}

absl::Status CheckEoProblemSize(int num_groups, const EoOptions& options) {
  const int64_t k = num_groups;
  const int64_t num_pairs = options.all_pairs ? k * (k - 1) / 2 : k - 1;
  if (4 * num_pairs > kMaxRows) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the equalized-odds LP for ", k, " groups", options.all_pairs ? " with all_pairs" : "",
        " would have ", 4 * num_pairs, " constraint rows (limit ", kMaxRows, "); use fewer groups",
        options.all_pairs ? " or compare against the reference group" : ""));
  }
  return absl::OkStatus();
}

absl::StatusOr<EoSolution> SolveEqualizedOddsLp(const EoCounts& counts, const EoOptions& options) {
  RETURN_IF_ERROR(options.Validate());
  RETURN_IF_ERROR(ValidateCountsShape(counts));
  const int k = counts.num_groups;
  RETURN_IF_ERROR(CheckEoProblemSize(k, options));
  if (!options.group_labels.empty() && static_cast<int>(options.group_labels.size()) != k) {
    return absl::InvalidArgumentError(
        absl::StrCat("group_labels must be empty or name all ", k, " groups (got ",
                     options.group_labels.size(), ")"));
  }
  auto name = [&](int a) {
    return options.group_labels.empty() ? absl::StrCat("group ", a)
                                        : absl::StrCat("group '", options.group_labels[a], "'");
  };
  const double md = static_cast<double>(options.m);
  const Masses q = ComputeMasses(counts, options.m);
  const double floor = options.decision_floor;

  // Noise slack 4 ln(4K/β) / (q·m·ε) of Jagielski et al. Thm 3.1 for the smaller mass q of the
  // pair; 0 without noise.
  const double log_term = std::log(4.0 * k / options.beta);
  const bool private_counts = std::isfinite(options.epsilon);
  auto slack = [&](double mass) {
    return private_counts ? 4.0 * log_term / (mass * md * options.epsilon) : 0.0;
  };

  EoSolution solution;
  solution.groups.resize(k);
  solution.min_group_count = options.min_group_count.has_value()
                                 ? *options.min_group_count
                                 : DefaultMinGroupCount(k, options.beta, options.epsilon);

  // Which groups the noise can resolve, from the released counts only (post-processing): the
  // smaller of the group's two label counts, cells clamped at 0 and the sum floored at 1 (the
  // masses' public floor 1/m), against the public threshold.
  std::vector<int> resolvable;
  std::vector<int64_t> group_total(k, 0);
  for (int a = 0; a < k; ++a) {
    int64_t label_count[2];
    for (int y = 0; y < 2; ++y) {
      label_count[y] = std::max<int64_t>(
          std::max<int64_t>(counts.at(0, a, y), 0) + std::max<int64_t>(counts.at(1, a, y), 0), 1);
    }
    group_total[a] = label_count[0] + label_count[1];
    const int y = label_count[0] <= label_count[1] ? 0 : 1;
    if (static_cast<double>(label_count[y]) < solution.min_group_count) {
      EoGroupResult& r = solution.groups[a];
      r.excluded = true;
      r.excluded_reason = absl::StrCat("its noisy count with label ", y, " is ", label_count[y],
                                       ", below min_group_count = ", solution.min_group_count);
    } else {
      resolvable.push_back(a);
    }
  }

  // The reference: group 0 if it is resolvable, otherwise the resolvable group with the largest
  // noisy count (a rule on released values only; lowest index on ties).
  if (!options.all_pairs && !resolvable.empty()) {
    solution.reference_group = resolvable[0];
    for (int a : resolvable) {
      if (group_total[a] > group_total[solution.reference_group]) solution.reference_group = a;
    }
    if (!solution.groups[0].excluded) solution.reference_group = 0;
  }

  // Pairs (a, b) to constrain, among resolvable groups only: each against the reference, or every
  // pair. With fewer than two resolvable groups there is nothing to equalize.
  std::vector<std::pair<int, int>> pairs;
  const bool constrained = resolvable.size() >= 2;
  if (constrained) {
    for (size_t i = 0; i < resolvable.size(); ++i) {
      const int a = resolvable[i];
      if (options.all_pairs) {
        for (size_t j = 0; j < i; ++j) pairs.emplace_back(a, resolvable[j]);
      } else if (a != solution.reference_group) {
        pairs.emplace_back(a, solution.reference_group);
      }
    }
  }

  std::vector<LpRow> rows;
  rows.reserve(4 * pairs.size());
  for (const auto& [a, b] : pairs) {
    const double fpr_slack = slack(std::min(q.Group(a, 0), q.Group(b, 0)));
    const double tpr_slack = slack(std::min(q.Group(a, 1), q.Group(b, 1)));
    // Rates lie in [0,1], so a bound of 1 already never binds; capping keeps GLPK's bounds
    // finite and moderate when ε is tiny.
    AddAbsRows(q.fp, a, b, k, std::min(options.gamma + fpr_slack, 1.0), &rows);
    AddAbsRows(q.tp, a, b, k, std::min(options.gamma + tpr_slack, 1.0), &rows);
    // Reported slack per group: the pair's slack in reference mode (the reference keeps 0); with
    // all_pairs, the largest slack over the pairs the group takes part in.
    for (int g : {a, b}) {
      if (!options.all_pairs && g == solution.reference_group) continue;
      EoGroupResult& r = solution.groups[g];
      r.fpr_slack = std::max(r.fpr_slack, fpr_slack);
      r.tpr_slack = std::max(r.tpr_slack, tpr_slack);
    }
  }

  // Error = Σ q[ŷ][a][0]·p[ŷ][a] + q[ŷ][a][1]·(1 − p[ŷ][a]); the constant part is added back below.
  // A group outside every constraint keeps its predictions: p[0][a] = floor, p[1][a] = 1 − floor
  // (the identity when the floor is 0). That is every group when nothing is constrained: the LP
  // alone would otherwise re-map an unconstrained group from its noisy cells, for accuracy.
  std::vector<double> objective(2 * k), lower(2 * k, floor), upper(2 * k, 1.0 - floor);
  for (int a = 0; a < k; ++a) {
    for (int yhat = 0; yhat < 2; ++yhat) {
      const int j = Column(yhat, a, k) - 1;
      objective[j] = q.Cell(yhat, a, 0) - q.Cell(yhat, a, 1);
      if (solution.groups[a].excluded || !constrained) {
        lower[j] = upper[j] = yhat == 0 ? floor : 1.0 - floor;
      }
    }
  }
  ASSIGN_OR_RETURN(std::vector<double> p, SolveBoxLp(objective, rows, lower, upper));

  double constant = 0;
  for (int yhat = 0; yhat < 2; ++yhat) {
    for (int a = 0; a < k; ++a) {
      const int j = Column(yhat, a, k) - 1;
      solution.objective += objective[j] * p[j];
      constant += q.Cell(yhat, a, 1);
    }
  }
  solution.noisy_error = solution.objective + constant;
  bool identity = true;
  for (int a = 0; a < k; ++a) {
    EoGroupResult& r = solution.groups[a];
    r.p0 = p[Column(0, a, k) - 1];
    r.p1 = p[Column(1, a, k) - 1];
    r.noisy_fpr = q.fp[a];
    r.noisy_tpr = q.tp[a];
    r.derived_fpr = q.fp[a] * r.p1 + (1.0 - q.fp[a]) * r.p0;
    r.derived_tpr = q.tp[a] * r.p1 + (1.0 - q.tp[a]) * r.p0;
    identity = identity && std::abs(r.p0 - floor) <= kActiveTolerance &&
               std::abs(r.p1 - (1.0 - floor)) <= kActiveTolerance;
  }

  // --- Warnings, naming groups by label. ---
  const std::string kept =
      floor > 0 ? absl::StrCat("keeps each prediction with probability ", 1.0 - floor,
                               " (1 - decision_floor)")
                : std::string("keeps its predictions (p0 = 0, p1 = 1)");
  int num_excluded = 0;
  for (int a = 0; a < k; ++a) {
    const EoGroupResult& r = solution.groups[a];
    if (!r.excluded) continue;
    ++num_excluded;
    solution.warnings.push_back(absl::StrCat(
        name(a), " is excluded from the equalized-odds constraints and ", kept, ": ",
        r.excluded_reason,
        ", too few for the privacy noise to resolve its rates (lower min_group_count to constrain "
        "it anyway; more subjects or a larger epsilon would resolve it)"));
  }
  if (!options.all_pairs && solution.reference_group > 0) {
    solution.warnings.push_back(absl::StrCat(
        name(0), ", the default reference (the first group), is excluded, so the reference is ",
        name(solution.reference_group), ", the resolvable group with the largest noisy count"));
  }
  if (k >= 2 && !constrained) {
    solution.warnings.push_back(absl::StrCat(
        resolvable.empty() ? "no group is" : "only one group is",
        " resolvable at this epsilon, so there is nothing to equalize: no constraint is imposed "
        "and every group ",
        kept));
  }
  if (private_counts) {
    // A resolvable group with a mass this small (only possible with a lowered min_group_count)
    // has a slack above 1: its constraints cannot bind and the LP maps it from noisy cells alone.
    const double threshold = 4.0 * log_term / (md * options.epsilon);
    for (int a : resolvable) {
      if (!constrained) break;
      const int y = q.Group(a, 0) <= q.Group(a, 1) ? 0 : 1;
      const double mass = q.Group(a, y);
      if (mass < threshold) {
        solution.warnings.push_back(absl::StrCat(
            name(a), ": its noisy mass with label ", y, " is ", mass,
            ", below 4 ln(4K/beta)/(m epsilon) = ", threshold,
            ", so the privacy slack on its equalized-odds constraints exceeds 1 and they are too "
            "loose to bind; the LP sets its mapping from its noisy counts alone and may change "
            "its predictions arbitrarily (the default min_group_count would keep them)"));
      }
    }
  }
  if (constrained) {
    // Does any constraint hold with equality at the solution?
    bool binding = false;
    for (const LpRow& row : rows) {
      double lhs = 0;
      for (const auto& [col, value] : row.entries) lhs += value * p[col - 1];
      if (std::abs(lhs) >= std::abs(row.bound) - kActiveTolerance) binding = true;
    }
    if (!binding && identity) {
      solution.warnings.push_back(absl::StrCat(
          "the equalized-odds constraints are not binding at this slack (gamma plus the noise "
          "allowance); the artifact is the identity (no change to predictions",
          floor > 0 ? " beyond the decision floor" : "", ")"));
    } else if (!binding) {
      solution.warnings.push_back(
          "the equalized-odds constraints are not binding at this slack (gamma plus the noise "
          "allowance): the fit only lowered each group's noisy error and did not move any "
          "group's rates toward the others");
    }
    if (private_counts && options.gamma == 0) {
      solution.warnings.push_back(absl::StrCat(
          "gamma = 0 does not give exact equalized odds: no differentially private algorithm can "
          "guarantee that (Cummings et al. 2019, Thm. 1). The constraints let each compared "
          "pair's rates differ on the noisy counts by the noise allowance (fpr_slack / tpr_slack, "
          "per group), and on the true data by up to about twice it, with probability at least "
          "1 - beta (Jagielski et al. 2019, Thm. 3.1)",
          num_excluded > 0 ? "; excluded groups are not constrained at all" : ""));
    }
  }
  return solution;
}

absl::StatusOr<EoSolution> FitEqualizedOdds(const EoCounts& exact_counts, const EoOptions& options,
                                            const dp::IntegerNoise& noise, absl::BitGenRef gen,
                                            EoCounts* noisy_counts) {
  RETURN_IF_ERROR(options.Validate());
  RETURN_IF_ERROR(ValidateCountsShape(exact_counts));
  int64_t total = 0;
  for (size_t i = 0; i < exact_counts.n.size(); ++i) {
    if (exact_counts.n[i] < 0) {
      return absl::InvalidArgumentError(absl::StrCat("exact count at index ", i,
                                                     " must be >= 0 (got ", exact_counts.n[i],
                                                     "); pass the counts from CountEo"));
    }
    total += exact_counts.n[i];
  }
  // m scales the masses and the slack; it must be the table's size (public: the company knows how
  // many of its rows were matched), or the guarantee is computed for the wrong population.
  if (total != options.m) {
    return absl::InvalidArgumentError(absl::StrCat(
        "m (", options.m, ") must equal the number of counted subjects (", total, ")"));
  }
  EoCounts noisy;
  noisy.num_groups = exact_counts.num_groups;
  noisy.n.resize(exact_counts.n.size());
  for (size_t i = 0; i < exact_counts.n.size(); ++i) {
    noisy.n[i] = noise.AddNoise(exact_counts.n[i], gen);
  }
  ASSIGN_OR_RETURN(EoSolution solution, SolveEqualizedOddsLp(noisy, options));
  if (noisy_counts != nullptr) *noisy_counts = std::move(noisy);
  return solution;
}

}  // namespace fairvault::core::postprocess
