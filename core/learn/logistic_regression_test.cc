// Tests of the Newton/IRLS logistic regression: coefficient recovery on synthetic data,
// first-order optimality, the unpenalised intercept, separable data and input validation.
#include "core/learn/logistic_regression.h"

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace fairvault::core::learn {
namespace {

using ::fairvault::testing::StatusIs;

double Sigmoid(double z) { return 1 / (1 + std::exp(-z)); }

struct Data {
  Eigen::MatrixXd x;
  std::vector<int> y;
};

// Rows x ~ N(0, I_d), labels y ~ Bernoulli(σ(x·w + b)).
Data Synthetic(int n, const Eigen::VectorXd& w, double b, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> normal(0, 1);
  std::uniform_real_distribution<double> u(0, 1);
  Data data{Eigen::MatrixXd(n, w.size()), std::vector<int>(n)};
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < w.size(); ++j) data.x(i, j) = normal(gen);
    data.y[i] = u(gen) < Sigmoid(data.x.row(i).dot(w) + b) ? 1 : 0;
  }
  return data;
}

// Gradient of mean log-loss + (l2/2)‖w‖² at the fitted model, computed independently; the
// last entry is the intercept's.
Eigen::VectorXd Gradient(const Data& data, const LogisticRegressionModel& model, double l2) {
  const Eigen::Index n = data.x.rows(), d = data.x.cols();
  Eigen::VectorXd g = Eigen::VectorXd::Zero(d + 1);
  for (Eigen::Index i = 0; i < n; ++i) {
    const double r = Sigmoid(data.x.row(i).dot(model.weights) + model.intercept) - data.y[i];
    g.head(d) += r * data.x.row(i).transpose();
    g[d] += r;
  }
  g /= static_cast<double>(n);
  g.head(d) += l2 * model.weights;
  return g;
}

TEST(LogisticRegressionTest, RecoversKnownCoefficients) {
  Eigen::VectorXd w(3);
  w << 1.0, -2.0, 0.5;
  const double b = -0.3;
  const Data data = Synthetic(50000, w, b, 42);
  LogisticRegressionOptions options;
  options.l2 = 0;
  auto model = FitLogisticRegression(data.x, data.y, options);
  ASSERT_OK(model);
  // The maximum-likelihood estimate's standard errors (inverse Fisher information at the truth)
  // are 0.012–0.019 at n = 50000, so 0.1 is more than 5 standard errors for each coefficient:
  // a fresh seed would fail with probability below 1e-5.
  ASSERT_EQ(model->weights.size(), 3);
  for (int j = 0; j < 3; ++j) EXPECT_NEAR(model->weights[j], w[j], 0.1) << "weight " << j;
  EXPECT_NEAR(model->intercept, b, 0.1);
  // Converged to the optimum, not just near the truth.
  EXPECT_LT(Gradient(data, *model, 0).cwiseAbs().maxCoeff(), 1e-8);
}

TEST(LogisticRegressionTest, PenalisedFitIsStationaryForPenalisedObjective) {
  Eigen::VectorXd w(2);
  w << 2.0, -1.0;
  const Data data = Synthetic(3000, w, 0.7, 7);
  LogisticRegressionOptions options;
  options.l2 = 0.05;
  auto model = FitLogisticRegression(data.x, data.y, options);
  ASSERT_OK(model);
  EXPECT_LT(Gradient(data, *model, options.l2).cwiseAbs().maxCoeff(), 1e-8);
  // The penalty shrinks the weights towards 0.
  auto unpenalised = FitLogisticRegression(data.x, data.y, LogisticRegressionOptions{0, 50, 1e-8});
  ASSERT_OK(unpenalised);
  EXPECT_LT(model->weights.norm(), unpenalised->weights.norm());
}

TEST(LogisticRegressionTest, InterceptIsNotPenalised) {
  // With a huge penalty the weights vanish and the intercept must fit the base rate,
  // logit(mean y), rather than shrink to 0.
  Eigen::VectorXd w(2);
  w << 1.0, 1.0;
  const Data data = Synthetic(5000, w, 1.5, 3);
  double mean = 0;
  for (int v : data.y) mean += v;
  mean /= data.y.size();
  LogisticRegressionOptions options;
  options.l2 = 1e4;
  auto model = FitLogisticRegression(data.x, data.y, options);
  ASSERT_OK(model);
  EXPECT_LT(model->weights.cwiseAbs().maxCoeff(), 1e-3);
  EXPECT_NEAR(model->intercept, std::log(mean / (1 - mean)), 1e-3);
}

Data Separable() {
  Data data{Eigen::MatrixXd(40, 1), std::vector<int>(40)};
  for (int i = 0; i < 40; ++i) {
    data.x(i, 0) = i < 20 ? -2.0 + 0.1 * i : 0.1 + 0.1 * (i - 20);
    data.y[i] = i < 20 ? 0 : 1;
  }
  return data;
}

TEST(LogisticRegressionTest, SeparableDataStaysFiniteWithL2) {
  const Data data = Separable();
  LogisticRegressionOptions options;  // default l2 = 1e-4
  auto model = FitLogisticRegression(data.x, data.y, options);
  ASSERT_OK(model);
  EXPECT_TRUE(model->weights.allFinite());
  EXPECT_TRUE(std::isfinite(model->intercept));
  EXPECT_GT(model->weights[0], 0);
  EXPECT_EQ(model->Predict(data.x), data.y);
  // A finite optimum exists with l2 > 0 and the fit reaches it.
  EXPECT_LT(Gradient(data, *model, options.l2).cwiseAbs().maxCoeff(), 1e-8);
}

TEST(LogisticRegressionTest, SeparableDataWithoutPenaltyStillReturnsFiniteModel) {
  const Data data = Separable();
  auto model = FitLogisticRegression(data.x, data.y, LogisticRegressionOptions{0, 50, 1e-8});
  ASSERT_OK(model);
  EXPECT_TRUE(model->weights.allFinite());
  EXPECT_TRUE(std::isfinite(model->intercept));
  EXPECT_EQ(model->Predict(data.x), data.y);
}

TEST(LogisticRegressionTest, SingleClassLabelsGiveFiniteConfidentModel) {
  Data data{Eigen::MatrixXd::Random(30, 2), std::vector<int>(30, 1)};
  auto model = FitLogisticRegression(data.x, data.y, LogisticRegressionOptions{});
  ASSERT_OK(model);
  EXPECT_TRUE(model->weights.allFinite());
  EXPECT_TRUE(std::isfinite(model->intercept));
  EXPECT_GT(model->PredictProbability(data.x).minCoeff(), 0.99);
}

TEST(LogisticRegressionModelTest, PredictsWithThreshold) {
  LogisticRegressionModel model;
  model.weights = Eigen::VectorXd::Constant(1, 2.0);
  model.intercept = -1;
  Eigen::MatrixXd x(3, 1);
  x << 0.0, 0.5, 1.0;  // z = -1, 0, 1
  const Eigen::VectorXd p = model.PredictProbability(x);
  EXPECT_NEAR(p[0], 1 / (1 + std::exp(1.0)), 1e-15);
  EXPECT_DOUBLE_EQ(p[1], 0.5);
  EXPECT_NEAR(p[2], 1 / (1 + std::exp(-1.0)), 1e-15);
  EXPECT_EQ(model.Predict(x), (std::vector<int>{0, 1, 1}));  // 0.5 >= 0.5
  EXPECT_EQ(model.Predict(x, 0.6), (std::vector<int>{0, 0, 1}));
  // Extreme scores do not overflow.
  x << -1e4, 0, 1e4;
  const Eigen::VectorXd q = model.PredictProbability(x);
  EXPECT_EQ(q[0], 0.0);
  EXPECT_EQ(q[2], 1.0);
}

TEST(LogisticRegressionTest, RejectsBadInput) {
  const auto kBad = absl::StatusCode::kInvalidArgument;
  const LogisticRegressionOptions options;
  Eigen::MatrixXd x(3, 2);
  x << 1, 2, 3, 4, 5, 6;
  EXPECT_THAT(FitLogisticRegression(Eigen::MatrixXd(0, 2), {}, options),
              StatusIs(kBad, "x has no rows"));
  EXPECT_THAT(FitLogisticRegression(x, {0, 1}, options),
              StatusIs(kBad, "y has 2 labels but x has 3 rows"));
  EXPECT_THAT(FitLogisticRegression(x, {0, 2, 1}, options),
              StatusIs(kBad, "label at row 1 must be 0 or 1 (got 2)"));
  Eigen::MatrixXd bad = x;
  bad(2, 1) = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THAT(FitLogisticRegression(bad, {0, 1, 1}, options),
              StatusIs(kBad, "feature 1 at row 2 must be finite"));
  bad(2, 1) = std::numeric_limits<double>::infinity();
  EXPECT_THAT(FitLogisticRegression(bad, {0, 1, 1}, options), StatusIs(kBad, "feature 1"));
}

TEST(LogisticRegressionOptionsTest, ValidatesEachField) {
  const auto kBad = absl::StatusCode::kInvalidArgument;
  EXPECT_OK(LogisticRegressionOptions{}.Validate());
  EXPECT_OK((LogisticRegressionOptions{0, 1, 1e-3}.Validate()));
  EXPECT_THAT((LogisticRegressionOptions{-1, 50, 1e-8}.Validate()), StatusIs(kBad, "l2 must be"));
  EXPECT_THAT((LogisticRegressionOptions{std::nan(""), 50, 1e-8}.Validate()), StatusIs(kBad, "l2"));
  EXPECT_THAT((LogisticRegressionOptions{0, 0, 1e-8}.Validate()),
              StatusIs(kBad, "max_iterations must be >= 1 (got 0)"));
  EXPECT_THAT((LogisticRegressionOptions{0, 50, 0}.Validate()),
              StatusIs(kBad, "tolerance must be finite and > 0"));
  Eigen::MatrixXd x = Eigen::MatrixXd::Ones(2, 1);
  EXPECT_THAT(FitLogisticRegression(x, {0, 1}, LogisticRegressionOptions{-1, 50, 1e-8}),
              StatusIs(kBad, "l2"));
}

}  // namespace
}  // namespace fairvault::core::learn
