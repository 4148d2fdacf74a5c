// Tests of the CLI's artifact rendering for fair models: a network's shapes, classes, fairness
// notion and released marginals; linear mixtures keep their weight table.
#include "client/cli/cli_common.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fairvault::client::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

v1::Artifact NetworkArtifact() {
  v1::Artifact artifact;
  artifact.set_id("art_1");
  v1::FairModel* model = artifact.mutable_fair_model();
  model->set_algorithm("dp_fermi");
  model->add_attributes("sex");
  model->set_label_column("y");
  model->mutable_features()->add_feature_columns("age");
  model->mutable_features()->add_feature_columns("hours");
  model->mutable_features()->set_intercept(true);
  v1::DenseLayer* hidden = model->mutable_network()->add_layers();
  hidden->set_inputs(3);
  hidden->set_outputs(2);
  for (double w : {1.0, -4.0, 0.0, 1.0, 1.0, 1.0}) hidden->add_weights(w);
  hidden->add_bias(0);
  hidden->add_bias(1);
  v1::DenseLayer* last = model->mutable_network()->add_layers();
  last->set_inputs(2);
  last->set_outputs(3);
  for (int j = 0; j < 6; ++j) last->add_weights(0.5);
  for (int c = 0; c < 3; ++c) model->mutable_network()->add_classes(c);
  return artifact;
}

TEST(FormatArtifactTest, NetworkShowsShapesClassesFairnessAndMarginals) {
  v1::Artifact artifact = NetworkArtifact();
  v1::FairModel* model = artifact.mutable_fair_model();
  model->set_fairness(v1::FAIRNESS_NOTION_EQUALIZED_ODDS);
  // Label-major: 3 labels × 2 groups.
  for (double p : {0.25, 0.75, 0.5, 0.5, 0.125, 0.875}) model->add_released_marginals(p);
  const std::string out = FormatArtifact(artifact);
  EXPECT_THAT(out, HasSubstr("features: age, hours + intercept"));
  EXPECT_THAT(out, HasSubstr("network: 2 dense layer(s)"));
  EXPECT_THAT(
      out,
      HasSubstr("output: 3 logits, softmax over classes [0, 1, 2]; decision = the class of the "
                "largest logit"));
  // The layer table: index, inputs, outputs, weight count, bias, max |w|, what follows.
  EXPECT_THAT(out, ::testing::ContainsRegex("0 +3 +2 +6 +2 +4 +relu"));
  EXPECT_THAT(out, ::testing::ContainsRegex("1 +2 +3 +6 +none +0.5 +logits"));
  EXPECT_THAT(out, HasSubstr("fairness: equalized odds"));
  EXPECT_THAT(out, HasSubstr("released group marginals, per label (2 group(s) each):\n"
                             "  label 0: 0.25, 0.75\n"
                             "  label 1: 0.5, 0.5\n"
                             "  label 2: 0.125, 0.875\n"));
  EXPECT_THAT(out, Not(HasSubstr("linear classifier")));
}

TEST(FormatArtifactTest, OneLogitNetworkUnderDemographicParity) {
  v1::Artifact artifact = NetworkArtifact();
  v1::FairModel* model = artifact.mutable_fair_model();
  v1::DenseLayer* last = model->mutable_network()->mutable_layers(1);
  last->set_outputs(1);
  last->mutable_weights()->Truncate(2);
  model->mutable_network()->clear_classes();
  model->add_released_marginals(0.3);
  model->add_released_marginals(0.7);
  const std::string out = FormatArtifact(artifact);
  EXPECT_THAT(out, HasSubstr("output: 1 logit z, P(1) = sigmoid(z); decision 1 iff z > 0"));
  // Unset means demographic parity (the proto's default).
  EXPECT_THAT(out, HasSubstr("fairness: demographic parity"));
  EXPECT_THAT(out, HasSubstr("released group marginals: 0.3, 0.7\n"));
}

TEST(FormatArtifactTest, LinearMixtureKeepsItsWeightTableAndNoFairnessLine) {
  v1::Artifact artifact;
  v1::FairModel* model = artifact.mutable_fair_model();
  model->set_algorithm("dp_oracle_learner");
  model->mutable_features()->add_feature_columns("age");
  model->add_components()->add_weights(0.031);
  const std::string out = FormatArtifact(artifact);
  EXPECT_THAT(out, HasSubstr("1 linear classifier(s)"));
  EXPECT_THAT(out, HasSubstr("0.031"));
  EXPECT_THAT(out, Not(HasSubstr("fairness:")));
  EXPECT_THAT(out, Not(HasSubstr("network")));
}

}  // namespace
}  // namespace fairvault::client::cli
