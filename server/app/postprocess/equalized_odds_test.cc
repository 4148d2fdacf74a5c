// Tests of FitEqualizedOdds on a real SQLite store: the stored artifact, groups over one
// attribute, and refusals (bad inputs, an oversized LP) before any charge.
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/util/clock.h"
#include "server/app/vault_test_fixture.h"
#include "server/storage/sqlite/sqlite_store.h"

namespace fairvault::server::testing {
namespace {

using ::testing::HasSubstr;

// ---- FitEqualizedOdds --------------------------------------------------------------------------

TEST_F(VaultTest, FitEqualizedOddsReturnsAStoredArtifact) {
  auto resp = vault_->FitEqualizedOdds(acme_, FitRequest("f1"));
  ASSERT_OK(resp);
  const v1::Artifact& artifact = resp->artifact();
  EXPECT_THAT(artifact.id(), ::testing::StartsWith("art_"));
  EXPECT_EQ(artifact.dataset(), "census");
  EXPECT_EQ(artifact.company(), "acme");
  EXPECT_EQ(artifact.ledger_seq(), resp->charge().ledger_seq());
  ASSERT_TRUE(artifact.has_equalized_odds());
  const v1::EqualizedOddsPostProcessor& eo = artifact.equalized_odds();
  EXPECT_THAT(eo.attributes(), ::testing::ElementsAre("sex", "race"));
  ASSERT_EQ(eo.groups_size(), 6);
  EXPECT_EQ(eo.m(), 30);
  EXPECT_EQ(eo.epsilon(), kHugeEpsilon);
  EXPECT_EQ(eo.beta(), 0.05);
  EXPECT_EQ(eo.reference_group(), 0);

  // With the noise at zero the released counts are the exact n[ŷ][y] per group.
  std::map<std::string, std::string> group_of;
  for (const Subject& s : subjects_) group_of[s.key] = s.sex + "|" + s.race;
  std::map<std::string, std::array<int64_t, 4>> exact;
  for (const Row& r : rows_) {
    ++exact[group_of[r.key]][static_cast<int>(r.pred) * 2 + static_cast<int>(r.label)];
  }
  const std::vector<std::string> labels = {"F|A", "F|B", "F|C", "M|A", "M|B", "M|C"};
  for (int a = 0; a < eo.groups_size(); ++a) {
    const v1::EqualizedOddsGroup& g = eo.groups(a);
    SCOPED_TRACE(g.group());
    EXPECT_EQ(g.group(), labels[a]);
    EXPECT_GE(g.p_flip_to_1_given_0(), 0);
    EXPECT_LE(g.p_flip_to_1_given_0(), 1);
    EXPECT_GE(g.p_keep_1_given_1(), 0);
    EXPECT_LE(g.p_keep_1_given_1(), 1);
    const auto& n = exact[g.group()];
    EXPECT_EQ(g.noisy_pred0_label0(), n[0]);
    EXPECT_EQ(g.noisy_pred0_label1(), n[1]);
    EXPECT_EQ(g.noisy_pred1_label0(), n[2]);
    EXPECT_EQ(g.noisy_pred1_label1(), n[3]);
  }

  v1::GetArtifactRequest get;
  get.set_artifact_id(artifact.id());
  auto stored = vault_->GetArtifact(acme_, get);
  ASSERT_OK(stored);
  EXPECT_EQ(stored->artifact().SerializeAsString(), artifact.SerializeAsString());

  EXPECT_EQ(resp->charge().budget_after().SerializeAsString(), BudgetOf(acme_).SerializeAsString());
  EXPECT_EQ(resp->charge().cost().mechanism(), "discrete_laplace");
  EXPECT_EQ(BudgetOf(acme_).epsilon_spent(), kHugeEpsilon);

  // Replay: same artifact, one charge.
  auto replay = vault_->FitEqualizedOdds(acme_, FitRequest("f1"));
  ASSERT_OK(replay);
  EXPECT_EQ(replay->SerializeAsString(), resp->SerializeAsString());
  EXPECT_EQ(BudgetOf(acme_).releases(), 1);
  v1::GetArtifactRequest missing;
  missing.set_artifact_id("art_nope");
  EXPECT_THAT(vault_->GetArtifact(acme_, missing), StatusIs(absl::StatusCode::kNotFound));
}

TEST_F(VaultTest, FitEqualizedOddsOnOneAttributeHasItsGroups) {
  v1::FitEqualizedOddsRequest req = FitRequest("f1");
  req.add_attributes("sex");
  req.set_all_pairs(true);
  auto resp = vault_->FitEqualizedOdds(acme_, req);
  ASSERT_OK(resp);
  const auto& eo = resp->artifact().equalized_odds();
  ASSERT_EQ(eo.groups_size(), 2);
  EXPECT_EQ(eo.groups(0).group(), "F");
  EXPECT_EQ(eo.groups(1).group(), "M");
  EXPECT_EQ(eo.reference_group(), -1);
  for (const auto& g : eo.groups()) {
    EXPECT_GE(g.p_flip_to_1_given_0(), 0);
    EXPECT_LE(g.p_flip_to_1_given_0(), 1);
    EXPECT_GE(g.p_keep_1_given_1(), 0);
    EXPECT_LE(g.p_keep_1_given_1(), 1);
  }
  // The LP keeps the derived rates within gamma plus the (here tiny) noise slack.
  EXPECT_LT(eo.groups(1).fpr_slack(), 1e-3);
  EXPECT_NEAR(eo.groups(0).derived_fpr(), eo.groups(1).derived_fpr(),
              0.05 + eo.groups(1).fpr_slack() + 1e-9);
  EXPECT_NEAR(eo.groups(0).derived_tpr(), eo.groups(1).derived_tpr(),
              0.05 + eo.groups(1).tpr_slack() + 1e-9);
}

TEST_F(VaultTest, FitEqualizedOddsRefusesBadInputsWithoutCharging) {
  auto fit = [&](v1::FitEqualizedOddsRequest req) {
    return [this, req] { return vault_->FitEqualizedOdds(acme_, req); };
  };
  for (double gamma : {-0.01, -1.0, std::numeric_limits<double>::quiet_NaN()}) {
    v1::FitEqualizedOddsRequest req = FitRequest("q1");
    req.set_gamma(gamma);
    ExpectRefusedWithoutCharge(acme_, fit(req), absl::StatusCode::kInvalidArgument, "gamma");
  }
  for (double beta : {-0.5, 1.0, 1.5, std::numeric_limits<double>::quiet_NaN()}) {
    v1::FitEqualizedOddsRequest req = FitRequest("q2");
    req.set_beta(beta);
    ExpectRefusedWithoutCharge(acme_, fit(req), absl::StatusCode::kInvalidArgument, "beta");
  }
  for (double eps : {0.0, -2.0, std::numeric_limits<double>::infinity()}) {
    v1::FitEqualizedOddsRequest req = FitRequest("q3");
    req.set_epsilon(eps);
    ExpectRefusedWithoutCharge(acme_, fit(req), absl::StatusCode::kInvalidArgument, "epsilon");
  }
  {
    v1::FitEqualizedOddsRequest req = FitRequest("q4");
    req.set_label_column("tier");  // categorical
    ExpectRefusedWithoutCharge(acme_, fit(req), absl::StatusCode::kInvalidArgument, "tier");
    req.set_label_column("nope");
    ExpectRefusedWithoutCharge(acme_, fit(req), absl::StatusCode::kInvalidArgument, "nope");
  }
  {
    // Predictions must be 0 or 1: row 3 has 0.5.
    std::vector<Row> rows = rows_;
    rows[2].pred = 0.5;
    auto table = Upload(acme_, TableHeaderFor("census"), {Chunk(rows)});
    ASSERT_OK(table);
    v1::FitEqualizedOddsRequest req = FitRequest("q5");
    req.set_table_handle(table->table_handle());
    ExpectRefusedWithoutCharge(acme_, fit(req), absl::StatusCode::kInvalidArgument, "row 3");
  }
  {
    // The predictions given as the labels: no fit could mean anything.
    v1::FitEqualizedOddsRequest req = FitRequest("q7");
    req.set_label_column("pred");
    ExpectRefusedWithoutCharge(acme_, fit(req), absl::StatusCode::kInvalidArgument,
                               "label_column: the same column as prediction_column ('pred')");
  }
  {
    v1::FitEqualizedOddsRequest req = FitRequest("q6");
    req.set_epsilon(2e6);  // beyond what the accountant accepts
    ExpectRefusedWithoutCharge(acme_, fit(req), absl::StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(ChargeRows(), 0);
}

TEST_F(VaultTest, FitEqualizedOddsRefusesAnOversizedLpBeforeCharging) {
  // 20 × 20 = 400 joint groups from the public schema: all_pairs would need 4·400·399/2 =
  // 319,200 LP rows.
  v1::CreateDatasetRequest ds;
  ds.set_name("wide");
  for (const char* name : {"zone", "band"}) {
    v1::Attribute* attribute = ds.add_attributes();
    attribute->set_name(name);
    for (int i = 0; i < 20; ++i) attribute->add_categories(absl::StrCat("c", i));
  }
  ASSERT_OK(vault_->CreateDataset(regulator_, ds));
  std::vector<std::vector<std::string>> subjects;
  for (size_t i = 0; i < subjects_.size(); ++i) {
    subjects.push_back({subjects_[i].key, absl::StrCat("c", i % 20), absl::StrCat("c", i / 20)});
  }
  v1::ImportHeader header;
  header.set_dataset("wide");
  header.set_batch_id("w1");
  header.add_attributes("zone");
  header.add_attributes("band");
  ASSERT_OK(vault_->ImportAttributes(regulator_, header,
                                     Feed(std::vector<v1::SubjectRows>{Rows(subjects)})));
  v1::GrantBudgetRequest grant;
  grant.set_company("acme");
  grant.set_dataset("wide");
  grant.set_epsilon(1e6);
  ASSERT_OK(vault_->GrantBudget(regulator_, grant));
  auto table = Upload(acme_, TableHeaderFor("wide"), {Chunk(rows_)});
  ASSERT_OK(table);

  v1::FitEqualizedOddsRequest req = FitRequest("w1");
  req.set_table_handle(table->table_handle());
  req.set_all_pairs(true);
  ExpectRefusedWithoutCharge(
      acme_, [&] { return vault_->FitEqualizedOdds(acme_, req); },
      absl::StatusCode::kInvalidArgument, "319200 constraint rows");
  EXPECT_EQ(ChargeRows(), 0);
  // Against the reference group the same groups fit (4·399 rows).
  req.set_all_pairs(false);
  req.set_idempotency_key("w2");
  EXPECT_OK(vault_->FitEqualizedOdds(acme_, req));
  EXPECT_EQ(ChargeRows(), 1);
}

}  // namespace
}  // namespace fairvault::server::testing
