// What a client of a PostgreSQL-backed vault learns when the database fails (issue 19 §2):
// that it is unavailable and to retry, never where the database is (socket directory, host,
// port) or who connects to it (user, database name, password). libpq's own text goes to the
// server's log, without the password. This binary starts (and stops) its own PostgreSQL.
#include "server/storage/postgres/pg_store.h"

#include <libpq-fe.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/storage/postgres/statement.h"
#include "server/storage/postgres/test_postgres.h"
#include "server/storage/store_common.h"

namespace fairvault::server::storage {
namespace {

using ::fairvault::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kDatabase[] = "ledgerdb7";

// None of what locates or identifies the database: the socket directory (libpq's "host"), the
// port (5433, also in the socket's name), the user, the database name.
void ExpectNoConnectionDetails(const absl::Status& status, const TestPostgres& pg) {
  const std::string message(status.message());
  for (const std::string& detail :
       std::vector<std::string>{pg.dir(), "5433", ".s.PGSQL", "socket", "fairvault", kDatabase}) {
    EXPECT_THAT(message, Not(HasSubstr(detail))) << status;
  }
}

TEST(PgStoreUnavailableTest, AStoppedServerIsUnavailableWithoutConnectionDetails) {
  // Commits on disk before they return: the server is stopped like a crash below, and what
  // was committed must be there when it comes back.
  TestPostgres::Options durable;
  durable.fsync = true;
  auto pg = TestPostgres::Start(durable);
  ASSERT_OK(pg);
  auto uri = (*pg)->CreateDatabase(kDatabase);
  ASSERT_OK(uri);
  auto opened = PgStore::Open(*uri);
  ASSERT_OK(opened);
  std::unique_ptr<PgStore> store = *std::move(opened);
  AccountRecord account;
  account.name = "acme";
  account.key_salt = "salt";
  account.key_hash = "hash";
  ASSERT_OK(store->CreateAccount(account));

  ASSERT_OK((*pg)->Stop());
  ::testing::internal::CaptureStderr();
  // The first call finds its pooled connection dropped; the next ones cannot connect at all.
  std::vector<absl::Status> failures;
  for (int i = 0; i < 3; ++i) failures.push_back(store->ListAccounts().status());
  failures.push_back(store->GetDataset("census").status());
  failures.push_back(PgStore::Open(*uri).status());
  const std::string log = ::testing::internal::GetCapturedStderr();
  for (const absl::Status& failure : failures) {
    EXPECT_THAT(failure, StatusIs(absl::StatusCode::kUnavailable,
                                  "the vault's database is unavailable; retry shortly"));
    ExpectNoConnectionDetails(failure, **pg);
  }
  // The server's operator gets libpq's account of it.
  EXPECT_THAT(log, HasSubstr((*pg)->dir())) << log;

  // Nothing else changed: the same store serves again once the database is back.
  ASSERT_OK((*pg)->Restart());
  auto accounts = store->ListAccounts();
  ASSERT_OK(accounts);
  EXPECT_EQ(accounts->size(), 1u);
}

// A private PostgreSQL with the vault's schema, and raw connections to it.
class PgConnTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto pg = TestPostgres::Start();
    ASSERT_OK(pg);
    pg_ = *std::move(pg);
    auto uri = pg_->CreateDatabase(kDatabase);
    ASSERT_OK(uri);
    uri_ = *uri;
    auto opened = PgStore::Open(uri_);
    ASSERT_OK(opened);
    store_ = *std::move(opened);
  }
  std::unique_ptr<PgStore::Conn> Connect() {
    return std::make_unique<PgStore::Conn>(PQconnectdb(uri_.c_str()), store_.get());
  }

  std::unique_ptr<TestPostgres> pg_;  // declared first: destroyed last
  std::string uri_;
  std::unique_ptr<PgStore> store_;
};

// PostgreSQL answers the COMMIT of a transaction an error aborted with a ROLLBACK and no error;
// the store's Commit must fail there (a batch of charges would otherwise answer a charge whose
// rows were rolled back). And a query is prepared under a name derived from its text, the same
// on every connection.
TEST_F(PgConnTest, CommitFailsOnAnAbortedTransactionAndNamesFollowTheText) {
  const std::unique_ptr<PgStore::Conn> conn_a = Connect(), conn_b = Connect();
  PgStore::Conn& a = *conn_a;
  PgStore::Conn& b = *conn_b;
  ASSERT_TRUE(a.ok() && b.ok());

  ASSERT_OK(a.Run("BEGIN"));
  EXPECT_FALSE(a.Run("SELECT 1/0").ok());
  EXPECT_THAT(a.Commit(), StatusIs(absl::StatusCode::kInternal, "rolled back"));
  ASSERT_OK(a.Run("BEGIN"));
  ASSERT_OK(a.Run("SELECT 1"));
  EXPECT_OK(a.Commit());

  // Different first uses on the two connections, then one text on both.
  ASSERT_OK(b.Run("SELECT 2"));
  constexpr char kQuery[] = "SELECT COUNT(*) FROM accounts WHERE id > $1";
  ASSERT_OK(a.Run(kQuery, postgres::Params().Int(0)));
  ASSERT_OK(b.Run(kQuery, postgres::Params().Int(0)));
  constexpr char kNames[] =
      "SELECT name::text FROM pg_prepared_statements WHERE statement LIKE 'SELECT COUNT(*) FROM "
      "accounts%'";
  auto on_a = a.Exec(kNames);
  auto on_b = b.Exec(kNames);
  ASSERT_OK(on_a);
  ASSERT_OK(on_b);
  ASSERT_EQ(on_a->rows(), 1);
  ASSERT_EQ(on_b->rows(), 1);
  EXPECT_EQ(on_a->Text(0, 0), on_b->Text(0, 0));
  EXPECT_THAT(on_a->Text(0, 0), ::testing::StartsWith("fv_"));
}

// Deferred statements go first in the next round trip; a pipeline's results come back in
// order; the first failing statement is the call's error and the ones after it do not run;
// a COMMIT behind a failing deferred statement fails; a connection left in a transaction, or
// with statements deferred, is not lent again.
TEST_F(PgConnTest, DeferredStatementsGoFirstAndTheFirstErrorStopsThePipeline) {
  const std::unique_ptr<PgStore::Conn> conn = Connect();
  PgStore::Conn& a = *conn;
  ASSERT_TRUE(a.ok());
  ASSERT_OK(a.Run("CREATE TABLE t(k BIGINT PRIMARY KEY, v TEXT NOT NULL)"));
  constexpr char kInsert[] = "INSERT INTO t(k, v) VALUES($1, $2)";
  constexpr char kCount[] = "SELECT COUNT(*) FROM t";
  std::string value = "one";
  ASSERT_OK(a.Defer(kInsert, postgres::Params().Int(1).Text(value)));
  value = "changed after the Defer";  // the deferred statement holds its own copy
  ASSERT_OK(a.Defer(kInsert, postgres::Params().Int(2).Text("two")));
  EXPECT_FALSE(a.reusable());
  auto rows = [&]() -> int64_t {
    auto count = a.Exec(kCount);
    return count.ok() ? count->Int(0, 0) : -1;
  };
  EXPECT_EQ(rows(), 2);
  EXPECT_TRUE(a.reusable());

  std::vector<postgres::Query> queries;
  postgres::Params by_key;
  by_key.Int(1);
  queries.push_back(postgres::Query{"SELECT v FROM t WHERE k=$1", std::move(by_key)});
  queries.push_back(postgres::Query{kCount, postgres::Params()});
  auto results = a.Pipeline(std::move(queries));
  ASSERT_OK(results);
  ASSERT_EQ(results->size(), 2u);
  EXPECT_EQ((*results)[0].Text(0, 0), "one");
  EXPECT_EQ((*results)[1].Int(0, 0), 2);

  // In a transaction: a duplicate key, then a row that must not be written.
  ASSERT_OK(a.Run("BEGIN"));
  ASSERT_OK(a.Defer(kInsert, postgres::Params().Int(3).Text("three")));
  ASSERT_OK(a.Defer(kInsert, postgres::Params().Int(1).Text("again")));
  ASSERT_OK(a.Defer(kInsert, postgres::Params().Int(4).Text("four")));
  EXPECT_THAT(a.Exec(kCount), StatusIs(absl::StatusCode::kAlreadyExists));
  EXPECT_TRUE(a.InTransactionBlock());
  EXPECT_FALSE(a.reusable());
  ASSERT_OK(a.Run("ROLLBACK"));
  EXPECT_TRUE(a.reusable());
  EXPECT_EQ(rows(), 2);

  // A COMMIT behind a failing deferred statement does not run; InTransaction rolls back.
  EXPECT_THAT(a.InTransaction([&]() -> absl::Status {
    RETURN_IF_ERROR(a.Defer(kInsert, postgres::Params().Int(5).Text("five")));
    return a.Defer(kInsert, postgres::Params().Int(2).Text("again"));
  }),
              StatusIs(absl::StatusCode::kAlreadyExists));
  EXPECT_TRUE(a.reusable());
  // And one that succeeds commits its deferred rows with the COMMIT.
  ASSERT_OK(a.InTransaction([&]() { return a.Defer(kInsert, postgres::Params().Int(6).Text("six")); }));
  EXPECT_EQ(rows(), 3);
  // Each text was prepared once, pipelines included.
  auto prepared = a.Exec("SELECT COUNT(*) FROM pg_prepared_statements WHERE statement = $1",
                         postgres::Params().Text(kInsert));
  ASSERT_OK(prepared);
  EXPECT_EQ(prepared->Int(0, 0), 1);
}

// Appends take the `heads` row's lock, and a lock on a row that is gone locks nothing: the rows
// cannot be removed or renamed, so no charge can run unserialized.
TEST_F(PgConnTest, TheLockRowsCannotBeRemoved) {
  const std::unique_ptr<PgStore::Conn> conn = Connect();
  PgStore::Conn& a = *conn;
  ASSERT_TRUE(a.ok());
  EXPECT_THAT(a.Run("DELETE FROM heads WHERE name='ledger'"),
              StatusIs(absl::StatusCode::kInternal, "append-only"));
  EXPECT_THAT(a.Run("UPDATE heads SET name='other' WHERE name='ledger'"),
              StatusIs(absl::StatusCode::kInternal, "append-only"));
  EXPECT_THAT(a.Run("TRUNCATE heads"), StatusIs(absl::StatusCode::kInternal, "append-only"));
  auto rows = a.Exec("SELECT COUNT(*) FROM heads WHERE name IN ('ledger', 'access_log')");
  ASSERT_OK(rows);
  EXPECT_EQ(rows->Int(0, 0), 2);
}

// An operator's lock_timeout or statement_timeout ends a charge's transaction with an error the
// caller can retry, named as such: the ledger head's lock, deferred into the charge's reads,
// not had in time is a conflict (Aborted), a cancelled statement a deadline; not Internal.
TEST_F(PgConnTest, TimeoutsAreErrorsToRetry) {
  const std::unique_ptr<PgStore::Conn> conn_holder = Connect(), conn_charge = Connect();
  PgStore::Conn& holder = *conn_holder;
  PgStore::Conn& charge = *conn_charge;
  ASSERT_TRUE(holder.ok() && charge.ok());
  ASSERT_OK(holder.Run("BEGIN"));
  ASSERT_OK(holder.Run("SELECT name FROM heads WHERE name='ledger' FOR UPDATE"));
  ASSERT_OK(charge.Run("SET lock_timeout = '50ms'"));
  ASSERT_OK(charge.DeferBeginAndLockLedgerHead());
  std::vector<postgres::Query> reads;
  reads.push_back(postgres::LedgerHeadQuery());
  EXPECT_THAT(charge.Pipeline(std::move(reads)),
              StatusIs(absl::StatusCode::kAborted, "lock timeout"));
  ASSERT_OK(charge.Run("ROLLBACK"));
  ASSERT_OK(holder.Run("ROLLBACK"));
  ASSERT_OK(charge.Run("SET statement_timeout = '50ms'"));
  EXPECT_THAT(charge.Run("SELECT pg_sleep(5)"),
              StatusIs(absl::StatusCode::kDeadlineExceeded, "statement timeout"));
  EXPECT_TRUE(charge.reusable());
}

// A replica (re)starting beside another one's writes: a database already at the current version
// does not get the schema script again, whose DDL (ALTER TABLE ... ADD COLUMN IF NOT EXISTS,
// CREATE OR REPLACE TRIGGER, CREATE INDEX IF NOT EXISTS) locks tables even where it changes
// nothing, so that Open waited for the writes below (and, holding its locks, could deadlock
// with them). A database at an older version still gets the script and its migrations.
TEST_F(PgConnTest, ACurrentDatabaseOpensBesideOpenWritesAndAnOlderOneIsMigrated) {
  const std::unique_ptr<PgStore::Conn> conn = Connect();
  PgStore::Conn& writer = *conn;
  ASSERT_TRUE(writer.ok());
  ASSERT_OK(writer.Run("BEGIN"));
  // What a charge and a finishing job hold until they commit.
  ASSERT_OK(writer.Run("LOCK TABLE ledger, merkle_nodes, responses, jobs, artifacts, access_log "
                       "IN ROW EXCLUSIVE MODE"));
  std::atomic<bool> opened{false};
  absl::Status status;
  std::thread open([&] {
    status = PgStore::Open(uri_).status();
    opened = true;
  });
  for (int i = 0; i < 100 && !opened; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(opened) << "Open waited 5 s for another process's open writes";
  ASSERT_OK(writer.Run("ROLLBACK"));
  open.join();
  EXPECT_OK(status);

  // Version 9, without responses.pending and version 11's indexes: the script and the
  // migrations run again.
  ASSERT_OK(writer.Run("ALTER TABLE responses DROP COLUMN pending"));
  ASSERT_OK(writer.Run("DROP INDEX jobs_by_account, jobs_by_dataset"));
  ASSERT_OK(writer.Run("UPDATE schema_version SET version = 9"));
  ASSERT_OK(PgStore::Open(uri_).status());
  auto column = writer.Exec(
      "SELECT COUNT(*) FROM information_schema.columns WHERE table_name = 'responses' AND "
      "column_name = 'pending'");
  ASSERT_OK(column);
  EXPECT_EQ(column->Int(0, 0), 1);
  auto indexes = writer.Exec(
      "SELECT COUNT(*) FROM pg_indexes WHERE indexname IN ('jobs_by_account', "
      "'jobs_by_dataset')");
  ASSERT_OK(indexes);
  EXPECT_EQ(indexes->Int(0, 0), 2);
  auto version = writer.Exec("SELECT version FROM schema_version");
  ASSERT_OK(version);
  EXPECT_EQ(version->Int(0, 0), 11);
}

// A company's ledger listing searches ledger_by_account, its access log access_log_by_account
// (sqlite_query_plan_test has SQLite's),
// also in the generic plan PostgreSQL may settle on for a statement the store prepared.
TEST_F(PgConnTest, ACompanysLedgerListingSearchesItsIndex) {
  const std::unique_ptr<PgStore::Conn> conn = Connect();
  PgStore::Conn& a = *conn;
  ASSERT_TRUE(a.ok());
  ASSERT_OK(a.Run("SET plan_cache_mode = force_generic_plan"));
  int statements = 0;
  auto generic_plan = [&](const std::string& where, const std::string& types,
                          const std::string& values, const char* table = "ledger") {
    const std::string name = absl::StrCat("listing", ++statements);
    EXPECT_OK(a.Run(
        absl::StrCat("PREPARE ", name, "(", types, ") AS SELECT * FROM ", table, where).c_str()));
    auto r = a.Exec(absl::StrCat("EXPLAIN EXECUTE ", name, "(", values, ")").c_str());
    EXPECT_OK(r);
    std::string text;
    for (int i = 0; r.ok() && i < r->rows(); ++i) absl::StrAppend(&text, r->Text(i, 0), "\n");
    return text;
  };
  LedgerFilter company;
  company.account = "acme";
  EXPECT_THAT(generic_plan(ListingAfterCursor(company, '$', true).sql, "bigint, text, bigint",
                           "0, 'acme', 100"),
              ::testing::HasSubstr("Index Scan using ledger_by_account"));
  company.dataset = "census";
  EXPECT_THAT(generic_plan(ListingAfterCursor(company, '$', true).sql,
                           "bigint, text, text, bigint", "0, 'acme', 'census', 100"),
              ::testing::HasSubstr("Index Scan using ledger_by_account"));
  // The text every filter used to share could not.
  EXPECT_THAT(generic_plan(" WHERE seq > $1 AND ($2::text IS NULL OR account = $2) ORDER BY seq "
                           "LIMIT $3",
                           "bigint, text, bigint", "0, 'acme', 100"),
              ::testing::Not(::testing::HasSubstr("ledger_by_account")));
  // A company's access log, likewise.
  EXPECT_THAT(generic_plan(ListingAfterCursor(LedgerFilter{"acme"}, '$', false).sql,
                           "bigint, text, bigint", "0, 'acme', 100", "access_log"),
              ::testing::HasSubstr("Index Scan using access_log_by_account"));
  // A company's jobs, and a dataset's, newest first from their own index (schema version 11).
  JobFilter jobs;
  jobs.account_id = 7;
  EXPECT_THAT(generic_plan(JobsNewestFirst(jobs, '$').sql, "bigint, bigint", "7, 100", "jobs"),
              ::testing::HasSubstr("Index Scan Backward using jobs_by_account"));
  jobs.account_id.reset();
  jobs.dataset_id = 3;
  EXPECT_THAT(generic_plan(JobsNewestFirst(jobs, '$').sql, "bigint, bigint", "3, 100", "jobs"),
              ::testing::HasSubstr("Index Scan Backward using jobs_by_dataset"));
  // The text every filter used to share could not.
  EXPECT_THAT(generic_plan(" WHERE ($1::bigint IS NULL OR account_id = $1) AND ($2::bigint IS "
                           "NULL OR dataset_id = $2) ORDER BY ledger_seq DESC LIMIT $3",
                           "bigint, bigint, bigint", "7, NULL, 100", "jobs"),
              ::testing::Not(::testing::HasSubstr("jobs_by_account")));
}

// Whether `pid` runs (a zombie, exited and not yet reaped by its parent, does not).
bool Runs(int pid) {
  std::FILE* f = std::fopen(absl::StrCat("/proc/", pid, "/stat").c_str(), "r");
  if (f == nullptr) return false;
  char line[512] = {0};
  const bool read = std::fgets(line, sizeof line, f) != nullptr;
  std::fclose(f);
  const char* end = read ? std::strrchr(line, ')') : nullptr;  // after the command's name
  return end != nullptr && end[1] == ' ' && end[2] != 'Z' && end[2] != 'X';
}

// A test process that crashed never stopped its server: the next Start stops it and removes
// its directory, and leaves a live process's server alone.
TEST(TestPostgresTest, AServerWhoseTestDiedIsStoppedByTheNextStart) {
  auto orphan = TestPostgres::Start();
  ASSERT_OK(orphan);
  const std::string dir = (*orphan)->dir();
  int postmaster = 0;
  if (std::FILE* f = std::fopen((dir + "/data/postmaster.pid").c_str(), "r")) {
    ASSERT_EQ(std::fscanf(f, "%d", &postmaster), 1);
    std::fclose(f);
  }
  ASSERT_GT(postmaster, 0);
  ASSERT_TRUE(Runs(postmaster));
  // Its owner: a child process that has exited.
  const pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);
  if (std::FILE* f = std::fopen((dir + "/owner.pid").c_str(), "w")) {
    std::fprintf(f, "%d\n", static_cast<int>(child));
    std::fclose(f);
  }
  // The object lives on (a crash would have skipped its destructor; leaking it would trip
  // LeakSanitizer): its server is left running until the next Start finds it.
  auto live = TestPostgres::Start();  // ours: alive, so kept while the next one starts
  ASSERT_OK(live);
  auto next = TestPostgres::Start();
  ASSERT_OK(next);
  EXPECT_NE(access(dir.c_str(), F_OK), 0) << dir << " is still there";
  EXPECT_FALSE(Runs(postmaster)) << "its server still runs";
  EXPECT_EQ(access((*live)->dir().c_str(), F_OK), 0);
  EXPECT_TRUE((*live)->CreateDatabase("still_serving").ok());
}

// A string libpq cannot parse is the operator's mistake (InvalidArgument), and libpq's message
// about it quotes the malformed part: here the password, which must reach neither the status
// nor the log.
TEST(PgStoreUnavailableTest, APasswordReachesNeitherTheStatusNorTheLog) {
  ::testing::internal::CaptureStderr();
  const auto opened = PgStore::Open("postgresql://fairvault:s3cr%zzet@/ledgerdb7?host=/nowhere");
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(opened, StatusIs(absl::StatusCode::kInvalidArgument,
                               "the connection string does not parse (invalid percent-encoded "
                               "token: \"********\"); correct it"));
  EXPECT_THAT(opened.status().message(), Not(HasSubstr("s3cr")));
  EXPECT_THAT(log, Not(HasSubstr("s3cr")));

  // A well-formed one with a password, to a server that is not there: the log has libpq's
  // detail, neither it nor the status the password.
  ::testing::internal::CaptureStderr();
  const auto unreachable =
      PgStore::Open("postgresql://fairvault:s3cret-pw@/ledgerdb7?host=/nowhere&port=5433");
  const std::string detail = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(unreachable, StatusIs(absl::StatusCode::kUnavailable,
                                    "the vault's database is unavailable; retry shortly"));
  EXPECT_THAT(detail, HasSubstr("/nowhere/.s.PGSQL.5433"));
  EXPECT_THAT(detail, Not(HasSubstr("s3cret")));
}

TEST(RedactedConnInfoTest, ReplacesEveryFormOfPassword) {
  EXPECT_EQ(RedactedConnInfo("postgresql://vault:hunter2@db.internal:5432/v?sslmode=require"),
            "postgresql://vault:********@db.internal:5432/v?sslmode=require");
  EXPECT_EQ(RedactedConnInfo("postgres://vault@db/v?sslmode=require&password=hunter2&connect_timeout=5"),
            "postgres://vault@db/v?sslmode=require&password=********&connect_timeout=5");
  EXPECT_EQ(RedactedConnInfo("postgresql://vault:a%40b@db/v?password=c"),
            "postgresql://vault:********@db/v?password=********");
  EXPECT_EQ(RedactedConnInfo("host=db user=vault password='hun ter\\'2' dbname=v"),
            "host=db user=vault password=******** dbname=v");
  EXPECT_EQ(RedactedConnInfo("host=db password = hunter2"), "host=db password = ********");
  // libpq's other secret (a client key's passphrase), and keywords written percent-encoded,
  // which libpq decodes.
  EXPECT_EQ(RedactedConnInfo("postgresql://vault@db/v?sslpassword=hunter2&sslmode=require"),
            "postgresql://vault@db/v?sslpassword=********&sslmode=require");
  EXPECT_EQ(RedactedConnInfo("postgresql://vault@db/v?%70assword=hunter2"),
            "postgresql://vault@db/v?%70assword=********");
  EXPECT_EQ(RedactedConnInfo("postgresql://vault@db/v?passwor%64=hunter2"),
            "postgresql://vault@db/v?passwor%64=********");
  EXPECT_EQ(RedactedConnInfo("host=db sslpassword='hunter 2' dbname=v"),
            "host=db sslpassword=******** dbname=v");
  EXPECT_EQ(RedactedConnInfo("host=db password=hun\\ ter2 dbname=v"),
            "host=db password=******** dbname=v");
  // A password that libpq reads as something else, or a string it cannot parse: nothing of the
  // string is shown (and Open refuses it, below).
  const std::string hidden = "(a connection string not shown: see the error)";
  for (const char* ambiguous :
       {"postgresql://u@db/v?password=hun&ter2", "postgresql://u:hun/ter2@db/v",
        "postgresql://db.internal?password=p@ss", "postgresql://u:p@ss@db/v",
        "PASSWORD=hunter2 host=db", "postgresql://u@db/v?%70assword%=hunter2",
        "postgresql://u@db/v?sslmode=require&Password=hunter2"}) {
    EXPECT_EQ(RedactedConnInfo(ambiguous), hidden) << ambiguous;
    const auto opened = PgStore::Open(ambiguous);
    EXPECT_THAT(opened, StatusIs(absl::StatusCode::kInvalidArgument)) << ambiguous;
    EXPECT_THAT(opened.status().message(), Not(HasSubstr("ter2"))) << ambiguous;
    EXPECT_THAT(opened.status().message(), Not(HasSubstr("hun"))) << ambiguous;
    EXPECT_THAT(opened.status().message(), Not(HasSubstr("ss@"))) << ambiguous;
  }
  // libpq's message about a string it cannot parse quotes a piece of it, which may hold quotes
  // itself: nothing from the first quote on is shown.
  for (const char* quoted :
       {"postgresql://u@h/db?password=se\"cr3t%zz", "postgresql://u:se\"cr3t@[::1]x/db",
        "postgresql://u:p\"cr3t@[::1/db"}) {
    const auto opened = PgStore::Open(quoted);
    EXPECT_THAT(opened, StatusIs(absl::StatusCode::kInvalidArgument)) << quoted;
    EXPECT_THAT(opened.status().message(), Not(HasSubstr("cr3t"))) << quoted;
    EXPECT_THAT(RedactedConnInfo(quoted), Not(HasSubstr("cr3t"))) << quoted;
  }
  // What operators write is shown as it is: an '@' or "password" where libpq reads it as
  // nothing secret (a passfile's path, a user name, a database, an application name).
  for (const char* ordinary :
       {"postgresql://fairvault@postgres:5432/fairvault?passfile=/run/secrets/pgpass",
        "postgresql://fairvault@db/v?passfile=/run/secrets/db_password&sslmode=verify-full",
        "postgresql://db/v?user=me@azuresrv&passfile=/p",
        "postgresql://fairvault@db/v?application_name=vault@replica1",
        "postgresql://password_reader@db/passwords", "postgresql:///fairvault?host=/var/run/postgresql",
        "postgresql://u@h1:5432,h2:5433/v", "postgresql://u@[::1]:5432/v"}) {
    EXPECT_EQ(RedactedConnInfo(ordinary), ordinary);
  }
  EXPECT_EQ(RedactedConnInfo("postgresql://u:pw@h1,h2/db"), "postgresql://u:********@h1,h2/db");
  // A password equal to another part of the string is hidden like any other (no placeholder
  // that would tell so).
  EXPECT_EQ(RedactedConnInfo("postgresql://postgres:postgres@db/postgres"),
            "postgresql://postgres:********@db/postgres");
  // Whatever the form, what libpq would use as the secret never shows.
  for (const char* form :
       {"postgresql://vault@db/v?%73slpassword=hunter2", "postgresql://vault:hunter2@db/v",
        "postgresql://vault@db/v?sslmode=require&password=hunter2",
        "postgresql://vault@db/v?password=hun%74er2", "password=hunter2 host=db"}) {
    EXPECT_THAT(RedactedConnInfo(form), Not(HasSubstr("hunter2"))) << form;
    EXPECT_THAT(RedactedConnInfo(form), Not(HasSubstr("hun%74er2"))) << form;
  }
  // Nothing to hide: unchanged (a passfile names a file, not the secret).
  for (const char* plain :
       {"postgresql://vault@db:5432/v?passfile=/etc/fairvault/pgpass", "postgresql:///v?host=/tmp",
        "host=db user=vault passfile=/p dbname=v", "postgresql://db/v?user=vault"}) {
    EXPECT_EQ(RedactedConnInfo(plain), plain);
  }
}

}  // namespace
}  // namespace fairvault::server::storage
