// Tests of NoisyCounts on a real SQLite store: exact answers with a huge epsilon, the full
// product of columns and groups, unmatched keys, the Gaussian's composition, replays, and for
// every refused request an unchanged budget and ledger.
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

// ---- NoisyCounts -------------------------------------------------------------------------------

TEST_F(VaultTest, NoisyCountsWithHugeEpsilonAreExact) {
  auto resp = vault_->NoisyCounts(acme_, CountsRequest("c1"));
  ASSERT_OK(resp);
  EXPECT_THAT(resp->columns(), ::testing::ElementsAre("tier"));
  EXPECT_THAT(resp->attributes(), ::testing::ElementsAre("sex", "race"));
  EXPECT_EQ(resp->rows_used(), 30);
  EXPECT_EQ(resp->rows_dropped(), 0);

  const auto expected = ExactCounts(rows_);
  ASSERT_EQ(resp->cells_size(), 2 * 6);  // tier {x, y} x groups {F, M} x {A, B, C}
  std::set<std::pair<std::string, std::string>> seen;
  int64_t total = 0;
  for (const v1::CountCell& cell : resp->cells()) {
    ASSERT_EQ(cell.values_size(), 1);
    const std::pair<std::string, std::string> id(cell.values(0), cell.group());
    EXPECT_TRUE(seen.insert(id).second) << "repeated cell " << id.first << "/" << id.second;
    ASSERT_EQ(expected.count(id), 1u) << id.first << "/" << id.second;
    EXPECT_EQ(cell.noisy_count(), expected.at(id)) << id.first << "/" << id.second;
    total += cell.noisy_count();
  }
  EXPECT_EQ(total, 30);

  const v1::Charge& charge = resp->charge();
  EXPECT_EQ(charge.cost().epsilon(), kHugeEpsilon);
  EXPECT_EQ(charge.cost().delta(), 0);
  EXPECT_EQ(charge.cost().mechanism(), "discrete_laplace");
  EXPECT_EQ(charge.cost().sensitivity(), 2);
  EXPECT_NEAR(charge.cost().noise_scale(), 2e-5, 1e-12);
  EXPECT_EQ(charge.budget_after().epsilon_spent(), kHugeEpsilon);
  EXPECT_EQ(charge.budget_after().releases(), 1);
  EXPECT_EQ(BudgetOf(acme_).SerializeAsString(), charge.budget_after().SerializeAsString());
  const auto ledger = Ledger();
  ASSERT_FALSE(ledger.empty());
  EXPECT_EQ(ledger.back().seq(), charge.ledger_seq());
  EXPECT_EQ(ledger.back().kind(), "charge");
  EXPECT_EQ(ledger.back().account(), "acme");
  EXPECT_EQ(ledger.back().idempotency_key(), "c1");
  EXPECT_EQ(ledger.back().request_kind(), "NoisyCounts");
}

TEST_F(VaultTest, NoisyCountsCoverTheFullProductOfColumnsAndGroups) {
  v1::NoisyCountsRequest req = CountsRequest("c1");
  req.add_columns("label");  // numeric: its values become labels "0", "1"
  req.add_attributes("race");
  auto resp = vault_->NoisyCounts(acme_, req);
  ASSERT_OK(resp);
  EXPECT_THAT(resp->attributes(), ::testing::ElementsAre("race"));
  ASSERT_EQ(resp->cells_size(), 2 * 2 * 3);
  std::map<std::string, std::string> race_of;
  for (const Subject& s : subjects_) race_of[s.key] = s.race;
  std::map<std::tuple<std::string, std::string, std::string>, int64_t> expected;
  for (const Row& r : rows_) {
    ++expected[{r.tier, r.label == 1 ? "1" : "0", race_of[r.key]}];
  }
  std::set<std::tuple<std::string, std::string, std::string>> seen;
  for (const v1::CountCell& cell : resp->cells()) {
    ASSERT_EQ(cell.values_size(), 2);
    const auto id = std::make_tuple(cell.values(0), cell.values(1), cell.group());
    EXPECT_TRUE(seen.insert(id).second);
    EXPECT_EQ(cell.noisy_count(), expected[id])
        << cell.values(0) << "/" << cell.values(1) << "/" << cell.group();
  }
  EXPECT_EQ(seen.size(), 12u);
}

TEST_F(VaultTest, NoisyCountsWithoutColumnsCountGroups) {
  v1::NoisyCountsRequest req = CountsRequest("c1");
  req.clear_columns();
  req.add_attributes("sex");
  auto resp = vault_->NoisyCounts(acme_, req);
  ASSERT_OK(resp);
  ASSERT_EQ(resp->cells_size(), 2);
  int64_t f = 0;
  for (const Subject& s : subjects_) f += s.sex == "F";
  EXPECT_EQ(resp->cells(0).group(), "F");
  EXPECT_EQ(resp->cells(0).noisy_count(), f);
  EXPECT_EQ(resp->cells(1).group(), "M");
  EXPECT_EQ(resp->cells(1).noisy_count(), 30 - f);
}

TEST_F(VaultTest, NoisyCountsUnmatchedKeysRejectedByDefaultAndDroppedOnRequest) {
  std::vector<Row> rows = rows_;
  rows.push_back({"stranger1", 1, 0, "x"});
  rows.push_back({"stranger2", 0, 0, "y"});
  rows.push_back({"stranger3", 0, 1, "y"});
  auto table = Upload(acme_, TableHeaderFor("census"), {Chunk(rows)});
  ASSERT_OK(table);
  EXPECT_EQ(table->row_count(), 33);
  EXPECT_EQ(table->rows_in_vault(), 30);

  v1::NoisyCountsRequest req = CountsRequest("u1");
  req.set_table_handle(table->table_handle());
  ExpectRefusedWithoutCharge(
      acme_, [&] { return vault_->NoisyCounts(acme_, req); }, absl::StatusCode::kInvalidArgument,
      "3 of 33");

  req.set_idempotency_key("u2");
  req.set_unmatched(v1::UNMATCHED_KEYS_DROP);
  auto resp = vault_->NoisyCounts(acme_, req);
  ASSERT_OK(resp);
  EXPECT_EQ(resp->rows_dropped(), 3);
  EXPECT_EQ(resp->rows_used(), 30);
  const auto expected = ExactCounts(rows);
  for (const v1::CountCell& cell : resp->cells()) {
    EXPECT_EQ(cell.noisy_count(), expected.at({cell.values(0), cell.group()}));
  }
}

TEST_F(VaultTest, TheKeptJoinFollowsImportsAndTheDictionaryOnlyShowsUsedValues) {
  // Two rows whose subjects are imported only after the upload, and whose tier "z" appears
  // nowhere else: the first release drops them (and shows no "z" cell), the release after
  // the import uses them, although the table's join was kept from the upload.
  std::vector<Row> rows = rows_;
  rows.push_back({"late1", 1, 0, "z"});
  rows.push_back({"late2", 0, 1, "z"});
  auto table = Upload(acme_, TableHeaderFor("census"), {Chunk(rows)});
  ASSERT_OK(table);
  EXPECT_EQ(table->rows_in_vault(), 30);
  v1::NoisyCountsRequest req = CountsRequest("late-1");
  req.set_table_handle(table->table_handle());
  req.set_unmatched(v1::UNMATCHED_KEYS_DROP);
  req.add_attributes("sex");
  auto before = vault_->NoisyCounts(acme_, req);
  ASSERT_OK(before);
  EXPECT_EQ(before->rows_dropped(), 2);
  for (const v1::CountCell& cell : before->cells()) EXPECT_NE(cell.values(0), "z");
  EXPECT_EQ(before->cells_size(), 2 * 2);  // tiers {x, y} x sex {F, M}

  ASSERT_OK(Import("late", {"sex", "race"}, {Rows({{"late1", "F", "A"}, {"late2", "F", "B"}})}));
  req.set_idempotency_key("late-2");
  auto after = vault_->NoisyCounts(acme_, req);
  ASSERT_OK(after);
  EXPECT_EQ(after->rows_dropped(), 0);
  EXPECT_EQ(after->rows_used(), 32);
  ASSERT_EQ(after->cells_size(), 3 * 2);  // tiers {x, y, z} x sex {F, M}
  for (const v1::CountCell& cell : after->cells()) {
    if (cell.values(0) == "z") {
      EXPECT_EQ(cell.noisy_count(), cell.group() == "F" ? 2 : 0);
    }
  }
}

TEST_F(VaultTest, NoisyCountsRefusesBadInputsWithoutCharging) {
  auto counts = [&](v1::NoisyCountsRequest req) {
    return [this, req] { return vault_->NoisyCounts(acme_, req); };
  };
  for (double eps :
       {0.0, -1.0, std::numeric_limits<double>::quiet_NaN(),
        std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(), 1e-9}) {
    SCOPED_TRACE(eps);
    v1::NoisyCountsRequest req = CountsRequest("e1");
    req.set_epsilon(eps);
    ExpectRefusedWithoutCharge(acme_, counts(req), absl::StatusCode::kInvalidArgument, "epsilon");
  }
  {
    v1::NoisyCountsRequest req = CountsRequest("e2");
    req.add_columns("income");
    ExpectRefusedWithoutCharge(acme_, counts(req), absl::StatusCode::kInvalidArgument,
                               "unknown column 'income'");
  }
  {
    v1::NoisyCountsRequest req = CountsRequest("e3");
    req.add_attributes("religion");
    ExpectRefusedWithoutCharge(acme_, counts(req), absl::StatusCode::kInvalidArgument, "religion");
  }
  {
    v1::NoisyCountsRequest req = CountsRequest("e4");
    req.add_attributes("sex");
    req.add_attributes("sex");
    ExpectRefusedWithoutCharge(acme_, counts(req), absl::StatusCode::kInvalidArgument, "repeated");
  }
  {
    v1::NoisyCountsRequest req = CountsRequest("e5");
    req.set_table_handle("tbl_doesnotexist");
    ExpectRefusedWithoutCharge(acme_, counts(req), absl::StatusCode::kNotFound, "tbl_doesnotexist");
    req.set_table_handle("");
    ExpectRefusedWithoutCharge(acme_, counts(req), absl::StatusCode::kInvalidArgument);
  }
  {
    v1::NoisyCountsRequest req = CountsRequest("");
    ExpectRefusedWithoutCharge(acme_, counts(req), absl::StatusCode::kInvalidArgument,
                               "idempotency_key");
  }
  {
    v1::NoisyCountsRequest req = CountsRequest("e6");
    for (const char* c : {"tier", "tier", "tier", "tier"}) req.add_columns(c);
    ExpectRefusedWithoutCharge(acme_, counts(req), absl::StatusCode::kInvalidArgument, "at most 4");
  }
  {
    // A column crossed with itself (refused after the replay check: a stored one replays).
    v1::NoisyCountsRequest req = CountsRequest("e8");
    req.add_columns("tier");
    ExpectRefusedWithoutCharge(acme_, counts(req), absl::StatusCode::kInvalidArgument,
                               "columns: column 'tier' given twice");
  }
  {
    // The grant on census has delta 0.
    v1::NoisyCountsRequest req = CountsRequest("e7");
    req.set_noise(v1::NOISE_KIND_DISCRETE_GAUSSIAN);
    req.set_epsilon(1);
    ExpectRefusedWithoutCharge(acme_, counts(req), absl::StatusCode::kFailedPrecondition, "delta");
  }
  EXPECT_EQ(ChargeRows(), 0);
  EXPECT_EQ(BudgetOf(acme_).epsilon_spent(), 0);
}

TEST_F(VaultTest, HugeNamesAndUnknownEnumValuesAreRefusedWithShortMessages) {
  const std::string huge(20000, 'x');
  v1::NoisyCountsRequest req = CountsRequest("long-column");
  req.add_columns(huge);
  absl::StatusOr<v1::NoisyCountsResponse> refused = vault_->NoisyCounts(acme_, req);
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kInvalidArgument, "columns: column names are"));
  EXPECT_LT(refused.status().message().size(), 300u);
  req = CountsRequest("long-attribute");
  req.add_attributes(huge);
  refused = vault_->NoisyCounts(acme_, req);
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kInvalidArgument, "attributes: names are"));
  EXPECT_LT(refused.status().message().size(), 300u);
  req = CountsRequest("bad-unmatched");
  req.set_unmatched(static_cast<v1::UnmatchedKeys>(99));
  EXPECT_THAT(vault_->NoisyCounts(acme_, req),
              StatusIs(absl::StatusCode::kInvalidArgument, "unmatched: unknown value 99"));
  req = CountsRequest("bad-noise");
  req.set_noise(static_cast<v1::NoiseKind>(7));
  EXPECT_THAT(vault_->NoisyCounts(acme_, req),
              StatusIs(absl::StatusCode::kInvalidArgument, "noise: unknown value 7"));
  EXPECT_EQ(ChargeRows(), 0);
}

TEST_F(VaultTest, NoisyCountsOnExpiredTableIsFailedPrecondition) {
  auto table = Upload(acme_, TableHeaderFor("census", /*ttl_seconds=*/60), {Chunk(rows_)});
  ASSERT_OK(table);
  EXPECT_EQ(table->expires_unix(), kStartMicros / 1'000'000 + 60);
  v1::NoisyCountsRequest req = CountsRequest("x1");
  req.set_table_handle(table->table_handle());
  clock_.Advance(60'000'000);  // at expiry the handle still works
  ASSERT_OK(vault_->NoisyCounts(acme_, req));
  clock_.Advance(1'000'001);
  req.set_idempotency_key("x2");
  ExpectRefusedWithoutCharge(
      acme_, [&] { return vault_->NoisyCounts(acme_, req); }, absl::StatusCode::kFailedPrecondition,
      "expired");
  // The replay of the earlier request is still answered from the stored response.
  req.set_idempotency_key("x1");
  EXPECT_OK(vault_->NoisyCounts(acme_, req));
  EXPECT_EQ(BudgetOf(acme_).releases(), 1);
}

TEST_F(VaultTest, NoisyCountsBeyondTheRemainingBudgetIsResourceExhausted) {
  ASSERT_OK(vault_->NoisyCounts(acme_, CountsRequest("b1")));
  v1::NoisyCountsRequest req = CountsRequest("b2");
  req.set_epsilon(1e6);  // the whole grant; 1e5 is already spent
  ExpectRefusedWithoutCharge(
      acme_, [&] { return vault_->NoisyCounts(acme_, req); }, absl::StatusCode::kResourceExhausted,
      "left");
  EXPECT_EQ(BudgetOf(acme_).epsilon_spent(), kHugeEpsilon);
  // Exactly what is left still fits.
  req.set_idempotency_key("b3");
  req.set_epsilon(9e5);
  auto last = vault_->NoisyCounts(acme_, req);
  ASSERT_OK(last);
  EXPECT_EQ(last->charge().budget_after().epsilon_remaining(), 0);
  req.set_idempotency_key("b4");
  req.set_epsilon(1e-6);
  ExpectRefusedWithoutCharge(
      acme_, [&] { return vault_->NoisyCounts(acme_, req); }, absl::StatusCode::kResourceExhausted,
      "left");
}

TEST_F(VaultTest, NoisyCountsReplayReturnsTheSameResponseAndChargesOnce) {
  v1::NoisyCountsRequest req = CountsRequest("r1");
  req.set_epsilon(0.5);  // real noise: a replay must return the same draws
  auto first = vault_->NoisyCounts(acme_, req);
  ASSERT_OK(first);
  const int charges = ChargeRows();
  auto again = vault_->NoisyCounts(acme_, req);
  ASSERT_OK(again);
  EXPECT_EQ(again->SerializeAsString(), first->SerializeAsString());
  EXPECT_EQ(ChargeRows(), charges);
  const v1::Budget budget = BudgetOf(acme_);
  EXPECT_EQ(budget.epsilon_spent(), 0.5);
  EXPECT_EQ(budget.releases(), 1);

  // The same key with other parameters is refused.
  v1::NoisyCountsRequest changed = req;
  changed.set_epsilon(0.25);
  ExpectRefusedWithoutCharge(
      acme_, [&] { return vault_->NoisyCounts(acme_, changed); },
      absl::StatusCode::kFailedPrecondition, "r1");
  changed = req;
  changed.clear_columns();
  ExpectRefusedWithoutCharge(
      acme_, [&] { return vault_->NoisyCounts(acme_, changed); },
      absl::StatusCode::kFailedPrecondition, "different parameters");

  // A new key is a new request, charged again.
  req.set_idempotency_key("r2");
  ASSERT_OK(vault_->NoisyCounts(acme_, req));
  EXPECT_EQ(BudgetOf(acme_).epsilon_spent(), 1.0);
}

// A release stored pending that this build charges whole (a newer replica's, with a finish
// this build does not have) is neither returned unfinished nor finished here: the call is told
// to retry, and nothing more is charged.
TEST_F(VaultTest, APendingReleaseThisBuildDoesNotFinishIsRetriedElsewhere) {
  v1::NoisyCountsRequest req = CountsRequest("p1");
  req.set_epsilon(0.5);
  ASSERT_OK(vault_->NoisyCounts(acme_, req));
  const int charges = ChargeRows();
  ASSERT_EQ(RawSql("UPDATE responses SET pending=1 WHERE idempotency_key='p1'"), "");
  EXPECT_THAT(vault_->NoisyCounts(acme_, req),
              StatusIs(absl::StatusCode::kUnavailable, "charged by a newer vault server"));
  EXPECT_EQ(ChargeRows(), charges);
  EXPECT_EQ(BudgetOf(acme_).releases(), 1);
}

TEST_F(VaultTest, DiscreteGaussianWithDeltaGrantComposesBelowThePureSum) {
  auto table = Upload(globex_, TableHeaderFor("census"), {Chunk(rows_)});
  ASSERT_OK(table);
  constexpr int kCalls = 16;
  v1::NoisyCountsResponse last;
  for (int i = 0; i < kCalls; ++i) {
    v1::NoisyCountsRequest req = CountsRequest(absl::StrCat("g", i));
    req.set_table_handle(table->table_handle());
    req.set_noise(v1::NOISE_KIND_DISCRETE_GAUSSIAN);
    req.set_epsilon(1);
    auto resp = vault_->NoisyCounts(globex_, req);
    ASSERT_OK(resp);
    EXPECT_EQ(resp->cells_size(), 12);
    last = *resp;
  }
  const v1::Cost& cost = last.charge().cost();
  EXPECT_EQ(cost.mechanism(), "discrete_gaussian");
  EXPECT_EQ(cost.delta(), 1e-6);
  EXPECT_NEAR(cost.sensitivity(), std::sqrt(2.0), 1e-12);
  EXPECT_GT(cost.noise_scale(), 1);
  const v1::Budget budget = BudgetOf(globex_);
  EXPECT_EQ(budget.releases(), kCalls);
  EXPECT_GT(budget.epsilon_spent(), 1);
  EXPECT_LT(budget.epsilon_spent(), 0.75 * kCalls);  // RDP composition beats the plain sum
  EXPECT_EQ(last.charge().budget_after().SerializeAsString(), budget.SerializeAsString());
  EXPECT_EQ(BudgetOf(acme_).epsilon_spent(), 0);
}

}  // namespace
}  // namespace fairvault::server::testing
