// RunSimplex on an LP GLPK's presolved primal simplex cycles on: a mixture LP of the reductions
// learner as a job drew it (scikit-learn's check_fit2d_1feature, 10 rows), whose entry for a
// moment equal to its bound is the rounding residue 8.7e-18. Before the iteration cap and the
// retry, the job's only worker spun in glp_simplex for good.
#include "core/postprocess/glpk_util.h"

#include <glpk.h>

#include <vector>

#include "gtest/gtest.h"

namespace fairvault::core::postprocess::glpk {
namespace {

constexpr double kResidue = 8.67361737988404e-18;

// min c·x subject to rows r_1..r_8 (<= 0) and the weights summing to 1 (x_1..x_7 the
// responses, x_8 the slack priced 100), as glp_write_lp printed it.
ProbPtr CyclingMixtureLp() {
  const std::vector<double> cost = {0.03, 0.02, 0.025, 0.03, 0.03, 0.035, 0.5, 100};
  const std::vector<std::vector<double>> rows = {
      {0.0303125, 0.016875, 0.0771875, 0.1375, 0.049375, -0.0075, -0.01},
      {-0.0503125, -0.036875, -0.0971875, -0.1575, -0.069375, -0.0125, -0.01},
      {-0.0333333333333333, -0.0166666666666666, -0.176666666666667, -0.0166666666666666,
       -0.133333333333333, -0.16, -0.01},
      {0.0133333333333333, -0.0033333333333334, 0.156666666666667, -0.0033333333333334,
       0.113333333333333, 0.14, -0.01},
      {0.0294444444444444, -0.03, -0.04, -0.05, -0.06, -0.0144444444444444, -0.01},
      {-0.0494444444444445, 0.01, 0.02, 0.03, 0.04, -0.00555555555555555, -0.01},
      {kResidue, 0.01, 0.01, 0.01, kResidue, kResidue, -0.01},
      {-0.02, -0.03, -0.03, -0.03, -0.02, -0.02, -0.01},
  };
  ProbPtr lp(glp_create_prob());
  glp_set_obj_dir(lp.get(), GLP_MIN);
  glp_add_cols(lp.get(), 8);
  for (int c = 0; c < 8; ++c) {
    glp_set_col_bnds(lp.get(), c + 1, GLP_LO, 0, 0);
    glp_set_obj_coef(lp.get(), c + 1, cost[c]);
  }
  glp_add_rows(lp.get(), 9);
  std::vector<int> index = {0, 1, 2, 3, 4, 5, 6, 7, 8};
  for (int r = 0; r < 8; ++r) {
    std::vector<double> value = {0};
    value.insert(value.end(), rows[r].begin(), rows[r].end());
    value.push_back(-1);  // the slack
    glp_set_mat_row(lp.get(), r + 1, 8, index.data(), value.data());
    glp_set_row_bnds(lp.get(), r + 1, GLP_UP, 0, 0);
  }
  std::vector<double> ones(9, 1.0);
  glp_set_mat_row(lp.get(), 9, 7, index.data(), ones.data());
  glp_set_row_bnds(lp.get(), 9, GLP_FX, 1, 1);
  return lp;
}

glp_smcp PresolvedPrimal() {
  glp_smcp parm = QuietSimplexParams();
  parm.presolve = GLP_ON;
  return parm;
}

TEST(GlpkUtil, TheCappedPresolvedSimplexStopsOnTheCyclingLp) {
  // The premise: GLPK alone does not solve it (it would run forever without a cap).
  ScopedGlpk scoped;
  ProbPtr lp = CyclingMixtureLp();
  glp_smcp parm = PresolvedPrimal();
  parm.it_lim = SimplexIterationLimit(lp.get());
  EXPECT_EQ(parm.it_lim, 10'000 + 50 * (9 + 8));
  EXPECT_EQ(glp_simplex(lp.get(), &parm), GLP_EITLIM);
}

TEST(GlpkUtil, RunSimplexSolvesTheCyclingLpOnItsRetry) {
  ScopedGlpk scoped;
  ProbPtr lp = CyclingMixtureLp();
  ASSERT_TRUE(RunSimplex(lp.get(), PresolvedPrimal(), "the cycling LP").ok());
  // The optimum glpsol finds without the presolver: weights on responses only (no slack).
  EXPECT_NEAR(glp_get_obj_val(lp.get()), 0.300236118319, 1e-9);
  EXPECT_NEAR(glp_get_col_prim(lp.get(), 8), 0.0, 1e-12);
  double total = 0;
  for (int c = 1; c <= 7; ++c) total += glp_get_col_prim(lp.get(), c);
  EXPECT_NEAR(total, 1.0, 1e-9);
}

TEST(GlpkUtil, AnInfeasibleLpIsAnErrorNamingIt) {
  ScopedGlpk scoped;
  ProbPtr lp(glp_create_prob());
  glp_add_cols(lp.get(), 1);
  glp_set_col_bnds(lp.get(), 1, GLP_DB, 0, 1);
  glp_add_rows(lp.get(), 1);
  int index[2] = {0, 1};
  double value[2] = {0, 1};
  glp_set_mat_row(lp.get(), 1, 1, index, value);
  glp_set_row_bnds(lp.get(), 1, GLP_LO, 2, 0);  // x >= 2 with x <= 1
  absl::Status s = RunSimplex(lp.get(), PresolvedPrimal(), "the impossible LP");
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_NE(s.message().find("the impossible LP"), absl::string_view::npos) << s;
}

}  // namespace
}  // namespace fairvault::core::postprocess::glpk
