#include "core/learn/fair_game.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/numeric/int128.h"
#include "absl/strings/str_cat.h"
#include "core/dp/granularity.h"
#include "core/util/status_macros.h"
#include "core/util/validate.h"

namespace fairvault::core::learn {
namespace {

// The cost grid is fixed per game from public bounds (PlanCostGrid), not from the λ of a round:
// a λ with tiny entries (an exponentiated-gradient auditor after thousands of rounds gives
// subnormal ones) must not be able to make a round's plan fail after the learner was charged.
// The grid keeps at most kCostPrecisionBits bits below the largest shift any λ can give...
constexpr int kCostPrecisionBits = 30;
// ...and is coarsened beyond that only as far as the sampler needs: the noise scale stays
// within about 2^37 grid steps for every λ (the discrete Laplace takes at most 2^40). (A grid
// tied more closely to the noise rounded every cost shift to zero below a per-round epsilon of
// about 1/256, silently dropping the fairness costs: found by the jagielski_fig1 experiment.)
constexpr int kNoiseBits = 36;
// The exact integer sums stay below this.
constexpr double kExactLimit = 0x1p62;
// Bounds on lambda_bound (B) and the released masses that keep every grid a normal double.
constexpr double kMinLambdaBound = 1e-9;
constexpr double kMaxLambdaBound = 1e9;

double Clamp01(double v) { return std::min(1.0, std::max(0.0, v)); }

}  // namespace

std::vector<double> MassesFromNoisyCounts(absl::Span<const int64_t> noisy_counts, int64_t n,
                                          double floor) {
  std::vector<double> masses(noisy_counts.size());
  const double rows = static_cast<double>(std::max<int64_t>(n, 1));
  for (size_t c = 0; c < noisy_counts.size(); ++c) {
    masses[c] = std::max(static_cast<double>(noisy_counts[c]), floor) / rows;
  }
  return masses;
}

std::vector<double> CostShifts(absl::Span<const double> lambda, absl::Span<const double> masses,
                               int k) {
  std::vector<double> shift(2 * k, 0.0);
  for (int y = 0; y < 2; ++y) {
    double reference = 0;
    for (int a = 1; a < k; ++a) {
      const double net = lambda[4 * (a - 1) + 2 * y] - lambda[4 * (a - 1) + 2 * y + 1];
      shift[2 * a + y] = net / masses[2 * a + y];
      reference += net;
    }
    shift[y] = -reference / masses[y];
  }
  return shift;
}

absl::Status ValidateLambdaBound(double lambda_bound) {
  RETURN_IF_ERROR(ValidateIsFiniteAndPositive(lambda_bound, "lambda_bound"));
  if (lambda_bound < kMinLambdaBound || lambda_bound > kMaxLambdaBound) {
    return absl::InvalidArgumentError(absl::StrCat("lambda_bound must be in [", kMinLambdaBound,
                                                   ", ", kMaxLambdaBound, "] (got ",
                                                   lambda_bound, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<double> PlanCostGrid(int64_t n, int64_t max_row_steps, double lambda_bound,
                                    absl::Span<const double> masses, Oracle oracle,
                                    double epsilon) {
  RETURN_IF_ERROR(ValidateLambdaBound(lambda_bound));
  RETURN_IF_ERROR(ValidateIsFiniteAndPositive(epsilon, "epsilon"));
  if (n < 1 || max_row_steps < 1) return absl::InternalError("a cost grid needs rows");
  double smallest = std::numeric_limits<double>::infinity();
  for (double m : masses) {
    if (!(m > 0) || !std::isfinite(m)) return absl::InternalError("masses must be positive");
    smallest = std::min(smallest, m);
  }
  // |shift| <= B / min q̂ for every λ with ‖λ‖₁ <= B (a >= 1: |λ+ − λ−| / q̂_ay; a = 0: the sum
  // of those nets over q̂_0y); one row's change is at most twice that.
  const double largest_shift = lambda_bound / smallest;
  const double factor =
      oracle == Oracle::kLeastSquares ? static_cast<double>(max_row_steps) : 1.0;
  ASSIGN_OR_RETURN(const double noise_grid,
                   dp::PowerOfTwoGranularity(factor * 2 * largest_shift / epsilon, kNoiseBits));
  // The exact sums Σ_i xs_i c_i need n · max_row_steps · max |c| < 2^62.
  int precision_bits = kCostPrecisionBits;
  while (precision_bits > 1 && static_cast<double>(n) * static_cast<double>(max_row_steps) *
                                       (std::ldexp(1.0, precision_bits) + 1) >=
                                   kExactLimit) {
    --precision_bits;
  }
  ASSIGN_OR_RETURN(const double precision_grid,
                   dp::PowerOfTwoGranularity(largest_shift, precision_bits));
  return std::max(noise_grid, precision_grid);
}

absl::Status CheckGamePlannable(int64_t n, int d, double lambda_bound, double mass_floor,
                                double epsilon_round, double epsilon_masses) {
  RETURN_IF_ERROR(ValidateLambdaBound(lambda_bound));
  if (n < 1 || d < 1) return absl::InvalidArgumentError("the game needs rows and features");
  const double max_row_steps = MaxRowStepsBound(d);
  if (static_cast<double>(n) * max_row_steps * 4 >= kExactLimit) {
    return absl::InvalidArgumentError(absl::StrCat(
        "feature_columns: ", n, " rows are too many for the exact sums of a best response"));
  }
  // The noise of a round, at most 2^36 + factor/epsilon grid steps (PlanCostGrid), and the
  // violations' and masses' discrete Laplace scales must fit the sampler.
  const double worst_scale = std::ldexp(1.0, kNoiseBits) + max_row_steps / epsilon_round;
  if (!(worst_scale <= dp::kMaxDiscreteLaplaceScale) ||
      !(2 / epsilon_round <= dp::kMaxDiscreteLaplaceScale)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rounds: the per-release epsilon ", epsilon_round,
        " is too small for the sampler; use fewer rounds or more epsilon"));
  }
  if (!(2 / epsilon_masses <= dp::kMaxDiscreteLaplaceScale)) {
    return absl::InvalidArgumentError(
        absl::StrCat("masses_share: the masses' epsilon ", epsilon_masses,
                     " is too small for the sampler; raise masses_share or epsilon"));
  }
  // Released masses lie in [mass_floor / n, 2^63 / n] (a floored int64 count over n): the
  // grids of every such release stay normal doubles, as checked at both ends.
  const double lo = mass_floor / static_cast<double>(n);
  const double hi = std::ldexp(1.0, 63) / static_cast<double>(n);
  for (double q : {lo, hi}) {
    const std::vector<double> masses = {q, hi};
    RETURN_IF_ERROR(PlanCostGrid(n, static_cast<int64_t>(max_row_steps), lambda_bound, masses,
                                 Oracle::kLeastSquares, epsilon_round)
                        .status());
    RETURN_IF_ERROR(
        PlanCostGrid(n, 1, lambda_bound, masses, Oracle::kFtpl, epsilon_round).status());
  }
  return absl::OkStatus();
}

absl::StatusOr<BestResponsePlan> PlanBestResponse(const GameData& data,
                                                  absl::Span<const double> lambda,
                                                  absl::Span<const double> masses, Oracle oracle,
                                                  double epsilon, double cost_grid) {
  const int k = data.k;
  if (static_cast<int>(lambda.size()) != ConstraintCount(k)) {
    return absl::InvalidArgumentError(absl::StrCat("lambda must have 4(K-1) = ", ConstraintCount(k),
                                                   " entries (got ", lambda.size(), ")"));
  }
  if (static_cast<int>(masses.size()) != 2 * k) return absl::InternalError("masses size");
  for (double m : masses) {
    if (!(m > 0) || !std::isfinite(m)) return absl::InternalError("masses must be positive");
  }
  RETURN_IF_ERROR(ValidateIsFiniteAndPositive(epsilon, "epsilon"));
  if (!(cost_grid > 0)) return absl::InternalError("the cost grid comes from PlanCostGrid");
  const std::vector<double> shift = CostShifts(lambda, masses, k);

  // The largest change of one row's a-dependent cost when its group changes (its label stays).
  double cost_change = 0;
  for (int y = 0; y < 2; ++y) {
    double lo = shift[y], hi = shift[y];
    for (int a = 0; a < k; ++a) {
      lo = std::min(lo, shift[2 * a + y]);
      hi = std::max(hi, shift[2 * a + y]);
    }
    cost_change = std::max(cost_change, hi - lo);
  }
  if (!std::isfinite(cost_change)) {
    return absl::InvalidArgumentError("lambda is too large for the masses");
  }
  BestResponsePlan plan;
  plan.cost_grid = cost_grid;
  plan.steps.assign(2 * k, 0);
  plan.factor = oracle == Oracle::kLeastSquares ? static_cast<double>(data.max_row_steps) : 1.0;
  plan.unresolved = cost_change > 0;
  int64_t max_steps = 0;
  for (int cell = 0; cell < 2 * k; ++cell) {
    ASSIGN_OR_RETURN(plan.steps[cell], dp::SnapToGrid(shift[cell], plan.cost_grid));
    max_steps = std::max<int64_t>(max_steps, std::abs(plan.steps[cell]));
  }
  for (int y = 0; y < 2; ++y) {
    int64_t lo = plan.steps[y], hi = plan.steps[y];
    for (int a = 0; a < k; ++a) {
      lo = std::min(lo, plan.steps[2 * a + y]);
      hi = std::max(hi, plan.steps[2 * a + y]);
    }
    plan.change_steps = std::max(plan.change_steps, hi - lo);
  }
  if (static_cast<double>(data.n) * static_cast<double>(data.max_row_steps) *
          static_cast<double>(max_steps) >=
      kExactLimit) {
    return absl::InvalidArgumentError("too many rows for the exact sums of this release");
  }
  if (plan.change_steps == 0) return plan;  // the snapped costs do not depend on a
  plan.unresolved = false;
  plan.cost_change = static_cast<double>(plan.change_steps) * plan.cost_grid;
  plan.sensitivity = plan.cost_change * static_cast<double>(data.max_row_steps) * data.feature_grid;
  plan.sensitivity_steps = plan.factor * static_cast<double>(plan.change_steps);
  plan.noise_scale_steps = plan.sensitivity_steps / epsilon;
  if (plan.noise_scale_steps > dp::kMaxDiscreteLaplaceScale) {
    return absl::InvalidArgumentError(
        absl::StrCat("epsilon ", epsilon, " is too small for a best response: its noise scale ",
                     plan.noise_scale_steps,
                     " exceeds the sampler's limit 2^40; raise epsilon (or, for a "
                     "learner, lower the rounds)"));
  }
  return plan;
}

absl::StatusOr<BestResponse> PrivateBestResponse(const GameData& data,
                                                 absl::Span<const double> lambda,
                                                 absl::Span<const double> masses, Oracle oracle,
                                                 double epsilon, double cost_grid,
                                                 const NoiseFactory& noise, absl::BitGenRef gen) {
  if (oracle == Oracle::kFtpl && !data.KeepsMatrix()) {
    return absl::FailedPreconditionError(
        "the FTPL oracle needs the rows: build the game with KeepMatrix::kYes");
  }
  ASSIGN_OR_RETURN(const BestResponsePlan plan,
                   PlanBestResponse(data, lambda, masses, oracle, epsilon, cost_grid));
  BestResponse out;
  out.cost_change = plan.cost_change;
  out.sensitivity = plan.sensitivity;
  out.noise_scale_steps = plan.noise_scale_steps;
  const int k = data.k;
  const double unit = plan.cost_grid * data.feature_grid;
  Eigen::VectorXd released = Eigen::VectorXd::Zero(data.d);  // ≈ Σ_i x_i · shift(a_i, y_i)
  if (plan.change_steps > 0) {
    ASSIGN_OR_RETURN(std::unique_ptr<dp::IntegerNoise> draw, noise(plan.noise_scale_steps));
    if (oracle == Oracle::kLeastSquares) {
      // The exact integer Σ_i xs_i c_i from the per-cell sums, then noise on each entry.
      for (int j = 0; j < data.d; ++j) {
        absl::int128 z = 0;
        for (int cell = 0; cell < 2 * k; ++cell) {
          z += absl::int128(plan.steps[cell]) * data.cell_sums[cell][j];
        }
        released(j) = static_cast<double>(draw->AddNoise(static_cast<int64_t>(z), gen)) * unit;
      }
    } else {
      // FTPL: every row's cost gets its own noise; the rest is the non-private oracle.
      Eigen::VectorXd costs(data.n);
      for (int64_t i = 0; i < data.n; ++i) {
        const int64_t c = plan.steps[2 * data.group[i] + data.y[i]];
        costs(i) = static_cast<double>(draw->AddNoise(c, gen)) * plan.cost_grid;
      }
      released.noalias() = data.x->transpose() * costs;
    }
  } else {
    // The snapped costs do not depend on the group (only on the label): the sum is the same on
    // every neighbour, so it is used exactly (0-DP).
    for (int cell = 0; cell < 2 * k; ++cell) {
      for (int j = 0; j < data.d; ++j) {
        released(j) += static_cast<double>(plan.steps[cell]) * unit *
                       static_cast<double>(data.cell_sums[cell][j]);
      }
    }
  }
  const Eigen::VectorXd w1 = data.gram.solve(data.xt_label0 + released);
  const Eigen::VectorXd w0 = data.gram.solve(data.xt_label1);
  out.weights = w0 - w1;  // predict 1 where the regressed cost of 1 is below that of 0
  if (!out.weights.allFinite()) return absl::InternalError("the least-squares solve diverged");
  return out;
}

std::vector<uint8_t> Decide(const GameData& data, const Eigen::VectorXd& weights) {
  if (!data.KeepsMatrix()) return {};
  const Eigen::VectorXd margin = *data.x * weights;
  std::vector<uint8_t> out(data.n);
  for (int64_t i = 0; i < data.n; ++i) out[i] = margin(i) > 0 ? 1 : 0;
  return out;
}

absl::StatusOr<std::vector<double>> NoisyViolations(const GameData& data,
                                                    absl::Span<const uint8_t> predictions,
                                                    absl::Span<const double> masses, double gamma,
                                                    const dp::IntegerNoise& noise,
                                                    absl::BitGenRef gen) {
  const int k = data.k;
  if (static_cast<int64_t>(predictions.size()) != data.n) {
    return absl::InternalError("one prediction per row");
  }
  std::vector<int64_t> positives(2 * k, 0);
  for (int64_t i = 0; i < data.n; ++i) {
    if (predictions[i]) ++positives[2 * data.group[i] + data.y[i]];
  }
  std::vector<double> rate(2 * k);
  for (int cell = 0; cell < 2 * k; ++cell) {
    const int64_t noisy = noise.AddNoise(positives[cell], gen);
    rate[cell] = Clamp01(static_cast<double>(noisy) / (masses[cell] * static_cast<double>(data.n)));
  }
  std::vector<double> r(ConstraintCount(k));
  for (int a = 1; a < k; ++a) {
    for (int y = 0; y < 2; ++y) {
      const double diff = rate[2 * a + y] - rate[y];
      r[4 * (a - 1) + 2 * y] = diff - gamma;
      r[4 * (a - 1) + 2 * y + 1] = -diff - gamma;
    }
  }
  return r;
}

void AuditorLambda(absl::Span<const double> theta, double lambda_bound,
                   std::vector<double>* lambda) {
  double top = 0;
  for (double v : theta) top = std::max(top, v);
  double denominator = std::exp(-top);
  for (double v : theta) denominator += std::exp(v - top);
  lambda->resize(theta.size());
  for (size_t c = 0; c < theta.size(); ++c) {
    (*lambda)[c] = lambda_bound * std::exp(theta[c] - top) / denominator;
  }
}

absl::Status LearnerOptions::Validate() const {
  if (rounds < 1) return absl::InvalidArgumentError("rounds must be >= 1");
  RETURN_IF_ERROR(ValidateLambdaBound(lambda_bound));
  RETURN_IF_ERROR(ValidateIsFiniteAndPositive(learning_rate, "learning_rate"));
  RETURN_IF_ERROR(ValidateIsFiniteAndNonNegative(gamma, "gamma"));
  if (!(mass_floor >= 1) || !std::isfinite(mass_floor)) {
    return absl::InvalidArgumentError("mass_floor must be finite and >= 1");
  }
  return absl::OkStatus();
}

absl::StatusOr<LearnerResult> RunDpOracleLearner(
    const GameData& data, const LearnerOptions& options, const LearnerPlan& plan,
    const NoiseFactory& noise, absl::BitGenRef gen,
    const std::function<bool(int64_t, int64_t)>& progress) {
  RETURN_IF_ERROR(options.Validate());
  RETURN_IF_ERROR(ValidateIsFiniteAndPositive(plan.epsilon_masses, "epsilon_masses"));
  RETURN_IF_ERROR(ValidateIsFiniteAndPositive(plan.epsilon_round, "epsilon_round"));
  if (!data.KeepsMatrix()) {
    return absl::FailedPreconditionError(
        "the learner needs the rows: build the game with KeepMatrix::kYes");
  }
  const int k = data.k;
  const int constraints = ConstraintCount(k);
  LearnerResult result;

  // 1. q̂: the (a, y) counts with L1 sensitivity 2, once.
  ASSIGN_OR_RETURN(std::unique_ptr<dp::IntegerNoise> masses_noise,
                   noise(2.0 / plan.epsilon_masses));
  std::vector<int64_t> noisy_counts(2 * k);
  for (int cell = 0; cell < 2 * k; ++cell) {
    noisy_counts[cell] = masses_noise->AddNoise(data.cell_counts[cell], gen);
  }
  result.masses = MassesFromNoisyCounts(noisy_counts, data.n, options.mass_floor);
  ASSIGN_OR_RETURN(std::unique_ptr<dp::IntegerNoise> violation_noise,
                   noise(2.0 / plan.epsilon_round));
  // One cost grid for every round, from B and the released masses (public): no λ the auditor
  // reaches can make a round's plan fail. A round whose λ is too small for it to resolve the
  // groups' costs plays the a-free best response (nothing to release: 0-DP).
  ASSIGN_OR_RETURN(const double cost_grid,
                   PlanCostGrid(data.n, data.max_row_steps, options.lambda_bound, result.masses,
                                options.oracle, plan.epsilon_round));

  // 2. T rounds of the game.
  std::vector<double> theta(constraints, 0.0), lambda(constraints, 0.0);
  result.lambda_average.assign(constraints, 0.0);
  for (int t = 0; t < options.rounds; ++t) {
    AuditorLambda(theta, options.lambda_bound, &lambda);
    for (int c = 0; c < constraints; ++c) result.lambda_average[c] += lambda[c] / options.rounds;
    ASSIGN_OR_RETURN(BestResponse response,
                     PrivateBestResponse(data, lambda, result.masses, options.oracle,
                                         plan.epsilon_round, cost_grid, noise, gen));
    const std::vector<uint8_t> decisions = Decide(data, response.weights);
    ASSIGN_OR_RETURN(result.last_violations, NoisyViolations(data, decisions, result.masses,
                                                             options.gamma, *violation_noise, gen));
    for (int c = 0; c < constraints; ++c) {
      theta[c] += options.learning_rate * result.last_violations[c];
    }
    result.components.push_back(std::move(response.weights));
    result.last_lambda = lambda;
    if (progress && !progress(t + 1, options.rounds)) {
      return absl::AbortedError("the learner was stopped");
    }
  }
  return result;
}

}  // namespace fairvault::core::learn
