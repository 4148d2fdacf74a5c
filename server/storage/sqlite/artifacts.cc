// The SQLite backend: artifacts, the decisions Decide stored, and the access log.
#include "server/storage/sqlite/sqlite_store.h"

#include <sqlite3.h>

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/util/status_macros.h"
#include "core/util/truncate.h"
#include "server/storage/ledger_chain.h"
#include "server/storage/sqlite/statement.h"
#include "server/storage/store_common.h"

namespace fairvault::server::storage {

using sqlite::Stmt;
using sqlite::Transaction;
using sqlite::NotFoundIfNoRow;

absl::StatusOr<ArtifactRecord> SqliteStore::GetArtifact(const std::string& id) {
  absl::MutexLock lock(&mu_);
  Stmt s(*cache_,
         "SELECT id, account_id, dataset_id, ledger_seq, created_micros, payload FROM artifacts "
         "WHERE id=?");
  s.Bind(1, id);
  RETURN_IF_ERROR(NotFoundIfNoRow(s.Step(), absl::StrCat("unknown artifact_id '", id, "'")));
  return ArtifactRecord{s.Text(0), s.Int(1), s.Int(2), s.Int(3), s.Int(4), s.Text(5)};
}

// ---- access log and secrets -----------------------------------------------------------------

absl::StatusOr<std::vector<AccessLogRow>> SqliteStore::ListAccessLog(const LedgerFilter& filter) {
  absl::MutexLock lock(&mu_);
  Stmt s(*cache_,
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
    Stmt s(*cache_, "SELECT input, output FROM decisions WHERE artifact_id=? AND subject_key=?");
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
  Stmt s(*cache_, "INSERT INTO decisions(artifact_id, subject_key, input, output) VALUES(?,?,?,?)");
  for (const DecisionRow* r : sorted) {
    s.Bind(1, artifact_id).Bind(2, r->subject_key).Bind(3, r->input).Bind(4, r->output);
    RETURN_IF_ERROR(s.Run());
    s.Reset();
  }
  Stmt entry(*cache_,
             "INSERT INTO access_log(time_micros, account, dataset, artifact_id, rows, "
             "new_decisions) VALUES(?,?,?,?,?,?)");
  entry.Bind(1, log.time_micros).Bind(2, log.account).Bind(3, log.dataset);
  entry.Bind(4, log.artifact_id).Bind(5, log.rows).Bind(6, log.new_decisions);
  RETURN_IF_ERROR(entry.Run());
  const int64_t seq = static_cast<int64_t>(sqlite3_last_insert_rowid(db_));
  RETURN_IF_ERROR(txn.Commit());
  return seq;
}

}  // namespace fairvault::server::storage
