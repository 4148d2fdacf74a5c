// The two step-5 solvers of the statistical-parity post-processor (ALGORITHMS.md §2): the LP on
// GLPK for any KS tolerance α, and an exact quantile-averaging solver for α = 0.
#include "core/postprocess/sp_couplings.h"

#include <glpk.h>

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "core/postprocess/glpk_util.h"
#include "core/util/status_macros.h"

namespace fairvault::core::postprocess::sp_internal {
namespace {

constexpr char kLpName[] = "the statistical-parity LP";

// GLPK's triplet form for glp_load_matrix: entries 1..ne, element 0 unused.
struct Triplets {
  std::vector<int> row{0}, col{0};
  std::vector<double> value{0.0};
  void Reserve(size_t n) {
    row.reserve(n + 1);
    col.reserve(n + 1);
    value.reserve(n + 1);
  }
  void Add(int r, int c, double v) {
    row.push_back(r);
    col.push_back(c);
    value.push_back(v);
  }
  int size() const { return static_cast<int>(value.size()) - 1; }
};

}  // namespace

// The LP of ALGORITHMS.md §2 step 5, in an equivalent sparse form.
//
// As specified, the KS constraints are dense prefix rows −α/2 <= Σ_{l<=t}(q_a[l] − b[l]) <= α/2
// (K·k²/2 nonzeros) beside the column rows Σ_j γ_a[j][l] = q_a[l]. We instead carry the running
// differences as bounded columns D_a[t] ∈ [−α/2, α/2] (t = 0..k−2, D_a[−1] = D_a[k−1] = 0) and
// merge the two row families into one "balance" row per (a, l):
//   Σ_j γ_a[j][l] − b[l] − D_a[l] + D_a[l−1] = 0,
// which says q_a[l] − b[l] = D_a[l] − D_a[l−1] with q_a[l] := Σ_j γ_a[j][l]; so D_a[t] is exactly
// the prefix sum of the spec, and q_a is no longer a variable. For α = 0 the D columns vanish
// (q_a = b). Pinning D_a[k−1] = 0 adds Σ_l b[l] = Σ_l q_a[l] = 1, which the spec leaves open
// (its last prefix row only gives |1 − Σ b| <= α/2); it does not change the optimum: for any
// feasible (γ, q, b) of the spec, B'(t) = (max_a Q_a(t) + min_a Q_a(t))/2 over the target CDFs
// Q_a is a CDF (max and min of non-decreasing functions are non-decreasing, B'(k−1) = 1), and
// |Q_a(t) − B'(t)| <= (max_a Q_a(t) − min_a Q_a(t))/2 <= α/2 because every Q_a(t) lies within
// α/2 of B(t); γ and q are unchanged, so is the objective. The barycenter we report is then a
// pmf. The objective is scaled by 1/(w_max·width²) (costs w_a/w_max·(j − l)²) for conditioning;
// the caller recomputes it from γ in the grid's units.
//
// Solver choice, measured on k = 100, K = 4 (40,000 γ columns, 800 rows) with GLPK 5.0:
// primal simplex with presolve 0.03-0.34 s, without presolve 0.19-0.46 s, the literal dense form
// 0.04-0.63 s; the dual simplex took 0.5-0.9 s, and 4-5 s with presolve. See bench/sp_bench.cc.
absl::StatusOr<Couplings> SolveCouplingsLp(const CouplingProblem& problem, double alpha) {
  const int num_groups = static_cast<int>(problem.pmf.size());
  const int k = static_cast<int>(problem.pmf[0].size());
  const bool relaxed = alpha > 0 && k > 1;
  const double max_weight = *std::max_element(problem.weights.begin(), problem.weights.end());

  // Columns (1-based): γ_a[j][l], then b[l], then D_a[t].
  auto gamma_col = [k](int a, int j, int l) { return 1 + (a * k + j) * k + l; };
  const int num_gamma = num_groups * k * k;
  auto b_col = [num_gamma](int l) { return num_gamma + 1 + l; };
  auto d_col = [num_gamma, k](int a, int t) { return num_gamma + k + 1 + a * (k - 1) + t; };
  const int num_cols = num_gamma + k + (relaxed ? num_groups * (k - 1) : 0);
  // Rows (1-based): the marginal row of (a, j), then the balance row of (a, l).
  auto marginal_row = [k](int a, int j) { return 1 + a * k + j; };
  auto balance_row = [k, num_groups](int a, int l) { return 1 + (num_groups + a) * k + l; };
  const int num_rows = 2 * num_groups * k;

  glpk::ScopedGlpk scoped_glpk;  // before the problem: it must outlive it
  glpk::ProbPtr lp(glp_create_prob());
  glp_prob* p = lp.get();
  glp_set_obj_dir(p, GLP_MIN);
  glp_add_cols(p, num_cols);
  glp_add_rows(p, num_rows);

  Triplets matrix;
  matrix.Reserve(2 * static_cast<size_t>(num_gamma) + static_cast<size_t>(num_groups) * k * 3);
  for (int a = 0; a < num_groups; ++a) {
    const double scale = problem.weights[a] / max_weight;
    for (int j = 0; j < k; ++j) {
      glp_set_row_bnds(p, marginal_row(a, j), GLP_FX, problem.pmf[a][j], problem.pmf[a][j]);
      for (int l = 0; l < k; ++l) {
        const int col = gamma_col(a, j, l);
        glp_set_col_bnds(p, col, GLP_LO, 0.0, 0.0);
        glp_set_obj_coef(p, col, scale * static_cast<double>((j - l) * (j - l)));
        matrix.Add(marginal_row(a, j), col, 1.0);
        matrix.Add(balance_row(a, l), col, 1.0);
      }
    }
    for (int l = 0; l < k; ++l) {
      glp_set_row_bnds(p, balance_row(a, l), GLP_FX, 0.0, 0.0);
      matrix.Add(balance_row(a, l), b_col(l), -1.0);
      if (relaxed) {
        if (l < k - 1) matrix.Add(balance_row(a, l), d_col(a, l), -1.0);
        if (l > 0) matrix.Add(balance_row(a, l), d_col(a, l - 1), 1.0);
      }
    }
  }
  for (int l = 0; l < k; ++l) glp_set_col_bnds(p, b_col(l), GLP_LO, 0.0, 0.0);
  if (relaxed) {
    for (int a = 0; a < num_groups; ++a) {
      for (int t = 0; t < k - 1; ++t) {
        glp_set_col_bnds(p, d_col(a, t), GLP_DB, -alpha / 2, alpha / 2);
      }
    }
  }
  glp_load_matrix(p, matrix.size(), matrix.row.data(), matrix.col.data(), matrix.value.data());

  // The LP is feasible (the product couplings onto b = p_0 with D = 0) and bounded (costs >= 0),
  // so a failure is the solver's. The presolver decides feasibility with its own tolerances on
  // the equality rows; should it ever misjudge the rounding-level mismatch between Σ_j p_a[j]
  // and 1, RunSimplex tries again from the standard basis without it.
  glp_smcp parm = glpk::QuietSimplexParams();
  parm.meth = GLP_PRIMAL;
  parm.presolve = GLP_ON;
  RETURN_IF_ERROR(glpk::RunSimplex(p, parm, kLpName));

  // Clamping at 0 only removes rounding-level excursions of the basic solution.
  Couplings out;
  out.gamma.assign(num_groups, std::vector<double>(static_cast<size_t>(k) * k));
  for (int a = 0; a < num_groups; ++a) {
    for (int j = 0; j < k; ++j) {
      for (int l = 0; l < k; ++l) {
        out.gamma[a][j * k + l] = std::max(glp_get_col_prim(p, gamma_col(a, j, l)), 0.0);
      }
    }
  }
  out.barycenter.resize(k);
  for (int l = 0; l < k; ++l) out.barycenter[l] = std::max(glp_get_col_prim(p, b_col(l)), 0.0);
  return out;
}

// Exact α = 0 solver. Why it is optimal (and so matches the LP's objective):
// At α = 0 every target equals the barycenter, q_a = b. For a fixed pmf b on the grid, the best
// coupling of p_a to b under squared cost in one dimension is the monotone (quantile) coupling,
// with cost ∫_0^1 (F_a⁻¹(u) − F_b⁻¹(u))² du, where F⁻¹ is the (left-continuous) quantile
// function. So the LP's optimum is the minimum over grid pmfs b of
//   ∫_0^1 Σ_a w_a (F_a⁻¹(u) − G(u))² du,   G = F_b⁻¹,
// and G ranges over exactly the non-decreasing step functions from (0, 1] to grid centres. For
// each u, Σ_a w_a (y_a − x)² = W·(x − m(u))² + Σ_a w_a (y_a − m(u))² with W = Σ_a w_a and
// m(u) = Σ_a w_a F_a⁻¹(u) / W, so the integrand is minimised pointwise by the grid centre nearest
// to m(u). m is non-decreasing (each F_a⁻¹ is), and rounding to the nearest grid point with a
// fixed tie rule is a non-decreasing map, so the pointwise minimiser G* is itself an admissible G:
// it is the global optimum. (At a tie both neighbours give the same integrand, so either rule
// gives the same objective.) Every F_a⁻¹ is constant between consecutive points of the merged set
// of all groups' CDF values, so G* is too; on each such piece of length Δ we add Δ to b at G*'s
// bin and to γ_a[F_a⁻¹ bin][G* bin] for every a, which is the monotone coupling of p_a and b.
// Because the grid is affine in the bin index, m(u) is computed on indices.
Couplings SolveCouplingsQuantile(const CouplingProblem& problem) {
  const int num_groups = static_cast<int>(problem.pmf.size());
  const int k = static_cast<int>(problem.pmf[0].size());
  double total_weight = 0;
  for (double w : problem.weights) total_weight += w;

  // CDFs, ending at exactly 1 so that every group's quantile function covers (0, 1].
  std::vector<std::vector<double>> cdf(num_groups, std::vector<double>(k));
  for (int a = 0; a < num_groups; ++a) {
    double running = 0;
    for (int j = 0; j < k; ++j) {
      running += problem.pmf[a][j];
      cdf[a][j] = std::min(running, 1.0);
    }
    cdf[a][k - 1] = 1.0;
  }

  Couplings out;
  out.gamma.assign(num_groups, std::vector<double>(static_cast<size_t>(k) * k, 0.0));
  out.barycenter.assign(k, 0.0);
  // bin[a] = F_a⁻¹ on the current piece (u, next]: the first bin whose CDF exceeds u.
  std::vector<int> bin(num_groups, 0);
  double u = 0;
  while (u < 1.0) {
    double next = 1.0;
    double weighted_index = 0;
    for (int a = 0; a < num_groups; ++a) {
      while (bin[a] < k - 1 && cdf[a][bin[a]] <= u) ++bin[a];
      next = std::min(next, cdf[a][bin[a]]);
      weighted_index += problem.weights[a] * bin[a];
    }
    // floor(x + 1/2) rounds ties up; it is non-decreasing in x, as the argument needs.
    const int target =
        std::clamp(static_cast<int>(std::floor(weighted_index / total_weight + 0.5)), 0, k - 1);
    const double length = next - u;
    out.barycenter[target] += length;
    for (int a = 0; a < num_groups; ++a) out.gamma[a][bin[a] * k + target] += length;
    u = next;
  }
  return out;
}

}  // namespace fairvault::core::postprocess::sp_internal
