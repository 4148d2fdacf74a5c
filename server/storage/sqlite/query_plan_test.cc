// The store's listings reach a company's ledger rows through ledger_by_account, its
// access-log rows through access_log_by_account and its jobs through jobs_by_account, whatever
// the table's size: the query SQLite plans for ListingAfterCursor's and JobsNewestFirst's
// text, read with EXPLAIN QUERY PLAN on a database the store created.
#include <sqlite3.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "server/storage/sqlite/sqlite_store.h"
#include "server/storage/store_common.h"

namespace fairvault::server::storage {
namespace {

class SqliteQueryPlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = absl::StrCat(::testing::TempDir(), "fairvault_query_plan_test_", getpid(), ".db");
    auto store = SqliteStore::Open(path_);
    ASSERT_OK(store);
    store_ = *std::move(store);
    ASSERT_EQ(sqlite3_open_v2(path_.c_str(), &db_, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  }
  void TearDown() override {
    sqlite3_close(db_);
    store_.reset();
    for (const char* suffix : {"", "-wal", "-shm"}) std::remove((path_ + suffix).c_str());
  }
  // Every line of SQLite's plan for `sql`, joined.
  std::string Plan(const std::string& sql) {
    sqlite3_stmt* stmt = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db_, ("EXPLAIN QUERY PLAN " + sql).c_str(), -1, &stmt, nullptr),
              SQLITE_OK)
        << sqlite3_errmsg(db_);
    std::string plan;
    while (sqlite3_step(stmt) == SQLITE_ROW) {
      absl::StrAppend(&plan, reinterpret_cast<const char*>(sqlite3_column_text(stmt, 3)), "; ");
    }
    sqlite3_finalize(stmt);
    return plan;
  }

  std::string path_;
  std::unique_ptr<SqliteStore> store_;
  sqlite3* db_ = nullptr;
};

TEST_F(SqliteQueryPlanTest, ACompanysLedgerListingSearchesItsIndex) {
  LedgerFilter company;
  company.account = "acme";
  EXPECT_THAT(Plan("SELECT * FROM ledger" + ListingAfterCursor(company, '?', true).sql),
              ::testing::HasSubstr("USING INDEX ledger_by_account (account=? AND seq>?)"));
  company.dataset = "census";
  EXPECT_THAT(Plan("SELECT * FROM ledger" + ListingAfterCursor(company, '?', true).sql),
              ::testing::HasSubstr("USING INDEX ledger_by_account (account=? AND seq>?)"));
  // The text every filter used to share could not: it walked the ledger from the cursor.
  EXPECT_THAT(Plan("SELECT * FROM ledger WHERE seq > ?1 AND (?2 IS NULL OR account = ?2) "
                   "ORDER BY seq LIMIT ?3"),
              ::testing::Not(::testing::HasSubstr("ledger_by_account")));
  // An auditor's listing of everything walks the ledger in order, from the cursor.
  EXPECT_THAT(Plan("SELECT * FROM ledger" + ListingAfterCursor(LedgerFilter(), '?', true).sql),
              ::testing::HasSubstr("USING INTEGER PRIMARY KEY (rowid>?)"));
}

TEST_F(SqliteQueryPlanTest, ACompanysAccessLogListingSearchesItsIndex) {
  LedgerFilter company;
  company.account = "acme";
  EXPECT_THAT(Plan("SELECT * FROM access_log" + ListingAfterCursor(company, '?', false).sql),
              ::testing::HasSubstr("USING INDEX access_log_by_account (account=? AND seq>?)"));
}

TEST_F(SqliteQueryPlanTest, ACompanysOrADatasetsJobListingSearchesItsIndex) {
  JobFilter jobs;
  jobs.account_id = 7;
  EXPECT_THAT(Plan("SELECT * FROM jobs" + JobsNewestFirst(jobs, '?').sql),
              ::testing::HasSubstr("USING INDEX jobs_by_account (account_id=?)"));
  jobs.dataset_id = 3;
  EXPECT_THAT(Plan("SELECT * FROM jobs" + JobsNewestFirst(jobs, '?').sql),
              ::testing::HasSubstr("USING INDEX jobs_by_"));
  jobs.account_id.reset();
  EXPECT_THAT(Plan("SELECT * FROM jobs" + JobsNewestFirst(jobs, '?').sql),
              ::testing::HasSubstr("USING INDEX jobs_by_dataset (dataset_id=?)"));
  // The text every filter used to share walked every job from the newest.
  EXPECT_THAT(Plan("SELECT * FROM jobs WHERE (?1 IS NULL OR account_id = ?1) AND (?2 IS NULL OR "
                   "dataset_id = ?2) ORDER BY ledger_seq DESC LIMIT ?3"),
              ::testing::HasSubstr("SCAN jobs USING INDEX jobs_by_seq"));
  // The operator's listing of every job walks them newest first.
  EXPECT_THAT(Plan("SELECT * FROM jobs" + JobsNewestFirst(JobFilter(), '?').sql),
              ::testing::HasSubstr("SCAN jobs USING INDEX jobs_by_seq"));
}

TEST(JobsNewestFirstTest, NumbersOnlyTheFiltersThatAreSet) {
  JobFilter filter;
  filter.limit = 5;
  JobListingQuery q = JobsNewestFirst(filter, '?');
  EXPECT_EQ(q.sql, " ORDER BY ledger_seq DESC LIMIT ?1");
  EXPECT_THAT(q.params, ::testing::ElementsAre(5));
  filter.dataset_id = 3;
  q = JobsNewestFirst(filter, '$');
  EXPECT_EQ(q.sql, " WHERE dataset_id = $1 ORDER BY ledger_seq DESC LIMIT $2");
  EXPECT_THAT(q.params, ::testing::ElementsAre(3, 5));
  filter.account_id = 7;
  q = JobsNewestFirst(filter, '?');
  EXPECT_EQ(q.sql, " WHERE account_id = ?1 AND dataset_id = ?2 ORDER BY ledger_seq DESC LIMIT ?3");
  EXPECT_THAT(q.params, ::testing::ElementsAre(7, 3, 5));
}

TEST(ListingAfterCursorTest, NumbersOnlyTheFiltersThatAreSet) {
  LedgerFilter filter;
  EXPECT_EQ(ListingAfterCursor(filter, '$', true).sql,
            " WHERE seq > $1 ORDER BY seq LIMIT $2");
  filter.dataset = "census";
  EXPECT_EQ(ListingAfterCursor(filter, '$', true).sql,
            " WHERE seq > $1 AND dataset = $2 ORDER BY seq LIMIT $3");
  EXPECT_EQ(ListingAfterCursor(filter, '?', false).sql,
            " WHERE seq > ?1 ORDER BY seq LIMIT ?2");
  filter.account = "acme";
  EXPECT_EQ(ListingAfterCursor(filter, '?', true).sql,
            " WHERE seq > ?1 AND account = ?2 AND dataset = ?3 ORDER BY seq LIMIT ?4");
}

}  // namespace
}  // namespace fairvault::server::storage
