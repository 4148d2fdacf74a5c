// Tests of ReleaseCellSums and of BestResponse with a sums_key (issue 22 §1): the release is
// charged once and replayed byte for byte, keeps the company's public totals, and every best
// response from it is post-processing: no ledger row, no spend, the same answer on every call,
// and, at an epsilon that makes the noise negligible, the charged best response's answer. Bad
// input and mismatched releases are refused, naming the field, without a charge.
#include "server/app/models/models_test_fixture.h"

namespace fairvault::server::testing {
namespace {


v1::CellSumsRequest SumsRequest(const std::string& key, const std::string& handle,
                                double epsilon) {
  v1::CellSumsRequest req;
  req.set_idempotency_key(key);
  req.set_table_handle(handle);
  req.add_feature_columns("f1");
  req.add_feature_columns("f2");
  req.set_label_column("label");
  req.add_attributes("sex");
  req.set_epsilon(epsilon);
  req.set_clip_l1(2);
  return req;
}

v1::BestResponseRequest FromSums(v1::BestResponseRequest req, const std::string& sums_key) {
  req.clear_idempotency_key();
  req.clear_masses_key();
  req.set_epsilon(0);
  req.set_sums_key(sums_key);
  return req;
}

double Distance(const v1::BestResponseResponse& a, const v1::BestResponseResponse& b) {
  const auto& wa = a.artifact().fair_model().components(0).weights();
  const auto& wb = b.artifact().fair_model().components(0).weights();
  double d = 0;
  for (int j = 0; j < wa.size(); ++j) d += (wa[j] - wb[j]) * (wa[j] - wb[j]);
  return std::sqrt(d);
}

TEST_F(VaultModelsTest, CellSumsAreChargedOnceAndKeepTheCompanysTotals) {
  const v1::CellSumsRequest req = SumsRequest("sums-1", handle_, 1);
  ASSERT_OK_AND_ASSIGN(const v1::CellSumsResponse first, vault_->ReleaseCellSums(acme_, req));
  EXPECT_EQ(first.cells_size(), 4);  // 2 groups x 2 labels
  ASSERT_EQ(first.feature_names_size(), 3);
  EXPECT_EQ(first.feature_names(2), "(intercept)");
  EXPECT_EQ(first.charge().cost().epsilon(), 1);
  ASSERT_EQ(first.charge().cost().parts_size(), 2);
  EXPECT_EQ(first.charge().cost().parts(0).name(), "counts");
  EXPECT_NEAR(first.charge().cost().parts(0).epsilon(), 0.1, 1e-12);
  EXPECT_EQ(first.rows_used(), 30);
  // K = 2: group 0 is the public label total minus noised group 1, so the counts add up to the
  // rows and each label's intercept sums (one per row) to the label's rows.
  double rows = 0;
  for (int y = 0; y < 2; ++y) {
    const v1::CellSum& g0 = first.cells(y);
    const v1::CellSum& g1 = first.cells(2 + y);
    EXPECT_EQ(g0.label(), y);
    EXPECT_EQ(g1.label(), y);
    ASSERT_EQ(g0.noisy_sums_size(), 3);
    rows += g0.noisy_count() + g1.noisy_count();
    EXPECT_NEAR(g0.noisy_sums(2) + g1.noisy_sums(2),
                static_cast<double>(std::llround(g0.noisy_count() + g1.noisy_count())), 1e-9);
  }
  EXPECT_EQ(rows, 30);
  // Replay: the same bytes, no new row.
  const int charges = ChargeRows();
  ASSERT_OK_AND_ASSIGN(const v1::CellSumsResponse again, vault_->ReleaseCellSums(acme_, req));
  EXPECT_EQ(again.SerializeAsString(), first.SerializeAsString());
  EXPECT_EQ(ChargeRows(), charges);
}

TEST_F(VaultModelsTest, BestResponsesFromCellSumsAreFreeAndMatchTheChargedOne) {
  ASSERT_OK(vault_->ReleaseCellSums(acme_, SumsRequest("sums-huge", handle_, kHugeEpsilon)));
  const int charges = ChargeRows();
  const v1::Budget before = BudgetOf(acme_);
  const v1::BestResponseRequest charged_req = BestResponseRequest("br-charged");
  const v1::BestResponseRequest req = FromSums(charged_req, "sums-huge");
  ASSERT_OK_AND_ASSIGN(const v1::BestResponseResponse free, vault_->BestResponse(acme_, req));
  ASSERT_OK_AND_ASSIGN(const v1::BestResponseResponse again, vault_->BestResponse(acme_, req));
  EXPECT_EQ(ChargeRows(), charges);
  EXPECT_EQ(BudgetOf(acme_).SerializeAsString(), before.SerializeAsString());
  EXPECT_EQ(free.charge().cost().epsilon(), 0);
  EXPECT_EQ(free.charge().cost().mechanism(), "post_processing");
  EXPECT_TRUE(free.artifact().id().empty());  // not stored
  EXPECT_EQ(free.artifact().fair_model().algorithm(), "best_response_least_squares");
  EXPECT_EQ(Distance(free, again), 0);
  // Another λ: another response, for nothing.
  v1::BestResponseRequest other = req;
  other.set_lambda(0, 0);
  other.set_lambda(3, 0.7);
  ASSERT_OK_AND_ASSIGN(const v1::BestResponseResponse moved, vault_->BestResponse(acme_, other));
  EXPECT_GT(Distance(free, moved), 1e-6);
  EXPECT_EQ(ChargeRows(), charges);
  // The charged best response at a negligible noise (masses and its own release at ε = 1e5)
  // gives the same model up to the snapping of the costs and features (relative 1e-3).
  v1::BestResponseRequest precise = charged_req;
  precise.set_epsilon(kHugeEpsilon);
  ASSERT_OK_AND_ASSIGN(const v1::BestResponseResponse paid, vault_->BestResponse(acme_, precise));
  double norm = 0;
  for (double w : paid.artifact().fair_model().components(0).weights()) norm += w * w;
  EXPECT_LT(Distance(free, paid), 2e-3 * std::sqrt(norm));
}

TEST_F(VaultModelsTest, BestResponseFromSumsRefusesBadInputWithoutCharging) {
  ASSERT_OK(vault_->ReleaseCellSums(acme_, SumsRequest("sums-2", handle_, 1)));
  const int charges = ChargeRows();
  const v1::BestResponseRequest good = FromSums(BestResponseRequest("unused"), "sums-2");
  ASSERT_OK(vault_->BestResponse(acme_, good));
  auto expect = [&](v1::BestResponseRequest req, const std::string& field) {
    EXPECT_THAT(vault_->BestResponse(acme_, req),
                StatusIs(absl::StatusCode::kInvalidArgument, field))
        << field;
  };
  v1::BestResponseRequest r = good;
  r.set_epsilon(1);
  expect(r, "epsilon");
  r = good;
  r.set_masses_key("masses");
  expect(r, "masses_key");
  r = good;
  r.set_oracle(v1::BEST_RESPONSE_ORACLE_FTPL);
  expect(r, "oracle");
  r = good;
  r.set_sums_key("never-released");
  expect(r, "ReleaseCellSums");
  r = good;
  r.set_sums_key("masses");  // a NoisyCounts release
  expect(r, "not a successful ReleaseCellSums");
  r = good;
  r.clear_feature_columns();
  r.add_feature_columns("f1");
  expect(r, "sums_key: release 'sums-2' has feature_columns f1,f2");
  r = good;
  r.set_clip_l1(1);
  expect(r, "clip_l1/intercept");
  r = good;
  r.add_lambda(0);
  expect(r, "4(K-1) = 4");
  r = good;
  r.set_lambda(0, 5);  // above lambda_bound 1
  expect(r, "lambda_bound");
  EXPECT_EQ(ChargeRows(), charges);
  // The release itself: bad shares and columns, before any charge.
  v1::CellSumsRequest bad = SumsRequest("sums-bad", handle_, 1);
  bad.set_counts_share(1);
  EXPECT_THAT(vault_->ReleaseCellSums(acme_, bad),
              StatusIs(absl::StatusCode::kInvalidArgument, "counts_share"));
  bad = SumsRequest("sums-bad", handle_, 1);
  bad.set_label_column("f1");
  EXPECT_THAT(vault_->ReleaseCellSums(acme_, bad),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "label_column: column 'f1' is also in feature_columns"));
  bad = SumsRequest("sums-bad", handle_, 1e-12);
  EXPECT_THAT(vault_->ReleaseCellSums(acme_, bad),
              StatusIs(absl::StatusCode::kInvalidArgument, "epsilon"));
  EXPECT_EQ(ChargeRows(), charges);
}

TEST_F(VaultModelsTest, PreviewsOfCellSumsAndOfAFreeBestResponse) {
  v1::PreviewReleaseRequest preview;
  *preview.mutable_cell_sums() = SumsRequest("sums-p", handle_, 1);
  ASSERT_OK_AND_ASSIGN(const v1::PreviewReleaseResponse priced,
                       vault_->PreviewRelease(acme_, preview));
  EXPECT_EQ(priced.cost().epsilon(), 1);
  EXPECT_EQ(priced.cost().parts_size(), 2);
  EXPECT_TRUE(priced.admitted());
  EXPECT_EQ(priced.accuracy_size(), 2);
  ASSERT_OK(vault_->ReleaseCellSums(acme_, SumsRequest("sums-p", handle_, 1)));
  const int charges = ChargeRows();
  *preview.mutable_best_response() = FromSums(BestResponseRequest("x"), "sums-p");
  ASSERT_OK_AND_ASSIGN(const v1::PreviewReleaseResponse free,
                       vault_->PreviewRelease(acme_, preview));
  EXPECT_EQ(free.cost().epsilon(), 0);
  EXPECT_EQ(free.cost().mechanism(), "post_processing");
  EXPECT_TRUE(free.admitted());
  EXPECT_GT(free.replay_of_ledger_seq(), 0);
  EXPECT_EQ(ChargeRows(), charges);
}

}  // namespace
}  // namespace fairvault::server::testing
