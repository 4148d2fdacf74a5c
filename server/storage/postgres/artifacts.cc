// The PostgreSQL backend: artifacts, the decisions Decide stored, and the access log.
#include "server/storage/postgres/pg_store.h"

#include <libpq-fe.h>

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/util/status_macros.h"
#include "server/storage/ledger_chain.h"
#include "server/storage/postgres/statement.h"
#include "server/storage/store_common.h"

namespace fairvault::server::storage {

using postgres::Params;
using postgres::Result;
using postgres::NotFoundIfEmpty;

absl::StatusOr<ArtifactRecord> PgStore::GetArtifact(const std::string& id) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  ASSIGN_OR_RETURN(Result r, c->Exec("SELECT id, account_id, dataset_id, ledger_seq, "
                                     "created_micros, payload FROM artifacts WHERE id=$1",
                                     Params().Text(id)));
  RETURN_IF_ERROR(NotFoundIfEmpty(r, absl::StrCat("unknown artifact_id '", id, "'")));
  return ArtifactRecord{r.Text(0, 0), r.Int(0, 1), r.Int(0, 2),
                        r.Int(0, 3),  r.Int(0, 4), r.Text(0, 5)};
}

// ---- access log and decisions ----------------------------------------------------------------

absl::StatusOr<std::vector<AccessLogRow>> PgStore::ListAccessLog(const LedgerFilter& filter) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  const ListingQuery q = ListingAfterCursor(filter, '$', /*by_dataset=*/false);
  ASSIGN_OR_RETURN(Result r, c->Exec(absl::StrCat("SELECT seq, time_micros, account, dataset, "
                                                  "artifact_id, rows, new_decisions "
                                                  "FROM access_log",
                                                  q.sql)
                                         .c_str(),
                                     Params::Listing(q)));
  std::vector<AccessLogRow> out;
  for (int i = 0; i < r.rows(); ++i) {
    out.push_back(AccessLogRow{r.Int(i, 0), r.Int(i, 1), r.Text(i, 2), r.Text(i, 3), r.Text(i, 4),
                               r.Int(i, 5), r.Int(i, 6)});
  }
  return out;
}

absl::Status PgStore::ForEachDecisionBatch(
    const std::string& artifact_id, int64_t after_batch,
    const std::function<absl::Status(int64_t batch, const std::string& payload)>& fn) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  ASSIGN_OR_RETURN(Result r, c->Exec("SELECT batch, payload FROM decision_batches "
                                     "WHERE artifact_id=$1 AND batch>$2 ORDER BY batch",
                                     Params().Text(artifact_id).Int(after_batch)));
  for (int i = 0; i < r.rows(); ++i) RETURN_IF_ERROR(fn(r.Int(i, 0), r.Text(i, 1)));
  return absl::OkStatus();
}

absl::Status PgStore::ForEachKeyedDecision(
    const std::string& artifact_id, const std::function<absl::Status(const DecisionRow&)>& fn) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  ASSIGN_OR_RETURN(Result r, c->Exec("SELECT subject_key, input, output FROM decisions "
                                     "WHERE artifact_id=$1",
                                     Params().Text(artifact_id)));
  for (int i = 0; i < r.rows(); ++i) {
    RETURN_IF_ERROR(fn(DecisionRow{r.Text(i, 0), r.Double(i, 1), r.Double(i, 2)}));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> PgStore::RecordDecisionBatch(const std::string& artifact_id,
                                                     int64_t batch, const std::string& payload,
                                                     const AccessLogRow& log) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  absl::StatusOr<int64_t> seq = c->InTransaction([&]() -> absl::StatusOr<int64_t> {
    if (!payload.empty()) {
      RETURN_IF_ERROR(c->Run(
          "INSERT INTO decision_batches(artifact_id, batch, payload) VALUES($1,$2,$3)",
          Params().Text(artifact_id).Int(batch).Bytes(payload)));
    }
    // The artifact's dataset, after the batch (see RequireDatasetUntilCommit): nothing is
    // recorded for an artifact deleted with its dataset.
    ASSIGN_OR_RETURN(Result d, c->Exec("SELECT d.id FROM datasets d JOIN artifacts a ON "
                                       "a.dataset_id=d.id WHERE a.id=$1 FOR KEY SHARE OF d",
                                       Params().Text(artifact_id)));
    if (d.rows() == 0) return DeletedWithItsDataset(absl::StrCat("artifact '", artifact_id, "'"));
    // Access-log rows get consecutive seqs in commit order (a sequence would leave gaps and
    // commit out of order, and an auditor paging by seq could miss a row).
    RETURN_IF_ERROR(c->LockHead("access_log"));
    ASSIGN_OR_RETURN(Result head, c->Exec("SELECT COALESCE(MAX(seq), 0) FROM access_log"));
    const int64_t next = head.Int(0, 0) + 1;
    RETURN_IF_ERROR(
        c->Run("INSERT INTO access_log(seq, time_micros, account, dataset, "
               "artifact_id, rows, new_decisions) VALUES($1,$2,$3,$4,$5,$6,$7)",
               Params()
                   .Int(next)
                   .Int(log.time_micros)
                   .Text(log.account)
                   .Text(log.dataset)
                   .Text(log.artifact_id)
                   .Int(log.rows)
                   .Int(log.new_decisions)));
    return next;
  });
  if (absl::IsAlreadyExists(seq.status())) return DecidedConcurrently();
  return seq;
}

}  // namespace fairvault::server::storage
