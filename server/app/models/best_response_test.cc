// Tests of BestResponse through the vault's one charge path: a linear model artifact, charged
// once, replayed byte for byte, the game reused only where its public inputs match, and bad
// input (features out of scale among it) refused before any charge.
#include "server/app/models/models_test_fixture.h"

namespace fairvault::server::testing {
namespace {

using ::testing::HasSubstr;

TEST_F(VaultModelsTest, BestResponseReturnsALinearModelChargedOnce) {
  const auto req = BestResponseRequest("br-1");
  auto first = vault_->BestResponse(acme_, req);
  ASSERT_OK(first);
  const v1::FairModel& model = first->artifact().fair_model();
  EXPECT_EQ(model.algorithm(), "best_response_least_squares");
  ASSERT_EQ(model.components_size(), 1);
  EXPECT_EQ(model.components(0).weights_size(), 3);  // f1, f2, intercept
  EXPECT_EQ(model.features().clip_l1(), 2);
  EXPECT_TRUE(model.features().intercept());
  EXPECT_EQ(first->rows_used(), 30);
  EXPECT_GT(first->sensitivity(), 0);
  EXPECT_LE(first->max_row_l1(), 2 + 1 + 1e-12);  // clipped features plus the intercept
  EXPECT_EQ(first->charge().cost().epsilon(), 1);
  EXPECT_EQ(first->charge().cost().mechanism(), "discrete_laplace");
  // Replay: the same bytes, no new ledger row.
  auto again = vault_->BestResponse(acme_, req);
  ASSERT_OK(again);
  EXPECT_EQ(again->SerializeAsString(), first->SerializeAsString());
  v1::GetArtifactRequest get;
  get.set_artifact_id(first->artifact().id());
  auto stored = vault_->GetArtifact(acme_, get);
  ASSERT_OK(stored);
  EXPECT_EQ(stored->artifact().fair_model().components(0).weights(0),
            model.components(0).weights(0));
  // The FTPL oracle on the same request shape.
  auto ftpl_req = BestResponseRequest("br-2");
  ftpl_req.set_oracle(v1::BEST_RESPONSE_ORACLE_FTPL);
  auto ftpl = vault_->BestResponse(acme_, ftpl_req);
  ASSERT_OK(ftpl);
  EXPECT_EQ(ftpl->artifact().fair_model().algorithm(), "best_response_ftpl");
  EXPECT_EQ(ftpl->charge().ledger_seq(), first->charge().ledger_seq() + 1);
  // An epsilon that is not a whole number of micro-units: the noise follows the charged value.
  auto odd = BestResponseRequest("br-3");
  odd.set_epsilon(0.12345678);
  auto odd_resp = vault_->BestResponse(acme_, odd);
  ASSERT_OK(odd_resp);
  EXPECT_EQ(odd_resp->charge().cost().epsilon(), 0.123457);
}

// BestResponse keeps the last game's preprocessed data for the next call: a call with other
// columns or another clip must not get it, and the first game's answer comes back after them.
TEST_F(VaultModelsTest, BestResponseReusesTheGameOnlyForTheSameColumnsAndClip) {
  ASSERT_OK_AND_ASSIGN(v1::BestResponseResponse first,
                       vault_->BestResponse(acme_, BestResponseRequest("br-a")));
  v1::BestResponseRequest clipped = BestResponseRequest("br-b");
  clipped.set_clip_l1(0.5);
  ASSERT_OK_AND_ASSIGN(v1::BestResponseResponse b, vault_->BestResponse(acme_, clipped));
  EXPECT_LE(b.max_row_l1(), 1.5 + 1e-12);  // clipped to 0.5, plus the intercept
  v1::BestResponseRequest one_column = BestResponseRequest("br-c");
  one_column.clear_feature_columns();
  one_column.add_feature_columns("f2");
  ASSERT_OK_AND_ASSIGN(v1::BestResponseResponse c, vault_->BestResponse(acme_, one_column));
  EXPECT_EQ(c.artifact().fair_model().components(0).weights_size(), 2);
  ASSERT_OK_AND_ASSIGN(v1::BestResponseResponse again,
                       vault_->BestResponse(acme_, BestResponseRequest("br-d")));
  EXPECT_GT(first.max_row_l1(), 1.5);
  EXPECT_EQ(again.max_row_l1(), first.max_row_l1());
  EXPECT_EQ(again.artifact().fair_model().components(0).weights_size(), 3);
  EXPECT_EQ(again.rows_used(), first.rows_used());
}

// A least-squares call keeps only the game's sums; an FTPL call after it needs the rows and must
// not be served that entry (the core refuses FTPL without them), and the entry it builds with the
// rows serves least squares again with the same values.
TEST_F(VaultModelsTest, BestResponseFtplAfterLeastSquaresRebuildsTheGameWithItsRows) {
  ASSERT_OK_AND_ASSIGN(v1::BestResponseResponse first,
                       vault_->BestResponse(acme_, BestResponseRequest("ls-1")));
  v1::BestResponseRequest ftpl = BestResponseRequest("ftpl-1");
  ftpl.set_oracle(v1::BEST_RESPONSE_ORACLE_FTPL);
  ASSERT_OK_AND_ASSIGN(v1::BestResponseResponse f, vault_->BestResponse(acme_, ftpl));
  EXPECT_EQ(f.artifact().fair_model().algorithm(), "best_response_ftpl");
  EXPECT_EQ(f.max_row_l1(), first.max_row_l1());
  ASSERT_OK_AND_ASSIGN(v1::BestResponseResponse again,
                       vault_->BestResponse(acme_, BestResponseRequest("ls-2")));
  EXPECT_EQ(again.max_row_l1(), first.max_row_l1());
  EXPECT_EQ(again.sensitivity(), first.sensitivity());
}

// Issue 19: a label column that is not 0/1 is named as such, before the masses are looked at (the
// masses check used to blame masses_key, sending the company to pay for another release).
TEST_F(VaultModelsTest, BestResponseNamesTheLabelBeforeTheMasses) {
  auto not_binary = BestResponseRequest("label-1");
  not_binary.set_label_column("f2");  // values 0, 0.2, ..., 0.8
  ExpectRefusedWithoutCharge(
      acme_, [&] { return vault_->BestResponse(acme_, not_binary).status(); },
      absl::StatusCode::kInvalidArgument, "label_column: column 'f2'");
  not_binary.set_masses_key("never-released");
  ExpectRefusedWithoutCharge(
      acme_, [&] { return vault_->BestResponse(acme_, not_binary).status(); },
      absl::StatusCode::kInvalidArgument, "label_column: column 'f2'");
}

// Issue 19: λ with subnormal entries gets a refusal naming lambda (before the charge), not an
// error about granularities.
TEST_F(VaultModelsTest, BestResponseWithSubnormalLambdaIsRefusedNamingLambda) {
  auto tiny = BestResponseRequest("tiny-1");
  tiny.clear_lambda();
  for (double l : {5e-304, 0.0, 0.0, 0.0}) tiny.add_lambda(l);
  ExpectRefusedWithoutCharge(
      acme_, [&] { return vault_->BestResponse(acme_, tiny).status(); },
      absl::StatusCode::kInvalidArgument, "lambda: the cost differences between groups");
  // λ = 0 has nothing to resolve: answered (and charged) without fairness costs.
  auto zero = BestResponseRequest("tiny-2");
  zero.clear_lambda();
  for (int i = 0; i < 4; ++i) zero.add_lambda(0);
  EXPECT_OK(vault_->BestResponse(acme_, zero));
}

// Issue 19: whether a BestResponse reuses the previous call's game must not depend on the groups.
// Calls over [sex] then [race] (other groups, other K), then [sex, race] and [race, sex] (the
// same K = 6, the rows' joint group indices coinciding for some subjects only), on the same table,
// rows and columns: one game is built, and every call regroups it (the key used to hold the
// groups: a company timing the second of two calls learned whether they grouped alike).
TEST_F(VaultModelsTest, BestResponseReusesTheGameWhateverTheGroups) {
  const int64_t before = vault_->GamesBuilt();
  int i = 0;
  for (const std::vector<std::string>& attributes : std::vector<std::vector<std::string>>{
           {"sex"}, {"race"}, {"sex", "race"}, {"race", "sex"}}) {
    v1::NoisyCountsRequest masses;
    masses.set_idempotency_key(absl::StrCat("reuse-masses-", i));
    masses.set_table_handle(handle_);
    masses.add_columns("label");
    for (const std::string& a : attributes) masses.add_attributes(a);
    masses.set_epsilon(kHugeEpsilon);
    ASSERT_OK(vault_->NoisyCounts(acme_, masses));
    auto req = BestResponseRequest(absl::StrCat("reuse-", i));
    req.clear_attributes();
    for (const std::string& a : attributes) req.add_attributes(a);
    req.set_masses_key(masses.idempotency_key());
    const int k = attributes.size() == 2 ? 6 : (attributes[0] == "sex" ? 2 : 3);
    req.clear_lambda();
    for (int c = 0; c < 4 * (k - 1); ++c) req.add_lambda(c == 0 ? 0.5 : 0.0);
    ASSERT_OK(vault_->BestResponse(acme_, req)) << i;
    ++i;
  }
  EXPECT_EQ(vault_->GamesBuilt(), before + 1);
}

// Issue 19 (review): features whose scale overflows the least-squares sums (1e160) made a game
// learner fail after its charge; public inputs show it, so it is refused before, for every
// linear learner and for BestResponse.
TEST_F(VaultModelsTest, FeaturesOutOfScaleAreRefusedBeforeCharging) {
  v1::TableHeader header = header_;
  v1::TableChunk chunk = chunk_;
  for (int i = 0; i < chunk.subject_keys_size(); ++i) {
    chunk.mutable_columns(0)->set_numeric(i, 1e160 * (i % 3 + 1));  // f1
  }
  ASSERT_OK_AND_ASSIGN(const v1::UploadTableResponse table, Upload(acme_, header, {chunk}));
  v1::NoisyCountsRequest masses;
  masses.set_idempotency_key("huge-masses");
  masses.set_table_handle(table.table_handle());
  masses.add_columns("label");
  masses.add_attributes("sex");
  masses.set_epsilon(kHugeEpsilon);
  ASSERT_OK(vault_->NoisyCounts(acme_, masses));
  auto best = BestResponseRequest("huge-br");
  best.set_table_handle(table.table_handle());
  best.set_masses_key("huge-masses");
  best.set_clip_l1(0);
  ExpectRefusedWithoutCharge(
      acme_, [&] { return vault_->BestResponse(acme_, best).status(); },
      absl::StatusCode::kInvalidArgument, "feature_columns: the largest row's L1 norm");
  auto fit = FitRequest("huge-fit", v1::FAIR_MODEL_ALGORITHM_DP_ORACLE_LEARNER);
  fit.set_table_handle(table.table_handle());
  ExpectRefusedWithoutCharge(
      acme_, [&] { return vault_->FitFairModel(acme_, fit).status(); },
      absl::StatusCode::kInvalidArgument, "feature_columns: the largest row's L1 norm");
  // A public clip brings them back into scale.
  fit.set_idempotency_key("huge-fit-clipped");
  fit.set_clip_l1(5);
  ASSERT_OK_AND_ASSIGN(const v1::FairModel model, FitAndWait(acme_, fit));
  EXPECT_EQ(model.components_size(), 20);
}

TEST_F(VaultModelsTest, BestResponseRefusesBadInputBeforeCharging) {
  auto no_masses = BestResponseRequest("bad-1");
  no_masses.set_masses_key("nope");
  ExpectRefusedWithoutCharge(
      acme_, [&] { return vault_->BestResponse(acme_, no_masses).status(); },
      absl::StatusCode::kInvalidArgument, "masses_key");
  auto short_lambda = BestResponseRequest("bad-2");
  short_lambda.mutable_lambda()->RemoveLast();
  ExpectRefusedWithoutCharge(
      acme_, [&] { return vault_->BestResponse(acme_, short_lambda).status(); },
      absl::StatusCode::kInvalidArgument, "4(K-1) = 4");
  auto over_bound = BestResponseRequest("bad-3");
  over_bound.set_lambda_bound(0.5);
  ExpectRefusedWithoutCharge(
      acme_, [&] { return vault_->BestResponse(acme_, over_bound).status(); },
      absl::StatusCode::kInvalidArgument, "lambda_bound");
  auto bad_feature = BestResponseRequest("bad-4");
  bad_feature.add_feature_columns("nope");
  ExpectRefusedWithoutCharge(
      acme_, [&] { return vault_->BestResponse(acme_, bad_feature).status(); },
      absl::StatusCode::kInvalidArgument, "feature_columns");
  auto label_as_feature = BestResponseRequest("bad-7");
  label_as_feature.add_feature_columns("label");
  ExpectRefusedWithoutCharge(
      acme_, [&] { return vault_->BestResponse(acme_, label_as_feature).status(); },
      absl::StatusCode::kInvalidArgument, "label_column: column 'label' is also in feature_columns");
  // Masses over other columns than the label.
  v1::NoisyCountsRequest other;
  other.set_idempotency_key("other-masses");
  other.set_table_handle(handle_);
  other.add_columns("h2");
  other.add_attributes("sex");
  other.set_epsilon(1);
  ASSERT_OK(vault_->NoisyCounts(acme_, other));
  // Masses released on another table (the fixture's own).
  v1::NoisyCountsRequest elsewhere;
  elsewhere.set_idempotency_key("elsewhere-masses");
  elsewhere.set_table_handle(VaultTest::handle_);
  elsewhere.add_columns("label");
  elsewhere.add_attributes("sex");
  elsewhere.set_epsilon(1);
  ASSERT_OK(vault_->NoisyCounts(acme_, elsewhere));
  auto other_table = BestResponseRequest("bad-6");
  other_table.set_masses_key("elsewhere-masses");
  ExpectRefusedWithoutCharge(
      acme_, [&] { return vault_->BestResponse(acme_, other_table).status(); },
      absl::StatusCode::kInvalidArgument, "on the same table");
  auto wrong_masses = BestResponseRequest("bad-5");
  wrong_masses.set_masses_key("other-masses");
  ExpectRefusedWithoutCharge(
      acme_, [&] { return vault_->BestResponse(acme_, wrong_masses).status(); },
      absl::StatusCode::kInvalidArgument, "not [label]");
}

}  // namespace
}  // namespace fairvault::server::testing
