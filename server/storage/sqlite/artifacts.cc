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

// On a listing connection, as ListLedger.
absl::StatusOr<std::vector<AccessLogRow>> SqliteStore::ListAccessLog(const LedgerFilter& filter) {
  return Listing([&](sqlite::StmtCache& cache) -> absl::StatusOr<std::vector<AccessLogRow>> {
    const ListingQuery q = ListingAfterCursor(filter, '?', /*by_dataset=*/false);
    Stmt s(cache, absl::StrCat("SELECT seq, time_micros, account, dataset, artifact_id, rows, "
                               "new_decisions FROM access_log",
                               q.sql)
                      .c_str());
    s.BindListing(q);
    return AllRows(s, [](const Stmt& r) {
      return AccessLogRow{r.Int(0), r.Int(1), r.Text(2), r.Text(3), r.Text(4), r.Int(5), r.Int(6)};
    });
  });
}

absl::Status SqliteStore::ForEachDecisionBatch(
    const std::string& artifact_id, int64_t after_batch,
    const std::function<absl::Status(int64_t batch, const std::string& payload)>& fn) {
  absl::MutexLock lock(&mu_);
  Stmt s(*cache_,
         "SELECT batch, payload FROM decision_batches WHERE artifact_id=? AND batch>? "
         "ORDER BY batch");
  s.Bind(1, artifact_id).Bind(2, after_batch);
  while (true) {
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return absl::OkStatus();
    RETURN_IF_ERROR(fn(s.Int(0), s.Text(1)));
  }
}

absl::Status SqliteStore::ForEachKeyedDecision(
    const std::string& artifact_id, const std::function<absl::Status(const DecisionRow&)>& fn) {
  absl::MutexLock lock(&mu_);
  Stmt s(*cache_, "SELECT subject_key, input, output FROM decisions WHERE artifact_id=?");
  s.Bind(1, artifact_id);
  while (true) {
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return absl::OkStatus();
    RETURN_IF_ERROR(fn(DecisionRow{s.Text(0), s.Double(1), s.Double(2)}));
  }
}

absl::StatusOr<int64_t> SqliteStore::RecordDecisionBatch(const std::string& artifact_id,
                                                         int64_t batch, const std::string& payload,
                                                         const AccessLogRow& log) {
  absl::MutexLock lock(&mu_);
  Transaction txn(db_);
  RETURN_IF_ERROR(txn.status());
  {
    // The artifact goes with its dataset: after that, nothing more is recorded for it.
    Stmt a(*cache_, "SELECT 1 FROM artifacts WHERE id=?");
    a.Bind(1, artifact_id);
    ASSIGN_OR_RETURN(bool found, a.Step());
    if (!found) return DeletedWithItsDataset(absl::StrCat("artifact '", artifact_id, "'"));
  }
  if (!payload.empty()) {
    Stmt s(*cache_,
           "INSERT INTO decision_batches(artifact_id, batch, payload) VALUES(?,?,?)");
    s.Bind(1, artifact_id).Bind(2, batch).BindBlob(3, payload);
    absl::Status stored = s.Run();
    if (absl::IsAlreadyExists(stored)) return DecidedConcurrently();
    RETURN_IF_ERROR(stored);
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
