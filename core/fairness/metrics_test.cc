// Hand-computed checks of the per-group rates and the fairness gaps built on them.
#include "core/fairness/metrics.h"

#include <cmath>
#include <vector>

#include "core/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace fairvault::core::fairness {
namespace {

using ::fairvault::testing::StatusIs;

// Group 0: (ŷ,y) = (1,1) (0,1) (1,0) (0,0)        -> TPR 1/2, FPR 1/2, selection 1/2, error 2/4.
// Group 1: (1,1) (1,1) (0,1) (1,0) (0,0) (0,0)    -> TPR 2/3, FPR 1/3, selection 1/2, error 2/6.
// Group 2: no rows.
struct Table {
  std::vector<int> prediction{1, 0, 1, 0, 1, 1, 0, 1, 0, 0};
  std::vector<int> label{1, 1, 0, 0, 1, 1, 1, 0, 0, 0};
  std::vector<int> group{0, 0, 0, 0, 1, 1, 1, 1, 1, 1};
};

TEST(ComputeGroupRatesTest, CountsAndRatesMatchHandComputation) {
  Table t;
  auto rates = ComputeGroupRates(t.prediction, t.label, t.group, 3);
  ASSERT_OK(rates);
  ASSERT_EQ(rates->size(), 3u);

  const GroupRates& g0 = (*rates)[0];
  EXPECT_EQ(g0.n, 4);
  EXPECT_EQ(g0.positives, 2);
  EXPECT_EQ(g0.negatives, 2);
  EXPECT_EQ(g0.predicted_positive, 2);
  EXPECT_EQ(g0.true_positive, 1);
  EXPECT_EQ(g0.false_positive, 1);
  EXPECT_DOUBLE_EQ(g0.selection_rate, 0.5);
  EXPECT_DOUBLE_EQ(g0.tpr, 0.5);
  EXPECT_DOUBLE_EQ(g0.fpr, 0.5);
  EXPECT_DOUBLE_EQ(g0.error, 0.5);

  const GroupRates& g1 = (*rates)[1];
  EXPECT_EQ(g1.n, 6);
  EXPECT_EQ(g1.positives, 3);
  EXPECT_EQ(g1.negatives, 3);
  EXPECT_EQ(g1.predicted_positive, 3);
  EXPECT_EQ(g1.true_positive, 2);
  EXPECT_EQ(g1.false_positive, 1);
  EXPECT_DOUBLE_EQ(g1.selection_rate, 0.5);
  EXPECT_DOUBLE_EQ(g1.tpr, 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(g1.fpr, 1.0 / 3.0);
  EXPECT_DOUBLE_EQ(g1.error, 1.0 / 3.0);

  const GroupRates& g2 = (*rates)[2];
  EXPECT_EQ(g2.n, 0);
  EXPECT_EQ(g2.selection_rate, 0.0);
  EXPECT_EQ(g2.tpr, 0.0);
  EXPECT_EQ(g2.fpr, 0.0);
  EXPECT_EQ(g2.error, 0.0);
}

TEST(ComputeGroupRatesTest, EmptyInputGivesEmptyGroups) {
  auto rates = ComputeGroupRates({}, {}, {}, 2);
  ASSERT_OK(rates);
  ASSERT_EQ(rates->size(), 2u);
  EXPECT_EQ((*rates)[0].n, 0);
  EXPECT_EQ((*rates)[1].n, 0);
}

TEST(ComputeGroupRatesTest, NamesFirstBadPredictionRow) {
  std::vector<int> prediction{0, 1, 1, 2, 7};
  std::vector<int> label{0, 1, 0, 1, 1};
  std::vector<int> group{0, 0, 1, 1, 1};
  EXPECT_THAT(
      ComputeGroupRates(prediction, label, group, 2),
      StatusIs(absl::StatusCode::kInvalidArgument, "prediction at row 3 must be 0 or 1 (got 2)"));
}

TEST(ComputeGroupRatesTest, NamesBadLabelRow) {
  std::vector<int> prediction{0, 1, 1};
  std::vector<int> label{0, -1, 0};
  std::vector<int> group{0, 0, 1};
  EXPECT_THAT(
      ComputeGroupRates(prediction, label, group, 2),
      StatusIs(absl::StatusCode::kInvalidArgument, "label at row 1 must be 0 or 1 (got -1)"));
}

TEST(ComputeGroupRatesTest, NamesGroupOutOfRange) {
  std::vector<int> prediction{0, 1, 1};
  std::vector<int> label{0, 1, 0};
  std::vector<int> group{0, 0, 2};
  EXPECT_THAT(
      ComputeGroupRates(prediction, label, group, 2),
      StatusIs(absl::StatusCode::kInvalidArgument, "group at row 2 must be in [0, 2) (got 2)"));
  group[2] = -1;
  EXPECT_THAT(ComputeGroupRates(prediction, label, group, 2),
              StatusIs(absl::StatusCode::kInvalidArgument, "group at row 2"));
}

TEST(ComputeGroupRatesTest, RejectsLengthMismatchAndNoGroups) {
  std::vector<int> three{0, 1, 0};
  std::vector<int> two{0, 1};
  EXPECT_THAT(ComputeGroupRates(three, two, three, 2),
              StatusIs(absl::StatusCode::kInvalidArgument, "same length (got 3, 2, 3)"));
  EXPECT_THAT(ComputeGroupRates(three, three, three, 0),
              StatusIs(absl::StatusCode::kInvalidArgument, "num_groups must be >= 1 (got 0)"));
}

TEST(ErrorRateTest, CountsDisagreements) {
  Table t;
  // Group 0 has 2 errors, group 1 has 2 errors: 4 of 10.
  EXPECT_DOUBLE_EQ(ErrorRate(t.prediction, t.label), 0.4);
  EXPECT_EQ(ErrorRate({}, {}), 0.0);
  std::vector<int> a{1, 1}, b{1};
  EXPECT_TRUE(std::isnan(ErrorRate(a, b)));
}

TEST(EqualizedOddsViolationTest, MaxOfTprAndFprGapsSkippingEmptyGroups) {
  Table t;
  auto rates = ComputeGroupRates(t.prediction, t.label, t.group, 3);
  ASSERT_OK(rates);
  // |TPR gap| = 2/3 - 1/2 = 1/6, |FPR gap| = 1/2 - 1/3 = 1/6; the empty group 2 (rates 0) must
  // not count, otherwise the gap would be 2/3.
  EXPECT_NEAR(EqualizedOddsViolation(*rates), 1.0 / 6.0, 1e-15);
  EXPECT_DOUBLE_EQ(DemographicParityViolation(*rates), 0.0);
}

TEST(EqualizedOddsViolationTest, GroupWithoutNegativesSkipsFprOnly) {
  std::vector<GroupRates> rates(3);
  rates[0].n = 10, rates[0].positives = 5, rates[0].negatives = 5;
  rates[0].tpr = 0.8, rates[0].fpr = 0.3;
  rates[1].n = 10, rates[1].positives = 5, rates[1].negatives = 5;
  rates[1].tpr = 0.7, rates[1].fpr = 0.2;
  // Only positives: its FPR (0.9, meaningless) must be ignored, its TPR (0.5) must count.
  rates[2].n = 4, rates[2].positives = 4, rates[2].negatives = 0;
  rates[2].tpr = 0.5, rates[2].fpr = 0.9;
  EXPECT_NEAR(EqualizedOddsViolation(rates), 0.3, 1e-15);  // TPR 0.8 vs 0.5
  rates[2].tpr = 0.75;
  EXPECT_NEAR(EqualizedOddsViolation(rates), 0.1, 1e-15);  // TPR 0.8-0.7 and FPR 0.3-0.2
}

TEST(DemographicParityViolationTest, MaxSelectionGapOverNonEmptyGroups) {
  std::vector<GroupRates> rates(4);
  rates[0].n = 5, rates[0].selection_rate = 0.2;
  rates[1].n = 5, rates[1].selection_rate = 0.6;
  rates[2].n = 0, rates[2].selection_rate = 0.0;  // empty: skipped
  rates[3].n = 5, rates[3].selection_rate = 0.45;
  EXPECT_NEAR(DemographicParityViolation(rates), 0.4, 1e-15);
  EXPECT_EQ(DemographicParityViolation(absl::Span<const GroupRates>(rates.data(), 1)), 0.0);
}

}  // namespace
}  // namespace fairvault::core::fairness
