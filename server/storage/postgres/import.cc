// The PostgreSQL backend: importing a SQLite vault (fairvault-server migrate --from --to).
#include "server/storage/postgres/pg_store.h"

#include <libpq-fe.h>
#include <sqlite3.h>

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
#include "server/storage/sqlite/sqlite_store.h"
#include "server/storage/store_common.h"

namespace fairvault::server::storage {

using postgres::Params;
using postgres::Result;
using postgres::kInt8;
using postgres::kFloat8;
using postgres::kText;

// ---- import of a SQLite vault ----------------------------------------------------------------

namespace {

// The tables of a vault, in an order that satisfies nothing but readability (there are no
// foreign keys), each with the column its rows are read in order of.
constexpr std::pair<const char*, const char*> kImportedTables[] = {
    {"accounts", "id"},         {"datasets", "id"},
    {"subject_batches", "seq"}, {"grants", "account_id"},
    {"spend", "account_id"},    {"company_tables", "handle"},
    {"ledger", "seq"},          {"responses", "ledger_seq"},
    {"access_log", "seq"},      {"decisions", "artifact_id"},
    {"artifacts", "id"},        {"jobs", "ledger_seq"},
    {"decision_batches", "artifact_id, batch"},
    {"merkle_nodes", "level, idx"}, {"checkpoints", "size"},
    {"cosignatures", "size, witness, key_hash"},
};

}  // namespace

absl::StatusOr<ImportReport> PgStore::ImportSqlite(const std::string& sqlite_path) {
  ImportReport report;
  // The source, brought to the current schema, must verify; its head is what the copy must
  // reproduce.
  {
    ASSIGN_OR_RETURN(std::unique_ptr<SqliteStore> source, SqliteStore::Open(sqlite_path));
    ASSIGN_OR_RETURN(LedgerVerification v, source->VerifyLedger());
    if (!v.ok) {
      return absl::FailedPreconditionError(
          absl::StrCat("the SQLite vault's ledger does not verify (", v.message,
                       "); nothing was copied. Restore a verified backup first"));
    }
    report.source = v;
  }
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(sqlite_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    const std::string msg = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return absl::UnavailableError(absl::StrCat("cannot open ", sqlite_path, ": ", msg));
  }
  struct Closer {
    sqlite3* db;
    ~Closer() {
      sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr);
      sqlite3_close(db);
    }
  } closer{db};
  // One read snapshot of the source for the whole copy.
  if (sqlite3_exec(db, "BEGIN; SELECT COUNT(*) FROM ledger;", nullptr, nullptr, nullptr) !=
      SQLITE_OK) {
    return absl::InternalError(absl::StrCat("sqlite: ", sqlite3_errmsg(db)));
  }

  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  RETURN_IF_ERROR(c->InTransaction([&]() -> absl::Status {
    RETURN_IF_ERROR(c->LockHead("ledger"));
    RETURN_IF_ERROR(c->LockHead("access_log"));
    ASSIGN_OR_RETURN(Result used, c->Exec("SELECT (SELECT COUNT(*) FROM accounts) + "
                                          "(SELECT COUNT(*) FROM datasets) + "
                                          "(SELECT COUNT(*) FROM ledger)"));
    if (used.Int(0, 0) != 0) {
      return absl::FailedPreconditionError(
          "the PostgreSQL database already holds a vault (accounts, datasets or ledger rows); "
          "migrate into a new, empty database");
    }
    // Decisions stored by key before schema version 7 are copied as they are; the trigger that
    // keeps older servers from adding any is off for this transaction's copy only.
    RETURN_IF_ERROR(c->Run("ALTER TABLE decisions DISABLE TRIGGER decisions_read_only"));
    for (const auto& [table, order] : kImportedTables) {
      // PostgreSQL's column types decide how each value is sent.
      ASSIGN_OR_RETURN(Result types, c->Exec("SELECT column_name::text, data_type::text FROM "
                                             "information_schema.columns WHERE table_name=$1 "
                                             "AND table_schema=current_schema()",
                                             Params().Text(table)));
      std::map<std::string, std::string> type_of;
      for (int i = 0; i < types.rows(); ++i) type_of[types.Text(i, 0)] = types.Text(i, 1);
      sqlite3_stmt* stmt = nullptr;
      const std::string select = absl::StrCat("SELECT * FROM ", table, " ORDER BY ", order);
      if (sqlite3_prepare_v2(db, select.c_str(), -1, &stmt, nullptr) != SQLITE_OK) {
        return absl::InternalError(absl::StrCat("sqlite: ", sqlite3_errmsg(db)));
      }
      std::unique_ptr<sqlite3_stmt, int (*)(sqlite3_stmt*)> owned(stmt, sqlite3_finalize);
      const int n = sqlite3_column_count(stmt);
      std::vector<std::string> columns, placeholders;
      for (int i = 0; i < n; ++i) {
        columns.push_back(sqlite3_column_name(stmt, i));
        if (!type_of.count(columns.back())) {
          return absl::FailedPreconditionError(absl::StrCat("column ", table, ".", columns.back(),
                                                            " has no PostgreSQL counterpart"));
        }
        placeholders.push_back(absl::StrCat("$", i + 1));
      }
      const std::string insert =
          absl::StrCat("INSERT INTO ", table, "(", absl::StrJoin(columns, ", "), ") VALUES(",
                       absl::StrJoin(placeholders, ", "), ")");
      int64_t rows = 0;
      while (true) {
        const int rc = sqlite3_step(stmt);
        if (rc == SQLITE_DONE) break;
        if (rc != SQLITE_ROW)
          return absl::InternalError(absl::StrCat("sqlite: ", sqlite3_errmsg(db)));
        Params p;
        std::vector<std::string> values(n);
        for (int i = 0; i < n; ++i) {
          const std::string& type = type_of[columns[i]];
          if (sqlite3_column_type(stmt, i) == SQLITE_NULL) {
            p.Null(type == "bigint" ? kInt8 : type == "double precision" ? kFloat8 : kText);
          } else if (type == "bigint") {
            p.Int(sqlite3_column_int64(stmt, i));
          } else if (type == "double precision") {
            p.Double(sqlite3_column_double(stmt, i));
          } else {
            const void* blob = sqlite3_column_blob(stmt, i);
            values[i].assign(static_cast<const char*>(blob ? blob : ""),
                             sqlite3_column_bytes(stmt, i));
            if (type == "bytea") {
              p.Bytes(values[i]);
            } else {
              p.Text(values[i]);
            }
          }
        }
        RETURN_IF_ERROR(c->Run(insert.c_str(), p));
        ++rows;
      }
      report.rows[table] = rows;
    }
    RETURN_IF_ERROR(c->Run("ALTER TABLE decisions ENABLE TRIGGER decisions_read_only"));
    // Ids are never reused: the sequences continue after the largest id SQLite ever handed out
    // (sqlite_sequence remembers deleted datasets too).
    int64_t max_dataset = 0;
    {
      sqlite3_stmt* stmt = nullptr;
      if (sqlite3_prepare_v2(db, "SELECT seq FROM sqlite_sequence WHERE name='datasets'", -1, &stmt,
                             nullptr) == SQLITE_OK &&
          sqlite3_step(stmt) == SQLITE_ROW) {
        max_dataset = sqlite3_column_int64(stmt, 0);
      }
      sqlite3_finalize(stmt);
    }
    RETURN_IF_ERROR(
        c->Run("SELECT setval('datasets_id_seq', GREATEST($1, (SELECT COALESCE(MAX(id), "
               "0) FROM datasets), 1))",
               Params().Int(max_dataset)));
    RETURN_IF_ERROR(
        c->Run("SELECT setval('accounts_id_seq', GREATEST((SELECT COALESCE(MAX(id), 0) "
               "FROM accounts), 1))"));
    return c->Run(
        "SELECT setval('subject_batches_seq_seq', GREATEST((SELECT COALESCE(MAX(seq), "
        "0) FROM subject_batches), 1))");
  }));
  ASSIGN_OR_RETURN(report.copy, VerifyLedger());
  if (!report.copy.ok || report.copy.head_hash != report.source.head_hash ||
      report.copy.rows_checked != report.source.rows_checked) {
    return absl::DataLossError(absl::StrCat(
        "the copy's ledger (", report.copy.rows_checked, " rows, head ", report.copy.head_hash,
        report.copy.ok ? "" : ", does not verify: " + report.copy.message,
        ") differs from the source's (", report.source.rows_checked, " rows, head ",
        report.source.head_hash,
        "): was a server writing to the SQLite file? Stop it, drop the database and migrate "
        "again"));
  }
  return report;
}

}  // namespace fairvault::server::storage
