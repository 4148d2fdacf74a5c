#include "core/learn/dp_fermi.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/random/distributions.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "core/dp/granularity.h"
#include "core/util/status_macros.h"
#include "core/util/validate.h"

namespace fairvault::core::learn {
namespace {

// The noise std stays near 2^16 grid steps (the discrete Gaussian sampler takes <= 2^20).
constexpr int kStdBits = 16;

double Sigmoid(double z) {
  return z >= 0 ? 1 / (1 + std::exp(-z)) : std::exp(z) / (1 + std::exp(z));
}

// v scaled to L2 norm <= c.
void ClipL2(Eigen::Ref<Eigen::VectorXd> v, double c) {
  const double norm = v.norm();
  if (norm > c) v *= c / norm;
}

}  // namespace

absl::Status FermiOptions::Validate() const {
  if (epochs < 1 || epochs > 10'000)
    return absl::InvalidArgumentError("epochs must be in 1..10000");
  if (batch_size < 1) return absl::InvalidArgumentError("batch_size must be >= 1");
  RETURN_IF_ERROR(ValidateIsFiniteAndPositive(lr_theta, "lr_theta"));
  RETURN_IF_ERROR(ValidateIsFiniteAndPositive(lr_w, "lr_w"));
  RETURN_IF_ERROR(ValidateIsFiniteAndPositive(w_radius, "w_radius"));
  RETURN_IF_ERROR(ValidateIsFiniteAndPositive(clip_theta, "clip_theta"));
  RETURN_IF_ERROR(ValidateIsFiniteAndPositive(clip_w, "clip_w"));
  RETURN_IF_ERROR(ValidateIsFiniteAndNonNegative(lambda, "lambda"));
  return absl::OkStatus();
}

int64_t FermiSteps(int64_t n, const FermiOptions& options) {
  const int64_t b = std::min<int64_t>(options.batch_size, std::max<int64_t>(n, 1));
  return static_cast<int64_t>(options.epochs) * ((n + b - 1) / b);
}

absl::StatusOr<FermiNoisePlan> PlanFermiNoise(int d, int k, const FermiOptions& options,
                                              double multiplier) {
  RETURN_IF_ERROR(options.Validate());
  RETURN_IF_ERROR(ValidateIsFiniteAndPositive(multiplier, "noise multiplier"));
  if (d < 1 || k < 2) return absl::InvalidArgumentError("DP-FERMI needs d >= 1 and k >= 2");
  FermiNoisePlan plan;
  // Snapping each coordinate moves it by at most grid/2, so two snapped clipped vectors differ
  // by at most 2C + √dim·grid in L2 (the W part has 2k coordinates).
  ASSIGN_OR_RETURN(plan.grid_theta,
                   dp::PowerOfTwoGranularity(multiplier * 2 * options.clip_theta, kStdBits));
  ASSIGN_OR_RETURN(plan.grid_w,
                   dp::PowerOfTwoGranularity(multiplier * 2 * options.clip_w, kStdBits));
  plan.sensitivity_theta_steps = 2 * options.clip_theta / plan.grid_theta + std::sqrt(d);
  plan.sensitivity_w_steps = 2 * options.clip_w / plan.grid_w + std::sqrt(2.0 * k);
  plan.std_theta_steps = multiplier * plan.sensitivity_theta_steps;
  plan.std_w_steps = multiplier * plan.sensitivity_w_steps;
  return plan;
}

void FermiBatchGradients(const FermiData& data, const FermiOptions& options,
                         const FermiNoisePlan& plan, const Eigen::VectorXd& theta,
                         const Eigen::MatrixXd& w, absl::Span<const int64_t> rows,
                         FermiBatch* out) {
  const int d = static_cast<int>(data.x.cols());
  const int k = data.k;
  out->exact_theta.setZero(d);
  out->exact_w.setZero(k, 2);
  out->sum_theta.assign(d, 0);
  out->sum_w.assign(2 * k, 0);
  Eigen::VectorXd part(d);
  Eigen::Vector2d w_row;
  std::vector<double> inv_sqrt_p(k);
  for (int a = 0; a < k; ++a) inv_sqrt_p[a] = 1 / std::sqrt(data.marginals[a]);
  const Eigen::RowVector2d w_col_sq = w.array().square().colwise().sum();
  for (const int64_t i : rows) {
    const auto x = data.x.row(i).transpose();
    const double s = Sigmoid(x.dot(theta));
    const double ds = s * (1 - s);
    const int a = data.group[i];
    // The loss and the a-free ψ term: the company's own data, exact.
    out->exact_theta.noalias() +=
        ((s - data.y[i]) - options.lambda * (w_col_sq(1) - w_col_sq(0)) * ds) * x;
    out->exact_w.col(0) -= options.lambda * 2 * (1 - s) * w.col(0);
    out->exact_w.col(1) -= options.lambda * 2 * s * w.col(1);
    // The a-dependent ψ term: clipped, snapped, summed exactly.
    part.noalias() = (2 * inv_sqrt_p[a] * (w(a, 1) - w(a, 0)) * ds) * x;
    ClipL2(part, options.clip_theta);
    for (int j = 0; j < d; ++j) {
      out->sum_theta[j] += static_cast<int64_t>(std::llround(part(j) / plan.grid_theta));
    }
    w_row << 2 * inv_sqrt_p[a] * (1 - s), 2 * inv_sqrt_p[a] * s;
    ClipL2(w_row, options.clip_w);
    out->sum_w[2 * a] += static_cast<int64_t>(std::llround(w_row(0) / plan.grid_w));
    out->sum_w[2 * a + 1] += static_cast<int64_t>(std::llround(w_row(1) / plan.grid_w));
  }
}

absl::StatusOr<Eigen::VectorXd> TrainDpFermiLogistic(
    const FermiData& data, const FermiOptions& options, const FermiNoisePlan& plan,
    const dp::IntegerNoise& noise_theta, const dp::IntegerNoise& noise_w, absl::BitGenRef gen,
    const std::function<bool(int64_t, int64_t)>& progress) {
  RETURN_IF_ERROR(options.Validate());
  const int64_t n = data.x.rows();
  const int d = static_cast<int>(data.x.cols());
  const int k = data.k;
  if (n < 1 || d < 1 || k < 2) return absl::InvalidArgumentError("DP-FERMI needs rows and groups");
  if (static_cast<int64_t>(data.y.size()) != n || static_cast<int64_t>(data.group.size()) != n ||
      static_cast<int>(data.marginals.size()) != k) {
    return absl::InternalError("DP-FERMI data sizes disagree");
  }
  for (int a = 0; a < k; ++a) {
    if (!(data.marginals[a] > 0)) return absl::InternalError("marginals must be positive");
  }
  if (!(plan.grid_theta > 0) || !(plan.grid_w > 0)) return absl::InternalError("no noise plan");

  const int64_t b = std::min<int64_t>(options.batch_size, n);
  const int64_t steps_per_epoch = (n + b - 1) / b;
  const int64_t steps = static_cast<int64_t>(options.epochs) * steps_per_epoch;
  Eigen::VectorXd theta = Eigen::VectorXd::Zero(d);
  Eigen::MatrixXd w = Eigen::MatrixXd::Zero(k, 2);
  std::vector<int64_t> perm(n);
  std::iota(perm.begin(), perm.end(), 0);

  FermiBatch batch;
  for (int64_t step = 0; step < steps; ++step) {
    // A uniformly random batch of b distinct rows (partial Fisher-Yates).
    for (int64_t t = 0; t < b; ++t) {
      const int64_t j = t + absl::Uniform<int64_t>(gen, 0, n - t);
      std::swap(perm[t], perm[j]);
    }
    FermiBatchGradients(data, options, plan, theta, w,
                        absl::MakeConstSpan(perm.data(), static_cast<size_t>(b)), &batch);
    Eigen::VectorXd& grad_theta = batch.exact_theta;
    Eigen::MatrixXd& grad_w = batch.exact_w;
    const std::vector<int64_t>& sum_theta = batch.sum_theta;
    const std::vector<int64_t>& sum_w = batch.sum_w;
    // The only releases: the noisy integer sums.
    for (int j = 0; j < d; ++j) {
      grad_theta(j) += options.lambda * plan.grid_theta *
                       static_cast<double>(noise_theta.AddNoise(sum_theta[j], gen));
    }
    for (int a = 0; a < k; ++a) {
      for (int c = 0; c < 2; ++c) {
        grad_w(a, c) += options.lambda * plan.grid_w *
                        static_cast<double>(noise_w.AddNoise(sum_w[2 * a + c], gen));
      }
    }
    theta -= (options.lr_theta / static_cast<double>(b)) * grad_theta;
    w += (options.lr_w / static_cast<double>(b)) * grad_w;
    const double norm = w.norm();
    if (norm > options.w_radius) w *= options.w_radius / norm;
    if (!theta.allFinite()) return absl::InternalError("DP-FERMI diverged");
    if (progress && (step + 1) % steps_per_epoch == 0 && !progress(step + 1, steps)) {
      return absl::AbortedError("DP-FERMI was stopped");
    }
  }
  return theta;
}

}  // namespace fairvault::core::learn
