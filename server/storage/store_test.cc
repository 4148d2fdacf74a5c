// Tests of the Store, one suite run against both backends (SQLite, and PostgreSQL on a private
// server this binary starts): the hash-chained ledger and its tamper detection, the atomic
// charge path (privacy filter, replays, rollback), persistence across reopen, table expiry,
// training jobs (created with their charge, claimed once under a lease, finished with their
// artifact), and — PostgreSQL's reason to exist — charges from several store instances at once.
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
#include "server/storage/ledger_chain.h"
#include "server/storage/pg_store.h"
#include "server/storage/sqlite_store.h"
#include "server/storage/test_postgres.h"

namespace fairvault::server::storage {
namespace {

using core::accounting::LaplaceCost;
using core::accounting::MicroToEpsilon;
using ::fairvault::testing::IsOk;
using ::fairvault::testing::StatusIs;
using ::testing::HasSubstr;

// Runs SQL on the database through a second, raw connection: what someone with file access
// (not the vault) could do. Returns SQLite's error message, empty on success.
std::string RawExec(const std::string& path, const std::string& sql) {
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
int64_t RawScalar(const std::string& path, const std::string& sql) {
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

std::string BackendName(const ::testing::TestParamInfo<Backend>& info) {
  return info.param == Backend::kSqlite ? "Sqlite" : "Postgres";
}

// One PostgreSQL server for the whole binary (started on first use), one database per test.
TestPostgres* SharedPostgres() {
  static TestPostgres* pg = [] {
    auto started = TestPostgres::Start();
    if (!started.ok()) {
      ADD_FAILURE() << started.status();
      return static_cast<TestPostgres*>(nullptr);
    }
    return started->release();
  }();
  return pg;
}

// The lease a test's runner holds: one second from `now`.
constexpr char kOwner[] = "runner-a";
JobLease Lease(int64_t now, const std::string& owner = kOwner) {
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
    ASSERT_OK(store_->SetGrant(GrantRecord{a.id, d.id, micro, delta}, a.name, d.name, ++now_));
  }

  ChargeRequest Request(const AccountRecord& a, const DatasetRecord& d, const std::string& key,
                        int64_t micro, const std::string& digest = "digest") {
    ChargeRequest r;
    r.account_id = a.id;
    r.account_name = a.name;
    r.dataset_id = d.id;
    r.dataset_name = d.name;
    r.request_kind = "NoisyCounts";
    r.idempotency_key = key;
    r.params_digest = digest;
    r.cost = LaplaceCost(micro);
    r.epsilon = MicroToEpsilon(micro);
    r.mechanism = "discrete_laplace";
    return r;
  }

  // A body that records that it ran and returns "payload-<seq>".
  ChargeBody Body(bool* called, std::optional<ArtifactRecord> artifact = std::nullopt) {
    return [called, artifact](int64_t seq, const BudgetState&) -> absl::StatusOr<ChargeResult> {
      *called = true;
      return ChargeResult{absl::StrCat("payload-", seq), artifact, std::nullopt};
    };
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

  LedgerVerification Verify() {
    auto v = store_->VerifyLedger();
    EXPECT_OK(v);
    return v.ok() ? *v : LedgerVerification{};
  }

  // grant(acme), cap, charge(acme), grant(globex), charge(acme): five rows.
  void BuildLedger() {
    Grant(acme_, census_, 2'000'000);
    ASSERT_OK(store_->SetCap(census_.id, census_.name, 5'000'000, 0, ++now_));
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

// ---- ledger hash chain -------------------------------------------------------------------------

TEST_P(StoreTest, LedgerRowsAreContiguousAndHashChained) {
  ASSERT_NO_FATAL_FAILURE(BuildLedger());
  const std::vector<LedgerRow> rows = Ledger();
  ASSERT_EQ(rows.size(), 5u);
  const std::vector<std::string> kinds = {"grant", "cap", "charge", "grant", "charge"};
  const std::vector<int64_t> account_ids = {acme_.id, 0, acme_.id, globex_.id, acme_.id};
  for (size_t i = 0; i < rows.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(rows[i].seq, static_cast<int64_t>(i) + 1);
    EXPECT_EQ(rows[i].kind, kinds[i]);
    EXPECT_EQ(rows[i].prev_hash, i == 0 ? std::string(kGenesisHash) : rows[i - 1].hash);
    EXPECT_EQ(rows[i].hash.size(), 64u);
    EXPECT_EQ(rows[i].hash, LedgerRowHash(rows[i], account_ids[i], census_.id));
  }
  EXPECT_EQ(rows[0].account, "acme");
  EXPECT_DOUBLE_EQ(rows[0].epsilon, 2.0);
  EXPECT_EQ(rows[1].account, "");
  EXPECT_DOUBLE_EQ(rows[1].epsilon, 5.0);
  EXPECT_EQ(rows[2].idempotency_key, "k1");
  EXPECT_EQ(rows[2].request_kind, "NoisyCounts");
  EXPECT_EQ(rows[2].mechanism, "discrete_laplace");
  EXPECT_EQ(rows[2].pure_micro, std::optional<int64_t>(250'000));
  EXPECT_EQ(rows[2].rdp_nano, LaplaceCost(250'000).rdp_nano);
  EXPECT_FALSE(rows[0].pure_micro.has_value());

  const LedgerVerification v = Verify();
  EXPECT_TRUE(v.ok) << v.message;
  EXPECT_EQ(v.rows_checked, 5);
  EXPECT_EQ(v.first_bad_seq, 0);
  EXPECT_EQ(v.head_hash, rows.back().hash);
}

TEST_P(StoreTest, VerifyOkOnEmptyLedger) {
  const LedgerVerification v = Verify();
  EXPECT_TRUE(v.ok);
  EXPECT_EQ(v.rows_checked, 0);
  EXPECT_EQ(v.head_hash, kGenesisHash);
}

TEST_P(StoreTest, ListLedgerFiltersByAccountDatasetAndSeq) {
  ASSERT_NO_FATAL_FAILURE(BuildLedger());
  LedgerFilter f;
  f.account = "acme";
  auto rows = store_->ListLedger(f);
  ASSERT_OK(rows);
  ASSERT_EQ(rows->size(), 3u);
  for (const auto& r : *rows) EXPECT_EQ(r.account, "acme");
  f.after_seq = 3;
  rows = store_->ListLedger(f);
  ASSERT_OK(rows);
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].seq, 5);
  LedgerFilter other;
  other.dataset = "nope";
  rows = store_->ListLedger(other);
  ASSERT_OK(rows);
  EXPECT_TRUE(rows->empty());
  LedgerFilter limited;
  limited.limit = 2;
  rows = store_->ListLedger(limited);
  ASSERT_OK(rows);
  EXPECT_EQ(rows->size(), 2u);
}

TEST_P(StoreTest, VerifyDetectsEditedRow) {
  ASSERT_NO_FATAL_FAILURE(BuildLedger());
  ASSERT_EQ(Raw(LiftLedgerGuard() + "UPDATE ledger SET epsilon = epsilon * 0.5 WHERE seq = 3;"),
            "");
  const LedgerVerification v = Verify();
  EXPECT_FALSE(v.ok);
  EXPECT_EQ(v.first_bad_seq, 3);
  EXPECT_THAT(v.message, HasSubstr("row 3"));
}

TEST_P(StoreTest, VerifyDetectsEditedCostOfCharge) {
  ASSERT_NO_FATAL_FAILURE(BuildLedger());
  // Lowering the recorded cost and the spend together still breaks the row's hash.
  ASSERT_EQ(Raw(LiftLedgerGuard() + "UPDATE ledger SET pure_micro = 1 WHERE seq = 5;"), "");
  const LedgerVerification v = Verify();
  EXPECT_FALSE(v.ok);
  EXPECT_EQ(v.first_bad_seq, 5);
}

TEST_P(StoreTest, VerifyDetectsDeletedMiddleRow) {
  ASSERT_NO_FATAL_FAILURE(BuildLedger());
  ASSERT_EQ(Raw(LiftLedgerGuard() + "DELETE FROM ledger WHERE seq = 2;"), "");
  const LedgerVerification v = Verify();
  EXPECT_FALSE(v.ok);
  EXPECT_EQ(v.first_bad_seq, 2);
}

TEST_P(StoreTest, VerifyDetectsRenumberedRows) {
  ASSERT_NO_FATAL_FAILURE(BuildLedger());
  // Closing the gap after a deletion still leaves a row that does not chain.
  ASSERT_EQ(Raw(LiftLedgerGuard() + "DELETE FROM ledger WHERE seq = 2; "
                                    "UPDATE ledger SET seq = seq - 1 WHERE seq > 2;"),
            "");
  const LedgerVerification v = Verify();
  EXPECT_FALSE(v.ok);
  EXPECT_EQ(v.first_bad_seq, 2);
}

TEST_P(StoreTest, VerifyDetectsEditedSpendTotals) {
  ASSERT_NO_FATAL_FAILURE(BuildLedger());
  ASSERT_EQ(Raw("UPDATE spend SET pure_micro = 0;"), "");
  const LedgerVerification v = Verify();
  EXPECT_FALSE(v.ok);
  EXPECT_THAT(v.message, HasSubstr("spend"));
  // The filter reads the spend table, so the tampering would have reset the budget.
  EXPECT_EQ(SpentMicro(acme_, census_), 0);
}

TEST_P(StoreTest, VerifyDetectsDeletedSpendTotals) {
  ASSERT_NO_FATAL_FAILURE(BuildLedger());
  ASSERT_EQ(Raw("DELETE FROM spend;"), "");
  const LedgerVerification v = Verify();
  EXPECT_FALSE(v.ok) << "a deleted spend row resets a budget; the ledger must notice";
  EXPECT_THAT(v.message, HasSubstr("spend"));
}

TEST_P(StoreTest, VerifyDetectsInflatedReleaseCount) {
  ASSERT_NO_FATAL_FAILURE(BuildLedger());
  ASSERT_EQ(Raw("UPDATE spend SET releases = releases + 1;"), "");
  EXPECT_FALSE(Verify().ok);
}

TEST_P(StoreTest, VerifyDetectsARaisedGrantOrCap) {
  ASSERT_NO_FATAL_FAILURE(BuildLedger());
  ASSERT_EQ(Raw("UPDATE grants SET epsilon_micro = epsilon_micro * 10;"), "");
  LedgerVerification v = Verify();
  EXPECT_FALSE(v.ok) << "a grant raised behind the ledger's back must be noticed";
  EXPECT_THAT(v.message, HasSubstr("grant"));
}

TEST_P(StoreTest, VerifyDetectsAClearedCap) {
  ASSERT_NO_FATAL_FAILURE(BuildLedger());
  ASSERT_EQ(Raw("UPDATE datasets SET cap_micro = NULL;"), "");
  LedgerVerification v = Verify();
  EXPECT_FALSE(v.ok) << "lifting a cap behind the ledger's back must be noticed";
  EXPECT_THAT(v.message, HasSubstr("cap"));
}

TEST_P(StoreTest, TriggersBlockLedgerUpdateAndDelete) {
  ASSERT_NO_FATAL_FAILURE(BuildLedger());
  EXPECT_THAT(Raw("UPDATE ledger SET epsilon = 0 WHERE seq = 3;"), HasSubstr("append-only"));
  EXPECT_THAT(Raw("DELETE FROM ledger WHERE seq = 3;"), HasSubstr("append-only"));
  EXPECT_THAT(Raw("DELETE FROM ledger;"), HasSubstr("append-only"));
  EXPECT_EQ(Ledger().size(), 5u);
  EXPECT_TRUE(Verify().ok);
}

// ---- the charge path ---------------------------------------------------------------------------

TEST_P(StoreTest, ChargeWithinGrantPassesSeqAndBudgetAfterToBody) {
  Grant(acme_, census_, 1'000'000);
  int64_t seen_seq = -1;
  BudgetState seen;
  auto outcome =
      store_->Charge(Request(acme_, census_, "k1", 300'000), ++now_,
                     [&](int64_t seq, const BudgetState& after) -> absl::StatusOr<ChargeResult> {
                       seen_seq = seq;
                       seen = after;
                       return ChargeResult{"hello", std::nullopt, std::nullopt};
                     });
  ASSERT_OK(outcome);
  EXPECT_FALSE(outcome->replayed);
  EXPECT_EQ(outcome->response_payload, "hello");
  EXPECT_EQ(seen_seq, 2);  // after the grant row
  EXPECT_EQ(seen.grant.epsilon_micro, 1'000'000);
  EXPECT_EQ(seen.spend.releases, 1);
  EXPECT_EQ(seen.spend.pure_micro, 300'000);
  EXPECT_EQ(seen.spent_micro, 300'000);

  const auto rows = Ledger();
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1].seq, 2);
  EXPECT_EQ(rows[1].kind, "charge");
  EXPECT_EQ(rows[1].idempotency_key, "k1");
  EXPECT_EQ(SpentMicro(acme_, census_), 300'000);
  auto stored = store_->GetStoredResponse(acme_.id, "k1");
  ASSERT_OK(stored);
  EXPECT_EQ(stored->payload, "hello");
  EXPECT_EQ(stored->ledger_seq, 2);
  EXPECT_EQ(stored->params_digest, "digest");
  EXPECT_EQ(stored->request_kind, "NoisyCounts");
  EXPECT_TRUE(Verify().ok);
}

TEST_P(StoreTest, ChargeOverBudgetIsRefusedBeforeBodyRuns) {
  Grant(acme_, census_, 500'000);
  ASSERT_OK(Charge(Request(acme_, census_, "k1", 300'000)));
  const size_t rows_before = Ledger().size();

  bool called = false;
  auto refused = store_->Charge(Request(acme_, census_, "k2", 300'000), ++now_, Body(&called));
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kResourceExhausted, "left"));
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kResourceExhausted, "0.2"));
  EXPECT_FALSE(called);
  EXPECT_EQ(Ledger().size(), rows_before);
  EXPECT_EQ(SpentMicro(acme_, census_), 300'000);
  EXPECT_THAT(store_->GetStoredResponse(acme_.id, "k2"), StatusIs(absl::StatusCode::kNotFound));

  // What is left can still be spent exactly.
  ASSERT_OK(Charge(Request(acme_, census_, "k3", 200'000)));
  EXPECT_EQ(SpentMicro(acme_, census_), 500'000);
  EXPECT_TRUE(Verify().ok);
}

TEST_P(StoreTest, TenTenthsSpendExactlyOneAndTheEleventhIsRefused) {
  Grant(acme_, census_, 1'000'000, /*delta=*/0);
  for (int i = 0; i < 10; ++i) {
    ASSERT_OK(Charge(Request(acme_, census_, absl::StrCat("k", i), 100'000))) << i;
  }
  EXPECT_EQ(SpentMicro(acme_, census_), 1'000'000);
  bool called = false;
  EXPECT_THAT(store_->Charge(Request(acme_, census_, "k10", 100'000), ++now_, Body(&called)),
              StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_FALSE(called);
  // Even the smallest release no longer fits.
  EXPECT_THAT(Charge(Request(acme_, census_, "k11", 1)),
              StatusIs(absl::StatusCode::kResourceExhausted));
  auto budget = store_->GetBudget(acme_.id, census_.id);
  ASSERT_OK(budget);
  EXPECT_EQ(budget->spend.releases, 10);
  EXPECT_EQ(budget->spend.pure_micro, 1'000'000);
}

TEST_P(StoreTest, DatasetCapLimitsTheSumOverCompanies) {
  Grant(acme_, census_, 1'000'000);
  Grant(globex_, census_, 1'000'000);
  ASSERT_OK(store_->SetCap(census_.id, census_.name, 1'500'000, 0, ++now_));
  ASSERT_OK(Charge(Request(acme_, census_, "a1", 1'000'000)));

  // globex's own grant has room for 0.6, the cap does not.
  bool called = false;
  auto refused = store_->Charge(Request(globex_, census_, "g1", 600'000), ++now_, Body(&called));
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kResourceExhausted, "cap"));
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kResourceExhausted, "0.5 left"));
  EXPECT_FALSE(called);
  EXPECT_EQ(SpentMicro(globex_, census_), 0);

  ASSERT_OK(Charge(Request(globex_, census_, "g2", 500'000)));
  auto total = store_->GetDatasetSpend(census_.id);
  ASSERT_OK(total);
  EXPECT_EQ(total->pure_micro, 1'500'000);
  EXPECT_EQ(total->releases, 2);
  EXPECT_THAT(Charge(Request(globex_, census_, "g3", 1)),
              StatusIs(absl::StatusCode::kResourceExhausted, "cap"));
}

TEST_P(StoreTest, CapOnOtherDatasetDoesNotLimit) {
  DatasetRecord other = MakeDataset("other");
  Grant(acme_, census_, 1'000'000);
  ASSERT_OK(store_->SetCap(other.id, other.name, 1, 0, ++now_));
  EXPECT_OK(Charge(Request(acme_, census_, "k", 1'000'000)));
}

TEST_P(StoreTest, ReplayReturnsStoredPayloadWithoutCharging) {
  Grant(acme_, census_, 1'000'000);
  auto first = Charge(Request(acme_, census_, "k1", 400'000));
  ASSERT_OK(first);
  const size_t rows = Ledger().size();

  bool called = false;
  auto replay = store_->Charge(Request(acme_, census_, "k1", 400'000), ++now_,
                               [&](int64_t, const BudgetState&) -> absl::StatusOr<ChargeResult> {
                                 called = true;
                                 return ChargeResult{"different", std::nullopt, std::nullopt};
                               });
  ASSERT_OK(replay);
  EXPECT_TRUE(replay->replayed);
  EXPECT_EQ(replay->response_payload, first->response_payload);
  EXPECT_FALSE(called);
  EXPECT_EQ(Ledger().size(), rows);
  EXPECT_EQ(SpentMicro(acme_, census_), 400'000);

  // A replay is answered even when the budget could no longer pay for the request.
  ASSERT_OK(Charge(Request(acme_, census_, "k2", 600'000)));
  auto late = Charge(Request(acme_, census_, "k1", 400'000));
  ASSERT_OK(late);
  EXPECT_TRUE(late->replayed);
  EXPECT_EQ(late->response_payload, first->response_payload);
  EXPECT_EQ(SpentMicro(acme_, census_), 1'000'000);
}

TEST_P(StoreTest, IdempotencyKeysArePerAccount) {
  Grant(acme_, census_, 1'000'000);
  Grant(globex_, census_, 1'000'000);
  auto a = Charge(Request(acme_, census_, "same", 100'000, "d1"));
  auto g = Charge(Request(globex_, census_, "same", 100'000, "d2"));
  ASSERT_OK(a);
  ASSERT_OK(g);
  EXPECT_FALSE(g->replayed);
  EXPECT_EQ(SpentMicro(globex_, census_), 100'000);
}

TEST_P(StoreTest, SameKeyWithDifferentDigestIsRefused) {
  Grant(acme_, census_, 1'000'000);
  ASSERT_OK(Charge(Request(acme_, census_, "k1", 100'000, "digest-a")));
  const size_t rows = Ledger().size();
  bool called = false;
  EXPECT_THAT(
      store_->Charge(Request(acme_, census_, "k1", 100'000, "digest-b"), ++now_, Body(&called)),
      StatusIs(absl::StatusCode::kFailedPrecondition, "k1"));
  EXPECT_FALSE(called);
  EXPECT_EQ(Ledger().size(), rows);
  EXPECT_EQ(SpentMicro(acme_, census_), 100'000);
}

TEST_P(StoreTest, DatasetSpendSaturatesInsteadOfWrapping) {
  // Three companies each spend just under epsilon 1e6 with a tiny-sigma Gaussian: per company the
  // curve's top orders hold ~3.6e18 nano-units, so the dataset-wide sum of the three exceeds
  // INT64_MAX there. A wrapping sum turns those orders negative, the conversion then reports a
  // spend of 0, and a cap set afterwards admits anything.
  const AccountRecord initech = MakeAccount("initech", Role::kCompany);
  const AccountRecord hooli = MakeAccount("hooli", Role::kCompany);
  constexpr int64_t kHuge = 1'000'000'000'000;  // epsilon 1e6
  int i = 0;
  for (const AccountRecord* a : std::vector<const AccountRecord*>{&acme_, &globex_, &initech}) {
    Grant(*a, census_, kHuge, 1e-6);
    ChargeRequest r = Request(*a, census_, absl::StrCat("g", i++), 1);
    r.cost = core::accounting::GaussianCost(1.0, 7.5e-4);
    r.epsilon = 9.9e5;
    r.delta = 1e-6;
    r.mechanism = "discrete_gaussian";
    ASSERT_OK(Charge(r));
  }
  auto all = store_->GetDatasetSpend(census_.id);
  ASSERT_OK(all);
  EXPECT_EQ(all->releases, 3);
  for (int64_t v : all->rdp_all_nano) EXPECT_GE(v, 0);
  EXPECT_EQ(all->rdp_all_nano.back(), std::numeric_limits<int64_t>::max());
  EXPECT_GT(core::accounting::SpentEpsilonMicro(*all, 1e-6), 2 * kHuge);

  // The regulator caps the dataset at epsilon 10: nothing more may be released.
  ASSERT_OK(store_->SetCap(census_.id, census_.name, 10'000'000, 1e-6, ++now_));
  Grant(hooli, census_, 1'000'000, 1e-6);
  EXPECT_THAT(Charge(Request(hooli, census_, "after-cap", 100'000)),
              StatusIs(absl::StatusCode::kResourceExhausted, "dataset-wide cap"));
}

TEST_P(StoreTest, FailingBodyIsChargedAndReplaysItsFailure) {
  Grant(acme_, census_, 1'000'000);
  ASSERT_OK(Charge(Request(acme_, census_, "k0", 100'000)));
  const size_t rows = Ledger().size();

  // The body runs after the noise is drawn: a failure that depends on the noisy data must
  // not be retryable for free, so it is charged and stored.
  auto failed = store_->Charge(Request(acme_, census_, "k1", 300'000), ++now_,
                               [](int64_t, const BudgetState&) -> absl::StatusOr<ChargeResult> {
                                 return absl::InternalError("solver exploded");
                               });
  EXPECT_THAT(failed, StatusIs(absl::StatusCode::kInternal, "solver exploded"));
  EXPECT_THAT(failed, StatusIs(absl::StatusCode::kInternal, "charged"));
  EXPECT_EQ(Ledger().size(), rows + 1);
  EXPECT_EQ(SpentMicro(acme_, census_), 400'000);
  auto stored = store_->GetStoredResponse(acme_.id, "k1");
  ASSERT_OK(stored);
  EXPECT_THAT(stored->failure, StatusIs(absl::StatusCode::kInternal, "solver exploded"));
  EXPECT_TRUE(Verify().ok);

  // A replay returns the same failure without running the body or charging again.
  bool called = false;
  ArtifactRecord artifact{"art_x", acme_.id, census_.id, 0, now_, "body"};
  auto retry =
      store_->Charge(Request(acme_, census_, "k1", 300'000), ++now_, Body(&called, artifact));
  EXPECT_THAT(retry, StatusIs(absl::StatusCode::kInternal, "solver exploded"));
  EXPECT_FALSE(called);
  EXPECT_EQ(Ledger().size(), rows + 1);
  EXPECT_EQ(SpentMicro(acme_, census_), 400'000);
  EXPECT_THAT(store_->GetArtifact("art_x"), StatusIs(absl::StatusCode::kNotFound));
}

TEST_P(StoreTest, ChargeWithoutGrantIsPermissionDenied) {
  bool called = false;
  EXPECT_THAT(store_->Charge(Request(acme_, census_, "k1", 100'000), ++now_, Body(&called)),
              StatusIs(absl::StatusCode::kPermissionDenied, "no budget grant"));
  EXPECT_FALSE(called);
  EXPECT_TRUE(Ledger().empty());
  EXPECT_THAT(store_->GetBudget(acme_.id, census_.id), StatusIs(absl::StatusCode::kNotFound));
}

TEST_P(StoreTest, LoweredGrantStopsSpending) {
  Grant(acme_, census_, 1'000'000);
  ASSERT_OK(Charge(Request(acme_, census_, "k1", 600'000)));
  Grant(acme_, census_, 500'000);
  EXPECT_THAT(Charge(Request(acme_, census_, "k2", 1)),
              StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_EQ(SpentMicro(acme_, census_), 600'000);
  EXPECT_TRUE(Verify().ok);
}

// ---- persistence -------------------------------------------------------------------------------

TEST_P(StoreTest, EverythingSurvivesCloseAndReopen) {
  ASSERT_NO_FATAL_FAILURE(BuildLedger());
  bool called = false;
  ArtifactRecord artifact{"art_1", acme_.id, census_.id, 0, 77, "artifact-bytes"};
  auto with_artifact =
      store_->Charge(Request(acme_, census_, "k3", 100'000, "d3"), ++now_, Body(&called, artifact));
  ASSERT_OK(with_artifact);
  ASSERT_OK(store_->PutSubjectBatch(census_.id, "b1", "bd", 0, 3, "batch-bytes"));
  ASSERT_OK(store_->PutTable(TableRecord{"tbl_1", acme_.id, census_.id, 3, now_ + 1000, "tbl"}));
  const std::vector<LedgerRow> ledger_before = Ledger();
  const std::string head_before = Verify().head_hash;

  ASSERT_NO_FATAL_FAILURE(Reopen());

  auto accounts = store_->ListAccounts();
  ASSERT_OK(accounts);
  ASSERT_EQ(accounts->size(), 2u);
  auto acme = store_->GetAccountByName("acme");
  ASSERT_OK(acme);
  EXPECT_EQ(acme->id, acme_.id);
  EXPECT_EQ(acme->role, Role::kCompany);
  EXPECT_EQ(acme->key_salt, acme_.key_salt);  // binary salt with a NUL byte
  EXPECT_EQ(acme->key_hash, acme_.key_hash);
  EXPECT_EQ(acme->created_micros, acme_.created_micros);

  auto dataset = store_->GetDataset("census");
  ASSERT_OK(dataset);
  EXPECT_EQ(dataset->subject_count, 3);
  EXPECT_EQ(dataset->cap_micro, std::optional<int64_t>(5'000'000));
  auto digest = store_->GetBatchDigest(census_.id, "b1");
  ASSERT_OK(digest);
  EXPECT_EQ(*digest, "bd");

  auto budget = store_->GetBudget(acme_.id, census_.id);
  ASSERT_OK(budget);
  EXPECT_EQ(budget->grant.epsilon_micro, 2'000'000);
  EXPECT_EQ(budget->spend.releases, 3);
  EXPECT_EQ(budget->spent_micro, 850'000);
  auto grants = store_->ListGrants();
  ASSERT_OK(grants);
  EXPECT_EQ(grants->size(), 2u);

  const std::vector<LedgerRow> ledger_after = Ledger();
  ASSERT_EQ(ledger_after.size(), ledger_before.size());
  for (size_t i = 0; i < ledger_after.size(); ++i) {
    EXPECT_EQ(ledger_after[i].hash, ledger_before[i].hash);
    EXPECT_EQ(ledger_after[i].rdp_nano, ledger_before[i].rdp_nano);
  }
  const LedgerVerification v = Verify();
  EXPECT_TRUE(v.ok) << v.message;
  EXPECT_EQ(v.head_hash, head_before);

  auto stored = store_->GetStoredResponse(acme_.id, "k3");
  ASSERT_OK(stored);
  EXPECT_EQ(stored->payload, with_artifact->response_payload);
  auto art = store_->GetArtifact("art_1");
  ASSERT_OK(art);
  EXPECT_EQ(art->payload, "artifact-bytes");
  auto table = store_->GetTable("tbl_1");
  ASSERT_OK(table);
  EXPECT_EQ(table->payload, "tbl");

  // Replays still work and new charges continue the chain.
  auto replay = Charge(Request(acme_, census_, "k3", 100'000, "d3"));
  ASSERT_OK(replay);
  EXPECT_TRUE(replay->replayed);
  EXPECT_EQ(replay->response_payload, with_artifact->response_payload);
  ASSERT_OK(Charge(Request(acme_, census_, "k4", 100'000)));
  EXPECT_EQ(Ledger().back().seq, static_cast<int64_t>(ledger_before.size()) + 1);
  EXPECT_TRUE(Verify().ok);
}

// ---- datasets ----------------------------------------------------------------------------------

TEST_P(StoreTest, DeletedDatasetKeepsLedgerVerifiableAndIsNotReusedById) {
  Grant(acme_, census_, 1'000'000);
  ASSERT_OK(Charge(Request(acme_, census_, "k1", 700'000)));
  ASSERT_OK(store_->DeleteDataset(census_.id));
  EXPECT_THAT(store_->GetDataset("census"), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_EQ(Ledger().size(), 2u);  // ledger rows stay
  EXPECT_TRUE(Verify().ok);

  // A new dataset of the same name starts with a clean budget, and the ledger still verifies
  // once it is charged.
  DatasetRecord again = MakeDataset("census");
  EXPECT_NE(again.id, census_.id);
  Grant(acme_, again, 1'000'000);
  EXPECT_EQ(SpentMicro(acme_, again), 0);
  ASSERT_OK(Charge(Request(acme_, again, "k2", 500'000)));
  EXPECT_EQ(SpentMicro(acme_, again), 500'000);
  const LedgerVerification v = Verify();
  EXPECT_TRUE(v.ok) << v.message;
}

TEST_P(StoreTest, DeletedDatasetTakesItsArtifactsDecisionsWithIt) {
  Grant(acme_, census_, 1'000'000);
  DatasetRecord other = MakeDataset("other");
  Grant(acme_, other, 1'000'000);
  bool called = false;
  ASSERT_OK(
      store_->Charge(Request(acme_, census_, "k1", 100'000), ++now_,
                     Body(&called, ArtifactRecord{"art_c", acme_.id, census_.id, 0, 1, "c"})));
  ASSERT_OK(store_->Charge(Request(acme_, other, "k2", 100'000), ++now_,
                           Body(&called, ArtifactRecord{"art_o", acme_.id, other.id, 0, 1, "o"})));
  ASSERT_OK(store_->RecordDecisions("art_c", {{"s1", 1, 0}, {"s2", 0, 1}},
                                    AccessLogRow{0, now_, "acme", "census", "art_c", 2, 2}));
  ASSERT_OK(store_->RecordDecisions("art_o", {{"s1", 1, 1}},
                                    AccessLogRow{0, now_, "acme", "other", "art_o", 1, 1}));

  ASSERT_OK(store_->DeleteDataset(census_.id));

  const std::string s1 = "s1", s2 = "s2";
  const std::vector<const std::string*> keys = {&s1, &s2};
  auto gone = store_->GetDecisions("art_c", keys);
  ASSERT_OK(gone);
  EXPECT_TRUE(gone->empty());
  auto kept = store_->GetDecisions("art_o", keys);
  ASSERT_OK(kept);
  ASSERT_EQ(kept->size(), 1u);
  EXPECT_EQ(kept->at("s1").output, 1);
  // The decisions table holds nothing else.
  EXPECT_EQ(Scalar("SELECT COUNT(*) FROM decisions"), 1);
}

// Decisions and their access-log row are one transaction: a decision the store refuses (here
// a subject already decided, against the primary key) leaves no log row, and a logged call's
// decisions are all there.
TEST_P(StoreTest, DecisionsAndTheirAccessLogRowCommitTogether) {
  auto seq = store_->RecordDecisions("art", {{"s1", 1, 0}, {"s2", 0, 1}},
                                     AccessLogRow{0, 5, "acme", "census", "art", 3, 2});
  ASSERT_OK(seq);
  EXPECT_THAT(store_->RecordDecisions("art", {{"s3", 1, 1}, {"s1", 1, 1}},
                                      AccessLogRow{0, 6, "acme", "census", "art", 2, 2}),
              ::testing::Not(IsOk()));
  auto log = store_->ListAccessLog(LedgerFilter{});
  ASSERT_OK(log);
  ASSERT_EQ(log->size(), 1u);
  EXPECT_EQ((*log)[0].seq, *seq);
  EXPECT_EQ((*log)[0].rows, 3);
  EXPECT_EQ((*log)[0].new_decisions, 2);
  EXPECT_EQ(Scalar("SELECT COUNT(*) FROM decisions"), 2);  // s3 rolled back
}

// SQLite's migrations from versions that shipped before PostgreSQL existed.
class SqliteMigrationTest : public StoreTest {};

TEST_P(SqliteMigrationTest, DatabaseFromBeforeStoredFailuresIsMigratedOnOpen) {
  Grant(acme_, census_, 1'000'000);
  ASSERT_OK(Charge(Request(acme_, census_, "k1", 100'000)));
  const std::string payload = store_->GetStoredResponse(acme_.id, "k1")->payload;
  store_.reset();
  // The responses table as the first release shipped it, holding the stored response.
  ASSERT_EQ(Raw("CREATE TABLE old_responses("
                "  account_id INTEGER NOT NULL, idempotency_key TEXT NOT NULL,"
                "  request_kind TEXT NOT NULL, params_digest TEXT NOT NULL,"
                "  ledger_seq INTEGER NOT NULL, payload BLOB NOT NULL,"
                "  PRIMARY KEY(account_id, idempotency_key));"
                "INSERT INTO old_responses SELECT account_id, idempotency_key, request_kind,"
                "  params_digest, ledger_seq, payload FROM responses;"
                "DROP TABLE responses; ALTER TABLE old_responses RENAME TO responses;"
                "PRAGMA user_version=0"),
            "");

  ASSERT_NO_FATAL_FAILURE(Reopen());
  // The old response still replays, and new charges (which store failures) work.
  auto replay = Charge(Request(acme_, census_, "k1", 100'000));
  ASSERT_OK(replay);
  EXPECT_TRUE(replay->replayed);
  EXPECT_EQ(replay->response_payload, payload);
  ASSERT_OK(Charge(Request(acme_, census_, "k2", 100'000)));
  EXPECT_EQ(SpentMicro(acme_, census_), 200'000);
  EXPECT_EQ(Scalar("PRAGMA user_version"), 4);
  // Opening again is a no-op.
  ASSERT_NO_FATAL_FAILURE(Reopen());
  EXPECT_EQ(SpentMicro(acme_, census_), 200'000);
}

TEST_P(SqliteMigrationTest, AccessLogFromVersion1IsMigratedOnOpen) {
  store_.reset();
  // The access log as schema version 1 had it, with one logged call.
  ASSERT_EQ(Raw("DROP TABLE access_log;"
                "CREATE TABLE access_log(seq INTEGER PRIMARY KEY AUTOINCREMENT,"
                "  time_micros INTEGER NOT NULL, account TEXT NOT NULL, dataset TEXT NOT NULL,"
                "  artifact_id TEXT NOT NULL, rows INTEGER NOT NULL);"
                "INSERT INTO access_log(time_micros, account, dataset, artifact_id, rows)"
                "  VALUES(7, 'acme', 'census', 'art', 40);"
                "PRAGMA user_version=1"),
            "");
  ASSERT_NO_FATAL_FAILURE(Reopen());
  ASSERT_OK(store_->RecordDecisions("art", {{"s1", 1, 0}},
                                    AccessLogRow{0, 8, "acme", "census", "art", 1, 1}));
  auto log = store_->ListAccessLog(LedgerFilter{});
  ASSERT_OK(log);
  ASSERT_EQ(log->size(), 2u);
  EXPECT_EQ((*log)[0].rows, 40);
  EXPECT_EQ((*log)[0].new_decisions, -1);  // not recorded then
  EXPECT_EQ((*log)[1].new_decisions, 1);
  EXPECT_EQ(Scalar("PRAGMA user_version"), 4);
}

TEST_P(StoreTest, SubjectBatchesAccumulateInOrder) {
  ASSERT_OK(store_->PutSubjectBatch(census_.id, "b1", "d1", 0, 2, "one"));
  // An importer whose index predates b1 (another process imported it meanwhile) is refused,
  // and stores nothing: its keys were not checked against b1's.
  EXPECT_THAT(store_->PutSubjectBatch(census_.id, "b2", "d2", 0, 5, "two"),
              StatusIs(absl::StatusCode::kAborted, "another vault process"));
  EXPECT_THAT(store_->GetBatchDigest(census_.id, "b2"), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_EQ(store_->GetDatasetById(census_.id)->subject_count, 2);
  ASSERT_OK(store_->PutSubjectBatch(census_.id, "b2", "d2", 2, 5, "two"));
  EXPECT_THAT(store_->PutSubjectBatch(census_.id, "b1", "d1", 7, 2, "one"),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  auto d = store_->GetDataset("census");
  ASSERT_OK(d);
  EXPECT_EQ(d->subject_count, 7);
  std::vector<std::string> payloads;
  ASSERT_OK(store_->ForEachSubjectBatch(census_.id, [&](const std::string& p) {
    payloads.push_back(p);
    return absl::OkStatus();
  }));
  EXPECT_THAT(payloads, ::testing::ElementsAre("one", "two"));
  EXPECT_THAT(store_->GetBatchDigest(census_.id, "b3"), StatusIs(absl::StatusCode::kNotFound));
}

TEST_P(StoreTest, DuplicateNamesAreAlreadyExists) {
  AccountRecord a;
  a.name = "acme";
  EXPECT_THAT(store_->CreateAccount(a), StatusIs(absl::StatusCode::kAlreadyExists, "acme"));
  DatasetRecord d;
  d.name = "census";
  EXPECT_THAT(store_->CreateDataset(d), StatusIs(absl::StatusCode::kAlreadyExists, "census"));
}

// ---- tables ------------------------------------------------------------------------------------

TEST_P(StoreTest, PurgeExpiredTablesRemovesOnlyExpiredOnes) {
  ASSERT_OK(store_->PutTable(TableRecord{"t100", acme_.id, census_.id, 1, 100, "a"}));
  ASSERT_OK(store_->PutTable(TableRecord{"t200", acme_.id, census_.id, 1, 200, "b"}));
  ASSERT_OK(store_->PutTable(TableRecord{"t300", globex_.id, census_.id, 1, 300, "c"}));

  auto purged = store_->PurgeExpiredTables(200);  // t200 expires at 200: still valid
  ASSERT_OK(purged);
  EXPECT_EQ(*purged, 1);
  EXPECT_THAT(store_->GetTable("t100"), StatusIs(absl::StatusCode::kNotFound, "t100"));
  EXPECT_OK(store_->GetTable("t200"));
  EXPECT_OK(store_->GetTable("t300"));

  purged = store_->PurgeExpiredTables(250);
  ASSERT_OK(purged);
  EXPECT_EQ(*purged, 1);
  EXPECT_THAT(store_->GetTable("t200"), StatusIs(absl::StatusCode::kNotFound));
  auto kept = store_->GetTable("t300");
  ASSERT_OK(kept);
  EXPECT_EQ(kept->account_id, globex_.id);
  EXPECT_EQ(kept->payload, "c");

  purged = store_->PurgeExpiredTables(250);
  ASSERT_OK(purged);
  EXPECT_EQ(*purged, 0);
}

// ---- training jobs -----------------------------------------------------------------------------

// A job record as a FitFairModel submission would hand it to the charge.
JobRecord NewJob(const std::string& id, const AccountRecord& a, const DatasetRecord& d,
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

TEST_P(StoreJobTest, JobIsCreatedQueuedWithItsCharge) {
  const int64_t before = SpentMicro(acme_, census_);
  const int64_t seq = Submit(NewJob("job_a", acme_, census_));
  ASSERT_GT(seq, 0);
  const JobRecord job = Job("job_a");
  EXPECT_EQ(job.state, JobState::kQueued);
  EXPECT_EQ(job.ledger_seq, seq);
  EXPECT_EQ(job.account_id, acme_.id);
  EXPECT_EQ(job.dataset_id, census_.id);
  EXPECT_EQ(job.idempotency_key, "key-job_a");
  EXPECT_EQ(job.table_handle, "tbl_job");
  EXPECT_EQ(job.algorithm, 2);
  EXPECT_EQ(job.request, std::string("req\0uest", 8));
  EXPECT_EQ(job.plan, "plan");
  EXPECT_EQ(job.seed, std::string(32, '\x01'));
  EXPECT_EQ(job.subject_limit, 30);
  EXPECT_EQ(job.done, 0);
  EXPECT_EQ(job.total, 50);
  EXPECT_EQ(job.submitted_micros, now_);
  EXPECT_EQ(job.started_micros, 0);
  EXPECT_EQ(job.finished_micros, 0);
  EXPECT_EQ(job.attempts, 0);
  EXPECT_EQ(SpentMicro(acme_, census_), before + 100'000);
  EXPECT_EQ(Ledger().back().seq, seq);
  EXPECT_THAT(store_->GetJob("job_zzz"), StatusIs(absl::StatusCode::kNotFound, "job_zzz"));

  // A replay of the submission returns the stored response and creates nothing more.
  bool called = false;
  auto replay =
      store_->Charge(Request(acme_, census_, "key-job_a", 100'000), ++now_, Body(&called));
  ASSERT_OK(replay);
  EXPECT_TRUE(replay->replayed);
  EXPECT_FALSE(called);
  auto all = store_->ListJobs(JobFilter{});
  ASSERT_OK(all);
  EXPECT_EQ(all->size(), 1u);
}

TEST_P(StoreJobTest, FailingBodyIsChargedButCreatesNoJob) {
  const size_t rows = Ledger().size();
  auto failed = store_->Charge(Request(acme_, census_, "k1", 100'000), ++now_,
                               [](int64_t, const BudgetState&) -> absl::StatusOr<ChargeResult> {
                                 return absl::InvalidArgumentError("bad plan");
                               });
  EXPECT_THAT(failed, StatusIs(absl::StatusCode::kInvalidArgument, "bad plan"));
  EXPECT_EQ(Ledger().size(), rows + 1);  // charged, as every failed release
  EXPECT_EQ(Scalar("SELECT COUNT(*) FROM jobs"), 0);

  // A body that fails after building its job still creates none: the job is only the
  // successful result's.
  JobRecord job = NewJob("job_f", acme_, census_);
  auto also_failed =
      store_->Charge(Request(acme_, census_, "k2", 100'000), ++now_,
                     [&](int64_t, const BudgetState&) -> absl::StatusOr<ChargeResult> {
                       ChargeResult result{"x", std::nullopt, job};
                       (void)result;
                       return absl::InternalError("solver exploded");
                     });
  EXPECT_THAT(also_failed, StatusIs(absl::StatusCode::kInternal));
  EXPECT_THAT(store_->GetJob("job_f"), StatusIs(absl::StatusCode::kNotFound));

  // A refused charge (over budget) creates no job and no ledger row.
  bool called = false;
  EXPECT_THAT(store_->Charge(Request(acme_, census_, "k3", 100'000'000), ++now_, Body(&called)),
              StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_EQ(Scalar("SELECT COUNT(*) FROM jobs"), 0);
}

TEST_P(StoreJobTest, AJobThatCannotBeStoredRollsBackItsCharge) {
  ASSERT_GT(Submit(NewJob("job_a", acme_, census_)), 0);
  const size_t rows = Ledger().size();
  const int64_t spent = SpentMicro(acme_, census_);
  JobRecord duplicate = NewJob("job_a", acme_, census_);
  duplicate.idempotency_key = "other-key";
  auto charged = store_->Charge(Request(acme_, census_, "other-key", 100'000), ++now_,
                                [&](int64_t, const BudgetState&) -> absl::StatusOr<ChargeResult> {
                                  return ChargeResult{"x", std::nullopt, duplicate};
                                });
  EXPECT_THAT(charged, ::testing::Not(IsOk()));
  EXPECT_EQ(Ledger().size(), rows);
  EXPECT_EQ(SpentMicro(acme_, census_), spent);
  EXPECT_THAT(store_->GetStoredResponse(acme_.id, "other-key"),
              StatusIs(absl::StatusCode::kNotFound));
  EXPECT_TRUE(Verify().ok);
}

TEST_P(StoreJobTest, StartClaimsAQueuedJobOnce) {
  ASSERT_GT(Submit(NewJob("job_a", acme_, census_)), 0);
  auto started = store_->StartJob("job_a", Lease(5'000));
  ASSERT_OK(started);
  EXPECT_EQ(started->state, JobState::kRunning);
  EXPECT_EQ(started->attempts, 1);
  EXPECT_EQ(started->started_micros, 5'000);
  EXPECT_THAT(store_->StartJob("job_a", Lease(6'000)),
              StatusIs(absl::StatusCode::kFailedPrecondition, "running"));
  EXPECT_THAT(store_->StartJob("job_zzz", Lease(6'000)), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_EQ(Job("job_a").started_micros, 5'000);
}

TEST_P(StoreJobTest, OfTwoThreadsClaimingTheSameJobExactlyOneWins) {
  for (int round = 0; round < 20; ++round) {
    const std::string id = absl::StrCat("job_", round);
    ASSERT_GT(Submit(NewJob(id, acme_, census_)), 0);
    std::atomic<int> wins{0}, refusals{0};
    std::atomic<bool> go{false};
    auto claim = [&] {
      while (!go.load()) std::this_thread::yield();
      auto s = store_->StartJob(id, Lease(7'000));
      if (s.ok()) {
        ++wins;
      } else if (absl::IsFailedPrecondition(s.status())) {
        ++refusals;
      }
    };
    std::thread a(claim), b(claim);
    go = true;
    a.join();
    b.join();
    EXPECT_EQ(wins.load(), 1) << id;
    EXPECT_EQ(refusals.load(), 1) << id;
    EXPECT_EQ(Job(id).attempts, 1) << id;
  }
}

TEST_P(StoreJobTest, ProgressIsRecordedOnlyWhileRunning) {
  ASSERT_GT(Submit(NewJob("job_a", acme_, census_)), 0);
  ASSERT_OK(store_->UpdateJobProgress("job_a", kOwner, 5, 60));  // queued: ignored
  EXPECT_EQ(Job("job_a").done, 0);
  ASSERT_OK(store_->StartJob("job_a", Lease(1)));
  ASSERT_OK(store_->UpdateJobProgress("job_a", kOwner, 5, 60));
  EXPECT_EQ(Job("job_a").done, 5);
  EXPECT_EQ(Job("job_a").total, 60);
}

TEST_P(StoreJobTest, FinishStoresTheArtifactAndSucceeds) {
  const int64_t seq = Submit(NewJob("job_a", acme_, census_));
  ASSERT_OK(store_->StartJob("job_a", Lease(1'000)));
  ASSERT_OK(store_->UpdateJobProgress("job_a", kOwner, 10, 50));
  ASSERT_OK(store_->FinishJob("job_a", kOwner,
                              ArtifactRecord{"art_j", acme_.id, census_.id, 0, 9, "model"}, 2'000));
  const JobRecord job = Job("job_a");
  EXPECT_EQ(job.state, JobState::kSucceeded);
  EXPECT_EQ(job.artifact_id, "art_j");
  EXPECT_EQ(job.finished_micros, 2'000);
  EXPECT_EQ(job.done, 50);  // throttled progress ends at the total
  EXPECT_TRUE(job.error.empty());
  auto art = store_->GetArtifact("art_j");
  ASSERT_OK(art);
  EXPECT_EQ(art->payload, "model");
  EXPECT_EQ(art->ledger_seq, seq);  // paid by the submission's charge
  // Finishing twice is refused and changes nothing.
  EXPECT_THAT(store_->FinishJob("job_a", kOwner,
                                ArtifactRecord{"art_k", acme_.id, census_.id, 0, 9, "m"}, 3'000),
              StatusIs(absl::StatusCode::kFailedPrecondition, "succeeded"));
  EXPECT_THAT(store_->GetArtifact("art_k"), StatusIs(absl::StatusCode::kNotFound));
  // Cancelling a finished job returns it unchanged.
  auto cancelled = store_->CancelJob("job_a", 4'000);
  ASSERT_OK(cancelled);
  EXPECT_EQ(cancelled->state, JobState::kSucceeded);
  EXPECT_EQ(cancelled->finished_micros, 2'000);
}

TEST_P(StoreJobTest, FinishAfterCancelIsRefusedAndStoresNoArtifact) {
  ASSERT_GT(Submit(NewJob("job_a", acme_, census_)), 0);
  ASSERT_OK(store_->StartJob("job_a", Lease(1'000)));
  auto cancelled = store_->CancelJob("job_a", 1'500);
  ASSERT_OK(cancelled);
  EXPECT_EQ(cancelled->state, JobState::kCancelled);
  EXPECT_EQ(cancelled->finished_micros, 1'500);
  EXPECT_THAT(cancelled->error, HasSubstr("cancelled"));
  EXPECT_THAT(store_->FinishJob("job_a", kOwner,
                                ArtifactRecord{"art_j", acme_.id, census_.id, 0, 9, "m"}, 2'000),
              StatusIs(absl::StatusCode::kFailedPrecondition, "cancelled"));
  EXPECT_THAT(store_->GetArtifact("art_j"), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(store_->FailJob("job_a", kOwner, "late", 2'000),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  const JobRecord job = Job("job_a");
  EXPECT_EQ(job.state, JobState::kCancelled);
  EXPECT_TRUE(job.artifact_id.empty());
  // A cancelled job cannot be claimed again.
  EXPECT_THAT(store_->StartJob("job_a", Lease(3'000)),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  // A queued job can be cancelled too.
  ASSERT_GT(Submit(NewJob("job_b", acme_, census_)), 0);
  auto queued = store_->CancelJob("job_b", 3'500);
  ASSERT_OK(queued);
  EXPECT_EQ(queued->state, JobState::kCancelled);
  EXPECT_EQ(queued->started_micros, 0);
  EXPECT_THAT(store_->CancelJob("job_zzz", 1), StatusIs(absl::StatusCode::kNotFound));
}

TEST_P(StoreJobTest, FailRecordsTheErrorOfARunningJob) {
  ASSERT_GT(Submit(NewJob("job_a", acme_, census_)), 0);
  EXPECT_THAT(store_->FailJob("job_a", kOwner, "too early", 1),
              StatusIs(absl::StatusCode::kFailedPrecondition, "queued"));
  ASSERT_OK(store_->StartJob("job_a", Lease(1'000)));
  ASSERT_OK(store_->FailJob("job_a", kOwner, "features are constant", 2'000));
  const JobRecord job = Job("job_a");
  EXPECT_EQ(job.state, JobState::kFailed);
  EXPECT_EQ(job.error, "features are constant");
  EXPECT_EQ(job.finished_micros, 2'000);
  EXPECT_THAT(store_->FailJob("job_zzz", kOwner, "x", 1), StatusIs(absl::StatusCode::kNotFound));
}

TEST_P(StoreJobTest, AnotherRunnerTakesOverOnlyAfterTheLeaseEnds) {
  for (const char* id : {"job_1", "job_2", "job_3"}) {
    ASSERT_GT(Submit(NewJob(id, acme_, census_)), 0);
  }
  ASSERT_OK(store_->StartJob("job_1", Lease(1'000)));  // lease until 1'001'000
  ASSERT_OK(store_->UpdateJobProgress("job_1", kOwner, 7, 50));
  ASSERT_OK(store_->StartJob("job_2", Lease(1'000)));
  ASSERT_OK(store_->FailJob("job_2", kOwner, "x", 1'100));

  // While the lease lasts, no one else may claim the job, and renewing extends it.
  EXPECT_THAT(store_->StartJob("job_1", Lease(500'000, "runner-b")),
              StatusIs(absl::StatusCode::kFailedPrecondition, "lease"));
  ASSERT_OK(store_->RenewJobLease("job_1", Lease(900'000)));  // now until 1'900'000
  EXPECT_THAT(store_->StartJob("job_1", Lease(1'500'000, "runner-b")),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(Job("job_1").lease_expires_micros, 1'900'000);

  // Once it ended (the runner died), another runner takes over and starts from scratch.
  auto taken = store_->StartJob("job_1", Lease(2'000'000, "runner-b"));
  ASSERT_OK(taken);
  EXPECT_EQ(taken->attempts, 2);
  EXPECT_EQ(taken->done, 0);
  EXPECT_EQ(taken->lease_owner, "runner-b");
  EXPECT_EQ(taken->started_micros, 2'000'000);
  // The old holder can no longer renew, report progress, finish or fail it.
  EXPECT_THAT(store_->RenewJobLease("job_1", Lease(2'100'000)),
              StatusIs(absl::StatusCode::kFailedPrecondition, "taken over"));
  ASSERT_OK(store_->UpdateJobProgress("job_1", kOwner, 9, 50));  // ignored
  EXPECT_EQ(Job("job_1").done, 0);
  EXPECT_THAT(
      store_->FinishJob("job_1", kOwner, ArtifactRecord{"art_old", acme_.id, census_.id, 0, 9, "m"},
                        2'200'000),
      StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(store_->FailJob("job_1", kOwner, "late", 2'200'000),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(store_->GetArtifact("art_old"), StatusIs(absl::StatusCode::kNotFound));
  ASSERT_OK(store_->FinishJob(
      "job_1", "runner-b", ArtifactRecord{"art_new", acme_.id, census_.id, 0, 9, "m"}, 2'300'000));
  EXPECT_EQ(Job("job_1").state, JobState::kSucceeded);

  // A released lease (expiry 0, at shutdown) is claimable at once; finished jobs never are.
  ASSERT_OK(store_->StartJob("job_3", Lease(3'000'000)));
  ASSERT_OK(store_->RenewJobLease("job_3", JobLease{kOwner, 0, 0}));
  ASSERT_OK(store_->StartJob("job_3", Lease(3'000'001, "runner-b")));
  EXPECT_THAT(store_->StartJob("job_2", Lease(9'000'000'000, "runner-b")),
              StatusIs(absl::StatusCode::kFailedPrecondition, "failed"));
  auto unfinished = store_->ListUnfinishedJobs();
  ASSERT_OK(unfinished);
  EXPECT_THAT(Ids(*unfinished), ::testing::ElementsAre("job_3"));
}

TEST_P(StoreJobTest, ListIsNewestFirstWithFilters) {
  DatasetRecord other = MakeDataset("other");
  Grant(acme_, other, 10'000'000);
  ASSERT_GT(Submit(NewJob("job_1", acme_, census_)), 0);
  ASSERT_GT(Submit(NewJob("job_2", globex_, census_)), 0);
  ASSERT_GT(Submit(NewJob("job_3", acme_, other)), 0);
  ASSERT_GT(Submit(NewJob("job_4", acme_, census_)), 0);

  auto all = store_->ListJobs(JobFilter{});
  ASSERT_OK(all);
  EXPECT_THAT(Ids(*all), ::testing::ElementsAre("job_4", "job_3", "job_2", "job_1"));
  auto acme = store_->ListJobs(JobFilter{acme_.id, std::nullopt, 100});
  ASSERT_OK(acme);
  EXPECT_THAT(Ids(*acme), ::testing::ElementsAre("job_4", "job_3", "job_1"));
  auto census = store_->ListJobs(JobFilter{std::nullopt, census_.id, 100});
  ASSERT_OK(census);
  EXPECT_THAT(Ids(*census), ::testing::ElementsAre("job_4", "job_2", "job_1"));
  auto both = store_->ListJobs(JobFilter{acme_.id, census_.id, 1});
  ASSERT_OK(both);
  EXPECT_THAT(Ids(*both), ::testing::ElementsAre("job_4"));
}

TEST_P(StoreJobTest, PurgeKeepsTheTableOfAnUnfinishedJob) {
  ASSERT_OK(store_->PutTable(TableRecord{"t_queued", acme_.id, census_.id, 1, 100, "a"}));
  ASSERT_OK(store_->PutTable(TableRecord{"t_running", acme_.id, census_.id, 1, 100, "b"}));
  ASSERT_OK(store_->PutTable(TableRecord{"t_done", acme_.id, census_.id, 1, 100, "c"}));
  ASSERT_OK(store_->PutTable(TableRecord{"t_free", acme_.id, census_.id, 1, 100, "d"}));
  ASSERT_GT(Submit(NewJob("job_q", acme_, census_, "t_queued")), 0);
  ASSERT_GT(Submit(NewJob("job_r", acme_, census_, "t_running")), 0);
  ASSERT_GT(Submit(NewJob("job_d", acme_, census_, "t_done")), 0);
  ASSERT_OK(store_->StartJob("job_r", Lease(1)));
  ASSERT_OK(store_->StartJob("job_d", Lease(1)));
  ASSERT_OK(store_->FailJob("job_d", kOwner, "x", 2));

  auto purged = store_->PurgeExpiredTables(1'000);
  ASSERT_OK(purged);
  EXPECT_EQ(*purged, 2);
  EXPECT_OK(store_->GetTable("t_queued"));
  EXPECT_OK(store_->GetTable("t_running"));
  EXPECT_THAT(store_->GetTable("t_done"), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(store_->GetTable("t_free"), StatusIs(absl::StatusCode::kNotFound));

  // Once its job finishes, an expired table goes with the next purge.
  ASSERT_OK(store_->CancelJob("job_q", 3));
  purged = store_->PurgeExpiredTables(1'000);
  ASSERT_OK(purged);
  EXPECT_EQ(*purged, 1);
  EXPECT_THAT(store_->GetTable("t_queued"), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_OK(store_->GetTable("t_running"));
}

TEST_P(StoreJobTest, DeletedDatasetTakesItsJobsWithIt) {
  DatasetRecord other = MakeDataset("other");
  Grant(acme_, other, 10'000'000);
  ASSERT_GT(Submit(NewJob("job_c", acme_, census_)), 0);
  ASSERT_GT(Submit(NewJob("job_o", acme_, other)), 0);
  ASSERT_OK(store_->StartJob("job_c", Lease(1)));
  ASSERT_OK(store_->DeleteDataset(census_.id));
  EXPECT_THAT(store_->GetJob("job_c"), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_OK(store_->GetJob("job_o"));
  auto unfinished = store_->ListUnfinishedJobs();
  ASSERT_OK(unfinished);
  EXPECT_THAT(Ids(*unfinished), ::testing::ElementsAre("job_o"));
  // The runner of a deleted job finds it gone.
  EXPECT_THAT(store_->FinishJob("job_c", kOwner,
                                ArtifactRecord{"art_c", acme_.id, census_.id, 0, 1, "m"}, 2),
              StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(store_->GetArtifact("art_c"), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_TRUE(Verify().ok);
}

TEST_P(StoreJobTest, JobsSurviveCloseAndReopen) {
  const int64_t seq = Submit(NewJob("job_a", acme_, census_));
  ASSERT_GT(Submit(NewJob("job_b", globex_, census_)), 0);
  ASSERT_OK(store_->StartJob("job_a", Lease(1'000)));
  ASSERT_OK(store_->UpdateJobProgress("job_a", kOwner, 3, 50));
  const JobRecord before = Job("job_a");

  ASSERT_NO_FATAL_FAILURE(Reopen());

  const JobRecord after = Job("job_a");
  EXPECT_EQ(after.state, JobState::kRunning);
  EXPECT_EQ(after.ledger_seq, seq);
  EXPECT_EQ(after.seed, before.seed);
  EXPECT_EQ(after.request, before.request);
  EXPECT_EQ(after.plan, before.plan);
  EXPECT_EQ(after.done, 3);
  EXPECT_EQ(after.attempts, 1);
  EXPECT_EQ(after.started_micros, 1'000);
  EXPECT_EQ(Job("job_b").state, JobState::kQueued);
  // The process that held it died with the store closed: another takes it over later.
  ASSERT_OK(store_->StartJob("job_a", Lease(2'000'000, "runner-b")));
  ASSERT_OK(store_->FinishJob("job_a", "runner-b",
                              ArtifactRecord{"art_a", acme_.id, census_.id, 0, 1, "m"}, 3'000));

  ASSERT_NO_FATAL_FAILURE(Reopen());
  EXPECT_EQ(Job("job_a").state, JobState::kSucceeded);
  EXPECT_EQ(Job("job_a").attempts, 2);
  EXPECT_OK(store_->GetArtifact("art_a"));
  EXPECT_TRUE(Verify().ok);
}

class SqliteJobMigrationTest : public StoreJobTest {};

TEST_P(SqliteJobMigrationTest, DatabaseFromVersion2GainsTheJobsTableOnOpen) {
  store_.reset();
  ASSERT_EQ(Raw("DROP TABLE jobs; PRAGMA user_version=2"), "");
  ASSERT_NO_FATAL_FAILURE(Reopen());
  EXPECT_EQ(Scalar("PRAGMA user_version"), 4);
  ASSERT_GT(Submit(NewJob("job_a", acme_, census_)), 0);
  EXPECT_EQ(Job("job_a").state, JobState::kQueued);
}

TEST_P(SqliteJobMigrationTest, DatabaseFromVersion3GainsJobLeasesOnOpen) {
  ASSERT_GT(Submit(NewJob("job_a", acme_, census_)), 0);
  store_.reset();
  ASSERT_EQ(Raw("ALTER TABLE jobs DROP COLUMN lease_owner; "
                "ALTER TABLE jobs DROP COLUMN lease_expires_micros; PRAGMA user_version=3"),
            "");
  ASSERT_NO_FATAL_FAILURE(Reopen());
  EXPECT_EQ(Scalar("PRAGMA user_version"), 4);
  auto started = store_->StartJob("job_a", Lease(5'000));
  ASSERT_OK(started);
  EXPECT_EQ(started->lease_owner, kOwner);
  EXPECT_EQ(started->lease_expires_micros, 1'005'000);
}

TEST_P(StoreTest, SchemaVersionIsRecordedAndReopeningKeepsIt) {
  const std::string query =
      GetParam() == Backend::kSqlite ? "PRAGMA user_version" : "SELECT version FROM schema_version";
  EXPECT_EQ(Scalar(query), 4);
  ASSERT_NO_FATAL_FAILURE(Reopen());
  EXPECT_EQ(Scalar(query), 4);
  if (GetParam() == Backend::kPostgres) {
    EXPECT_EQ(Scalar("SELECT COUNT(*) FROM schema_version"), 1);
  }
}

// What replicas do: several store instances (each its own connections, as separate processes
// have) charge one grant and one dataset cap at once. Exactly the admissible number of
// releases succeed, every seq is used once, and the ledger verifies.
TEST_P(StoreTest, ChargesFromSeveralStoresOnOneDatabaseNeverOverspend) {
  Grant(acme_, census_, 3'000'000);  // 30 releases of 0.1 by the grant...
  Grant(globex_, census_, 3'000'000);
  ASSERT_OK(store_->SetCap(census_.id, census_.name, 4'500'000, 0, ++now_));  // ...45 by the cap
  std::vector<std::unique_ptr<Store>> stores;
  for (int i = 0; i < 2; ++i) {
    auto another = OpenAnother();
    ASSERT_OK(another);
    stores.push_back(*std::move(another));
  }
  constexpr int kThreads = 16, kAttempts = 8;  // 128 attempts
  std::atomic<int> admitted{0}, refused{0}, other{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Store* store = stores[t % 2].get();
      const AccountRecord& who = t % 4 < 2 ? acme_ : globex_;
      for (int i = 0; i < kAttempts; ++i) {
        bool called = false;
        auto outcome = store->Charge(Request(who, census_, absl::StrCat("t", t, "-", i), 100'000),
                                     now_ + 1 + t * kAttempts + i, Body(&called));
        if (outcome.ok()) {
          ++admitted;
        } else if (absl::IsResourceExhausted(outcome.status())) {
          EXPECT_FALSE(called);  // refused before the body ran
          ++refused;
        } else {
          ADD_FAILURE() << outcome.status();
          ++other;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(admitted.load(), 45);
  EXPECT_EQ(refused.load(), kThreads * kAttempts - 45);
  EXPECT_EQ(other.load(), 0);
  const std::vector<LedgerRow> rows = Ledger();
  int charges = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].seq, static_cast<int64_t>(i + 1));
    charges += rows[i].kind == "charge";
  }
  EXPECT_EQ(charges, 45);
  EXPECT_LE(SpentMicro(acme_, census_), 3'000'000);
  EXPECT_LE(SpentMicro(globex_, census_), 3'000'000);
  EXPECT_EQ(SpentMicro(acme_, census_) + SpentMicro(globex_, census_), 4'500'000);
  const LedgerVerification v = Verify();
  EXPECT_TRUE(v.ok) << v.message;
  EXPECT_EQ(v.rows_checked, static_cast<int64_t>(rows.size()));
}

INSTANTIATE_TEST_SUITE_P(Backends, StoreTest,
                         ::testing::Values(Backend::kSqlite, Backend::kPostgres), BackendName);
INSTANTIATE_TEST_SUITE_P(Backends, StoreJobTest,
                         ::testing::Values(Backend::kSqlite, Backend::kPostgres), BackendName);
INSTANTIATE_TEST_SUITE_P(Sqlite, SqliteMigrationTest, ::testing::Values(Backend::kSqlite),
                         BackendName);
INSTANTIATE_TEST_SUITE_P(Sqlite, SqliteJobMigrationTest, ::testing::Values(Backend::kSqlite),
                         BackendName);

}  // namespace
}  // namespace fairvault::server::storage
