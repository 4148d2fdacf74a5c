#include "core/learn/exponential_mechanism.h"

#include <algorithm>
#include <cmath>

#include "absl/base/optimization.h"
#include "absl/numeric/int128.h"
#include "absl/random/distributions.h"
#include "absl/strings/str_cat.h"
#include "core/dp/discrete_samplers.h"
#include "core/dp/granularity.h"
#include "core/util/status_macros.h"
#include "core/util/validate.h"

namespace fairvault::core::learn {
namespace {

constexpr int kDenBits = 40;
// Proposals made whatever the utilities: 45·J of them, so that none is accepted with
// probability at most (1 − 1/J)^(45·J) < e^-45 < 2^-64 (the best candidate is accepted
// surely, and it is proposed with probability 1/J).
constexpr int kProposalsPerCandidate = 45;

// Bernoulli(exp(−beta_num·gap / 2^40)), exactly, with the same draws for every gap below
// 46·2^40/beta_num (and, beyond it, unless the first 45 Bernoulli(e^-1) trials all succeed).
bool AcceptExp(uint64_t beta_num, uint64_t gap, absl::BitGenRef gen) {
  return dp::SampleBernoulliExpDyadic(absl::uint128(beta_num) * gap, kDenBits, gen);
}

}  // namespace

absl::StatusOr<int> SampleExponentialMechanism(absl::Span<const double> utility,
                                               double sensitivity, double epsilon,
                                               absl::BitGenRef gen) {
  RETURN_IF_ERROR(ValidateIsFiniteAndPositive(sensitivity, "sensitivity"));
  RETURN_IF_ERROR(ValidateIsFiniteAndPositive(epsilon, "epsilon"));
  if (utility.empty()) return absl::InvalidArgumentError("no candidates to select from");
  // Utilities snapped to a power-of-two grid 2^20 finer than the sensitivity.
  ASSIGN_OR_RETURN(const double grid, dp::PowerOfTwoGranularity(sensitivity, 20));
  std::vector<int64_t> steps(utility.size());
  for (size_t j = 0; j < utility.size(); ++j) {
    absl::StatusOr<int64_t> snapped = dp::SnapToGrid(utility[j], grid);
    // A constant message: the utilities are not released (callers check the range before).
    if (!snapped.ok()) return absl::InternalError("a utility is outside the sampler's range");
    steps[j] = *snapped;
  }
  const int64_t best = *std::min_element(steps.begin(), steps.end());
  // One subject moves each snapped utility by at most Δ/grid + 1 steps; weight exp(−β·steps)
  // with β·2·(Δ/grid + 1) <= epsilon is epsilon-DP. β is rounded down to a rational.
  const double max_shift = sensitivity / grid + 1;
  const double beta = epsilon / (2 * max_shift);
  const double scaled = std::floor(beta * std::ldexp(1.0, kDenBits));
  if (!(scaled >= 1)) return absl::InvalidArgumentError("epsilon is too small for the sampler");
  if (scaled > std::ldexp(1.0, kDenBits)) {
    return absl::InvalidArgumentError("epsilon is too large for the sampler");
  }
  const auto beta_num = static_cast<uint64_t>(scaled);

  // Rejection sampling: propose j uniformly, accept with probability exp(−β·(steps_j − best))
  // (exact); the first accepted proposal is the draw. Its law is the exponential mechanism's
  // whatever the number of proposals, but that number's own law depends on the utilities
  // (hence on the groups), and so would the time taken. So a fixed number of proposals is
  // made, each with the same draws, and the first accepted one is kept; only if none is
  // (probability < 2^-64) do further proposals follow until one is.
  const int count = static_cast<int>(steps.size());
  const int64_t proposals = int64_t{kProposalsPerCandidate} * count;
  int chosen = -1;
  for (int64_t p = 0; p < proposals; ++p) {
    const int j = absl::Uniform<int>(gen, 0, count);
    const bool accepted = AcceptExp(beta_num, static_cast<uint64_t>(steps[j] - best), gen);
    // The first accepted j, without a branch on the outcome.
    const int take = -static_cast<int>(static_cast<unsigned>(chosen < 0) & accepted);
    chosen = (take & j) | (~take & chosen);
  }
  while (ABSL_PREDICT_FALSE(chosen < 0)) {
    const int j = absl::Uniform<int>(gen, 0, count);
    if (AcceptExp(beta_num, static_cast<uint64_t>(steps[j] - best), gen)) chosen = j;
  }
  return chosen;
}

absl::Status CheckEmFeasible(int64_t label_one_rows, int k, double eps_m, double eps_em,
                             double delta) {
  RETURN_IF_ERROR(ValidateIsFiniteAndPositive(eps_m, "epsilon"));
  RETURN_IF_ERROR(ValidateIsFiniteAndPositive(eps_em, "epsilon"));
  RETURN_IF_ERROR(ValidateInOpenRange(delta, 0, 1, "em_delta"));
  if (k < 2) return absl::InvalidArgumentError("the learner needs at least two groups");
  // β·2^40 >= 1 for the largest Δ/g, and β <= 1 for the smallest.
  const double smallest = 2 * (std::ldexp(1.0, 20) + 1) / std::ldexp(1.0, kDenBits);
  const double largest = 2 * (std::ldexp(1.0, 19) + 1);
  if (eps_em < smallest) {
    return absl::InvalidArgumentError(absl::StrCat(
        "epsilon: the selection's half, ", eps_em,
        ", is below what the exact sampler represents; use epsilon >= ", 2 * smallest));
  }
  if (eps_em > largest) {
    return absl::InvalidArgumentError(absl::StrCat("epsilon: the selection's half, ", eps_em,
                                                   ", is above what the exact sampler "
                                                   "represents; use epsilon <= ",
                                                   2 * largest));
  }
  const int64_t best = label_one_rows / k;  // the largest possible smallest group
  const double shift = std::log(1 / delta) / eps_m;
  if (best < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "label_column: ", label_one_rows, " rows with label 1 over ", k,
        " groups leave at most ", best,
        " per group, so the released M cannot exceed 1 and the job would fail after its "
        "charge; use more rows or fewer groups"));
  }
  if (!(static_cast<double>(best) - shift > 1)) {
    // eps_m > ln(1/δ)/(best − 1) makes the noise-free M exceed 1 on balanced groups.
    return absl::InvalidArgumentError(absl::StrCat(
        "epsilon: the released M = min_a |Z_1a| + noise - ln(1/em_delta)/(epsilon/2) subtracts ",
        shift, ", but the smallest group of label-1 rows holds at most ", best, " (", label_one_rows,
        " over ", k, " groups), so M <= 1 and the job would fail after its charge; use epsilon > ",
        2 * std::log(1 / delta) / static_cast<double>(best - 1), " or a larger em_delta"));
  }
  return absl::OkStatus();
}

std::vector<double> EmUtilities(const EmLearnerInput& input, double floor) {
  const int64_t n = static_cast<int64_t>(input.y.size());
  std::vector<int64_t> positives(input.k, 0);
  for (int64_t i = 0; i < n; ++i) {
    if (input.y[i] == 1) ++positives[input.group[i]];
  }
  std::vector<double> utility;
  utility.reserve(input.predictions.size());
  std::vector<int64_t> hits(input.k);
  for (const std::vector<uint8_t>& h : input.predictions) {
    std::fill(hits.begin(), hits.end(), 0);
    int64_t errors = 0;
    for (int64_t i = 0; i < n; ++i) {
      errors += (h[i] != input.y[i]);
      if (input.y[i] == 1 && h[i]) ++hits[input.group[i]];
    }
    double lo = 1, hi = 0;
    for (int a = 0; a < input.k; ++a) {
      const double denominator = std::max(static_cast<double>(positives[a]), floor);
      const double tpr = denominator > 0 ? static_cast<double>(hits[a]) / denominator : 0.0;
      lo = std::min(lo, tpr);
      hi = std::max(hi, tpr);
    }
    utility.push_back(std::max(0.0, hi - lo) +
                      static_cast<double>(errors) / std::max<int64_t>(n, 1));
  }
  return utility;
}

absl::StatusOr<EmLearnerResult> ExponentialMechanismLearner(const EmLearnerInput& input,
                                                            double eps_m, double eps_em,
                                                            double delta,
                                                            const dp::IntegerNoise& m_noise,
                                                            absl::BitGenRef gen) {
  RETURN_IF_ERROR(ValidateIsFiniteAndPositive(eps_m, "epsilon"));
  RETURN_IF_ERROR(ValidateIsFiniteAndPositive(eps_em, "epsilon"));
  RETURN_IF_ERROR(ValidateInOpenRange(delta, 0, 1, "em_delta"));
  const int64_t n = static_cast<int64_t>(input.y.size());
  if (input.k < 2) return absl::InvalidArgumentError("the learner needs at least two groups");
  if (input.predictions.empty()) return absl::InvalidArgumentError("no candidate classifiers");
  for (const auto& h : input.predictions) {
    if (static_cast<int64_t>(h.size()) != n) return absl::InternalError("prediction length");
  }
  if (static_cast<int64_t>(input.group.size()) != n) return absl::InternalError("group length");

  // 1. The released M.
  std::vector<int64_t> positives(input.k, 0);
  for (int64_t i = 0; i < n; ++i) {
    if (input.y[i] == 1) ++positives[input.group[i]];
  }
  const int64_t min_positives = *std::min_element(positives.begin(), positives.end());
  EmLearnerResult result;
  result.released_min_positives =
      static_cast<double>(m_noise.AddNoise(min_positives, gen)) - std::log(1 / delta) / eps_m;
  if (!(result.released_min_positives > 1)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the released smallest group of label-1 rows, M = ", result.released_min_positives,
        ", is <= 1: the exponential mechanism cannot bound its sensitivity (Cummings et al. "
        "Alg. 1 stops here); the release of M was charged. Raise epsilon or em_delta, or use "
        "fewer or larger groups"));
  }
  const double m = result.released_min_positives;
  result.sensitivity = 2.0 / m;

  // 2. Utilities with public floors on the denominators; the selection.
  ASSIGN_OR_RETURN(result.chosen, SampleExponentialMechanism(EmUtilities(input, m),
                                                             result.sensitivity, eps_em, gen));
  return result;
}

}  // namespace fairvault::core::learn
