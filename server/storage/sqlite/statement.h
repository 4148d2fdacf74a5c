// The SQLite backend's statements, transactions and row readers, shared by its files (one per
// domain: catalog, ledger, tables, artifacts, jobs). Internal to server/storage/sqlite.
#ifndef FAIRVAULT_SERVER_STORAGE_SQLITE_STATEMENT_H_
#define FAIRVAULT_SERVER_STORAGE_SQLITE_STATEMENT_H_

#include <sqlite3.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "core/accounting/accountant.h"
#include "core/util/status_macros.h"
#include "server/storage/store.h"
#include "server/storage/store_common.h"

namespace fairvault::server::storage::sqlite {

// The status of a failed call `what` on `db` that returned `rc`: AlreadyExists for a
// constraint; Unavailable ("retry") while another process holds the database past the busy
// timeout (SQLITE_BUSY), so that a job is re-run rather than failed and a client retries;
// Internal otherwise (SQLITE_LOCKED too: a conflict inside this process is a bug, not worth
// a retry). The message is SQLite's for `db`.
absl::Status SqliteFailure(sqlite3* db, int rc, const char* what);

// One connection's prepared statements, kept by their SQL text for reuse (compiling a
// statement cost about a sixth of a charge's CPU). A statement in use is not shared: a second
// use of the same text meanwhile prepares its own. Not thread-safe: the connection's lock
// guards it. Clear() before closing the connection.
class StmtCache {
 public:
  explicit StmtCache(sqlite3* db) : db_(db) {}
  ~StmtCache() { Clear(); }
  StmtCache(const StmtCache&) = delete;
  StmtCache& operator=(const StmtCache&) = delete;

  sqlite3* db() const { return db_; }
  // A statement for `sql` (from the cache when idle there); *rc is the prepare's result.
  sqlite3_stmt* Take(const std::string& sql, int* rc);
  // Hands a statement from Take back, reset and without bindings.
  void Give(const std::string& sql, sqlite3_stmt* stmt);
  void Clear();

 private:
  // Beyond this many texts the cache starts over (the store's texts are a fixed set).
  static constexpr size_t kMaxStatements = 256;
  struct Entry {
    sqlite3_stmt* stmt = nullptr;
    bool in_use = false;
  };
  sqlite3* db_;
  absl::flat_hash_map<std::string, Entry> entries_;
};

// Read-only connections to one database file, each with its statements, lent to one reader
// at a time. Thread-safe.
class ReaderPool {
 public:
  ReaderPool() = default;
  ~ReaderPool() { Close(); }
  ReaderPool(const ReaderPool&) = delete;
  ReaderPool& operator=(const ReaderPool&) = delete;

  // Opens `count` read-only connections to `path` that wait up to `busy_millis` for a
  // writer's lock; returns how many opened (those serve; none: empty()).
  int Open(const std::string& path, int count, int busy_millis);
  bool empty() const { return readers_.empty(); }
  // Runs `read` on an idle connection, waiting while all are lent out. A read that opened a
  // transaction (BEGIN ... COMMIT) and did not end it has it rolled back, so that no snapshot
  // outlives the read. Not for an empty pool.
  template <typename Read>
  auto Run(const Read& read) {
    StmtCache* reader = Take();
    absl::Cleanup given = [this, reader] { Give(reader); };  // also if `read` throws
    return ReadOn(*reader, read);
  }
  template <typename Read>
  static auto ReadOn(StmtCache& cache, const Read& read) {
    absl::Cleanup ended = [&cache] { EndRead(cache.db()); };
    return read(cache);
  }
  // Finalizes every statement and closes every connection; for the owner's destructor, once
  // no read runs.
  void Close();

 private:
  // Rolls back a transaction a read left open; reports (to the log) one that stays open.
  static void EndRead(sqlite3* db);
  StmtCache* Take();
  void Give(StmtCache* reader);

  std::vector<std::unique_ptr<StmtCache>> readers_;  // set by Open
  absl::Mutex mu_;
  std::vector<StmtCache*> idle_ ABSL_GUARDED_BY(mu_);
};

// A prepared statement; binds are 1-based, columns 0-based as in SQLite. Made from a
// StmtCache, it is taken from the cache and handed back, reset, when destroyed.
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) : db_(db) {
    rc_ = sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr);
  }
  Stmt(StmtCache& cache, const std::string& sql) : db_(cache.db()), cache_(&cache), sql_(sql) {
    stmt_ = cache.Take(sql_, &rc_);
  }
  ~Stmt() {
    if (cache_ != nullptr) {
      cache_->Give(sql_, stmt_);
    } else {
      sqlite3_finalize(stmt_);
    }
  }
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
  // A ListingAfterCursor query's parameters.
  Stmt& BindListing(const ListingQuery& q) {
    int i = 0;
    Bind(++i, q.after_seq);
    for (const std::string& v : q.filters) Bind(++i, v);
    return Bind(++i, q.limit);
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
    return SqliteFailure(db_, rc, what);
  }
  Stmt& Bound(int rc) {
    if (bind_rc_ == SQLITE_OK) bind_rc_ = rc;
    return *this;
  }
  sqlite3* db_;
  StmtCache* cache_ = nullptr;
  std::string sql_;  // the cache's key
  sqlite3_stmt* stmt_ = nullptr;
  int rc_;
  int bind_rc_ = SQLITE_OK;  // the first failed bind, reported by Step()
};

// Every row `s` returns, each made by `read(s)`.
template <typename ReadRow>
auto AllRows(Stmt& s, const ReadRow& read)
    -> absl::StatusOr<std::vector<decltype(read(std::declval<const Stmt&>()))>> {
  std::vector<decltype(read(std::declval<const Stmt&>()))> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return out;
    out.push_back(read(s));
  }
}

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
    const int rc = sqlite3_exec(db_, sql, nullptr, nullptr, nullptr);
    return rc == SQLITE_OK ? absl::OkStatus() : SqliteFailure(db_, rc, sql);
  }
  sqlite3* db_;
  absl::Status status_;
  bool done_ = false;
};

inline constexpr char kAccountCols[] =
    "id, name, role, key_salt, key_hash, created_micros";
inline constexpr char kDatasetCols[] =
    "id, name, attributes, created_micros, subject_count, cap_micro, cap_delta";
inline constexpr char kLedgerCols[] =
    "seq, time_micros, kind, account_id, account, dataset_id, dataset, request_kind, "
    "idempotency_key, epsilon, delta, mechanism, pure_micro, rdp, prev_hash, hash, actor";
// What ListLedger selects after kLedgerCols: the artifact and the job each charge created.
inline constexpr char kLedgerCreatedCols[] =
    "COALESCE((SELECT MIN(a.id) FROM artifacts a WHERE a.ledger_seq = ledger.seq), ''), "
    "COALESCE((SELECT MIN(j.id) FROM jobs j WHERE j.ledger_seq = ledger.seq), '')";
inline constexpr char kJobCols[] =
    "id, account_id, dataset_id, ledger_seq, idempotency_key, table_handle, algorithm, request, "
    "plan, seed, subject_limit, state, done, total, submitted_micros, started_micros, "
    "finished_micros, attempts, artifact_id, error, lease_owner, lease_expires_micros";

AccountRecord ReadAccount(const Stmt& s);
DatasetRecord ReadDataset(const Stmt& s);
absl::StatusOr<core::accounting::Spend> ReadSpend(const Stmt& s, int first_col);
LedgerRow ReadLedger(const Stmt& s);
// The failure stored in (error_code, error_message) columns starting at `first_col`.
absl::Status StoredFailure(const Stmt& s, int first_col);
absl::Status NotFoundIfNoRow(absl::StatusOr<bool> row, const std::string& what);
JobRecord ReadJob(const Stmt& s);

}  // namespace fairvault::server::storage::sqlite

#endif  // FAIRVAULT_SERVER_STORAGE_SQLITE_STATEMENT_H_
