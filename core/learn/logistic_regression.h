// Plain L2-regularised logistic regression (Newton / IRLS on Eigen): the company-side
// baseline model of the demo. Not private and never run on protected attributes.
#ifndef FAIRVAULT_CORE_LEARN_LOGISTIC_REGRESSION_H_
#define FAIRVAULT_CORE_LEARN_LOGISTIC_REGRESSION_H_

#include <vector>

#include "Eigen/Dense"
#include "absl/status/statusor.h"

namespace fairvault::core::learn {

struct LogisticRegressionOptions {
  double l2 = 1e-4;         // ridge penalty on the weights (not the intercept), >= 0
  int max_iterations = 50;  // Newton steps
  double tolerance = 1e-8;  // stop when the step's max-norm is below this
  absl::Status Validate() const;
};

struct LogisticRegressionModel {
  Eigen::VectorXd weights;  // one per feature column
  double intercept = 0;
  // P(y=1 | x) for each row of x.
  Eigen::VectorXd PredictProbability(const Eigen::MatrixXd& x) const;
  // 1 where probability >= threshold.
  std::vector<int> Predict(const Eigen::MatrixXd& x, double threshold = 0.5) const;
};

// Fits on rows of x (n x d) with labels in {0,1}. InvalidArgument on shape mismatch, empty
// input, non-finite features or labels outside {0,1}.
absl::StatusOr<LogisticRegressionModel> FitLogisticRegression(
    const Eigen::MatrixXd& x, const std::vector<int>& y, const LogisticRegressionOptions& options);

}  // namespace fairvault::core::learn

#endif  // FAIRVAULT_CORE_LEARN_LOGISTIC_REGRESSION_H_
