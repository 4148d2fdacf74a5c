// Tests of BuildGameData in blocks: every overload (a matrix, columns read in place with or
// without keeping the matrix) gives the same values to the bit, and the same as the whole-matrix
// computation it replaced for everything the noise plan or a release uses (the preprocessed
// rows, the feature grid, the row norms and steps, the exact cell sums); XᵀX and Xᵀ1{y} (a-free,
// summed in another order) agree to rounding.
#include "core/learn/game_data.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "core/dp/granularity.h"
#include "core/learn/fair_game.h"
#include "core/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace fairvault::core::learn {
namespace {

using ::fairvault::testing::StatusIs;

// The computation BuildGameData made on the whole n x d matrix before it worked in blocks.
struct Reference {
  Eigen::MatrixXd x, gram;
  Eigen::VectorXd xt_label0, xt_label1;
  double feature_grid = 0, max_row_l1 = 0;
  int64_t max_row_steps = 0;
  std::vector<std::vector<int64_t>> cell_sums;
  std::vector<int64_t> cell_counts;
};

Reference WholeMatrix(Eigen::MatrixXd x, const std::vector<int>& y, const std::vector<int>& a,
                      int k, double clip_l1, bool intercept) {
  Reference r;
  const int64_t n = x.rows();
  const int raw = static_cast<int>(x.cols());
  const int d = raw + (intercept ? 1 : 0);
  if (clip_l1 > 0) {
    Eigen::VectorXd row(raw);
    for (int64_t i = 0; i < n; ++i) {
      row = x.row(i).transpose();
      const double norm = Eigen::Ref<const Eigen::VectorXd>(row).lpNorm<1>();
      if (norm > clip_l1) x.row(i).head(raw) *= clip_l1 / norm;
    }
  }
  if (intercept) {
    x.conservativeResize(n, d);
    x.col(raw).setOnes();
  }
  r.gram = Eigen::MatrixXd::Zero(d, d);
  r.gram.selfadjointView<Eigen::Lower>().rankUpdate(x.transpose());
  r.gram.triangularView<Eigen::Upper>() = r.gram.transpose();
  r.gram.diagonal().array() += 1e-6 * std::max(r.gram.trace() / d, 1e-12);
  Eigen::VectorXd label1(n);
  for (int64_t i = 0; i < n; ++i) label1(i) = y[i];
  r.xt_label1 = x.transpose() * label1;
  r.xt_label0 = x.transpose() * Eigen::VectorXd::Ones(n) - r.xt_label1;
  r.max_row_l1 = x.rowwise().lpNorm<1>().maxCoeff();
  r.feature_grid = *dp::PowerOfTwoGranularity(r.max_row_l1, 12);
  r.cell_sums.assign(2 * k, std::vector<int64_t>(d, 0));
  r.cell_counts.assign(2 * k, 0);
  std::vector<int64_t> row_steps(n, 0);
  for (int64_t i = 0; i < n; ++i) ++r.cell_counts[2 * a[i] + y[i]];
  for (int j = 0; j < d; ++j) {
    for (int64_t i = 0; i < n; ++i) {
      const int64_t steps = static_cast<int64_t>(std::round(x(i, j) / r.feature_grid));
      row_steps[i] += steps < 0 ? -steps : steps;
      r.cell_sums[2 * a[i] + y[i]][j] += steps;
    }
  }
  r.max_row_steps = *std::max_element(row_steps.begin(), row_steps.end());
  r.x = std::move(x);
  return r;
}

// A table of `stored` rows, of which the game uses `rows` (a shuffled subset, as a join gives);
// heavy-tailed columns so that clipping changes some rows and not others.
struct Table {
  std::vector<std::vector<double>> columns;
  std::vector<int64_t> rows;
  std::vector<int> y, a;
  Eigen::MatrixXd Matrix() const {  // the used rows, n x d_raw
    Eigen::MatrixXd x(rows.size(), columns.size());
    for (size_t j = 0; j < columns.size(); ++j) {
      for (size_t i = 0; i < rows.size(); ++i) x(i, j) = columns[j][rows[i]];
    }
    return x;
  }
  FeatureColumns Columns() const {
    FeatureColumns f;
    for (const auto& c : columns) f.columns.emplace_back(c);
    f.rows = rows;
    return f;
  }
};

Table RandomTable(int64_t stored, int64_t used, int d, int k, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::student_t_distribution<double> heavy(2);
  std::uniform_int_distribution<int> group(0, k - 1);
  Table t;
  t.columns.assign(d, std::vector<double>(stored));
  for (int j = 0; j < d; ++j) {
    for (int64_t i = 0; i < stored; ++i) t.columns[j][i] = j % 5 == 4 ? (i % 3 == 0) : heavy(gen);
  }
  t.rows.resize(stored);
  std::iota(t.rows.begin(), t.rows.end(), 0);
  std::shuffle(t.rows.begin(), t.rows.end(), gen);
  t.rows.resize(used);
  for (int64_t i = 0; i < used; ++i) {
    t.y.push_back(t.columns[0][t.rows[i]] + heavy(gen) > 0 ? 1 : 0);
    t.a.push_back(group(gen));
  }
  return t;
}

// Bit-equality of everything two builds compute.
void ExpectSameBits(const GameData& p, const GameData& q) {
  EXPECT_EQ(p.n, q.n);
  EXPECT_EQ(p.d, q.d);
  EXPECT_EQ(p.feature_grid, q.feature_grid);
  EXPECT_EQ(p.max_row_l1, q.max_row_l1);
  EXPECT_EQ(p.max_row_steps, q.max_row_steps);
  EXPECT_EQ(p.cell_sums, q.cell_sums);
  EXPECT_EQ(p.cell_counts, q.cell_counts);
  EXPECT_TRUE(p.xt_label0 == q.xt_label0);
  EXPECT_TRUE(p.xt_label1 == q.xt_label1);
  EXPECT_TRUE(p.gram.matrixLDLT() == q.gram.matrixLDLT());
  EXPECT_TRUE(p.gram.vectorD() == q.gram.vectorD());
}

TEST(BuildGameDataTest, EveryOverloadMatchesTheWholeMatrixComputation) {
  // 10,000 rows: two full blocks of 4,096 and a partial one.
  const Table t = RandomTable(12000, 10000, 12, 3, 7);
  for (const double clip : {0.0, 1.0, 4.0}) {
    for (const bool intercept : {true, false}) {
      SCOPED_TRACE(::testing::Message() << "clip " << clip << " intercept " << intercept);
      const Reference ref = WholeMatrix(t.Matrix(), t.y, t.a, 3, clip, intercept);
      auto moved = BuildGameData(t.Matrix(), t.y, t.a, 3, clip, intercept);
      auto kept = BuildGameData(t.Columns(), t.y, t.a, 3, clip, intercept, KeepMatrix::kYes);
      auto sums = BuildGameData(t.Columns(), t.y, t.a, 3, clip, intercept, KeepMatrix::kNo);
      ASSERT_OK(moved);
      ASSERT_OK(kept);
      ASSERT_OK(sums);
      // What the noise plan and the releases use: the same bits as before.
      EXPECT_TRUE(*moved->x == ref.x);
      EXPECT_EQ(moved->feature_grid, ref.feature_grid);
      EXPECT_EQ(moved->max_row_l1, ref.max_row_l1);
      EXPECT_EQ(moved->max_row_steps, ref.max_row_steps);
      EXPECT_EQ(moved->cell_sums, ref.cell_sums);
      EXPECT_EQ(moved->cell_counts, ref.cell_counts);
      // The a-free sums, in another order: the same to rounding.
      const Eigen::MatrixXd gram = moved->gram.reconstructedMatrix();
      EXPECT_LE((gram - ref.gram).norm(), 1e-12 * ref.gram.norm());
      EXPECT_LE((moved->xt_label0 - ref.xt_label0).norm(), 1e-12 * ref.xt_label0.norm());
      EXPECT_LE((moved->xt_label1 - ref.xt_label1).norm(), 1e-12 * ref.xt_label1.norm());
      // Every source: the same bits, the matrix kept only when asked for.
      ExpectSameBits(*moved, *kept);
      ExpectSameBits(*moved, *sums);
      EXPECT_TRUE(*kept->x == ref.x);
      EXPECT_TRUE(moved->KeepsMatrix());
      EXPECT_TRUE(kept->KeepsMatrix());
      EXPECT_FALSE(sums->KeepsMatrix());
      EXPECT_EQ(sums->x, nullptr);
    }
  }
}

TEST(BuildGameDataTest, ASingleShortBlock) {
  const Table t = RandomTable(50, 17, 3, 2, 9);
  const Reference ref = WholeMatrix(t.Matrix(), t.y, t.a, 2, 1.5, true);
  auto sums = BuildGameData(t.Columns(), t.y, t.a, 2, 1.5, true, KeepMatrix::kNo);
  ASSERT_OK(sums);
  EXPECT_EQ(sums->max_row_l1, ref.max_row_l1);
  EXPECT_EQ(sums->max_row_steps, ref.max_row_steps);
  EXPECT_EQ(sums->cell_sums, ref.cell_sums);
  ExpectSameBits(*sums, *BuildGameData(t.Matrix(), t.y, t.a, 2, 1.5, true));
}

// Values exactly halfway between two grid steps (the grid is 2^-12 when the largest row L1 norm
// is 1) round away from zero, as std::round does.
TEST(BuildGameDataTest, HalfStepsRoundAwayFromZero) {
  std::vector<double> column = {1.0, -1.0};
  for (int m = -50; m < 50; ++m) column.push_back((2 * m + 1) * 0x1p-13);
  for (int m = 0; m < 40; ++m) column.push_back(std::ldexp(1.0, -m) * (m % 2 ? -1 : 1));
  Table t;
  t.columns = {column};
  for (size_t i = 0; i < column.size(); ++i) {
    t.rows.push_back(static_cast<int64_t>(i));
    t.y.push_back(static_cast<int>(i % 2));
    t.a.push_back(static_cast<int>(i % 3 == 0));
  }
  const Reference ref = WholeMatrix(t.Matrix(), t.y, t.a, 2, 0, false);
  ASSERT_EQ(ref.feature_grid, 0x1p-12);
  auto sums = BuildGameData(t.Columns(), t.y, t.a, 2, 0, false, KeepMatrix::kNo);
  ASSERT_OK(sums);
  EXPECT_EQ(sums->max_row_steps, ref.max_row_steps);
  EXPECT_EQ(sums->cell_sums, ref.cell_sums);
  // One side alone: the positive half steps (2m+1)/2 for m = 0..49 round to m + 1.
  Table positive = t;
  positive.a.assign(t.rows.size(), 0);
  for (int m = 0; m < 50; ++m) positive.a[2 + 50 + m] = 1;
  auto split =
      BuildGameData(positive.Columns(), positive.y, positive.a, 2, 0, false, KeepMatrix::kNo);
  ASSERT_OK(split);
  int64_t expected = 0;
  for (int m = 0; m < 50; ++m) expected += m + 1;
  EXPECT_EQ(split->cell_sums[2][0] + split->cell_sums[3][0], expected);
}

TEST(BuildGameDataTest, ColumnsRefuseBadRowsAndNonFiniteValues) {
  Table t = RandomTable(100, 60, 2, 2, 5);
  std::vector<int64_t> rows = t.rows;
  rows[3] = 100;
  FeatureColumns outside = t.Columns();
  outside.rows = rows;
  EXPECT_THAT(BuildGameData(outside, t.y, t.a, 2, 0, true, KeepMatrix::kNo).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "outside the feature columns"));
  t.columns[1][t.rows[40]] = std::nan("");
  EXPECT_THAT(BuildGameData(t.Columns(), t.y, t.a, 2, 0, true, KeepMatrix::kNo).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "finite"));
  EXPECT_THAT(BuildGameData(t.Matrix(), t.y, t.a, 2, 0, true).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "finite"));
}

// Issue 19: a game regrouped for another release (another attribute choice or a neighbouring
// vault) has exactly the per-cell sums of a game built with those groups, and its a-free parts
// unchanged; with or without the matrix.
TEST(BuildGameDataTest, RegroupingEqualsBuildingWithTheOtherGroups) {
  const Table t = RandomTable(9000, 6000, 5, 3, 11);
  std::vector<int> other = t.a;
  for (size_t i = 0; i < other.size(); i += 7) other[i] = (other[i] + 1) % 3;
  for (const KeepMatrix keep : {KeepMatrix::kYes, KeepMatrix::kNo}) {
    auto first = BuildGameData(t.Columns(), t.y, t.a, 3, 2.0, true, keep);
    auto direct = BuildGameData(t.Columns(), t.y, other, 3, 2.0, true, keep);
    ASSERT_OK(first);
    ASSERT_OK(direct);
    GameData regrouped = *first;  // a copy shares the matrix
    ASSERT_OK(RegroupGameData(t.Columns(), 2.0, true, other, 3, &regrouped));
    EXPECT_EQ(regrouped.group, other);
    EXPECT_EQ(regrouped.cell_sums, direct->cell_sums);
    EXPECT_EQ(regrouped.cell_counts, direct->cell_counts);
    EXPECT_NE(regrouped.cell_sums, first->cell_sums);
    EXPECT_EQ(regrouped.max_row_steps, first->max_row_steps);
    EXPECT_EQ(regrouped.feature_grid, first->feature_grid);
    EXPECT_TRUE(regrouped.gram.vectorD() == first->gram.vectorD());
    if (keep == KeepMatrix::kYes) EXPECT_EQ(regrouped.x.get(), first->x.get());
  }
  GameData bad = *BuildGameData(t.Columns(), t.y, t.a, 3, 2.0, true, KeepMatrix::kNo);
  EXPECT_THAT(RegroupGameData(t.Columns(), 2.0, true, std::vector<int>(5, 0), 3, &bad),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(BuildGameDataTest, WithoutTheMatrixOnlyTheLeastSquaresOracleRuns) {
  const Table t = RandomTable(500, 400, 4, 2, 3);
  auto sums = BuildGameData(t.Columns(), t.y, t.a, 2, 0, true, KeepMatrix::kNo);
  ASSERT_OK(sums);
  const std::vector<double> lambda = {0.5, 0, 0, 0.25};
  const std::vector<double> masses = {0.25, 0.25, 0.25, 0.25};
  std::mt19937_64 gen(1);
  const NoiseFactory zero = [](double) -> absl::StatusOr<std::unique_ptr<dp::IntegerNoise>> {
    return dp::MakeZeroNoise();
  };
  auto grid = PlanCostGrid(sums->n, sums->max_row_steps, 1, masses, Oracle::kLeastSquares, 1);
  ASSERT_OK(grid);
  auto least_squares =
      PrivateBestResponse(*sums, lambda, masses, Oracle::kLeastSquares, 1, *grid, zero, gen);
  ASSERT_OK(least_squares);
  auto kept = BuildGameData(t.Matrix(), t.y, t.a, 2, 0, true);
  ASSERT_OK(kept);
  auto same =
      PrivateBestResponse(*kept, lambda, masses, Oracle::kLeastSquares, 1, *grid, zero, gen);
  ASSERT_OK(same);
  EXPECT_TRUE(least_squares->weights == same->weights);
  EXPECT_THAT(PrivateBestResponse(*sums, lambda, masses, Oracle::kFtpl, 1, *grid, zero, gen).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, "KeepMatrix::kYes"));
  EXPECT_TRUE(Decide(*sums, least_squares->weights).empty());
  LearnerPlan plan{1, 1};
  EXPECT_THAT(RunDpOracleLearner(*sums, LearnerOptions(), plan, zero, gen, {}).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, "KeepMatrix::kYes"));
}

}  // namespace
}  // namespace fairvault::core::learn
