// Tests of administration on a real SQLite store: authentication and roles (what each role
// may not do), the attribute import (refusals naming the row, replayed and changed batches,
// all or nothing), and the ledger as a company sees it.
#include <sqlite3.h>
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
#include "server/util/crypto.h"
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

// acme's key has just checked out (MakeCompany), so it is held in memory: no other key for its
// account is taken from there, each is refused, and refused again (a refused key is never
// remembered). An id written otherwise than the vault writes it (sign, leading zeros) is
// refused too, with the right secret.
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
        acme_key_.substr(0, acme_key_.size() - 1), acme_key_ + "0",
        absl::StrCat("fv_+", acme_.account_id, "_", secret),
        absl::StrCat("fv_0", acme_.account_id, "_", secret),
        absl::StrCat("fv_ ", acme_.account_id, "_", secret)}) {
    SCOPED_TRACE(key);
    EXPECT_THAT(vault_->Authenticate(key), StatusIs(absl::StatusCode::kUnauthenticated));
    EXPECT_THAT(vault_->Authenticate(key), StatusIs(absl::StatusCode::kUnauthenticated));
  }
  EXPECT_OK(vault_->Authenticate(acme_key_));
}

// Only accounts that exist are remembered: a key naming an id not yet issued is refused, and
// the account later created under that id authenticates.
TEST_F(VaultTest, AuthenticateFindsAccountCreatedAfterAFailedLookup) {
  auto last = store_->ListAccounts();
  ASSERT_OK(last);
  const int64_t next = last->back().id + 1;
  const std::string secret = acme_key_.substr(acme_key_.rfind('_') + 1);
  EXPECT_THAT(vault_->Authenticate(absl::StrCat("fv_", next, "_", secret)),
              StatusIs(absl::StatusCode::kUnauthenticated));
  std::string key;
  Caller later;
  MakeCompany("later", &key, &later);
  ASSERT_EQ(later.account_id, next) << "the store did not issue the next id";
  EXPECT_EQ(later.name, "later");
}

// The emergency revocation of docs/operations.md: a hash overwritten in the database stops the
// key within a second (the account is reused from memory no longer), without a restart.
TEST_F(VaultTest, AnOverwrittenKeyHashStopsTheKeyWithinASecond) {
  clock_.Advance(1'000'000);  // whatever read acme before is now too old: read again here
  ASSERT_OK(vault_->Authenticate(acme_key_));
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  const std::string sql =
      absl::StrCat("UPDATE accounts SET key_hash = randomblob(32) WHERE id = ", acme_.account_id);
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  clock_.Advance(999'999);
  EXPECT_OK(vault_->Authenticate(acme_key_));  // still the record read before
  clock_.Advance(1);
  EXPECT_THAT(vault_->Authenticate(acme_key_), StatusIs(absl::StatusCode::kUnauthenticated));
}

// A key is reused from memory only once it has checked out against the store: within the
// second after acme's key was read, a different key for acme's id is still checked against
// the store, not against the record read for the first key. So how fast a wrong key is
// refused does not tell whether its account was used in the last second. Here the store's
// hash is overwritten to match a second key: that key is accepted at once, and the first key,
// read within the second, still works until its second is over.
TEST_F(VaultTest, AKeyNotYetCheckedIsCheckedAgainstTheStoreWhoeverUsedItsAccount) {
  clock_.Advance(1'000'000);
  ASSERT_OK(vault_->Authenticate(acme_key_));
  const std::string second_secret(64, 'b');
  const std::string second_key = absl::StrCat("fv_", acme_.account_id, "_", second_secret);
  EXPECT_THAT(vault_->Authenticate(second_key), StatusIs(absl::StatusCode::kUnauthenticated));
  EXPECT_THAT(vault_->Authenticate(second_key), StatusIs(absl::StatusCode::kUnauthenticated));
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* read = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT key_salt FROM accounts WHERE id = ?", -1, &read,
                               nullptr),
            SQLITE_OK);
  sqlite3_bind_int64(read, 1, acme_.account_id);
  ASSERT_EQ(sqlite3_step(read), SQLITE_ROW);
  const std::string salt(static_cast<const char*>(sqlite3_column_blob(read, 0)),
                         sqlite3_column_bytes(read, 0));
  sqlite3_finalize(read);
  const std::string hash = Sha256(salt + second_secret);
  sqlite3_stmt* write = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "UPDATE accounts SET key_hash = ? WHERE id = ?", -1, &write,
                               nullptr),
            SQLITE_OK);
  sqlite3_bind_blob(write, 1, hash.data(), static_cast<int>(hash.size()), SQLITE_TRANSIENT);
  sqlite3_bind_int64(write, 2, acme_.account_id);
  ASSERT_EQ(sqlite3_step(write), SQLITE_DONE);
  sqlite3_finalize(write);
  sqlite3_close(db);
  clock_.Advance(500'000);
  auto second = vault_->Authenticate(second_key);
  ASSERT_OK(second);
  EXPECT_EQ(second->account_id, acme_.account_id);
  EXPECT_OK(vault_->Authenticate(acme_key_));  // read 0.5 s ago: reused
  clock_.Advance(500'000);
  EXPECT_THAT(vault_->Authenticate(acme_key_), StatusIs(absl::StatusCode::kUnauthenticated));
  EXPECT_OK(vault_->Authenticate(second_key));
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
