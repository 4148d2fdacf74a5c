// The vault the stream and spending fuzzers run against, made once per process: a real SQLite
// store in /tmp, a fake clock, a regulator, company "acme" with the largest grant (epsilon 1e6)
// on dataset "d" (attribute sex F/M) holding subjects s0..s15, acme's table of those 16 rows
// (pred, label, score numeric; tier categorical) and an equalized-odds artifact fitted on it. Inputs name the
// table as "T" and the artifact as "A" (Substitute puts the real ones in).
#ifndef FAIRVAULT_TESTS_FUZZ_FUZZ_VAULT_H_
#define FAIRVAULT_TESTS_FUZZ_FUZZ_VAULT_H_

#include <sqlite3.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/random/bit_gen_ref.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "server/app/vault.h"
#include "server/storage/sqlite/sqlite_store.h"
#include "server/util/clock.h"
#include "tests/fuzz/fuzz_contract.h"

namespace fairvault::fuzz {

namespace v1 = ::fairvault::v1;

template <typename T>
T Must(absl::StatusOr<T> v, const char* what) {
  if (!v.ok()) Fail(what, v.status().ToString());
  return *std::move(v);
}

class FuzzVault {
 public:
  static constexpr int kSubjects = 16;

  static FuzzVault& Get() {
    static FuzzVault* world = new FuzzVault;  // never destroyed: libFuzzer exits without teardown
    return *world;
  }

  server::Vault& vault() { return *vault_; }
  server::storage::SqliteStore& store() { return *store_; }
  const server::Caller& regulator() const { return regulator_; }
  const server::Caller& company() const { return company_; }
  const std::string& table_handle() const { return table_handle_; }

  // One number from the database (the first column of the first row of `sql`).
  int64_t Count(const char* sql) {
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db_, sql, -1, &stmt, nullptr) != SQLITE_OK ||
        sqlite3_step(stmt) != SQLITE_ROW) {
      Fail("count", sqlite3_errmsg(db_));
    }
    const int64_t n = sqlite3_column_int64(stmt, 0);
    sqlite3_finalize(stmt);
    return n;
  }
  void Exec(const char* sql) { sqlite3_exec(db_, sql, nullptr, nullptr, nullptr); }

  // Every string field of `message` (and of the messages it holds, as PreviewRelease holds its
  // request) with "T" gets the table's handle, "A" the artifact's id: what a caller would have
  // from its own upload and fit.
  void Substitute(google::protobuf::Message& message) const {
    const auto* descriptor = message.GetDescriptor();
    const auto* reflection = message.GetReflection();
    for (int i = 0; i < descriptor->field_count(); ++i) {
      const auto* f = descriptor->field(i);
      if (f->is_repeated()) continue;
      if (f->type() == google::protobuf::FieldDescriptor::TYPE_MESSAGE) {
        if (reflection->HasField(message, f)) Substitute(*reflection->MutableMessage(&message, f));
        continue;
      }
      if (f->type() != google::protobuf::FieldDescriptor::TYPE_STRING) continue;
      const std::string value = reflection->GetString(message, f);
      if (value == "T") reflection->SetString(&message, f, table_handle_);
      if (value == "A") reflection->SetString(&message, f, artifact_id_);
    }
  }

 private:
  FuzzVault() : clock_(1'800'000'000'000'000), gen_(1) {
    path_ = absl::StrCat("/tmp/fairvault_fuzz_vault_", getpid(), ".db");
    RemoveFiles(path_);
    static const std::string* const at_exit = &path_;  // the one vault of the process
    std::atexit([] { RemoveFiles(*at_exit); });  // libFuzzer ends a timed run with exit()
    store_ = Must(server::storage::SqliteStore::Open(path_), "open the store");
    vault_ = std::make_unique<server::Vault>(store_.get(), &clock_, absl::BitGenRef(gen_));
    auto reg = Must(vault_->CreateAccountUnchecked("regulator", server::storage::Role::kRegulator),
                    "bootstrap");
    regulator_ = Must(vault_->Authenticate(reg.api_key()), "authenticate");
    v1::CreateAccountRequest account;
    account.set_name("acme");
    account.set_role(v1::ROLE_COMPANY);
    auto made = Must(vault_->CreateAccount(regulator_, account), "create the company");
    company_ = Must(vault_->Authenticate(made.api_key()), "authenticate the company");
    v1::CreateDatasetRequest dataset;
    dataset.set_name("d");
    v1::Attribute* sex = dataset.add_attributes();
    sex->set_name("sex");
    sex->add_categories("F");
    sex->add_categories("M");
    Must(vault_->CreateDataset(regulator_, dataset), "create the dataset");
    v1::ImportHeader header;
    header.set_dataset("d");
    header.set_batch_id("seed");
    header.add_attributes("sex");
    v1::SubjectRows rows;
    for (int i = 0; i < kSubjects; ++i) {
      rows.add_subject_keys(absl::StrCat("s", i));
      rows.add_categories(i % 3 == 0 ? "M" : "F");
    }
    Must(vault_->ImportAttributes(regulator_, header, server::Feed<v1::SubjectRows>({rows})),
         "import the subjects");
    v1::GrantBudgetRequest grant;
    grant.set_company("acme");
    grant.set_dataset("d");
    grant.set_epsilon(1e6);
    grant.set_delta(0.5);
    Must(vault_->GrantBudget(regulator_, grant), "grant");

    v1::TableHeader table;
    table.set_dataset("d");
    for (const char* name : {"pred", "label", "score"}) {
      v1::ColumnSpec* spec = table.add_columns();
      spec->set_name(name);
      spec->set_type(v1::COLUMN_TYPE_NUMERIC);
    }
    v1::ColumnSpec* tier = table.add_columns();
    tier->set_name("tier");
    tier->set_type(v1::COLUMN_TYPE_CATEGORICAL);
    v1::TableChunk chunk;
    for (int c = 0; c < 4; ++c) chunk.add_columns();
    for (int i = 0; i < kSubjects; ++i) {
      chunk.add_subject_keys(absl::StrCat("s", i));
      chunk.mutable_columns(0)->add_numeric(i % 2);
      chunk.mutable_columns(1)->add_numeric(i % 4 < 2 ? 1 : 0);
      chunk.mutable_columns(2)->add_numeric(i / 16.0);
      chunk.mutable_columns(3)->add_categorical(i % 5 == 0 ? "gold" : "basic");
    }
    table_handle_ =
        Must(vault_->UploadTable(company_, table, server::Feed<v1::TableChunk>({chunk})),
             "upload the table")
            .table_handle();
    v1::FitEqualizedOddsRequest eo;
    eo.set_idempotency_key("setup-eo");
    eo.set_table_handle(table_handle_);
    eo.set_prediction_column("pred");
    eo.set_label_column("label");
    eo.add_attributes("sex");
    eo.set_epsilon(1);
    eo.set_decision_floor(0.1);
    artifact_id_ = Must(vault_->FitEqualizedOdds(company_, eo), "fit the EO artifact")
                       .artifact()
                       .id();
    if (sqlite3_open_v2(path_.c_str(), &db_, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
      Fail("setup", "open a second connection");
    }
    sqlite3_busy_timeout(db_, 10'000);
  }

  static void RemoveFiles(const std::string& path) {
    for (const char* suffix : {"", "-wal", "-shm"}) std::remove((path + suffix).c_str());
  }

  std::string path_;
  server::FakeClock clock_;
  std::mt19937_64 gen_;  // handles and keys come from the OS CSPRNG, not from this
  std::unique_ptr<server::storage::SqliteStore> store_;
  std::unique_ptr<server::Vault> vault_;
  server::Caller regulator_, company_;
  std::string table_handle_, artifact_id_;
  sqlite3* db_ = nullptr;
};

// A status a caller can act on: not OK, with a message, and not a server fault.
inline void ExpectActionable(const absl::Status& status, const char* what) {
  switch (status.code()) {
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kDataLoss:
    case absl::StatusCode::kUnknown:
    case absl::StatusCode::kOk:
      Fail(what, status.ToString());
    default:
      if (status.message().empty()) Fail(what, "a status without a message");
  }
}

}  // namespace fairvault::fuzz

#endif  // FAIRVAULT_TESTS_FUZZ_FUZZ_VAULT_H_
