#include "server/storage/sqlite/statement.h"

#include <iostream>
#include <utility>

#include "server/storage/ledger_chain.h"
#include "server/storage/store_common.h"

namespace fairvault::server::storage::sqlite {

using core::accounting::Spend;

absl::Status SqliteFailure(sqlite3* db, int rc, const char* what) {
  switch (rc & 0xff) {  // the primary code of an extended one
    case SQLITE_CONSTRAINT:
      return absl::AlreadyExistsError(absl::StrCat("constraint: ", sqlite3_errmsg(db)));
    case SQLITE_BUSY:
      return absl::UnavailableError(absl::StrCat(
          "sqlite ", what, ": ", sqlite3_errmsg(db),
          " (another process holds the vault's database); retry shortly"));
    default:
      return absl::InternalError(absl::StrCat("sqlite ", what, ": ", sqlite3_errmsg(db)));
  }
}

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

absl::StatusOr<Spend> ReadSpend(const Stmt& s, int first_col) {
  Spend spend;
  spend.releases = s.Int(first_col);
  spend.pure_micro = s.Int(first_col + 1);
  ASSIGN_OR_RETURN(spend.rdp_all_nano, DecodeInt64s(s.Text(first_col + 2)));
  ASSIGN_OR_RETURN(spend.rdp_nonpure_nano, DecodeInt64s(s.Text(first_col + 3)));
  return spend;
}

sqlite3_stmt* StmtCache::Take(const std::string& sql, int* rc) {
  auto it = entries_.find(sql);
  if (it != entries_.end() && !it->second.in_use) {
    it->second.in_use = true;
    *rc = SQLITE_OK;
    return it->second.stmt;
  }
  sqlite3_stmt* stmt = nullptr;
  *rc = sqlite3_prepare_v3(db_, sql.c_str(), -1, SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
  if (*rc != SQLITE_OK || it != entries_.end()) return stmt;  // the cached one is in use
  if (entries_.size() >= kMaxStatements) Clear();
  entries_[sql] = Entry{stmt, true};
  return stmt;
}

void StmtCache::Give(const std::string& sql, sqlite3_stmt* stmt) {
  auto it = entries_.find(sql);
  if (it == entries_.end() || it->second.stmt != stmt) {
    sqlite3_finalize(stmt);  // a second copy made while the cached one was in use
    return;
  }
  sqlite3_reset(stmt);
  sqlite3_clear_bindings(stmt);
  it->second.in_use = false;
}

void StmtCache::Clear() {
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (it->second.in_use) {
      ++it;  // its Stmt finalizes it when done (Give finds no entry)
      continue;
    }
    sqlite3_finalize(it->second.stmt);
    entries_.erase(it++);
  }
}

int ReaderPool::Open(const std::string& path, int count, int busy_millis) {
  for (int i = 0; i < count; ++i) {
    sqlite3* db = nullptr;
    if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX,
                        nullptr) != SQLITE_OK) {
      sqlite3_close(db);
      break;
    }
    sqlite3_busy_timeout(db, busy_millis);
    readers_.push_back(std::make_unique<StmtCache>(db));
    absl::MutexLock lock(&mu_);
    idle_.push_back(readers_.back().get());
  }
  return static_cast<int>(readers_.size());
}

void ReaderPool::EndRead(sqlite3* db) {
  if (sqlite3_get_autocommit(db)) return;
  const int rc = sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK || !sqlite3_get_autocommit(db)) {
    // The next read on this connection would see an old snapshot and hold the log back.
    std::cerr << "fairvault: sqlite: a read's transaction did not end: " << sqlite3_errstr(rc)
              << "\n";
  }
}

StmtCache* ReaderPool::Take() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](std::vector<StmtCache*>* idle) { return !idle->empty(); }, &idle_));
  StmtCache* reader = idle_.back();
  idle_.pop_back();
  return reader;
}

void ReaderPool::Give(StmtCache* reader) {
  absl::MutexLock lock(&mu_);
  idle_.push_back(reader);
}

void ReaderPool::Close() {
  {
    absl::MutexLock lock(&mu_);
    idle_.clear();
  }
  for (std::unique_ptr<StmtCache>& reader : readers_) {
    sqlite3* db = reader->db();
    reader.reset();  // finalizes its statements
    sqlite3_close(db);
  }
  readers_.clear();
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
  r.actor = s.Text(16);
  r.account_id = s.Int(3);
  r.dataset_id = s.Int(5);
  return r;
}

absl::Status StoredFailure(const Stmt& s, int first_col) {
  return absl::Status(static_cast<absl::StatusCode>(s.Int(first_col)), s.Text(first_col + 1));
}

absl::Status NotFoundIfNoRow(absl::StatusOr<bool> row, const std::string& what) {
  if (!row.ok()) return row.status();
  if (!*row) return absl::NotFoundError(what);
  return absl::OkStatus();
}


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

}  // namespace fairvault::server::storage::sqlite
