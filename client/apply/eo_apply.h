// Applying an equalized-odds post-processor on the company's side: the binary one (Jagielski et
// al. 2019, Alg. 1) gives, per group a, P(Ỹ=1 | Ŷ=0, a) and P(Ỹ=1 | Ŷ=1, a); the one fitted on
// scores (issue 8 §6) gives P(Ỹ=1 | score bin j, a). Each decision is a fresh coin with that
// probability. The company needs the group label of each row.
#ifndef FAIRVAULT_CLIENT_APPLY_EO_APPLY_H_
#define FAIRVAULT_CLIENT_APPLY_EO_APPLY_H_

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/random/bit_gen_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/postprocess/statistical_parity.h"
#include "fairvault/v1/fairvault.pb.h"

namespace fairvault::client {

namespace v1 = ::fairvault::v1;

// A validated artifact, ready to decide rows. Immutable after Create; thread-safe if each
// thread passes its own generator.
class EqualizedOddsApplier {
 public:
  // InvalidArgument if the artifact has no groups, repeats a group label, or has a
  // probability outside [0, 1] (or NaN).
  static absl::StatusOr<EqualizedOddsApplier> Create(
      const v1::EqualizedOddsPostProcessor& processor);
  // The same for an artifact fitted on scores; also InvalidArgument for a bad grid or a group
  // without one probability per bin.
  static absl::StatusOr<EqualizedOddsApplier> Create(
      const v1::EqualizedOddsScoresPostProcessor& processor);

  // True for an artifact fitted on scores: use DecideScore; else Decide.
  bool takes_scores() const { return grid_.k > 0 && !by_bin_.empty(); }

  // The derived decision for one row: 1 with probability p_keep_1_given_1 if prediction is
  // 1, p_flip_to_1_given_0 if it is 0. InvalidArgument if prediction is not 0/1 or the group
  // is not one of the artifact's. Probabilities 0 and 1 are exact (no draw is made).
  absl::StatusOr<int> Decide(int prediction, absl::string_view group, absl::BitGenRef gen) const;

  // For an artifact fitted on scores: 1 with probability p_positive[bin(score)] of the group
  // (scores outside [lo, hi] fall in the end bins). InvalidArgument for a non-finite score, an
  // unknown group, or a binary artifact (and Decide refuses a scores artifact likewise).
  absl::StatusOr<int> DecideScore(double score, absl::string_view group, absl::BitGenRef gen) const;

  // Group labels in artifact order.
  const std::vector<std::string>& groups() const { return groups_; }

 private:
  struct Probabilities {
    double given_0 = 0;  // P(Ỹ=1 | Ŷ=0)
    double given_1 = 0;  // P(Ỹ=1 | Ŷ=1)
  };
  std::vector<std::string> groups_;
  absl::flat_hash_map<std::string, Probabilities> by_group_;
  // Scores artifacts: the grid and p_positive per group.
  core::postprocess::ScoreGrid grid_{0, 1, 0};
  absl::flat_hash_map<std::string, std::vector<double>> by_bin_;
};

// Decides every row: predictions[i] ∈ {0,1} with group label groups[i]. InvalidArgument
// naming the (0-based) row on a bad prediction or an unknown group, or if the lengths differ.
absl::StatusOr<std::vector<int>> ApplyEqualizedOdds(const v1::EqualizedOddsPostProcessor& processor,
                                                    absl::Span<const int> predictions,
                                                    absl::Span<const std::string> groups,
                                                    absl::BitGenRef gen);

}  // namespace fairvault::client

#endif  // FAIRVAULT_CLIENT_APPLY_EO_APPLY_H_
