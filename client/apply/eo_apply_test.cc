// Tests of local equalized-odds application: exact behaviour at p ∈ {0,1}, frequencies at
// interior p, and validation.
#include "client/apply/eo_apply.h"

#include <cmath>
#include <random>

#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fairvault::client {
namespace {

using ::fairvault::testing::StatusIs;
using ::testing::ElementsAre;

v1::EqualizedOddsPostProcessor Processor(
    std::vector<std::tuple<std::string, double, double>> groups) {
  v1::EqualizedOddsPostProcessor p;
  for (const auto& [name, given_0, given_1] : groups) {
    v1::EqualizedOddsGroup* g = p.add_groups();
    g->set_group(name);
    g->set_p_flip_to_1_given_0(given_0);
    g->set_p_keep_1_given_1(given_1);
  }
  return p;
}

TEST(ApplyEqualizedOddsTest, ProbabilitiesZeroAndOneAreDeterministic) {
  // "keep" leaves predictions alone; "flip" inverts them; "zero"/"one" force a constant.
  const v1::EqualizedOddsPostProcessor p =
      Processor({{"keep", 0.0, 1.0}, {"flip", 1.0, 0.0}, {"zero", 0.0, 0.0}, {"one", 1.0, 1.0}});
  std::mt19937_64 gen(1);
  const std::vector<int> predictions = {0, 1, 0, 1, 0, 1, 0, 1};
  const std::vector<std::string> groups = {"keep", "keep", "flip", "flip",
                                           "zero", "zero", "one",  "one"};
  for (int repeat = 0; repeat < 100; ++repeat) {
    absl::StatusOr<std::vector<int>> out = ApplyEqualizedOdds(p, predictions, groups, gen);
    ASSERT_OK(out);
    EXPECT_THAT(*out, ElementsAre(0, 1, 1, 0, 0, 0, 1, 1));
  }
}

// Each frequency is checked at 5 standard errors: a correct implementation fails one check
// with probability about 5.7e-7 (and never with this fixed seed).
TEST(ApplyEqualizedOddsTest, FrequenciesMatchProbabilitiesWithinFiveStandardErrors) {
  const double kGiven0 = 0.3, kGiven1 = 0.8, kOtherGiven0 = 0.05, kOtherGiven1 = 0.55;
  const v1::EqualizedOddsPostProcessor p =
      Processor({{"Female", kGiven0, kGiven1}, {"Male", kOtherGiven0, kOtherGiven1}});
  absl::StatusOr<EqualizedOddsApplier> applier = EqualizedOddsApplier::Create(p);
  ASSERT_OK(applier);
  std::mt19937_64 gen(20190519);
  const int kTrials = 200000;
  struct Case {
    int prediction;
    std::string group;
    double p;
  };
  for (const Case& c : {Case{0, "Female", kGiven0}, Case{1, "Female", kGiven1},
                        Case{0, "Male", kOtherGiven0}, Case{1, "Male", kOtherGiven1}}) {
    int ones = 0;
    for (int i = 0; i < kTrials; ++i) {
      absl::StatusOr<int> d = applier->Decide(c.prediction, c.group, gen);
      ASSERT_OK(d);
      ones += *d;
    }
    const double frequency = static_cast<double>(ones) / kTrials;
    const double standard_error = std::sqrt(c.p * (1 - c.p) / kTrials);
    EXPECT_NEAR(frequency, c.p, 5 * standard_error)
        << "prediction " << c.prediction << " group " << c.group;
  }
}

TEST(ApplyEqualizedOddsTest, UnknownGroupNamesTheRowAndTheKnownGroups) {
  const v1::EqualizedOddsPostProcessor p = Processor({{"Female", 0, 1}, {"Male", 0, 1}});
  std::mt19937_64 gen(1);
  EXPECT_THAT(ApplyEqualizedOdds(p, {1, 0, 1}, {"Male", "Female", "Other"}, gen),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "row 2: unknown group 'Other' (the artifact's groups: Female, Male)"));
}

TEST(ApplyEqualizedOddsTest, RejectsNonBinaryPredictionAndLengthMismatch) {
  const v1::EqualizedOddsPostProcessor p = Processor({{"a", 0, 1}, {"b", 0, 1}});
  std::mt19937_64 gen(1);
  EXPECT_THAT(ApplyEqualizedOdds(p, {0, 2}, {"a", "b"}, gen),
              StatusIs(absl::StatusCode::kInvalidArgument, "row 1: prediction must be 0 or 1"));
  EXPECT_THAT(ApplyEqualizedOdds(p, {0, 1}, {"a"}, gen),
              StatusIs(absl::StatusCode::kInvalidArgument, "2 predictions but 1 group"));
}

TEST(EqualizedOddsApplierTest, RejectsInvalidArtifacts) {
  EXPECT_THAT(EqualizedOddsApplier::Create(Processor({})),
              StatusIs(absl::StatusCode::kInvalidArgument, "no groups"));
  EXPECT_THAT(EqualizedOddsApplier::Create(Processor({{"a", 0, 1.5}})),
              StatusIs(absl::StatusCode::kInvalidArgument, "p_keep_1_given_1 must be in [0, 1]"));
  EXPECT_THAT(EqualizedOddsApplier::Create(Processor({{"a", std::nan(""), 1}})),
              StatusIs(absl::StatusCode::kInvalidArgument, "p_flip_to_1_given_0"));
  EXPECT_THAT(EqualizedOddsApplier::Create(Processor({{"a", 0, 1}, {"a", 0, 1}})),
              StatusIs(absl::StatusCode::kInvalidArgument, "group 'a' twice"));
}

}  // namespace
}  // namespace fairvault::client
