// The company's rows prepared once for every best response of a fair game (fair_game.h): the
// a-free sums (XᵀX factorized, Xᵀ1{y}), the features' Mironov grid and the exact per-cell sums,
// and, when asked for, the n x d matrix itself. Built in blocks of rows, so that a game that does
// not keep the matrix never holds more than a block of it.
#ifndef FAIRVAULT_CORE_LEARN_GAME_DATA_H_
#define FAIRVAULT_CORE_LEARN_GAME_DATA_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "Eigen/Dense"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace fairvault::core::learn {

// The company's rows, preprocessed once for every best response of a game.
struct GameData {
  int64_t n = 0;  // rows
  int d = 0;      // features after preprocessing (intercept included)
  int k = 0;      // groups; group 0 is the reference
  // n x d: clipped features (+ intercept), or null when built with KeepMatrix::kNo. Only the
  // FTPL oracle (Xᵀ c̃ over rows) and Decide (X·w) read it. Shared, so that a copy of the game
  // (to regroup it for another release) does not copy the matrix.
  std::shared_ptr<const Eigen::MatrixXd> x;
  std::vector<int> y;                 // 0/1
  std::vector<int> group;             // 0..k-1 (protected: never released directly)
  // Everything below `group` but the grid and max_row_steps depends on the groups and is
  // recomputed for every release (RegroupGameData); the rest depends only on the company's rows.
  Eigen::LDLT<Eigen::MatrixXd> gram;  // XᵀX + ridge·I, factorized once
  Eigen::VectorXd xt_label0;          // Xᵀ 1{y=0}: the a-free part of Xᵀ C1
  Eigen::VectorXd xt_label1;          // Xᵀ 1{y=1} = Xᵀ C0
  // The Mironov grid of the features: xs = round(x / feature_grid), exact small integers (not
  // kept: only their sums below are used).
  double feature_grid = 0;
  // max_i Σ_j |xs_ij|: the L1 sensitivity factor of one row (public: company features).
  int64_t max_row_steps = 0;
  double max_row_l1 = 0;  // max_i ‖x_i‖₁ in real units
  // Exact Σ of xs over the rows of each (group, label) cell: cell 2a+y, d entries each.
  std::vector<std::vector<int64_t>> cell_sums;
  std::vector<int64_t> cell_counts;  // exact |(a, y)| (protected)

  // Whether `x` holds the n x d matrix (the FTPL oracle and the learner need it).
  bool KeepsMatrix() const { return n > 0 && x != nullptr && x->rows() == n && x->cols() == d; }
};

// The company's raw features read where they lie: x_ij = columns[j][rows[i]] for
// i < rows.size(), e.g. a stored table's columns through a join's row indices. Not owned: the
// memory must stay alive during BuildGameData only.
struct FeatureColumns {
  std::vector<absl::Span<const double>> columns;  // d_raw columns
  absl::Span<const int64_t> rows;                 // n indices into every column
};

// Whether BuildGameData keeps the n x d matrix in GameData::x. kNo is enough for least-squares
// best responses (they use only the sums) and touches no n x d memory: at 1M x 50, the first
// touch of a fresh 400 MB matrix costs over a second on a VM.
enum class KeepMatrix { kNo, kYes };

// Builds the game's data. `features` is n x d_raw; labels 0/1; groups in 0..k-1 (k >= 2).
// Rows are scaled to L1 norm <= clip_l1 when clip_l1 > 0, then a constant 1 is appended if
// `intercept`. InvalidArgument for shape mismatches, non-finite values, too many rows for the
// exact integer sums. Every overload computes the same values to the bit (the sums over the
// rows are taken in the same blocks whatever the source); the matrix is kept.
absl::StatusOr<GameData> BuildGameData(const Eigen::MatrixXd& features, std::vector<int> labels,
                                       std::vector<int> groups, int k, double clip_l1,
                                       bool intercept);
// The same, preprocessing the caller's matrix in place instead of a copy (at 1M x 50 a copy is
// 400 MB of fresh memory).
absl::StatusOr<GameData> BuildGameData(Eigen::MatrixXd&& features, std::vector<int> labels,
                                       std::vector<int> groups, int k, double clip_l1,
                                       bool intercept);
// The same from columns read in place (no copy of them), keeping the matrix or not. Every row
// index must be within every column (InvalidArgument otherwise).
absl::StatusOr<GameData> BuildGameData(const FeatureColumns& features, std::vector<int> labels,
                                       std::vector<int> groups, int k, double clip_l1,
                                       bool intercept, KeepMatrix keep);

// The groups of another release on the same rows: sets `group` and k and recomputes the exact
// per-cell sums (and max_row_steps) from the snapped features, read from the game's matrix if it
// keeps one, else from `features` (the columns the game was built from, with the same clip_l1
// and intercept). O(n·d); everything else of the game (XᵀX, its factorization, the grid) is
// kept. This is how the vault reuses a game across releases without reusing anything that read
// the groups: whether a game is reused then depends on public inputs only (issue 19).
absl::Status RegroupGameData(const FeatureColumns& features, double clip_l1, bool intercept,
                             std::vector<int> groups, int k, GameData* data);

// The largest feature-step factor of one row whatever the features: max_row_steps <= 2^12 + d/2
// (rows of L1 norm <= R snap to the grid R/2^12 rounded up to a power of two). For the checks
// made before a charge, when only d is known.
inline double MaxRowStepsBound(int d) { return 4096.0 + 0.5 * d; }

// The scale of features every learner handles without overflow or underflow: the largest row
// L1 norm after clip_l1 and the intercept, R, in [2^-400, 2^480] (XᵀX then stays below 2^1000 for
// n < 2^40, its ridge above R²·1e-6/d², and every solve and grid a finite normal double).
// InvalidArgument naming feature_columns and clip_l1 otherwise. Public (the company's features),
// so checked before a charge.
absl::Status CheckFeatureScale(double max_row_l1);

// R as BuildGameData computes it, from the raw columns over `rows` (InvalidArgument naming
// feature_columns if a value is not finite). O(n·d).
absl::StatusOr<double> MaxPreprocessedRowL1(const FeatureColumns& features, double clip_l1,
                                            bool intercept);

// The preprocessed features alone (clip, intercept; the same values as BuildGameData's to the
// bit), row-major: the stochastic learners read whole rows of a batch.
absl::StatusOr<Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>
BuildFeatureMatrix(const FeatureColumns& features, double clip_l1, bool intercept);

// The feature map a model artifact records: clip to L1 <= clip_l1 (if > 0), append 1.
Eigen::VectorXd PreprocessRow(const Eigen::Ref<const Eigen::VectorXd>& raw, double clip_l1,
                              bool intercept);

}  // namespace fairvault::core::learn

#endif  // FAIRVAULT_CORE_LEARN_GAME_DATA_H_
