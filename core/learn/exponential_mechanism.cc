#include "core/learn/exponential_mechanism.h"

#include <algorithm>
#include <cmath>

#include "absl/random/distributions.h"
#include "absl/strings/str_cat.h"
#include "core/dp/discrete_samplers.h"
#include "core/dp/granularity.h"
#include "core/util/status_macros.h"
#include "core/util/validate.h"

namespace fairvault::core::learn {
namespace {

constexpr int kDenBits = 40;

// Bernoulli(exp(−beta_num·gap / 2^40)), exactly: exp(−Σ_b x_b) is the AND of independent
// Bernoulli(exp(−x_b)) over the set bits b of gap, each x_b = beta_num·2^b / 2^40 a rational
// within the sampler's 2^40 limits.
bool AcceptExp(uint64_t beta_num, uint64_t gap, absl::BitGenRef gen) {
  for (int b = 0; b < 64; ++b) {
    if (((gap >> b) & 1) == 0) continue;
    if (b <= kDenBits) {
      if (!dp::SampleBernoulliExp(dp::Rational{beta_num, uint64_t{1} << (kDenBits - b)}, gen)) {
        return false;
      }
    } else {
      // x_b = beta_num·2^(b−40): that many factors of exp(−beta_num), stopping at the first 0.
      for (uint64_t r = 0; r < (uint64_t{1} << (b - kDenBits)); ++r) {
        if (!dp::SampleBernoulliExp(dp::Rational{beta_num, 1}, gen)) return false;
      }
    }
  }
  return true;
}

}  // namespace

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

  // 2. Utilities with public floors on the denominators, snapped to a power-of-two grid.
  const std::vector<double> utility = EmUtilities(input, m);
  ASSIGN_OR_RETURN(const double grid, dp::PowerOfTwoGranularity(result.sensitivity, 20));
  std::vector<int64_t> steps(utility.size());
  for (size_t j = 0; j < utility.size(); ++j) {
    ASSIGN_OR_RETURN(steps[j], dp::SnapToGrid(utility[j], grid));
  }
  const int64_t best = *std::min_element(steps.begin(), steps.end());
  // One subject moves each snapped utility by at most Δ/grid + 1 steps; weight exp(−β·steps)
  // with β·2·(Δ/grid + 1) <= eps_em is eps_em-DP. β is rounded down to a rational.
  const double max_shift = result.sensitivity / grid + 1;
  const double beta = eps_em / (2 * max_shift);
  const double scaled = std::floor(beta * std::ldexp(1.0, kDenBits));
  if (!(scaled >= 1)) return absl::InvalidArgumentError("epsilon is too small for the sampler");
  if (scaled > std::ldexp(1.0, kDenBits)) {
    return absl::InvalidArgumentError("epsilon is too large for the sampler");
  }
  const auto beta_num = static_cast<uint64_t>(scaled);

  // 3. Rejection sampling: propose j uniformly, accept with probability exp(−β·(steps_j −
  // best)) (exact). The best candidate is accepted surely, so a draw takes <= J proposals on
  // average.
  const int count = static_cast<int>(steps.size());
  for (;;) {
    const int j = absl::Uniform<int>(gen, 0, count);
    const uint64_t gap = static_cast<uint64_t>(steps[j] - best);
    if (gap == 0) {
      result.chosen = j;
      return result;
    }
    if (AcceptExp(beta_num, gap, gen)) {
      result.chosen = j;
      return result;
    }
  }
}

}  // namespace fairvault::core::learn
