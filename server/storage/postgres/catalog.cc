// The PostgreSQL backend: accounts, datasets and their subject batches.
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
using postgres::kAccountCols;
using postgres::kDatasetCols;
using postgres::ReadAccount;
using postgres::ReadDataset;
using postgres::NotFoundIfEmpty;
using postgres::DatasetById;

// ---- accounts --------------------------------------------------------------------------------

absl::StatusOr<AccountRecord> PgStore::CreateAccount(AccountRecord account) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  auto r = c->Exec(
      "INSERT INTO accounts(name, role, key_salt, key_hash, created_micros) "
      "VALUES($1,$2,$3,$4,$5) RETURNING id",
      Params()
          .Text(account.name)
          .Int(static_cast<int64_t>(account.role))
          .Bytes(account.key_salt)
          .Bytes(account.key_hash)
          .Int(account.created_micros));
  if (absl::IsAlreadyExists(r.status())) return AccountNameTaken(account.name);
  RETURN_IF_ERROR(r.status());
  account.id = r->Int(0, 0);
  return account;
}

absl::StatusOr<AccountRecord> PgStore::GetAccountById(int64_t id) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  ASSIGN_OR_RETURN(
      Result r, c->Exec(absl::StrCat("SELECT ", kAccountCols, " FROM accounts WHERE id=$1").c_str(),
                        Params().Int(id)));
  RETURN_IF_ERROR(NotFoundIfEmpty(r, absl::StrCat("no account with id ", id)));
  return ReadAccount(r, 0);
}

absl::StatusOr<AccountRecord> PgStore::GetAccountByName(const std::string& name) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  ASSIGN_OR_RETURN(
      Result r,
      c->Exec(absl::StrCat("SELECT ", kAccountCols, " FROM accounts WHERE name=$1").c_str(),
              Params().Text(name)));
  RETURN_IF_ERROR(NotFoundIfEmpty(r, absl::StrCat("no account named '", name, "'")));
  return ReadAccount(r, 0);
}

absl::StatusOr<std::vector<AccountRecord>> PgStore::ListAccounts() {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  ASSIGN_OR_RETURN(
      Result r,
      c->Exec(absl::StrCat("SELECT ", kAccountCols, " FROM accounts ORDER BY id").c_str()));
  std::vector<AccountRecord> out;
  for (int i = 0; i < r.rows(); ++i) out.push_back(ReadAccount(r, i));
  return out;
}

// ---- datasets --------------------------------------------------------------------------------

absl::StatusOr<DatasetRecord> PgStore::CreateDataset(DatasetRecord dataset) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  auto r = c->Exec(
      "INSERT INTO datasets(name, attributes, created_micros) VALUES($1,$2,$3) RETURNING id",
      Params().Text(dataset.name).Bytes(dataset.attributes).Int(dataset.created_micros));
  if (absl::IsAlreadyExists(r.status())) return DatasetNameTaken(dataset.name);
  RETURN_IF_ERROR(r.status());
  dataset.id = r->Int(0, 0);
  return dataset;
}

absl::StatusOr<DatasetRecord> PgStore::GetDataset(const std::string& name) {
  if (name.empty()) return absl::InvalidArgumentError("dataset must be set");
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  ASSIGN_OR_RETURN(
      Result r,
      c->Exec(absl::StrCat("SELECT ", kDatasetCols, " FROM datasets WHERE name=$1").c_str(),
              Params().Text(name)));
  RETURN_IF_ERROR(NotFoundIfEmpty(r, UnknownDataset(name)));
  return ReadDataset(r, 0);
}

absl::StatusOr<DatasetRecord> PgStore::GetDatasetById(int64_t id) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  return DatasetById(*c, id);
}

absl::StatusOr<std::vector<DatasetRecord>> PgStore::ListDatasets() {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  ASSIGN_OR_RETURN(
      Result r,
      c->Exec(absl::StrCat("SELECT ", kDatasetCols, " FROM datasets ORDER BY name").c_str()));
  std::vector<DatasetRecord> out;
  for (int i = 0; i < r.rows(); ++i) out.push_back(ReadDataset(r, i));
  return out;
}

absl::Status PgStore::DeleteDataset(int64_t dataset_id) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  return c->InTransaction([&]() -> absl::Status {
    // Grants and spend are what the filter reads: change them under the ledger's lock.
    RETURN_IF_ERROR(c->LockHead("ledger"));
    // The dataset's row first: a release finished after its charge (FinishRelease) holds it
    // shared while it stores its artifact, so the artifact is deleted below, or not stored.
    RETURN_IF_ERROR(
        c->Run("SELECT id FROM datasets WHERE id=$1 FOR UPDATE", Params().Int(dataset_id)));
    for (const char* sql :
         {"DELETE FROM subject_batches WHERE dataset_id=$1",
          "DELETE FROM company_tables WHERE dataset_id=$1",
          "DELETE FROM decisions WHERE artifact_id IN (SELECT id FROM artifacts WHERE "
          "dataset_id=$1)",
          "DELETE FROM decision_batches WHERE artifact_id IN (SELECT id FROM artifacts WHERE "
          "dataset_id=$1)",
          "DELETE FROM artifacts WHERE dataset_id=$1", "DELETE FROM jobs WHERE dataset_id=$1",
          "DELETE FROM grants WHERE dataset_id=$1", "DELETE FROM spend WHERE dataset_id=$1",
          "DELETE FROM datasets WHERE id=$1"}) {
      RETURN_IF_ERROR(c->Run(sql, Params().Int(dataset_id)));
    }
    return absl::OkStatus();
  });
}

// ---- subjects --------------------------------------------------------------------------------

absl::StatusOr<std::string> PgStore::GetBatchDigest(int64_t dataset_id,
                                                    const std::string& batch_id) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  ASSIGN_OR_RETURN(Result r,
                   c->Exec("SELECT digest FROM subject_batches WHERE dataset_id=$1 AND batch_id=$2",
                           Params().Int(dataset_id).Text(batch_id)));
  RETURN_IF_ERROR(NotFoundIfEmpty(r, "no such batch"));
  return r.Text(0, 0);
}

absl::Status PgStore::PutSubjectBatch(int64_t dataset_id, const std::string& batch_id,
                                      const std::string& digest, int64_t expected_subject_count,
                                      int64_t rows, const std::string& payload) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  return c->InTransaction([&]() -> absl::Status {
    // The count first: its row lock orders concurrent imports into one dataset.
    ASSIGN_OR_RETURN(Result u,
                     c->Exec("UPDATE datasets SET subject_count = subject_count + $1 "
                             "WHERE id=$2 AND subject_count=$3",
                             Params().Int(rows).Int(dataset_id).Int(expected_subject_count)));
    if (u.changed() == 0) return DatasetChangedConcurrently(dataset_id);
    absl::Status st = c->Run(
        "INSERT INTO subject_batches(dataset_id, batch_id, digest, rows, payload) "
        "VALUES($1,$2,$3,$4,$5)",
        Params().Int(dataset_id).Text(batch_id).Text(digest).Int(rows).Bytes(payload));
    if (absl::IsAlreadyExists(st)) return BatchImportedConcurrently(batch_id);
    return st;
  });
}

absl::Status PgStore::ForEachSubjectBatch(
    int64_t dataset_id, const std::function<absl::Status(const std::string&)>& fn) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  // One batch per query: each payload can be hundreds of megabytes.
  ASSIGN_OR_RETURN(Result ids,
                   c->Exec("SELECT seq FROM subject_batches WHERE dataset_id=$1 ORDER BY seq",
                           Params().Int(dataset_id)));
  for (int i = 0; i < ids.rows(); ++i) {
    ASSIGN_OR_RETURN(Result r,
                     c->Exec("SELECT payload FROM subject_batches WHERE dataset_id=$1 AND seq=$2",
                             Params().Int(dataset_id).Int(ids.Int(i, 0))));
    if (r.rows() == 0) continue;  // its dataset was deleted meanwhile
    RETURN_IF_ERROR(fn(r.Text(0, 0)));
  }
  return absl::OkStatus();
}

}  // namespace fairvault::server::storage
