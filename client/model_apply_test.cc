// Tests of applying a FairModel locally: hand-computed decisions, clipping before the
// intercept, mixtures, seeded draws, and the errors for bad models and rows.
#include "client/model_apply.h"

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "client/csv.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fairvault::client {
namespace {

using ::fairvault::testing::StatusIs;
using ::testing::DoubleEq;
using ::testing::ElementsAre;

v1::FairModel Linear(const std::vector<std::string>& features, bool intercept, double clip_l1,
                     const std::vector<std::vector<double>>& components) {
  v1::FairModel model;
  model.set_algorithm("best_response_least_squares");
  for (const std::string& f : features) model.mutable_features()->add_feature_columns(f);
  model.mutable_features()->set_intercept(intercept);
  model.mutable_features()->set_clip_l1(clip_l1);
  for (const std::vector<double>& w : components) {
    v1::LinearClassifier* c = model.add_components();
    for (double v : w) c->add_weights(v);
  }
  return model;
}

ModelPrediction MustPredict(const FairModelApplier& applier, std::vector<double> inputs,
                            ModelRng* gen) {
  absl::StatusOr<ModelPrediction> p = applier.Predict(inputs, gen);
  EXPECT_OK(p);
  return p.ok() ? *p : ModelPrediction{-1, -2};
}

TEST(FairModelApplierTest, OneClassifierDecidesByTheSignOfTheScore) {
  // score = a - 2b + 0.5 (intercept last).
  absl::StatusOr<FairModelApplier> applier =
      FairModelApplier::Create(Linear({"a", "b"}, true, 0, {{1, -2, 0.5}}));
  ASSERT_OK(applier);
  EXPECT_THAT(applier->input_columns(), ElementsAre("a", "b"));
  ModelRng gen(1);
  ModelPrediction p = MustPredict(*applier, {1, 1}, &gen);  // -0.5
  EXPECT_EQ(p.p_positive, 0);
  EXPECT_EQ(p.decision, 0);
  p = MustPredict(*applier, {3, 1}, &gen);  // 1.5
  EXPECT_EQ(p.p_positive, 1);
  EXPECT_EQ(p.decision, 1);
  // Exactly 0 is a negative decision (1 iff the score is > 0).
  p = MustPredict(*applier, {0, 0.25}, &gen);
  EXPECT_EQ(p.p_positive, 0);
  EXPECT_EQ(p.decision, 0);
  // Probabilities only: no decision.
  EXPECT_EQ(MustPredict(*applier, {3, 1}, nullptr).decision, -1);
}

TEST(FairModelApplierTest, WithoutInterceptTheWeightsAreTheFeaturesOnly) {
  absl::StatusOr<FairModelApplier> applier =
      FairModelApplier::Create(Linear({"a", "b"}, false, 0, {{1, -1}}));
  ASSERT_OK(applier);
  EXPECT_EQ(MustPredict(*applier, {2, 1}, nullptr).p_positive, 1);
  EXPECT_EQ(MustPredict(*applier, {1, 2}, nullptr).p_positive, 0);
  absl::StatusOr<std::vector<double>> x = applier->Preprocess({2, 1});
  ASSERT_OK(x);
  EXPECT_THAT(*x, ElementsAre(2, 1));
}

TEST(FairModelApplierTest, ClipsTheFeaturesToTheL1BoundBeforeAppendingTheIntercept) {
  absl::StatusOr<FairModelApplier> applier =
      FairModelApplier::Create(Linear({"a", "b"}, true, 1, {{1, 0, -1}}));
  ASSERT_OK(applier);
  // ‖(3, -1)‖₁ = 4 > 1: scaled by 1/4; the constant 1 is appended after, unscaled.
  absl::StatusOr<std::vector<double>> x = applier->Preprocess({3, -1});
  ASSERT_OK(x);
  EXPECT_THAT(*x, ElementsAre(DoubleEq(0.75), DoubleEq(-0.25), DoubleEq(1)));
  // Score 0.75 - 1 < 0. Unclipped it would be 3 - 1 = 2 > 0, and clipping the intercept too
  // would give 0.6 - 0.2 = 0.4 > 0: only the documented order decides 0.
  EXPECT_EQ(MustPredict(*applier, {3, -1}, nullptr).p_positive, 0);
  // Within the bound: unchanged.
  x = applier->Preprocess({0.5, -0.25});
  ASSERT_OK(x);
  EXPECT_THAT(*x, ElementsAre(0.5, -0.25, 1));
  // On the bound exactly: unchanged too (clipped only when ‖x‖₁ > clip_l1).
  x = applier->Preprocess({0.5, 0.5});
  ASSERT_OK(x);
  EXPECT_THAT(*x, ElementsAre(0.5, 0.5, 1));
}

TEST(FairModelApplierTest, MixtureProbabilityIsTheFractionOfComponentsDecidingOne) {
  // a > 0, a > 2, a < 0.
  absl::StatusOr<FairModelApplier> applier =
      FairModelApplier::Create(Linear({"a"}, true, 0, {{1, 0}, {1, -2}, {-1, 0}}));
  ASSERT_OK(applier);
  EXPECT_EQ(applier->num_components(), 3u);
  EXPECT_EQ(MustPredict(*applier, {1}, nullptr).p_positive, 1.0 / 3);
  EXPECT_EQ(MustPredict(*applier, {3}, nullptr).p_positive, 2.0 / 3);
  EXPECT_EQ(MustPredict(*applier, {-1}, nullptr).p_positive, 1.0 / 3);
  EXPECT_EQ(MustPredict(*applier, {0}, nullptr).p_positive, 0);
}

TEST(FairModelApplierTest, MixtureDecisionIsTheDrawnComponents) {
  absl::StatusOr<FairModelApplier> applier =
      FairModelApplier::Create(Linear({"a"}, true, 0, {{1, 0}, {1, -2}, {-1, 0}}));
  ASSERT_OK(applier);
  // At a = 3 the components decide (1, 1, 0): the decision is 1 unless component 2 is drawn.
  ModelRng gen(42), replay(42);
  for (int i = 0; i < 50; ++i) {
    const uint64_t drawn = DrawComponent(3, replay);
    EXPECT_EQ(MustPredict(*applier, {3}, &gen).decision, drawn == 2 ? 0 : 1) << "row " << i;
  }
  // All components agree at a = 0 (all 0): the draw cannot change the decision.
  for (int i = 0; i < 10; ++i) EXPECT_EQ(MustPredict(*applier, {0}, &gen).decision, 0);
}

TEST(FairModelApplierTest, SameSeedSameDecisionsOtherSeedOthers) {
  absl::StatusOr<FairModelApplier> applier =
      FairModelApplier::Create(Linear({"a"}, true, 0, {{1, 0}, {1, -2}, {-1, 0}, {1, -4}}));
  ASSERT_OK(applier);
  auto run = [&](uint64_t seed) {
    ModelRng gen(seed);
    std::vector<int> decisions;
    for (int i = 0; i < 200; ++i) decisions.push_back(MustPredict(*applier, {3}, &gen).decision);
    return decisions;
  };
  const std::vector<int> first = run(7);
  EXPECT_EQ(run(7), first);
  // p = 1/2 at a = 3: two seeds agree on all 200 rows with probability 2^-200.
  EXPECT_NE(run(8), first);
  int ones = 0;
  for (int d : first) ones += d;
  // Binomial(200, 1/2): outside [60, 140] with probability < 1e-8.
  EXPECT_GT(ones, 60);
  EXPECT_LT(ones, 140);
}

TEST(DrawComponentTest, IsTheFirstOutputModuloMWhenNotRejected) {
  ModelRng gen(123), copy(123);
  const uint64_t r = copy();
  EXPECT_EQ(DrawComponent(5, gen), r % 5);
  ModelRng one(9);
  EXPECT_EQ(DrawComponent(1, one), 0u);
}

TEST(DrawComponentTest, MatchesAnIndependentMt19937_64) {
  // The first outputs of std::mt19937_64 seeded with 5, modulo 3, as computed by a separate
  // Python implementation of MT19937-64 (docs/api.md gives the rule for other languages).
  ModelRng gen(5);
  std::vector<uint64_t> drawn;
  for (int i = 0; i < 4; ++i) drawn.push_back(DrawComponent(3, gen));
  EXPECT_THAT(drawn, ElementsAre(1u, 1u, 2u, 1u));
}

TEST(FairModelApplierTest, HypothesisColumnModelReturnsTheColumnsValue) {
  v1::FairModel model;
  model.set_algorithm("exponential_mechanism");
  model.set_hypothesis_column("h2");
  model.set_hypothesis_index(1);
  absl::StatusOr<FairModelApplier> applier = FairModelApplier::Create(model);
  ASSERT_OK(applier);
  EXPECT_TRUE(applier->is_hypothesis());
  EXPECT_THAT(applier->input_columns(), ElementsAre("h2"));
  ModelRng gen(1);
  ModelPrediction p = MustPredict(*applier, {1}, &gen);
  EXPECT_EQ(p.p_positive, 1);
  EXPECT_EQ(p.decision, 1);
  p = MustPredict(*applier, {0}, &gen);
  EXPECT_EQ(p.p_positive, 0);
  EXPECT_EQ(p.decision, 0);
  EXPECT_THAT(applier->Predict(std::vector<double>{0.5}, &gen),
              StatusIs(absl::StatusCode::kInvalidArgument, "'h2' must be 0 or 1 (got 0.5)"));
}

TEST(FairModelApplierTest, RejectsBadModelsSayingWhy) {
  v1::FairModel neither;
  EXPECT_THAT(FairModelApplier::Create(neither),
              StatusIs(absl::StatusCode::kInvalidArgument, "exactly one of components"));
  v1::FairModel both = Linear({"a"}, false, 0, {{1}});
  both.set_hypothesis_column("h");
  EXPECT_THAT(FairModelApplier::Create(both),
              StatusIs(absl::StatusCode::kInvalidArgument, "exactly one of components"));
  EXPECT_THAT(FairModelApplier::Create(Linear({"a", "b"}, true, 0, {{1, 2, 3}, {1, 2}})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "components[1] has 2 weights; expected 3 (2 features + intercept)"));
  EXPECT_THAT(
      FairModelApplier::Create(Linear({"a"}, false, 0, {{1, 2}})),
      StatusIs(absl::StatusCode::kInvalidArgument, "expected 1 (1 features, no intercept)"));
  EXPECT_THAT(
      FairModelApplier::Create(Linear({"a"}, true, 0, {{1, std::nan("")}})),
      StatusIs(absl::StatusCode::kInvalidArgument, "components[0].weights[1] is not finite"));
  EXPECT_THAT(FairModelApplier::Create(Linear({"a"}, false, 0, {{HUGE_VAL}})),
              StatusIs(absl::StatusCode::kInvalidArgument, "not finite"));
  EXPECT_THAT(FairModelApplier::Create(Linear({"a"}, false, -1, {{1}})),
              StatusIs(absl::StatusCode::kInvalidArgument, "clip_l1 must be finite and >= 0"));
  EXPECT_THAT(FairModelApplier::Create(Linear({}, true, 0, {{1}})),
              StatusIs(absl::StatusCode::kInvalidArgument, "feature_columns is empty"));
  EXPECT_THAT(FairModelApplier::Create(Linear({"a", ""}, false, 0, {{1, 1}})),
              StatusIs(absl::StatusCode::kInvalidArgument, "feature_columns[1] is an empty"));
}

TEST(FairModelApplierTest, RejectsWrongInputCountAndNonFiniteValues) {
  absl::StatusOr<FairModelApplier> applier =
      FairModelApplier::Create(Linear({"a", "b"}, true, 0, {{1, 1, 1}}));
  ASSERT_OK(applier);
  EXPECT_THAT(applier->Predict(std::vector<double>{1}, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, "expected 2 feature values, got 1"));
  EXPECT_THAT(applier->Predict(std::vector<double>{1, HUGE_VAL}, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, "feature 'b' is not finite"));
}

TEST(FairModelRowReaderTest, ReadsTheModelsColumnsFromCsvRows) {
  const std::string csv = "id,b,x,a\nk0,1,zz,1\nk1,1,zz,3\nk2,oops,zz,3\n";
  absl::StatusOr<std::unique_ptr<CsvReader>> reader = CsvReader::FromString(csv, "rows.csv");
  ASSERT_OK(reader);
  absl::StatusOr<FairModelApplier> applier =
      FairModelApplier::Create(Linear({"a", "b"}, true, 0, {{1, -2, 0.5}}));
  ASSERT_OK(applier);
  absl::StatusOr<FairModelRowReader> rows =
      FairModelRowReader::Bind(*applier, (*reader)->header(), "rows.csv");
  ASSERT_OK(rows);
  std::vector<std::string> fields;
  int64_t line = 0;
  std::vector<double> p;
  for (int i = 0; i < 2; ++i) {
    ASSERT_OK((*reader)->Next(&fields, &line));
    absl::StatusOr<ModelPrediction> prediction = rows->Predict(fields, line, nullptr);
    ASSERT_OK(prediction);
    p.push_back(prediction->p_positive);
  }
  EXPECT_THAT(p, ElementsAre(0, 1));  // a=1,b=1: -0.5; a=3,b=1: 1.5
  ASSERT_OK((*reader)->Next(&fields, &line));
  EXPECT_THAT(rows->Predict(fields, line, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "rows.csv:4: column 'b': not a finite number ('oops')"));
}

TEST(FairModelRowReaderTest, MissingColumnIsNamed) {
  absl::StatusOr<FairModelApplier> applier =
      FairModelApplier::Create(Linear({"a", "income"}, false, 0, {{1, 1}}));
  ASSERT_OK(applier);
  EXPECT_THAT(
      FairModelRowReader::Bind(*applier, {"id", "a"}, "rows.csv"),
      StatusIs(absl::StatusCode::kInvalidArgument, "rows.csv: the model needs column 'income'"));
}

}  // namespace
}  // namespace fairvault::client
