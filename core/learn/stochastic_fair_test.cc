// Tests of the models (network.h) and the stochastic fair learners (stochastic_fair.h):
// - gradients against finite differences for logistic, softmax and MLP models, and the per-row
//   clip: one row's change moves the clipped sum by at most 2C;
// - the released integer sums of DP-FERMI (both releases) and PF-LD's dual release move by at
//   most the declared sensitivity between neighbouring datasets (one group changed);
// - the noise plans' stds stay within the sampler;
// - without noise, λ > 0 (DP-FERMI) and the dual (PF-LD) shrink the demographic-parity gap, the
//   equalized-odds variants shrink the equalized-odds gap, softmax learns three classes, the MLP
//   learns a non-linear rule the logistic model cannot; training is deterministic given the
//   generator.
// Over 500 lines as one file: the learners' tests share the synthetic populations and the gradient
// checks of their models.
#include "core/learn/stochastic_fair.h"

#include <cmath>
#include <initializer_list>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace fairvault::core::learn {
namespace {

using ::fairvault::testing::StatusIs;

// Two groups; group 1 has a higher base rate and a shifted feature: an unconstrained classifier
// selects group 1 far more often.
StochasticData Synthetic(int n, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> normal(0, 1);
  std::uniform_real_distribution<double> u(0, 1);
  StochasticData data;
  data.k = 2;
  data.classes = 2;
  data.x.resize(n, 3);
  for (int i = 0; i < n; ++i) {
    const int a = u(gen) < 0.4 ? 1 : 0;
    data.group.push_back(a);
    data.x(i, 0) = normal(gen) + (a ? 1.0 : 0.0);
    data.x(i, 1) = normal(gen);
    data.x(i, 2) = 1;  // intercept
    const double z = 2 * data.x(i, 0) + 0.5 * data.x(i, 1) - 1;
    data.y.push_back(u(gen) < 1 / (1 + std::exp(-z)) ? 1 : 0);
  }
  return data;
}

// The exact marginals (tests only: the server releases them with noise).
std::vector<double> Marginals(const StochasticData& data, Fairness fairness, bool counts) {
  const int cells = MarginalCells(fairness, data.k, data.classes);
  std::vector<double> out(cells, 0), label_rows(data.classes, 0);
  for (int64_t i = 0; i < data.n(); ++i) {
    out[MarginalCell(fairness, data.k, data.y[i], data.group[i])] += 1;
    label_rows[data.y[i]] += 1;
  }
  if (!counts) {
    for (int c = 0; c < cells; ++c) {
      out[c] /= fairness == Fairness::kEqualizedOdds ? label_rows[c / data.k]
                                                     : static_cast<double>(data.n());
    }
  }
  return out;
}

NoiseFactory ZeroNoise() {
  return [](double) -> absl::StatusOr<std::unique_ptr<dp::IntegerNoise>> {
    return dp::MakeZeroNoise();
  };
}

// Records every value it is asked to noise and releases a constant instead, so that the
// learner's state (a function of the releases) stays the same on neighbouring datasets and
// later steps compare at the same state: release r's values in (*log)[r].
class Recorder : public dp::IntegerNoise {
 public:
  explicit Recorder(std::vector<int64_t>* out) : out_(out) {}
  int64_t AddNoise(int64_t value, absl::BitGenRef) const override {
    out_->push_back(value);
    const int64_t i = static_cast<int64_t>(out_->size());
    return 1000 * ((i * i) % 9) - 5000;
  }
  std::string Name() const override { return "recorder"; }
  double Scale() const override { return 0; }

 private:
  std::vector<int64_t>* out_;
};
NoiseFactory Recording(std::vector<std::vector<int64_t>>* log) {
  log->reserve(8);
  return [log](double) -> absl::StatusOr<std::unique_ptr<dp::IntegerNoise>> {
    log->emplace_back();
    return std::make_unique<Recorder>(&log->back());
  };
}

double L2(const std::vector<int64_t>& a, const std::vector<int64_t>& b, size_t from, size_t to) {
  double sum = 0;
  for (size_t j = from; j < to; ++j) {
    const double d = static_cast<double>(a[j] - b[j]);
    sum += d * d;
  }
  return std::sqrt(sum);
}

// Mean predicted P(class 1) per group (per label for equalized odds): the soft gap.
double SoftGap(const StochasticData& data, Network& net, int label = -1) {
  net.ForwardRange(data.x, 0, data.n());
  double pos[2] = {0, 0}, cnt[2] = {0, 0};
  for (int64_t i = 0; i < data.n(); ++i) {
    if (label >= 0 && data.y[i] != label) continue;
    pos[data.group[i]] += net.probabilities()(i, 1);
    cnt[data.group[i]] += 1;
  }
  return std::abs(pos[1] / cnt[1] - pos[0] / cnt[0]);
}

double Accuracy(const StochasticData& data, Network& net) {
  net.ForwardRange(data.x, 0, data.n());
  double correct = 0;
  for (int64_t i = 0; i < data.n(); ++i) {
    Eigen::Index best;
    net.probabilities().row(i).maxCoeff(&best);
    correct += best == data.y[i];
  }
  return correct / static_cast<double>(data.n());
}

// ---- Network ---------------------------------------------------------------------------------

struct ShapeCase {
  const char* name;
  NetworkShape shape;
};

class NetworkGradientTest : public ::testing::TestWithParam<ShapeCase> {};

// Σ_i [CE(F_i, y_i) + cot_i · F_i] on the rows, for finite differences.
double Objective(Network& net, const RowMatrix& x, const std::vector<int64_t>& rows,
                 const RowMatrix& cot, const std::vector<int>& labels) {
  net.Forward(x, rows);
  const RowMatrix& f = net.probabilities();
  double total = 0;
  for (Eigen::Index i = 0; i < f.rows(); ++i) {
    if (!labels.empty()) total -= std::log(f(i, labels[i]));
    total += cot.row(i).dot(f.row(i));
  }
  return total;
}

TEST_P(NetworkGradientTest, MatchesFiniteDifferencesAndClipsEachRow) {
  const NetworkShape shape = GetParam().shape;
  Network net(shape);
  std::mt19937_64 init(7);
  net.Initialize(init);
  if (shape.hidden.empty()) net.params().setRandom();  // away from the zero start
  std::mt19937_64 gen(3);
  std::normal_distribution<double> normal(0, 1);
  const int b = 5;
  RowMatrix x(8, shape.inputs);
  for (Eigen::Index i = 0; i < x.rows(); ++i) {
    for (Eigen::Index j = 0; j < x.cols(); ++j) x(i, j) = normal(gen);
  }
  const std::vector<int64_t> rows = {6, 1, 3, 0, 5};
  RowMatrix cot(b, shape.classes());
  for (Eigen::Index i = 0; i < cot.rows(); ++i) {
    for (Eigen::Index j = 0; j < cot.cols(); ++j) cot(i, j) = normal(gen);
  }
  std::vector<int> labels(b);
  for (int i = 0; i < b; ++i) labels[i] = i % shape.classes();

  net.Forward(x, rows);
  Eigen::VectorXd grad = Eigen::VectorXd::Zero(shape.NumParams());
  net.AddExactGradient(cot, labels, &grad);
  Eigen::VectorXd numeric(shape.NumParams());
  const double h = 1e-6;
  for (int64_t j = 0; j < shape.NumParams(); ++j) {
    const double keep = net.params()(j);
    net.params()(j) = keep + h;
    const double up = Objective(net, x, rows, cot, labels);
    net.params()(j) = keep - h;
    const double down = Objective(net, x, rows, cot, labels);
    net.params()(j) = keep;
    numeric(j) = (up - down) / (2 * h);
  }
  EXPECT_LT((grad - numeric).norm(), 1e-5 * (1 + numeric.norm())) << GetParam().name;

  // With a clip no row reaches, the clipped sum is the plain gradient of Σ cot_i · F_i.
  net.Forward(x, rows);
  Eigen::VectorXd plain = Eigen::VectorXd::Zero(shape.NumParams());
  net.AddExactGradient(cot, {}, &plain);
  Eigen::VectorXd clipped;
  EXPECT_EQ(net.ClippedGradientSum(cot, 1e9, &clipped), 0);
  EXPECT_LT((clipped - plain).norm(), 1e-12 * (1 + plain.norm()));

  // One row alone: its gradient clipped to exactly C.
  net.Forward(x, std::vector<int64_t>{2});
  Eigen::VectorXd one = Eigen::VectorXd::Zero(shape.NumParams());
  net.AddExactGradient(cot.topRows(1), {}, &one);
  const double c = one.norm() / 3;
  EXPECT_EQ(net.ClippedGradientSum(cot.topRows(1), c, &clipped), 1);
  EXPECT_NEAR(clipped.norm(), c, 1e-12 * c);
  EXPECT_LT((clipped - one / 3).norm(), 1e-12 * c);

  // Neighbouring cotangents (one row changed) move the clipped sum by at most 2C.
  net.Forward(x, rows);
  Eigen::VectorXd first, second;
  net.ClippedGradientSum(cot, 0.05, &first);
  RowMatrix other = cot;
  other.row(3) *= -4;
  net.ClippedGradientSum(other, 0.05, &second);
  EXPECT_LE((first - second).norm(), 2 * 0.05 * (1 + 1e-9));
}

INSTANTIATE_TEST_SUITE_P(Shapes, NetworkGradientTest,
                         ::testing::Values(ShapeCase{"logistic", NetworkShape{4, {}, 1}},
                                           ShapeCase{"softmax", NetworkShape{4, {}, 3}},
                                           ShapeCase{"mlp_binary", NetworkShape{4, {6}, 1}},
                                           ShapeCase{"mlp_two_layers", NetworkShape{4, {5, 3}, 3}}),
                         [](const ::testing::TestParamInfo<ShapeCase>& info) {
                           return std::string(info.param.name);
                         });

// A row whose gradient norm overflows contributes nothing: the clipped sum stays finite and equal
// to the other rows' sum (so no release or failure can depend on that row's group).
TEST(NetworkTest, AnOverflowingRowContributesNothingToTheClippedSum) {
  for (const NetworkShape& shape : {NetworkShape{2, {}, 1}, NetworkShape{2, {3}, 3}}) {
    Network net(shape);
    std::mt19937_64 init(4);
    net.Initialize(init);
    net.params().setConstant(0.5);
    RowMatrix x(3, 2);
    x << 1, -1, 1e300, 1e300, -0.5, 2;
    RowMatrix cot = RowMatrix::Constant(3, shape.classes(), 1.0);
    cot(0, 0) = -1;
    cot(2, 0) = -2;
    net.Forward(x, std::vector<int64_t>{0, 1, 2});
    Eigen::VectorXd all;
    net.ClippedGradientSum(cot, 1.0, &all);
    ASSERT_TRUE(all.allFinite());
    RowMatrix kept(2, shape.classes());
    kept << cot.row(0), cot.row(2);
    net.Forward(x, std::vector<int64_t>{0, 2});
    Eigen::VectorXd others;
    net.ClippedGradientSum(kept, 1.0, &others);
    EXPECT_LT((all - others).norm(), 1e-12);
  }
}

TEST(NetworkTest, ValidatesShapes) {
  EXPECT_OK((NetworkShape{3, {}, 1}.Validate()));
  EXPECT_THAT((NetworkShape{0, {}, 1}.Validate()), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT((NetworkShape{3, {4, 4, 4}, 1}.Validate()),
              StatusIs(absl::StatusCode::kInvalidArgument, "at most 2 hidden layers"));
  EXPECT_THAT((NetworkShape{3, {0}, 1}.Validate()),
              StatusIs(absl::StatusCode::kInvalidArgument, "hidden_units"));
  EXPECT_THAT((NetworkShape{3, {}, 65}.Validate()), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ((NetworkShape{3, {4}, 2}.NumParams()), 3 * 4 + 4 * 2 + 2);
}

// ---- Sensitivity of the releases ------------------------------------------------------------

// Neighbours: row 9's group changed. A full batch (no sampling difference), two epochs of one
// step; the recorder releases the same constants on both, so the second step (W != 0) runs at
// the same state in both.
TEST(StochasticFairTest, DpFermiReleasesMoveByAtMostTheSensitivity) {
  for (Fairness fairness : {Fairness::kDemographicParity, Fairness::kEqualizedOdds}) {
    for (const NetworkShape& shape : {NetworkShape{3, {}, 1}, NetworkShape{3, {4}, 1}}) {
      StochasticData d1 = Synthetic(64, 5);
      StochasticData d2 = d1;
      d2.group[9] = 1 - d2.group[9];
      FermiOptions options;
      options.epochs = 2;
      options.batch_size = 64;
      options.lambda = 1;
      options.clip_theta = 0.02;  // binding, so the bound is tight
      options.clip_w = 0.5;
      options.lr_w = 1000;  // W far from 0 after the first step (then projected to radius 1)
      options.fairness = fairness;
      ASSERT_OK_AND_ASSIGN(FermiPlan plan, PlanDpFermi(shape, 2, 64, options, 3.0));
      // The same released marginals for both (public constants).
      const std::vector<double> marginals = Marginals(d1, fairness, false);
      std::vector<std::vector<int64_t>> log1, log2;
      for (auto [data, log] : {std::pair{&d1, &log1}, std::pair{&d2, &log2}}) {
        Network net(shape);
        std::mt19937_64 init(1);
        net.Initialize(init);
        std::mt19937_64 gen(2);
        ASSERT_OK(TrainDpFermi(*data, marginals, options, plan, Recording(log), gen, nullptr, &net,
                               nullptr));
      }
      ASSERT_EQ(log1.size(), 2u);
      const size_t p = static_cast<size_t>(shape.NumParams());
      ASSERT_EQ(log1[0].size(), 2 * p);
      const size_t q = log1[1].size() / 2;
      // Step 1: W = 0, the θ part is 0 on both.
      EXPECT_EQ(L2(log1[0], log2[0], 0, p), 0);
      EXPECT_LE(L2(log1[1], log2[1], 0, q), plan.w.sensitivity_steps);
      const double theta = L2(log1[0], log2[0], p, 2 * p);
      const double w = L2(log1[1], log2[1], q, 2 * q);
      EXPECT_LE(theta, plan.theta.sensitivity_steps);
      EXPECT_LE(w, plan.w.sensitivity_steps);
      // The clip binds: the change is most of the bound (a vacuous bound would not be).
      EXPECT_GT(theta, 0.5 * plan.theta.sensitivity_steps)
          << "fairness " << static_cast<int>(fairness) << " hidden " << shape.hidden.size();
      // W's bound is √2 C_W (a row's W gradient moves between two rows of W), and it binds.
      EXPECT_GT(w, 0.9 * plan.w.sensitivity_steps);
    }
  }
}

TEST(StochasticFairTest, PfldDualReleaseMovesByAtMostTheSensitivity) {
  for (Fairness fairness :
       {Fairness::kDemographicParity, Fairness::kEqualizedOdds, Fairness::kAccuracyParity}) {
    StochasticData d1 = Synthetic(64, 6);
    StochasticData d2 = d1;
    d2.group[4] = 1 - d2.group[4];
    PfldOptions options;
    options.epochs = 1;
    options.batch_size = 64;
    options.fairness = fairness;
    const NetworkShape shape{3, {}, 1};
    ASSERT_OK_AND_ASSIGN(PfldPlan plan, PlanPfld(shape, 2, 64, options, 3.0));
    const std::vector<double> counts = Marginals(d1, fairness, true);
    std::vector<std::vector<int64_t>> log1, log2;
    for (auto [data, log] : {std::pair{&d1, &log1}, std::pair{&d2, &log2}}) {
      Network net(shape);
      net.params() << 0.5, -0.3, 0.1;
      std::mt19937_64 gen(2);
      ASSERT_OK(
          TrainPfld(*data, counts, options, plan, Recording(log), gen, nullptr, &net, nullptr));
    }
    ASSERT_EQ(log1.size(), 2u);
    // The first step's group part is 0 (λ starts at 0) in both; the dual release follows.
    EXPECT_EQ(log1[0], log2[0]);
    const double dual = L2(log1[1], log2[1], 0, log1[1].size());
    EXPECT_LE(dual, plan.dual.sensitivity_steps);
    EXPECT_GT(dual, 0.05 * plan.dual.sensitivity_steps);
  }
}

TEST(StochasticFairTest, NoisePlansKeepTheStdWithinTheSampler) {
  for (double z : {0.5, 1.0, 5.0, 20.0, 500.0, 5000.0}) {
    for (int64_t dim : {3, 101, 4000}) {
      ASSERT_OK_AND_ASSIGN(NoisySumPlan plan, PlanNoisySum(2, 1, dim, 32561, z));
      EXPECT_LE(plan.std_steps, 1 << 20) << z;
      EXPECT_NEAR(plan.std_steps, z * plan.sensitivity_steps, 1e-9 * plan.std_steps);
      // At the multipliers of real runs the rounding adds little to the clip's part.
      if (z <= 20 && dim <= 101) {
        EXPECT_LT(std::sqrt(static_cast<double>(dim)), 0.01 * plan.sensitivity_steps) << z;
      }
    }
  }
  EXPECT_THAT(PlanNoisySum(2, 1, 3, 10, 0), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(PlanNoisySum(2, 1, 3, 10, 1e9), StatusIs(absl::StatusCode::kInvalidArgument));
}

// ---- Learning without noise ------------------------------------------------------------------

FermiOptions FastFermi(double lambda) {
  FermiOptions options;
  options.epochs = 60;
  options.batch_size = 128;
  options.lr_theta = 0.5;
  options.lr_w = 0.5;
  options.w_radius = 5;
  options.clip_theta = 100;
  options.clip_w = 100;
  options.lambda = lambda;
  return options;
}

TEST(StochasticFairTest, DpFermiLambdaShrinksTheParityGapAndIsDeterministic) {
  const StochasticData d = Synthetic(2000, 11);
  const NetworkShape shape{3, {}, 1};
  Eigen::VectorXd fair_params;
  double gap[2], acc[2];
  for (int run = 0; run < 2; ++run) {
    const FermiOptions options = FastFermi(run == 0 ? 0 : 3);
    ASSERT_OK_AND_ASSIGN(FermiPlan plan, PlanDpFermi(shape, 2, d.n(), options, 1.0));
    Network net(shape);
    std::mt19937_64 gen(4);
    ASSERT_OK(TrainDpFermi(d, Marginals(d, options.fairness, false), options, plan, ZeroNoise(),
                           gen, nullptr, &net, nullptr));
    gap[run] = SoftGap(d, net);
    acc[run] = Accuracy(d, net);
    if (run == 1) fair_params = net.params();
  }
  EXPECT_GT(acc[0], 0.75);
  EXPECT_GT(acc[1], 0.6);
  EXPECT_LT(gap[1], 0.6 * gap[0]) << "plain " << gap[0] << " fair " << gap[1];
  // The same generator: the same model, to the bit.
  const FermiOptions options = FastFermi(3);
  ASSERT_OK_AND_ASSIGN(FermiPlan plan, PlanDpFermi(shape, 2, d.n(), options, 1.0));
  Network again(shape);
  std::mt19937_64 gen(4);
  ASSERT_OK(TrainDpFermi(d, Marginals(d, options.fairness, false), options, plan, ZeroNoise(), gen,
                         nullptr, &again, nullptr));
  EXPECT_EQ((again.params() - fair_params).norm(), 0);
}

TEST(StochasticFairTest, EqualizedOddsVariantsShrinkTheConditionalGaps) {
  const StochasticData d = Synthetic(2000, 12);
  const NetworkShape shape{3, {}, 1};
  // Plain, DP-FERMI (EO), PF-LD (EO): the worse of the two labels' soft gaps.
  double worst[3];
  for (int run = 0; run < 3; ++run) {
    Network net(shape);
    std::mt19937_64 gen(5);
    if (run < 2) {
      FermiOptions options = FastFermi(run == 0 ? 0 : 5);
      options.fairness = Fairness::kEqualizedOdds;
      ASSERT_OK_AND_ASSIGN(FermiPlan plan, PlanDpFermi(shape, 2, d.n(), options, 1.0));
      ASSERT_OK(TrainDpFermi(d, Marginals(d, options.fairness, false), options, plan, ZeroNoise(),
                             gen, nullptr, &net, nullptr));
    } else {
      PfldOptions options;
      options.epochs = 60;
      options.batch_size = 128;
      options.lr_theta = 0.2;
      options.dual_lr = 0.2;
      options.clip = 100;
      options.fairness = Fairness::kEqualizedOdds;
      ASSERT_OK_AND_ASSIGN(PfldPlan plan, PlanPfld(shape, 2, d.n(), options, 1.0));
      ASSERT_OK(TrainPfld(d, Marginals(d, options.fairness, true), options, plan, ZeroNoise(), gen,
                          nullptr, &net, nullptr));
    }
    worst[run] = std::max(SoftGap(d, net, 0), SoftGap(d, net, 1));
  }
  EXPECT_LT(worst[1], 0.7 * worst[0]) << worst[0] << " " << worst[1];
  EXPECT_LT(worst[2], 0.7 * worst[0]) << worst[0] << " " << worst[2];
}

TEST(StochasticFairTest, PfldDualShrinksTheParityGapAndReportsItsMultipliers) {
  const StochasticData d = Synthetic(2000, 13);
  const NetworkShape shape{3, {}, 1};
  double gap[2];
  StochasticTrace trace;
  for (int run = 0; run < 2; ++run) {
    PfldOptions options;
    options.epochs = 60;
    options.batch_size = 128;
    options.lr_theta = 0.2;
    options.dual_lr = run == 0 ? 1e-12 : 0.2;
    options.clip = 100;
    ASSERT_OK_AND_ASSIGN(PfldPlan plan, PlanPfld(shape, 2, d.n(), options, 1.0));
    Network net(shape);
    std::mt19937_64 gen(6);
    ASSERT_OK(TrainPfld(d, Marginals(d, options.fairness, true), options, plan, ZeroNoise(), gen,
                        nullptr, &net, &trace));
    gap[run] = SoftGap(d, net);
  }
  EXPECT_LT(gap[1], 0.6 * gap[0]) << gap[0] << " " << gap[1];
  ASSERT_EQ(trace.lambda.size(), 2u);
  EXPECT_GT(trace.lambda[0] + trace.lambda[1], 0);
  ASSERT_EQ(trace.violations.size(), 2u);
}

// Issue 22 §4: PF-LD's target-violation form. With a target above every violation (1) the
// multipliers never leave 0 and the model is the unconstrained one; with a target between the
// unconstrained gap and 0 the gap ends between the two (the multipliers shrink once it is
// met), and the averaged final model is the same on a re-run.
TEST(StochasticFairTest, PfldTargetStopsTheDualOnceTheViolationIsBelowIt) {
  const StochasticData d = Synthetic(2000, 13);
  const NetworkShape shape{3, {}, 1};
  const auto run = [&](double target, StochasticTrace* trace) {
    PfldOptions options;
    options.epochs = 60;
    options.batch_size = 128;
    options.lr_theta = 0.2;
    options.dual_lr = 0.2;
    options.clip = 100;
    options.target = target;
    auto plan = PlanPfld(shape, 2, d.n(), options, 1.0);
    EXPECT_OK(plan);
    Network net(shape);
    std::mt19937_64 gen(6);
    EXPECT_OK(TrainPfld(d, Marginals(d, options.fairness, true), options, *plan, ZeroNoise(), gen,
                        nullptr, &net, trace));
    return std::make_pair(SoftGap(d, net), net.params());
  };
  StochasticTrace loose, strict, mid;
  const auto [gap_loose, params_loose] = run(1, &loose);
  const auto [gap_strict, params_strict] = run(0, &strict);
  EXPECT_EQ(loose.lambda, std::vector<double>(2, 0.0));
  EXPECT_GT(strict.lambda[0] + strict.lambda[1], 0);
  EXPECT_LT(gap_strict, 0.6 * gap_loose);
  // v̂ is a group against the population: about half the gap between two balanced groups.
  const double target = (gap_loose + gap_strict) / 4;
  const auto [gap_mid, params_mid] = run(target, &mid);
  EXPECT_LT(gap_mid, gap_loose);
  EXPECT_GT(gap_mid, gap_strict) << gap_loose << " " << gap_mid << " " << gap_strict;
  const auto [gap_again, params_again] = run(target, &mid);
  EXPECT_EQ(params_again, params_mid);
  PfldOptions bad;
  bad.target = 1.5;
  EXPECT_THAT(bad.Validate(), StatusIs(absl::StatusCode::kInvalidArgument, "gamma"));
}

// Three classes from two features: softmax beats the majority class by far.
TEST(StochasticFairTest, SoftmaxLearnsThreeClasses) {
  std::mt19937_64 gen(21);
  std::normal_distribution<double> normal(0, 1);
  StochasticData d;
  d.k = 2;
  d.classes = 3;
  const int n = 1500;
  d.x.resize(n, 3);
  for (int i = 0; i < n; ++i) {
    const int y = i % 3;
    d.y.push_back(y);
    d.group.push_back(i % 2);
    d.x(i, 0) = normal(gen) * 0.5 + (y == 1 ? 2 : 0);
    d.x(i, 1) = normal(gen) * 0.5 + (y == 2 ? 2 : 0);
    d.x(i, 2) = 1;
  }
  for (Fairness fairness : {Fairness::kDemographicParity, Fairness::kEqualizedOdds}) {
    FermiOptions options = FastFermi(0.5);
    options.fairness = fairness;
    const NetworkShape shape{3, {}, 3};
    ASSERT_OK_AND_ASSIGN(FermiPlan plan, PlanDpFermi(shape, 2, n, options, 1.0));
    Network net(shape);
    std::mt19937_64 rng(8);
    ASSERT_OK(TrainDpFermi(d, Marginals(d, fairness, false), options, plan, ZeroNoise(), rng,
                           nullptr, &net, nullptr));
    EXPECT_GT(Accuracy(d, net), 0.85);
  }
}

// y = XOR of the features' signs: no linear model beats chance; a small MLP does.
TEST(StochasticFairTest, MlpLearnsWhatALinearModelCannot) {
  std::mt19937_64 gen(31);
  std::uniform_real_distribution<double> u(-1, 1);
  StochasticData d;
  d.k = 2;
  const int n = 2000;
  d.x.resize(n, 3);
  for (int i = 0; i < n; ++i) {
    d.x(i, 0) = u(gen);
    d.x(i, 1) = u(gen);
    d.x(i, 2) = 1;
    d.y.push_back((d.x(i, 0) > 0) != (d.x(i, 1) > 0) ? 1 : 0);
    d.group.push_back(i % 2);
  }
  double acc[2];
  for (int run = 0; run < 2; ++run) {
    FermiOptions options = FastFermi(0);
    options.epochs = 150;
    const NetworkShape shape{3, run == 0 ? std::vector<int>{} : std::vector<int>{16}, 1};
    ASSERT_OK_AND_ASSIGN(FermiPlan plan, PlanDpFermi(shape, 2, n, options, 1.0));
    Network net(shape);
    std::mt19937_64 rng(9);
    net.Initialize(rng);
    ASSERT_OK(TrainDpFermi(d, Marginals(d, options.fairness, false), options, plan, ZeroNoise(),
                           rng, nullptr, &net, nullptr));
    acc[run] = Accuracy(d, net);
  }
  EXPECT_LT(acc[0], 0.65);
  EXPECT_GT(acc[1], 0.9);
}

// Each field at the cap of 1,000 passes ValidateStepScales and `above` it is refused there; a
// job charged before the cap still runs (Validate).
template <typename Options>
void ExpectStepCap(std::initializer_list<double Options::*> fields, double above) {
  for (double Options::*field : fields) {
    Options options;
    options.*field = 1000;
    EXPECT_OK(options.ValidateStepScales());
    options.*field = above;
    EXPECT_THAT(options.ValidateStepScales(),
                StatusIs(absl::StatusCode::kInvalidArgument, "must be in (0, 1000]"));
    EXPECT_OK(options.Validate());
  }
}

TEST(StochasticFairTest, RejectsBadOptions) {
  FermiOptions fermi;
  fermi.fairness = Fairness::kAccuracyParity;
  EXPECT_THAT(fermi.Validate(), StatusIs(absl::StatusCode::kInvalidArgument, "accuracy parity"));
  fermi = FermiOptions();
  fermi.lr_w = 0;
  EXPECT_THAT(fermi.Validate(), StatusIs(absl::StatusCode::kInvalidArgument, "lr_w"));
  PfldOptions pfld;
  pfld.dual_lr = -1;
  EXPECT_THAT(pfld.Validate(), StatusIs(absl::StatusCode::kInvalidArgument, "dual_lr"));
  pfld = PfldOptions();
  pfld.epochs = 0;
  EXPECT_THAT(pfld.Validate(), StatusIs(absl::StatusCode::kInvalidArgument, "epochs"));
  // Steps and clips above 1,000 overflow the parameters: refused, each by its name.
  ExpectStepCap<FermiOptions>({&FermiOptions::lr_theta, &FermiOptions::lr_w,
                               &FermiOptions::w_radius, &FermiOptions::clip_theta,
                               &FermiOptions::clip_w},
                              1e308);
  ExpectStepCap<PfldOptions>({&PfldOptions::lr_theta, &PfldOptions::clip, &PfldOptions::dual_lr},
                             1001);
}

// A model whose outputs are no longer numbers fails with one message, whatever the exact sum
// it could not release (which depends on the groups) was.
TEST(StochasticFairTest, ADivergedModelSaysSoWithoutTheSumItCouldNotRelease) {
  const StochasticData d = Synthetic(200, 11);
  const NetworkShape shape{3, {}, 1};
  const FermiOptions options = FastFermi(3);
  ASSERT_OK_AND_ASSIGN(FermiPlan plan, PlanDpFermi(shape, 2, d.n(), options, 1.0));
  Network net(shape);
  net.params().setConstant(std::numeric_limits<double>::quiet_NaN());
  std::mt19937_64 gen(4);
  const absl::Status status = TrainDpFermi(d, Marginals(d, options.fairness, false), options,
                                           plan, ZeroNoise(), gen, nullptr, &net, nullptr);
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kInternal, "the model diverged"));
  EXPECT_THAT(std::string(status.message()), ::testing::Not(::testing::HasSubstr("nan")));
}

}  // namespace
}  // namespace fairvault::core::learn
