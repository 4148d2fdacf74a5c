// Tests of the equalized-odds post-processor's policy for groups the noise cannot resolve: groups
// below the public min_group_count keep their predictions and leave the constraints, the
// reference moves, the decision floor is respected, and the warnings name groups by label.
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/postprocess/equalized_odds.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fairvault::core::postprocess {
namespace {

using ::fairvault::testing::StatusIs;
using ::testing::AllOf;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr double kInf = std::numeric_limits<double>::infinity();

// groups[a] = {positives, true positives, negatives, false positives}.
EoCounts Table(const std::vector<std::array<int64_t, 4>>& groups, int64_t* m) {
  EoCounts counts;
  counts.num_groups = static_cast<int>(groups.size());
  counts.n.assign(4 * groups.size(), 0);
  *m = 0;
  for (int a = 0; a < counts.num_groups; ++a) {
    const auto& [pos, tp, neg, fp] = groups[a];
    counts.at(1, a, 1) = tp;
    counts.at(0, a, 1) = pos - tp;
    counts.at(1, a, 0) = fp;
    counts.at(0, a, 0) = neg - fp;
    *m += pos + neg;
  }
  return counts;
}

// Two large groups with different rates, and a third of 30 subjects with 4 positives whose
// (noise-like) cells favour predicting 1 everywhere: unconstrained, the LP maps it to p = (1, 1).
const std::vector<std::array<int64_t, 4>> kTwoBigOneTiny = {
    {4000, 3400, 6000, 600}, {3000, 1800, 7000, 1400}, {4, 3, 26, 20}};

TEST(EoExclusionTest, DefaultThresholdIsEightLogOverEpsilon) {
  EXPECT_NEAR(DefaultMinGroupCount(3, 0.05, 1), 8 * std::log(240.0), 1e-12);
  EXPECT_NEAR(DefaultMinGroupCount(3, 0.05, 0.1), 80 * std::log(240.0), 1e-9);
  EXPECT_EQ(DefaultMinGroupCount(3, 0.05, kInf), 0.0);
}

TEST(EoExclusionTest, TinyGroupKeepsItsPredictionsAndTheOthersSolveTheirOwnLp) {
  EoOptions options;
  options.gamma = 0.02;
  options.epsilon = kInf;       // exact counts, so the K = 2 problem below is the same LP
  options.min_group_count = 5;  // the tiny group has 4 positives
  options.group_labels = {"Female|White", "Female|Black", "Male|Other"};
  const EoCounts counts = Table(kTwoBigOneTiny, &options.m);
  auto s = SolveEqualizedOddsLp(counts, options);
  ASSERT_OK(s);
  EXPECT_EQ(s->min_group_count, 5);
  EXPECT_EQ(s->reference_group, 0);
  const EoGroupResult& tiny = s->groups[2];
  EXPECT_TRUE(tiny.excluded);
  EXPECT_EQ(tiny.p0, 0.0);
  EXPECT_EQ(tiny.p1, 1.0);
  EXPECT_DOUBLE_EQ(tiny.derived_fpr, tiny.noisy_fpr);
  EXPECT_DOUBLE_EQ(tiny.derived_tpr, tiny.noisy_tpr);
  EXPECT_EQ(tiny.fpr_slack, 0.0);
  EXPECT_THAT(tiny.excluded_reason, AllOf(HasSubstr("label 1 is 4"), HasSubstr("= 5")));
  EXPECT_FALSE(s->groups[0].excluded);
  EXPECT_FALSE(s->groups[1].excluded);
  EXPECT_THAT(s->warnings, Contains(AllOf(HasSubstr("group 'Male|Other' is excluded"),
                                          HasSubstr("keeps its predictions"))));
  for (const std::string& w : s->warnings) {
    EXPECT_THAT(w, Not(HasSubstr("group 2"))) << "warnings name groups by label";
  }

  // The resolvable groups get exactly the LP of the table without the tiny group.
  EoOptions two = options;
  two.group_labels.clear();
  const EoCounts big = Table({kTwoBigOneTiny[0], kTwoBigOneTiny[1]}, &two.m);
  auto expected = SolveEqualizedOddsLp(big, two);
  ASSERT_OK(expected);
  for (int a = 0; a < 2; ++a) {
    EXPECT_NEAR(s->groups[a].p0, expected->groups[a].p0, 1e-9) << "group " << a;
    EXPECT_NEAR(s->groups[a].p1, expected->groups[a].p1, 1e-9) << "group " << a;
  }
  // The constraint binds here (the big groups' rates differ by 0.3): no "not binding" warning.
  EXPECT_THAT(s->warnings, Not(Contains(HasSubstr("not binding"))));

  // min_group_count = 0 switches the policy off: the tiny group (FPR 0.77 against 0.1) is
  // constrained like any other, and the LP moves it.
  options.min_group_count = 0;
  s = SolveEqualizedOddsLp(counts, options);
  ASSERT_OK(s);
  EXPECT_FALSE(s->groups[2].excluded);
  EXPECT_GT(s->groups[2].p0 + (1 - s->groups[2].p1), 1e-3) << "the LP moved the tiny group";
}

TEST(EoExclusionTest, UnderNoiseTheUnconstrainedTinyGroupIsRemappedOnlyWithoutThePolicy) {
  // ε = 1, K = 3, β = 0.05: the tiny group's 4 positives are far below 4 ln(240) ≈ 21.9, so its
  // slack exceeds 1 and its constraints cannot bind: the LP minimises its error alone, and its
  // ŷ = 1 cell (20 negatives, 3 positives) is mapped to 0 — every positive prediction flipped.
  EoOptions options;
  options.gamma = 0.02;
  options.epsilon = 1;
  options.group_labels = {"A", "B", "tiny"};
  const EoCounts counts = Table(kTwoBigOneTiny, &options.m);
  options.min_group_count = 0;
  auto paper = SolveEqualizedOddsLp(counts, options);
  ASSERT_OK(paper);
  EXPECT_EQ(paper->groups[2].p1, 0.0) << "the paper's LP flips the tiny group's positives";
  EXPECT_THAT(paper->warnings, Contains(AllOf(HasSubstr("group 'tiny'"),
                                              HasSubstr("too loose to bind"))));

  options.min_group_count.reset();
  auto s = SolveEqualizedOddsLp(counts, options);
  ASSERT_OK(s);
  EXPECT_NEAR(s->min_group_count, 8 * std::log(240.0), 1e-12);
  EXPECT_TRUE(s->groups[2].excluded);
  EXPECT_EQ(s->groups[2].p0, 0.0);
  EXPECT_EQ(s->groups[2].p1, 1.0);
  EXPECT_THAT(s->warnings, Not(Contains(HasSubstr("too loose to bind"))));
}

TEST(EoExclusionTest, ReferenceMovesToTheLargestResolvableGroup) {
  EoOptions options;
  options.gamma = 0.02;
  options.epsilon = 1;
  options.group_labels = {"tiny", "mid", "large"};
  const EoCounts counts =
      Table({{4, 3, 26, 20}, {3000, 1800, 7000, 1400}, {4000, 3400, 8000, 600}}, &options.m);
  auto s = SolveEqualizedOddsLp(counts, options);
  ASSERT_OK(s);
  EXPECT_TRUE(s->groups[0].excluded);
  EXPECT_EQ(s->reference_group, 2);  // 12,000 noisy subjects against 10,000
  EXPECT_EQ(s->groups[2].fpr_slack, 0.0);
  EXPECT_GT(s->groups[1].fpr_slack, 0.0);
  EXPECT_THAT(s->warnings, Contains(AllOf(HasSubstr("group 'tiny', the default reference"),
                                          HasSubstr("the reference is group 'large'"))));
  // The two resolvable groups are equalized up to gamma + slack.
  EXPECT_LE(std::abs(s->groups[1].derived_fpr - s->groups[2].derived_fpr),
            0.02 + s->groups[1].fpr_slack + 1e-9);
  EXPECT_LE(std::abs(s->groups[1].derived_tpr - s->groups[2].derived_tpr),
            0.02 + s->groups[1].tpr_slack + 1e-9);

  // All pairs: no reference at all.
  options.all_pairs = true;
  s = SolveEqualizedOddsLp(counts, options);
  ASSERT_OK(s);
  EXPECT_EQ(s->reference_group, -1);
  EXPECT_TRUE(s->groups[0].excluded);
  EXPECT_EQ(s->groups[0].p0, 0.0);
  EXPECT_EQ(s->groups[0].p1, 1.0);
}

TEST(EoExclusionTest, DecisionFloorKeepsExcludedGroupsInsideTheBox) {
  // With a floor F the closest mapping to the identity that the floor allows is p0 = F,
  // p1 = 1 − F: the group keeps each prediction with probability 1 − F, and every probability
  // stays in [F, 1 − F], so Decide's log-ratio bound log((1 − F)/F) still holds.
  EoOptions options;
  options.gamma = 0.02;
  options.epsilon = 1;
  options.decision_floor = 0.1;
  const EoCounts counts = Table(kTwoBigOneTiny, &options.m);
  auto s = SolveEqualizedOddsLp(counts, options);
  ASSERT_OK(s);
  ASSERT_TRUE(s->groups[2].excluded);
  EXPECT_DOUBLE_EQ(s->groups[2].p0, 0.1);
  EXPECT_DOUBLE_EQ(s->groups[2].p1, 0.9);
  for (const EoGroupResult& g : s->groups) {
    EXPECT_GE(g.p0, 0.1 - 1e-12);
    EXPECT_LE(g.p0, 0.9 + 1e-12);
    EXPECT_GE(g.p1, 0.1 - 1e-12);
    EXPECT_LE(g.p1, 0.9 + 1e-12);
  }
  EXPECT_THAT(s->warnings, Contains(HasSubstr("keeps each prediction with probability 0.9")));
}

TEST(EoExclusionTest, FewerThanTwoResolvableGroupsLeavesEveryGroupUnchanged) {
  EoOptions options;
  options.gamma = 0;
  options.epsilon = 0.1;  // threshold 80 ln(240) ≈ 438 subjects
  options.group_labels = {"big", "small"};
  // "big" has 1000 per label; "small" 150 positives. In "big" the ŷ = 1 cell holds more
  // negatives than positives, which an unconstrained LP would flip; here nothing is touched.
  const EoCounts counts = Table({{1000, 400, 1000, 500}, {150, 100, 900, 100}}, &options.m);
  auto s = SolveEqualizedOddsLp(counts, options);
  ASSERT_OK(s);
  EXPECT_FALSE(s->groups[0].excluded);
  EXPECT_TRUE(s->groups[1].excluded);
  EXPECT_EQ(s->reference_group, 0);
  for (const EoGroupResult& g : s->groups) {
    EXPECT_EQ(g.p0, 0.0);
    EXPECT_EQ(g.p1, 1.0);
  }
  EXPECT_THAT(s->warnings, Contains(HasSubstr("only one group is resolvable")));
  // Nothing is constrained, so the gamma = 0 caveat does not apply.
  EXPECT_THAT(s->warnings, Not(Contains(HasSubstr("gamma = 0"))));

  options.min_group_count = 1e9;
  s = SolveEqualizedOddsLp(counts, options);
  ASSERT_OK(s);
  EXPECT_EQ(s->reference_group, -1);
  EXPECT_THAT(s->warnings, Contains(HasSubstr("no group is resolvable")));
}

TEST(EoExclusionTest, SaysPlainlyWhenTheSlackLeavesTheIdentity) {
  // Slack 1 (gamma = 1): nothing binds; both groups predict better than chance in every cell,
  // so the LP's answer is the identity.
  EoOptions options;
  options.gamma = 1;
  options.epsilon = 1;
  const EoCounts counts = Table({{4000, 3400, 6000, 600}, {3000, 1800, 7000, 1400}}, &options.m);
  auto s = SolveEqualizedOddsLp(counts, options);
  ASSERT_OK(s);
  for (const EoGroupResult& g : s->groups) {
    EXPECT_EQ(g.p0, 0.0);
    EXPECT_EQ(g.p1, 1.0);
  }
  EXPECT_THAT(s->warnings, Contains(AllOf(HasSubstr("not binding at this slack"),
                                          HasSubstr("the artifact is the identity"))));

  // Not binding but not the identity: group 1's ŷ = 1 cell holds more negatives than positives.
  const EoCounts flips = Table({{4000, 3400, 6000, 600}, {3000, 1000, 7000, 1400}}, &options.m);
  s = SolveEqualizedOddsLp(flips, options);
  ASSERT_OK(s);
  EXPECT_EQ(s->groups[1].p1, 0.0);
  EXPECT_THAT(s->warnings, Contains(AllOf(HasSubstr("not binding"),
                                          HasSubstr("did not move any group's rates"))));
  EXPECT_THAT(s->warnings, Not(Contains(HasSubstr("the artifact is the identity"))));

  // Tight: binding, no such warning.
  options.gamma = 0.01;
  options.epsilon = kInf;
  s = SolveEqualizedOddsLp(counts, options);
  ASSERT_OK(s);
  EXPECT_THAT(s->warnings, Not(Contains(HasSubstr("not binding"))));
}

TEST(EoExclusionTest, GammaZeroWarningStatesTheBoundThatHolds) {
  EoOptions options;
  options.gamma = 0;
  options.epsilon = 1;
  options.group_labels = {"A", "B", "tiny"};
  const EoCounts counts = Table(kTwoBigOneTiny, &options.m);
  auto s = SolveEqualizedOddsLp(counts, options);
  ASSERT_OK(s);
  EXPECT_THAT(s->warnings,
              Contains(AllOf(HasSubstr("does not give exact equalized odds"),
                             HasSubstr("fpr_slack / tpr_slack"), HasSubstr("twice"),
                             HasSubstr("1 - beta"), HasSubstr("excluded groups are not"))));
}

TEST(EoExclusionTest, RejectsBadThresholdAndLabels) {
  EoOptions options;
  options.m = 10;
  for (double bad : {-1.0, kInf, std::numeric_limits<double>::quiet_NaN()}) {
    options.min_group_count = bad;
    EXPECT_THAT(options.Validate(),
                StatusIs(absl::StatusCode::kInvalidArgument, "min_group_count"));
  }
  options.min_group_count = 0;
  EXPECT_OK(options.Validate());
  options.group_labels = {"only one"};
  int64_t m = 0;
  const EoCounts counts = Table({{5, 3, 5, 1}, {5, 3, 5, 1}}, &m);
  options.m = m;
  EXPECT_THAT(SolveEqualizedOddsLp(counts, options),
              StatusIs(absl::StatusCode::kInvalidArgument, "group_labels"));
}

}  // namespace
}  // namespace fairvault::core::postprocess
