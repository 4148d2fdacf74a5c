// Tests of applying a FairModel locally: hand-computed decisions, clipping before the
// intercept, mixtures, seeded draws, networks (logistic, softmax, a ReLU MLP), and the errors
// for bad models and rows.
// Over 500 lines as one file: the hand-computed models are shared by the decision, draw and error
// suites.
#include "client/apply/model_apply.h"

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "client/lib/csv.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fairvault::client {
namespace {

using ::fairvault::testing::StatusIs;
using ::testing::DoubleEq;
using ::testing::DoubleNear;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

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
  return p.ok() ? *p : ModelPrediction{-1, -2, {}};
}

// An exponentiated-gradient artifact: component_weights give p_positive as the weighted share
// and weighted draws (the DrawWeightedComponent rule, reproduced by the Python client).
TEST(FairModelApplierTest, WeightedMixtureUsesItsComponentWeights) {
  v1::FairModel model = Linear({"a"}, true, 0, {{0, 1}, {0, -1}, {0, 1}});  // 1, 0, 1
  for (double w : {0.2, 0.8, 0.0}) model.add_component_weights(w);
  absl::StatusOr<FairModelApplier> applier = FairModelApplier::Create(model);
  ASSERT_OK(applier);
  ModelRng gen(4);
  int ones = 0;
  constexpr int kRows = 20000;
  for (int i = 0; i < kRows; ++i) {
    const ModelPrediction p = MustPredict(*applier, {1}, &gen);
    EXPECT_DOUBLE_EQ(p.p_positive, 0.2);
    ones += p.decision;
  }
  // Binomial(20000, 0.2): within 5 standard deviations (283 rows).
  EXPECT_NEAR(ones, 0.2 * kRows, 5 * std::sqrt(0.16 * kRows));
  // u below the first running sum draws component 0; the last index when none is above u.
  ModelRng a(7), b(7);
  const double u = static_cast<double>(DrawComponent(uint64_t{1} << 53, a)) * 0x1p-53;
  const std::vector<double> cumulative = {0.2, 1.0, 1.0};
  EXPECT_EQ(DrawWeightedComponent(cumulative, b), u < 0.2 ? 0u : 1u);
  model.set_component_weights(0, 0.5);
  EXPECT_THAT(FairModelApplier::Create(model).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "sum to 1"));
  model.mutable_component_weights()->RemoveLast();
  EXPECT_THAT(FairModelApplier::Create(model).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "one per component"));
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
    absl::StatusOr<const ModelPrediction*> prediction = rows->Predict(fields, line, nullptr);
    ASSERT_OK(prediction);
    p.push_back((*prediction)->p_positive);
  }
  EXPECT_THAT(p, ElementsAre(0, 1));  // a=1,b=1: -0.5; a=3,b=1: 1.5
  ASSERT_OK((*reader)->Next(&fields, &line));
  EXPECT_THAT(rows->Predict(fields, line, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "rows.csv:4: column 'b': not a finite number ('oops')"));
}

// A network artifact over `features` (intercept appended, no clipping unless set after).
struct LayerSpec {
  int inputs;
  int outputs;
  std::vector<double> weights;
  std::vector<double> bias;
};
v1::FairModel Network(const std::vector<std::string>& features, bool intercept,
                      const std::vector<LayerSpec>& layers, const std::vector<int>& classes) {
  v1::FairModel model;
  model.set_algorithm("dp_fermi");
  for (const std::string& f : features) model.mutable_features()->add_feature_columns(f);
  model.mutable_features()->set_intercept(intercept);
  v1::NeuralModel* network = model.mutable_network();
  for (const LayerSpec& spec : layers) {
    v1::DenseLayer* layer = network->add_layers();
    layer->set_inputs(spec.inputs);
    layer->set_outputs(spec.outputs);
    for (double w : spec.weights) layer->add_weights(w);
    for (double b : spec.bias) layer->add_bias(b);
  }
  for (int c : classes) network->add_classes(c);
  return model;
}

// Probabilities here are computed by hand (Python's math.exp): within 1e-15.
constexpr double kTol = 1e-15;

TEST(NetworkApplierTest, LogisticNetworkIsTheSigmoidOfTheLogit) {
  // z = a - 2b + 0.5 (intercept last), no bias.
  absl::StatusOr<FairModelApplier> applier =
      FairModelApplier::Create(Network({"a", "b"}, true, {{3, 1, {1, -2, 0.5}, {}}}, {0, 1}));
  ASSERT_OK(applier);
  EXPECT_TRUE(applier->is_network());
  EXPECT_FALSE(applier->is_multiclass());
  EXPECT_EQ(applier->num_components(), 0u);
  EXPECT_THAT(applier->classes(), ElementsAre(0, 1));
  EXPECT_THAT(applier->layer_shapes(), ElementsAre(std::make_pair(3, 1)));
  EXPECT_THAT(applier->input_columns(), ElementsAre("a", "b"));
  // z = 1.5: 1/(1+e^-1.5).
  ModelPrediction p = MustPredict(*applier, {1, 0}, nullptr);
  EXPECT_THAT(p.p_positive, DoubleNear(0.8175744761936437, kTol));
  EXPECT_EQ(p.decision, 1);  // deterministic: set without a generator
  EXPECT_THAT(p.class_probabilities, IsEmpty());
  // z = -1.5.
  p = MustPredict(*applier, {0, 1}, nullptr);
  EXPECT_THAT(p.p_positive, DoubleNear(0.18242552380635635, kTol));
  EXPECT_EQ(p.decision, 0);
  // z = 0 exactly: p = 1/2 and the decision is 0 (1 iff z > 0).
  p = MustPredict(*applier, {0, 0.25}, nullptr);
  EXPECT_EQ(p.p_positive, 0.5);
  EXPECT_EQ(p.decision, 0);
  // A generator changes nothing and is not drawn from.
  ModelRng gen(3), untouched(3);
  p = MustPredict(*applier, {1, 0}, &gen);
  EXPECT_EQ(p.decision, 1);
  EXPECT_EQ(gen(), untouched());
  // Far tails: no overflow, no NaN.
  p = MustPredict(*applier, {1000, 0}, nullptr);
  EXPECT_EQ(p.p_positive, 1);
  EXPECT_EQ(p.decision, 1);
  p = MustPredict(*applier, {-1000, 0}, nullptr);
  EXPECT_GE(p.p_positive, 0);
  EXPECT_LT(p.p_positive, 1e-300);
  EXPECT_EQ(p.decision, 0);
}

TEST(NetworkApplierTest, NetworkPreprocessesLikeALinearModel) {
  // clip_l1 = 1, then the intercept: (3, -1) -> (0.75, -0.25, 1); z = 0.75 - 1 = -0.25. Left
  // unclipped z would be 2, with the intercept clipped too 0.4: both decide 1.
  v1::FairModel model = Network({"a", "b"}, true, {{3, 1, {1, 0, -1}, {}}}, {});
  model.mutable_features()->set_clip_l1(1);
  absl::StatusOr<FairModelApplier> applier = FairModelApplier::Create(model);
  ASSERT_OK(applier);
  EXPECT_THAT(applier->classes(), ElementsAre(0, 1));  // empty means [0, 1]
  absl::StatusOr<std::vector<double>> x = applier->Preprocess({3, -1});
  ASSERT_OK(x);
  EXPECT_THAT(*x, ElementsAre(DoubleEq(0.75), DoubleEq(-0.25), DoubleEq(1)));
  ModelPrediction p = MustPredict(*applier, {3, -1}, nullptr);
  EXPECT_THAT(p.p_positive, DoubleNear(0.43782349911420193, kTol));
  EXPECT_EQ(p.decision, 0);
}

TEST(NetworkApplierTest, SoftmaxNetworkGivesClassProbabilitiesAndTheLargestLogitsClass) {
  // z0 = a, z1 = b - 1 (bias), z2 = 1 (the intercept's weight).
  absl::StatusOr<FairModelApplier> applier = FairModelApplier::Create(
      Network({"a", "b"}, true, {{3, 3, {1, 0, 0, 0, 1, 0, 0, 0, 1}, {0, -1, 0}}}, {0, 1, 2}));
  ASSERT_OK(applier);
  EXPECT_TRUE(applier->is_multiclass());
  EXPECT_THAT(applier->classes(), ElementsAre(0, 1, 2));
  // z = (0, 2, 1): softmax (1, e², e) / (1 + e² + e).
  ModelPrediction p = MustPredict(*applier, {0, 3}, nullptr);
  EXPECT_THAT(p.class_probabilities, ElementsAre(DoubleNear(0.09003057317038046, kTol),
                                                 DoubleNear(0.6652409557748219, kTol),
                                                 DoubleNear(0.24472847105479764, kTol)));
  EXPECT_EQ(p.decision, 1);
  EXPECT_TRUE(std::isnan(p.p_positive));
  // z = (1, 0, 1): a tie between classes 0 and 2 goes to the first, 0.
  p = MustPredict(*applier, {1, 1}, nullptr);
  EXPECT_THAT(p.class_probabilities, ElementsAre(DoubleNear(0.4223187982515182, kTol),
                                                 DoubleNear(0.15536240349696362, kTol),
                                                 DoubleNear(0.4223187982515182, kTol)));
  EXPECT_EQ(p.decision, 0);
  // z = (1000, 999, 1): shifted by the largest logit, no overflow (naively e^1000 = inf).
  p = MustPredict(*applier, {1000, 1000}, nullptr);
  EXPECT_THAT(p.class_probabilities,
              ElementsAre(DoubleNear(0.7310585786300049, kTol),
                          DoubleNear(0.2689414213699951, kTol), DoubleNear(0, 1e-300)));
  EXPECT_EQ(p.decision, 0);
}

TEST(NetworkApplierTest, DecisionIsTheClassValueNotItsIndex) {
  // Logits (a, -a) stand for classes 5 and 3.
  absl::StatusOr<FairModelApplier> applier =
      FairModelApplier::Create(Network({"a"}, false, {{1, 2, {1, -1}, {}}}, {5, 3}));
  ASSERT_OK(applier);
  EXPECT_EQ(MustPredict(*applier, {1}, nullptr).decision, 5);
  EXPECT_EQ(MustPredict(*applier, {-1}, nullptr).decision, 3);
}

TEST(NetworkApplierTest, MlpAppliesReluBetweenLayersNotAfterTheLast) {
  // Hidden: h0 = relu(a - b + 0.5), h1 = relu(a + b - 1) (intercept weight -1, bias 0.5 and 0).
  // Output: z = 2·h0 - h1 - 1.
  absl::StatusOr<FairModelApplier> applier = FairModelApplier::Create(Network(
      {"a", "b"}, true, {{3, 2, {1, -1, 0, 1, 1, -1}, {0.5, 0}}, {2, 1, {2, -1}, {-1}}}, {0, 1}));
  ASSERT_OK(applier);
  EXPECT_THAT(applier->layer_shapes(), ElementsAre(std::make_pair(3, 2), std::make_pair(2, 1)));
  // a = 2, b = 0: h = (2.5, 1), z = 3.
  ModelPrediction p = MustPredict(*applier, {2, 0}, nullptr);
  EXPECT_THAT(p.p_positive, DoubleNear(0.9525741268224334, kTol));
  EXPECT_EQ(p.decision, 1);
  // a = 1, b = 3: h0's pre-activation -1.5 is clipped to 0, h = (0, 3), z = -4 (-7 without the
  // ReLU). The last layer's negative logit is kept, not clipped.
  p = MustPredict(*applier, {1, 3}, nullptr);
  EXPECT_THAT(p.p_positive, DoubleNear(0.01798620996209156, kTol));
  EXPECT_EQ(p.decision, 0);
  // a = b = 0: h1's pre-activation -1 is clipped, h = (0.5, 0), z = 0 exactly (1 without the
  // ReLU, a positive decision): p = 1/2, decision 0.
  p = MustPredict(*applier, {0, 0}, nullptr);
  EXPECT_EQ(p.p_positive, 0.5);
  EXPECT_EQ(p.decision, 0);
}

TEST(NetworkApplierTest, WorkspaceAndPredictionAreReusedAcrossRows) {
  absl::StatusOr<FairModelApplier> applier =
      FairModelApplier::Create(Network({"a", "b"}, true,
                                       {{3, 4, {1, 0, 0, 0, 1, 0, 1, 1, 0, 0, 0, 1}, {}},
                                        {4, 3, {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0}, {}}},
                                       {0, 1, 2}));
  ASSERT_OK(applier);
  ModelWorkspace workspace;
  ModelPrediction out;
  ModelRng gen(1);
  // The same rows with one workspace, alternating, give what fresh ones give.
  for (int i = 0; i < 6; ++i) {
    const std::vector<double> row =
        i % 2 == 0 ? std::vector<double>{3, 1} : std::vector<double>{-1, 2};
    ASSERT_OK(applier->Predict(row, &gen, workspace, out));
    const ModelPrediction fresh = MustPredict(*applier, row, nullptr);
    EXPECT_EQ(out.class_probabilities, fresh.class_probabilities) << "row " << i;
    EXPECT_EQ(out.decision, fresh.decision) << "row " << i;
  }
  // h = relu(a, b, a + b, 1) and z = (h0, h1, h2): (3, 1, 4) decides 2; (0, 2, 1) decides 1.
  ASSERT_OK(applier->Predict(std::vector<double>{3, 1}, nullptr, workspace, out));
  EXPECT_EQ(out.decision, 2);
  ASSERT_OK(applier->Predict(std::vector<double>{-1, 2}, nullptr, workspace, out));
  EXPECT_EQ(out.decision, 1);
}

TEST(NetworkApplierTest, RejectsBadNetworksNamingTheField) {
  auto create = [](const std::vector<LayerSpec>& layers, const std::vector<int>& classes) {
    return FairModelApplier::Create(Network({"a", "b"}, true, layers, classes));
  };
  const LayerSpec logistic = {3, 1, {1, 1, 1}, {}};
  v1::FairModel both = Network({"a", "b"}, true, {logistic}, {});
  both.add_components()->add_weights(1);
  EXPECT_THAT(FairModelApplier::Create(both),
              StatusIs(absl::StatusCode::kInvalidArgument, "exactly one of components"));
  EXPECT_THAT(create({}, {}),
              StatusIs(absl::StatusCode::kInvalidArgument, "network.layers is empty"));
  EXPECT_THAT(create({{2, 1, {1, 1}, {}}}, {}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "network.layers[0].inputs is 2; expected 3 (2 features + intercept)"));
  EXPECT_THAT(FairModelApplier::Create(Network({"a", "b"}, false, {logistic}, {})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "network.layers[0].inputs is 3; expected 2 (2 features, no intercept)"));
  EXPECT_THAT(create({{3, 2, {1, 1, 1, 1, 1, 1}, {}}, {3, 1, {1, 1, 1}, {}}}, {}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "network.layers[1].inputs is 3; expected 2 (layers[0].outputs)"));
  EXPECT_THAT(create({{3, 0, {}, {}}}, {}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "network.layers[0].outputs must be >= 1 (got 0)"));
  EXPECT_THAT(create({{3, 2, {1, 1, 1, 1, 1}, {}}}, {0, 1}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "network.layers[0].weights has 5 entries; expected outputs × inputs = "
                       "2 × 3 = 6"));
  EXPECT_THAT(create({{3, 2, {1, 1, 1, 1, 1, 1}, {1}}}, {0, 1}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "network.layers[0].bias has 1 entries; expected none or outputs = 2"));
  EXPECT_THAT(
      create({{3, 2, {1, 1, 1, 1, 1, 1}, {}}, {2, 1, {std::nan(""), 1}, {}}}, {}),
      StatusIs(absl::StatusCode::kInvalidArgument, "network.layers[1].weights[0] is not finite"));
  EXPECT_THAT(
      create({{3, 2, {1, 1, 1, 1, 1, 1}, {0, -HUGE_VAL}}}, {0, 1}),
      StatusIs(absl::StatusCode::kInvalidArgument, "network.layers[0].bias[1] is not finite"));
  EXPECT_THAT(create({logistic}, {1, 0}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "network.classes must be empty or [0, 1] for a network with one logit "
                       "(binary; got [1, 0])"));
  EXPECT_THAT(create({logistic}, {0, 1, 2}),
              StatusIs(absl::StatusCode::kInvalidArgument, "network.classes must be empty"));
  EXPECT_THAT(create({{3, 3, {1, 1, 1, 1, 1, 1, 1, 1, 1}, {}}}, {0, 1}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "network.classes has 2 entries; the last layer (network.layers[0]) has 3 "
                       "outputs"));
  EXPECT_THAT(create({{3, 3, {1, 1, 1, 1, 1, 1, 1, 1, 1}, {}}}, {}),
              StatusIs(absl::StatusCode::kInvalidArgument, "network.classes has 0 entries"));
  EXPECT_THAT(create({{3, 3, {1, 1, 1, 1, 1, 1, 1, 1, 1}, {}}}, {0, 1, 0}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "network.classes[2] repeats class 0 ([0, 1, 0])"));
  EXPECT_THAT(FairModelApplier::Create(Network({}, true, {{1, 1, {1}, {}}}, {})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "features.feature_columns is empty: a network needs its feature columns"));
  v1::FairModel negative_clip = Network({"a", "b"}, true, {logistic}, {});
  negative_clip.mutable_features()->set_clip_l1(-1);
  EXPECT_THAT(FairModelApplier::Create(negative_clip),
              StatusIs(absl::StatusCode::kInvalidArgument, "features.clip_l1 must be finite"));
}

TEST(NetworkApplierTest, RefusesARowWhoseActivationsOverflow) {
  absl::StatusOr<FairModelApplier> applier =
      FairModelApplier::Create(Network({"a"}, false, {{1, 1, {1e300}, {}}}, {}));
  ASSERT_OK(applier);
  EXPECT_THAT(applier->Predict(std::vector<double>{1e10}, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "the network overflowed on this row: layers[0] output 0 is inf"));
  EXPECT_OK(applier->Predict(std::vector<double>{1}, nullptr));
  const std::string csv = "id,a\nk0,1\nk1,1e10\n";
  absl::StatusOr<std::unique_ptr<CsvReader>> reader = CsvReader::FromString(csv, "rows.csv");
  ASSERT_OK(reader);
  absl::StatusOr<FairModelRowReader> rows =
      FairModelRowReader::Bind(*applier, (*reader)->header(), "rows.csv");
  ASSERT_OK(rows);
  std::vector<std::string> fields;
  int64_t line = 0;
  ASSERT_OK((*reader)->Next(&fields, &line));
  absl::StatusOr<const ModelPrediction*> p = rows->Predict(fields, line, nullptr);
  ASSERT_OK(p);
  EXPECT_EQ((*p)->decision, 1);
  ASSERT_OK((*reader)->Next(&fields, &line));
  EXPECT_THAT(rows->Predict(fields, line, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, "rows.csv:3: the network overflowed"));
}

TEST(FairModelRowReaderTest, ReadsANetworksColumnsAndReusesItsPrediction) {
  const std::string csv = "id,b,a\nk0,0,0\nk1,3,0\n";
  absl::StatusOr<std::unique_ptr<CsvReader>> reader = CsvReader::FromString(csv, "rows.csv");
  ASSERT_OK(reader);
  absl::StatusOr<FairModelApplier> applier = FairModelApplier::Create(
      Network({"a", "b"}, true, {{3, 3, {1, 0, 0, 0, 1, 0, 0, 0, 1}, {0, -1, 0}}}, {0, 1, 2}));
  ASSERT_OK(applier);
  absl::StatusOr<FairModelRowReader> rows =
      FairModelRowReader::Bind(*applier, (*reader)->header(), "rows.csv");
  ASSERT_OK(rows);
  std::vector<std::string> fields;
  int64_t line = 0;
  ASSERT_OK((*reader)->Next(&fields, &line));
  absl::StatusOr<const ModelPrediction*> first = rows->Predict(fields, line, nullptr);
  ASSERT_OK(first);
  EXPECT_EQ((*first)->decision, 2);  // z = (0, -1, 1)
  ASSERT_OK((*reader)->Next(&fields, &line));
  absl::StatusOr<const ModelPrediction*> second = rows->Predict(fields, line, nullptr);
  ASSERT_OK(second);
  EXPECT_EQ(*second, *first);         // the reader's one prediction, overwritten
  EXPECT_EQ((*second)->decision, 1);  // z = (0, 2, 1)
  EXPECT_THAT((*second)->class_probabilities[1], DoubleNear(0.6652409557748219, kTol));
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
