// The exponential-mechanism fair learner (Cummings et al. 2019, Alg. 1; ALGORITHMS.md §4) over
// a finite family of the company's classifiers, given as their 0/1 predictions.
//
// Two pure releases (docs/privacy.md, "Exponential-mechanism learner"):
// 1. M = min_a |Z_1a| + DLap(1/eps_m) − ln(1/δ)/eps_m, where Z_1a are the label-1 rows of group
//    a (the minimum changes by at most 1 when one subject's group changes). M <= 1 stops here.
// 2. The exponential mechanism with utility u(h) = Γ'(h) + err(h), where Γ' is the largest
//    TPR gap with each group's denominator max(|Z_1a|, M): its sensitivity is at most 2/M
//    whatever the data (err does not involve the group), so the release is eps_em-DP
//    unconditionally; Γ' = Γ whenever M <= min_a |Z_1a|, which the shift makes happen with
//    probability >= 1 − δ. Sampling is exact: utilities snapped to a power-of-two grid, the
//    weight exp(−β·steps) with a rational β rounded down, drawn by rejection with the exact
//    Bernoulli(exp(−x)) sampler and secure uniforms (no floating-point exponentials).
#ifndef FAIRVAULT_CORE_LEARN_EXPONENTIAL_MECHANISM_H_
#define FAIRVAULT_CORE_LEARN_EXPONENTIAL_MECHANISM_H_

#include <cstdint>
#include <vector>

#include "absl/random/bit_gen_ref.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/dp/integer_noise.h"

namespace fairvault::core::learn {

// The exponential mechanism over `utility` (lower is better) whose sensitivity under the
// neighbouring relation is at most `sensitivity` whatever the data: returns j with probability
// ∝ exp(−epsilon·u_j / (2·sensitivity)), epsilon-DP. Exact: utilities snapped to a power-of-two
// grid 2^20 finer than the sensitivity (the bound grows by one step for the snapping), the
// weight exp(−β·steps) with a rational β rounded down, drawn by rejection with the exact
// Bernoulli(exp(−x)) sampler; 45·J proposals whatever the utilities (the time does not depend
// on them). InvalidArgument if epsilon / sensitivity is out of the sampler's range.
absl::StatusOr<int> SampleExponentialMechanism(absl::Span<const double> utility,
                                               double sensitivity, double epsilon,
                                               absl::BitGenRef gen);

struct EmLearnerInput {
  std::vector<int> y;      // 0/1 per row
  std::vector<int> group;  // 0..k-1 per row (protected)
  int k = 0;
  // predictions[j][i] in {0, 1}: candidate j on row i.
  std::vector<std::vector<uint8_t>> predictions;
};

struct EmLearnerResult {
  int chosen = -1;
  double released_min_positives = 0;  // M
  double sensitivity = 0;             // Δ = 2/M
};

// `m_noise` must be discrete Laplace of scale 1/eps_m (sensitivity 1). `delta` in (0, 1) is the
// shift's failure probability (the paper: exp(−√n)). FailedPrecondition when M <= 1 (the
// first release is then spent and nothing is chosen).
absl::StatusOr<EmLearnerResult> ExponentialMechanismLearner(const EmLearnerInput& input,
                                                            double eps_m, double eps_em,
                                                            double delta,
                                                            const dp::IntegerNoise& m_noise,
                                                            absl::BitGenRef gen);

// Checks before the charge, from public quantities only, that a job can succeed:
// - the sampler represents the selection's β = eps_em / (2 (Δ/g + 1)) for every released M
//   (Δ/g is in (2^19, 2^20] whatever M is);
// - M = min_a |Z_1a| + noise − ln(1/δ)/eps_m can exceed 1 with a noise draw at or below its
//   median on the most favourable data: groups of equal size, min_a |Z_1a| = floor(n1/k) for
//   `label_one_rows` n1 (the company's labels) and k groups.
// InvalidArgument naming epsilon or em_delta and the value that would work.
absl::Status CheckEmFeasible(int64_t label_one_rows, int k, double eps_m, double eps_em,
                             double delta);

// The (non-private) utilities u(h_j) with denominators max(|Z_1a|, floor): for tests and for
// the company-side evaluation of its own candidates. floor 0: the exact TPR gap.
std::vector<double> EmUtilities(const EmLearnerInput& input, double floor);

}  // namespace fairvault::core::learn

#endif  // FAIRVAULT_CORE_LEARN_EXPONENTIAL_MECHANISM_H_
