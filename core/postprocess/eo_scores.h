// Differentially private equalized-odds post-processing of a classifier's *scores* (issue 8 §6,
// beyond Jagielski et al. 2019): one noisy (group a, label y, score bin j) histogram on a public
// grid, repaired per (a, y) into a pmf (the statistical-parity fit's repair, ALGORITHMS.md §2
// step 4), i.e. noisy per-group ROC curves; then an LP over per-(group, bin) positive-decision
// probabilities p[a][j] (randomized group thresholds, as Hardt et al. 2016 / Fairlearn's
// ThresholdOptimizer pick on the exact ROC curves).
#ifndef FAIRVAULT_CORE_POSTPROCESS_EO_SCORES_H_
#define FAIRVAULT_CORE_POSTPROCESS_EO_SCORES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/random/bit_gen_ref.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/dp/integer_noise.h"
#include "core/postprocess/statistical_parity.h"

namespace fairvault::core::postprocess {

// Index of the (group a, label y, bin j) cell in a K·2·k histogram.
inline size_t EoScoreCell(int a, int y, int j, int k) {
  return (static_cast<size_t>(a) * 2 + y) * k + j;
}

// Exact counts of (group, label, bin), index EoScoreCell. labels in {0,1}, groups in [0, K),
// finite scores; InvalidArgument naming the first bad row. Scores outside [lo, hi] fall in the
// end bins and are counted in `clipped` (optional). (HistogramCounts over the joint index 2a+y.)
absl::StatusOr<std::vector<int64_t>> EoScoreCounts(absl::Span<const double> scores,
                                                   absl::Span<const int> labels,
                                                   absl::Span<const int> group, int num_groups,
                                                   const ScoreGrid& grid,
                                                   int64_t* clipped = nullptr);

struct EoScoresOptions {
  // Allowed gap in TPR and in FPR between constrained groups, on the noisy ROC curves. >= 0.
  double gamma = 0;
  // Constrain every pair of groups instead of each group against group 0.
  bool all_pairs = false;
  // p[a][·] non-decreasing in the bin: a randomized threshold (every monotone p is a mixture of
  // threshold rules, so this is the ROC-hull search of Hardt et al. on the binned curves).
  bool monotone = true;
  // Every p[a][j] is kept in [decision_floor, 1 − decision_floor]; finite, in [0, 0.5). The LP
  // stays feasible (p = ½ everywhere equalizes all rates). A floor > 0 bounds what one decision
  // reveals by log((1 − floor)/floor).
  double decision_floor = 0;
  absl::Status Validate() const;
};

struct EoScoresGroup {
  std::vector<double> p;                  // P(Ỹ=1 | bin j, A=a), size k
  std::vector<double> pmf_negative;       // repaired pmf of the bins among label 0, size k
  std::vector<double> pmf_positive;       // same among label 1
  double mass_negative = 0;               // q_a0: noisy label-0 mass, fraction of m (>= 1/m)
  double mass_positive = 0;               // q_a1
  double derived_fpr = 0, derived_tpr = 0;  // Σ_j pmf[j]·p[j] on the noisy curves
};

struct EoScoresSolution {
  std::vector<EoScoresGroup> groups;
  // The derived predictor's error on the noisy histogram:
  // Σ_a q_a0·FPR_a(p) + q_a1·(1 − TPR_a(p)).
  double noisy_error = 0;
  std::vector<std::string> warnings;
};

// InvalidArgument when the LP would be too large (more than 200,000 variables or rows, or
// 20 million constraint entries). Depends only on public sizes; callers check it before charging.
absl::Status CheckEoScoresProblemSize(int num_groups, const ScoreGrid& grid,
                                      const EoScoresOptions& options);

// Solves the LP on a (noisy or exact) histogram `counts` (size 2·K·k, index EoScoreCell, any
// sign) over m subjects (public, > 0). `noise_scale` is the noise's public scale, used only for
// warnings (0 for exact counts). Each (a, y) row is repaired into a pmf with weight
// max(Σ_j counts, 1) (the public floor of one subject). InvalidArgument on bad sizes or options;
// Internal if GLPK fails (the LP is feasible and bounded by construction). Thread-safe.
absl::StatusOr<EoScoresSolution> SolveEqualizedOddsFromScores(absl::Span<const int64_t> counts,
                                                              int num_groups,
                                                              const ScoreGrid& grid, int64_t m,
                                                              const EoScoresOptions& options,
                                                              double noise_scale = 0);

// End to end: one draw of `noise` per cell of the exact histogram (L1 sensitivity 2 under
// replace-one on a: the subject moves between the (a, y, j) and (a', y, j) cells), then the
// solve. `noisy_counts` receives the release (may be null). Exact counts must be >= 0 and sum
// to m. Thread-safe if `gen` is.
absl::StatusOr<EoScoresSolution> FitEqualizedOddsFromScores(
    absl::Span<const int64_t> exact_counts, int num_groups, const ScoreGrid& grid, int64_t m,
    const EoScoresOptions& options, const dp::IntegerNoise& noise, absl::BitGenRef gen,
    std::vector<int64_t>* noisy_counts);

}  // namespace fairvault::core::postprocess

#endif  // FAIRVAULT_CORE_POSTPROCESS_EO_SCORES_H_
