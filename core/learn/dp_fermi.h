// DP-FERMI (Lowy, Gupta, Razaviyayn, ICLR 2023, Alg. 1; ALGORITHMS.md §5) for binary logistic
// regression under demographic parity: noisy two-timescale stochastic gradient descent-ascent
// on  min_θ max_{‖W‖_F ≤ D}  mean_i ℓ(θ; x_i, y_i) + λ·mean_i ψ_i(θ, W),  with
//   ψ_i(θ, W) = −Σ_j F_j(x_i)·Σ_r W[r][j]²  +  2·p̂_{a_i}^{-1/2}·Σ_j W[a_i][j]·F_j(x_i)  −  1,
// F = (1 − σ(θ·x), σ(θ·x)), W ∈ R^{K×2}, p̂ the released group marginals (public constants).
//
// Privacy (docs/privacy.md, "DP-FERMI"): only the second term of ψ_i involves the protected
// group a_i. Per sample, its gradients — g_θ,i = 2 p̂_a^{-1/2}(W[a][1] − W[a][0]) σ'(θ·x_i) x_i
// and g_W,i (row a: 2 p̂_a^{-1/2} F(x_i)) — are clipped to the public norms C_θ and C_W,
// snapped to a power-of-two grid, and summed exactly over the batch; the integer sums get
// discrete Gaussian noise. Changing one subject's group moves each clipped snapped vector by at
// most 2C + √dim·grid in L2, so each step is a pair of Gaussian mechanisms with the same noise
// multiplier z (std = z × that sensitivity). The loss gradient and the a-free ψ term are the
// company's own data: no noise. Batches are fixed-size, drawn without replacement.
#ifndef FAIRVAULT_CORE_LEARN_DP_FERMI_H_
#define FAIRVAULT_CORE_LEARN_DP_FERMI_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "Eigen/Dense"
#include "absl/random/bit_gen_ref.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/learn/fair_game.h"

namespace fairvault::core::learn {

struct FermiOptions {
  int epochs = 200;
  int batch_size = 1024;
  double lr_theta = 0.005;
  double lr_w = 0.01;
  double w_radius = 1;    // D: W is projected onto the Frobenius ball of radius D
  double clip_theta = 1;  // C_θ
  double clip_w = 1;      // C_W
  double lambda = 0.5;    // fairness weight λ >= 0
  absl::Status Validate() const;
};

// Steps of the schedule: epochs × ceil(n / batch).
int64_t FermiSteps(int64_t n, const FermiOptions& options);

// The data: preprocessed rows x (n × d, intercept included), 0/1 labels, groups 0..k-1 and the
// released marginals p̂ (k entries, each > 0: public).
struct FermiData {
  // Row-major: a step reads whole rows of its batch.
  Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> x;
  std::vector<int> y;
  std::vector<int> group;
  int k = 0;
  std::vector<double> marginals;
};

// The grid the a-dependent gradient parts are snapped to, each step's L2 sensitivity of the two
// released integer vectors in grid units, and the discrete Gaussian std in grid units for the
// noise multiplier z (std = z × sensitivity). All public: from the clip norms, the dimensions
// and z. The grid is chosen so that the std stays near 2^16 steps (the sampler takes <= 2^20).
struct FermiNoisePlan {
  double grid_theta = 0, grid_w = 0;
  double sensitivity_theta_steps = 0, sensitivity_w_steps = 0;
  double std_theta_steps = 0, std_w_steps = 0;
};
absl::StatusOr<FermiNoisePlan> PlanFermiNoise(int d, int k, const FermiOptions& options,
                                              double multiplier);

// One batch's gradients before noise, summed over the rows: the exact parts (for θ the loss
// gradient plus λ times the a-free ψ gradient, for W λ times the a-free ψ gradient, the ascent
// direction) and the integer sums of the
// clipped, snapped a-dependent parts — the only values that get noise. Used by the trainer;
// exposed so that tests can check the sums' sensitivity between neighbouring datasets.
struct FermiBatch {
  Eigen::VectorXd exact_theta;
  Eigen::MatrixXd exact_w;
  std::vector<int64_t> sum_theta;  // d
  std::vector<int64_t> sum_w;      // 2k, entry 2a+j
};
void FermiBatchGradients(const FermiData& data, const FermiOptions& options,
                         const FermiNoisePlan& plan, const Eigen::VectorXd& theta,
                         const Eigen::MatrixXd& w, absl::Span<const int64_t> rows, FermiBatch* out);

// Trains θ (d weights; decide 1 iff x·θ > 0) with the plan's grids. `noise_theta` and `noise_w`
// add integer noise to the snapped sums (the server: discrete Gaussian of the plan's stds;
// tests: zero). `progress(step, steps)` is called every epoch; returning false stops with Aborted.
absl::StatusOr<Eigen::VectorXd> TrainDpFermiLogistic(
    const FermiData& data, const FermiOptions& options, const FermiNoisePlan& plan,
    const dp::IntegerNoise& noise_theta, const dp::IntegerNoise& noise_w, absl::BitGenRef gen,
    const std::function<bool(int64_t, int64_t)>& progress);

}  // namespace fairvault::core::learn

#endif  // FAIRVAULT_CORE_LEARN_DP_FERMI_H_
