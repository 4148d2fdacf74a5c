// The SQLite backend: accounts, datasets and their subject batches.
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
using sqlite::ReadAccount;
using sqlite::kAccountCols;
using sqlite::ReadDataset;
using sqlite::kDatasetCols;
using sqlite::NotFoundIfNoRow;

// ---- accounts ------------------------------------------------------------------------------

absl::StatusOr<AccountRecord> SqliteStore::CreateAccount(AccountRecord account) {
  absl::MutexLock lock(&mu_);
  Stmt s(*cache_,
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
  return Reading([&](sqlite::StmtCache& cache) -> absl::StatusOr<AccountRecord> {
    Stmt s(cache, absl::StrCat("SELECT ", kAccountCols, " FROM accounts WHERE id=?").c_str());
    s.Bind(1, id);
    RETURN_IF_ERROR(NotFoundIfNoRow(s.Step(), absl::StrCat("no account with id ", id)));
    return ReadAccount(s);
  });
}

absl::StatusOr<AccountRecord> SqliteStore::GetAccountByName(const std::string& name) {
  absl::MutexLock lock(&mu_);
  Stmt s(*cache_, absl::StrCat("SELECT ", kAccountCols, " FROM accounts WHERE name=?").c_str());
  s.Bind(1, name);
  RETURN_IF_ERROR(NotFoundIfNoRow(s.Step(), absl::StrCat("no account named '", name, "'")));
  return ReadAccount(s);
}

absl::StatusOr<std::vector<AccountRecord>> SqliteStore::ListAccounts() {
  absl::MutexLock lock(&mu_);
  Stmt s(*cache_, absl::StrCat("SELECT ", kAccountCols, " FROM accounts ORDER BY id").c_str());
  return AllRows(s, ReadAccount);
}

// ---- datasets ------------------------------------------------------------------------------

absl::StatusOr<DatasetRecord> SqliteStore::CreateDataset(DatasetRecord dataset) {
  absl::MutexLock lock(&mu_);
  Stmt s(*cache_, "INSERT INTO datasets(name, attributes, created_micros) VALUES(?,?,?)");
  s.Bind(1, dataset.name).BindBlob(2, dataset.attributes).Bind(3, dataset.created_micros);
  absl::Status st = s.Run();
  if (absl::IsAlreadyExists(st)) return DatasetNameTaken(dataset.name);
  RETURN_IF_ERROR(st);
  dataset.id = sqlite3_last_insert_rowid(db_);
  return dataset;
}

absl::StatusOr<DatasetRecord> SqliteStore::DatasetLocked(sqlite::StmtCache& cache,
                                                         const char* where, int64_t id,
                                                         const std::string& name) {
  Stmt s(cache, absl::StrCat("SELECT ", kDatasetCols, " FROM datasets WHERE ", where).c_str());
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
  if (name.empty()) return absl::InvalidArgumentError("dataset must be set");
  return Reading(
      [&](sqlite::StmtCache& cache) { return DatasetLocked(cache, "name=?", 0, name); });
}

absl::StatusOr<DatasetRecord> SqliteStore::GetDatasetById(int64_t id) {
  return Reading([&](sqlite::StmtCache& cache) { return DatasetLocked(cache, "id=?", id, ""); });
}

absl::StatusOr<std::vector<DatasetRecord>> SqliteStore::ListDatasets() {
  absl::MutexLock lock(&mu_);
  Stmt s(*cache_, absl::StrCat("SELECT ", kDatasetCols, " FROM datasets ORDER BY name").c_str());
  return AllRows(s, ReadDataset);
}

absl::Status SqliteStore::DeleteDataset(int64_t dataset_id) {
  absl::MutexLock lock(&mu_);
  Transaction txn(db_);
  RETURN_IF_ERROR(txn.status());
  for (const char* sql :
       {"DELETE FROM subject_batches WHERE dataset_id=?",
        "DELETE FROM company_tables WHERE dataset_id=?",
        "DELETE FROM decisions WHERE artifact_id IN (SELECT id FROM artifacts WHERE dataset_id=?)",
        "DELETE FROM decision_batches WHERE artifact_id IN "
        "(SELECT id FROM artifacts WHERE dataset_id=?)",
        "DELETE FROM artifacts WHERE dataset_id=?", "DELETE FROM jobs WHERE dataset_id=?",
        "DELETE FROM grants WHERE dataset_id=?", "DELETE FROM spend WHERE dataset_id=?",
        "DELETE FROM datasets WHERE id=?"}) {
    Stmt s(*cache_, sql);
    s.Bind(1, dataset_id);
    RETURN_IF_ERROR(s.Run());
  }
  return txn.Commit();
}

// ---- subjects ------------------------------------------------------------------------------

absl::StatusOr<std::string> SqliteStore::GetBatchDigest(int64_t dataset_id,
                                                        const std::string& batch_id) {
  absl::MutexLock lock(&mu_);
  Stmt s(*cache_, "SELECT digest FROM subject_batches WHERE dataset_id=? AND batch_id=?");
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
    Stmt u(*cache_,
           "UPDATE datasets SET subject_count = subject_count + ? WHERE id=? AND "
           "subject_count=?");
    u.Bind(1, rows).Bind(2, dataset_id).Bind(3, expected_subject_count);
    RETURN_IF_ERROR(u.Run());
    if (sqlite3_changes(db_) == 0) return DatasetChangedConcurrently(dataset_id);
  }
  Stmt s(*cache_,
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
  Stmt s(*cache_, "SELECT payload FROM subject_batches WHERE dataset_id=? ORDER BY seq");
  s.Bind(1, dataset_id);
  while (true) {
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    RETURN_IF_ERROR(fn(s.Text(0)));
  }
  return absl::OkStatus();
}

}  // namespace fairvault::server::storage
