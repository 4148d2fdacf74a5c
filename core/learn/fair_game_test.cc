// Tests of the fair game's pieces: the cost shifts of C1, the private best response (exact
// without noise; its released integer vector moves by at most the declared sensitivity between
// neighbouring datasets), the noisy violations, the learner reducing the equalized-odds gap, the
// exact exponential mechanism, and the accountant's per-round calibration.
#include "core/learn/fair_game.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <vector>

#include "core/accounting/accountant.h"
#include "core/learn/exponential_mechanism.h"
#include "core/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace fairvault::core::learn {
namespace {

using ::fairvault::testing::StatusIs;

NoiseFactory ZeroNoise() {
  return [](double) -> absl::StatusOr<std::unique_ptr<dp::IntegerNoise>> {
    return dp::MakeZeroNoise();
  };
}

// Records every value a release passes to the noise (the exact integer vector) and adds none.
class RecordingNoise : public dp::IntegerNoise {
 public:
  explicit RecordingNoise(std::vector<int64_t>* seen, double scale) : seen_(seen), scale_(scale) {}
  int64_t AddNoise(int64_t value, absl::BitGenRef) const override {
    seen_->push_back(value);
    return value;
  }
  std::string Name() const override { return "recording"; }
  double Scale() const override { return scale_; }

 private:
  std::vector<int64_t>* seen_;
  double scale_;
};

struct Rows {
  Eigen::MatrixXd x;
  std::vector<int> y, a;
};

// Two groups; group 1's labels depend on feature 0 more weakly, so an unconstrained classifier
// has unequal error rates across groups.
Rows Synthetic(int n, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> normal(0, 1);
  std::uniform_real_distribution<double> u(0, 1);
  Rows r{Eigen::MatrixXd(n, 3), std::vector<int>(n), std::vector<int>(n)};
  for (int i = 0; i < n; ++i) {
    r.a[i] = u(gen) < 0.3 ? 1 : 0;
    r.x(i, 0) = normal(gen) + (r.a[i] ? 0.8 : 0.0);
    r.x(i, 1) = normal(gen);
    r.x(i, 2) = r.a[i] ? 1.0 : 0.0;  // a proxy the company holds (e.g. a correlated feature)
    const double z = 1.5 * r.x(i, 0) + 0.5 * r.x(i, 1) - 0.4;
    r.y[i] = u(gen) < 1 / (1 + std::exp(-z)) ? 1 : 0;
  }
  return r;
}

TEST(CostShiftsTest, MatchesTheFormulaForThreeGroups) {
  // λ for a=1: (0.5, 0.1, 0.2, 0.0); a=2: (0.0, 0.3, 0.0, 0.4).
  const std::vector<double> lambda = {0.5, 0.1, 0.2, 0.0, 0.0, 0.3, 0.0, 0.4};
  const std::vector<double> q = {0.2, 0.1, 0.25, 0.05, 0.3, 0.1};  // cell 2a+y
  const std::vector<double> s = CostShifts(lambda, q, 3);
  EXPECT_NEAR(s[2], 0.4 / 0.25, 1e-12);          // a=1, y=0
  EXPECT_NEAR(s[3], 0.2 / 0.05, 1e-12);          // a=1, y=1
  EXPECT_NEAR(s[4], -0.3 / 0.3, 1e-12);          // a=2, y=0
  EXPECT_NEAR(s[5], -0.4 / 0.1, 1e-12);          // a=2, y=1
  EXPECT_NEAR(s[0], -(0.4 - 0.3) / 0.2, 1e-12);  // a=0, y=0
  EXPECT_NEAR(s[1], -(0.2 - 0.4) / 0.1, 1e-12);  // a=0, y=1
}

TEST(PrivateBestResponseTest, ZeroLambdaIsTheUnconstrainedCostSensitiveClassifier) {
  const Rows r = Synthetic(2000, 1);
  ASSERT_OK_AND_ASSIGN(GameData data, BuildGameData(r.x, r.y, r.a, 2, 0, true));
  std::mt19937_64 gen(2);
  const std::vector<double> lambda(4, 0.0);
  const std::vector<double> q = {0.3, 0.4, 0.1, 0.2};
  ASSERT_OK_AND_ASSIGN(const double grid, PlanCostGrid(data.n, data.max_row_steps, 1, q,
                                                      Oracle::kLeastSquares, 1.0));
  ASSERT_OK_AND_ASSIGN(BestResponse br, PrivateBestResponse(data, lambda, q, Oracle::kLeastSquares,
                                                            1.0, grid, ZeroNoise(), gen));
  EXPECT_EQ(br.noise_scale_steps, 0);  // nothing depends on a
  // w0 − w1 = (XᵀX)⁻¹ Xᵀ(1{y=1} − 1{y=0}): least squares on 2y − 1.
  Eigen::VectorXd target(2000);
  for (int i = 0; i < 2000; ++i) target(i) = 2 * r.y[i] - 1;
  const Eigen::VectorXd expected = data.gram.solve(data.x->transpose() * target);
  EXPECT_LT((br.weights - expected).norm(), 1e-9 * expected.norm());
  // And it is a decent classifier (accuracy well above the base rate).
  const std::vector<uint8_t> h = Decide(data, br.weights);
  int correct = 0, positives = 0;
  for (int i = 0; i < 2000; ++i) {
    correct += h[i] == r.y[i];
    positives += r.y[i];
  }
  EXPECT_GT(correct, std::max(positives, 2000 - positives) + 200);
}

// Between neighbouring datasets (one row's group changed) the exact integer vector a best
// response releases moves by at most the declared L1 sensitivity (noise scale × epsilon), for
// both oracles and for random λ.
TEST(PrivateBestResponseTest, ReleasedVectorMovesByAtMostTheDeclaredSensitivity) {
  const Rows r = Synthetic(300, 3);
  std::mt19937_64 gen(4);
  std::uniform_real_distribution<double> u(0, 1);
  for (int trial = 0; trial < 50; ++trial) {
    Rows neighbour = r;
    const int row = trial * 5;
    neighbour.a[row] = 1 - neighbour.a[row];
    ASSERT_OK_AND_ASSIGN(GameData d1, BuildGameData(r.x, r.y, r.a, 2, 2.0, true));
    ASSERT_OK_AND_ASSIGN(GameData d2,
                         BuildGameData(neighbour.x, neighbour.y, neighbour.a, 2, 2.0, true));
    std::vector<double> lambda(4);
    for (double& l : lambda) l = 3 * u(gen);
    const std::vector<double> q = {0.35, 0.35, 0.15, 0.15};
    const double epsilon = 0.5;
    for (Oracle oracle : {Oracle::kLeastSquares, Oracle::kFtpl}) {
      std::vector<int64_t> seen1, seen2;
      double scale = 0;
      const auto recorder = [&](std::vector<int64_t>* seen) -> NoiseFactory {
        return [seen, &scale](double s) -> absl::StatusOr<std::unique_ptr<dp::IntegerNoise>> {
          scale = s;
          return std::make_unique<RecordingNoise>(seen, s);
        };
      };
      // The game's grid, from public quantities: the same on both neighbours.
      ASSERT_OK_AND_ASSIGN(const double grid,
                           PlanCostGrid(d1.n, d1.max_row_steps, 12, q, oracle, epsilon));
      ASSERT_OK_AND_ASSIGN(BestResponse b1, PrivateBestResponse(d1, lambda, q, oracle, epsilon,
                                                                grid, recorder(&seen1), gen));
      ASSERT_OK_AND_ASSIGN(BestResponse b2, PrivateBestResponse(d2, lambda, q, oracle, epsilon,
                                                                grid, recorder(&seen2), gen));
      ASSERT_EQ(seen1.size(), seen2.size());
      ASSERT_GT(b1.noise_scale_steps, 0);
      EXPECT_EQ(b1.noise_scale_steps, b2.noise_scale_steps);  // public: same on neighbours
      double l1 = 0;
      for (size_t j = 0; j < seen1.size(); ++j) l1 += std::abs(seen1[j] - seen2[j]);
      EXPECT_LE(l1, b1.noise_scale_steps * epsilon + 1e-9) << "trial " << trial;
    }
  }
}

// At small per-round epsilons the cost shifts keep their resolution (they used to round to zero
// below about 1/256, silently dropping the fairness costs); where they would vanish, the plan
// says so (unresolved) instead of failing.
TEST(PrivateBestResponseTest, SmallEpsilonKeepsTheCostsOrSaysUnresolved) {
  const Rows r = Synthetic(1000, 13);
  ASSERT_OK_AND_ASSIGN(GameData data, BuildGameData(r.x, r.y, r.a, 2, 0, true));
  const std::vector<double> lambda = {0.5, 0, 0.25, 0};
  const std::vector<double> q = {0.35, 0.35, 0.15, 0.15};
  const double bound = 0.75;  // B = ‖λ‖₁: the largest shift any λ gives is B/0.15 = 5
  for (double epsilon : {1.0, 0.01, 0.004, 1e-4, 1e-6}) {
    ASSERT_OK_AND_ASSIGN(const double grid, PlanCostGrid(data.n, data.max_row_steps, bound, q,
                                                          Oracle::kLeastSquares, epsilon));
    ASSERT_OK_AND_ASSIGN(BestResponsePlan plan, PlanBestResponse(data, lambda, q,
                                                                 Oracle::kLeastSquares, epsilon,
                                                                 grid));
    // 0.5/0.35 + 0.5/0.15 = 4.76 on label 0. Down to ε = 0.004 (where the old grid had already
    // erased it) it keeps 2^14 steps; below, the sampler's 2^40 limit on the noise scale in steps
    // coarsens the grid (for the largest change any λ can give, 10), but the shift still spans
    // steps and is resolved within 25 %.
    const double exact = 0.5 / 0.35 + 0.5 / 0.15;
    if (epsilon >= 0.004) {
      EXPECT_GT(plan.change_steps, 1 << 14) << "epsilon " << epsilon;
      EXPECT_NEAR(plan.cost_change, exact, 1e-3) << "epsilon " << epsilon;
    }
    EXPECT_FALSE(plan.unresolved);
    EXPECT_GE(plan.change_steps, 4) << "epsilon " << epsilon;
    EXPECT_NEAR(plan.cost_change, exact, 0.25 * exact) << "epsilon " << epsilon;
    EXPECT_LE(plan.noise_scale_steps, dp::kMaxDiscreteLaplaceScale);
  }
  ASSERT_OK_AND_ASSIGN(const double coarse, PlanCostGrid(data.n, data.max_row_steps, bound, q,
                                                          Oracle::kLeastSquares, 1e-15));
  ASSERT_OK_AND_ASSIGN(BestResponsePlan vanished,
                       PlanBestResponse(data, lambda, q, Oracle::kLeastSquares, 1e-15, coarse));
  EXPECT_TRUE(vanished.unresolved);
  EXPECT_EQ(vanished.noise_scale_steps, 0);
}

// Issue 19: a λ with subnormal (or zero) entries, as the exponentiated-gradient auditor reaches
// after thousands of rounds, is planned on the game's grid: no failure, and entries far below
// the grid's resolution count as 0.
TEST(PrivateBestResponseTest, TinyLambdaIsPlannedOnTheGamesGrid) {
  const Rows r = Synthetic(500, 17);
  ASSERT_OK_AND_ASSIGN(GameData data, BuildGameData(r.x, r.y, r.a, 2, 0, true));
  const std::vector<double> q = {0.35, 0.35, 0.15, 0.15};
  ASSERT_OK_AND_ASSIGN(const double grid,
                       PlanCostGrid(data.n, data.max_row_steps, 1, q, Oracle::kLeastSquares, 1e-4));
  std::mt19937_64 gen(5);
  for (const std::vector<double>& lambda :
       std::vector<std::vector<double>>{{5e-304, 0, 0, 0},
                                        {0, 4.9e-324, 1e-310, 0},
                                        {1e-200, 1e-200, 1e-200, 1e-200},
                                        {0, 0, 0, 0}}) {
    ASSERT_OK_AND_ASSIGN(BestResponsePlan plan,
                         PlanBestResponse(data, lambda, q, Oracle::kLeastSquares, 1e-4, grid));
    EXPECT_EQ(plan.change_steps, 0);
    EXPECT_OK(
        PrivateBestResponse(data, lambda, q, Oracle::kLeastSquares, 1e-4, grid, ZeroNoise(), gen)
            .status());
  }
}

// Issue 19: the DP-oracle learner at 20,000 rounds and ε = 1 (per-release ε about 2e-5) used to
// fail mid-run once λ's entries became subnormal ("granularity 2^-1023 ... outside the range of
// normal doubles"), after its whole ε was charged. The plan the vault checks before the charge
// (CheckGamePlannable) admits it, and the run completes.
TEST(DpOracleLearnerTest, ManyRoundsWithVanishingLambdaComplete) {
  const Rows r = Synthetic(200, 19);
  ASSERT_OK_AND_ASSIGN(GameData data, BuildGameData(r.x, r.y, r.a, 2, 0, true));
  LearnerOptions options;
  options.rounds = 20000;
  options.lambda_bound = 1;
  options.learning_rate = 1;
  // With γ > 0 every violation entry is at most 1 − γ and each pair sums to −2γ: θ's entries
  // drift down by about γ a round, so by round 20,000 some are near −1000 and their λ passed
  // through the subnormal range (e^-708 .. e^-745: θ moves by at most 1.05 a round) on the way.
  options.gamma = 0.05;
  const double per_round = 0.9 / (2 * options.rounds);
  ASSERT_OK(CheckGamePlannable(data.n, data.d, options.lambda_bound, 1, per_round, 0.1));
  std::mt19937_64 gen(21);
  ASSERT_OK_AND_ASSIGN(LearnerResult result,
                       RunDpOracleLearner(data, options, {0.1, per_round}, ZeroNoise(), gen, {}));
  EXPECT_EQ(result.components.size(), 20000u);
  // The auditor did drive some of λ's entries below the normal doubles.
  ASSERT_EQ(result.last_lambda.size(), 4u);
  double smallest = 1;
  for (double l : result.last_lambda) smallest = std::min(smallest, l);
  EXPECT_LT(smallest, 1e-300);
}

// What CheckGamePlannable refuses before a charge: a per-release epsilon the sampler cannot
// take, a masses share too small, an absurd lambda_bound.
TEST(CheckGamePlannableTest, RefusesFromPublicSizes) {
  EXPECT_OK(CheckGamePlannable(30000, 20, 1, 1, 1e-6, 0.1));
  EXPECT_THAT(CheckGamePlannable(30000, 20, 1, 1, 1e-9, 0.1),
              StatusIs(absl::StatusCode::kInvalidArgument, "rounds"));
  EXPECT_THAT(CheckGamePlannable(30000, 20, 1, 1, 1e-3, 1e-13),
              StatusIs(absl::StatusCode::kInvalidArgument, "masses_share"));
  EXPECT_THAT(CheckGamePlannable(30000, 20, 1e-300, 1, 1e-3, 0.1),
              StatusIs(absl::StatusCode::kInvalidArgument, "lambda_bound"));
}

TEST(NoisyViolationsTest, ExactRatesWithoutNoise) {
  // Group 0: 4 rows (2 y=0, 2 y=1); group 1: 4 rows likewise.
  Eigen::MatrixXd x = Eigen::MatrixXd::Ones(8, 1);
  const std::vector<int> y = {0, 0, 1, 1, 0, 0, 1, 1};
  const std::vector<int> a = {0, 0, 0, 0, 1, 1, 1, 1};
  ASSERT_OK_AND_ASSIGN(GameData data, BuildGameData(x, y, a, 2, 0, false));
  const std::vector<uint8_t> h = {1, 0, 1, 1, 0, 0, 1, 0};  // FP0=.5 TP0=1 FP1=0 TP1=.5
  const std::vector<double> q = {0.25, 0.25, 0.25, 0.25};
  std::mt19937_64 gen(5);
  ASSERT_OK_AND_ASSIGN(std::vector<double> r,
                       NoisyViolations(data, h, q, 0.1, *dp::MakeZeroNoise(), gen));
  ASSERT_EQ(r.size(), 4u);
  EXPECT_NEAR(r[0], 0 - 0.5 - 0.1, 1e-12);
  EXPECT_NEAR(r[1], 0.5 - 0 - 0.1, 1e-12);
  EXPECT_NEAR(r[2], 0.5 - 1 - 0.1, 1e-12);
  EXPECT_NEAR(r[3], 1 - 0.5 - 0.1, 1e-12);
}

double EqualizedOddsGap(const GameData& data, const LearnerResult& result) {
  // The mixture's expected rates per (group, label) cell.
  std::vector<double> positive(4, 0), count(4, 0);
  for (const Eigen::VectorXd& w : result.components) {
    const std::vector<uint8_t> h = Decide(data, w);
    for (int64_t i = 0; i < data.n; ++i) {
      positive[2 * data.group[i] + data.y[i]] += h[i] / double(result.components.size());
    }
  }
  for (int64_t i = 0; i < data.n; ++i) count[2 * data.group[i] + data.y[i]] += 1;
  return std::max(std::abs(positive[2] / count[2] - positive[0] / count[0]),
                  std::abs(positive[3] / count[3] - positive[1] / count[1]));
}

TEST(DpOracleLearnerTest, WithoutNoiseTheGameShrinksTheGap) {
  const Rows r = Synthetic(4000, 6);
  ASSERT_OK_AND_ASSIGN(GameData data, BuildGameData(r.x, r.y, r.a, 2, 0, true));
  std::mt19937_64 gen(7);
  LearnerPlan plan{1.0, 1.0};
  LearnerOptions unconstrained;
  unconstrained.rounds = 1;
  unconstrained.lambda_bound = 1e-9;
  ASSERT_OK_AND_ASSIGN(LearnerResult base,
                       RunDpOracleLearner(data, unconstrained, plan, ZeroNoise(), gen, nullptr));
  LearnerOptions fair;
  fair.rounds = 200;
  fair.lambda_bound = 20;
  fair.learning_rate = 2;
  fair.gamma = 0.01;
  int calls = 0;
  ASSERT_OK_AND_ASSIGN(LearnerResult game, RunDpOracleLearner(data, fair, plan, ZeroNoise(), gen,
                                                              [&](int64_t t, int64_t total) {
                                                                ++calls;
                                                                EXPECT_EQ(total, 200);
                                                                EXPECT_EQ(t, calls);
                                                                return true;
                                                              }));
  EXPECT_EQ(game.components.size(), 200u);
  const double before = EqualizedOddsGap(data, base);
  const double after = EqualizedOddsGap(data, game);
  EXPECT_GT(before, 0.15);  // the synthetic data is unfair to begin with
  EXPECT_LT(after, before / 2) << "before " << before << " after " << after;
}

TEST(DpOracleLearnerTest, StopsWhenProgressSaysSo) {
  const Rows r = Synthetic(200, 8);
  ASSERT_OK_AND_ASSIGN(GameData data, BuildGameData(r.x, r.y, r.a, 2, 0, true));
  std::mt19937_64 gen(9);
  LearnerOptions options;
  options.rounds = 10;
  EXPECT_THAT(RunDpOracleLearner(data, options, {1, 1}, ZeroNoise(), gen,
                                 [](int64_t t, int64_t) { return t < 3; }),
              StatusIs(absl::StatusCode::kAborted));
}

// The exact exponential mechanism draws candidate j with probability ∝ exp(−β·steps_j): with
// three candidates of known utilities the frequencies over 20000 draws match within 0.015.
TEST(ExponentialMechanismTest, DrawsWithTheExponentialWeights) {
  EmLearnerInput input;
  input.k = 2;
  const int n = 400;
  std::mt19937_64 data_gen(10);
  for (int i = 0; i < n; ++i) {
    input.y.push_back(i % 2);
    input.group.push_back(i < n / 2 ? 0 : 1);
  }
  // Candidates: the label itself (err 0, gap 0), all ones (err .5, gap 0), half right.
  std::vector<uint8_t> exact(n), ones(n, 1), half(n);
  for (int i = 0; i < n; ++i) {
    exact[i] = input.y[i];
    half[i] = i < n / 2 ? input.y[i] : 0;
  }
  input.predictions = {exact, ones, half};
  const std::vector<double> u = EmUtilities(input, 0);
  EXPECT_NEAR(u[0], 0, 1e-12);
  EXPECT_NEAR(u[1], 0.5, 1e-12);
  EXPECT_NEAR(u[2], 1.0 + 0.25, 1e-12);  // TPR gap 1, error 100/400
  const double eps = 0.05;
  std::mt19937_64 gen(11);
  std::map<int, int> hits;
  double m = 0;
  const int draws = 20000;
  for (int t = 0; t < draws; ++t) {
    ASSERT_OK_AND_ASSIGN(EmLearnerResult res, ExponentialMechanismLearner(
                                                  input, 1e6, eps, 0.5, *dp::MakeZeroNoise(), gen));
    ++hits[res.chosen];
    m = res.released_min_positives;
  }
  // M = 100 − ln 2 / 1e6; weights exp(−eps·u/(2Δ)) with Δ = 2/M (up to the snapping).
  const double delta_u = 2 / m;
  std::vector<double> w;
  double total = 0;
  for (double v : u) {
    w.push_back(std::exp(-eps * v / (2 * delta_u)));
    total += w.back();
  }
  for (int j = 0; j < 3; ++j) {
    EXPECT_NEAR(hits[j] / double(draws), w[j] / total, 0.015) << "candidate " << j;
  }
}

TEST(ExponentialMechanismTest, RefusesWhenTheReleasedMinimumIsAtMostOne) {
  EmLearnerInput input;
  input.k = 2;
  input.y = {1, 1, 0, 0};
  input.group = {0, 1, 0, 1};
  input.predictions = {{1, 1, 0, 0}, {0, 0, 0, 0}};
  std::mt19937_64 gen(12);
  EXPECT_THAT(ExponentialMechanismLearner(input, 1, 1, 0.1, *dp::MakeZeroNoise(), gen),
              StatusIs(absl::StatusCode::kFailedPrecondition));
}

TEST(CalibrateRepeatedPureDpTest, BasicCompositionAtDeltaZeroAndBetterWithDelta) {
  using accounting::PureDpRepetition;
  const std::vector<PureDpRepetition> fixed = {{0.1, 1}};
  ASSERT_OK_AND_ASSIGN(double e0, accounting::CalibrateRepeatedPureDp(1'000'000, 0, fixed, 200));
  EXPECT_NEAR(e0, 0.9 / 200, 1e-6);
  // The composed cost fits the total and a slightly larger epsilon0 does not.
  accounting::Spend spend;
  spend.Add(accounting::ComposedPureDpCost({{0.1, 1}, {e0, 200}}));
  EXPECT_LE(accounting::SpentEpsilonMicro(spend, 0), 1'000'000);
  accounting::Spend over;
  over.Add(accounting::ComposedPureDpCost({{0.1, 1}, {e0 * 1.001, 200}}));
  EXPECT_GT(accounting::SpentEpsilonMicro(over, 0), 1'000'000);
  // At delta = 1e-6, 2000 releases compose sub-linearly: epsilon0 beats basic composition.
  ASSERT_OK_AND_ASSIGN(double e1,
                       accounting::CalibrateRepeatedPureDp(1'000'000, 1e-6, fixed, 2000));
  EXPECT_GT(e1, 1.5 * 0.9 / 2000);
  EXPECT_THAT(accounting::CalibrateRepeatedPureDp(1'000'000, 0, {{2.0, 1}}, 10),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace fairvault::core::learn
