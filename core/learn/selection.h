// The managed selection of the reductions learner (issue 22 §3): candidates along the auditor's
// average λ̄, each a least-squares best response computed from the learner's released cells
// (post-processing, free), and one private choice among them on the company's validation rows
// by the exponential mechanism, over the utility the company states:
//   u(h) = err(h) + penalty · max(0, gap(h) − target),
// err the validation error (the company's labels and predictions: public), gap the largest
// spread of a rate across groups (equalized odds: max over y of max_a − min_a of E[h | a, y];
// demographic parity: of E[h | a]). Three releases (docs/privacy.md, "The managed selection"):
//   1. the validation rows' group-label counts (discrete Laplace, as every cell release), from
//      which a floor M below the smallest cell (group, for demographic parity) is derived;
//   2. the exponential mechanism with the rates' denominators max(n_c, M): one row changing
//      group moves two rates by at most 1/M each, so the gap by at most 2/M and u by
//      2·penalty/M whatever the data — a sensitivity from the released M and public inputs;
//   3. the chosen candidate's positives per cell (discrete Laplace): its noisy gap, reported.
#ifndef FAIRVAULT_CORE_LEARN_SELECTION_H_
#define FAIRVAULT_CORE_LEARN_SELECTION_H_

#include <vector>

#include "Eigen/Dense"
#include "absl/random/bit_gen_ref.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/dp/integer_noise.h"
#include "core/learn/game_data.h"
#include "core/learn/reductions.h"

namespace fairvault::core::learn {

struct SelectionOptions {
  ReductionConstraint constraint = ReductionConstraint::kEqualizedOdds;
  double target = 0.05;  // τ, the target gap
  double penalty = 2;    // per unit of gap above τ
  int candidates = 20;   // J, including λ = 0
  // The column of the constant-1 feature (the intercept), or -1: with it the validation
  // majority's constant classifier is one more candidate (scale −1, last), and candidates
  // erring at least as much as it on the validation rows are not offered to the mechanism.
  int intercept_column = -1;
  absl::Status Validate() const;
};

// The multiples of λ̄ the candidates answer: 0, then J − 1 geometric from 1/8 to 8.
std::vector<double> SelectionScales(int candidates);

// The company's validation rows, preprocessed as the training rows (clip, intercept), with
// their protected groups (0..k-1, from the vault's join: never released directly).
struct ValidationRows {
  Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> x;
  std::vector<int> y;
  std::vector<int> group;
  int k = 0;
};

struct SelectionNoises {
  const dp::IntegerNoise* counts = nullptr;  // validation counts, sensitivity CellReleaseL1Factor
  const dp::IntegerNoise* score = nullptr;   // the chosen candidate's positives, the same
  double epsilon_select = 0;                 // the exponential mechanism's
};

struct SelectionResult {
  int chosen = -1;
  std::vector<double> scales;           // of λ̄, per candidate; −1: the constant classifier
  std::vector<int> eligible;            // the candidates offered to the mechanism (public)
  std::vector<Eigen::VectorXd> weights;  // per candidate (post-processing of the cells)
  std::vector<double> errors;            // validation error per candidate (public)
  std::vector<double> positive_rates;    // validation positive rate per candidate (public)
  double floor = 0;                      // M
  double sensitivity = 0;                // 2·penalty/M
  std::vector<double> noisy_counts;      // 2K, cell 2a+y
  double noisy_gap = 0;                  // the chosen's gap, from its released positives
};

// The selection. `cells` are the learner's released cells (ReductionResult::cells), `data` its
// game (for XᵀX), `lambda_average` its λ̄. Fails only on inconsistent inputs or where
// CheckSelectionFeasible (run before a job's charge) fails: the floor M is in [1, cap] whatever
// the noise.
absl::StatusOr<SelectionResult> RunSelection(const GameData& data, const ReleasedCells& cells,
                                             absl::Span<const double> lambda_average,
                                             const ValidationRows& validation,
                                             const SelectionOptions& options,
                                             const SelectionNoises& noises, absl::BitGenRef gen);

// The largest floor M can be, from the company's labels alone: the smallest cell holds at most
// min_y ⌊N_y / K⌋ rows (equalized odds), the smallest group ⌊n / K⌋ (demographic parity); at
// least 1. RunSelection clamps M to it, so M's range is public.
double SelectionFloorCap(const ValidationRows& validation, ReductionConstraint constraint);

// Before a job's charge, from public inputs (the validation labels, K, the options): that the
// exponential mechanism's snapped utilities fit its sampler whatever M turns out to be (u <= 1 +
// penalty over a grid >= Δ/2^20 with Δ = 2·penalty/M >= 2·penalty/cap: (1 + penalty)·cap /
// penalty <= 2^32). InvalidArgument naming selection_penalty otherwise.
absl::Status CheckSelectionFeasible(const ValidationRows& validation,
                                    const SelectionOptions& options);

// The utilities the exponential mechanism compares (for tests and the bench): per candidate's
// validation decisions (1 iff x·w > 0), with the floor M on the denominators.
std::vector<double> SelectionUtilities(const ValidationRows& validation,
                                       const std::vector<std::vector<uint8_t>>& decisions,
                                       const SelectionOptions& options, double floor);

}  // namespace fairvault::core::learn

#endif  // FAIRVAULT_CORE_LEARN_SELECTION_H_
