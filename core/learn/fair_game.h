// Fair ERM as a game between a learner and an auditor (Jagielski et al. 2019, Alg. 3;
// ALGORITHMS.md §3): private best responses (cost-sensitive least squares with noise on the
// a-dependent part of Xᵀ C1, or Follow-the-Perturbed-Leader on the cost vector), noisy
// equalized-odds violations, and the DP-oracle learner's exponentiated-gradient loop.
//
// Privacy (docs/privacy.md, "Private best responses"): only the protected group enters the
// released vectors; the company's features and labels are public to it. Real-valued releases
// follow the Mironov fix: features and costs are snapped to power-of-two grids, the released
// vector is an exact integer, and integer noise is added in grid units. Every noise scale is
// computed from public quantities only: the dual weights λ, the released masses q̂, the
// features' largest row L1 norm, and epsilon.
#ifndef FAIRVAULT_CORE_LEARN_FAIR_GAME_H_
#define FAIRVAULT_CORE_LEARN_FAIR_GAME_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "Eigen/Dense"
#include "absl/random/bit_gen_ref.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/dp/integer_noise.h"
#include "core/learn/game_data.h"

namespace fairvault::core::learn {

// Integer noise of a given discrete Laplace scale (in the units of the integer vector). The
// server passes dp::MakeDiscreteLaplaceNoise; logic tests pass zero noise.
using NoiseFactory = std::function<absl::StatusOr<std::unique_ptr<dp::IntegerNoise>>(double scale)>;

// The released group-label masses q̂_ay = max(noisy count, floor) / n, cell 2a+y. Public.
std::vector<double> MassesFromNoisyCounts(absl::Span<const int64_t> noisy_counts, int64_t n,
                                          double floor);

// The constraint order of λ and r: for a = 1..k-1, entries 4(a-1)+j with j = 0: FP_a-FP_0-γ,
// 1: FP_0-FP_a-γ, 2: TP_a-TP_0-γ, 3: TP_0-TP_a-γ.
inline int ConstraintCount(int k) { return 4 * (k - 1); }

// The a-dependent part of C1 for a row of cell (a, y), cell 2a+y:
//   a >= 1: (λ_(a,y,+) − λ_(a,y,−)) / q̂_ay;   a = 0: −Σ_{a'>=1} (λ_(a',y,+) − λ_(a',y,−)) / q̂_0y.
std::vector<double> CostShifts(absl::Span<const double> lambda, absl::Span<const double> masses,
                               int k);

enum class Oracle { kLeastSquares, kFtpl };

struct BestResponse {
  Eigen::VectorXd weights;  // decide 1 iff x·weights > 0
  // The bound behind the noise, in real units: max one-row change of the a-dependent cost
  // (from λ and q̂) times the largest row L1 norm; and in grid steps with the scale used.
  double cost_change = 0;
  double sensitivity = 0;
  double noise_scale_steps = 0;  // 0 when the costs do not depend on a (nothing to hide)
};

// The public plan of one best response: the snapped cost shifts and the noise they need.
struct BestResponsePlan {
  std::vector<int64_t> steps;  // snapped cost shift per cell 2a+y, in units of cost_grid
  double cost_grid = 0;
  int64_t change_steps = 0;  // max over labels of the spread of steps across groups
  double factor = 1;         // rows' L1 in feature steps (least squares) or 1 (FTPL)
  // L1 sensitivity of the released integer vector and the discrete Laplace scale (0: the
  // snapped costs do not depend on the group, nothing to hide).
  double sensitivity_steps = 0;
  double noise_scale_steps = 0;
  double cost_change = 0;  // change_steps · cost_grid
  double sensitivity = 0;  // in real units (cost_change · max row L1)
  // The costs do depend on the group, but by less than the grid resolves: the response is
  // computed without the group (0-DP). A learner plays such rounds; BestResponse refuses them.
  bool unresolved = false;
};

// lambda_bound (B) in [1e-9, 1e9], finite: InvalidArgument naming lambda_bound otherwise.
absl::Status ValidateLambdaBound(double lambda_bound);

// The grid of the cost shifts, the same for every λ with ‖λ‖₁ <= lambda_bound: from B, the
// released masses q̂ (the largest shift any such λ gives is B / min q̂), the rows' feature-step
// factor (max_row_steps; FTPL: 1) and epsilon only — never from λ itself, so that no λ (tiny,
// subnormal or 0) can make a plan fail. Fine enough to keep 2^30 steps below the largest shift
// (fewer only where the exact sums over n rows need it), coarse enough that every λ's noise
// stays within 2^37 grid steps. Fails only outside PlanCostGrid's public domain, which
// CheckGamePlannable checks before a learner is charged.
absl::StatusOr<double> PlanCostGrid(int64_t n, int64_t max_row_steps, double lambda_bound,
                                    absl::Span<const double> masses, Oracle oracle,
                                    double epsilon);

// Before a learner is charged, from public sizes only (n rows, d features after preprocessing,
// B, the mass floor, the per-release epsilons): that every round of the game can be planned
// and sampled whatever the released masses and the auditor's λ turn out to be. InvalidArgument
// naming the request field to change otherwise.
absl::Status CheckGamePlannable(int64_t n, int d, double lambda_bound, double mass_floor,
                                double epsilon_round, double epsilon_masses);

// Computed from λ, q̂ (public), the company's features, epsilon and the game's cost grid only:
// never from the groups.
absl::StatusOr<BestResponsePlan> PlanBestResponse(const GameData& data,
                                                  absl::Span<const double> lambda,
                                                  absl::Span<const double> masses, Oracle oracle,
                                                  double epsilon, double cost_grid);

// A private best response to λ (Subroutine 2 with a private cost-sensitive oracle), one
// epsilon-DP release under replace-one on the group, on the game's cost grid (PlanCostGrid):
// - least squares: w_c = (XᵀX)⁻¹ Xᵀ C_c; the a-dependent part of Xᵀ C1 is released as the exact
//   integer vector Σ_i xs_i c_i (c_i the snapped cost shift) plus discrete Laplace noise of
//   scale max_row_steps · max_cost_change_steps / epsilon;
// - FTPL: every row's snapped cost shift gets discrete Laplace noise of scale
//   max_cost_change_steps / epsilon, then the non-private least-squares oracle runs on them
//   (FailedPrecondition if the game does not keep its rows).
// When the snapped costs do not depend on the group, nothing is released (0-DP).
absl::StatusOr<BestResponse> PrivateBestResponse(const GameData& data,
                                                 absl::Span<const double> lambda,
                                                 absl::Span<const double> masses, Oracle oracle,
                                                 double epsilon, double cost_grid,
                                                 const NoiseFactory& noise, absl::BitGenRef gen);

// h(x_i) for every row: 1 iff x_i·w > 0. Empty if the game does not keep its rows
// (KeepMatrix::kNo).
std::vector<uint8_t> Decide(const GameData& data, const Eigen::VectorXd& weights);

// Noisy equalized-odds violations of predictions h (ConstraintCount(k) entries): the counts of
// (a, y, h=1) get integer noise (L1 sensitivity 2: one subject leaves one cell for another),
// then rates use the released masses: FP_a = n(a,0,1)~ / (q̂_a0 n), clamped to [0, 1].
absl::StatusOr<std::vector<double>> NoisyViolations(const GameData& data,
                                                    absl::Span<const uint8_t> predictions,
                                                    absl::Span<const double> masses, double gamma,
                                                    const dp::IntegerNoise& noise,
                                                    absl::BitGenRef gen);

// The exponentiated-gradient auditor's λ = B·exp(θ)/(1 + Σ exp(θ)), computed stably (shifted by
// max(0, max θ)) into `lambda` (resized to θ's size). Shared by the DP-oracle learner and the
// reductions learner.
void AuditorLambda(absl::Span<const double> theta, double lambda_bound,
                   std::vector<double>* lambda);

struct LearnerOptions {
  int rounds = 100;          // T
  double lambda_bound = 10;  // B
  double learning_rate = 1;  // η
  double gamma = 0;
  Oracle oracle = Oracle::kLeastSquares;
  double mass_floor = 1;
  absl::Status Validate() const;
};

// The per-mechanism epsilons of a learner, derived from its total by the accountant.
struct LearnerPlan {
  double epsilon_masses = 0;  // the (a, y) counts behind q̂, once
  double epsilon_round = 0;   // each best response and each violation release
};

struct LearnerResult {
  std::vector<Eigen::VectorXd> components;  // the T best responses (uniform mixture)
  std::vector<double> lambda_average;
  std::vector<double> last_lambda;  // the auditor's λ of the last round
  std::vector<double> last_violations;
  std::vector<double> masses;
};

// The DP-oracle learner: q̂ released once; then T rounds of λ from the exponentiated-gradient
// auditor, a private best response, and a noisy violation release; output the uniform mixture.
// `progress(t, T)` is called after each round; returning false stops with Aborted. The game
// must keep its rows (KeepMatrix::kYes; FailedPrecondition otherwise).
absl::StatusOr<LearnerResult> RunDpOracleLearner(
    const GameData& data, const LearnerOptions& options, const LearnerPlan& plan,
    const NoiseFactory& noise, absl::BitGenRef gen,
    const std::function<bool(int64_t, int64_t)>& progress);

}  // namespace fairvault::core::learn

#endif  // FAIRVAULT_CORE_LEARN_FAIR_GAME_H_
