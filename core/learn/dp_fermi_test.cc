// Tests of DP-FERMI (logistic regression, demographic parity): the released integer sums move
// by at most the declared sensitivity between neighbouring datasets at any state, the noise
// plan's stds stay within the sampler's range, λ = 0 without noise learns the labels, λ > 0
// without noise shrinks the demographic-parity gap, and training is deterministic given the
// generator.
#include "core/learn/dp_fermi.h"

#include <cmath>
#include <random>
#include <vector>

#include "core/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace fairvault::core::learn {
namespace {

using ::fairvault::testing::StatusIs;

// Two groups; group 1 has a higher base rate and a shifted feature: an unconstrained classifier
// selects group 1 far more often.
FermiData Synthetic(int n, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> normal(0, 1);
  std::uniform_real_distribution<double> u(0, 1);
  FermiData data;
  data.k = 2;
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
  int ones = 0;
  for (int a : data.group) ones += a;
  data.marginals = {1 - ones / double(n), ones / double(n)};
  return data;
}

// The gap between the groups' mean predicted probability (the soft demographic-parity gap
// ERMI penalises).
double SoftGap(const FermiData& data, const Eigen::VectorXd& theta) {
  double pos[2] = {0, 0}, cnt[2] = {0, 0};
  for (Eigen::Index i = 0; i < data.x.rows(); ++i) {
    pos[data.group[i]] += 1 / (1 + std::exp(-data.x.row(i).dot(theta)));
    cnt[data.group[i]] += 1;
  }
  return std::abs(pos[1] / cnt[1] - pos[0] / cnt[0]);
}

double Accuracy(const FermiData& data, const Eigen::VectorXd& theta) {
  double correct = 0;
  for (Eigen::Index i = 0; i < data.x.rows(); ++i) {
    correct += (data.x.row(i).dot(theta) > 0) == (data.y[i] == 1);
  }
  return correct / data.x.rows();
}

TEST(DpFermiTest, ReleasedSumsMoveByAtMostTheSensitivityBetweenNeighbours) {
  const FermiData d = Synthetic(200, 1);
  FermiOptions options;
  options.clip_theta = 0.7;
  options.clip_w = 1.3;
  options.lambda = 1;
  ASSERT_OK_AND_ASSIGN(FermiNoisePlan plan, PlanFermiNoise(3, 2, options, 3.0));
  std::mt19937_64 gen(2);
  std::normal_distribution<double> normal(0, 1);
  std::vector<int64_t> rows(200);
  for (int i = 0; i < 200; ++i) rows[i] = i;
  for (int trial = 0; trial < 200; ++trial) {
    // A random state (θ, W) and a random subject whose group flips.
    Eigen::VectorXd theta(3);
    for (int j = 0; j < 3; ++j) theta(j) = 2 * normal(gen);
    Eigen::MatrixXd w(2, 2);
    for (int j = 0; j < 4; ++j) w(j % 2, j / 2) = normal(gen);
    FermiData neighbour = d;
    const int who = trial % 200;
    neighbour.group[who] = 1 - neighbour.group[who];
    FermiBatch b1, b2;
    FermiBatchGradients(d, options, plan, theta, w, rows, &b1);
    FermiBatchGradients(neighbour, options, plan, theta, w, rows, &b2);
    double l2_theta = 0, l2_w = 0;
    for (int j = 0; j < 3; ++j) l2_theta += std::pow(b1.sum_theta[j] - b2.sum_theta[j], 2);
    for (int j = 0; j < 4; ++j) l2_w += std::pow(b1.sum_w[j] - b2.sum_w[j], 2);
    EXPECT_LE(std::sqrt(l2_theta), plan.sensitivity_theta_steps) << "trial " << trial;
    EXPECT_LE(std::sqrt(l2_w), plan.sensitivity_w_steps) << "trial " << trial;
    // The exact parts do not depend on the group at all.
    EXPECT_EQ((b1.exact_theta - b2.exact_theta).norm(), 0);
    EXPECT_EQ((b1.exact_w - b2.exact_w).norm(), 0);
  }
}

TEST(DpFermiTest, NoisePlanKeepsTheStdWithinTheSampler) {
  FermiOptions options;
  for (double z : {0.3, 1.0, 10.0, 1000.0}) {
    ASSERT_OK_AND_ASSIGN(FermiNoisePlan plan, PlanFermiNoise(100, 4, options, z));
    EXPECT_LE(plan.std_theta_steps, 1 << 20) << z;
    EXPECT_LE(plan.std_w_steps, 1 << 20) << z;
    EXPECT_GE(plan.std_theta_steps, 1 << 15) << z;
    EXPECT_NEAR(plan.std_theta_steps, z * plan.sensitivity_theta_steps, 1e-9);
  }
  EXPECT_THAT(PlanFermiNoise(3, 2, options, 0), StatusIs(absl::StatusCode::kInvalidArgument));
}

// λ = 0 learns the labels; λ = 1 moves the soft predictions towards parity (the ERMI term's
// effect on the thresholded decisions is abrupt on this data: larger λ or faster W collapse to
// a constant, perfectly fair, classifier); both without noise, deterministic given the generator.
TEST(DpFermiTest, WithoutNoiseLambdaMovesPredictionsTowardsParity) {
  const FermiData d = Synthetic(4000, 3);
  FermiOptions options;
  options.epochs = 40;
  options.batch_size = 256;
  options.lr_theta = 0.5;
  options.lr_w = 1;
  options.clip_theta = 100;
  options.clip_w = 100;
  options.w_radius = 5;
  options.lambda = 0;
  ASSERT_OK_AND_ASSIGN(FermiNoisePlan plan, PlanFermiNoise(3, 2, options, 1.0));
  const auto zero = dp::MakeZeroNoise();
  std::mt19937_64 gen1(4);
  ASSERT_OK_AND_ASSIGN(Eigen::VectorXd plain,
                       TrainDpFermiLogistic(d, options, plan, *zero, *zero, gen1, nullptr));
  options.lambda = 1;
  std::mt19937_64 gen2(4);
  ASSERT_OK_AND_ASSIGN(Eigen::VectorXd fair,
                       TrainDpFermiLogistic(d, options, plan, *zero, *zero, gen2, nullptr));
  const double gap_plain = SoftGap(d, plain), gap_fair = SoftGap(d, fair);
  EXPECT_GT(Accuracy(d, plain), 0.75);
  EXPECT_GT(Accuracy(d, fair), 0.75);
  EXPECT_LT(gap_fair, 0.9 * gap_plain) << "plain " << gap_plain << " fair " << gap_fair;
  // Determinism: the same generator state gives the same model.
  std::mt19937_64 gen3(4);
  ASSERT_OK_AND_ASSIGN(Eigen::VectorXd again,
                       TrainDpFermiLogistic(d, options, plan, *zero, *zero, gen3, nullptr));
  EXPECT_EQ((again - fair).norm(), 0);
}

}  // namespace
}  // namespace fairvault::core::learn
