// Differentially private equalized-odds post-processing (Jagielski et al. 2019, Alg. 1;
// ALGORITHMS.md §1): noisy counts of (ŷ, a, y), then a GLPK linear program for the mixing
// probabilities p[ŷ][a] = P(Ỹ=1 | Ŷ=ŷ, A=a).
#ifndef FAIRVAULT_CORE_POSTPROCESS_EQUALIZED_ODDS_H_
#define FAIRVAULT_CORE_POSTPROCESS_EQUALIZED_ODDS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/random/bit_gen_ref.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/dp/integer_noise.h"

namespace fairvault::core::postprocess {

// Counts n[ŷ][a][y] over K groups, flattened: index ((yhat * K) + a) * 2 + y.
struct EoCounts {
  int num_groups = 0;
  std::vector<int64_t> n;  // size 4K
  int64_t& at(int yhat, int a, int y) { return n[(yhat * num_groups + a) * 2 + y]; }
  int64_t at(int yhat, int a, int y) const { return n[(yhat * num_groups + a) * 2 + y]; }
};

// Exact counts. prediction/label in {0,1}, group in [0,K); InvalidArgument otherwise, naming
// the first bad row.
absl::StatusOr<EoCounts> CountEo(absl::Span<const int> prediction, absl::Span<const int> label,
                                 absl::Span<const int> group, int num_groups);

struct EoOptions {
  double gamma = 0;        // fairness tolerance, >= 0
  double beta = 0.05;      // failure probability of the slack bound, in (0,1)
  double epsilon = 1;      // privacy parameter the counts were noised with; +inf = no noise
  int64_t m = 0;           // number of subjects (public), > 0
  bool all_pairs = false;  // constrain every pair instead of each group against group 0
  // Every mixing probability p[ŷ][a] is kept in [decision_floor, 1 − decision_floor], so no
  // (ŷ, a) cell gets a deterministic decision. Finite, in [0, 0.5). The LP stays feasible:
  // p = ½ everywhere equalizes all rates. A floor > 0 can only raise the objective.
  double decision_floor = 0;
  // Public threshold, in subjects, below which the noise cannot resolve a group. A group whose
  // smaller noisy count min_y (n[0][a][y] + n[1][a][y]) (cells clamped at 0, the sum floored at
  // 1) is below it is *excluded*: it keeps its predictions (p0 = decision_floor,
  // p1 = 1 − decision_floor; the identity when the floor is 0), takes no part in any constraint,
  // and the reference group, if it was group 0, becomes the resolvable group with the largest
  // noisy count. The decision reads only the released counts, so it is post-processing.
  // Unset: DefaultMinGroupCount(K, beta, epsilon). 0: no group is excluded (the paper's LP).
  // Otherwise finite and >= 0.
  std::optional<double> min_group_count;
  // Names of the groups for warnings (index a → label, e.g. "Female|Black"); empty: "group a".
  // Either empty or of size num_groups.
  std::vector<std::string> group_labels;
  absl::Status Validate() const;
};

// 8 ln(4K/β)/ε, a function of public parameters only (0 when epsilon = +inf: exact counts
// resolve every group). Half of it, 4 ln(4K/β)/ε, is the count below which the noise allowance
// 4 ln(4K/β)/(q_ay·m·ε) of Jagielski et al. Thm 3.1 exceeds 1, so a group's constraints could
// not bind and the LP would map it from the noise alone. The other half covers the noise on the
// count itself: each of the 4K released cells is off by more than (2/ε) ln(4K/β) with
// probability at most about β/(4K), so with probability about 1 − β every group that passes has
// a true count per label above 4 ln(4K/β)/ε, the assumption (min q̂_ay > 4 ln(4K/β)/(mε)) under
// which Thm 3.1 bounds its true gap.
double DefaultMinGroupCount(int num_groups, double beta, double epsilon);

struct EoGroupResult {
  double p0 = 0;                            // P(Ỹ=1 | Ŷ=0, A=a)
  double p1 = 0;                            // P(Ỹ=1 | Ŷ=1, A=a)
  double noisy_fpr = 0, noisy_tpr = 0;      // rates of Ŷ on the (clamped) noisy masses
  double derived_fpr = 0, derived_tpr = 0;  // rates of Ỹ
  // The LP's noise allowance 4 ln(4K/β)/(min(q_ay, q_0y)·m·ε) on top of gamma, vs. the reference
  // (0 for group 0; with all_pairs, the largest over the pairs the group is in; 0 if ε = +inf).
  // On the true data Jagielski et al. Thm 3.1 bounds the gap by gamma plus about twice this:
  // 8 ln(4K/β)/(min q̂·m·ε − 4 ln(4K/β)) with the exact masses q̂, w.p. ≥ 1 − β.
  double fpr_slack = 0, tpr_slack = 0;
  // True when the group's noisy counts are below min_group_count: mapped by the identity (up to
  // the decision floor) and left out of every constraint; `excluded_reason` says why, with the
  // numbers.
  bool excluded = false;
  std::string excluded_reason;
};

struct EoSolution {
  std::vector<EoGroupResult> groups;
  double objective = 0;    // Σ (q[ŷ][a][0] − q[ŷ][a][1]) p[ŷ][a]
  double noisy_error = 0;  // objective + Σ_{ŷ,a} q[ŷ][a][1], the derived predictor's error
  // The reference every other resolvable group is compared with: 0 unless group 0 is excluded,
  // then the resolvable group with the largest noisy count (lowest index on ties). −1 with
  // all_pairs, or when no group is resolvable.
  int reference_group = -1;
  double min_group_count = 0;  // the threshold applied (options' value or the default)
  std::vector<std::string> warnings;
};

// InvalidArgument when the LP for this many groups has more than 200,000 constraint rows
// (4 per constrained pair: K−1 pairs, or K(K−1)/2 with all_pairs, so K ≤ 316 with all_pairs).
// Public so callers can refuse before spending anything; SolveEqualizedOddsLp checks it too.
absl::Status CheckEoProblemSize(int num_groups, const EoOptions& options);

// Solves the §1 LP, with p[ŷ][a] in [decision_floor, 1 − decision_floor], on counts (noisy or
// exact) divided by options.m. Noisy masses q_ay are clamped below at 1/m (a public floor)
// before dividing. Groups below options.min_group_count are excluded (see EoOptions) and named
// in a warning; with fewer than two resolvable groups nothing is constrained and every group
// keeps its predictions. Warnings also name each resolvable group whose mass is below
// 4 ln(4K/β)/(m ε) (possible only with a lowered min_group_count), say when no constraint binds
// at the solution, and what gamma = 0 means under noise.
// With epsilon = +inf the slack is 0 (the non-private Hardt et al. LP).
// Internal if GLPK fails. Thread-safe: concurrent calls are independent (GLPK 5.0 keeps its
// environment per thread; a GLPK built without thread-local storage is serialised by a mutex).
absl::StatusOr<EoSolution> SolveEqualizedOddsLp(const EoCounts& counts, const EoOptions& options);

// Alg. 1 end to end: adds one draw of `noise` to every count, then solves. `noisy_counts`
// receives the released counts (may be null). The exact counts must be >= 0 and sum to
// options.m; InvalidArgument otherwise. Thread-safe if `gen` is.
absl::StatusOr<EoSolution> FitEqualizedOdds(const EoCounts& exact_counts, const EoOptions& options,
                                            const dp::IntegerNoise& noise, absl::BitGenRef gen,
                                            EoCounts* noisy_counts);

}  // namespace fairvault::core::postprocess

#endif  // FAIRVAULT_CORE_POSTPROCESS_EQUALIZED_ODDS_H_
