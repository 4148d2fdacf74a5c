// Equalized odds from scores (issue 8 §6): the (group, label, bin) histogram, its repair into
// noisy ROC curves, and the GLPK LP over per-(group, bin) decision probabilities.
#include "core/postprocess/eo_scores.h"
#include "core/postprocess/decision_floor.h"

#include <glpk.h>

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/fairness/histogram_repair.h"
#include "core/postprocess/glpk_util.h"
#include "core/util/status_macros.h"

namespace fairvault::core::postprocess {
namespace {

// GLPK's simplex on dense rows: 200,000 columns or rows, 20M entries bound a request to a few
// seconds at the sizes anyone uses (K = 2, k = 100 solves in milliseconds).
constexpr int64_t kMaxColumns = 200'000;
constexpr int64_t kMaxRows = 200'000;
constexpr int64_t kMaxEntries = 20'000'000;

std::vector<std::pair<int, int>> Pairs(int num_groups, bool all_pairs) {
  std::vector<std::pair<int, int>> pairs;
  for (int a = 1; a < num_groups; ++a) {
    if (all_pairs) {
      for (int b = 0; b < a; ++b) pairs.emplace_back(a, b);
    } else {
      pairs.emplace_back(a, 0);
    }
  }
  return pairs;
}

// GLPK column (1-based) of p[a][j].
int Column(int a, int j, int k) { return a * k + j + 1; }

}  // namespace

absl::StatusOr<std::vector<int64_t>> EoScoreCounts(absl::Span<const double> scores,
                                                   absl::Span<const int> labels,
                                                   absl::Span<const int> group, int num_groups,
                                                   const ScoreGrid& grid, int64_t* clipped) {
  if (num_groups < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_groups must be >= 1 (got ", num_groups, ")"));
  }
  if (labels.size() != scores.size() || group.size() != scores.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("scores, labels and group must have the same length (got ", scores.size(),
                     ", ", labels.size(), ", ", group.size(), ")"));
  }
  std::vector<int> joint(scores.size());
  for (size_t i = 0; i < scores.size(); ++i) {
    if (labels[i] != 0 && labels[i] != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("label at row ", i, " must be 0 or 1 (got ", labels[i], ")"));
    }
    if (group[i] < 0 || group[i] >= num_groups) {
      return absl::InvalidArgumentError(absl::StrCat("group at row ", i, " must be in [0, ",
                                                     num_groups, ") (got ", group[i], ")"));
    }
    joint[i] = 2 * group[i] + labels[i];  // EoScoreCell's row order
  }
  return HistogramCounts(scores, joint, 2 * num_groups, grid, clipped);
}

absl::Status EoScoresOptions::Validate() const {
  if (!std::isfinite(gamma) || gamma < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gamma must be finite and >= 0 (got ", gamma,
        "); it is the allowed gap in TPR and FPR between groups, 0 for the tightest"));
  }
  if (!(decision_floor >= 0 && decision_floor < 0.5)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "decision_floor must be finite and in [0, 0.5) (got ", decision_floor,
        "); it keeps every decision probability in [floor, 1 - floor], 0 for no floor"));
  }
  if (decision_floor > 0 && decision_floor < kMinDecisionFloor) {
    // Decide draws exactly, with the same work for every group, only probabilities of at least
    // 2^-73 (docs/privacy.md §4, "Timing"): a floor of 1e-6 keeps them there.
    return absl::InvalidArgumentError(absl::StrCat("decision_floor must be 0 or at least ",
                                                   kMinDecisionFloor, " (got ", decision_floor,
                                                   ")"));
  }
  return absl::OkStatus();
}

absl::Status CheckEoScoresProblemSize(int num_groups, const ScoreGrid& grid,
                                      const EoScoresOptions& options) {
  RETURN_IF_ERROR(grid.Validate());
  if (num_groups < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_groups must be >= 1 (got ", num_groups, ")"));
  }
  const int64_t groups = num_groups, k = grid.k;
  const int64_t pairs = static_cast<int64_t>(Pairs(num_groups, options.all_pairs).size());
  const int64_t columns = groups * k;
  const int64_t rows = 2 * pairs + (options.monotone ? groups * (k - 1) : 0);
  const int64_t entries = 2 * pairs * 2 * k + (options.monotone ? 2 * groups * (k - 1) : 0);
  if (columns > kMaxColumns || rows > kMaxRows || entries > kMaxEntries) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the equalized-odds-from-scores LP for ", groups, " groups and ", k, " bins",
        options.all_pairs ? " with all_pairs" : "", " would have ", columns, " variables, ", rows,
        " rows and ", entries, " entries (limits ", kMaxColumns, ", ", kMaxRows, ", ",
        kMaxEntries, "); use fewer bins or groups",
        options.all_pairs ? ", or compare against the reference group" : ""));
  }
  return absl::OkStatus();
}

absl::StatusOr<EoScoresSolution> SolveEqualizedOddsFromScores(absl::Span<const int64_t> counts,
                                                              int num_groups,
                                                              const ScoreGrid& grid, int64_t m,
                                                              const EoScoresOptions& options,
                                                              double noise_scale) {
  RETURN_IF_ERROR(options.Validate());
  RETURN_IF_ERROR(CheckEoScoresProblemSize(num_groups, grid, options));
  const int k = grid.k;
  const int groups = num_groups;
  if (counts.size() != static_cast<size_t>(2 * groups) * k) {
    return absl::InvalidArgumentError(absl::StrCat("counts must hold 2 * num_groups * bins = ",
                                                   2 * groups * k, " cells (got ", counts.size(),
                                                   ")"));
  }
  if (m <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("m must be > 0 (got ", m, "); pass the number of subjects in the request"));
  }
  const double md = static_cast<double>(m);

  // Post-processing of the released histogram only: per (a, y) the noisy mass, floored at one
  // subject (a public constant), and the L∞-repaired pmf over the bins (ALGORITHMS.md §2 step 4).
  EoScoresSolution solution;
  solution.groups.resize(groups);
  for (int a = 0; a < groups; ++a) {
    for (int y = 0; y < 2; ++y) {
      std::vector<double> row(k);
      double total = 0;
      for (int j = 0; j < k; ++j) {
        row[j] = static_cast<double>(counts[EoScoreCell(a, y, j, k)]);
        total += row[j];
      }
      const double weight = std::max(total, 1.0);
      std::vector<double> pmf = fairness::RepairCdfToPmf(row, weight);
      EoScoresGroup& g = solution.groups[a];
      (y == 0 ? g.mass_negative : g.mass_positive) = weight / md;
      (y == 0 ? g.pmf_negative : g.pmf_positive) = std::move(pmf);
      if (noise_scale > 0 && groups >= 2 && total < 10 * noise_scale * std::sqrt(k)) {
        solution.warnings.push_back(absl::StrCat(
            "group ", a, ": its noisy count with label ", y, " is ", total,
            ", within the noise of its ", k,
            " bins, so its ROC curve is mostly noise and its constraints are fitted to noise; "
            "use fewer bins or a larger epsilon"));
      }
    }
  }

  glpk::ScopedGlpk scoped_glpk;  // before the problem: it must outlive it
  glpk::ProbPtr lp(glp_create_prob());
  glp_set_obj_dir(lp.get(), GLP_MIN);
  glp_add_cols(lp.get(), groups * k);
  const double lower = options.decision_floor, upper = 1.0 - options.decision_floor;
  double constant = 0;
  for (int a = 0; a < groups; ++a) {
    const EoScoresGroup& g = solution.groups[a];
    constant += g.mass_positive;
    for (int j = 0; j < k; ++j) {
      // A positive decision in bin j costs a false positive on label 0, saves a false negative
      // on label 1.
      const double c = g.mass_negative * g.pmf_negative[j] - g.mass_positive * g.pmf_positive[j];
      glp_set_col_bnds(lp.get(), Column(a, j, k), GLP_DB, lower, upper);
      glp_set_obj_coef(lp.get(), Column(a, j, k), c);
    }
  }
  std::vector<int> ia(1, 0), ja(1, 0);
  std::vector<double> ar(1, 0.0);
  int row = 0;
  auto add_entry = [&](int column, double value) {
    if (value == 0.0) return;  // keep the matrix free of explicit zeros
    ia.push_back(row);
    ja.push_back(column);
    ar.push_back(value);
  };
  const auto pairs = Pairs(groups, options.all_pairs);
  // |R_a(p) − R_b(p)| <= gamma for R = FPR (y = 0) and TPR (y = 1), R_a(p) = Σ_j pmf_ay[j] p[a][j].
  // Rates lie in [0, 1], so capping the bound at 1 changes nothing and keeps it moderate.
  const double bound = std::min(options.gamma, 1.0);
  for (const auto& [a, b] : pairs) {
    for (int y = 0; y < 2; ++y) {
      row = glp_add_rows(lp.get(), 1);
      if (bound == 0) {
        glp_set_row_bnds(lp.get(), row, GLP_FX, 0.0, 0.0);
      } else {
        glp_set_row_bnds(lp.get(), row, GLP_DB, -bound, bound);
      }
      const auto& pa = y == 0 ? solution.groups[a].pmf_negative : solution.groups[a].pmf_positive;
      const auto& pb = y == 0 ? solution.groups[b].pmf_negative : solution.groups[b].pmf_positive;
      for (int j = 0; j < k; ++j) add_entry(Column(a, j, k), pa[j]);
      for (int j = 0; j < k; ++j) add_entry(Column(b, j, k), -pb[j]);
    }
  }
  if (options.monotone) {
    for (int a = 0; a < groups; ++a) {
      for (int j = 0; j + 1 < k; ++j) {
        row = glp_add_rows(lp.get(), 1);
        glp_set_row_bnds(lp.get(), row, GLP_UP, 0.0, 0.0);  // p[a][j] <= p[a][j+1]
        add_entry(Column(a, j, k), 1.0);
        add_entry(Column(a, j + 1, k), -1.0);
      }
    }
  }
  const int entries = static_cast<int>(ar.size()) - 1;
  if (entries > 0) glp_load_matrix(lp.get(), entries, ia.data(), ja.data(), ar.data());
  glp_smcp parm = glpk::QuietSimplexParams();
  parm.presolve = GLP_ON;
  RETURN_IF_ERROR(glpk::RunSimplex(lp.get(), parm, "the equalized-odds-from-scores LP"));

  double objective = 0;
  for (int a = 0; a < groups; ++a) {
    EoScoresGroup& g = solution.groups[a];
    g.p.resize(k);
    for (int j = 0; j < k; ++j) {
      // Clamping to the box only removes rounding-level excursions of the basic solution.
      g.p[j] = std::clamp(glp_get_col_prim(lp.get(), Column(a, j, k)), lower, upper);
    }
    if (options.monotone) {
      for (int j = 1; j < k; ++j) g.p[j] = std::max(g.p[j], g.p[j - 1]);  // rounding only
    }
    for (int j = 0; j < k; ++j) {
      g.derived_fpr += g.pmf_negative[j] * g.p[j];
      g.derived_tpr += g.pmf_positive[j] * g.p[j];
    }
    objective += g.mass_negative * g.derived_fpr - g.mass_positive * g.derived_tpr;
  }
  solution.noisy_error = objective + constant;
  if (noise_scale > 0 && options.gamma == 0 && groups >= 2) {
    solution.warnings.push_back(
        "gamma = 0 asks for exact equalized odds, which no differentially private algorithm can "
        "guarantee (Cummings et al. 2019, Thm. 1): the rates are equal on the noisy ROC curves "
        "only, and on the true data they differ by up to the curves' noise");
  }
  return solution;
}

absl::StatusOr<EoScoresSolution> FitEqualizedOddsFromScores(
    absl::Span<const int64_t> exact_counts, int num_groups, const ScoreGrid& grid, int64_t m,
    const EoScoresOptions& options, const dp::IntegerNoise& noise, absl::BitGenRef gen,
    std::vector<int64_t>* noisy_counts) {
  RETURN_IF_ERROR(options.Validate());
  RETURN_IF_ERROR(CheckEoScoresProblemSize(num_groups, grid, options));
  if (exact_counts.size() != static_cast<size_t>(2 * num_groups) * grid.k) {
    return absl::InvalidArgumentError(absl::StrCat(
        "exact_counts must hold 2 * num_groups * bins = ", 2 * num_groups * grid.k,
        " cells (got ", exact_counts.size(), ")"));
  }
  int64_t total = 0;
  for (size_t i = 0; i < exact_counts.size(); ++i) {
    if (exact_counts[i] < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "exact count at index ", i, " must be >= 0 (got ", exact_counts[i], ")"));
    }
    total += exact_counts[i];
  }
  // m is public (the matched rows); it must be the histogram's size or the masses are wrong.
  if (total != m) {
    return absl::InvalidArgumentError(
        absl::StrCat("m (", m, ") must equal the number of counted subjects (", total, ")"));
  }
  std::vector<int64_t> noisy(exact_counts.size());
  for (size_t i = 0; i < exact_counts.size(); ++i) {
    noisy[i] = noise.AddNoise(exact_counts[i], gen);
  }
  ASSIGN_OR_RETURN(EoScoresSolution solution,
                   SolveEqualizedOddsFromScores(noisy, num_groups, grid, m, options,
                                                noise.Scale()));
  if (noisy_counts != nullptr) *noisy_counts = std::move(noisy);
  return solution;
}

}  // namespace fairvault::core::postprocess
