// The reductions learner (Agarwal et al. 2018, exponentiated gradient; issue 22): fair
// classification as a game between a learner of cost-sensitive least-squares best responses and
// an exponentiated-gradient auditor over the moment constraints of equalized odds or demographic
// parity (every group against the whole population, K groups, joint groups), made private with
// few releases (docs/privacy.md, "The reductions learner"):
//   1. the group-label counts n_ay, once (discrete Laplace);
//   2. the per-cell feature sums S_ay = Σ_{i in cell (a, y)} x_i, once (discrete Laplace on the
//      Mironov grid of the features): with the least-squares oracle, Xᵀ C(λ) is linear in them,
//      so every best response for every λ is post-processing of this one release;
//   3. each round, the positives of that round's best response per cell (discrete Gaussian, or
//      discrete Laplace under a pure grant): the auditor's violations.
// The final model is a mixture of the best responses: the linear program over them that
// Fairlearn's ExponentiatedGradient solves, on the public training errors and the released
// violations (post-processing), or their uniform average.
//
// Every cell release keeps the public label totals: for K = 2 only group 1 is noised and group 0
// is the label's total minus it (one row changing group, its label staying, moves one noised
// cell); for K > 2 every group is noised (a row moves two cells) and the residual against the
// total is spread evenly over the K groups (the least-squares projection), so that no group —
// a small one least of all — carries the others' noise.
#ifndef FAIRVAULT_CORE_LEARN_REDUCTIONS_H_
#define FAIRVAULT_CORE_LEARN_REDUCTIONS_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "Eigen/Dense"
#include "absl/random/bit_gen_ref.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/dp/integer_noise.h"
#include "core/learn/game_data.h"

namespace fairvault::core::learn {

enum class ReductionConstraint { kEqualizedOdds, kDemographicParity };

// Equalized odds: 4K constraints, entry 4a + 2y + s; demographic parity: 2K, entry 2a + s; for
// every group a (the reference included), s = 0 for (moment − bound), s = 1 for (−moment − bound).
// The moment is E[h | a, y] − E[h | y] (equalized odds) or E[h | a] − E[h] (demographic parity).
int ReductionConstraintCount(ReductionConstraint constraint, int k);

// The sensitivity of a cell release per unit of one row's vector norm, under replace-one on the
// group: 1 for K = 2 (only group 1 is noised, and a row moves into or out of it), 2 in L1 and √2
// in L2 for K > 2 (a row leaves one noised cell for another).
double CellReleaseL1Factor(int k);
double CellReleaseL2Factor(int k);
// The first group whose cells get noise: 1 for K = 2, 0 for K > 2.
int FirstNoisedGroup(int k);

// A cell release: `exact` holds 2K cells (cell 2a+y) of m integers each. Groups from
// FirstNoisedGroup(K) on get `noise` on every entry; then, per label and entry, K = 2: group 0
// is the label's total (the sum over groups, the company's public total) minus group 1; K > 2:
// (total − Σ noised) / K is added to every group. Post-processing keeps the totals exact.
std::vector<std::vector<double>> ReleaseGroupCells(const std::vector<std::vector<int64_t>>& exact,
                                                   const dp::IntegerNoise& noise,
                                                   absl::BitGenRef gen);

// What the best responses read, public once released: the floored counts n̂_ay, the feature sums
// Ŝ_ay in real units (snapped features), the label rows n_y (the company's) and n.
struct ReleasedCells {
  int k = 0;
  int64_t n = 0;
  std::vector<double> counts;         // 2K, each >= the mass floor
  std::vector<Eigen::VectorXd> sums;  // 2K vectors of d
  double label_rows[2] = {0, 0};
};

// Releases the counts (`count_noise`, floored at `mass_floor`) and the sums (`sum_noise`, in
// feature steps) of the game's cells.
ReleasedCells ReleaseCells(const GameData& data, double mass_floor,
                           const dp::IntegerNoise& count_noise, const dp::IntegerNoise& sum_noise,
                           absl::BitGenRef gen);

// The least-squares best response to λ (ReductionConstraintCount entries, non-negative):
// w = (XᵀX + ridge)⁻¹ Σ_cells r_ay Ŝ_ay with r_ay = (2y − 1) − n·∂(λᵀγ)/∂h for a row of the cell;
// decide 1 iff x·w > 0. Post-processing of the release: no noise, no charge.
absl::StatusOr<Eigen::VectorXd> ReductionBestResponse(const GameData& data,
                                                      const ReleasedCells& cells,
                                                      ReductionConstraint constraint,
                                                      absl::Span<const double> lambda);

// The fair game's least-squares best response (Jagielski et al.; fair_game.h's constraint order,
// ConstraintCount(k) non-negative entries) from released cells: with q̂_ay = n̂_ay / n,
// w = (XᵀX + ridge)⁻¹ (Xᵀ1{y=1} − Xᵀ1{y=0} − Σ_cells CostShifts(λ, q̂)_ay Ŝ_ay); decide 1 iff
// x·w > 0. What PrivateBestResponse computes, with the released sums in place of its own noisy
// Xᵀ C1 and the shifts unsnapped: post-processing of the release, no noise, no charge.
absl::StatusOr<Eigen::VectorXd> FairGameBestResponse(const GameData& data,
                                                     const ReleasedCells& cells,
                                                     absl::Span<const double> lambda);

// The moments γ (one per constraint, before the bound) of predictions whose positives per cell
// are `positives` (2K, released), against the public label positives and rows. Rates clamp to
// [0, 1].
std::vector<double> ReductionMoments(ReductionConstraint constraint, const ReleasedCells& cells,
                                     absl::Span<const double> positives,
                                     const double label_positives[2]);

// kLinearProgram: Fairlearn's LP over the T rounds' responses on their released moments.
// kAverage: the uniform average of the T responses.
// kCandidates: after the rounds, CandidateCount() best responses to multiples of the average λ̄
// (0, ¼, ½, ¾, 1, 1½, 2, 3), each audited by its own release (noises.candidates), and the LP over
// them alone: fewer, better-estimated moments than the rounds'.
enum class FinalMixture { kLinearProgram, kAverage, kCandidates };
int CandidateCount();

struct ReductionOptions {
  ReductionConstraint constraint = ReductionConstraint::kEqualizedOdds;
  int rounds = 200;             // T
  double bound = 0.01;          // the constraints' bound (Fairlearn's difference_bound)
  double lambda_bound = 100;    // B
  double learning_rate = 0.02;  // η
  double mass_floor = 1;
  FinalMixture mixture = FinalMixture::kLinearProgram;
  // The column of the game's constant-1 feature (the intercept, last), or -1 without one. With
  // it, the LP mixtures may also choose the constant classifier of the training majority (zero
  // moments exactly, public error).
  int intercept_column = -1;
  absl::Status Validate() const;
};

// The noise of each release, made by the caller from the plan fixed at the charge.
struct ReductionNoises {
  const dp::IntegerNoise* counts = nullptr;     // L1 sensitivity CellReleaseL1Factor(k)
  const dp::IntegerNoise* sums = nullptr;       // in feature steps, x max_row_steps
  const dp::IntegerNoise* positives = nullptr;  // each round's released positives
  const dp::IntegerNoise* candidates = nullptr;  // each candidate's (kCandidates only)
};

struct ReductionResult {
  // The distinct best responses with positive weight, and their weights (summing to 1).
  std::vector<Eigen::VectorXd> components;
  std::vector<double> weights;
  std::vector<double> masses;          // n̂_ay / n
  std::vector<double> lambda_average;  // the auditor's λ averaged over the rounds
  // The mixture's violations (moment − bound per constraint) estimated from the released
  // positives, and its error on the training rows (public: the company's labels).
  std::vector<double> violations;
  double training_error = 0;
  int distinct_responses = 0;  // distinct best responses among the T
  // The released counts and feature sums: every best response to any λ is post-processing of
  // them (the managed selection's candidates, selection.h).
  ReleasedCells cells;
};

// The learner. The game must keep its rows (KeepMatrix::kYes; FailedPrecondition otherwise).
// `progress(done, total)` after each round and candidate (total: T, plus CandidateCount() with
// the candidates mixture); false stops with Aborted. The work of a round does not
// depend on the groups (branch-free counting), only on public inputs and released values.
absl::StatusOr<ReductionResult> RunReductionsLearner(
    const GameData& data, const ReductionOptions& options, const ReductionNoises& noises,
    absl::BitGenRef gen, const std::function<bool(int64_t, int64_t)>& progress);

}  // namespace fairvault::core::learn

#endif  // FAIRVAULT_CORE_LEARN_REDUCTIONS_H_
