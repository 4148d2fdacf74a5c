// Tests of the statistical-parity post-processor (ALGORITHMS.md §2): the LP against the exact
// quantile solver on random instances, the KS constraints and the α trade-off, hand-checked
// barycenters, the CDF repair, grid and histogram validation, the fair sampler's frequencies,
// and exact parity of the transported pmfs.
// Over 500 lines as one file: the suites share the random instances and the exact quantile solver
// they are checked against.
#include "core/postprocess/statistical_parity.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fairvault::core::postprocess {
namespace {

using ::fairvault::testing::StatusIs;
using ::testing::DoubleNear;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

SpOptions Options(double alpha, SpSolver solver) {
  SpOptions options;
  options.alpha = alpha;
  options.solver = solver;
  return options;
}

// γ_a[j][l] = p_a[j]·g_a[j][l], the coupling the solution describes (a row without mass
// contributes nothing, whatever its transport row).
double Coupling(const SpSolution& s, int a, int j, int l, int k) {
  return s.pmf[a][j] * s.transport[a][j * k + l];
}

// Independent recomputation of Σ_a w_a Σ_{j,l} γ_a[j][l] (v_j − v_l)² from the solution.
double RecomputedObjective(const SpSolution& s, const ScoreGrid& grid) {
  const int k = grid.k;
  double total = 0;
  for (size_t a = 0; a < s.pmf.size(); ++a) {
    for (int j = 0; j < k; ++j) {
      for (int l = 0; l < k; ++l) {
        const double d = grid.Center(j) - grid.Center(l);
        total += s.weights[a] * Coupling(s, a, j, l, k) * d * d;
      }
    }
  }
  return total;
}

// Checks what every solution must satisfy: shapes, valid pmfs and transport rows, the pushforward
// of p_a by g_a equal to the reported target q_a, the reported objective, and the KS ball
// |Σ_{l<=t}(q_a[l] − b[l])| <= α/2 for every prefix t.
void ExpectValidSolution(const SpSolution& s, int num_groups, const ScoreGrid& grid, double alpha,
                         double tol = 1e-9) {
  const int k = grid.k;
  ASSERT_EQ(s.weights.size(), num_groups);
  ASSERT_EQ(s.pmf.size(), num_groups);
  ASSERT_EQ(s.targets.size(), num_groups);
  ASSERT_EQ(s.transport.size(), num_groups);
  ASSERT_EQ(s.barycenter.size(), k);
  double b_sum = 0;
  for (double x : s.barycenter) {
    EXPECT_GE(x, -tol);
    b_sum += x;
  }
  EXPECT_NEAR(b_sum, 1.0, tol);
  for (int a = 0; a < num_groups; ++a) {
    EXPECT_GE(s.weights[a], 1e-6);
    ASSERT_EQ(s.pmf[a].size(), k);
    ASSERT_EQ(s.targets[a].size(), k);
    ASSERT_EQ(s.transport[a].size(), static_cast<size_t>(k) * k);
    double p_sum = 0;
    for (double x : s.pmf[a]) {
      EXPECT_GE(x, 0.0);
      p_sum += x;
    }
    EXPECT_NEAR(p_sum, 1.0, 1e-12);
    for (int j = 0; j < k; ++j) {
      double row = 0;
      for (int l = 0; l < k; ++l) {
        EXPECT_GE(s.transport[a][j * k + l], 0.0);
        row += s.transport[a][j * k + l];
      }
      EXPECT_NEAR(row, 1.0, 1e-12) << "group " << a << " row " << j;
    }
    double prefix = 0;
    for (int l = 0; l < k; ++l) {
      double pushed = 0;
      for (int j = 0; j < k; ++j) pushed += Coupling(s, a, j, l, k);
      EXPECT_NEAR(pushed, s.targets[a][l], tol) << "group " << a << " bin " << l;
      EXPECT_GE(s.targets[a][l], -tol);
      prefix += s.targets[a][l] - s.barycenter[l];
      EXPECT_LE(std::abs(prefix), alpha / 2 + tol) << "group " << a << " prefix " << l;
    }
  }
  EXPECT_NEAR(RecomputedObjective(s, grid), s.objective, 1e-9 * std::max(1.0, s.objective));
}

// Random masses as fractions of n: unequal group sizes, a random share of empty bins, and
// optionally Laplace-like noise that makes some cells negative.
std::vector<double> RandomMasses(int num_groups, int k, bool noisy, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<double> group_share(num_groups);
  double share_total = 0;
  for (double& g : group_share) share_total += (g = 0.05 + unit(rng));
  const double zero_fraction = unit(rng) * 0.6;
  std::vector<double> masses(static_cast<size_t>(num_groups) * k);
  for (int a = 0; a < num_groups; ++a) {
    std::vector<double> h(k);
    double sum = 0;
    for (double& x : h) sum += (x = unit(rng) < zero_fraction ? 0.0 : unit(rng));
    if (sum == 0) sum = h[0] = 1.0;
    for (int j = 0; j < k; ++j) {
      double m = h[j] / sum * group_share[a] / share_total;
      if (noisy) m += (unit(rng) - 0.5) * 0.02;
      masses[static_cast<size_t>(a) * k + j] = m;
    }
  }
  return masses;
}

// ---- The LP against the exact α = 0 solver ---------------------------------------------------

TEST(SolveStatisticalParityTest, LpAndQuantileSolverAgreeOnRandomInstances) {
  const int kBins[] = {1, 2, 5, 12, 36};
  int instances = 0;
  for (int seed = 0; seed < 36; ++seed) {
    std::mt19937_64 rng(seed);
    const int num_groups = 2 + seed % 3;
    const int k = kBins[(seed / 3) % 5];
    const bool noisy = seed % 4 == 3;
    const ScoreGrid grid{seed % 2 == 0 ? 0.0 : -1.0, seed % 2 == 0 ? 1.0 : 3.0, k};
    const std::vector<double> masses = RandomMasses(num_groups, k, noisy, rng);
    SCOPED_TRACE(::testing::Message() << "seed " << seed << ", K " << num_groups << ", k " << k);

    auto lp =
        SolveStatisticalParity(masses, num_groups, grid, Options(0, SpSolver::kLinearProgram));
    auto quantile =
        SolveStatisticalParity(masses, num_groups, grid, Options(0, SpSolver::kQuantile));
    ASSERT_OK(lp);
    ASSERT_OK(quantile);
    EXPECT_EQ(lp->used, SpSolver::kLinearProgram);
    EXPECT_EQ(quantile->used, SpSolver::kQuantile);
    EXPECT_NEAR(lp->objective, quantile->objective, 1e-6);
    EXPECT_GE(quantile->objective, 0.0);
    EXPECT_EQ(lp->pmf, quantile->pmf);
    EXPECT_EQ(lp->weights, quantile->weights);
    ExpectValidSolution(*lp, num_groups, grid, 0);
    ExpectValidSolution(*quantile, num_groups, grid, 0);
    ++instances;
  }
  EXPECT_GE(instances, 30);
}

TEST(SolveStatisticalParityTest, AutoUsesQuantileAtZeroAlphaAndLpOtherwise) {
  std::mt19937_64 rng(5);
  const ScoreGrid grid{0, 1, 8};
  const std::vector<double> masses = RandomMasses(3, 8, false, rng);
  auto exact = SolveStatisticalParity(masses, 3, grid, Options(0, SpSolver::kAuto));
  auto relaxed = SolveStatisticalParity(masses, 3, grid, Options(0.1, SpSolver::kAuto));
  ASSERT_OK(exact);
  ASSERT_OK(relaxed);
  EXPECT_EQ(exact->used, SpSolver::kQuantile);
  EXPECT_EQ(relaxed->used, SpSolver::kLinearProgram);
}

// ---- α > 0 -----------------------------------------------------------------------------------

// Largest KS distance between two groups' repaired CDFs: the smallest α at which every group can
// keep its own distribution (b with CDF (max_a + min_a)/2 is within α/2 of all of them).
double MaxPairwiseKs(const std::vector<std::vector<double>>& pmf) {
  const size_t k = pmf[0].size();
  std::vector<double> cdf(pmf.size(), 0.0);
  double ks = 0;
  for (size_t t = 0; t < k; ++t) {
    for (size_t a = 0; a < pmf.size(); ++a) cdf[a] += pmf[a][t];
    ks = std::max(
        ks, *std::max_element(cdf.begin(), cdf.end()) - *std::min_element(cdf.begin(), cdf.end()));
  }
  return ks;
}

TEST(SolveStatisticalParityTest, RelaxedSolutionsRespectKsBallAndObjectiveFallsWithAlpha) {
  const int kBins[] = {2, 5, 12, 36};
  for (int seed = 100; seed < 108; ++seed) {
    std::mt19937_64 rng(seed);
    const int num_groups = 2 + seed % 3;
    const int k = kBins[seed % 4];
    const ScoreGrid grid{0, 1, k};
    const std::vector<double> masses = RandomMasses(num_groups, k, seed % 2 == 1, rng);
    SCOPED_TRACE(::testing::Message() << "seed " << seed << ", K " << num_groups << ", k " << k);
    double previous = kInf;
    for (double alpha : {0.0, 0.05, 0.2, 1.0}) {
      auto s = SolveStatisticalParity(masses, num_groups, grid,
                                      Options(alpha, SpSolver::kLinearProgram));
      ASSERT_OK(s);
      ExpectValidSolution(*s, num_groups, grid, alpha);
      EXPECT_GE(s->objective, 0.0);
      EXPECT_LE(s->objective, previous + 1e-9) << "alpha " << alpha;
      previous = s->objective;
      if (alpha == 1.0) {
        // Radius 1/2 holds every family of CDFs, so nobody needs to move.
        EXPECT_NEAR(s->objective, 0.0, 1e-9);
        for (int a = 0; a < num_groups; ++a) {
          for (int j = 0; j < k; ++j) {
            if (s->pmf[a][j] > 1e-6) {
              EXPECT_NEAR(s->transport[a][j * k + j], 1.0, 1e-6);
            }
          }
        }
      }
    }
  }
}

TEST(SolveStatisticalParityTest, ObjectiveVanishesExactlyFromTheLargestPairwiseKsDistance) {
  std::mt19937_64 rng(7);
  const int k = 12;
  const ScoreGrid grid{0, 1, k};
  const std::vector<double> masses = RandomMasses(3, k, false, rng);
  auto exact = SolveStatisticalParity(masses, 3, grid, Options(0, SpSolver::kQuantile));
  ASSERT_OK(exact);
  const double ks = MaxPairwiseKs(exact->pmf);
  ASSERT_GT(ks, 0.1);
  auto at = SolveStatisticalParity(masses, 3, grid, Options(ks, SpSolver::kLinearProgram));
  auto below =
      SolveStatisticalParity(masses, 3, grid, Options(ks - 0.05, SpSolver::kLinearProgram));
  ASSERT_OK(at);
  ASSERT_OK(below);
  EXPECT_NEAR(at->objective, 0.0, 1e-9);
  EXPECT_GT(below->objective, 1e-6);
  EXPECT_LT(below->objective, exact->objective);
}

TEST(SolveStatisticalParityTest, QuantileSolverRejectsPositiveAlpha) {
  const ScoreGrid grid{0, 1, 4};
  const std::vector<double> masses(8, 0.125);
  EXPECT_THAT(SolveStatisticalParity(masses, 2, grid, Options(0.1, SpSolver::kQuantile)),
              StatusIs(absl::StatusCode::kInvalidArgument, "quantile solver needs alpha = 0"));
}

// ---- Hand-checked cases ------------------------------------------------------------------------

TEST(SolveStatisticalParityTest, PointMassesMeetAtTheWeightedMiddleBin) {
  const int k = 9;
  const ScoreGrid grid{0, 9, k};  // width 1, centres 0.5 .. 8.5
  for (SpSolver solver : {SpSolver::kLinearProgram, SpSolver::kQuantile}) {
    // Equal weights 0.5: bins 0 and 8 meet at bin 4; each moves 4, cost 0.5·16 + 0.5·16.
    std::vector<double> masses(2 * k, 0.0);
    masses[0] = 0.5;
    masses[k + 8] = 0.5;
    auto s = SolveStatisticalParity(masses, 2, grid, Options(0, solver));
    ASSERT_OK(s);
    EXPECT_NEAR(s->barycenter[4], 1.0, 1e-9);
    EXPECT_NEAR(s->objective, 16.0, 1e-8);
    EXPECT_NEAR(s->transport[0][0 * k + 4], 1.0, 1e-9);
    EXPECT_NEAR(s->transport[1][8 * k + 4], 1.0, 1e-9);

    // Weights 0.75 / 0.25: the weighted mean index is 0.25·8 = 2; cost 0.75·4 + 0.25·36.
    masses[0] = 0.75;
    masses[k + 8] = 0.25;
    s = SolveStatisticalParity(masses, 2, grid, Options(0, solver));
    ASSERT_OK(s);
    EXPECT_NEAR(s->barycenter[2], 1.0, 1e-9);
    EXPECT_NEAR(s->objective, 0.75 * 4 + 0.25 * 36, 1e-8);
    // Empty bins map to themselves.
    EXPECT_EQ(s->transport[0][5 * k + 5], 1.0);
    EXPECT_EQ(s->transport[1][0 * k + 0], 1.0);
  }
}

TEST(SolveStatisticalParityTest, TieBetweenTwoBinsCostsTheSameForBothSolvers) {
  const ScoreGrid grid{0, 2, 2};  // centres 0.5, 1.5; equal weights put the mean on the midpoint
  const std::vector<double> masses = {0.5, 0.0, 0.0, 0.5};
  auto lp = SolveStatisticalParity(masses, 2, grid, Options(0, SpSolver::kLinearProgram));
  auto q = SolveStatisticalParity(masses, 2, grid, Options(0, SpSolver::kQuantile));
  ASSERT_OK(lp);
  ASSERT_OK(q);
  EXPECT_NEAR(lp->objective, 0.5, 1e-9);  // one group moves by 1 with weight 1/2
  EXPECT_NEAR(q->objective, 0.5, 1e-9);
}

TEST(SolveStatisticalParityTest, IdenticalGroupsStayPut) {
  const int k = 6;
  const ScoreGrid grid{0, 1, k};
  const std::vector<double> pmf = {0.1, 0.0, 0.3, 0.25, 0.0, 0.35};
  std::vector<double> masses;
  for (double share : {0.2, 0.5, 0.3}) {
    for (double p : pmf) masses.push_back(share * p);
  }
  for (SpSolver solver : {SpSolver::kLinearProgram, SpSolver::kQuantile}) {
    auto s = SolveStatisticalParity(masses, 3, grid, Options(0, solver));
    ASSERT_OK(s);
    EXPECT_NEAR(s->objective, 0.0, 1e-12);
    for (int a = 0; a < 3; ++a) {
      const double shares[] = {0.2, 0.5, 0.3};
      EXPECT_NEAR(s->weights[a], shares[a], 1e-15);
      for (int j = 0; j < k; ++j) {
        EXPECT_NEAR(s->pmf[a][j], pmf[j], 1e-12);
        for (int l = 0; l < k; ++l) {
          EXPECT_NEAR(s->transport[a][j * k + l], j == l ? 1.0 : 0.0, 1e-9);
        }
      }
    }
    for (int l = 0; l < k; ++l) EXPECT_NEAR(s->barycenter[l], pmf[l], 1e-9);
  }
}

TEST(SolveStatisticalParityTest, OneBinIsTrivial) {
  const ScoreGrid grid{0, 1, 1};
  for (SpSolver solver : {SpSolver::kLinearProgram, SpSolver::kQuantile}) {
    auto s = SolveStatisticalParity({0.3, -0.01}, 2, grid, Options(0, solver));
    ASSERT_OK(s);
    EXPECT_EQ(s->objective, 0.0);
    EXPECT_THAT(s->weights, ElementsAre(0.3, 1e-6));
    EXPECT_THAT(s->transport, ElementsAre(ElementsAre(1.0), ElementsAre(1.0)));
  }
}

// ---- Exact parity after transport ------------------------------------------------------------

TEST(SolveStatisticalParityTest, TransportedPmfsAllEqualTheBarycenterAtZeroAlpha) {
  for (int seed = 200; seed < 206; ++seed) {
    std::mt19937_64 rng(seed);
    const int num_groups = 2 + seed % 3;
    const int k = seed % 2 == 0 ? 36 : 12;
    const ScoreGrid grid{1, 4, k};
    const std::vector<double> masses = RandomMasses(num_groups, k, seed % 3 == 0, rng);
    for (SpSolver solver : {SpSolver::kLinearProgram, SpSolver::kQuantile}) {
      auto s = SolveStatisticalParity(masses, num_groups, grid, Options(0, solver));
      ASSERT_OK(s);
      for (int a = 0; a < num_groups; ++a) {
        for (int l = 0; l < k; ++l) {
          double pushed = 0;
          for (int j = 0; j < k; ++j) pushed += s->pmf[a][j] * s->transport[a][j * k + l];
          EXPECT_NEAR(pushed, s->barycenter[l], 1e-9)
              << "seed " << seed << " group " << a << " bin " << l;
        }
      }
    }
  }
}

TEST(SolveStatisticalParityTest, ConcurrentSolvesAreIndependent) {
  // GLPK keeps its environment per thread; any sharing would corrupt results or crash.
  std::mt19937_64 rng(11);
  const ScoreGrid grid{0, 1, 12};
  const std::vector<double> masses = RandomMasses(3, 12, false, rng);
  auto reference = SolveStatisticalParity(masses, 3, grid, Options(0.05, SpSolver::kLinearProgram));
  ASSERT_OK(reference);
  std::vector<double> objectives(4 * 5, -1);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 5; ++i) {
        auto s = SolveStatisticalParity(masses, 3, grid, Options(0.05, SpSolver::kLinearProgram));
        objectives[t * 5 + i] = s.ok() ? s->objective : -1;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (double o : objectives) EXPECT_NEAR(o, reference->objective, 1e-12);
}

// ---- Input validation ------------------------------------------------------------------------

TEST(SolveStatisticalParityTest, RejectsBadInputs) {
  const ScoreGrid grid{0, 1, 4};
  const std::vector<double> masses(8, 0.125);
  EXPECT_THAT(SolveStatisticalParity(masses, 2, ScoreGrid{0, 1, 0}, SpOptions{}),
              StatusIs(absl::StatusCode::kInvalidArgument, "k must be in [1, 1000] (got 0)"));
  EXPECT_THAT(SolveStatisticalParity(masses, 0, grid, SpOptions{}),
              StatusIs(absl::StatusCode::kInvalidArgument, "num_groups must be >= 1 (got 0)"));
  EXPECT_THAT(SolveStatisticalParity(masses, 3, grid, SpOptions{}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "masses must hold num_groups * k = 12 cells (got 8)"));
  std::vector<double> bad = masses;
  bad[5] = kNaN;
  EXPECT_THAT(SolveStatisticalParity(bad, 2, grid, SpOptions{}),
              StatusIs(absl::StatusCode::kInvalidArgument, "mass at index 5 (group 1, bin 1)"));
  EXPECT_THAT(SolveStatisticalParity(masses, 2, grid, Options(-0.1, SpSolver::kAuto)),
              StatusIs(absl::StatusCode::kInvalidArgument, "alpha must be in [0, 1] (got -0.1)"));
  EXPECT_THAT(SolveStatisticalParity(masses, 2, grid, Options(kNaN, SpSolver::kAuto)),
              StatusIs(absl::StatusCode::kInvalidArgument, "alpha must be in [0, 1]"));
  EXPECT_THAT(SolveStatisticalParity(masses, 2, grid, Options(0, static_cast<SpSolver>(7))),
              StatusIs(absl::StatusCode::kInvalidArgument, "solver must be"));
  // 20 groups at k = 1000 would need 2·10^7 transport entries.
  const std::vector<double> huge(20 * 1000, 1e-5);
  EXPECT_THAT(SolveStatisticalParity(huge, 20, ScoreGrid{0, 1, 1000}, SpOptions{}),
              StatusIs(absl::StatusCode::kInvalidArgument, "use fewer bins"));
  const std::vector<double> big(2 * 1000, 5e-4);
  EXPECT_THAT(SolveStatisticalParity(big, 2, ScoreGrid{0, 1, 1000}, Options(0.1, SpSolver::kAuto)),
              StatusIs(absl::StatusCode::kInvalidArgument, "the LP would have"));
}

TEST(ScoreGridTest, ValidateNamesTheFieldAndTheFix) {
  EXPECT_OK((ScoreGrid{0, 1, 10}.Validate()));
  EXPECT_OK((ScoreGrid{-5, 5, 1}.Validate()));
  EXPECT_OK((ScoreGrid{0, 1, 1000}.Validate()));
  EXPECT_THAT((ScoreGrid{3, 1, 10}.Validate()),
              StatusIs(absl::StatusCode::kInvalidArgument, "lo must be < hi (got lo=3, hi=1)"));
  EXPECT_THAT((ScoreGrid{1, 1, 10}.Validate()),
              StatusIs(absl::StatusCode::kInvalidArgument, "lo must be < hi (got lo=1, hi=1)"));
  EXPECT_THAT((ScoreGrid{0, 1, 0}.Validate()),
              StatusIs(absl::StatusCode::kInvalidArgument, "k must be in [1, 1000] (got 0)"));
  EXPECT_THAT((ScoreGrid{0, 1, 1001}.Validate()),
              StatusIs(absl::StatusCode::kInvalidArgument, "k must be in [1, 1000] (got 1001)"));
  EXPECT_THAT((ScoreGrid{kNaN, 1, 10}.Validate()),
              StatusIs(absl::StatusCode::kInvalidArgument, "lo must be finite"));
  EXPECT_THAT((ScoreGrid{0, kInf, 10}.Validate()),
              StatusIs(absl::StatusCode::kInvalidArgument, "hi must be finite"));
  EXPECT_THAT((ScoreGrid{-1e308, 1e308, 10}.Validate()),
              StatusIs(absl::StatusCode::kInvalidArgument, "hi - lo must be finite"));
  // A range too narrow for its magnitude: [1, 1 + 1 ulp] would put every score in one bin.
  EXPECT_THAT((ScoreGrid{1, std::nextafter(1.0, 2.0), 10}.Validate()),
              StatusIs(absl::StatusCode::kInvalidArgument, "cannot be split into distinct bins"));
  EXPECT_THAT((ScoreGrid{1e6, 1e6 + 1e-4, 10}.Validate()),
              StatusIs(absl::StatusCode::kInvalidArgument, "at least 1e-09 of max(|lo|, |hi|)"));
  EXPECT_OK((ScoreGrid{1e6, 1e6 + 1e-2, 10}.Validate()));
  EXPECT_OK((ScoreGrid{0, 1e-300, 10}.Validate()));  // narrow but its magnitude is as small
}

TEST(ScoreGridTest, BinsAndCentres) {
  const ScoreGrid grid{1, 4, 3};  // width 1: [1,2) [2,3) [3,4]
  EXPECT_EQ(grid.Bin(1.0), 0);
  EXPECT_EQ(grid.Bin(1.999), 0);
  EXPECT_EQ(grid.Bin(2.0), 1);
  EXPECT_EQ(grid.Bin(3.5), 2);
  EXPECT_EQ(grid.Bin(4.0), 2);  // the top edge belongs to the last bin
  EXPECT_EQ(grid.Bin(-100), 0);
  EXPECT_EQ(grid.Bin(100), 2);
  EXPECT_EQ(grid.Bin(-kInf), 0);
  EXPECT_EQ(grid.Bin(kInf), 2);
  EXPECT_EQ(grid.Bin(kNaN), 0);
  EXPECT_DOUBLE_EQ(grid.Center(0), 1.5);
  EXPECT_DOUBLE_EQ(grid.Center(2), 3.5);
  // Decimal edges fall into the bin they name.
  const ScoreGrid unit{0, 1, 10};
  for (int i = 0; i < 10; ++i) EXPECT_EQ(unit.Bin(i / 10.0), i) << i;
  const ScoreGrid percent{0, 1, 100};
  for (int i = 0; i < 100; ++i) EXPECT_EQ(percent.Bin(i / 100.0), i) << i;
  const ScoreGrid permille{0, 1, 1000};
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(permille.Bin(i / 1000.0), i) << i;
  const ScoreGrid gpa{1, 4, 36};  // width 1/12
  for (int i = 0; i < 36; ++i) EXPECT_EQ(gpa.Bin(1 + i / 12.0), i) << i;
  const ScoreGrid shifted{-2.5, 7.5, 40};  // width 0.25
  for (int i = 0; i < 40; ++i) EXPECT_EQ(shifted.Bin(-2.5 + i * 0.25), i) << i;
  // Just below an edge stays below it.
  EXPECT_EQ(percent.Bin(0.29 - 1e-12), 28);
  // Every centre lies in its own bin.
  for (int j = 0; j < 100; ++j) EXPECT_EQ(percent.Bin(percent.Center(j)), j);
}

TEST(HistogramCountsTest, CountsPerGroupAndBinAndReportsClipping) {
  const ScoreGrid grid{0, 1, 4};
  const std::vector<double> scores = {0.1, 0.3, 0.9, -0.5, 1.0, 1.5, 0.6, 0.0};
  const std::vector<int> group = {0, 0, 0, 1, 1, 1, 1, 0};
  int64_t clipped = -1;
  auto counts = HistogramCounts(scores, group, 2, grid, &clipped);
  ASSERT_OK(counts);
  EXPECT_THAT(*counts, ElementsAre(2, 1, 0, 1,         // group 0: 0.1, 0.0 | 0.3 | - | 0.9
                                   1, 0, 1, 2));       // group 1: -0.5 | - | 0.6 | 1.0, 1.5
  EXPECT_EQ(clipped, 2);                               // -0.5 and 1.5; the edges 0 and 1 are inside
  EXPECT_OK(HistogramCounts(scores, group, 2, grid));  // clipped is optional
  auto empty = HistogramCounts({}, {}, 3, grid, &clipped);
  ASSERT_OK(empty);
  EXPECT_EQ(empty->size(), 12);
  EXPECT_EQ(clipped, 0);
}

TEST(HistogramCountsTest, RejectsBadInputs) {
  const ScoreGrid grid{0, 1, 4};
  const std::vector<int> group = {0, 1, 0};
  EXPECT_THAT(
      HistogramCounts({0.1, kNaN, 0.2}, group, 2, grid),
      StatusIs(absl::StatusCode::kInvalidArgument, "score at row 1 is not a finite number"));
  EXPECT_THAT(
      HistogramCounts({0.1, 0.2, -kInf}, group, 2, grid),
      StatusIs(absl::StatusCode::kInvalidArgument, "score at row 2 is not a finite number"));
  EXPECT_THAT(HistogramCounts({0.1, 0.2, 0.3}, {0, 2, 0}, 2, grid),
              StatusIs(absl::StatusCode::kInvalidArgument, "group at row 1 must be in [0, 2)"));
  EXPECT_THAT(HistogramCounts({0.1, 0.2}, group, 2, grid),
              StatusIs(absl::StatusCode::kInvalidArgument, "same length"));
  EXPECT_THAT(HistogramCounts({0.1, 0.2, 0.3}, group, 0, grid),
              StatusIs(absl::StatusCode::kInvalidArgument, "num_groups must be >= 1"));
  EXPECT_THAT(HistogramCounts({0.1, 0.2, 0.3}, group, 2, ScoreGrid{1, 0, 4}),
              StatusIs(absl::StatusCode::kInvalidArgument, "lo must be < hi"));
}

// ---- Step 4: the repaired pmf ----------------------------------------------------------------

TEST(RepairedPmfTest, NoisyInputsGiveValidPmfs) {
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (int trial = 0; trial < 200; ++trial) {
    const int k = 1 + trial % 40;
    std::vector<double> masses(k);
    double sum = 0;
    for (double& m : masses) sum += (m = (unit(rng) - 0.4) * 0.1);
    const double weight = std::max(sum, 1e-6);
    const std::vector<double> pmf = RepairedPmf(masses, weight);
    ASSERT_EQ(pmf.size(), k);
    double total = 0;
    for (double p : pmf) {
      EXPECT_GE(p, 0.0);
      total += p;
    }
    EXPECT_NEAR(total, 1.0, 1e-12);
  }
}

TEST(RepairedPmfTest, ValidHistogramIsOnlyNormalised) {
  const std::vector<double> masses = {0.02, 0.0, 0.05, 0.13, 0.0, 0.1};
  const std::vector<double> pmf = RepairedPmf(masses, 0.3);
  ASSERT_EQ(pmf.size(), masses.size());
  for (size_t j = 0; j < masses.size(); ++j) EXPECT_NEAR(pmf[j], masses[j] / 0.3, 1e-12);
}

TEST(RepairedPmfTest, FollowsTheLInfinityIsotonicRepair) {
  // c = (0.5, 0.3, 0.6, 1.0): running max (0.5, 0.5, 0.6, 1), running min (0.3, 0.3, 0.6, 1),
  // midpoints (0.4, 0.4, 0.6, 1) -> pmf (0.4, 0, 0.2, 0.4).
  EXPECT_THAT(RepairedPmf({5, -2, 3, 4}, 10),
              ElementsAre(DoubleNear(0.4, 1e-15), DoubleNear(0.0, 1e-15), DoubleNear(0.2, 1e-15),
                          DoubleNear(0.4, 1e-15)));
  // Clipped to [0, 1] and c_{k-1} = 1 even when the masses fall short of the weight.
  EXPECT_THAT(RepairedPmf({-1, 1, 1}, 4),
              ElementsAre(DoubleNear(0.0, 1e-15), DoubleNear(0.0, 1e-15), DoubleNear(1.0, 1e-15)));
}

// ---- Step 7: the fair sampler ----------------------------------------------------------------

TEST(SampleFairScoreTest, FrequenciesMatchTheTransportRow) {
  // Group 0 is all in bin 0; group 1 spreads over bins 0..7, so the barycenter spreads too and
  // group 0's row 0 is a genuine distribution.
  const int k = 8;
  const ScoreGrid grid{0, 8, k};
  std::vector<double> masses(2 * k, 0.0);
  masses[0] = 0.5;
  for (int j = 0; j < k; ++j) masses[k + j] = 0.5 / k;
  auto s = SolveStatisticalParity(masses, 2, grid, Options(0, SpSolver::kQuantile));
  ASSERT_OK(s);
  const std::vector<double> row(s->transport[0].begin(), s->transport[0].begin() + k);
  int support = 0;
  for (double g : row) support += g > 0 ? 1 : 0;
  ASSERT_GE(support, 3);

  // Each frequency is within 5 standard errors of g: false-failure probability about 6e-7 per
  // bin by the normal approximation (n = 200,000).
  const int n = 200'000;
  std::mt19937_64 gen(12345);
  std::vector<int> hits(k, 0);
  for (int i = 0; i < n; ++i) {
    const double v = SampleFairScore(*s, grid, 0, 0, gen);
    const int l = grid.Bin(v);
    ASSERT_DOUBLE_EQ(v, grid.Center(l));
    ++hits[l];
  }
  for (int l = 0; l < k; ++l) {
    const double se = std::sqrt(row[l] * (1 - row[l]) / n);
    if (row[l] == 0) {
      EXPECT_EQ(hits[l], 0) << "bin " << l;
    } else {
      EXPECT_NEAR(static_cast<double>(hits[l]) / n, row[l], 5 * se) << "bin " << l;
    }
  }
}

// A URBG that returns scripted 64-bit words, then 0 (a draw every rejection accepts), to test
// the sampler's arithmetic at its edges.
class ScriptedWords {
 public:
  using result_type = uint64_t;
  explicit ScriptedWords(std::vector<uint64_t> words) : words_(std::move(words)) {}
  static constexpr result_type min() { return 0; }
  static constexpr result_type max() { return ~uint64_t{0}; }
  result_type operator()() {
    const uint64_t w = next_ < words_.size() ? words_[next_] : 0;
    ++next_;
    return w;
  }
  size_t used() const { return next_; }

 private:
  std::vector<uint64_t> words_;
  size_t next_ = 0;
};

// Row (2^-60, 1): integer weights 2^52 and 2^112, so bin 0 owns exactly the draws below 2^52 of
// [0, 2^112 + 2^52). A double-precision draw cannot tell 2^-60 from 0 relative to the row
// total; the exact sampler puts the boundary where the weights say.
TEST(SampleFairScoreTest, TinyProbabilitiesAreDrawnExactly) {
  const ScoreGrid grid{0, 2, 2};
  SpSolution s;
  s.transport = {{std::ldexp(1.0, -60), 1.0, 0, 1}};
  auto draw = [&](uint64_t high, uint64_t low) {
    ScriptedWords words({high, low});
    return SampleFairScore(s, grid, 0, 0, words);
  };
  EXPECT_EQ(draw(0, 0), 0.5);
  EXPECT_EQ(draw(0, (uint64_t{1} << 52) - 1), 0.5);  // the last draw of bin 0
  EXPECT_EQ(draw(0, uint64_t{1} << 52), 1.5);        // the first draw of bin 1
  // Draws at or above the total (2^112 + 2^52, below the mask 2^113 - 1) are rejected and
  // redrawn: the first pair is rejected, the second lands in bin 0.
  ScriptedWords rejected({~uint64_t{0}, ~uint64_t{0}, 0, 5});
  EXPECT_EQ(SampleFairScore(s, grid, 0, 0, rejected), 0.5);
  // Issue 19: the same 64 attempts (128 words) whether the first draw is accepted or not.
  EXPECT_EQ(rejected.used(), 128u);
  ScriptedWords accepted({0, 0});
  EXPECT_EQ(SampleFairScore(s, grid, 0, 0, accepted), 0.5);
  EXPECT_EQ(accepted.used(), 128u);
}

// Issue 19: the draw for one group's row makes the same generator calls as for another's
// (Decide: the row is the subject's group's): rows of the same k with different supports and
// sums.
TEST(SampleFairScoreTest, CallsDoNotDependOnTheRow) {
  const ScoreGrid grid{0, 4, 4};
  SpSolution s;
  s.transport = {{0.25, 0.25, 0.25, 0.25, 1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1},
                 {0.9, 0.1, 0, 0, 0, 1, 0, 0, 1e-6, 1 - 2e-6, 1e-6, 0, 0, 0, 1, 0}};
  std::vector<size_t> used;
  for (int a = 0; a < 2; ++a) {
    for (int bin = 0; bin < 4; ++bin) {
      ScriptedWords words({0x0123456789abcdefULL, 42});
      SampleFairScore(s, grid, a, bin, words);
      used.push_back(words.used());
    }
  }
  for (size_t u : used) EXPECT_EQ(u, 128u);
}

TEST(SampleFairScoreTest, DeterministicRowsAndOutOfRangeBins) {
  const int k = 3;
  const ScoreGrid grid{0, 3, k};
  SpSolution s;
  s.transport = {{0, 0, 1, 0, 1, 0, 1, 0, 0}};  // the reversal
  std::mt19937_64 gen(1);
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(SampleFairScore(s, grid, 0, 0, gen), 2.5);
    EXPECT_EQ(SampleFairScore(s, grid, 0, 1, gen), 1.5);
    EXPECT_EQ(SampleFairScore(s, grid, 0, 7, gen), 0.5);  // clamped to the last bin
  }
}

}  // namespace
}  // namespace fairvault::core::postprocess
