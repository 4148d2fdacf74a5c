// Tests of the vault's use-cases on a real SQLite store: authentication, roles, attribute
// import, table upload, and the charged releases (NoisyCounts, FitEqualizedOdds) — exact
// answers with a huge epsilon, and for every refused request an unchanged budget and ledger.
#include "server/app/vault.h"

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

// ---- authentication and roles ------------------------------------------------------------------

TEST_F(VaultTest, AuthenticateAcceptsIssuedKey) {
  auto caller = vault_->Authenticate(acme_key_);
  ASSERT_OK(caller);
  EXPECT_EQ(caller->name, "acme");
  EXPECT_EQ(caller->role, Role::kCompany);
  EXPECT_EQ(caller->account_id, acme_.account_id);
  EXPECT_THAT(acme_key_, ::testing::StartsWith("fv_"));
}

TEST_F(VaultTest, AuthenticateRejectsWrongOrMalformedKeys) {
  std::string wrong = acme_key_;
  wrong.back() = wrong.back() == '0' ? '1' : '0';
  // Another account's id with acme's secret.
  std::string swapped =
      absl::StrCat("fv_", regulator_.account_id, acme_key_.substr(acme_key_.rfind('_')));
  const std::string secret = acme_key_.substr(acme_key_.rfind('_') + 1);
  for (const std::string& key :
       {wrong, swapped, std::string(), std::string("fv_"), absl::StrCat("Bearer ", acme_key_),
        absl::StrCat("fv_x_", secret), absl::StrCat("fv_999_", secret),
        absl::StrCat("xx_", acme_.account_id, "_", secret),
        acme_key_.substr(0, acme_key_.size() - 1), acme_key_ + "0"}) {
    SCOPED_TRACE(key);
    EXPECT_THAT(vault_->Authenticate(key), StatusIs(absl::StatusCode::kUnauthenticated));
  }
}

TEST_F(VaultTest, CompanyMayNotAdministrate) {
  v1::CreateDatasetRequest ds;
  ds.set_name("mine");
  ds.add_attributes()->set_name("x");
  EXPECT_THAT(vault_->CreateDataset(acme_, ds),
              StatusIs(absl::StatusCode::kPermissionDenied, "may not call"));
  v1::GrantBudgetRequest grant;
  grant.set_company("acme");
  grant.set_dataset("census");
  grant.set_epsilon(1e6);
  EXPECT_THAT(vault_->GrantBudget(acme_, grant),
              StatusIs(absl::StatusCode::kPermissionDenied, "may not call"));
  v1::SetDatasetCapRequest cap;
  cap.set_dataset("census");
  cap.set_epsilon(1);
  EXPECT_THAT(vault_->SetDatasetCap(acme_, cap),
              StatusIs(absl::StatusCode::kPermissionDenied, "may not call"));
  v1::CreateAccountRequest account;
  account.set_name("mallory");
  account.set_role(v1::ROLE_REGULATOR);
  EXPECT_THAT(vault_->CreateAccount(acme_, account),
              StatusIs(absl::StatusCode::kPermissionDenied, "may not call"));
  EXPECT_THAT(Import("b9", {"sex", "race"}, {Rows({{"z1", "F", "A"}})}, &acme_),
              StatusIs(absl::StatusCode::kPermissionDenied, "may not call"));
  EXPECT_THAT(vault_->VerifyLedger(acme_),
              StatusIs(absl::StatusCode::kPermissionDenied, "may not call"));
  EXPECT_THAT(vault_->ListBudgets(acme_, v1::ListBudgetsRequest()),
              StatusIs(absl::StatusCode::kPermissionDenied, "may not call"));
  EXPECT_EQ(BudgetOf(acme_).epsilon_granted(), 1e6);
}

TEST_F(VaultTest, RegulatorMayNotRelease) {
  EXPECT_THAT(vault_->NoisyCounts(regulator_, CountsRequest("r1")),
              StatusIs(absl::StatusCode::kPermissionDenied, "may not call"));
  EXPECT_THAT(vault_->FitEqualizedOdds(regulator_, FitRequest("r2")),
              StatusIs(absl::StatusCode::kPermissionDenied, "may not call"));
  EXPECT_THAT(Upload(regulator_, TableHeaderFor("census"), {Chunk(rows_)}),
              StatusIs(absl::StatusCode::kPermissionDenied, "may not call"));
  EXPECT_EQ(ChargeRows(), 0);
}

TEST_F(VaultTest, CompanyCannotUseAnotherCompanysTable) {
  ExpectRefusedWithoutCharge(
      globex_, [&] { return vault_->NoisyCounts(globex_, CountsRequest("g1")); },
      absl::StatusCode::kPermissionDenied, "another company");
  ExpectRefusedWithoutCharge(
      globex_, [&] { return vault_->FitEqualizedOdds(globex_, FitRequest("g2")); },
      absl::StatusCode::kPermissionDenied, "another company");
}

TEST_F(VaultTest, CompanyCannotReadAnotherCompanysArtifactOrLedger) {
  auto fit = vault_->FitEqualizedOdds(acme_, FitRequest("f1"));
  ASSERT_OK(fit);
  v1::GetArtifactRequest get;
  get.set_artifact_id(fit->artifact().id());
  EXPECT_THAT(vault_->GetArtifact(globex_, get), StatusIs(absl::StatusCode::kPermissionDenied));
  EXPECT_OK(vault_->GetArtifact(acme_, get));
  EXPECT_OK(vault_->GetArtifact(regulator_, get));

  v1::ListLedgerRequest ledger;
  ledger.set_company("acme");
  EXPECT_THAT(vault_->ListLedger(globex_, ledger), StatusIs(absl::StatusCode::kPermissionDenied));
  auto own = vault_->ListLedger(acme_, ledger);
  ASSERT_OK(own);
  EXPECT_FALSE(own->entries().empty());
  auto as_regulator = vault_->ListLedger(regulator_, ledger);
  ASSERT_OK(as_regulator);
  EXPECT_EQ(as_regulator->entries_size(), own->entries_size());
}

// ---- import ------------------------------------------------------------------------------------

TEST_F(VaultTest, ImportRejectsUnknownCategoryNamingTheRow) {
  EXPECT_THAT(Import("b3", {"sex", "race"}, {Rows({{"n1", "F", "A"}, {"n2", "M", "D"}})}),
              StatusIs(absl::StatusCode::kInvalidArgument, "row 2"));
  EXPECT_THAT(Import("b3", {"sex", "race"}, {Rows({{"n1", "X", "A"}})}),
              StatusIs(absl::StatusCode::kInvalidArgument, "'X' is not a category of attribute"));
  auto datasets = vault_->ListDatasets(regulator_);
  ASSERT_OK(datasets);
  EXPECT_EQ(datasets->datasets(0).subject_count(), 30);
}

TEST_F(VaultTest, ImportRejectsDuplicateKeyWithinBatchNamingBothRows) {
  auto result = Import("b3", {"sex", "race"},
                       {Rows({{"n1", "F", "A"}, {"n2", "M", "B"}}), Rows({{"n1", "M", "C"}})});
  EXPECT_THAT(result, StatusIs(absl::StatusCode::kInvalidArgument, "row 3"));
  EXPECT_THAT(result, StatusIs(absl::StatusCode::kInvalidArgument, "row 1"));
  // Nothing was stored: the same batch id with other content is still free.
  auto ok = Import("b3", {"sex", "race"}, {Rows({{"n1", "F", "A"}})});
  ASSERT_OK(ok);
  EXPECT_EQ(ok->subject_count(), 31);
}

TEST_F(VaultTest, ImportRejectsKeyFromAnEarlierBatch) {
  EXPECT_THAT(Import("b3", {"sex", "race"}, {Rows({{"n1", "F", "A"}, {"s3", "M", "B"}})}),
              StatusIs(absl::StatusCode::kInvalidArgument, "already in dataset"));
  auto datasets = vault_->ListDatasets(regulator_);
  ASSERT_OK(datasets);
  EXPECT_EQ(datasets->datasets(0).subject_count(), 30);
}

TEST_F(VaultTest, ImportReplaysSameBatchAndRefusesChangedBatch) {
  std::vector<std::vector<std::string>> second;
  for (size_t i = 18; i < subjects_.size(); ++i) {
    second.push_back({subjects_[i].key, subjects_[i].race, subjects_[i].sex});
  }
  auto replay = Import("b2", {"race", "sex"}, {Rows(second)});
  ASSERT_OK(replay);
  EXPECT_TRUE(replay->replayed());
  EXPECT_EQ(replay->rows_imported(), 0);
  EXPECT_EQ(replay->subject_count(), 30);

  second.back()[2] = second.back()[2] == "F" ? "M" : "F";
  EXPECT_THAT(Import("b2", {"race", "sex"}, {Rows(second)}),
              StatusIs(absl::StatusCode::kFailedPrecondition, "b2"));
  auto datasets = vault_->ListDatasets(regulator_);
  ASSERT_OK(datasets);
  EXPECT_EQ(datasets->datasets(0).subject_count(), 30);
}

TEST_F(VaultTest, ImportRejectsBadHeaderAndShapes) {
  EXPECT_THAT(Import("b3", {"sex"}, {Rows({{"n1", "F"}})}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(Import("b3", {"sex", "sex"}, {Rows({{"n1", "F", "M"}})}),
              StatusIs(absl::StatusCode::kInvalidArgument, "repeated"));
  EXPECT_THAT(Import("b3", {"sex", "race"}, {Rows({{"n1", "F"}})}),
              StatusIs(absl::StatusCode::kInvalidArgument, "categories"));
  EXPECT_THAT(Import("b3", {"sex", "race"}, {}), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(Import("bad id", {"sex", "race"}, {Rows({{"n1", "F", "A"}})}),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

// A stream that hands out `chunks`, then fails with `error` instead of ending.
template <typename Chunk>
ChunkSource<Chunk> BreakAfter(std::vector<Chunk> chunks, absl::Status error) {
  ChunkSource<Chunk> source = Feed(std::move(chunks));
  auto inner = source.next;
  source.next = [inner, error](Chunk* out) -> absl::StatusOr<bool> {
    absl::StatusOr<bool> more = inner(out);
    if (!more.ok() || *more) return more;
    return error;
  };
  return source;
}

TEST_F(VaultTest, ImportStoresNothingWhenTheStreamBreaksAndTheRetryCompletes) {
  v1::ImportHeader header;
  header.set_dataset("census");
  header.set_batch_id("b3");
  header.add_attributes("sex");
  header.add_attributes("race");
  const v1::SubjectRows first = Rows({{"n1", "F", "A"}, {"n2", "M", "B"}});
  const v1::SubjectRows second = Rows({{"n3", "F", "C"}});
  EXPECT_THAT(vault_->ImportAttributes(
                  regulator_, header,
                  BreakAfter<v1::SubjectRows>(
                      {first}, absl::InvalidArgumentError("chunk 2 could not be parsed"))),
              StatusIs(absl::StatusCode::kInvalidArgument, "chunk 2"));
  // A caller who gave up after the last chunk: nothing is stored either.
  ChunkSource<v1::SubjectRows> gone = Feed(std::vector<v1::SubjectRows>{first, second});
  gone.live = [] { return absl::CancelledError("the client cancelled"); };
  EXPECT_THAT(vault_->ImportAttributes(regulator_, header, gone),
              StatusIs(absl::StatusCode::kCancelled));
  auto datasets = vault_->ListDatasets(regulator_);
  ASSERT_OK(datasets);
  EXPECT_EQ(datasets->datasets(0).subject_count(), 30);

  auto retry = vault_->ImportAttributes(regulator_, header,
                                        Feed(std::vector<v1::SubjectRows>{first, second}));
  ASSERT_OK(retry);
  EXPECT_FALSE(retry->replayed());
  EXPECT_EQ(retry->rows_imported(), 3);
  EXPECT_EQ(retry->subject_count(), 33);
}

// ---- upload ------------------------------------------------------------------------------------

TEST_F(VaultTest, UploadRejectsRepeatedSubjectKeyNamingTheRow) {
  std::vector<Row> rows(rows_.begin(), rows_.begin() + 5);
  rows[4].key = rows[1].key;
  auto result =
      Upload(acme_, TableHeaderFor("census"),
             {Chunk({rows.begin(), rows.begin() + 3}), Chunk({rows.begin() + 3, rows.end()})});
  EXPECT_THAT(result,
              StatusIs(absl::StatusCode::kInvalidArgument, "row 5 repeats the key of row 2"));
}

TEST_F(VaultTest, UploadRejectsNonFiniteNumbersNamingTheRow) {
  std::vector<Row> rows(rows_.begin(), rows_.begin() + 6);
  rows[4].label = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THAT(
      Upload(acme_, TableHeaderFor("census"),
             {Chunk({rows.begin(), rows.begin() + 3}), Chunk({rows.begin() + 3, rows.end()})}),
      StatusIs(absl::StatusCode::kInvalidArgument, "row 5"));
  rows[4].label = 1;
  rows[0].pred = std::numeric_limits<double>::infinity();
  EXPECT_THAT(Upload(acme_, TableHeaderFor("census"), {Chunk(rows)}),
              StatusIs(absl::StatusCode::kInvalidArgument, "'pred' row 1"));
}

TEST_F(VaultTest, UploadStoresNothingWhenTheStreamBreaksOrTheCallerIsGone) {
  const v1::TableChunk first = Chunk({rows_.begin(), rows_.begin() + 10});
  const v1::TableChunk second = Chunk({rows_.begin() + 10, rows_.end()});
  EXPECT_THAT(Upload(acme_, TableHeaderFor("census"), {}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(vault_->UploadTable(acme_, TableHeaderFor("census"),
                                  BreakAfter<v1::TableChunk>(
                                      {first}, absl::DeadlineExceededError("deadline passed"))),
              StatusIs(absl::StatusCode::kDeadlineExceeded));
  ChunkSource<v1::TableChunk> gone = Feed(std::vector<v1::TableChunk>{first, second});
  gone.live = [] { return absl::CancelledError("the client cancelled"); };
  EXPECT_THAT(vault_->UploadTable(acme_, TableHeaderFor("census"), gone),
              StatusIs(absl::StatusCode::kCancelled));
  // Only the fixture's table was ever stored.
  auto purged = store_->PurgeExpiredTables(std::numeric_limits<int64_t>::max());
  ASSERT_OK(purged);
  EXPECT_EQ(*purged, 1);
}

TEST_F(VaultTest, UploadWithoutGrantIsPermissionDenied) {
  Caller initech;
  ASSERT_NO_FATAL_FAILURE(MakeCompany("initech", nullptr, &initech));
  EXPECT_THAT(Upload(initech, TableHeaderFor("census"), {Chunk(rows_)}),
              StatusIs(absl::StatusCode::kPermissionDenied, "grant"));
}

TEST_F(VaultTest, UploadRejectsBadShapes) {
  v1::TableChunk short_column = Chunk({rows_.begin(), rows_.begin() + 3});
  short_column.mutable_columns(0)->mutable_numeric()->RemoveLast();
  EXPECT_THAT(Upload(acme_, TableHeaderFor("census"), {short_column}),
              StatusIs(absl::StatusCode::kInvalidArgument, "pred"));
  EXPECT_THAT(Upload(acme_, TableHeaderFor("census"), {}),
              StatusIs(absl::StatusCode::kInvalidArgument, "no rows"));
  EXPECT_THAT(Upload(acme_, TableHeaderFor("census", -1), {Chunk(rows_)}),
              StatusIs(absl::StatusCode::kInvalidArgument, "ttl_seconds"));
}

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

// ---- ledger views ------------------------------------------------------------------------------

TEST_F(VaultTest, CompanyLedgerShowsOnlyItsRowsAndTheLedgerVerifies) {
  ASSERT_OK(vault_->NoisyCounts(acme_, CountsRequest("l1")));
  ASSERT_OK(vault_->FitEqualizedOdds(acme_, FitRequest("l2")));
  auto table = Upload(globex_, TableHeaderFor("census"), {Chunk(rows_)});
  ASSERT_OK(table);
  v1::NoisyCountsRequest g = CountsRequest("l1");  // same key, other company: independent
  g.set_table_handle(table->table_handle());
  g.set_epsilon(1);
  ASSERT_OK(vault_->NoisyCounts(globex_, g));
  v1::SetDatasetCapRequest cap;
  cap.set_dataset("census");
  cap.set_epsilon(1e6);
  ASSERT_OK(vault_->SetDatasetCap(regulator_, cap));

  auto own = vault_->ListLedger(acme_, v1::ListLedgerRequest());
  ASSERT_OK(own);
  std::vector<std::string> kinds;
  for (const auto& e : own->entries()) {
    EXPECT_EQ(e.account(), "acme");
    kinds.push_back(e.kind());
  }
  EXPECT_THAT(kinds, ::testing::ElementsAre("grant", "charge", "charge"));
  EXPECT_EQ(own->entries(1).request_kind(), "NoisyCounts");
  EXPECT_EQ(own->entries(2).request_kind(), "FitEqualizedOddsPostProcessor");

  const auto all = Ledger();
  EXPECT_EQ(all.size(), 6u);  // 2 grants, 3 charges, 1 cap
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(all[i].seq(), static_cast<int64_t>(i) + 1);
    if (i > 0) {
      EXPECT_EQ(all[i].prev_hash(), all[i - 1].hash());
    }
  }

  auto verified = vault_->VerifyLedger(regulator_);
  ASSERT_OK(verified);
  EXPECT_TRUE(verified->ok()) << verified->message();
  EXPECT_EQ(verified->rows_checked(), 6);
  EXPECT_EQ(verified->first_bad_seq(), 0);
  EXPECT_EQ(verified->head_hash(), all.back().hash());
}

}  // namespace
}  // namespace fairvault::server::testing
