// The PostgreSQL backend: the companies' uploaded tables.
#include "server/storage/postgres/pg_store.h"

#include <libpq-fe.h>

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/util/status_macros.h"
#include "server/storage/ledger_chain.h"
#include "server/storage/postgres/statement.h"
#include "server/storage/store_common.h"

namespace fairvault::server::storage {

using postgres::Params;
using postgres::Result;
using postgres::NotFoundIfEmpty;

// ---- tables ----------------------------------------------------------------------------------

absl::Status PgStore::PutTable(const TableRecord& table) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  return c->InTransaction([&]() -> absl::Status {
    RETURN_IF_ERROR(c->Run(
        "INSERT INTO company_tables(handle, account_id, dataset_id, rows, expires_micros, "
        "payload) VALUES($1,$2,$3,$4,$5,$6)",
        Params()
            .Text(table.handle)
            .Int(table.account_id)
            .Int(table.dataset_id)
            .Int(table.rows)
            .Int(table.expires_micros)
            .Bytes(table.payload)));
    return postgres::RequireDatasetUntilCommit(*c, table.dataset_id, "the table");
  });
}

absl::StatusOr<TableRecord> PgStore::GetTable(const std::string& handle) {
  return ReadTable(handle, /*with_payload=*/true);
}

absl::StatusOr<TableRecord> PgStore::GetTableInfo(const std::string& handle) {
  return ReadTable(handle, /*with_payload=*/false);
}

absl::StatusOr<TableRecord> PgStore::ReadTable(const std::string& handle, bool with_payload) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  ASSIGN_OR_RETURN(
      Result r,
      c->Exec(with_payload ? "SELECT handle, account_id, dataset_id, rows, expires_micros, payload "
                             "FROM company_tables WHERE handle=$1"
                           : "SELECT handle, account_id, dataset_id, rows, expires_micros, "
                             "''::bytea FROM company_tables WHERE handle=$1",
              Params().Text(handle)));
  RETURN_IF_ERROR(NotFoundIfEmpty(r, UnknownTable(handle)));
  return TableRecord{r.Text(0, 0), r.Int(0, 1), r.Int(0, 2),
                     r.Int(0, 3),  r.Int(0, 4), r.Text(0, 5)};
}

absl::StatusOr<int64_t> PgStore::PurgeExpiredTables(int64_t now_micros) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  // A queued or running job still reads its table (a re-run after a restart too).
  ASSIGN_OR_RETURN(Result r, c->Exec("DELETE FROM company_tables WHERE expires_micros < $1 AND "
                                     "handle NOT IN (SELECT table_handle FROM jobs WHERE state "
                                     "IN (1, 2)) AND handle NOT IN (SELECT "
                                     "validation_table_handle FROM jobs WHERE state IN (1, 2))",
                                     Params().Int(now_micros)));
  return r.changed();
}

}  // namespace fairvault::server::storage
