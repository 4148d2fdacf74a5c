// Damped Newton (IRLS) for L2-regularised logistic regression with an unpenalised intercept.
#include "core/learn/logistic_regression.h"

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/util/validate.h"

namespace fairvault::core::learn {
namespace {

// log(1 + e^z) without overflow.
double Softplus(double z) { return std::max(z, 0.0) + std::log1p(std::exp(-std::abs(z))); }

// σ(z) without overflow.
double Sigmoid(double z) {
  if (z >= 0) return 1.0 / (1.0 + std::exp(-z));
  const double e = std::exp(z);
  return e / (1.0 + e);
}

// The minimised objective: mean log-loss + (l2/2)·‖w‖², theta = (w, b). Taking the mean makes
// l2 independent of the number of rows.
double Objective(const Eigen::MatrixXd& xa, const Eigen::VectorXd& y, const Eigen::VectorXd& theta,
                 double l2) {
  const Eigen::VectorXd z = xa * theta;
  double loss = 0;
  for (Eigen::Index i = 0; i < z.size(); ++i) {
    // -log σ(z) = softplus(-z) for y=1, -log(1-σ(z)) = softplus(z) for y=0.
    loss += Softplus(y[i] > 0.5 ? -z[i] : z[i]);
  }
  const Eigen::Index d = theta.size() - 1;
  return loss / static_cast<double>(z.size()) + 0.5 * l2 * theta.head(d).squaredNorm();
}

}  // namespace

absl::Status LogisticRegressionOptions::Validate() const {
  if (!std::isfinite(l2) || l2 < 0) {
    return absl::InvalidArgumentError(absl::StrCat("l2 must be finite and >= 0 (got ", l2,
                                                   "); it is the ridge penalty on the weights"));
  }
  if (max_iterations < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_iterations must be >= 1 (got ", max_iterations, ")"));
  }
  return ValidateIsFiniteAndPositive(tolerance, "tolerance");
}

Eigen::VectorXd LogisticRegressionModel::PredictProbability(const Eigen::MatrixXd& x) const {
  const Eigen::VectorXd z = (x * weights).array() + intercept;
  return z.unaryExpr([](double v) { return Sigmoid(v); });
}

std::vector<int> LogisticRegressionModel::Predict(const Eigen::MatrixXd& x,
                                                  double threshold) const {
  const Eigen::VectorXd p = PredictProbability(x);
  std::vector<int> out(p.size());
  for (Eigen::Index i = 0; i < p.size(); ++i) out[i] = p[i] >= threshold ? 1 : 0;
  return out;
}

absl::StatusOr<LogisticRegressionModel> FitLogisticRegression(
    const Eigen::MatrixXd& x, const std::vector<int>& y, const LogisticRegressionOptions& options) {
  if (absl::Status s = options.Validate(); !s.ok()) return s;
  const Eigen::Index n = x.rows(), d = x.cols();
  if (n == 0) {
    return absl::InvalidArgumentError("x has no rows: fitting needs at least one example");
  }
  if (static_cast<Eigen::Index>(y.size()) != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("y has ", y.size(), " labels but x has ", n, " rows; they must match"));
  }
  for (Eigen::Index i = 0; i < n; ++i) {
    for (Eigen::Index j = 0; j < d; ++j) {
      if (!std::isfinite(x(i, j))) {
        return absl::InvalidArgumentError(
            absl::StrCat("feature ", j, " at row ", i, " must be finite (got ", x(i, j), ")"));
      }
    }
    if (y[i] != 0 && y[i] != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("label at row ", i, " must be 0 or 1 (got ", y[i], ")"));
    }
  }

  // Design matrix with a trailing column of ones for the intercept.
  Eigen::MatrixXd xa(n, d + 1);
  xa.leftCols(d) = x;
  xa.col(d).setOnes();
  Eigen::VectorXd yv(n);
  for (Eigen::Index i = 0; i < n; ++i) yv[i] = y[i];
  Eigen::VectorXd penalty = Eigen::VectorXd::Constant(d + 1, options.l2);
  penalty[d] = 0;  // the intercept is not shrunk

  const double inv_n = 1.0 / static_cast<double>(n);
  Eigen::VectorXd theta = Eigen::VectorXd::Zero(d + 1);
  double objective = Objective(xa, yv, theta, options.l2);
  for (int iter = 0; iter < options.max_iterations; ++iter) {
    const Eigen::VectorXd z = xa * theta;
    Eigen::VectorXd p(n), w(n);
    for (Eigen::Index i = 0; i < n; ++i) {
      p[i] = Sigmoid(z[i]);
      w[i] = p[i] * (1 - p[i]);
    }
    const Eigen::VectorXd gradient =
        inv_n * (xa.transpose() * (p - yv)) + penalty.cwiseProduct(theta);
    Eigen::MatrixXd hessian = inv_n * (xa.transpose() * w.asDiagonal() * xa);
    hessian.diagonal() += penalty;

    // Newton direction; if the Hessian is (numerically) singular — separable data without a
    // penalty, constant columns, all labels equal — add Levenberg–Marquardt damping until the
    // solve gives a finite descent direction.
    Eigen::VectorXd step;
    const double scale = std::max(hessian.diagonal().cwiseAbs().maxCoeff(), 1e-300);
    for (double damping = 0; damping <= scale * 1e6;
         damping = std::max(damping * 10, scale * 1e-12)) {
      Eigen::MatrixXd h = hessian;
      h.diagonal().array() += damping;
      Eigen::LDLT<Eigen::MatrixXd> ldlt(h);
      if (ldlt.info() == Eigen::Success && ldlt.isPositive()) {
        step = ldlt.solve(gradient);
        if (step.allFinite() && gradient.dot(step) > 0) break;
      }
      step.resize(0);
    }
    if (step.size() == 0) step = gradient / scale;  // steepest descent as a last resort

    // Step halving until the objective decreases (Armijo with c = 1e-4).
    double t = 1;
    Eigen::VectorXd candidate;
    double candidate_objective = objective;
    bool improved = false;
    for (int halvings = 0; halvings < 50; ++halvings, t *= 0.5) {
      candidate = theta - t * step;
      candidate_objective = Objective(xa, yv, candidate, options.l2);
      if (std::isfinite(candidate_objective) &&
          candidate_objective <= objective - 1e-4 * t * gradient.dot(step)) {
        improved = true;
        break;
      }
    }
    if (!improved) break;  // at the optimum up to rounding
    const double moved = (candidate - theta).cwiseAbs().maxCoeff();
    theta = candidate;
    objective = candidate_objective;
    if (moved < options.tolerance) break;
  }

  if (!theta.allFinite()) {
    return absl::InternalError("logistic regression produced non-finite coefficients");
  }
  LogisticRegressionModel model;
  model.weights = theta.head(d);
  model.intercept = theta[d];
  return model;
}

}  // namespace fairvault::core::learn
