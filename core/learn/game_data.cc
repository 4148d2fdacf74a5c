// BuildGameData: two passes over the rows in blocks (the features' grid depends on the largest
// row norm, known only after the first), from a matrix or from columns read in place.
#include "core/learn/game_data.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "core/dp/granularity.h"
#include "core/util/status_macros.h"

namespace fairvault::core::learn {
namespace {

// Features are snapped to 2^-12 of the largest row L1 norm: a row spans at most about 4096
// steps (plus half a step per feature), which keeps the exact sums small.
constexpr int kFeatureBits = 12;
// Rows per block: 4,096 x 51 doubles (1.7 MB) stay in cache while a block is summed. Every
// source is cut into the same blocks, so every overload sums XᵀX and Xᵀ1{y} in the same order.
constexpr int64_t kBlockRows = 4096;

using Rows = Eigen::Map<Eigen::MatrixXd, 0, Eigen::OuterStride<>>;
using ConstRows = Eigen::Map<const Eigen::MatrixXd, 0, Eigen::OuterStride<>>;

// Rows [start, start + count) of the preprocessed features, column j at data + j * stride.
// (A block buffer's stride is not a power of two: 4,096 doubles between columns would put every
// column of a row in the same cache set.)
struct Block {
  const double* data = nullptr;
  Eigen::Index stride = 0;
};
// Returns a block for the first pass (`first`: it may preprocess in place) or the second.
using LoadBlock =
    absl::FunctionRef<absl::StatusOr<Block>(int64_t start, int64_t count, bool first)>;

// Checks the shapes, labels and groups; sets n, d, k, y and group. (Into the caller's GameData:
// its LDLT is not initialized before SumBlocks computes it, so it is not copied before.)
absl::Status StartGame(int64_t n, int64_t raw, std::vector<int> labels, std::vector<int> groups,
                       int k, double clip_l1, bool intercept, GameData& data) {
  if (n < 1) return absl::InvalidArgumentError("the game needs at least one row");
  if (static_cast<int64_t>(labels.size()) != n || static_cast<int64_t>(groups.size()) != n) {
    return absl::InvalidArgumentError("features, labels and groups must have the same rows");
  }
  if (k < 2) return absl::InvalidArgumentError("the game needs at least two groups");
  if (!(clip_l1 >= 0) || !std::isfinite(clip_l1)) {
    return absl::InvalidArgumentError("clip_l1 must be finite and >= 0");
  }
  for (int64_t i = 0; i < n; ++i) {
    if (labels[i] != 0 && labels[i] != 1) {
      return absl::InvalidArgumentError(absl::StrCat("label of row ", i + 1, " is not 0 or 1"));
    }
    if (groups[i] < 0 || groups[i] >= k) return absl::InternalError("group out of range");
  }
  data.n = n;
  data.k = k;
  data.d = static_cast<int>(raw) + (intercept ? 1 : 0);
  if (data.d < 1) return absl::InvalidArgumentError("the game needs at least one feature");
  data.y = std::move(labels);
  data.group = std::move(groups);
  return absl::OkStatus();
}

// PreprocessRow on every row of `rows` in place (columns 0..raw-1 hold the raw features): the
// clipping factor from each row's L1 norm taken as PreprocessRow takes it, on a contiguous copy
// of the row (`row`, raw entries), so the values are the same to the bit; then the constant 1.
absl::Status Preprocess(Rows rows, int raw, double clip_l1, bool intercept, Eigen::VectorXd& row) {
  if (!rows.leftCols(raw).allFinite()) return absl::InvalidArgumentError("features must be finite");
  if (clip_l1 > 0) {
    for (Eigen::Index i = 0; i < rows.rows(); ++i) {
      row = rows.row(i).head(raw).transpose();
      const double norm = Eigen::Ref<const Eigen::VectorXd>(row).lpNorm<1>();
      if (norm > clip_l1) rows.row(i).head(raw) *= clip_l1 / norm;
    }
  }
  if (intercept) rows.col(raw).setOnes();
  return absl::OkStatus();
}

// Every row index within every column.
absl::Status CheckRowIndices(const FeatureColumns& features) {
  if (features.columns.empty()) return absl::OkStatus();
  size_t shortest = features.columns[0].size();
  for (const absl::Span<const double>& c : features.columns)
    shortest = std::min(shortest, c.size());
  for (const int64_t r : features.rows) {
    if (r < 0 || static_cast<size_t>(r) >= shortest) {
      return absl::InvalidArgumentError(
          absl::StrCat("row index ", r, " is outside the feature columns (", shortest, " rows)"));
    }
  }
  return absl::OkStatus();
}

// Rows [start, start + count) gathered column by column into `out` (d columns, `stride` between
// them), then preprocessed there (`row`: scratch of the raw width).
absl::Status Gather(const FeatureColumns& features, int64_t start, int64_t count, double clip_l1,
                    bool intercept, int d, double* out, Eigen::Index stride, Eigen::VectorXd& row) {
  const int raw = static_cast<int>(features.columns.size());
  const int64_t* index = features.rows.data() + start;
  for (int j = 0; j < raw; ++j) {
    const double* source = features.columns[j].data();
    double* column = out + j * stride;
    for (int64_t i = 0; i < count; ++i) column[i] = source[index[i]];
  }
  return Preprocess(Rows(out, count, d, Eigen::OuterStride<>(stride)), raw, clip_l1, intercept,
                    row);
}

// static_cast<int64_t>(std::round(v)) (half away from zero) for |v| < 2^62, without a libm call:
// the truncation and the fraction v - trunc(v) are exact, so the result is the same. (Here
// |v| <= 2^13: no entry exceeds its row's L1 norm, at most 2^13 feature grid steps.)
inline int64_t RoundToInt(double v) {
  const int64_t t = static_cast<int64_t>(v);
  const double fraction = v - static_cast<double>(t);
  return t + static_cast<int64_t>(fraction >= 0.5) - static_cast<int64_t>(fraction <= -0.5);
}

// Pass 1, the a-free parts from the blocks `load` gives: XᵀX (with a tiny ridge for collinear
// one-hot columns), Xᵀ1{y}, the largest row L1 norm and the features' grid.
absl::Status SumRows(LoadBlock load, GameData& data) {
  const int64_t n = data.n;
  const int d = data.d;
  Eigen::MatrixXd gram = Eigen::MatrixXd::Zero(d, d);
  data.xt_label0 = Eigen::VectorXd::Zero(d);
  data.xt_label1 = Eigen::VectorXd::Zero(d);
  Eigen::VectorXd label0(std::min(n, kBlockRows)), label1(std::min(n, kBlockRows));
  Eigen::VectorXd row_l1(std::min(n, kBlockRows));
  double max_row_l1 = 0;
  for (int64_t start = 0; start < n; start += kBlockRows) {
    const int64_t m = std::min(kBlockRows, n - start);
    ASSIGN_OR_RETURN(const Block block, load(start, m, /*first=*/true));
    const ConstRows x(block.data, m, d, Eigen::OuterStride<>(block.stride));
    gram.selfadjointView<Eigen::Lower>().rankUpdate(x.transpose());
    for (int64_t i = 0; i < m; ++i) {
      label1(i) = data.y[start + i];
      label0(i) = 1 - data.y[start + i];
    }
    data.xt_label0.noalias() += x.transpose() * label0.head(m);
    data.xt_label1.noalias() += x.transpose() * label1.head(m);
    // Each row's ‖x_i‖₁ = ((|x_i0| + |x_i1|) + |x_i2|) + ...: the order in which Eigen sums a
    // strided row (x.rowwise().lpNorm<1>(), unvectorized), taken a column at a time.
    auto l1 = row_l1.head(m);
    l1 = x.col(0).cwiseAbs();
    for (int j = 1; j < d; ++j) l1 += x.col(j).cwiseAbs();
    max_row_l1 = std::max(max_row_l1, l1.maxCoeff());
  }
  gram.triangularView<Eigen::Upper>() = gram.transpose();
  const double ridge = 1e-6 * std::max(gram.trace() / d, 1e-12);
  gram.diagonal().array() += ridge;
  data.gram.compute(gram);
  data.max_row_l1 = max_row_l1;
  if (!(data.max_row_l1 > 0)) return absl::InvalidArgumentError("every feature row is zero");
  ASSIGN_OR_RETURN(data.feature_grid, dp::PowerOfTwoGranularity(data.max_row_l1, kFeatureBits));
  return absl::OkStatus();
}

// Pass 2, from the same blocks: the snapped features xs_ij = round(x_ij / feature_grid) summed
// exactly per (group, label) cell and, in absolute value, per row (max_row_steps: a-free),
// without keeping them. The only part of a game that reads the groups; it is computed afresh
// for every release (RegroupGameData) and never cached across releases.
absl::Status SumCells(LoadBlock load, GameData& data) {
  const int64_t n = data.n;
  const int d = data.d;
  const int k = data.k;
  data.cell_sums.assign(2 * k, std::vector<int64_t>(d, 0));
  data.cell_counts.assign(2 * k, 0);
  const size_t block_rows = static_cast<size_t>(std::min(n, kBlockRows));
  std::vector<int64_t> steps(block_rows), row_steps(block_rows);
  // The block's rows ordered by cell (cell c: by_cell[cell_begin[c] .. cell_begin[c+1])), so
  // that each cell's sum is a run of independent additions.
  std::vector<int32_t> by_cell(block_rows);
  std::vector<int64_t> cell_begin(2 * k + 1), next(2 * k);
  // The grid is a normal power of two: x * (1 / grid) is x / grid to the bit (the reciprocal
  // is exact, and both are the correctly rounded x · 2^-e).
  const double inverse_grid = 1 / data.feature_grid;
  data.max_row_steps = 0;
  for (int64_t start = 0; start < n; start += kBlockRows) {
    const int64_t m = std::min(kBlockRows, n - start);
    ASSIGN_OR_RETURN(const Block block, load(start, m, /*first=*/false));
    std::fill(cell_begin.begin(), cell_begin.end(), 0);
    for (int64_t i = 0; i < m; ++i) ++cell_begin[2 * data.group[start + i] + data.y[start + i] + 1];
    for (int cell = 0; cell < 2 * k; ++cell) {
      data.cell_counts[cell] += cell_begin[cell + 1];
      cell_begin[cell + 1] += cell_begin[cell];
    }
    std::copy(cell_begin.begin(), cell_begin.end() - 1, next.begin());
    for (int64_t i = 0; i < m; ++i) {
      by_cell[next[2 * data.group[start + i] + data.y[start + i]]++] = static_cast<int32_t>(i);
    }
    std::fill(row_steps.begin(), row_steps.begin() + m, 0);
    for (int j = 0; j < d; ++j) {
      const double* column = block.data + j * block.stride;
      for (int64_t i = 0; i < m; ++i) {
        const int64_t snapped = RoundToInt(column[i] * inverse_grid);
        const int64_t sign = snapped >> 63;  // |snapped| without a branch on the sign
        steps[i] = snapped;
        row_steps[i] += (snapped ^ sign) - sign;
      }
      for (int cell = 0; cell < 2 * k; ++cell) {
        int64_t sum = 0;
        for (int64_t p = cell_begin[cell]; p < cell_begin[cell + 1]; ++p) sum += steps[by_cell[p]];
        data.cell_sums[cell][j] += sum;
      }
    }
    data.max_row_steps =
        std::max(data.max_row_steps, *std::max_element(row_steps.begin(), row_steps.begin() + m));
  }
  return absl::OkStatus();
}

// Both passes.
absl::Status SumBlocks(LoadBlock load, GameData& data) {
  RETURN_IF_ERROR(SumRows(load, data));
  return SumCells(load, data);
}

// Sets the groups after checking them.
absl::Status SetGroups(std::vector<int> groups, int k, GameData& data) {
  if (static_cast<int64_t>(groups.size()) != data.n) {
    return absl::InvalidArgumentError("features, labels and groups must have the same rows");
  }
  if (k < 2) return absl::InvalidArgumentError("the game needs at least two groups");
  for (int g : groups) {
    if (g < 0 || g >= k) return absl::InternalError("group out of range");
  }
  data.k = k;
  data.group = std::move(groups);
  return absl::OkStatus();
}

}  // namespace

Eigen::VectorXd PreprocessRow(const Eigen::Ref<const Eigen::VectorXd>& raw, double clip_l1,
                              bool intercept) {
  Eigen::VectorXd out(raw.size() + (intercept ? 1 : 0));
  out.head(raw.size()) = raw;
  const double norm = raw.lpNorm<1>();
  if (clip_l1 > 0 && norm > clip_l1) out.head(raw.size()) *= clip_l1 / norm;
  if (intercept) out(raw.size()) = 1.0;
  return out;
}

absl::StatusOr<GameData> BuildGameData(const Eigen::MatrixXd& features, std::vector<int> labels,
                                       std::vector<int> groups, int k, double clip_l1,
                                       bool intercept) {
  return BuildGameData(Eigen::MatrixXd(features), std::move(labels), std::move(groups), k, clip_l1,
                       intercept);
}

absl::StatusOr<GameData> BuildGameData(Eigen::MatrixXd&& features, std::vector<int> labels,
                                       std::vector<int> groups, int k, double clip_l1,
                                       bool intercept) {
  const int64_t n = features.rows();
  const int raw = static_cast<int>(features.cols());
  GameData data;
  RETURN_IF_ERROR(
      StartGame(n, raw, std::move(labels), std::move(groups), k, clip_l1, intercept, data));
  // Preprocessed in the caller's matrix; the constant 1 as a last column (column-major: growing
  // by a column keeps the others in place, a realloc rather than a copy of the n x d values).
  Eigen::MatrixXd x = std::move(features);
  if (intercept) x.conservativeResize(n, data.d);
  Eigen::VectorXd row(raw);
  RETURN_IF_ERROR(SumBlocks(
      [&](int64_t start, int64_t count, bool first) -> absl::StatusOr<Block> {
        double* rows = x.data() + start;
        if (first) {
          RETURN_IF_ERROR(Preprocess(Rows(rows, count, data.d, Eigen::OuterStride<>(n)), raw,
                                     clip_l1, intercept, row));
        }
        return Block{rows, n};
      },
      data));
  data.x = std::make_shared<const Eigen::MatrixXd>(std::move(x));
  return data;
}

absl::StatusOr<GameData> BuildGameData(const FeatureColumns& features, std::vector<int> labels,
                                       std::vector<int> groups, int k, double clip_l1,
                                       bool intercept, KeepMatrix keep) {
  const int64_t n = static_cast<int64_t>(features.rows.size());
  const int raw = static_cast<int>(features.columns.size());
  GameData data;
  RETURN_IF_ERROR(
      StartGame(n, raw, std::move(labels), std::move(groups), k, clip_l1, intercept, data));
  RETURN_IF_ERROR(CheckRowIndices(features));
  Eigen::VectorXd row(raw);
  const auto gather = [&](int64_t start, int64_t count, double* out, Eigen::Index stride) {
    return Gather(features, start, count, clip_l1, intercept, data.d, out, stride, row);
  };
  if (keep == KeepMatrix::kYes) {
    Eigen::MatrixXd x(n, data.d);
    RETURN_IF_ERROR(SumBlocks(
        [&](int64_t start, int64_t count, bool first) -> absl::StatusOr<Block> {
          double* rows = x.data() + start;
          if (first) RETURN_IF_ERROR(gather(start, count, rows, n));
          return Block{rows, n};
        },
        data));
    data.x = std::make_shared<const Eigen::MatrixXd>(std::move(x));
  } else {
    // One block of memory, filled again for the second pass (the same values: the same code on
    // the same inputs).
    Eigen::MatrixXd block(std::min(n, kBlockRows) + 8, data.d);
    RETURN_IF_ERROR(SumBlocks(
        [&](int64_t start, int64_t count, bool) -> absl::StatusOr<Block> {
          RETURN_IF_ERROR(gather(start, count, block.data(), block.rows()));
          return Block{block.data(), block.rows()};
        },
        data));
  }
  return data;
}

absl::Status CheckFeatureScale(double max_row_l1) {
  if (!(max_row_l1 >= 0x1p-400 && max_row_l1 <= 0x1p480)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "feature_columns: the largest row's L1 norm (after clip_l1 and the intercept) is ",
        max_row_l1,
        ", outside [2^-400, 2^480] where the learners' sums stay finite; rescale the features "
        "or set clip_l1"));
  }
  return absl::OkStatus();
}

absl::StatusOr<double> MaxPreprocessedRowL1(const FeatureColumns& features, double clip_l1,
                                            bool intercept) {
  RETURN_IF_ERROR(CheckRowIndices(features));
  const size_t n = features.rows.size();
  std::vector<double> l1(n, 0.0);
  for (const absl::Span<const double>& column : features.columns) {
    for (size_t i = 0; i < n; ++i) {
      const double v = column[features.rows[i]];
      if (!std::isfinite(v)) {
        return absl::InvalidArgumentError(
            absl::StrCat("feature_columns: row ", features.rows[i] + 1, " has a value that is "
                         "not finite (",
                         v, ")"));
      }
      l1[i] += std::fabs(v);
    }
  }
  double largest = 0;
  for (double v : l1) {
    const double clipped = clip_l1 > 0 && v > clip_l1 ? clip_l1 : v;
    largest = std::max(largest, clipped + (intercept ? 1.0 : 0.0));
  }
  return largest;
}

absl::Status RegroupGameData(const FeatureColumns& features, double clip_l1, bool intercept,
                             std::vector<int> groups, int k, GameData* data) {
  RETURN_IF_ERROR(SetGroups(std::move(groups), k, *data));
  if (data->KeepsMatrix()) {
    const Eigen::MatrixXd& x = *data->x;
    return SumCells(
        [&](int64_t start, int64_t, bool) -> absl::StatusOr<Block> {
          return Block{x.data() + start, x.rows()};
        },
        *data);
  }
  if (static_cast<int64_t>(features.rows.size()) != data->n ||
      static_cast<int>(features.columns.size()) + (intercept ? 1 : 0) != data->d) {
    return absl::InternalError("RegroupGameData: not the features the game was built from");
  }
  RETURN_IF_ERROR(CheckRowIndices(features));
  const int64_t n = data->n;
  Eigen::VectorXd row(static_cast<Eigen::Index>(features.columns.size()));
  Eigen::MatrixXd block(std::min(n, kBlockRows) + 8, data->d);
  return SumCells(
      [&](int64_t start, int64_t count, bool) -> absl::StatusOr<Block> {
        RETURN_IF_ERROR(
            Gather(features, start, count, clip_l1, intercept, data->d, block.data(), block.rows(),
                   row));
        return Block{block.data(), block.rows()};
      },
      *data);
}

absl::StatusOr<Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>
BuildFeatureMatrix(const FeatureColumns& features, double clip_l1, bool intercept) {
  RETURN_IF_ERROR(CheckRowIndices(features));
  const int64_t n = static_cast<int64_t>(features.rows.size());
  const int raw = static_cast<int>(features.columns.size());
  const int d = raw + (intercept ? 1 : 0);
  if (n < 1 || d < 1) return absl::InvalidArgumentError("a fit needs rows and feature columns");
  Eigen::MatrixXd x(n, d);
  Eigen::VectorXd row(raw);
  RETURN_IF_ERROR(Gather(features, 0, n, clip_l1, intercept, d, x.data(), n, row));
  return Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>(x);
}

}  // namespace fairvault::core::learn
