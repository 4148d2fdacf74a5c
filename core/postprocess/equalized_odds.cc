// DP equalized-odds post-processing (Jagielski et al. 2019, Alg. 1; ALGORITHMS.md §1): builds the
// mixing LP over p[ŷ][a] from a (noisy) count table and solves it with GLPK's primal simplex.
#include "core/postprocess/equalized_odds.h"

#include <glpk.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
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

// Minimises objective·x over x ∈ [lower, upper]^n subject to `rows`. Returns x (clamped to the
// box, which only removes rounding-level excursions of the simplex's basic solution).
absl::StatusOr<std::vector<double>> SolveBoxLp(const std::vector<double>& objective,
                                               const std::vector<LpRow>& rows, double lower,
                                               double upper) {
  glpk::ScopedGlpk scoped_glpk;  // before the problem: it must outlive it
  glpk::ProbPtr lp(glp_create_prob());
  glp_set_obj_dir(lp.get(), GLP_MIN);
  const int n = static_cast<int>(objective.size());
  glp_add_cols(lp.get(), n);
  for (int j = 1; j <= n; ++j) {
    glp_set_col_bnds(lp.get(), j, GLP_DB, lower, upper);
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
  // The LP is always feasible (p = ½ everywhere, inside any box we build) and bounded (a box),
  // so any failure above is the solver's, not bad input.
  std::vector<double> x(n);
  for (int j = 1; j <= n; ++j) {
    x[j - 1] = std::clamp(glp_get_col_prim(lp.get(), j), lower, upper);
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
  if (num_groups < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_groups must be >= 1 (got ", num_groups, ")"));
  }
  if (label.size() != prediction.size() || group.size() != prediction.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("prediction, label and group must have the same length (got ",
                     prediction.size(), ", ", label.size(), ", ", group.size(), ")"));
  }
  EoCounts counts;
  counts.num_groups = num_groups;
  counts.n.assign(4 * static_cast<size_t>(num_groups), 0);
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
    ++counts.at(yhat, a, y);
  }
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
  return absl::OkStatus();
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
  const double md = static_cast<double>(options.m);
  const Masses q = ComputeMasses(counts, options.m);

  // Noise slack 4 ln(4K/β) / (q·m·ε) of Jagielski et al. Thm 3.1 for the smaller mass q of the
  // pair; 0 without noise.
  const double log_term = std::log(4.0 * k / options.beta);
  const bool private_counts = std::isfinite(options.epsilon);
  auto slack = [&](double mass) {
    return private_counts ? 4.0 * log_term / (mass * md * options.epsilon) : 0.0;
  };

  // Pairs (a, b) to constrain: each a != 0 against the reference 0, or every a < b.
  std::vector<std::pair<int, int>> pairs;
  for (int a = 1; a < k; ++a) {
    if (options.all_pairs) {
      for (int b = 0; b < a; ++b) pairs.emplace_back(a, b);
    } else {
      pairs.emplace_back(a, 0);
    }
  }

  EoSolution solution;
  solution.groups.resize(k);
  std::vector<LpRow> rows;
  rows.reserve(4 * pairs.size());
  for (const auto& [a, b] : pairs) {
    const double fpr_slack = slack(std::min(q.Group(a, 0), q.Group(b, 0)));
    const double tpr_slack = slack(std::min(q.Group(a, 1), q.Group(b, 1)));
    // Rates lie in [0,1], so a bound of 1 already never binds; capping keeps GLPK's bounds
    // finite and moderate when ε is tiny.
    AddAbsRows(q.fp, a, b, k, std::min(options.gamma + fpr_slack, 1.0), &rows);
    AddAbsRows(q.tp, a, b, k, std::min(options.gamma + tpr_slack, 1.0), &rows);
    // Reported slack per group: the pair's slack in reference mode (group 0 keeps 0); with
    // all_pairs, the largest slack over the pairs the group takes part in.
    for (int g : {a, b}) {
      if (!options.all_pairs && g == 0) continue;
      EoGroupResult& r = solution.groups[g];
      r.fpr_slack = std::max(r.fpr_slack, fpr_slack);
      r.tpr_slack = std::max(r.tpr_slack, tpr_slack);
    }
  }

  // Error = Σ q[ŷ][a][0]·p[ŷ][a] + q[ŷ][a][1]·(1 − p[ŷ][a]); the constant part is added back below.
  std::vector<double> objective(2 * k);
  for (int yhat = 0; yhat < 2; ++yhat) {
    for (int a = 0; a < k; ++a) {
      objective[Column(yhat, a, k) - 1] = q.Cell(yhat, a, 0) - q.Cell(yhat, a, 1);
    }
  }
  ASSIGN_OR_RETURN(std::vector<double> p, SolveBoxLp(objective, rows, options.decision_floor,
                                                     1.0 - options.decision_floor));

  double constant = 0;
  for (int yhat = 0; yhat < 2; ++yhat) {
    for (int a = 0; a < k; ++a) {
      const int j = Column(yhat, a, k) - 1;
      solution.objective += objective[j] * p[j];
      constant += q.Cell(yhat, a, 1);
    }
  }
  solution.noisy_error = solution.objective + constant;
  for (int a = 0; a < k; ++a) {
    EoGroupResult& r = solution.groups[a];
    r.p0 = p[Column(0, a, k) - 1];
    r.p1 = p[Column(1, a, k) - 1];
    r.noisy_fpr = q.fp[a];
    r.noisy_tpr = q.tp[a];
    r.derived_fpr = q.fp[a] * r.p1 + (1.0 - q.fp[a]) * r.p0;
    r.derived_tpr = q.tp[a] * r.p1 + (1.0 - q.tp[a]) * r.p0;
  }

  if (private_counts && k >= 2) {
    // Below this mass the slack exceeds 1: the constraint cannot bind (the paper assumes
    // min q_ay > 4 ln(4K/β)/(mε)).
    const double threshold = 4.0 * log_term / (md * options.epsilon);
    for (int a = 0; a < k; ++a) {
      const int y = q.Group(a, 0) <= q.Group(a, 1) ? 0 : 1;
      const double mass = q.Group(a, y);
      if (mass < threshold) {
        solution.warnings.push_back(absl::StrCat(
            "group ", a, ": its noisy mass with label ", y, " is ", mass,
            ", below 4 ln(4K/beta)/(m epsilon) = ", threshold,
            ", so the privacy slack on its equalized-odds constraints exceeds 1 and they are too "
            "loose to bind; the group is effectively unconstrained (more subjects or a larger "
            "epsilon would help)"));
      }
    }
    if (options.gamma == 0) {
      solution.warnings.push_back(
          "gamma = 0 asks for exact equalized odds, which no differentially private algorithm "
          "can guarantee (Cummings et al. 2019, Thm. 1): the rates are equalized on the noisy "
          "counts only, and on the true data they may differ by up to about twice the reported "
          "fpr_slack / tpr_slack (Jagielski et al. 2019, Thm. 3.1)");
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
