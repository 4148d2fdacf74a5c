// SQLite store. Schema, statements and the one charge transaction live here.
#include "server/storage/sqlite_store.h"

#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/util/status_macros.h"
#include "core/util/truncate.h"
#include "server/storage/ledger_chain.h"
#include "server/storage/store_common.h"
#include "server/util/private_file.h"

namespace fairvault::server::storage {
namespace {

using core::accounting::PrivacyCost;
using core::accounting::Spend;
using core::accounting::SpentEpsilonMicro;

// The schema version Migrate() brings a database to (PRAGMA user_version).
constexpr int64_t kSchemaVersion = 4;

// The checkpointer: a round every kCheckpointPeriod (or when a commit finds the log large).
// A TRUNCATE checkpoint is tried for kTruncateTime (the store's calls wait meanwhile); after a
// refusal it is retried after a doubling pause, at most kMaxTruncateBackoff, so that a reader
// that keeps one snapshot open (a backup under way) does not stall the writes every round.
constexpr absl::Duration kCheckpointPeriod = absl::Milliseconds(200);
constexpr absl::Duration kTruncateTime = absl::Milliseconds(250);
constexpr absl::Duration kMaxTruncateBackoff = absl::Seconds(5);
// The serving connection's busy timeout (waiting for another process's writes).
constexpr int kBusyMillis = 10'000;
// SQLite's frame header: each frame of the log is one page plus these bytes.
constexpr int64_t kWalFrameHeaderBytes = 24;

// The busy handler of a TRUNCATE checkpoint: about 2 ms of polling every 100 us, then the
// call fails and Truncate() calls again. A reader that runs one short transaction after
// another holds a read lock almost all the time; SQLite's default handler (sleeps of 1, 2, 5
// ... 100 ms) rarely finds it between two, and within one call the checkpointer keeps waiting
// for the lock of the snapshot the reader had when the call began, even after the reader has
// moved to a newer one. A new call sees the reader's new snapshot.
int PollBriefly(void*, int tries) {
  if (tries >= 20) return 0;
  usleep(100);
  return 1;
}

// The size of a file in bytes; 0 if it does not exist.
int64_t FileBytes(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : 0;
}

constexpr char kSchema[] = R"sql(
CREATE TABLE IF NOT EXISTS accounts(
  id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, role INTEGER NOT NULL,
  key_salt BLOB NOT NULL, key_hash BLOB NOT NULL, created_micros INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS datasets(
  id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL UNIQUE, attributes BLOB NOT NULL,
  created_micros INTEGER NOT NULL, subject_count INTEGER NOT NULL DEFAULT 0,
  cap_micro INTEGER, cap_delta REAL NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS subject_batches(
  dataset_id INTEGER NOT NULL, batch_id TEXT NOT NULL, digest TEXT NOT NULL,
  rows INTEGER NOT NULL, seq INTEGER NOT NULL, payload BLOB NOT NULL,
  PRIMARY KEY(dataset_id, batch_id));
CREATE TABLE IF NOT EXISTS grants(
  account_id INTEGER NOT NULL, dataset_id INTEGER NOT NULL, epsilon_micro INTEGER NOT NULL,
  delta REAL NOT NULL, PRIMARY KEY(account_id, dataset_id));
CREATE TABLE IF NOT EXISTS spend(
  account_id INTEGER NOT NULL, dataset_id INTEGER NOT NULL, releases INTEGER NOT NULL,
  pure_micro INTEGER NOT NULL, rdp_all BLOB NOT NULL, rdp_nonpure BLOB NOT NULL,
  PRIMARY KEY(account_id, dataset_id));
CREATE TABLE IF NOT EXISTS company_tables(
  handle TEXT PRIMARY KEY, account_id INTEGER NOT NULL, dataset_id INTEGER NOT NULL,
  rows INTEGER NOT NULL, expires_micros INTEGER NOT NULL, payload BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS ledger(
  seq INTEGER PRIMARY KEY, time_micros INTEGER NOT NULL, kind TEXT NOT NULL,
  account_id INTEGER NOT NULL, account TEXT NOT NULL, dataset_id INTEGER NOT NULL,
  dataset TEXT NOT NULL, request_kind TEXT NOT NULL, idempotency_key TEXT NOT NULL,
  epsilon REAL NOT NULL, delta REAL NOT NULL, mechanism TEXT NOT NULL, pure_micro INTEGER,
  rdp BLOB NOT NULL, prev_hash TEXT NOT NULL, hash TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS ledger_by_account ON ledger(account, seq);
CREATE TRIGGER IF NOT EXISTS ledger_no_update BEFORE UPDATE ON ledger
  BEGIN SELECT RAISE(ABORT, 'the ledger is append-only'); END;
CREATE TRIGGER IF NOT EXISTS ledger_no_delete BEFORE DELETE ON ledger
  BEGIN SELECT RAISE(ABORT, 'the ledger is append-only'); END;
CREATE TABLE IF NOT EXISTS responses(
  account_id INTEGER NOT NULL, idempotency_key TEXT NOT NULL, request_kind TEXT NOT NULL,
  params_digest TEXT NOT NULL, ledger_seq INTEGER NOT NULL, payload BLOB NOT NULL,
  error_code INTEGER NOT NULL DEFAULT 0, error_message TEXT NOT NULL DEFAULT '',
  PRIMARY KEY(account_id, idempotency_key));
CREATE TABLE IF NOT EXISTS access_log(
  seq INTEGER PRIMARY KEY AUTOINCREMENT, time_micros INTEGER NOT NULL, account TEXT NOT NULL,
  dataset TEXT NOT NULL, artifact_id TEXT NOT NULL, rows INTEGER NOT NULL,
  new_decisions INTEGER NOT NULL DEFAULT -1);
CREATE TRIGGER IF NOT EXISTS access_log_no_update BEFORE UPDATE ON access_log
  BEGIN SELECT RAISE(ABORT, 'the access log is append-only'); END;
CREATE TRIGGER IF NOT EXISTS access_log_no_delete BEFORE DELETE ON access_log
  BEGIN SELECT RAISE(ABORT, 'the access log is append-only'); END;
CREATE TABLE IF NOT EXISTS decisions(
  artifact_id TEXT NOT NULL, subject_key TEXT NOT NULL, input REAL NOT NULL,
  output REAL NOT NULL, PRIMARY KEY(artifact_id, subject_key)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS artifacts(
  id TEXT PRIMARY KEY, account_id INTEGER NOT NULL, dataset_id INTEGER NOT NULL,
  ledger_seq INTEGER NOT NULL, created_micros INTEGER NOT NULL, payload BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS jobs(
  id TEXT PRIMARY KEY, account_id INTEGER NOT NULL, dataset_id INTEGER NOT NULL,
  ledger_seq INTEGER NOT NULL, idempotency_key TEXT NOT NULL, table_handle TEXT NOT NULL,
  algorithm INTEGER NOT NULL, request BLOB NOT NULL, plan BLOB NOT NULL, seed BLOB NOT NULL,
  subject_limit INTEGER NOT NULL, state INTEGER NOT NULL, done INTEGER NOT NULL DEFAULT 0,
  total INTEGER NOT NULL DEFAULT 0, submitted_micros INTEGER NOT NULL,
  started_micros INTEGER NOT NULL DEFAULT 0, finished_micros INTEGER NOT NULL DEFAULT 0,
  attempts INTEGER NOT NULL DEFAULT 0, artifact_id TEXT NOT NULL DEFAULT '',
  error TEXT NOT NULL DEFAULT '', lease_owner TEXT NOT NULL DEFAULT '',
  lease_expires_micros INTEGER NOT NULL DEFAULT 0);
CREATE INDEX IF NOT EXISTS jobs_by_seq ON jobs(ledger_seq);
CREATE INDEX IF NOT EXISTS jobs_by_state ON jobs(state, ledger_seq);
CREATE INDEX IF NOT EXISTS jobs_by_table ON jobs(table_handle, state);
)sql";

// A prepared statement; binds are 1-based, columns 0-based as in SQLite.
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) : db_(db) {
    rc_ = sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr);
  }
  ~Stmt() { sqlite3_finalize(stmt_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  absl::Status prepared() const { return Check(rc_, "prepare"); }
  Stmt& Bind(int i, int64_t v) { return Bound(sqlite3_bind_int64(stmt_, i, v)); }
  Stmt& Bind(int i, double v) { return Bound(sqlite3_bind_double(stmt_, i, v)); }
  Stmt& Bind(int i, const std::string& v) {
    return Bound(sqlite3_bind_text64(stmt_, i, v.data(), v.size(), SQLITE_TRANSIENT, SQLITE_UTF8));
  }
  Stmt& BindBlob(int i, const std::string& v) {
    return Bound(sqlite3_bind_blob64(stmt_, i, v.data(), v.size(), SQLITE_STATIC));
  }
  Stmt& BindNull(int i) { return Bound(sqlite3_bind_null(stmt_, i)); }
  // The value, or NULL when absent (for `?N IS NULL OR col = ?N` filters).
  template <typename T>
  Stmt& BindOptional(int i, const std::optional<T>& v) {
    return v ? Bind(i, *v) : BindNull(i);
  }
  // true: a row is ready; false: done.
  absl::StatusOr<bool> Step() {
    RETURN_IF_ERROR(prepared());
    if (bind_rc_ == SQLITE_TOOBIG) {
      return absl::InvalidArgumentError(
          "a value is larger than the database accepts (1 GB per batch or table); split it");
    }
    RETURN_IF_ERROR(Check(bind_rc_, "bind"));
    int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    return Check(rc, "step");
  }
  absl::Status Run() {
    ASSIGN_OR_RETURN(bool row, Step());
    (void)row;
    return absl::OkStatus();
  }
  // Ready for new binds and another Step().
  void Reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
    bind_rc_ = SQLITE_OK;
  }
  int64_t Int(int c) const { return sqlite3_column_int64(stmt_, c); }
  double Double(int c) const { return sqlite3_column_double(stmt_, c); }
  bool IsNull(int c) const { return sqlite3_column_type(stmt_, c) == SQLITE_NULL; }
  std::string Text(int c) const {
    const void* p = sqlite3_column_blob(stmt_, c);
    int n = sqlite3_column_bytes(stmt_, c);
    return p == nullptr ? std::string() : std::string(static_cast<const char*>(p), n);
  }

 private:
  absl::Status Check(int rc, const char* what) const {
    if (rc == SQLITE_OK || rc == SQLITE_ROW || rc == SQLITE_DONE) return absl::OkStatus();
    if (rc == SQLITE_CONSTRAINT) {
      return absl::AlreadyExistsError(absl::StrCat("constraint: ", sqlite3_errmsg(db_)));
    }
    return absl::InternalError(absl::StrCat("sqlite ", what, ": ", sqlite3_errmsg(db_)));
  }
  Stmt& Bound(int rc) {
    if (bind_rc_ == SQLITE_OK) bind_rc_ = rc;
    return *this;
  }
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
  int rc_;
  int bind_rc_ = SQLITE_OK;  // the first failed bind, reported by Step()
};

// BEGIN IMMEDIATE ... COMMIT, rolled back unless Commit() succeeded.
class Transaction {
 public:
  explicit Transaction(sqlite3* db) : db_(db) { status_ = Exec("BEGIN IMMEDIATE"); }
  ~Transaction() {
    if (status_.ok() && !done_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  const absl::Status& status() const { return status_; }
  absl::Status Commit() {
    RETURN_IF_ERROR(Exec("COMMIT"));
    done_ = true;
    return absl::OkStatus();
  }

 private:
  absl::Status Exec(const char* sql) {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
      absl::Status s = absl::InternalError(absl::StrCat("sqlite ", sql, ": ", err ? err : "?"));
      sqlite3_free(err);
      return s;
    }
    return absl::OkStatus();
  }
  sqlite3* db_;
  absl::Status status_;
  bool done_ = false;
};

AccountRecord ReadAccount(const Stmt& s) {
  AccountRecord a;
  a.id = s.Int(0);
  a.name = s.Text(1);
  a.role = static_cast<Role>(s.Int(2));
  a.key_salt = s.Text(3);
  a.key_hash = s.Text(4);
  a.created_micros = s.Int(5);
  return a;
}
constexpr char kAccountCols[] = "id, name, role, key_salt, key_hash, created_micros";

DatasetRecord ReadDataset(const Stmt& s) {
  DatasetRecord d;
  d.id = s.Int(0);
  d.name = s.Text(1);
  d.attributes = s.Text(2);
  d.created_micros = s.Int(3);
  d.subject_count = s.Int(4);
  if (!s.IsNull(5)) d.cap_micro = s.Int(5);
  d.cap_delta = s.Double(6);
  return d;
}
constexpr char kDatasetCols[] =
    "id, name, attributes, created_micros, subject_count, cap_micro, cap_delta";

absl::StatusOr<Spend> ReadSpend(const Stmt& s, int first_col) {
  Spend spend;
  spend.releases = s.Int(first_col);
  spend.pure_micro = s.Int(first_col + 1);
  ASSIGN_OR_RETURN(spend.rdp_all_nano, DecodeInt64s(s.Text(first_col + 2)));
  ASSIGN_OR_RETURN(spend.rdp_nonpure_nano, DecodeInt64s(s.Text(first_col + 3)));
  return spend;
}

LedgerRow ReadLedger(const Stmt& s) {
  LedgerRow r;
  r.seq = s.Int(0);
  r.time_micros = s.Int(1);
  r.kind = s.Text(2);
  r.account = s.Text(4);
  r.dataset = s.Text(6);
  r.request_kind = s.Text(7);
  r.idempotency_key = s.Text(8);
  r.epsilon = s.Double(9);
  r.delta = s.Double(10);
  r.mechanism = s.Text(11);
  if (!s.IsNull(12)) r.pure_micro = s.Int(12);
  auto rdp = DecodeInt64s(s.Text(13));
  if (rdp.ok()) r.rdp_nano = *std::move(rdp);
  r.prev_hash = s.Text(14);
  r.hash = s.Text(15);
  return r;
}
constexpr char kLedgerCols[] =
    "seq, time_micros, kind, account_id, account, dataset_id, dataset, request_kind, "
    "idempotency_key, epsilon, delta, mechanism, pure_micro, rdp, prev_hash, hash";

// The failure stored in (error_code, error_message) columns starting at `first_col`.
absl::Status StoredFailure(const Stmt& s, int first_col) {
  return absl::Status(static_cast<absl::StatusCode>(s.Int(first_col)), s.Text(first_col + 1));
}

absl::Status NotFoundIfNoRow(absl::StatusOr<bool> row, const std::string& what) {
  if (!row.ok()) return row.status();
  if (!*row) return absl::NotFoundError(what);
  return absl::OkStatus();
}

constexpr char kJobCols[] =
    "id, account_id, dataset_id, ledger_seq, idempotency_key, table_handle, algorithm, request, "
    "plan, seed, subject_limit, state, done, total, submitted_micros, started_micros, "
    "finished_micros, attempts, artifact_id, error, lease_owner, lease_expires_micros";

JobRecord ReadJob(const Stmt& s) {
  JobRecord j;
  j.id = s.Text(0);
  j.account_id = s.Int(1);
  j.dataset_id = s.Int(2);
  j.ledger_seq = s.Int(3);
  j.idempotency_key = s.Text(4);
  j.table_handle = s.Text(5);
  j.algorithm = static_cast<int32_t>(s.Int(6));
  j.request = s.Text(7);
  j.plan = s.Text(8);
  j.seed = s.Text(9);
  j.subject_limit = s.Int(10);
  j.state = static_cast<JobState>(s.Int(11));
  j.done = s.Int(12);
  j.total = s.Int(13);
  j.submitted_micros = s.Int(14);
  j.started_micros = s.Int(15);
  j.finished_micros = s.Int(16);
  j.attempts = static_cast<int32_t>(s.Int(17));
  j.artifact_id = s.Text(18);
  j.error = s.Text(19);
  j.lease_owner = s.Text(20);
  j.lease_expires_micros = s.Int(21);
  return j;
}

}  // namespace

absl::StatusOr<std::unique_ptr<SqliteStore>> SqliteStore::Open(const std::string& path,
                                                               Options options) {
  // The database holds protected attributes: a new file is created 0600 here rather than by
  // SQLite (0644 minus the umask). SQLite gives the -wal and -shm files the database file's
  // mode. An existing file keeps its mode; if this fails, sqlite3_open_v2 reports why.
  if (!path.empty() && path != ":memory:" && path.rfind("file:", 0) != 0) {
    CreatePrivateFile(path).IgnoreError();
  }
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(
      path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return absl::UnavailableError(absl::StrCat("cannot open database ", path, ": ", msg));
  }
  std::unique_ptr<SqliteStore> store(new SqliteStore(db, path, std::move(options)));
  {
    absl::MutexLock lock(&store->mu_);
    RETURN_IF_ERROR(store->ApplySchema());
    Stmt page_size(store->db_, "PRAGMA page_size");
    ASSIGN_OR_RETURN(bool row, page_size.Step());
    store->frame_bytes_ = (row ? page_size.Int(0) : 4096) + kWalFrameHeaderBytes;
  }
  sqlite3* checkpoint_db = nullptr;
  int log = -1;
  if (sqlite3_open_v2(path.c_str(), &checkpoint_db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX,
                      nullptr) == SQLITE_OK) {
    sqlite3_busy_handler(checkpoint_db, &PollBriefly, nullptr);
    // A connection opens the log when it first reads: before that a checkpoint through it finds
    // no log (it reports -1 frames) and copies nothing.
    if (sqlite3_exec(checkpoint_db, "SELECT COUNT(*) FROM sqlite_master", nullptr, nullptr,
                     nullptr) == SQLITE_OK) {
      sqlite3_wal_checkpoint_v2(checkpoint_db, nullptr, SQLITE_CHECKPOINT_PASSIVE, &log, nullptr);
    }
  }
  if (log >= 0) {
    store->checkpoint_db_ = checkpoint_db;
    {
      absl::MutexLock lock(&store->mu_);
      // Replaces SQLite's automatic checkpoint on the serving connection.
      sqlite3_wal_hook(store->db_, &SqliteStore::OnCommit, store.get());
    }
    store->checkpointer_ = std::thread([s = store.get()] { s->CheckpointLoop(); });
  } else {
    sqlite3_close(checkpoint_db);  // automatic checkpoints stay on
  }
  return store;
}

absl::StatusOr<LedgerVerification> SqliteStore::Backup(const std::string& path,
                                                       const std::string& out) {
  // Created here, 0600 and exclusively (a file that appears meanwhile is never overwritten):
  // the copy holds everything the database does.
  if (absl::Status created = CreatePrivateFile(out); !created.ok()) {
    if (absl::IsAlreadyExists(created)) {
      return absl::AlreadyExistsError(
          absl::StrCat("backup target ", out, " exists; choose a new file (nothing was written)"));
    }
    return created;
  }
  sqlite3* source = nullptr;
  sqlite3* target = nullptr;
  const auto close_both = [&] {
    sqlite3_close(source);
    sqlite3_close(target);
  };
  if (sqlite3_open_v2(path.c_str(), &source, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK ||
      sqlite3_open_v2(out.c_str(), &target, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) !=
          SQLITE_OK) {
    const std::string msg = source ? sqlite3_errmsg(source) : "out of memory";
    close_both();
    unlink(out.c_str());
    return absl::UnavailableError(absl::StrCat("cannot open ", path, " or ", out, ": ", msg));
  }
  sqlite3_busy_timeout(source, 10'000);
  sqlite3_backup* backup = sqlite3_backup_init(target, "main", source, "main");
  int rc = backup == nullptr ? sqlite3_errcode(target) : SQLITE_OK;
  if (backup != nullptr) {
    // All pages in one step: the copy is a single read snapshot of the source.
    do {
      rc = sqlite3_backup_step(backup, -1);
      if (rc == SQLITE_BUSY || rc == SQLITE_LOCKED) sqlite3_sleep(50);
    } while (rc == SQLITE_BUSY || rc == SQLITE_LOCKED);
    sqlite3_backup_finish(backup);
  }
  const std::string msg = sqlite3_errmsg(target);
  close_both();
  if (rc != SQLITE_DONE) {
    unlink(out.c_str());
    return absl::UnavailableError(absl::StrCat("backup of ", path, " failed: ", msg));
  }
  auto copy = Open(out);
  if (!copy.ok()) {
    unlink(out.c_str());
    return copy.status();
  }
  absl::StatusOr<LedgerVerification> verified = (*copy)->VerifyLedger();
  copy->reset();
  if (!verified.ok() || !verified->ok) {
    for (const char* suffix : {"", "-wal", "-shm"}) unlink((out + suffix).c_str());
    return absl::DataLossError(
        absl::StrCat("the backup's ledger does not verify (",
                     verified.ok() ? verified->message : std::string(verified.status().message()),
                     "); the copy was removed"));
  }
  return verified;
}

void SqliteStore::CheckpointLoop() {
  absl::Duration backoff = kCheckpointPeriod;
  absl::Time truncate_after = absl::InfinitePast();
  while (true) {
    {
      absl::MutexLock lock(&ckpt_mu_);
      ckpt_mu_.AwaitWithTimeout(absl::Condition(this, &SqliteStore::CheckpointWanted),
                                kCheckpointPeriod);
      if (stop_) return;
      wanted_ = false;
    }
    const absl::Time now = absl::Now();
    const std::optional<bool> truncated = CheckpointRound(/*may_truncate=*/now >= truncate_after);
    if (truncated.has_value() && *truncated) {
      backoff = kCheckpointPeriod;
      truncate_after = absl::InfinitePast();
    } else if (truncated.has_value() && now >= truncate_after) {
      truncate_after = now + backoff;
      backoff = std::min(2 * backoff, kMaxTruncateBackoff);
    }
    if (options_.on_wal_bytes) options_.on_wal_bytes(FileBytes(path_ + "-wal"));
  }
}

std::optional<bool> SqliteStore::CheckpointRound(bool may_truncate) {
  // SQLite's own errors (an I/O error, a full disk) reach the server's log once per streak; a
  // busy log is normal and retried.
  const auto report = [this](int rc) {
    const bool failed = rc != SQLITE_OK && rc != SQLITE_BUSY;
    if (failed && !checkpoint_failing_) {
      std::cerr << "fairvault: sqlite checkpoint failed: " << sqlite3_errstr(rc) << "\n";
    }
    checkpoint_failing_ = failed;
    return rc;
  };
  // PASSIVE: copies what no reader still needs, without waiting for anyone. `log` counts the
  // frames since the log last restarted.
  int log = 0, copied = 0;
  report(
      sqlite3_wal_checkpoint_v2(checkpoint_db_, nullptr, SQLITE_CHECKPOINT_PASSIVE, &log, &copied));
  if (int64_t{log} * frame_bytes_ < kWalCheckpointBytes &&
      FileBytes(path_ + "-wal") <= kWalLimitBytes) {
    return std::nullopt;
  }
  if (!may_truncate) return false;
  // SQLite's writer lock is not fair: a checkpointer that waits for it rarely gets it between
  // one charge and the next. Holding the store's mutex keeps this process's writes (the only
  // writer) out for the short time it takes to copy what the passive round left.
  absl::MutexLock lock(&mu_);
  return report(Truncate(checkpoint_db_)) == SQLITE_OK;
}

int SqliteStore::Truncate(sqlite3* db) {
  const absl::Time deadline = absl::Now() + kTruncateTime;
  while (true) {
    const int rc =
        sqlite3_wal_checkpoint_v2(db, nullptr, SQLITE_CHECKPOINT_TRUNCATE, nullptr, nullptr);
    if (rc != SQLITE_BUSY || absl::Now() >= deadline) return rc;
    absl::SleepFor(absl::Microseconds(100));
  }
}

int SqliteStore::OnCommit(void* store, sqlite3*, const char*, int frames)
    ABSL_NO_THREAD_SAFETY_ANALYSIS {  // called inside a commit, which holds mu_
  auto* self = static_cast<SqliteStore*>(store);
  const int64_t log_bytes = int64_t{frames} * self->frame_bytes_;
  if (log_bytes >= kWalCheckpointBytes) {
    absl::MutexLock lock(&self->ckpt_mu_);
    self->wanted_ = true;
  }
  if (log_bytes >= kWalLimitBytes) self->TruncateAfterCommit();
  return SQLITE_OK;  // the commit has happened whatever this returns
}

void SqliteStore::TruncateAfterCommit() {
  if (absl::Now() < commit_truncate_after_) return;
  // The checkpointer has fallen behind (or could not take mu_ between two commits). If its
  // passive round holds SQLite's checkpoint lock, Truncate() tries again until it is done.
  sqlite3_busy_handler(db_, &PollBriefly, nullptr);
  const int rc = Truncate(db_);
  sqlite3_busy_timeout(db_, kBusyMillis);
  if (rc != SQLITE_OK) commit_truncate_after_ = absl::Now() + kMaxTruncateBackoff;
}

SqliteStore::~SqliteStore() {
  if (checkpointer_.joinable()) {
    {
      absl::MutexLock lock(&ckpt_mu_);
      stop_ = true;
    }
    checkpointer_.join();
  }
  sqlite3_close(checkpoint_db_);
  absl::MutexLock lock(&mu_);
  sqlite3_close(db_);  // the last connection: checkpoints and removes the WAL
}

absl::Status SqliteStore::Exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    absl::Status s = absl::InternalError(absl::StrCat("sqlite: ", err ? err : "?"));
    sqlite3_free(err);
    return s;
  }
  return absl::OkStatus();
}

absl::Status SqliteStore::ApplySchema() {
  sqlite3_busy_timeout(db_, kBusyMillis);
  RETURN_IF_ERROR(Exec("PRAGMA page_size=65536"));
  RETURN_IF_ERROR(Exec("PRAGMA journal_mode=WAL"));
  RETURN_IF_ERROR(Exec("PRAGMA synchronous=FULL"));
  RETURN_IF_ERROR(Exec("PRAGMA foreign_keys=ON"));
  // 64 MiB of page cache instead of SQLite's 2 MiB default: Decide's stored decisions are
  // looked up by the hundred thousand per call.
  RETURN_IF_ERROR(Exec("PRAGMA cache_size=-65536"));
  // After a checkpoint, the WAL file is cut back to 64 MiB rather than keeping its largest size.
  RETURN_IF_ERROR(Exec("PRAGMA journal_size_limit=67108864"));
  Transaction txn(db_);
  RETURN_IF_ERROR(txn.status());
  RETURN_IF_ERROR(Exec(kSchema));
  RETURN_IF_ERROR(Migrate());
  return txn.Commit();
}

// `CREATE TABLE IF NOT EXISTS` never changes a table that exists, so columns added after a
// table first shipped are added here. PRAGMA user_version records the schema version reached;
// each step is idempotent, so a database whose version was never set is upgraded correctly.
absl::Status SqliteStore::Migrate() {
  Stmt version(db_, "PRAGMA user_version");
  ASSIGN_OR_RETURN(bool has_row, version.Step());
  const int64_t at = has_row ? version.Int(0) : 0;
  if (at >= kSchemaVersion) return absl::OkStatus();
  auto columns_of = [&](const char* table) -> absl::StatusOr<std::set<std::string>> {
    std::set<std::string> columns;
    Stmt info(db_, absl::StrCat("PRAGMA table_info(", table, ")").c_str());
    while (true) {
      ASSIGN_OR_RETURN(bool row, info.Step());
      if (!row) break;
      columns.insert(info.Text(1));
    }
    return columns;
  };
  // Version 1: failed releases are stored for replay (commit c0054b7).
  ASSIGN_OR_RETURN(std::set<std::string> columns, columns_of("responses"));
  if (!columns.count("error_code")) {
    RETURN_IF_ERROR(Exec("ALTER TABLE responses ADD COLUMN error_code INTEGER NOT NULL DEFAULT 0"));
  }
  if (!columns.count("error_message")) {
    RETURN_IF_ERROR(
        Exec("ALTER TABLE responses ADD COLUMN error_message TEXT NOT NULL DEFAULT ''"));
  }
  // Version 2: the access log counts each call's new decisions (-1 on rows from before).
  ASSIGN_OR_RETURN(columns, columns_of("access_log"));
  if (!columns.count("new_decisions")) {
    RETURN_IF_ERROR(
        Exec("ALTER TABLE access_log ADD COLUMN new_decisions INTEGER NOT NULL DEFAULT -1"));
  }
  // Version 3: training jobs (issue 9 §4). A new table, so kSchema's CREATE TABLE IF NOT
  // EXISTS has already added it (and its indexes) to an older database.
  // Version 4: job leases (issue 11: runners in several processes take over each other's jobs).
  ASSIGN_OR_RETURN(columns, columns_of("jobs"));
  if (!columns.count("lease_owner")) {
    RETURN_IF_ERROR(Exec("ALTER TABLE jobs ADD COLUMN lease_owner TEXT NOT NULL DEFAULT ''"));
  }
  if (!columns.count("lease_expires_micros")) {
    RETURN_IF_ERROR(
        Exec("ALTER TABLE jobs ADD COLUMN lease_expires_micros INTEGER NOT NULL DEFAULT 0"));
  }
  return Exec(absl::StrCat("PRAGMA user_version=", kSchemaVersion).c_str());
}

// ---- accounts ------------------------------------------------------------------------------

absl::StatusOr<AccountRecord> SqliteStore::CreateAccount(AccountRecord account) {
  absl::MutexLock lock(&mu_);
  Stmt s(db_,
         "INSERT INTO accounts(name, role, key_salt, key_hash, created_micros) "
         "VALUES(?,?,?,?,?)");
  s.Bind(1, account.name).Bind(2, static_cast<int64_t>(account.role));
  s.BindBlob(3, account.key_salt).BindBlob(4, account.key_hash).Bind(5, account.created_micros);
  absl::Status st = s.Run();
  if (absl::IsAlreadyExists(st)) return AccountNameTaken(account.name);
  RETURN_IF_ERROR(st);
  account.id = sqlite3_last_insert_rowid(db_);
  return account;
}

absl::StatusOr<AccountRecord> SqliteStore::GetAccountById(int64_t id) {
  absl::MutexLock lock(&mu_);
  Stmt s(db_, absl::StrCat("SELECT ", kAccountCols, " FROM accounts WHERE id=?").c_str());
  s.Bind(1, id);
  RETURN_IF_ERROR(NotFoundIfNoRow(s.Step(), absl::StrCat("no account with id ", id)));
  return ReadAccount(s);
}

absl::StatusOr<AccountRecord> SqliteStore::GetAccountByName(const std::string& name) {
  absl::MutexLock lock(&mu_);
  Stmt s(db_, absl::StrCat("SELECT ", kAccountCols, " FROM accounts WHERE name=?").c_str());
  s.Bind(1, name);
  RETURN_IF_ERROR(NotFoundIfNoRow(s.Step(), absl::StrCat("no account named '", name, "'")));
  return ReadAccount(s);
}

absl::StatusOr<std::vector<AccountRecord>> SqliteStore::ListAccounts() {
  absl::MutexLock lock(&mu_);
  Stmt s(db_, absl::StrCat("SELECT ", kAccountCols, " FROM accounts ORDER BY id").c_str());
  std::vector<AccountRecord> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    out.push_back(ReadAccount(s));
  }
  return out;
}

// ---- datasets ------------------------------------------------------------------------------

absl::StatusOr<DatasetRecord> SqliteStore::CreateDataset(DatasetRecord dataset) {
  absl::MutexLock lock(&mu_);
  Stmt s(db_, "INSERT INTO datasets(name, attributes, created_micros) VALUES(?,?,?)");
  s.Bind(1, dataset.name).BindBlob(2, dataset.attributes).Bind(3, dataset.created_micros);
  absl::Status st = s.Run();
  if (absl::IsAlreadyExists(st)) return DatasetNameTaken(dataset.name);
  RETURN_IF_ERROR(st);
  dataset.id = sqlite3_last_insert_rowid(db_);
  return dataset;
}

absl::StatusOr<DatasetRecord> SqliteStore::DatasetLocked(const char* where, int64_t id,
                                                         const std::string& name) {
  Stmt s(db_, absl::StrCat("SELECT ", kDatasetCols, " FROM datasets WHERE ", where).c_str());
  if (name.empty()) {
    s.Bind(1, id);
  } else {
    s.Bind(1, name);
  }
  RETURN_IF_ERROR(NotFoundIfNoRow(
      s.Step(), name.empty() ? absl::StrCat("no dataset with id ", id) : UnknownDataset(name)));
  return ReadDataset(s);
}

absl::StatusOr<DatasetRecord> SqliteStore::GetDataset(const std::string& name) {
  absl::MutexLock lock(&mu_);
  if (name.empty()) return absl::InvalidArgumentError("dataset must be set");
  return DatasetLocked("name=?", 0, name);
}

absl::StatusOr<DatasetRecord> SqliteStore::GetDatasetById(int64_t id) {
  absl::MutexLock lock(&mu_);
  return DatasetLocked("id=?", id, "");
}

absl::StatusOr<std::vector<DatasetRecord>> SqliteStore::ListDatasets() {
  absl::MutexLock lock(&mu_);
  Stmt s(db_, absl::StrCat("SELECT ", kDatasetCols, " FROM datasets ORDER BY name").c_str());
  std::vector<DatasetRecord> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    out.push_back(ReadDataset(s));
  }
  return out;
}

absl::Status SqliteStore::DeleteDataset(int64_t dataset_id) {
  absl::MutexLock lock(&mu_);
  Transaction txn(db_);
  RETURN_IF_ERROR(txn.status());
  for (const char* sql :
       {"DELETE FROM subject_batches WHERE dataset_id=?",
        "DELETE FROM company_tables WHERE dataset_id=?",
        "DELETE FROM decisions WHERE artifact_id IN (SELECT id FROM artifacts WHERE dataset_id=?)",
        "DELETE FROM artifacts WHERE dataset_id=?", "DELETE FROM jobs WHERE dataset_id=?",
        "DELETE FROM grants WHERE dataset_id=?", "DELETE FROM spend WHERE dataset_id=?",
        "DELETE FROM datasets WHERE id=?"}) {
    Stmt s(db_, sql);
    s.Bind(1, dataset_id);
    RETURN_IF_ERROR(s.Run());
  }
  return txn.Commit();
}

// ---- subjects ------------------------------------------------------------------------------

absl::StatusOr<std::string> SqliteStore::GetBatchDigest(int64_t dataset_id,
                                                        const std::string& batch_id) {
  absl::MutexLock lock(&mu_);
  Stmt s(db_, "SELECT digest FROM subject_batches WHERE dataset_id=? AND batch_id=?");
  s.Bind(1, dataset_id).Bind(2, batch_id);
  RETURN_IF_ERROR(NotFoundIfNoRow(s.Step(), "no such batch"));
  return s.Text(0);
}

absl::Status SqliteStore::PutSubjectBatch(int64_t dataset_id, const std::string& batch_id,
                                          const std::string& digest, int64_t expected_subject_count,
                                          int64_t rows, const std::string& payload) {
  absl::MutexLock lock(&mu_);
  Transaction txn(db_);
  RETURN_IF_ERROR(txn.status());
  {
    Stmt u(db_,
           "UPDATE datasets SET subject_count = subject_count + ? WHERE id=? AND "
           "subject_count=?");
    u.Bind(1, rows).Bind(2, dataset_id).Bind(3, expected_subject_count);
    RETURN_IF_ERROR(u.Run());
    if (sqlite3_changes(db_) == 0) return DatasetChangedConcurrently(dataset_id);
  }
  Stmt s(db_,
         "INSERT INTO subject_batches(dataset_id, batch_id, digest, rows, seq, payload) "
         "VALUES(?,?,?,?,(SELECT COALESCE(MAX(seq),0)+1 FROM subject_batches),?)");
  s.Bind(1, dataset_id).Bind(2, batch_id).Bind(3, digest).Bind(4, rows).BindBlob(5, payload);
  absl::Status st = s.Run();
  if (absl::IsAlreadyExists(st)) return BatchImportedConcurrently(batch_id);
  RETURN_IF_ERROR(st);
  return txn.Commit();
}

absl::Status SqliteStore::ForEachSubjectBatch(
    int64_t dataset_id, const std::function<absl::Status(const std::string&)>& fn) {
  absl::MutexLock lock(&mu_);
  Stmt s(db_, "SELECT payload FROM subject_batches WHERE dataset_id=? ORDER BY seq");
  s.Bind(1, dataset_id);
  while (true) {
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    RETURN_IF_ERROR(fn(s.Text(0)));
  }
  return absl::OkStatus();
}

// ---- grants, caps, spend -------------------------------------------------------------------

absl::StatusOr<std::pair<int64_t, std::string>> SqliteStore::LedgerHeadLocked() {
  Stmt s(db_, "SELECT seq, hash FROM ledger ORDER BY seq DESC LIMIT 1");
  ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return std::make_pair(int64_t{0}, std::string(kGenesisHash));
  return std::make_pair(s.Int(0), s.Text(1));
}

absl::Status SqliteStore::AppendLedgerLocked(LedgerRow& row, int64_t account_id,
                                             int64_t dataset_id) {
  ASSIGN_OR_RETURN(auto head, LedgerHeadLocked());
  row.seq = head.first + 1;
  row.prev_hash = head.second;
  row.hash = LedgerRowHash(row, account_id, dataset_id);
  Stmt s(db_, absl::StrCat("INSERT INTO ledger(", kLedgerCols,
                           ") VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)")
                  .c_str());
  s.Bind(1, row.seq).Bind(2, row.time_micros).Bind(3, row.kind).Bind(4, account_id);
  s.Bind(5, row.account).Bind(6, dataset_id).Bind(7, row.dataset).Bind(8, row.request_kind);
  s.Bind(9, row.idempotency_key).Bind(10, row.epsilon).Bind(11, row.delta);
  s.Bind(12, row.mechanism);
  if (row.pure_micro) {
    s.Bind(13, *row.pure_micro);
  } else {
    s.BindNull(13);
  }
  std::string rdp = EncodeInt64s(row.rdp_nano);
  s.BindBlob(14, rdp).Bind(15, row.prev_hash).Bind(16, row.hash);
  return s.Run();
}

absl::StatusOr<GrantRecord> SqliteStore::SetGrant(const GrantRecord& grant,
                                                  const std::string& account_name,
                                                  const std::string& dataset_name,
                                                  int64_t now_micros) {
  absl::MutexLock lock(&mu_);
  Transaction txn(db_);
  RETURN_IF_ERROR(txn.status());
  Stmt s(db_,
         "INSERT INTO grants(account_id, dataset_id, epsilon_micro, delta) VALUES(?,?,?,?) "
         "ON CONFLICT(account_id, dataset_id) DO UPDATE SET epsilon_micro=excluded.epsilon_micro, "
         "delta=excluded.delta");
  s.Bind(1, grant.account_id).Bind(2, grant.dataset_id).Bind(3, grant.epsilon_micro);
  s.Bind(4, grant.delta);
  RETURN_IF_ERROR(s.Run());
  LedgerRow row = GrantLedgerRow(grant, account_name, dataset_name, now_micros);
  RETURN_IF_ERROR(AppendLedgerLocked(row, grant.account_id, grant.dataset_id));
  RETURN_IF_ERROR(txn.Commit());
  return grant;
}

absl::StatusOr<std::vector<GrantRecord>> SqliteStore::ListGrants() {
  absl::MutexLock lock(&mu_);
  Stmt s(db_,
         "SELECT account_id, dataset_id, epsilon_micro, delta FROM grants "
         "ORDER BY dataset_id, account_id");
  std::vector<GrantRecord> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    out.push_back(GrantRecord{s.Int(0), s.Int(1), s.Int(2), s.Double(3)});
  }
  return out;
}

absl::Status SqliteStore::SetCap(int64_t dataset_id, const std::string& dataset_name,
                                 int64_t epsilon_micro, double delta, int64_t now_micros) {
  absl::MutexLock lock(&mu_);
  Transaction txn(db_);
  RETURN_IF_ERROR(txn.status());
  Stmt s(db_, "UPDATE datasets SET cap_micro=?, cap_delta=? WHERE id=?");
  s.Bind(1, epsilon_micro).Bind(2, delta).Bind(3, dataset_id);
  RETURN_IF_ERROR(s.Run());
  LedgerRow row = CapLedgerRow(dataset_name, epsilon_micro, delta, now_micros);
  RETURN_IF_ERROR(AppendLedgerLocked(row, 0, dataset_id));
  return txn.Commit();
}

absl::StatusOr<GrantRecord> SqliteStore::GrantLocked(int64_t account_id, int64_t dataset_id) {
  Stmt s(db_, "SELECT epsilon_micro, delta FROM grants WHERE account_id=? AND dataset_id=?");
  s.Bind(1, account_id).Bind(2, dataset_id);
  RETURN_IF_ERROR(NotFoundIfNoRow(s.Step(), "no grant"));
  return GrantRecord{account_id, dataset_id, s.Int(0), s.Double(1)};
}

absl::StatusOr<Spend> SqliteStore::SpendLocked(int64_t account_id, int64_t dataset_id) {
  Stmt s(db_,
         "SELECT releases, pure_micro, rdp_all, rdp_nonpure FROM spend "
         "WHERE account_id=? AND dataset_id=?");
  s.Bind(1, account_id).Bind(2, dataset_id);
  ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return Spend{};
  return ReadSpend(s, 0);
}

absl::StatusOr<Spend> SqliteStore::DatasetSpendLocked(int64_t dataset_id) {
  Stmt s(db_, "SELECT releases, pure_micro, rdp_all, rdp_nonpure FROM spend WHERE dataset_id=?");
  s.Bind(1, dataset_id);
  Spend total;
  while (true) {
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    ASSIGN_OR_RETURN(Spend one, ReadSpend(s, 0));
    total.Merge(one);  // saturating: a wrapped sum would look like no spend at all
  }
  return total;
}

absl::StatusOr<BudgetState> SqliteStore::GetBudget(int64_t account_id, int64_t dataset_id) {
  absl::MutexLock lock(&mu_);
  BudgetState state;
  ASSIGN_OR_RETURN(state.grant, GrantLocked(account_id, dataset_id));
  ASSIGN_OR_RETURN(state.spend, SpendLocked(account_id, dataset_id));
  state.spent_micro = SpentEpsilonMicro(state.spend, state.grant.delta);
  return state;
}

absl::StatusOr<Spend> SqliteStore::GetDatasetSpend(int64_t dataset_id) {
  absl::MutexLock lock(&mu_);
  return DatasetSpendLocked(dataset_id);
}

// ---- tables --------------------------------------------------------------------------------

absl::Status SqliteStore::PutTable(const TableRecord& table) {
  absl::MutexLock lock(&mu_);
  Stmt s(db_,
         "INSERT INTO company_tables(handle, account_id, dataset_id, rows, expires_micros, "
         "payload) VALUES(?,?,?,?,?,?)");
  s.Bind(1, table.handle).Bind(2, table.account_id).Bind(3, table.dataset_id);
  s.Bind(4, table.rows).Bind(5, table.expires_micros).BindBlob(6, table.payload);
  return s.Run();
}

absl::StatusOr<TableRecord> SqliteStore::GetTable(const std::string& handle) {
  return ReadTable(handle, /*with_payload=*/true);
}

absl::StatusOr<TableRecord> SqliteStore::GetTableInfo(const std::string& handle) {
  return ReadTable(handle, /*with_payload=*/false);
}

absl::StatusOr<TableRecord> SqliteStore::ReadTable(const std::string& handle, bool with_payload) {
  absl::MutexLock lock(&mu_);
  Stmt s(db_, with_payload ? "SELECT handle, account_id, dataset_id, rows, expires_micros, payload "
                             "FROM company_tables WHERE handle=?"
                           : "SELECT handle, account_id, dataset_id, rows, expires_micros, '' "
                             "FROM company_tables WHERE handle=?");
  s.Bind(1, handle);
  RETURN_IF_ERROR(NotFoundIfNoRow(s.Step(), UnknownTable(handle)));
  return TableRecord{s.Text(0), s.Int(1), s.Int(2), s.Int(3), s.Int(4), s.Text(5)};
}

absl::StatusOr<int64_t> SqliteStore::PurgeExpiredTables(int64_t now_micros) {
  absl::MutexLock lock(&mu_);
  // A queued or running job still reads its table (a re-run after a restart too): keep it
  // until the job finishes, however old the handle.
  Stmt s(db_,
         "DELETE FROM company_tables WHERE expires_micros < ? AND handle NOT IN "
         "(SELECT table_handle FROM jobs WHERE state IN (1, 2))");
  s.Bind(1, now_micros);
  RETURN_IF_ERROR(s.Run());
  return static_cast<int64_t>(sqlite3_changes(db_));
}

// ---- charges -------------------------------------------------------------------------------

absl::StatusOr<StoredResponse> SqliteStore::GetStoredResponse(int64_t account_id,
                                                              const std::string& key) {
  absl::MutexLock lock(&mu_);
  Stmt s(db_,
         "SELECT request_kind, params_digest, ledger_seq, payload, error_code, error_message "
         "FROM responses WHERE account_id=? AND idempotency_key=?");
  s.Bind(1, account_id).Bind(2, key);
  RETURN_IF_ERROR(NotFoundIfNoRow(s.Step(), "no stored response"));
  return StoredResponse{s.Text(0), s.Text(1), s.Int(2), s.Text(3), StoredFailure(s, 4)};
}

absl::StatusOr<ChargeOutcome> SqliteStore::Charge(const ChargeRequest& request, int64_t now_micros,
                                                  const ChargeBody& body) {
  absl::MutexLock lock(&mu_);
  Transaction txn(db_);
  RETURN_IF_ERROR(txn.status());

  // 1. Replays return the stored bytes, charged once.
  {
    Stmt s(db_,
           "SELECT params_digest, payload, error_code, error_message FROM responses WHERE "
           "account_id=? AND idempotency_key=?");
    s.Bind(1, request.account_id).Bind(2, request.idempotency_key);
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (row) {
      if (s.Text(0) != request.params_digest) {
        return IdempotencyKeyReused(request.idempotency_key);
      }
      RETURN_IF_ERROR(StoredFailure(s, 2));
      return ChargeOutcome{s.Text(1), true};
    }
  }

  // 2. The privacy filter, on the declared cost only, and the job limit.
  ASSIGN_OR_RETURN(Spend spend, SpendLocked(request.account_id, request.dataset_id));
  absl::StatusOr<DatasetRecord> dataset = DatasetLocked("id=?", request.dataset_id, "");
  ASSIGN_OR_RETURN(
      Admission admitted,
      AdmitCharge(
          request, GrantLocked(request.account_id, request.dataset_id), spend, dataset,
          [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return DatasetSpendLocked(request.dataset_id); },
          [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS -> absl::StatusOr<int64_t> {
            Stmt s(db_, "SELECT COUNT(*) FROM jobs WHERE state IN (1, 2)");
            RETURN_IF_ERROR(s.Step().status());
            return s.Int(0);
          }));

  // 3. Compute the release inside the transaction, then debit and store it together.
  ASSIGN_OR_RETURN(auto head, LedgerHeadLocked());
  const int64_t seq = head.first + 1;
  absl::StatusOr<ChargeResult> computed = body(seq, admitted.after);
  ChargeResult result;
  absl::Status failure;
  if (computed.ok()) {
    result = *std::move(computed);
  } else {
    failure = ChargedFailure(computed.status());
  }

  LedgerRow row = ChargeLedgerRow(request, now_micros);
  RETURN_IF_ERROR(AppendLedgerLocked(row, request.account_id, request.dataset_id));
  if (row.seq != seq) return absl::InternalError("ledger sequence moved inside a transaction");
  {
    Stmt s(db_,
           "INSERT INTO spend(account_id, dataset_id, releases, pure_micro, rdp_all, "
           "rdp_nonpure) VALUES(?,?,?,?,?,?) ON CONFLICT(account_id, dataset_id) DO UPDATE SET "
           "releases=excluded.releases, pure_micro=excluded.pure_micro, "
           "rdp_all=excluded.rdp_all, rdp_nonpure=excluded.rdp_nonpure");
    const Spend& after = admitted.after.spend;
    std::string all = EncodeInt64s(after.rdp_all_nano);
    std::string nonpure = EncodeInt64s(after.rdp_nonpure_nano);
    s.Bind(1, request.account_id).Bind(2, request.dataset_id).Bind(3, after.releases);
    s.Bind(4, after.pure_micro).BindBlob(5, all).BindBlob(6, nonpure);
    RETURN_IF_ERROR(s.Run());
  }
  {
    Stmt s(db_,
           "INSERT INTO responses(account_id, idempotency_key, request_kind, params_digest, "
           "ledger_seq, payload, error_code, error_message) VALUES(?,?,?,?,?,?,?,?)");
    s.Bind(1, request.account_id).Bind(2, request.idempotency_key).Bind(3, request.request_kind);
    s.Bind(4, request.params_digest).Bind(5, seq).BindBlob(6, result.response_payload);
    s.Bind(7, static_cast<int64_t>(failure.code())).Bind(8, std::string(failure.message()));
    RETURN_IF_ERROR(s.Run());
  }
  if (result.artifact) {
    const ArtifactRecord& a = *result.artifact;
    Stmt s(db_,
           "INSERT INTO artifacts(id, account_id, dataset_id, ledger_seq, created_micros, payload) "
           "VALUES(?,?,?,?,?,?)");
    s.Bind(1, a.id).Bind(2, a.account_id).Bind(3, a.dataset_id).Bind(4, seq);
    s.Bind(5, a.created_micros).BindBlob(6, a.payload);
    RETURN_IF_ERROR(s.Run());
  }
  if (result.job) {
    // Created queued and unstarted, paid for by this charge, whatever the record says.
    const JobRecord& j = *result.job;
    Stmt s(db_, absl::StrCat("INSERT INTO jobs(", kJobCols,
                             ") VALUES(?,?,?,?,?,?,?,?,?,?,?,?,0,?,?,0,0,0,'','','',0)")
                    .c_str());
    s.Bind(1, j.id).Bind(2, j.account_id).Bind(3, j.dataset_id).Bind(4, seq);
    s.Bind(5, j.idempotency_key).Bind(6, j.table_handle);
    s.Bind(7, static_cast<int64_t>(j.algorithm)).BindBlob(8, j.request).BindBlob(9, j.plan);
    s.BindBlob(10, j.seed).Bind(11, j.subject_limit);
    s.Bind(12, static_cast<int64_t>(JobState::kQueued)).Bind(13, j.total);
    s.Bind(14, j.submitted_micros != 0 ? j.submitted_micros : now_micros);
    RETURN_IF_ERROR(s.Run());
  }
  RETURN_IF_ERROR(txn.Commit());
  RETURN_IF_ERROR(failure);
  return ChargeOutcome{std::move(result.response_payload), false};
}

absl::StatusOr<ArtifactRecord> SqliteStore::GetArtifact(const std::string& id) {
  absl::MutexLock lock(&mu_);
  Stmt s(db_,
         "SELECT id, account_id, dataset_id, ledger_seq, created_micros, payload FROM artifacts "
         "WHERE id=?");
  s.Bind(1, id);
  RETURN_IF_ERROR(NotFoundIfNoRow(s.Step(), absl::StrCat("unknown artifact_id '", id, "'")));
  return ArtifactRecord{s.Text(0), s.Int(1), s.Int(2), s.Int(3), s.Int(4), s.Text(5)};
}

// ---- access log and secrets -----------------------------------------------------------------

absl::StatusOr<std::vector<AccessLogRow>> SqliteStore::ListAccessLog(const LedgerFilter& filter) {
  absl::MutexLock lock(&mu_);
  Stmt s(db_,
         "SELECT seq, time_micros, account, dataset, artifact_id, rows, new_decisions "
         "FROM access_log "
         "WHERE seq > ?1 AND (?2 IS NULL OR account = ?2) ORDER BY seq LIMIT ?3");
  s.Bind(1, filter.after_seq);
  s.BindOptional(2, filter.account);
  s.Bind(3, static_cast<int64_t>(filter.limit));
  std::vector<AccessLogRow> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    out.push_back(
        AccessLogRow{s.Int(0), s.Int(1), s.Text(2), s.Text(3), s.Text(4), s.Int(5), s.Int(6)});
  }
  return out;
}

absl::StatusOr<absl::flat_hash_map<std::string, DecisionRow>> SqliteStore::GetDecisions(
    const std::string& artifact_id, absl::Span<const std::string* const> subject_keys) {
  absl::MutexLock lock(&mu_);
  absl::flat_hash_map<std::string, DecisionRow> out;
  // Looked up in key order: neighbouring lookups then touch the same B-tree pages.
  std::vector<const std::string*> sorted(subject_keys.begin(), subject_keys.end());
  std::sort(sorted.begin(), sorted.end(),
            [](const std::string* a, const std::string* b) { return *a < *b; });
  // One read transaction for all lookups: otherwise each one takes and drops SQLite's locks.
  RETURN_IF_ERROR(Exec("BEGIN"));
  absl::Status status = [&]() -> absl::Status {
    Stmt s(db_, "SELECT input, output FROM decisions WHERE artifact_id=? AND subject_key=?");
    for (const std::string* key : sorted) {
      s.Bind(1, artifact_id).Bind(2, *key);
      ASSIGN_OR_RETURN(bool row, s.Step());
      if (row) out.emplace(*key, DecisionRow{*key, s.Double(0), s.Double(1)});
      s.Reset();
    }
    return absl::OkStatus();
  }();
  RETURN_IF_ERROR(Exec(status.ok() ? "COMMIT" : "ROLLBACK"));
  RETURN_IF_ERROR(status);
  return out;
}

absl::StatusOr<int64_t> SqliteStore::RecordDecisions(const std::string& artifact_id,
                                                     const std::vector<DecisionRow>& rows,
                                                     const AccessLogRow& log) {
  absl::MutexLock lock(&mu_);
  Transaction txn(db_);
  RETURN_IF_ERROR(txn.status());
  // Inserted in key order: appends to neighbouring B-tree pages instead of random ones.
  std::vector<const DecisionRow*> sorted(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) sorted[i] = &rows[i];
  std::sort(sorted.begin(), sorted.end(), [](const DecisionRow* a, const DecisionRow* b) {
    return a->subject_key < b->subject_key;
  });
  Stmt s(db_, "INSERT INTO decisions(artifact_id, subject_key, input, output) VALUES(?,?,?,?)");
  for (const DecisionRow* r : sorted) {
    s.Bind(1, artifact_id).Bind(2, r->subject_key).Bind(3, r->input).Bind(4, r->output);
    RETURN_IF_ERROR(s.Run());
    s.Reset();
  }
  Stmt entry(db_,
             "INSERT INTO access_log(time_micros, account, dataset, artifact_id, rows, "
             "new_decisions) VALUES(?,?,?,?,?,?)");
  entry.Bind(1, log.time_micros).Bind(2, log.account).Bind(3, log.dataset);
  entry.Bind(4, log.artifact_id).Bind(5, log.rows).Bind(6, log.new_decisions);
  RETURN_IF_ERROR(entry.Run());
  const int64_t seq = static_cast<int64_t>(sqlite3_last_insert_rowid(db_));
  RETURN_IF_ERROR(txn.Commit());
  return seq;
}

// ---- ledger --------------------------------------------------------------------------------

absl::StatusOr<std::vector<LedgerRow>> SqliteStore::ListLedger(const LedgerFilter& filter) {
  absl::MutexLock lock(&mu_);
  Stmt s(db_, absl::StrCat("SELECT ", kLedgerCols,
                           " FROM ledger WHERE seq > ? AND (?2 IS NULL OR account = ?2) AND "
                           "(?3 IS NULL OR dataset = ?3) ORDER BY seq LIMIT ?4")
                  .c_str());
  s.Bind(1, filter.after_seq);
  s.BindOptional(2, filter.account);
  s.BindOptional(3, filter.dataset);
  s.Bind(4, static_cast<int64_t>(filter.limit));
  std::vector<LedgerRow> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    out.push_back(ReadLedger(s));
  }
  return out;
}

namespace {

// Runs `sql` and calls `fn` on each row.
absl::Status ForEachRow(sqlite3* db, const char* sql,
                        const std::function<absl::Status(const Stmt&)>& fn) {
  Stmt s(db, sql);
  while (true) {
    ASSIGN_OR_RETURN(bool has, s.Step());
    if (!has) return absl::OkStatus();
    RETURN_IF_ERROR(fn(s));
  }
}

// What VerifyLedgerFrom reads, from SQLite (the caller holds the connection's mutex).
class SqliteLedgerReader final : public LedgerReader {
 public:
  explicit SqliteLedgerReader(sqlite3* db) : db_(db) {}
  absl::Status ForEachLedgerRow(const RowFn& fn) override {
    return ForEachRow(db_,
                      absl::StrCat("SELECT ", kLedgerCols, " FROM ledger ORDER BY seq").c_str(),
                      [&](const Stmt& s) { return fn(ReadLedger(s), s.Int(3), s.Int(5)); });
  }
  absl::Status ForEachGrant(const GrantFn& fn) override {
    return ForEachRow(db_, "SELECT account_id, dataset_id, epsilon_micro, delta FROM grants",
                      [&](const Stmt& s) { return fn(s.Int(0), s.Int(1), s.Int(2), s.Double(3)); });
  }
  absl::Status ForEachCap(const CapFn& fn) override {
    return ForEachRow(db_,
                      "SELECT id, cap_micro, cap_delta FROM datasets WHERE cap_micro IS NOT NULL",
                      [&](const Stmt& s) { return fn(s.Int(0), s.Int(1), s.Double(2)); });
  }
  absl::Status ForEachSpend(const SpendFn& fn) override {
    return ForEachRow(
        db_, "SELECT account_id, dataset_id, releases, pure_micro, rdp_all, rdp_nonpure FROM spend",
        [&](const Stmt& s) -> absl::Status {
          ASSIGN_OR_RETURN(Spend stored, ReadSpend(s, 2));
          return fn(s.Int(0), s.Int(1), stored);
        });
  }
  absl::StatusOr<bool> DatasetExists(int64_t dataset_id) override {
    Stmt d(db_, "SELECT 1 FROM datasets WHERE id=?");
    d.Bind(1, dataset_id);
    return d.Step();
  }

 private:
  sqlite3* db_;
};

}  // namespace

absl::StatusOr<LedgerVerification> SqliteStore::VerifyLedger() {
  absl::MutexLock lock(&mu_);
  SqliteLedgerReader reader(db_);
  return VerifyLedgerFrom(reader);
}

// ---- jobs ----------------------------------------------------------------------------------

absl::StatusOr<JobRecord> SqliteStore::JobLocked(const std::string& id) {
  Stmt s(db_, absl::StrCat("SELECT ", kJobCols, " FROM jobs WHERE id=?").c_str());
  s.Bind(1, id);
  RETURN_IF_ERROR(NotFoundIfNoRow(s.Step(), UnknownJob(id)));
  return ReadJob(s);
}

absl::Status SqliteStore::RequireLeaseHolderLocked(const std::string& id, const std::string& owner,
                                                   const char* action) {
  ASSIGN_OR_RETURN(JobRecord job, JobLocked(id));
  return RequireLeaseHolder(job, owner, action);
}

absl::StatusOr<JobRecord> SqliteStore::GetJob(const std::string& id) {
  absl::MutexLock lock(&mu_);
  return JobLocked(id);
}

absl::StatusOr<std::vector<JobRecord>> SqliteStore::ListJobs(const JobFilter& filter) {
  absl::MutexLock lock(&mu_);
  // ledger_seq orders jobs by creation (each has its own charge row), unlike a wall clock.
  Stmt s(db_, absl::StrCat("SELECT ", kJobCols,
                           " FROM jobs WHERE (?1 IS NULL OR account_id = ?1) AND "
                           "(?2 IS NULL OR dataset_id = ?2) ORDER BY ledger_seq DESC LIMIT ?3")
                  .c_str());
  s.BindOptional(1, filter.account_id);
  s.BindOptional(2, filter.dataset_id);
  s.Bind(3, static_cast<int64_t>(filter.limit));
  std::vector<JobRecord> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    out.push_back(ReadJob(s));
  }
  return out;
}

absl::StatusOr<std::vector<JobRecord>> SqliteStore::ListUnfinishedJobs() {
  absl::MutexLock lock(&mu_);
  Stmt s(db_,
         absl::StrCat("SELECT ", kJobCols, " FROM jobs WHERE state IN (1, 2) ORDER BY ledger_seq")
             .c_str());
  std::vector<JobRecord> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    out.push_back(ReadJob(s));
  }
  return out;
}

absl::StatusOr<JobRecord> SqliteStore::StartJob(const std::string& id, const JobLease& lease) {
  absl::MutexLock lock(&mu_);
  Transaction txn(db_);
  RETURN_IF_ERROR(txn.status());
  // The claimability test and the change are one statement: of two claimants, one changes the
  // row. A re-run starts from scratch (from the same stored randomness), so its progress does.
  Stmt s(db_,
         "UPDATE jobs SET state=2, attempts=attempts+1, started_micros=?1, finished_micros=0, "
         "done=0, lease_owner=?2, lease_expires_micros=?3 "
         "WHERE id=?4 AND (state=1 OR (state=2 AND lease_expires_micros < ?1))");
  s.Bind(1, lease.now_micros).Bind(2, lease.owner).Bind(3, lease.expires_micros).Bind(4, id);
  RETURN_IF_ERROR(s.Run());
  const bool claimed = sqlite3_changes(db_) > 0;
  ASSIGN_OR_RETURN(JobRecord job, JobLocked(id));
  if (!claimed) return NotClaimable(job, lease.now_micros);
  RETURN_IF_ERROR(txn.Commit());
  return job;
}

absl::Status SqliteStore::RenewJobLease(const std::string& id, const JobLease& lease) {
  absl::MutexLock lock(&mu_);
  Stmt s(db_, "UPDATE jobs SET lease_expires_micros=? WHERE id=? AND state=2 AND lease_owner=?");
  s.Bind(1, lease.expires_micros).Bind(2, id).Bind(3, lease.owner);
  RETURN_IF_ERROR(s.Run());
  if (sqlite3_changes(db_) > 0) return absl::OkStatus();
  return RequireLeaseHolderLocked(id, lease.owner, "renew the lease of");
}

absl::Status SqliteStore::UpdateJobProgress(const std::string& id, const std::string& owner,
                                            int64_t done, int64_t total) {
  absl::MutexLock lock(&mu_);
  Stmt s(db_, "UPDATE jobs SET done=?, total=? WHERE id=? AND state=2 AND lease_owner=?");
  s.Bind(1, done).Bind(2, total).Bind(3, id).Bind(4, owner);
  return s.Run();
}

absl::Status SqliteStore::FinishJob(const std::string& id, const std::string& owner,
                                    const ArtifactRecord& artifact, int64_t now_micros) {
  absl::MutexLock lock(&mu_);
  Transaction txn(db_);
  RETURN_IF_ERROR(txn.status());
  RETURN_IF_ERROR(RequireLeaseHolderLocked(id, owner, "finish"));
  {
    // The artifact was paid for by the job's charge.
    Stmt s(db_,
           "INSERT INTO artifacts(id, account_id, dataset_id, ledger_seq, created_micros, payload) "
           "SELECT ?, ?, ?, ledger_seq, ?, ? FROM jobs WHERE id=?");
    s.Bind(1, artifact.id).Bind(2, artifact.account_id).Bind(3, artifact.dataset_id);
    s.Bind(4, artifact.created_micros).BindBlob(5, artifact.payload).Bind(6, id);
    RETURN_IF_ERROR(s.Run());
  }
  Stmt u(db_,
         "UPDATE jobs SET state=3, artifact_id=?, finished_micros=?, "
         "done=CASE WHEN total > 0 THEN total ELSE done END WHERE id=?");
  u.Bind(1, artifact.id).Bind(2, now_micros).Bind(3, id);
  RETURN_IF_ERROR(u.Run());
  return txn.Commit();
}

absl::Status SqliteStore::FailJob(const std::string& id, const std::string& owner,
                                  const std::string& error, int64_t now_micros) {
  absl::MutexLock lock(&mu_);
  Transaction txn(db_);
  RETURN_IF_ERROR(txn.status());
  RETURN_IF_ERROR(RequireLeaseHolderLocked(id, owner, "fail"));
  Stmt u(db_, "UPDATE jobs SET state=4, error=?, finished_micros=? WHERE id=?");
  u.Bind(1, error).Bind(2, now_micros).Bind(3, id);
  RETURN_IF_ERROR(u.Run());
  return txn.Commit();
}

absl::StatusOr<JobRecord> SqliteStore::CancelJob(const std::string& id, int64_t now_micros) {
  absl::MutexLock lock(&mu_);
  Transaction txn(db_);
  RETURN_IF_ERROR(txn.status());
  Stmt u(db_, "UPDATE jobs SET state=5, finished_micros=?, error=? WHERE id=? AND state IN (1, 2)");
  u.Bind(1, now_micros).Bind(2, std::string(kCancelledByCompany)).Bind(3, id);
  RETURN_IF_ERROR(u.Run());
  ASSIGN_OR_RETURN(JobRecord job, JobLocked(id));
  RETURN_IF_ERROR(txn.Commit());
  return job;
}

}  // namespace fairvault::server::storage
