// The SQLite backend: the connections, the schema and its migrations, the checkpointer and
// backups. Its statements are in statement.h; its queries in one file per domain (catalog.cc,
// ledger.cc, tables.cc, artifacts.cc, jobs.cc).
#include "server/storage/sqlite/sqlite_store.h"

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
#include "server/storage/sqlite/statement.h"
#include "server/storage/store_common.h"
#include "server/util/private_file.h"

namespace fairvault::server::storage {

using sqlite::Stmt;
using sqlite::Transaction;

namespace {

using core::accounting::PrivacyCost;
using core::accounting::Spend;
using core::accounting::SpentEpsilonMicro;

// The schema version Migrate() brings a database to (PRAGMA user_version).
constexpr int64_t kSchemaVersion = 11;

// The checkpointer: a round every kCheckpointPeriod (or when a commit finds the log large).
// A RESTART checkpoint is tried for kRestartTime (the store's calls wait meanwhile); after a
// refusal it is retried after a doubling pause, at most kMaxRestartBackoff, so that a reader
// that keeps one snapshot open (a backup under way) does not stall the writes every round.
constexpr absl::Duration kCheckpointPeriod = absl::Milliseconds(200);
constexpr absl::Duration kRestartTime = absl::Milliseconds(250);
// The checkpointer copies the log when this much is new since its last round, or sooner
// when the log has been still for kQuietRoundPeriod.
constexpr int64_t kRoundBytes = int64_t{1} << 20;
constexpr absl::Duration kQuietRoundPeriod = absl::Seconds(1);
constexpr absl::Duration kMaxRestartBackoff = absl::Seconds(5);
// SQLite's frame header: each frame of the log is one page plus these bytes.
constexpr int64_t kWalFrameHeaderBytes = 24;

// The busy handler of a RESTART checkpoint: about 2 ms of polling every 100 us, then the
// call fails and Restart() calls again. A reader that runs one short transaction after
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
  rdp BLOB NOT NULL, prev_hash TEXT NOT NULL, hash TEXT NOT NULL,
  actor TEXT NOT NULL DEFAULT '');
CREATE INDEX IF NOT EXISTS ledger_by_account ON ledger(account, seq);
CREATE TRIGGER IF NOT EXISTS ledger_no_update BEFORE UPDATE ON ledger
  BEGIN SELECT RAISE(ABORT, 'the ledger is append-only'); END;
CREATE TRIGGER IF NOT EXISTS ledger_no_delete BEFORE DELETE ON ledger
  BEGIN SELECT RAISE(ABORT, 'the ledger is append-only'); END;
CREATE TABLE IF NOT EXISTS responses(
  account_id INTEGER NOT NULL, idempotency_key TEXT NOT NULL, request_kind TEXT NOT NULL,
  params_digest TEXT NOT NULL, ledger_seq INTEGER NOT NULL, payload BLOB NOT NULL,
  error_code INTEGER NOT NULL DEFAULT 0, error_message TEXT NOT NULL DEFAULT '',
  pending INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY(account_id, idempotency_key));
CREATE TABLE IF NOT EXISTS access_log(
  seq INTEGER PRIMARY KEY AUTOINCREMENT, time_micros INTEGER NOT NULL, account TEXT NOT NULL,
  dataset TEXT NOT NULL, artifact_id TEXT NOT NULL, rows INTEGER NOT NULL,
  new_decisions INTEGER NOT NULL DEFAULT -1);
-- A company's access-log listing (ListAccessLog by account). One index row per Decide call.
CREATE INDEX IF NOT EXISTS access_log_by_account ON access_log(account, seq);
CREATE TRIGGER IF NOT EXISTS access_log_no_update BEFORE UPDATE ON access_log
  BEGIN SELECT RAISE(ABORT, 'the access log is append-only'); END;
CREATE TRIGGER IF NOT EXISTS access_log_no_delete BEFORE DELETE ON access_log
  BEGIN SELECT RAISE(ABORT, 'the access log is append-only'); END;
CREATE TABLE IF NOT EXISTS decisions(
  artifact_id TEXT NOT NULL, subject_key TEXT NOT NULL, input REAL NOT NULL,
  output REAL NOT NULL, PRIMARY KEY(artifact_id, subject_key)) WITHOUT ROWID;
CREATE TRIGGER IF NOT EXISTS decisions_read_only BEFORE INSERT ON decisions
  BEGIN SELECT RAISE(ABORT,
    'decisions are stored as batches since schema version 7: upgrade this server'); END;
CREATE TABLE IF NOT EXISTS decision_batches(
  artifact_id TEXT NOT NULL, batch INTEGER NOT NULL, payload BLOB NOT NULL,
  PRIMARY KEY(artifact_id, batch));
CREATE TABLE IF NOT EXISTS merkle_nodes(
  level INTEGER NOT NULL, idx INTEGER NOT NULL, hash BLOB NOT NULL,
  PRIMARY KEY(level, idx)) WITHOUT ROWID;
CREATE TRIGGER IF NOT EXISTS merkle_nodes_no_update BEFORE UPDATE ON merkle_nodes
  BEGIN SELECT RAISE(ABORT, 'the Merkle tree is append-only'); END;
CREATE TRIGGER IF NOT EXISTS merkle_nodes_no_delete BEFORE DELETE ON merkle_nodes
  BEGIN SELECT RAISE(ABORT, 'the Merkle tree is append-only'); END;
CREATE TABLE IF NOT EXISTS checkpoints(
  size INTEGER PRIMARY KEY, root BLOB NOT NULL, note TEXT NOT NULL,
  created_micros INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS cosignatures(
  size INTEGER NOT NULL, witness TEXT NOT NULL, key_hash INTEGER NOT NULL, line TEXT NOT NULL,
  created_micros INTEGER NOT NULL, PRIMARY KEY(size, witness, key_hash)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS artifacts(
  id TEXT PRIMARY KEY, account_id INTEGER NOT NULL, dataset_id INTEGER NOT NULL,
  ledger_seq INTEGER NOT NULL, created_micros INTEGER NOT NULL, payload BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS artifacts_by_seq ON artifacts(ledger_seq);
CREATE TABLE IF NOT EXISTS jobs(
  id TEXT PRIMARY KEY, account_id INTEGER NOT NULL, dataset_id INTEGER NOT NULL,
  ledger_seq INTEGER NOT NULL, idempotency_key TEXT NOT NULL, table_handle TEXT NOT NULL,
  algorithm INTEGER NOT NULL, request BLOB NOT NULL, plan BLOB NOT NULL, seed BLOB NOT NULL,
  subject_limit INTEGER NOT NULL, state INTEGER NOT NULL, done INTEGER NOT NULL DEFAULT 0,
  total INTEGER NOT NULL DEFAULT 0, submitted_micros INTEGER NOT NULL,
  started_micros INTEGER NOT NULL DEFAULT 0, finished_micros INTEGER NOT NULL DEFAULT 0,
  attempts INTEGER NOT NULL DEFAULT 0, artifact_id TEXT NOT NULL DEFAULT '',
  error TEXT NOT NULL DEFAULT '', lease_owner TEXT NOT NULL DEFAULT '',
  lease_expires_micros INTEGER NOT NULL DEFAULT 0,
  validation_table_handle TEXT NOT NULL DEFAULT '');
CREATE INDEX IF NOT EXISTS jobs_by_seq ON jobs(ledger_seq);
CREATE INDEX IF NOT EXISTS jobs_by_state ON jobs(state, ledger_seq);
CREATE INDEX IF NOT EXISTS jobs_by_table ON jobs(table_handle, state);
CREATE INDEX IF NOT EXISTS jobs_by_account ON jobs(account_id, ledger_seq);
CREATE INDEX IF NOT EXISTS jobs_by_dataset ON jobs(dataset_id, ledger_seq);
)sql";

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
  // The readers, where the log lets them read beside the writer (a file database in WAL mode).
  if (log >= 0) {
    store->readers_.Open(path, kReaders, store->options_.busy_millis);
    store->listers_.Open(path, kListers, store->options_.busy_millis);
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
  absl::Time restart_after = absl::InfinitePast();
  // The log's length (in frames) at the last round, and when that round ran.
  int64_t frames_then = 0;
  absl::Time last_round = absl::InfinitePast();
  while (true) {
    bool wanted = false;
    {
      absl::MutexLock lock(&ckpt_mu_);
      ckpt_mu_.AwaitWithTimeout(absl::Condition(this, &SqliteStore::CheckpointWanted),
                                kCheckpointPeriod);
      if (stop_) return;
      wanted = wanted_;
      wanted_ = false;
    }
    const absl::Time now = absl::Now();
    if (options_.on_wal_bytes) options_.on_wal_bytes(FileBytes(path_ + "-wal"));
    // A round syncs the log and the database file: worth it once a megabyte is new, or the
    // log has been still for a second (a restarted log counts from zero).
    const int64_t frames = log_frames_.load(std::memory_order_relaxed);
    const int64_t fresh = frames >= frames_then ? frames - frames_then : frames;
    if (!wanted && (fresh == 0 || (fresh * frame_bytes_ < kRoundBytes &&
                                   now - last_round < kQuietRoundPeriod))) {
      continue;
    }
    frames_then = frames;
    last_round = now;
    // After a refusal (a reader held the log back, so the file may be long), the round that
    // succeeds empties the file rather than leaving it to the next commit to cut back, which an
    // idle server may not see for a long time.
    const std::optional<bool> restarted = CheckpointRound(
        /*may_restart=*/now >= restart_after, /*empty=*/backoff > kCheckpointPeriod);
    if (restarted.has_value() && *restarted) {
      backoff = kCheckpointPeriod;
      restart_after = absl::InfinitePast();
    } else if (restarted.has_value() && now >= restart_after) {
      restart_after = now + backoff;
      backoff = std::min(2 * backoff, kMaxRestartBackoff);
    }
  }
}

std::optional<bool> SqliteStore::CheckpointRound(bool may_restart, bool empty) {
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
  // A snapshot this store holds open (VerifyLedger) keeps the log from restarting until it
  // ends: waiting for it would only hold the writes back for kRestartTime, so the round leaves
  // the restart to the next one (and the log grows meanwhile).
  if (snapshots_.load() > 0) {
    log_held_by_snapshot_ = true;  // the log may grow meanwhile
    return std::nullopt;
  }
  if (!may_restart) return false;
  // SQLite's writer lock is not fair: a checkpointer that waits for it rarely gets it between
  // one charge and the next. Holding the store's mutex keeps this process's writes (the only
  // writer) out for the short time it takes to copy what the passive round left.
  absl::MutexLock lock(&mu_);
  // After a snapshot held the log, a file past what commits keep (which an idle server would
  // never cut back) is emptied.
  const bool cut = log_held_by_snapshot_ && FileBytes(path_ + "-wal") > kWalKeptBytes;
  const bool restarted = report(Restart(checkpoint_db_, empty || cut)) == SQLITE_OK;
  if (restarted) log_held_by_snapshot_ = false;
  return restarted;
}

int SqliteStore::Restart(sqlite3* db, bool empty) {
  const int mode = empty ? SQLITE_CHECKPOINT_TRUNCATE : SQLITE_CHECKPOINT_RESTART;
  const absl::Time deadline = absl::Now() + kRestartTime;
  while (true) {
    const int rc = sqlite3_wal_checkpoint_v2(db, nullptr, mode, nullptr, nullptr);
    // A snapshot of this store's own that began meanwhile (VerifyLedger) will not end soon.
    if (rc != SQLITE_BUSY || absl::Now() >= deadline || snapshots_.load() > 0) return rc;
    absl::SleepFor(absl::Microseconds(100));
  }
}

int SqliteStore::OnCommit(void* store, sqlite3*, const char*, int frames)
    ABSL_NO_THREAD_SAFETY_ANALYSIS {  // called inside a commit, which holds mu_
  auto* self = static_cast<SqliteStore*>(store);
  self->log_frames_.store(frames, std::memory_order_relaxed);
  const int64_t log_bytes = int64_t{frames} * self->frame_bytes_;
  if (log_bytes >= kWalCheckpointBytes) {
    absl::MutexLock lock(&self->ckpt_mu_);
    self->wanted_ = true;
  }
  if (log_bytes >= kWalLimitBytes) self->RestartAfterCommit();
  return SQLITE_OK;  // the commit has happened whatever this returns
}

void SqliteStore::RestartAfterCommit() {
  if (absl::Now() < commit_restart_after_ || snapshots_.load() > 0) return;
  // The checkpointer has fallen behind (or could not take mu_ between two commits), or a
  // verification is about to hold the log. If the checkpointer's passive round holds SQLite's
  // checkpoint lock, Restart() tries again until it is done.
  sqlite3_busy_handler(db_, &PollBriefly, nullptr);
  const int rc = Restart(db_, /*empty=*/false);
  sqlite3_busy_timeout(db_, options_.busy_millis);
  if (rc == SQLITE_OK) {
    log_frames_.store(0, std::memory_order_relaxed);  // until the next commit reports it
  } else {
    commit_restart_after_ = absl::Now() + kMaxRestartBackoff;
  }
}

SqliteStore::SqliteStore(sqlite3* db, std::string path, Options options)
    : db_(db),
      cache_(std::make_unique<sqlite::StmtCache>(db)),
      path_(std::move(path)),
      options_(std::move(options)) {}

SqliteStore::~SqliteStore() {
  if (checkpointer_.joinable()) {
    {
      absl::MutexLock lock(&ckpt_mu_);
      stop_ = true;
    }
    checkpointer_.join();
  }
  sqlite3_close(checkpoint_db_);
  readers_.Close();
  listers_.Close();
  absl::MutexLock lock(&mu_);
  cache_.reset();  // finalizes its statements
  sqlite3_close(db_);  // the last connection: checkpoints and removes the WAL
}

absl::Status SqliteStore::Exec(const char* sql) {
  const int rc = sqlite3_exec(db_, sql, nullptr, nullptr, nullptr);
  return rc == SQLITE_OK ? absl::OkStatus() : sqlite::SqliteFailure(db_, rc, "exec");
}

absl::Status SqliteStore::ApplySchema() {
  sqlite3_busy_timeout(db_, options_.busy_millis);
  // 4 KiB pages (new databases only): a charge changes a few small rows, and 64 KiB pages made
  // it log about 330 KB; blobs (tables, import batches) lose nothing measurable to it.
  RETURN_IF_ERROR(Exec("PRAGMA page_size=4096"));
  RETURN_IF_ERROR(Exec("PRAGMA journal_mode=WAL"));
  RETURN_IF_ERROR(Exec("PRAGMA synchronous=FULL"));
  RETURN_IF_ERROR(Exec("PRAGMA foreign_keys=ON"));
  // 64 MiB of page cache instead of SQLite's 2 MiB default: Decide's stored decisions are
  // looked up by the hundred thousand per call.
  RETURN_IF_ERROR(Exec("PRAGMA cache_size=-65536"));
  // After a restart of the log, the WAL file is cut back to kWalKeptBytes rather than keeping its
  // largest size (sqlite_store.h: the file is rewritten in place, not emptied).
  RETURN_IF_ERROR(Exec(absl::StrCat("PRAGMA journal_size_limit=", kWalKeptBytes).c_str()));
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
  if (at > kSchemaVersion) {
    // A newer server's database: this one would not read what the newer schema added (e.g.
    // version 7's decision batches, without which a subject could be decided twice).
    return absl::FailedPreconditionError(absl::StrCat("the database has schema version ", at,
                                                      " but this fairvault-server knows ",
                                                      kSchemaVersion, "; upgrade the server"));
  }
  if (at == kSchemaVersion) return absl::OkStatus();
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
  // Version 5: a job's second table (the managed selection's validation rows; issue 22), kept
  // from the purge like its first.
  if (!columns.count("validation_table_handle")) {
    RETURN_IF_ERROR(
        Exec("ALTER TABLE jobs ADD COLUMN validation_table_handle TEXT NOT NULL DEFAULT ''"));
  }
  // Version 6: grant and cap rows name the regulator account that set them (issue 23). Rows
  // from before keep an empty actor, which their hash never covered.
  ASSIGN_OR_RETURN(columns, columns_of("ledger"));
  if (!columns.count("actor")) {
    RETURN_IF_ERROR(Exec("ALTER TABLE ledger ADD COLUMN actor TEXT NOT NULL DEFAULT ''"));
  }
  // Version 7: decisions are stored as one batch per Decide call (decision_batches, a new
  // table); the rows of `decisions` stay and are still read.
  // Version 8: the ledger's Merkle tree (merkle_nodes) and signed checkpoints (issue 25): the
  // rows written before join the tree now, in order.
  {
    Stmt count(db_, "SELECT COUNT(*) FROM merkle_nodes WHERE level=0");
    ASSIGN_OR_RETURN(bool row, count.Step());
    Stmt rows(db_, "SELECT seq, prev_hash, hash FROM ledger WHERE seq > ? ORDER BY seq");
    rows.Bind(1, row ? count.Int(0) : 0);
    while (true) {
      ASSIGN_OR_RETURN(bool more, rows.Step());
      if (!more) break;
      RETURN_IF_ERROR(AppendTreeLeafLocked(rows.Int(0), rows.Text(1), rows.Text(2)));
    }
  }
  // Version 9: witnesses' cosignatures of checkpoints (cosignatures, a new table).
  // Version 10: a charged release whose post-processing is still to be stored
  // (responses.pending); rows from before are finished.
  ASSIGN_OR_RETURN(columns, columns_of("responses"));
  if (!columns.count("pending")) {
    RETURN_IF_ERROR(Exec("ALTER TABLE responses ADD COLUMN pending INTEGER NOT NULL DEFAULT 0"));
  }
  // Version 11: the jobs' indexes by company and by dataset (kSchema's CREATE INDEX IF NOT
  // EXISTS), which a company's ListJobs and a dataset's deletion search.
  return Exec(absl::StrCat("PRAGMA user_version=", kSchemaVersion).c_str());
}

}  // namespace fairvault::server::storage
