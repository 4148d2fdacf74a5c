// Tests of the DP equalized-odds post-processor: the LP against brute force and exact vertex
// enumeration, the ε = ∞ limit against an independent Hardt et al. optimum, a noisy end-to-end
// run on a synthetic population, thread safety, and input validation.
// Over 500 lines as one file: every suite checks against the independent restatement of the LP at
// the top.
#include "core/postprocess/equalized_odds.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/fairness/metrics.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fairvault::core::postprocess {
namespace {

using ::fairvault::testing::StatusIs;
using ::testing::HasSubstr;

constexpr double kInf = std::numeric_limits<double>::infinity();

// ---- An independent restatement of the §1 LP, used to check the solver's answers. -----------

// |coef · p| <= bound, p indexed [ŷ·K + a].
struct AbsRow {
  std::vector<double> coef;
  double bound;
};

struct ReferenceLp {
  int k = 0;
  std::vector<double> cell;  // clamped q[ŷ][a][y]
  std::vector<double> mass;  // q_ay at 2a + y
  std::vector<double> fp, tp;
  std::vector<double> objective;  // at ŷ·K + a
  double constant = 0;            // Σ q[ŷ][a][1]
  std::vector<AbsRow> rows;
  std::vector<double> fpr_slack, tpr_slack;  // per group, as the header documents
};

ReferenceLp BuildReferenceLp(const EoCounts& counts, const EoOptions& options) {
  ReferenceLp lp;
  const int k = counts.num_groups;
  const double m = static_cast<double>(options.m);
  lp.k = k;
  lp.cell.resize(4 * k);
  for (int i = 0; i < 4 * k; ++i) lp.cell[i] = std::max<double>(counts.n[i], 0) / m;
  auto q = [&](int yhat, int a, int y) { return lp.cell[(yhat * k + a) * 2 + y]; };
  lp.mass.resize(2 * k);
  lp.fp.resize(k);
  lp.tp.resize(k);
  for (int a = 0; a < k; ++a) {
    for (int y = 0; y < 2; ++y) lp.mass[2 * a + y] = std::max(q(0, a, y) + q(1, a, y), 1 / m);
    lp.fp[a] = std::min(q(1, a, 0), lp.mass[2 * a]) / lp.mass[2 * a];
    lp.tp[a] = std::min(q(1, a, 1), lp.mass[2 * a + 1]) / lp.mass[2 * a + 1];
  }
  lp.objective.resize(2 * k);
  for (int yhat = 0; yhat < 2; ++yhat) {
    for (int a = 0; a < k; ++a) {
      lp.objective[yhat * k + a] = q(yhat, a, 0) - q(yhat, a, 1);
      lp.constant += q(yhat, a, 1);
    }
  }
  auto noise = [&](double mass) {
    return std::isinf(options.epsilon)
               ? 0.0
               : 4 * std::log(4.0 * k / options.beta) / (mass * m * options.epsilon);
  };
  lp.fpr_slack.assign(k, 0);
  lp.tpr_slack.assign(k, 0);
  for (int a = 1; a < k; ++a) {
    for (int b = 0; b < a; ++b) {
      if (!options.all_pairs && b != 0) continue;
      const double s_fp = noise(std::min(lp.mass[2 * a], lp.mass[2 * b]));
      const double s_tp = noise(std::min(lp.mass[2 * a + 1], lp.mass[2 * b + 1]));
      for (const auto& [rate, s] : {std::pair(&lp.fp, s_fp), std::pair(&lp.tp, s_tp)}) {
        AbsRow row{std::vector<double>(2 * k, 0.0), options.gamma + s};
        row.coef[k + a] += (*rate)[a];
        row.coef[a] += 1 - (*rate)[a];
        row.coef[k + b] -= (*rate)[b];
        row.coef[b] -= 1 - (*rate)[b];
        lp.rows.push_back(std::move(row));
      }
      for (int g : {a, b}) {
        if (!options.all_pairs && g == 0) continue;
        lp.fpr_slack[g] = std::max(lp.fpr_slack[g], s_fp);
        lp.tpr_slack[g] = std::max(lp.tpr_slack[g], s_tp);
      }
    }
  }
  return lp;
}

double Dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// Largest amount by which p breaks a row or a [0,1] bound (<= 0 when feasible).
double MaxViolation(const ReferenceLp& lp, const std::vector<double>& p) {
  double worst = -kInf;
  for (const AbsRow& row : lp.rows) worst = std::max(worst, std::abs(Dot(row.coef, p)) - row.bound);
  for (double v : p) worst = std::max({worst, -v, v - 1});
  return worst;
}

std::vector<double> SolutionVector(const EoSolution& s) {
  const int k = static_cast<int>(s.groups.size());
  std::vector<double> p(2 * k);
  for (int a = 0; a < k; ++a) {
    p[a] = s.groups[a].p0;
    p[k + a] = s.groups[a].p1;
  }
  return p;
}

// Best objective over the grid {0, h, ..., 1}^{2K}, h = 1/steps, among feasible points.
double GridMinimum(const ReferenceLp& lp, int steps) {
  const int n = 2 * lp.k;
  std::vector<int> idx(n, 0);
  std::vector<double> p(n, 0.0);
  double best = kInf;
  while (true) {
    for (int j = 0; j < n; ++j) p[j] = static_cast<double>(idx[j]) / steps;
    bool feasible = true;
    for (const AbsRow& row : lp.rows) {
      if (std::abs(Dot(row.coef, p)) > row.bound) {
        feasible = false;
        break;
      }
    }
    if (feasible) best = std::min(best, Dot(lp.objective, p));
    int j = 0;
    while (j < n && ++idx[j] > steps) idx[j++] = 0;
    if (j == n) break;
  }
  return best;
}

// Solves the square system A x = b by Gaussian elimination with partial pivoting; false if
// (numerically) singular.
bool SolveSquare(std::vector<std::vector<double>> a, std::vector<double> b,
                 std::vector<double>* x) {
  const int n = static_cast<int>(b.size());
  for (int c = 0; c < n; ++c) {
    int pivot = c;
    for (int r = c + 1; r < n; ++r) {
      if (std::abs(a[r][c]) > std::abs(a[pivot][c])) pivot = r;
    }
    if (std::abs(a[pivot][c]) < 1e-10) return false;
    std::swap(a[c], a[pivot]);
    std::swap(b[c], b[pivot]);
    for (int r = c + 1; r < n; ++r) {
      const double f = a[r][c] / a[c][c];
      for (int cc = c; cc < n; ++cc) a[r][cc] -= f * a[c][cc];
      b[r] -= f * b[c];
    }
  }
  x->assign(n, 0.0);
  for (int r = n - 1; r >= 0; --r) {
    double s = b[r];
    for (int c = r + 1; c < n; ++c) s -= a[r][c] * (*x)[c];
    (*x)[r] = s / a[r][r];
  }
  return true;
}

// Exact LP optimum over p ∈ [lower, upper]^{2K} by enumerating every vertex of the (bounded,
// non-empty) feasible polytope: each choice of 2K constraints made tight gives a candidate point.
double VertexMinimum(const ReferenceLp& lp, double lower = 0, double upper = 1) {
  const int n = 2 * lp.k;
  std::vector<std::vector<double>> halfspace_a;  // a · p <= b
  std::vector<double> halfspace_b;
  for (int j = 0; j < n; ++j) {
    std::vector<double> e(n, 0.0);
    e[j] = 1;
    halfspace_a.push_back(e);
    halfspace_b.push_back(upper);
    e[j] = -1;
    halfspace_a.push_back(e);
    halfspace_b.push_back(-lower);
  }
  for (const AbsRow& row : lp.rows) {
    std::vector<double> neg(row.coef);
    for (double& v : neg) v = -v;
    halfspace_a.push_back(row.coef);
    halfspace_b.push_back(row.bound);
    halfspace_a.push_back(neg);
    halfspace_b.push_back(row.bound);
  }
  const int total = static_cast<int>(halfspace_b.size());
  std::vector<int> choice(n);
  for (int i = 0; i < n; ++i) choice[i] = i;
  double best = kInf;
  std::vector<double> x;
  while (true) {
    std::vector<std::vector<double>> a;
    std::vector<double> b;
    for (int i : choice) {
      a.push_back(halfspace_a[i]);
      b.push_back(halfspace_b[i]);
    }
    if (SolveSquare(a, b, &x)) {
      bool feasible = true;
      for (int h = 0; h < total && feasible; ++h) {
        feasible = Dot(halfspace_a[h], x) <= halfspace_b[h] + 1e-11;
      }
      if (feasible) best = std::min(best, Dot(lp.objective, x));
    }
    int i = n - 1;
    while (i >= 0 && choice[i] == total - n + i) --i;
    if (i < 0) break;
    ++choice[i];
    for (int j = i + 1; j < n; ++j) choice[j] = choice[j - 1] + 1;
  }
  return best;
}

// Random table of an informative classifier: cells with ŷ = y hold 25–60 subjects, cells with
// ŷ ≠ y 0–20, so that rates differ across groups and the fairness constraints bind.
// If `noisy`, the counts are then perturbed by integers in [-6, 6] so that some cells can go
// negative, as released counts can.
EoCounts RandomCounts(int k, uint64_t seed, bool noisy, int64_t* m) {
  std::mt19937_64 gen(seed);
  std::uniform_int_distribution<int64_t> right(25, 60), wrong(0, 20), jitter(-6, 6);
  EoCounts counts;
  counts.num_groups = k;
  counts.n.resize(4 * k);
  *m = 0;
  for (int yhat = 0; yhat < 2; ++yhat) {
    for (int a = 0; a < k; ++a) {
      for (int y = 0; y < 2; ++y) {
        counts.at(yhat, a, y) = yhat == y ? right(gen) : wrong(gen);
        *m += counts.at(yhat, a, y);
      }
    }
  }
  if (noisy) {
    for (int64_t& c : counts.n) c += jitter(gen);
  }
  return counts;
}

void ExpectMatchesReference(const EoSolution& s, const ReferenceLp& lp) {
  const std::vector<double> p = SolutionVector(s);
  EXPECT_LE(MaxViolation(lp, p), 1e-9);
  EXPECT_NEAR(s.objective, Dot(lp.objective, p), 1e-12);
  EXPECT_NEAR(s.noisy_error, s.objective + lp.constant, 1e-12);
  for (int a = 0; a < lp.k; ++a) {
    const EoGroupResult& g = s.groups[a];
    EXPECT_NEAR(g.noisy_fpr, lp.fp[a], 1e-12) << "group " << a;
    EXPECT_NEAR(g.noisy_tpr, lp.tp[a], 1e-12) << "group " << a;
    EXPECT_NEAR(g.derived_fpr, lp.fp[a] * g.p1 + (1 - lp.fp[a]) * g.p0, 1e-12);
    EXPECT_NEAR(g.derived_tpr, lp.tp[a] * g.p1 + (1 - lp.tp[a]) * g.p0, 1e-12);
    EXPECT_NEAR(g.fpr_slack, lp.fpr_slack[a], 1e-12) << "group " << a;
    EXPECT_NEAR(g.tpr_slack, lp.tpr_slack[a], 1e-12) << "group " << a;
  }
}

// ---- (a) LP against brute force -----------------------------------------------------------

struct BruteForceCase {
  int k;
  uint64_t seed;
  bool noisy;
  double gamma;
  double epsilon;
  bool all_pairs;
  int grid_steps;
};

void PrintTo(const BruteForceCase& c, std::ostream* os) {
  *os << "K=" << c.k << " seed=" << c.seed << (c.noisy ? " noisy" : " exact")
      << " gamma=" << c.gamma << " epsilon=" << c.epsilon << (c.all_pairs ? " all_pairs" : "")
      << " grid=1/" << c.grid_steps;
}

class LpVersusBruteForceTest : public ::testing::TestWithParam<BruteForceCase> {};

TEST_P(LpVersusBruteForceTest, OptimalFeasibleAndWithinGridResolution) {
  const BruteForceCase& c = GetParam();
  EoOptions options;
  EoCounts counts = RandomCounts(c.k, c.seed, c.noisy, &options.m);
  options.gamma = c.gamma;
  options.epsilon = c.epsilon;
  options.all_pairs = c.all_pairs;
  auto solution = SolveEqualizedOddsLp(counts, options);
  ASSERT_OK(solution);
  const ReferenceLp lp = BuildReferenceLp(counts, options);
  ExpectMatchesReference(*solution, lp);

  // Exact: the optimum sits at a vertex of the polytope.
  EXPECT_NEAR(solution->objective, VertexMinimum(lp), 1e-9);

  // Every feasible grid point is LP-feasible, so the LP can only be better.
  const double grid = GridMinimum(lp, c.grid_steps);
  EXPECT_LE(solution->objective, grid + 1e-9);
  // And the grid cannot be much worse: with h the grid step and c the smallest row bound, the
  // point p_t = (1 − t)p* + t·(½,…,½), t = h/c, has margin h in every row (all derived rates of
  // the constant ½ are equal), so its nearest grid point (≤ h/2 per coordinate, ≤ h per row) is
  // feasible. Its objective exceeds the LP's by at most (t/2 + h/2)·Σ|objective coefficients|.
  const double h = 1.0 / c.grid_steps;
  double min_bound = kInf, coef_l1 = 0;
  for (const AbsRow& row : lp.rows) min_bound = std::min(min_bound, row.bound);
  for (double v : lp.objective) coef_l1 += std::abs(v);
  ASSERT_LE(h / min_bound, 1.0);
  EXPECT_LE(grid - solution->objective, (h / (2 * min_bound) + h / 2) * coef_l1 + 1e-12);
}

INSTANTIATE_TEST_SUITE_P(SmallTables, LpVersusBruteForceTest,
                         ::testing::Values(BruteForceCase{2, 7, false, 0.05, kInf, false, 40},
                                           BruteForceCase{2, 2, true, 0.10, 20.0, false, 40},
                                           BruteForceCase{2, 3, true, 0.15, 50.0, false, 40},
                                           BruteForceCase{2, 4, false, 0.05, 10.0, true, 40},
                                           BruteForceCase{3, 5, true, 0.20, 30.0, true, 10},
                                           BruteForceCase{3, 6, false, 0.15, kInf, false, 10}));

TEST(SolveEqualizedOddsLpTest, TightConstraintsMatchVertexEnumeration) {
  // gamma = 0 and no noise: the feasible set has no interior, so grids are useless, but the
  // vertex enumeration still gives the exact optimum.
  for (uint64_t seed : {11, 12, 13, 14}) {
    EoOptions options;
    options.gamma = 0;
    options.epsilon = kInf;
    EoCounts counts = RandomCounts(seed == 14 ? 3 : 2, seed, seed % 2 == 0, &options.m);
    options.all_pairs = seed == 14;
    auto solution = SolveEqualizedOddsLp(counts, options);
    ASSERT_OK(solution);
    const ReferenceLp lp = BuildReferenceLp(counts, options);
    ExpectMatchesReference(*solution, lp);
    EXPECT_NEAR(solution->objective, VertexMinimum(lp), 1e-9) << "seed " << seed;
  }
}

TEST(SolveEqualizedOddsLpTest, DecisionFloorKeepsEveryProbabilityInsideTheBox) {
  // With decision_floor 0.1 every p lies in [0.1, 0.9], the fairness rows still hold, the optimum
  // is the exact optimum over the smaller box, and it can only be worse than without a floor.
  int floor_binds = 0;
  for (uint64_t seed : {21, 22, 23, 24, 25}) {
    EoOptions options;
    options.gamma = seed % 2 ? 0.05 : 0.0;
    options.epsilon = seed == 25 ? kInf : 30.0;
    options.all_pairs = seed == 24;
    EoCounts counts = RandomCounts(seed == 24 ? 3 : 2, seed, seed % 2 == 0, &options.m);
    auto unfloored = SolveEqualizedOddsLp(counts, options);
    ASSERT_OK(unfloored);
    options.decision_floor = 0.1;
    auto floored = SolveEqualizedOddsLp(counts, options);
    ASSERT_OK(floored);

    const ReferenceLp lp = BuildReferenceLp(counts, options);
    ExpectMatchesReference(*floored, lp);
    for (double p : SolutionVector(*floored)) {
      EXPECT_GE(p, 0.1) << "seed " << seed;
      EXPECT_LE(p, 0.9) << "seed " << seed;
    }
    EXPECT_NEAR(floored->objective, VertexMinimum(lp, 0.1, 0.9), 1e-9) << "seed " << seed;
    EXPECT_GE(floored->objective, unfloored->objective - 1e-12) << "seed " << seed;

    const std::vector<double> free_p = SolutionVector(*unfloored);
    if (std::any_of(free_p.begin(), free_p.end(), [](double p) { return p < 0.1 || p > 0.9; })) {
      ++floor_binds;
      EXPECT_GT(floored->objective, unfloored->objective + 1e-6) << "seed " << seed;
    }
  }
  EXPECT_GT(floor_binds, 0);  // the cases exercise a floor that actually changes the answer
}

TEST(SolveEqualizedOddsLpTest, DecisionFloorJustBelowHalfIsStillFeasible) {
  // p = ½ everywhere satisfies every row, even gamma = 0 without noise slack.
  EoOptions options;
  options.gamma = 0;
  options.epsilon = kInf;
  options.all_pairs = true;
  options.decision_floor = 0.49;
  EoCounts counts = RandomCounts(3, 31, false, &options.m);
  auto solution = SolveEqualizedOddsLp(counts, options);
  ASSERT_OK(solution);
  ExpectMatchesReference(*solution, BuildReferenceLp(counts, options));
  for (double p : SolutionVector(*solution)) {
    EXPECT_GE(p, 0.49);
    EXPECT_LE(p, 0.51);
  }
}

// ---- (b) ε = ∞ against the non-private Hardt et al. optimum --------------------------------

// A table from per-group sizes of y=1 / y=0 and the classifier's TP / FP counts.
EoCounts TableFromRates(const std::vector<std::array<int64_t, 4>>& groups, int64_t* m) {
  // groups[a] = {positives, true positives, negatives, false positives}
  EoCounts counts;
  counts.num_groups = static_cast<int>(groups.size());
  counts.n.assign(4 * groups.size(), 0);
  *m = 0;
  for (int a = 0; a < counts.num_groups; ++a) {
    const auto& [pos, tp, neg, fp] = groups[a];
    counts.at(1, a, 1) = tp;
    counts.at(0, a, 1) = pos - tp;
    counts.at(1, a, 0) = fp;
    counts.at(0, a, 0) = neg - fp;
    *m += pos + neg;
  }
  return counts;
}

struct Point {
  double f, t;  // (FPR, TPR)
};

double Cross(Point o, Point a, Point b) {
  return (a.f - o.f) * (b.t - o.t) - (a.t - o.t) * (b.f - o.f);
}

// The rates group a can reach by mixing: hull of (0,0), (FP,TP), (1,1), (1−FP,1−TP), in order.
std::vector<Point> AchievableQuad(double fp, double tp) {
  return {{0, 0}, {fp, tp}, {1, 1}, {1 - fp, 1 - tp}};
}

bool InConvexPolygon(const std::vector<Point>& poly, Point x, double tol) {
  bool nonneg = true, nonpos = true;
  for (size_t i = 0; i < poly.size(); ++i) {
    const double c = Cross(poly[i], poly[(i + 1) % poly.size()], x);
    nonneg = nonneg && c >= -tol;
    nonpos = nonpos && c <= tol;
  }
  return nonneg || nonpos;
}

// Hardt et al.'s optimum for two groups: a common (FPR, TPR) point in both quads minimising
// Q0·f + Q1·(1 − t), by grid search (step 1/steps) and exactly over the candidate vertices of the
// intersection (vertices of either quad, and edge–edge crossings).
struct HardtOptimum {
  double grid;
  double exact;
};

HardtOptimum ComputeHardtOptimum(const std::vector<Point>& quad0, const std::vector<Point>& quad1,
                                 double q0, double q1, int steps) {
  auto error = [&](Point x) { return q0 * x.f + q1 * (1 - x.t); };
  HardtOptimum best{kInf, kInf};
  for (int i = 0; i <= steps; ++i) {
    for (int j = 0; j <= steps; ++j) {
      const Point x{static_cast<double>(i) / steps, static_cast<double>(j) / steps};
      if (InConvexPolygon(quad0, x, 0) && InConvexPolygon(quad1, x, 0)) {
        best.grid = std::min(best.grid, error(x));
      }
    }
  }
  std::vector<Point> candidates(quad0);
  candidates.insert(candidates.end(), quad1.begin(), quad1.end());
  for (size_t i = 0; i < 4; ++i) {
    for (size_t j = 0; j < 4; ++j) {
      const Point a = quad0[i], b = quad0[(i + 1) % 4], c = quad1[j], d = quad1[(j + 1) % 4];
      const double den = (b.f - a.f) * (d.t - c.t) - (b.t - a.t) * (d.f - c.f);
      if (std::abs(den) < 1e-15) continue;
      const double s = ((c.f - a.f) * (d.t - c.t) - (c.t - a.t) * (d.f - c.f)) / den;
      candidates.push_back({a.f + s * (b.f - a.f), a.t + s * (b.t - a.t)});
    }
  }
  for (Point x : candidates) {
    if (InConvexPolygon(quad0, x, 1e-12) && InConvexPolygon(quad1, x, 1e-12)) {
      best.exact = std::min(best.exact, error(x));
    }
  }
  return best;
}

TEST(SolveEqualizedOddsLpTest, InfiniteEpsilonMatchesHardtOptimum) {
  // {positives, true positives, negatives, false positives} per group.
  const std::vector<std::vector<std::array<int64_t, 4>>> tables = {
      {{400, 320, 600, 120}, {300, 180, 700, 210}},
      {{500, 450, 500, 50}, {200, 100, 800, 80}},
      {{250, 150, 750, 300}, {600, 540, 400, 40}},
  };
  for (const auto& table : tables) {
    EoOptions options;
    options.gamma = 0;
    options.epsilon = kInf;
    const EoCounts counts = TableFromRates(table, &options.m);
    auto solution = SolveEqualizedOddsLp(counts, options);
    ASSERT_OK(solution);
    EXPECT_TRUE(solution->warnings.empty());

    // Exactly equal derived rates, recomputed from p and the exact group rates.
    const double m = static_cast<double>(options.m);
    double rates[2][2];  // [a][fpr, tpr]
    std::vector<Point> quads[2];
    double q0 = 0, q1 = 0, expected_error = 0;
    for (int a = 0; a < 2; ++a) {
      const auto& [pos, tp, neg, fp] = table[a];
      const double fpr = static_cast<double>(fp) / neg, tpr = static_cast<double>(tp) / pos;
      const EoGroupResult& g = solution->groups[a];
      rates[a][0] = fpr * g.p1 + (1 - fpr) * g.p0;
      rates[a][1] = tpr * g.p1 + (1 - tpr) * g.p0;
      quads[a] = AchievableQuad(fpr, tpr);
      q0 += neg / m;
      q1 += pos / m;
      expected_error += (neg / m) * rates[a][0] + (pos / m) * (1 - rates[a][1]);
    }
    EXPECT_NEAR(rates[0][0], rates[1][0], 1e-9);
    EXPECT_NEAR(rates[0][1], rates[1][1], 1e-9);
    EXPECT_NEAR(solution->noisy_error, expected_error, 1e-12);

    constexpr int kSteps = 1000;
    const HardtOptimum hardt = ComputeHardtOptimum(quads[0], quads[1], q0, q1, kSteps);
    EXPECT_NEAR(solution->noisy_error, hardt.exact, 1e-9);
    // The grid optimum is feasible for the LP, hence never better; and within two grid steps
    // (the error is 1-Lipschitz in the max-norm since q0 + q1 = 1).
    EXPECT_LE(solution->noisy_error, hardt.grid + 1e-9);
    EXPECT_LE(hardt.grid - solution->noisy_error, 2.0 / kSteps);
  }
}

TEST(SolveEqualizedOddsLpTest, LooseGammaGivesUnconstrainedOptimum) {
  EoOptions options;
  options.gamma = 1;  // rates differ by at most 1 anyway
  options.epsilon = kInf;
  // Group 0 is better than chance in every cell: p = (0 on ŷ=0, 1 on ŷ=1). In group 1 the ŷ=1
  // cell holds more negatives (210) than positives (180), so its best p1 is 0.
  const EoCounts counts =
      TableFromRates({{{400, 320, 600, 120}}, {{300, 180, 700, 210}}}, &options.m);
  auto solution = SolveEqualizedOddsLp(counts, options);
  ASSERT_OK(solution);
  EXPECT_EQ(solution->groups[0].p0, 0.0);
  EXPECT_EQ(solution->groups[0].p1, 1.0);
  EXPECT_EQ(solution->groups[1].p0, 0.0);
  EXPECT_EQ(solution->groups[1].p1, 0.0);
  // The error of that rule, by hand: group 0 errs on 120 FP + 80 FN, group 1 on all 300
  // positives.
  EXPECT_NEAR(solution->noisy_error, (120.0 + 80.0 + 300.0) / 2000.0, 1e-12);

  for (uint64_t seed : {21, 22, 23}) {
    EoOptions loose = options;
    const EoCounts random = RandomCounts(3, seed, false, &loose.m);
    auto s = SolveEqualizedOddsLp(random, loose);
    ASSERT_OK(s);
    for (int a = 0; a < 3; ++a) {
      for (int yhat = 0; yhat < 2; ++yhat) {
        const int64_t pos = random.at(yhat, a, 1), neg = random.at(yhat, a, 0);
        if (pos == neg) continue;  // either p is optimal
        const double p = yhat == 0 ? s->groups[a].p0 : s->groups[a].p1;
        EXPECT_EQ(p, pos > neg ? 1.0 : 0.0) << "seed " << seed << " group " << a;
      }
    }
  }
}

TEST(SolveEqualizedOddsLpTest, SingleGroupHasNoConstraints) {
  EoOptions options;
  options.epsilon = 1;
  const EoCounts counts = TableFromRates({{{40, 30, 60, 10}}}, &options.m);
  auto s = SolveEqualizedOddsLp(counts, options);
  ASSERT_OK(s);
  ASSERT_EQ(s->groups.size(), 1u);
  EXPECT_EQ(s->groups[0].p0, 0.0);
  EXPECT_EQ(s->groups[0].p1, 1.0);
  EXPECT_EQ(s->groups[0].fpr_slack, 0.0);
}

// ---- Noisy inputs: clamping, slack, warnings ---------------------------------------------------

TEST(SolveEqualizedOddsLpTest, ClampsNegativeCellsAndFloorsMasses) {
  EoCounts counts;
  counts.num_groups = 2;
  counts.n.assign(8, 0);
  counts.at(0, 0, 0) = 50;
  counts.at(1, 0, 0) = 10;
  counts.at(0, 0, 1) = 10;
  counts.at(1, 0, 1) = 30;
  // Group 1: y=0 cells −10 and 5 (mass 5/m after clamping, FP = 1); y=1 cells both negative
  // (mass floored at 1/m, TP = 0).
  counts.at(0, 1, 0) = -10;
  counts.at(1, 1, 0) = 5;
  counts.at(0, 1, 1) = -3;
  counts.at(1, 1, 1) = -1;
  EoOptions options;
  options.m = 100;
  options.epsilon = 2;
  options.gamma = 0.05;
  options.min_group_count = 0;  // the paper's LP: constrain group 1 however small it is
  auto s = SolveEqualizedOddsLp(counts, options);
  ASSERT_OK(s);
  EXPECT_DOUBLE_EQ(s->groups[1].noisy_fpr, 1.0);
  EXPECT_DOUBLE_EQ(s->groups[1].noisy_tpr, 0.0);
  // TPR slack uses the floored mass 1/m: 4 ln(4·2/0.05) / (0.01·100·2).
  EXPECT_NEAR(s->groups[1].tpr_slack, 4 * std::log(160.0) / 2.0, 1e-12);
  EXPECT_NEAR(s->groups[1].fpr_slack, 4 * std::log(160.0) / (0.05 * 100 * 2), 1e-12);
  EXPECT_EQ(s->groups[0].fpr_slack, 0.0);
  ExpectMatchesReference(*s, BuildReferenceLp(counts, options));
  // Group 1's masses are tiny: the warning must name it (and not group 0).
  ASSERT_GE(s->warnings.size(), 1u);
  EXPECT_THAT(s->warnings[0], HasSubstr("group 1"));
  EXPECT_THAT(s->warnings[0], HasSubstr("too loose to bind"));
  EXPECT_THAT(s->warnings, ::testing::Not(::testing::Contains(HasSubstr("group 0"))));

  // By default (threshold 8 ln(4K/β)/ε ≈ 20.3 subjects) group 1, with 1 noisy positive, is
  // excluded and keeps its predictions; group 0 alone has nothing to be equalized with.
  options.min_group_count.reset();
  s = SolveEqualizedOddsLp(counts, options);
  ASSERT_OK(s);
  EXPECT_NEAR(s->min_group_count, 8 * std::log(160.0) / 2, 1e-12);
  EXPECT_TRUE(s->groups[1].excluded);
  EXPECT_FALSE(s->groups[0].excluded);
  for (const EoGroupResult& g : s->groups) {
    EXPECT_EQ(g.p0, 0.0);
    EXPECT_EQ(g.p1, 1.0);
    EXPECT_EQ(g.fpr_slack, 0.0);
  }
  EXPECT_THAT(s->warnings, ::testing::Contains(HasSubstr("nothing to equalize")));
}

TEST(SolveEqualizedOddsLpTest, AllPairsReportsLargestSlackPerGroup) {
  EoOptions options;
  options.epsilon = 1;
  options.gamma = 0.01;
  options.all_pairs = true;
  const EoCounts counts = TableFromRates(
      {{{4000, 3000, 6000, 1000}}, {{1000, 600, 2000, 500}}, {{3000, 2000, 1000, 100}}},
      &options.m);
  auto s = SolveEqualizedOddsLp(counts, options);
  ASSERT_OK(s);
  const ReferenceLp lp = BuildReferenceLp(counts, options);
  ExpectMatchesReference(*s, lp);
  // Slack of a pair: 4 ln(4K/β)/(min count·ε) with K = 3, ε = 1.
  auto slack = [](double count) { return 4 * std::log(4 * 3 / 0.05) / count; };
  // Every group is paired with group 1 (fewest positives, 1000) and group 2 (fewest negatives,
  // 1000), so each group's largest slack is set by those; group 0 is no exception here.
  for (int a = 0; a < 3; ++a) {
    EXPECT_NEAR(s->groups[a].tpr_slack, slack(1000), 1e-12) << "group " << a;
    EXPECT_NEAR(s->groups[a].fpr_slack, slack(1000), 1e-12) << "group " << a;
  }
  EXPECT_TRUE(s->warnings.empty());

  // Against the reference group only: group 0 reports 0 and each other group its own pair.
  options.all_pairs = false;
  s = SolveEqualizedOddsLp(counts, options);
  ASSERT_OK(s);
  ExpectMatchesReference(*s, BuildReferenceLp(counts, options));
  EXPECT_EQ(s->groups[0].tpr_slack, 0.0);
  EXPECT_EQ(s->groups[0].fpr_slack, 0.0);
  EXPECT_NEAR(s->groups[1].tpr_slack, slack(1000), 1e-12);  // min(1000, 4000)
  EXPECT_NEAR(s->groups[1].fpr_slack, slack(2000), 1e-12);  // min(2000, 6000)
  EXPECT_NEAR(s->groups[2].tpr_slack, slack(3000), 1e-12);  // min(3000, 4000)
  EXPECT_NEAR(s->groups[2].fpr_slack, slack(1000), 1e-12);  // min(1000, 6000)
  EXPECT_TRUE(s->warnings.empty());
}

TEST(SolveEqualizedOddsLpTest, GammaZeroUnderPrivacyWarnsThatExactnessIsImpossible) {
  EoOptions options;
  options.gamma = 0;
  options.epsilon = 1;
  const EoCounts counts =
      TableFromRates({{{4000, 3000, 6000, 1000}}, {{3000, 2000, 7000, 1000}}}, &options.m);
  auto s = SolveEqualizedOddsLp(counts, options);
  ASSERT_OK(s);
  ASSERT_EQ(s->warnings.size(), 1u);
  EXPECT_THAT(s->warnings[0], HasSubstr("exact equalized odds"));
  // Without noise gamma = 0 is exactly achievable on the data: no warning.
  options.epsilon = kInf;
  s = SolveEqualizedOddsLp(counts, options);
  ASSERT_OK(s);
  EXPECT_TRUE(s->warnings.empty());
}

// ---- (c) Noisy end to end ------------------------------------------------------------------

struct Population {
  std::vector<int> prediction, label, group;
};

// m subjects over groups with the given shares, base rates and classifier (TPR, FPR).
Population MakePopulation(int m, uint64_t seed) {
  const double share[3] = {0.5, 0.3, 0.2};
  const double base[3] = {0.4, 0.3, 0.5};
  const double tpr[3] = {0.85, 0.7, 0.6};
  const double fpr[3] = {0.10, 0.2, 0.3};
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> u(0, 1);
  Population pop;
  for (int i = 0; i < m; ++i) {
    const double r = u(gen);
    const int a = r < share[0] ? 0 : r < share[0] + share[1] ? 1 : 2;
    const int y = u(gen) < base[a];
    const int yhat = u(gen) < (y ? tpr[a] : fpr[a]);
    pop.prediction.push_back(yhat);
    pop.label.push_back(y);
    pop.group.push_back(a);
  }
  return pop;
}

// Expected rates of the derived predictor on the exact population, as fairness::GroupRates.
std::vector<fairness::GroupRates> DerivedRates(const Population& pop, const EoSolution& s, int k) {
  auto exact = fairness::ComputeGroupRates(pop.prediction, pop.label, pop.group, k);
  EXPECT_OK(exact);
  std::vector<fairness::GroupRates> derived = *exact;
  for (int a = 0; a < k; ++a) {
    const fairness::GroupRates& e = (*exact)[a];
    const EoGroupResult& g = s.groups[a];
    derived[a].fpr = e.fpr * g.p1 + (1 - e.fpr) * g.p0;
    derived[a].tpr = e.tpr * g.p1 + (1 - e.tpr) * g.p0;
  }
  return derived;
}

double ExpectedError(const EoCounts& exact, const EoSolution& s, int64_t m) {
  double err = 0;
  for (int a = 0; a < exact.num_groups; ++a) {
    for (int yhat = 0; yhat < 2; ++yhat) {
      const double p = yhat ? s.groups[a].p1 : s.groups[a].p0;
      err += exact.at(yhat, a, 0) * p + exact.at(yhat, a, 1) * (1 - p);
    }
  }
  return err / static_cast<double>(m);
}

TEST(FitEqualizedOddsTest, NoisyFitMeetsTheoremBoundsOnTrueData) {
  // ε = 1 on counts with L1 sensitivity 2 (one subject changing group moves two cells): discrete
  // Laplace scale 2/ε. Jagielski et al. Thm 3.1 bounds, w.p. ≥ 1 − β, the TRUE gap of every
  // constrained pair by γ + 8L/(min q̂·m·ε − 4L), L = ln(4K/β), q̂ the exact masses (the LP's own
  // slack 4L/(min q·m·ε) is only half of it: the LP spends that slack, and the noise adds up to
  // as much again), and the true error by the non-private γ-fair optimum + 24·K·L/(m·ε). Here
  // the bounds are ≈4 noise standard deviations of the rates wide, so each of the 10 seeded runs
  // fails with probability far below β.
  constexpr int kM = 20000;
  auto noise = dp::MakeDiscreteLaplaceNoise(2.0);
  ASSERT_OK(noise);
  for (int k : {2, 3}) {
    for (uint64_t seed = 1; seed <= 5; ++seed) {
      const Population pop = MakePopulation(kM, 1000 * k + seed);
      std::vector<int> group = pop.group;
      if (k == 2) {
        for (int& a : group) a = std::min(a, 1);  // merge groups 1 and 2
      }
      const Population used{pop.prediction, pop.label, group};
      auto exact = CountEo(used.prediction, used.label, used.group, k);
      ASSERT_OK(exact);
      EoOptions options;
      options.m = kM;
      options.epsilon = 1;
      options.gamma = seed % 2 ? 0.0 : 0.02;
      options.all_pairs = k == 3;
      std::mt19937_64 gen(seed);
      EoCounts noisy;
      auto s = FitEqualizedOdds(*exact, options, **noise, gen, &noisy);
      ASSERT_OK(s);

      // The released counts are noisy versions of the exact ones.
      ASSERT_EQ(noisy.num_groups, k);
      ASSERT_EQ(noisy.n.size(), exact->n.size());
      int changed = 0;
      for (size_t i = 0; i < noisy.n.size(); ++i) {
        changed += noisy.n[i] != exact->n[i];
        EXPECT_LE(std::abs(noisy.n[i] - exact->n[i]), 60);  // P(|noise| > 60) ≈ 1e-13
      }
      EXPECT_GT(changed, 0);
      ExpectMatchesReference(*s, BuildReferenceLp(noisy, options));

      // True gaps of the derived predictor, by expectation over its coins.
      const auto derived = DerivedRates(used, *s, k);
      const double log_term = std::log(4.0 * k / options.beta);
      double max_bound = 0;
      for (int a = 1; a < k; ++a) {
        for (int b = 0; b < a; ++b) {
          if (!options.all_pairs && b != 0) continue;
          const auto& ra = derived[a];
          const auto& rb = derived[b];
          const double fp_bound =
              options.gamma +
              8 * log_term /
                  (std::min(ra.negatives, rb.negatives) * options.epsilon - 4 * log_term);
          const double tp_bound =
              options.gamma +
              8 * log_term /
                  (std::min(ra.positives, rb.positives) * options.epsilon - 4 * log_term);
          EXPECT_LE(std::abs(ra.fpr - rb.fpr), fp_bound) << "k " << k << " seed " << seed;
          EXPECT_LE(std::abs(ra.tpr - rb.tpr), tp_bound) << "k " << k << " seed " << seed;
          max_bound = std::max({max_bound, fp_bound, tp_bound});
        }
      }
      EXPECT_LE(fairness::EqualizedOddsViolation(derived), max_bound);

      // Utility: the noisy error estimates the true error of the derived predictor (12 cells of
      // noise with std ≈ 2.8 over m: ≈ 5e-4), and the true error is within the theorem's
      // margin of the non-private optimum with the same γ.
      const double true_error = ExpectedError(*exact, *s, kM);
      EXPECT_NEAR(s->noisy_error, true_error, 0.005);
      EoOptions exact_options = options;
      exact_options.epsilon = kInf;
      auto best = SolveEqualizedOddsLp(*exact, exact_options);
      ASSERT_OK(best);
      EXPECT_LE(true_error, best->noisy_error + 24 * k * log_term / (kM * options.epsilon));
      if (options.gamma == 0) {
        EXPECT_THAT(s->warnings, ::testing::Contains(HasSubstr("exact equalized odds")));
      }
    }
  }
}

TEST(FitEqualizedOddsTest, ZeroNoiseReproducesExactSolve) {
  const Population pop = MakePopulation(5000, 7);
  auto exact = CountEo(pop.prediction, pop.label, pop.group, 3);
  ASSERT_OK(exact);
  EoOptions options;
  options.m = 5000;
  options.epsilon = 1;
  options.gamma = 0.01;
  std::mt19937_64 gen(1);
  EoCounts noisy;
  auto fit = FitEqualizedOdds(*exact, options, *dp::MakeZeroNoise(), gen, &noisy);
  ASSERT_OK(fit);
  EXPECT_EQ(noisy.n, exact->n);
  auto direct = SolveEqualizedOddsLp(*exact, options);
  ASSERT_OK(direct);
  EXPECT_EQ(SolutionVector(*fit), SolutionVector(*direct));
}

TEST(CountEoTest, CountsEveryCell) {
  // Rows (ŷ, y, a).
  const std::vector<int> prediction{1, 1, 0, 0, 1, 0, 1};
  const std::vector<int> label{1, 0, 1, 0, 1, 1, 1};
  const std::vector<int> group{0, 0, 0, 0, 1, 1, 1};
  auto counts = CountEo(prediction, label, group, 2);
  ASSERT_OK(counts);
  EXPECT_EQ(counts->num_groups, 2);
  EXPECT_EQ(counts->at(1, 0, 1), 1);
  EXPECT_EQ(counts->at(1, 0, 0), 1);
  EXPECT_EQ(counts->at(0, 0, 1), 1);
  EXPECT_EQ(counts->at(0, 0, 0), 1);
  EXPECT_EQ(counts->at(1, 1, 1), 2);
  EXPECT_EQ(counts->at(0, 1, 1), 1);
  EXPECT_EQ(counts->at(1, 1, 0), 0);
  EXPECT_EQ(counts->at(0, 1, 0), 0);
  // The flattened layout ((ŷ·K + a)·2 + y) is part of the contract.
  EXPECT_EQ(counts->n, (std::vector<int64_t>{1, 1, 0, 1, 1, 1, 0, 2}));
}

// ---- Thread safety -------------------------------------------------------------------------

TEST(SolveEqualizedOddsLpTest, ConcurrentSolvesAgreeWithSerialSolves) {
  // Each thread solves its own table repeatedly; any sharing of GLPK state between threads
  // would show up as a result differing from the serial one (or a crash).
  constexpr int kThreads = 8, kSolvesPerThread = 40;
  std::vector<EoCounts> tables(kThreads);
  std::vector<EoOptions> options(kThreads);
  std::vector<std::vector<double>> expected(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    options[t].epsilon = 5;
    options[t].gamma = 0.02;
    options[t].all_pairs = t % 2 == 0;
    tables[t] = RandomCounts(2 + t % 4, 100 + t, true, &options[t].m);
    auto serial = SolveEqualizedOddsLp(tables[t], options[t]);
    ASSERT_OK(serial);
    expected[t] = SolutionVector(*serial);
  }
  std::vector<int> mismatches(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kSolvesPerThread; ++i) {
        auto s = SolveEqualizedOddsLp(tables[t], options[t]);
        if (!s.ok() || SolutionVector(*s) != expected[t]) ++mismatches[t];
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(mismatches[t], 0) << "thread " << t;
}

// ---- (d) Validation -------------------------------------------------------------------------

TEST(EoOptionsTest, ValidatesEachField) {
  EoOptions ok;
  ok.m = 10;
  EXPECT_OK(ok.Validate());
  ok.epsilon = kInf;
  EXPECT_OK(ok.Validate());

  auto with = [&](auto mutate) {
    EoOptions o;
    o.m = 10;
    mutate(o);
    return o.Validate();
  };
  const auto kBad = absl::StatusCode::kInvalidArgument;
  EXPECT_THAT(with([](EoOptions& o) { o.gamma = -0.1; }), StatusIs(kBad, "gamma must be"));
  EXPECT_THAT(with([](EoOptions& o) { o.gamma = kInf; }), StatusIs(kBad, "gamma must be"));
  EXPECT_THAT(with([](EoOptions& o) { o.gamma = std::nan(""); }), StatusIs(kBad, "gamma"));
  EXPECT_THAT(with([](EoOptions& o) { o.beta = 0; }), StatusIs(kBad, "beta must be in (0, 1)"));
  EXPECT_THAT(with([](EoOptions& o) { o.beta = 1; }), StatusIs(kBad, "beta must be in (0, 1)"));
  EXPECT_THAT(with([](EoOptions& o) { o.beta = std::nan(""); }), StatusIs(kBad, "beta"));
  EXPECT_THAT(with([](EoOptions& o) { o.epsilon = 0; }), StatusIs(kBad, "epsilon must be > 0"));
  EXPECT_THAT(with([](EoOptions& o) { o.epsilon = -1; }), StatusIs(kBad, "(got -1)"));
  EXPECT_THAT(with([](EoOptions& o) { o.epsilon = std::nan(""); }), StatusIs(kBad, "epsilon"));
  EXPECT_THAT(with([](EoOptions& o) { o.m = 0; }), StatusIs(kBad, "m must be > 0 (got 0)"));
  EXPECT_THAT(with([](EoOptions& o) { o.m = -5; }), StatusIs(kBad, "number of subjects"));
  EXPECT_OK(with([](EoOptions& o) { o.decision_floor = 0.49; }));
  for (double floor : {-0.1, 0.5, 0.7, kInf, -kInf, std::nan("")}) {
    EXPECT_THAT(with([floor](EoOptions& o) { o.decision_floor = floor; }),
                StatusIs(kBad, "decision_floor must be finite and in [0, 0.5)"))
        << "floor " << floor;
  }
  EXPECT_THAT(with([](EoOptions& o) { o.decision_floor = 0.5; }), StatusIs(kBad, "(got 0.5)"));
}

TEST(CountEoTest, RejectsBadRows) {
  const auto kBad = absl::StatusCode::kInvalidArgument;
  const std::vector<int> ok{0, 1, 0, 1};
  EXPECT_THAT(CountEo(std::vector<int>{0, 1, 0, 2}, ok, ok, 2),
              StatusIs(kBad, "prediction at row 3 must be 0 or 1 (got 2)"));
  EXPECT_THAT(CountEo(ok, std::vector<int>{0, 5, 0, 1}, ok, 2),
              StatusIs(kBad, "label at row 1 must be 0 or 1 (got 5)"));
  EXPECT_THAT(CountEo(ok, ok, std::vector<int>{0, 1, 3, 1}, 2),
              StatusIs(kBad, "group at row 2 must be in [0, 2) (got 3)"));
  EXPECT_THAT(CountEo(ok, ok, std::vector<int>{-1, 1, 0, 1}, 2), StatusIs(kBad, "group at row 0"));
  EXPECT_THAT(CountEo(ok, std::vector<int>{0, 1}, ok, 2), StatusIs(kBad, "same length"));
  EXPECT_THAT(CountEo(ok, ok, ok, 0), StatusIs(kBad, "num_groups must be >= 1"));
}

TEST(SolveEqualizedOddsLpTest, RejectsBadCountsAndOptions) {
  const auto kBad = absl::StatusCode::kInvalidArgument;
  EoOptions options;
  options.m = 10;
  EoCounts counts;
  counts.num_groups = 2;
  counts.n.assign(7, 1);
  EXPECT_THAT(SolveEqualizedOddsLp(counts, options), StatusIs(kBad, "4 * num_groups = 8"));
  counts.num_groups = 0;
  counts.n.clear();
  EXPECT_THAT(SolveEqualizedOddsLp(counts, options), StatusIs(kBad, "num_groups must be >= 1"));
  counts.num_groups = 2;
  counts.n.assign(8, 1);
  options.beta = 2;
  EXPECT_THAT(SolveEqualizedOddsLp(counts, options), StatusIs(kBad, "beta"));
  options.beta = 0.05;
  options.decision_floor = 0.6;
  EXPECT_THAT(SolveEqualizedOddsLp(counts, options), StatusIs(kBad, "decision_floor"));
}

TEST(SolveEqualizedOddsLpTest, RejectsLpTooLargeForTheSolver) {
  EoOptions options;
  options.m = 1000;
  options.all_pairs = true;
  EoCounts counts;
  counts.num_groups = 300;  // 4 · 300 · 299 / 2 = 179400 rows: allowed
  counts.n.assign(4 * counts.num_groups, 1);
  EXPECT_OK(SolveEqualizedOddsLp(counts, options));
  counts.num_groups = 400;  // 319200 rows
  counts.n.assign(4 * counts.num_groups, 1);
  EXPECT_THAT(SolveEqualizedOddsLp(counts, options),
              StatusIs(absl::StatusCode::kInvalidArgument, "would have 319200 constraint rows"));
  options.all_pairs = false;  // 1596 rows
  EXPECT_OK(SolveEqualizedOddsLp(counts, options));
}

TEST(FitEqualizedOddsTest, RejectsInconsistentExactCounts) {
  const auto kBad = absl::StatusCode::kInvalidArgument;
  std::mt19937_64 gen(1);
  EoCounts counts;
  counts.num_groups = 2;
  counts.n.assign(8, 5);
  EoOptions options;
  options.m = 40;
  EXPECT_OK(FitEqualizedOdds(counts, options, *dp::MakeZeroNoise(), gen, nullptr));
  options.m = 41;
  EXPECT_THAT(FitEqualizedOdds(counts, options, *dp::MakeZeroNoise(), gen, nullptr),
              StatusIs(kBad, "must equal the number of counted subjects (40)"));
  options.m = 40;
  counts.n[3] = -1;
  counts.n[4] = 11;
  EXPECT_THAT(FitEqualizedOdds(counts, options, *dp::MakeZeroNoise(), gen, nullptr),
              StatusIs(kBad, "exact count at index 3 must be >= 0 (got -1)"));
  options.epsilon = 0;
  EXPECT_THAT(FitEqualizedOdds(counts, options, *dp::MakeZeroNoise(), gen, nullptr),
              StatusIs(kBad, "epsilon"));
}

}  // namespace
}  // namespace fairvault::core::postprocess
