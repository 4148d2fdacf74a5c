// The fixtures of the Store's tests (store_*_test.cc, one binary): a store of each backend
// (SQLite on a temp file; PostgreSQL on a private server the binary starts once), the accounts,
// datasets and grants most tests need, raw SQL to tamper with what a store wrote, and the jobs
// fixture.
#ifndef FAIRVAULT_SERVER_STORAGE_STORE_TEST_FIXTURE_H_
#define FAIRVAULT_SERVER_STORAGE_STORE_TEST_FIXTURE_H_

#include "server/storage/store.h"

#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/accounting/accountant.h"
#include "core/testing/status_matchers.h"
#include "core/util/status_macros.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/storage/charge_request_testing.h"
#include "server/storage/ledger_chain.h"
#include "server/storage/postgres/pg_store.h"
#include "server/storage/sqlite/sqlite_store.h"
#include "server/storage/postgres/test_postgres.h"

namespace fairvault::server::storage::store_testing {

using core::accounting::LaplaceCost;
using core::accounting::MicroToEpsilon;
using ::fairvault::testing::IsOk;
using ::fairvault::testing::StatusIs;
using ::testing::HasSubstr;

// Runs SQL on the database through a second, raw connection: what someone with file access
// (not the vault) could do. Returns SQLite's error message, empty on success.
inline std::string RawExec(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : "open failed";
    sqlite3_close(db);
    return msg;
  }
  sqlite3_busy_timeout(db, 5000);
  char* err = nullptr;
  std::string msg;
  if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    msg = err ? err : "error";
    if (msg.empty()) msg = "error";
  }
  sqlite3_free(err);
  sqlite3_close(db);
  return msg;
}

// The first column of the first row of a query, through a raw connection; -1 on failure.
inline int64_t RawScalar(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  int64_t value = -1;
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_open(path.c_str(), &db) == SQLITE_OK &&
      sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr) == SQLITE_OK &&
      sqlite3_step(stmt) == SQLITE_ROW) {
    value = sqlite3_column_int64(stmt, 0);
  }
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return value;
}

enum class Backend { kSqlite, kPostgres };

inline std::string BackendName(const ::testing::TestParamInfo<Backend>& info) {
  return info.param == Backend::kSqlite ? "Sqlite" : "Postgres";
}

// One PostgreSQL server for the whole binary (started on first use, stopped at exit), one
// database per test.
inline TestPostgres* SharedPostgres() {
  static const std::unique_ptr<TestPostgres> pg = []() -> std::unique_ptr<TestPostgres> {
    auto started = TestPostgres::Start();
    if (!started.ok()) {
      ADD_FAILURE() << started.status();
      return nullptr;
    }
    return *std::move(started);
  }();
  return pg.get();
}

// The lease a test's runner holds: one second from `now`.
inline constexpr char kOwner[] = "runner-a";
inline JobLease Lease(int64_t now, const std::string& owner = kOwner) {
  return JobLease{owner, now, now + 1'000'000};
}

class StoreTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    if (GetParam() == Backend::kSqlite) {
      path_ = absl::StrCat(::testing::TempDir(), "fairvault_store_test_", info->name(), "_",
                           getpid(), ".db");
      std::replace(path_.begin() + ::testing::TempDir().size(), path_.end(), '/', '_');
      RemoveFiles();
    } else {
      pg_ = SharedPostgres();
      ASSERT_NE(pg_, nullptr);
      static int databases = 0;
      db_ = absl::StrCat("t", ++databases);
      auto uri = pg_->CreateDatabase(db_);
      ASSERT_OK(uri);
      path_ = *uri;
    }
    ASSERT_NO_FATAL_FAILURE(Reopen());
    acme_ = MakeAccount("acme", Role::kCompany);
    globex_ = MakeAccount("globex", Role::kCompany);
    census_ = MakeDataset("census");
  }

  void TearDown() override {
    store_.reset();
    if (GetParam() == Backend::kSqlite) {
      RemoveFiles();
    } else if (pg_ != nullptr) {
      pg_->Exec("postgres", absl::StrCat("DROP DATABASE IF EXISTS ", db_, " WITH (FORCE)"));
    }
  }

  void RemoveFiles() {
    for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
      std::remove(absl::StrCat(path_, suffix).c_str());
    }
  }

  // A second store on the same database (what another vault process opens).
  absl::StatusOr<std::unique_ptr<Store>> OpenAnother() {
    if (GetParam() == Backend::kSqlite) {
      ASSIGN_OR_RETURN(auto s, SqliteStore::Open(path_));
      return std::unique_ptr<Store>(std::move(s));
    }
    ASSIGN_OR_RETURN(auto s, PgStore::Open(path_));
    return std::unique_ptr<Store>(std::move(s));
  }

  // Closes the store (if open) and opens the same database again.
  void Reopen() {
    store_.reset();
    auto opened = OpenAnother();
    ASSERT_OK(opened);
    store_ = *std::move(opened);
  }

  // Runs SQL through a raw connection: what someone with file or database access (not the
  // vault) could do. Returns the database's error message, empty on success.
  std::string Raw(const std::string& sql) {
    return GetParam() == Backend::kSqlite ? RawExec(path_, sql) : pg_->Exec(db_, sql);
  }
  int64_t Scalar(const std::string& sql) {
    return GetParam() == Backend::kSqlite ? RawScalar(path_, sql) : pg_->Scalar(db_, sql);
  }
  // SQL that lifts the ledger's append-only guard (triggers), as an attacker with database
  // access could, before tampering.
  std::string LiftLedgerGuard() {
    return GetParam() == Backend::kSqlite
               ? "DROP TRIGGER ledger_no_update; DROP TRIGGER ledger_no_delete; "
               : "ALTER TABLE ledger DISABLE TRIGGER USER; ";
  }

  // SQL that lifts the Merkle tree's append-only guard, as an attacker could.
  std::string LiftTreeGuard() {
    return GetParam() == Backend::kSqlite
               ? "DROP TRIGGER IF EXISTS merkle_nodes_no_update; "
                 "DROP TRIGGER IF EXISTS merkle_nodes_no_delete; "
               : "ALTER TABLE merkle_nodes DISABLE TRIGGER USER; ";
  }

  // SQL that lifts the guard against new rows in `decisions` (schema version 7), to write rows
  // as servers before version 7 did.
  std::string LiftDecisionsGuard() {
    return GetParam() == Backend::kSqlite ? "DROP TRIGGER decisions_read_only; "
                                          : "ALTER TABLE decisions DISABLE TRIGGER USER; ";
  }

  AccountRecord MakeAccount(const std::string& name, Role role) {
    AccountRecord a;
    a.name = name;
    a.role = role;
    a.key_salt = std::string("salt\0", 5) + name;
    a.key_hash = std::string(32, '\x7f');
    a.created_micros = 1'000;
    auto created = store_->CreateAccount(a);
    EXPECT_OK(created);
    return created.value();
  }

  DatasetRecord MakeDataset(const std::string& name) {
    DatasetRecord d;
    d.name = name;
    d.attributes = "attrs";
    d.created_micros = 2'000;
    auto created = store_->CreateDataset(d);
    EXPECT_OK(created);
    return created.value();
  }

  void Grant(const AccountRecord& a, const DatasetRecord& d, int64_t micro, double delta = 0) {
    ASSERT_OK(store_->SetGrant(GrantRecord{a.id, d.id, micro, delta}, a.name, d.name,
                               "regulator", ++now_));
  }

  ChargeRequest Request(const AccountRecord& a, const DatasetRecord& d, const std::string& key,
                        int64_t micro, const std::string& digest = "digest") {
    return NoisyCountsCharge(a, d, key, micro, digest);
  }

  // A body that records that it ran and returns "payload-<seq>".
  ChargeBody Body(bool* called, std::optional<ArtifactRecord> artifact = std::nullopt) {
    return [called, artifact](int64_t seq, const BudgetState&) -> absl::StatusOr<ChargeResult> {
      *called = true;
      return ChargeResult{absl::StrCat("payload-", seq), artifact, std::nullopt};
    };
  }

  // Artifact `id` of `a` on `d`, stored by a charge of 0.1 under a grant of 1 (set here).
  void MakeArtifact(const std::string& id, const AccountRecord& a, const DatasetRecord& d) {
    Grant(a, d, 1'000'000);
    bool called = false;
    ASSERT_OK(store_->Charge(Request(a, d, "artifact-" + id, 100'000), ++now_,
                             Body(&called, ArtifactRecord{id, a.id, d.id, 0, 1, id})));
  }

  absl::StatusOr<ChargeOutcome> Charge(const ChargeRequest& r) {
    bool called = false;
    return store_->Charge(r, ++now_, Body(&called));
  }

  std::vector<LedgerRow> Ledger() {
    LedgerFilter all;
    all.limit = 1'000'000;
    auto rows = store_->ListLedger(all);
    EXPECT_OK(rows);
    return rows.ok() ? *rows : std::vector<LedgerRow>();
  }

  int64_t SpentMicro(const AccountRecord& a, const DatasetRecord& d) {
    auto b = store_->GetBudget(a.id, d.id);
    EXPECT_OK(b);
    return b.ok() ? b->spent_micro : -1;
  }

  // An artifact's stored decision batches, (number, payload) in order.
  std::vector<std::pair<int64_t, std::string>> DecisionBatches(const std::string& artifact_id) {
    std::vector<std::pair<int64_t, std::string>> out;
    EXPECT_OK(store_->ForEachDecisionBatch(artifact_id, 0,
                                           [&](int64_t batch, const std::string& payload) {
                                             out.emplace_back(batch, payload);
                                             return absl::OkStatus();
                                           }));
    return out;
  }
  // An artifact's decisions stored by key (before schema version 7), as "key input output".
  std::vector<std::string> KeyedDecisions(const std::string& artifact_id) {
    std::vector<std::string> out;
    EXPECT_OK(store_->ForEachKeyedDecision(artifact_id, [&](const DecisionRow& row) {
      out.push_back(absl::StrCat(row.subject_key, " ", row.input, " ", row.output));
      return absl::OkStatus();
    }));
    return out;
  }

  LedgerVerification Verify() {
    auto v = store_->VerifyLedger();
    EXPECT_OK(v);
    return v.ok() ? *v : LedgerVerification{};
  }

  // grant(acme), cap, charge(acme), grant(globex), charge(acme): five rows.
  void BuildLedger() {
    Grant(acme_, census_, 2'000'000);
    ASSERT_OK(store_->SetCap(census_.id, census_.name, 5'000'000, 0, "regulator", ++now_));
    ASSERT_OK(Charge(Request(acme_, census_, "k1", 250'000)));
    Grant(globex_, census_, 1'000'000);
    ASSERT_OK(Charge(Request(acme_, census_, "k2", 500'000)));
  }

  std::string path_;  // SQLite file, or PostgreSQL URI
  TestPostgres* pg_ = nullptr;
  std::string db_;  // PostgreSQL database name
  std::unique_ptr<Store> store_;
  AccountRecord acme_, globex_;
  DatasetRecord census_;
  int64_t now_ = 1'700'000'000'000'000;
};

// A job record as a FitFairModel submission would hand it to the charge.
inline JobRecord NewJob(const std::string& id, const AccountRecord& a, const DatasetRecord& d,
                 const std::string& table = "tbl_job") {
  JobRecord j;
  j.id = id;
  j.account_id = a.id;
  j.dataset_id = d.id;
  j.idempotency_key = absl::StrCat("key-", id);
  j.table_handle = table;
  j.algorithm = 2;
  j.request = std::string("req\0uest", 8);
  j.plan = "plan";
  j.seed = std::string(32, '\x01');
  j.subject_limit = 30;
  j.total = 50;
  j.state = JobState::kSucceeded;  // ignored: a job is created queued
  j.attempts = 9;                  // ignored
  return j;
}

class StoreJobTest : public StoreTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(StoreTest::SetUp());
    Grant(acme_, census_, 10'000'000);
    Grant(globex_, census_, 10'000'000);
  }

  // Charges 0.1 and creates `job` with the charge; returns the charge's ledger seq.
  int64_t Submit(const JobRecord& job) {
    int64_t seq = 0;
    auto account = store_->GetAccountById(job.account_id);
    auto dataset = store_->GetDatasetById(job.dataset_id);
    EXPECT_OK(account);
    EXPECT_OK(dataset);
    if (!account.ok() || !dataset.ok()) return 0;
    auto charged =
        store_->Charge(Request(*account, *dataset, job.idempotency_key, 100'000), ++now_,
                       [&](int64_t s, const BudgetState&) -> absl::StatusOr<ChargeResult> {
                         seq = s;
                         return ChargeResult{"submitted", std::nullopt, job};
                       });
    EXPECT_OK(charged);
    return seq;
  }

  JobRecord Job(const std::string& id) {
    auto job = store_->GetJob(id);
    EXPECT_OK(job);
    return job.ok() ? *job : JobRecord{};
  }

  std::vector<std::string> Ids(const std::vector<JobRecord>& jobs) {
    std::vector<std::string> out;
    for (const auto& j : jobs) out.push_back(j.id);
    return out;
  }
};

}  // namespace fairvault::server::storage::store_testing

#endif  // FAIRVAULT_SERVER_STORAGE_STORE_TEST_FIXTURE_H_
