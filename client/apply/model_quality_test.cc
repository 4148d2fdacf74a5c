#include "client/apply/model_quality.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fairvault::client {
namespace {

using ::testing::HasSubstr;

DecisionTally Tally(int ones, int zeros) {
  DecisionTally t;
  for (int i = 0; i < ones; ++i) t.Add(1);
  for (int i = 0; i < zeros; ++i) t.Add(0);
  return t;
}

TEST(TrivialModelWarningTest, OneClassForAtLeastNinetyNinePercentIsTrivial) {
  EXPECT_THAT(TrivialModelWarning(Tally(0, 100)), HasSubstr("decides 0 for 100.0%"));
  EXPECT_THAT(TrivialModelWarning(Tally(99, 1)), HasSubstr("decides 1 for 99.0%"));
  // 98 of 100: not (nearly) constant.
  EXPECT_EQ(TrivialModelWarning(Tally(98, 2)), "");
  EXPECT_EQ(TrivialModelWarning(DecisionTally()), "");
}

TEST(TrivialModelWarningTest, WorseThanTheConstantClassifierOnTheLabels) {
  // Labels: 70 zeros, 30 ones. The constant classifier deciding 0 errs on 30.
  DecisionTally worse, better;
  for (int i = 0; i < 100; ++i) {
    const int label = i < 70 ? 0 : 1;
    worse.Add(i % 2, label);                    // errs on 50
    better.Add(i < 60 || i >= 80 ? label : 1 - label, label);  // errs on 20
  }
  EXPECT_EQ(worse.errors(), 50);
  EXPECT_EQ(worse.constant_errors(), 30);
  EXPECT_THAT(TrivialModelWarning(worse),
              HasSubstr("errs on 50.0% of these rows, more than the constant classifier "
                        "deciding 0 (30.0%)"));
  EXPECT_EQ(better.errors(), 20);
  EXPECT_EQ(TrivialModelWarning(better), "");
  EXPECT_EQ(DescribeErrors(better),
            "error on these rows: 20.0% (the constant classifier deciding 0: 30.0%)\n");
  EXPECT_EQ(DescribeErrors(Tally(5, 5)), "");  // no labels
}

}  // namespace
}  // namespace fairvault::client
