// The SQLite backend: the companies' uploaded tables.
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
using sqlite::NotFoundIfNoRow;

// ---- tables --------------------------------------------------------------------------------

absl::Status SqliteStore::PutTable(const TableRecord& table) {
  absl::MutexLock lock(&mu_);
  // Only beside its dataset: one deleted after the upload read it takes nothing along.
  Stmt s(*cache_,
         "INSERT INTO company_tables(handle, account_id, dataset_id, rows, expires_micros, "
         "payload) SELECT ?1,?2,?3,?4,?5,?6 WHERE EXISTS(SELECT 1 FROM datasets WHERE id=?3)");
  s.Bind(1, table.handle).Bind(2, table.account_id).Bind(3, table.dataset_id);
  s.Bind(4, table.rows).Bind(5, table.expires_micros).BindBlob(6, table.payload);
  RETURN_IF_ERROR(s.Run());
  if (sqlite3_changes(db_) == 0) return DeletedWithItsDataset("the table");
  return absl::OkStatus();
}

absl::StatusOr<TableRecord> SqliteStore::GetTable(const std::string& handle) {
  return ReadTable(handle, /*with_payload=*/true);
}

absl::StatusOr<TableRecord> SqliteStore::GetTableInfo(const std::string& handle) {
  return ReadTable(handle, /*with_payload=*/false);
}

absl::StatusOr<TableRecord> SqliteStore::ReadTable(const std::string& handle, bool with_payload) {
  return Reading([&](sqlite::StmtCache& cache) -> absl::StatusOr<TableRecord> {
    Stmt s(cache, with_payload
                      ? "SELECT handle, account_id, dataset_id, rows, expires_micros, payload "
                        "FROM company_tables WHERE handle=?"
                      : "SELECT handle, account_id, dataset_id, rows, expires_micros, '' "
                        "FROM company_tables WHERE handle=?");
    s.Bind(1, handle);
    RETURN_IF_ERROR(NotFoundIfNoRow(s.Step(), UnknownTable(handle)));
    return TableRecord{s.Text(0), s.Int(1), s.Int(2), s.Int(3), s.Int(4), s.Text(5)};
  });
}

absl::StatusOr<int64_t> SqliteStore::PurgeExpiredTables(int64_t now_micros) {
  absl::MutexLock lock(&mu_);
  // A queued or running job still reads its table (a re-run after a restart too): keep it
  // until the job finishes, however old the handle.
  Stmt s(*cache_,
         "DELETE FROM company_tables WHERE expires_micros < ? AND handle NOT IN "
         "(SELECT table_handle FROM jobs WHERE state IN (1, 2)) AND handle NOT IN "
         "(SELECT validation_table_handle FROM jobs WHERE state IN (1, 2))");
  s.Bind(1, now_micros);
  RETURN_IF_ERROR(s.Run());
  return static_cast<int64_t>(sqlite3_changes(db_));
}

}  // namespace fairvault::server::storage
