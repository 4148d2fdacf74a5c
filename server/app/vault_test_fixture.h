// The vault test fixture: a SQLite-backed Vault with a fake clock and a seeded generator,
// a regulator, two companies (acme with a large pure grant, globex with a delta grant), a
// "census" dataset with sex{F,M} x race{A,B,C} over 30 subjects, and acme's table
// (pred, label, tier). Shared by the vault's use-case tests.
#ifndef FAIRVAULT_SERVER_APP_VAULT_TEST_FIXTURE_H_
#define FAIRVAULT_SERVER_APP_VAULT_TEST_FIXTURE_H_

#include <sqlite3.h>
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/util/clock.h"
#include "server/app/vault.h"
#include "server/storage/sqlite/sqlite_store.h"

namespace fairvault::server::testing {

using ::fairvault::testing::IsOk;
using ::fairvault::testing::StatusIs;
using storage::Role;

constexpr int64_t kStartMicros = 1'700'000'000'000'000;
// Discrete Laplace scale 2/1e5 = 2e-5: a non-zero draw has probability about 2e^{-50000}.
constexpr double kHugeEpsilon = 1e5;

// A stream that hands out `chunks`, then fails with `error` instead of ending.
template <typename Chunk>
ChunkSource<Chunk> BreakAfter(std::vector<Chunk> chunks, absl::Status error) {
  ChunkSource<Chunk> source = Feed(std::move(chunks));
  auto inner = source.next;
  source.next = [inner, error](Chunk* out) -> absl::StatusOr<bool> {
    absl::StatusOr<bool> more = inner(out);
    if (!more.ok() || *more) return more;
    return error;
  };
  return source;
}

inline v1::SubjectRows Rows(const std::vector<std::vector<std::string>>& rows) {
  v1::SubjectRows out;
  for (const auto& r : rows) {
    out.add_subject_keys(r[0]);
    for (size_t i = 1; i < r.size(); ++i) out.add_categories(r[i]);
  }
  return out;
}

struct Subject {
  std::string key, sex, race;
};
struct Row {
  std::string key;
  double pred, label;
  std::string tier;
};

// 30 subjects, uneven over the six (sex, race) groups.
inline std::vector<Subject> MakeSubjects() {
  const char* races[] = {"A", "B", "C"};
  std::vector<Subject> out;
  for (int i = 0; i < 30; ++i) {
    out.push_back({absl::StrCat("s", i), (i * 7) % 5 < 2 ? "F" : "M", races[(i * i + i / 4) % 3]});
  }
  return out;
}

// The company's rows: one per subject, predictions and labels depending on the index.
inline std::vector<Row> MakeRows(const std::vector<Subject>& subjects) {
  std::vector<Row> out;
  for (size_t i = 0; i < subjects.size(); ++i) {
    out.push_back({subjects[i].key, static_cast<double>((i * 5) % 3 == 0),
                   static_cast<double>((i % 4) < 2), i % 3 == 1 ? "y" : "x"});
  }
  return out;
}

inline v1::TableChunk Chunk(const std::vector<Row>& rows) {
  v1::TableChunk c;
  v1::ColumnValues* pred = c.add_columns();
  v1::ColumnValues* label = c.add_columns();
  v1::ColumnValues* tier = c.add_columns();
  for (const Row& r : rows) {
    c.add_subject_keys(r.key);
    pred->add_numeric(r.pred);
    label->add_numeric(r.label);
    tier->add_categorical(r.tier);
  }
  return c;
}

inline v1::TableHeader TableHeaderFor(const std::string& dataset, int64_t ttl_seconds = 0) {
  v1::TableHeader h;
  h.set_dataset(dataset);
  h.set_ttl_seconds(ttl_seconds);
  auto add = [&h](const char* name, v1::ColumnType type) {
    v1::ColumnSpec* s = h.add_columns();
    s->set_name(name);
    s->set_type(type);
  };
  add("pred", v1::COLUMN_TYPE_NUMERIC);
  add("label", v1::COLUMN_TYPE_NUMERIC);
  add("tier", v1::COLUMN_TYPE_CATEGORICAL);
  return h;
}

class VaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = absl::StrCat(::testing::TempDir(), "fairvault_vault_test_", info->name(), "_", getpid(),
                         ".db");
    RemoveFiles();
    auto store = storage::SqliteStore::Open(path_);
    ASSERT_OK(store);
    store_ = *std::move(store);
    vault_ = std::make_unique<Vault>(store_.get(), VaultClock(), absl::BitGenRef(gen_));

    auto reg = vault_->CreateAccountUnchecked("regulator", Role::kRegulator);
    ASSERT_OK(reg);
    auto reg_caller = vault_->Authenticate(reg->api_key());
    ASSERT_OK(reg_caller);
    regulator_ = *reg_caller;
    ASSERT_NO_FATAL_FAILURE(MakeCompany("acme", &acme_key_, &acme_));
    ASSERT_NO_FATAL_FAILURE(MakeCompany("globex", nullptr, &globex_));

    v1::CreateDatasetRequest ds;
    ds.set_name("census");
    v1::Attribute* sex = ds.add_attributes();
    sex->set_name("sex");
    sex->add_categories("F");
    sex->add_categories("M");
    v1::Attribute* race = ds.add_attributes();
    race->set_name("race");
    race->add_categories("A");
    race->add_categories("B");
    race->add_categories("C");
    ASSERT_OK(vault_->CreateDataset(regulator_, ds));

    // Two batches; the second lists the attributes in the other order.
    subjects_ = MakeSubjects();
    std::vector<std::vector<std::string>> first, second;
    for (size_t i = 0; i < subjects_.size(); ++i) {
      const Subject& s = subjects_[i];
      if (i < 18) {
        first.push_back({s.key, s.sex, s.race});
      } else {
        second.push_back({s.key, s.race, s.sex});
      }
    }
    auto imported = Import(
        "b1", {"sex", "race"},
        {Rows({first.begin(), first.begin() + 10}), Rows({first.begin() + 10, first.end()})});
    ASSERT_OK(imported);
    EXPECT_EQ(imported->rows_imported(), 18);
    imported = Import("b2", {"race", "sex"}, {Rows(second)});
    ASSERT_OK(imported);
    EXPECT_EQ(imported->subject_count(), 30);

    ASSERT_OK(Grant("acme", 1e6, 0));
    ASSERT_OK(Grant("globex", 100, 1e-6));

    rows_ = MakeRows(subjects_);
    auto table = Upload(
        acme_, TableHeaderFor("census"),
        {Chunk({rows_.begin(), rows_.begin() + 13}), Chunk({rows_.begin() + 13, rows_.end()})});
    ASSERT_OK(table);
    EXPECT_EQ(table->row_count(), 30);
    EXPECT_EQ(table->rows_in_vault(), 30);
    handle_ = table->table_handle();
  }

  // The vault's time source: the fake clock (time moves only when a test says so); a test that
  // measures durations overrides it with a real one.
  virtual const Clock* VaultClock() { return &clock_; }

  void TearDown() override {
    vault_.reset();
    store_.reset();
    RemoveFiles();
  }

  // Runs SQL on the vault's database through a connection of its own: what an operator or
  // a failing disk could do beside the server. Returns SQLite's error message, empty if none.
  std::string RawSql(const std::string& sql) {
    sqlite3* db = nullptr;
    if (sqlite3_open(path_.c_str(), &db) != SQLITE_OK) {
      sqlite3_close(db);
      return "cannot open the database";
    }
    sqlite3_busy_timeout(db, 10'000);
    char* error = nullptr;
    std::string message;
    if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error) != SQLITE_OK) {
      message = error != nullptr ? error : "error";
    }
    sqlite3_free(error);
    sqlite3_close(db);
    return message;
  }

  // Makes storing a finished release (Store::FinishRelease) fail, as a failing disk would,
  // until AllowFinishes: the call that charged it returns the store's error.
  void FailFinishes() {
    ASSERT_EQ(RawSql("CREATE TRIGGER finish_fails BEFORE UPDATE ON responses "
                     "BEGIN SELECT RAISE(ABORT, 'the disk is gone'); END"),
              "");
  }
  void AllowFinishes() { ASSERT_EQ(RawSql("DROP TRIGGER finish_fails"), ""); }

  // The release `caller` charged under `key` and whose finish was not stored (pending).
  template <typename Response>
  Response PendingRelease(const Caller& caller, const std::string& key) {
    Response release;
    auto stored = store_->GetStoredResponse(caller.account_id, key);
    EXPECT_TRUE(stored.ok()) << stored.status();
    if (!stored.ok()) return release;
    EXPECT_TRUE(stored->pending);
    EXPECT_TRUE(release.ParseFromString(stored->payload));
    return release;
  }

  void RemoveFiles() {
    for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
      std::remove(absl::StrCat(path_, suffix).c_str());
    }
  }

  void MakeCompany(const std::string& name, std::string* key, Caller* caller) {
    v1::CreateAccountRequest req;
    req.set_name(name);
    req.set_role(v1::ROLE_COMPANY);
    auto created = vault_->CreateAccount(regulator_, req);
    ASSERT_OK(created);
    EXPECT_EQ(created->account().role(), v1::ROLE_COMPANY);
    if (key != nullptr) *key = created->api_key();
    auto authed = vault_->Authenticate(created->api_key());
    ASSERT_OK(authed);
    *caller = *authed;
  }

  absl::StatusOr<v1::ImportAttributesResponse> Import(const std::string& batch_id,
                                                      const std::vector<std::string>& attributes,
                                                      std::vector<v1::SubjectRows> chunks,
                                                      const Caller* as = nullptr) {
    v1::ImportHeader header;
    header.set_dataset("census");
    header.set_batch_id(batch_id);
    for (const auto& a : attributes) header.add_attributes(a);
    return vault_->ImportAttributes(as ? *as : regulator_, header, Feed(std::move(chunks)));
  }

  // A dataset for privacy audits on neighbouring vaults: attribute sex{F, M}, subjects
  // p0..p<subjects-1> with sex F for even i and M for odd i except subject 0, who is
  // `first_sex`; acme gets a large grant on it (pure, or with `delta`). Two calls differing only
  // in `first_sex` give neighbouring datasets (replace-one on a).
  void MakeNeighbourDataset(const std::string& name, const std::string& first_sex, int subjects,
                            double delta = 0) {
    v1::CreateDatasetRequest ds;
    ds.set_name(name);
    v1::Attribute* sex = ds.add_attributes();
    sex->set_name("sex");
    sex->add_categories("F");
    sex->add_categories("M");
    EXPECT_OK(vault_->CreateDataset(regulator_, ds));
    v1::ImportHeader header;
    header.set_dataset(name);
    header.set_batch_id("all");
    header.add_attributes("sex");
    v1::SubjectRows rows;
    for (int i = 0; i < subjects; ++i) {
      rows.add_subject_keys(absl::StrCat("p", i));
      rows.add_categories(i == 0 ? first_sex : (i % 2 == 0 ? "F" : "M"));
    }
    EXPECT_OK(vault_->ImportAttributes(regulator_, header, Feed(std::vector{rows})));
    v1::GrantBudgetRequest grant;
    grant.set_company("acme");
    grant.set_dataset(name);
    grant.set_epsilon(1e6);
    grant.set_delta(delta);
    EXPECT_OK(vault_->GrantBudget(regulator_, grant));
  }

  // An exponential-mechanism job that public sizes admit but the data makes fail after its
  // charge: dataset "skewed" (MakeNeighbourDataset, 40 subjects) whose label-1 rows are 2 in F
  // and 14 in M (the public check sees 16 over two groups: at most 8 in the smallest), and acme's
  // table on it (label, h0 = label, h1 = 1). At ε = 6 and em_delta 1e-9 the shift is 6.91:
  // admitted (8 − 6.91 > 1), and M ≈ 2 − 6.91 + noise of scale 1/3, above 1 with probability
  // about e^-15.
  v1::FitFairModelRequest SkewedEmRequest(const std::string& key) {
    if (skewed_handle_.empty()) {
      MakeNeighbourDataset("skewed", "F", 40);
      v1::TableHeader header;
      header.set_dataset("skewed");
      for (const char* name : {"label", "h0", "h1"}) {
        v1::ColumnSpec* c = header.add_columns();
        c->set_name(name);
        c->set_type(v1::COLUMN_TYPE_NUMERIC);
      }
      v1::TableChunk chunk;
      v1::ColumnValues* label = chunk.add_columns();
      v1::ColumnValues* h0 = chunk.add_columns();
      v1::ColumnValues* h1 = chunk.add_columns();
      for (int i = 0; i < 40; ++i) {
        chunk.add_subject_keys(absl::StrCat("p", i));
        const bool one = i % 2 == 1 ? i < 29 : i < 4;  // M: 1..27 odd (14); F: 0, 2 (2)
        label->add_numeric(one ? 1 : 0);
        h0->add_numeric(one ? 1 : 0);
        h1->add_numeric(1);
      }
      auto table = Upload(acme_, header, {chunk});
      EXPECT_OK(table);
      if (table.ok()) skewed_handle_ = table->table_handle();
    }
    v1::FitFairModelRequest req;
    req.set_idempotency_key(key);
    req.set_table_handle(skewed_handle_);
    req.set_algorithm(v1::FAIR_MODEL_ALGORITHM_EXPONENTIAL_MECHANISM);
    req.set_label_column("label");
    req.add_attributes("sex");
    req.add_hypothesis_columns("h0");
    req.add_hypothesis_columns("h1");
    req.set_em_delta(1e-9);
    req.set_epsilon(6);
    return req;
  }

  // Polls a job of `caller` until it is no longer queued or running (at most `timeout`).
  v1::Job WaitForJob(const Caller& caller, const std::string& job_id,
                     absl::Duration timeout = absl::Seconds(60)) {
    v1::GetJobRequest get;
    get.set_job_id(job_id);
    const absl::Time deadline = absl::Now() + timeout;
    while (absl::Now() < deadline) {
      auto job = vault_->GetJob(caller, get);
      EXPECT_OK(job);
      if (!job.ok()) return {};
      if (job->job().state() != v1::JOB_STATE_QUEUED &&
          job->job().state() != v1::JOB_STATE_RUNNING) {
        return job->job();
      }
      absl::SleepFor(absl::Microseconds(100));
    }
    ADD_FAILURE() << "job " << job_id << " did not finish";
    return {};
  }

  // Submits a fit, waits for its job and returns the model; a job that did not succeed is
  // FailedPrecondition with the job's error. `submission` gets the FitFairModel response.
  absl::StatusOr<v1::FairModel> FitAndWait(const Caller& caller, const v1::FitFairModelRequest& req,
                                           v1::FitFairModelResponse* submission = nullptr) {
    auto submitted = vault_->FitFairModel(caller, req);
    if (!submitted.ok()) return submitted.status();
    if (submission != nullptr) *submission = *submitted;
    const v1::Job job = WaitForJob(caller, submitted->job().id());
    if (job.state() != v1::JOB_STATE_SUCCEEDED) {
      return absl::FailedPreconditionError(absl::StrCat(
          "job ", job.id(), " ended ", v1::JobState_Name(job.state()), ": ", job.error()));
    }
    v1::GetArtifactRequest art;
    art.set_artifact_id(job.artifact_id());
    auto artifact = vault_->GetArtifact(caller, art);
    if (!artifact.ok()) return artifact.status();
    return artifact->artifact().fair_model();
  }

  absl::StatusOr<v1::GrantBudgetResponse> Grant(const std::string& company, double epsilon,
                                                double delta) {
    v1::GrantBudgetRequest req;
    req.set_company(company);
    req.set_dataset("census");
    req.set_epsilon(epsilon);
    req.set_delta(delta);
    return vault_->GrantBudget(regulator_, req);
  }

  absl::StatusOr<v1::UploadTableResponse> Upload(const Caller& caller,
                                                 const v1::TableHeader& header,
                                                 std::vector<v1::TableChunk> chunks) {
    return vault_->UploadTable(caller, header, Feed(std::move(chunks)));
  }

  v1::NoisyCountsRequest CountsRequest(const std::string& key) {
    v1::NoisyCountsRequest req;
    req.set_idempotency_key(key);
    req.set_table_handle(handle_);
    req.add_columns("tier");
    req.set_noise(v1::NOISE_KIND_DISCRETE_LAPLACE);
    req.set_epsilon(kHugeEpsilon);
    return req;
  }

  v1::FitEqualizedOddsRequest FitRequest(const std::string& key) {
    v1::FitEqualizedOddsRequest req;
    req.set_idempotency_key(key);
    req.set_table_handle(handle_);
    req.set_prediction_column("pred");
    req.set_label_column("label");
    req.set_epsilon(kHugeEpsilon);
    req.set_gamma(0.05);
    return req;
  }

  v1::Budget BudgetOf(const Caller& company) {
    v1::GetBudgetRequest req;
    req.set_dataset("census");
    auto resp = vault_->GetBudget(company, req);
    EXPECT_OK(resp);
    if (!resp.ok() || resp->budgets_size() != 1) return v1::Budget();
    return resp->budgets(0);
  }

  // All ledger rows, as the regulator sees them.
  std::vector<v1::LedgerEntry> Ledger() {
    auto resp = vault_->ListLedger(regulator_, v1::ListLedgerRequest());
    EXPECT_OK(resp);
    if (!resp.ok()) return {};
    return {resp->entries().begin(), resp->entries().end()};
  }

  int ChargeRows() {
    int n = 0;
    for (const auto& e : Ledger()) n += e.kind() == "charge";
    return n;
  }

  // Asserts that `call` fails with `code` (and `substring`) and that neither the company's
  // budget nor the ledger moved.
  template <typename Call>
  void ExpectRefusedWithoutCharge(const Caller& company, Call call, absl::StatusCode code,
                                  const std::string& substring = "") {
    const v1::Budget before = BudgetOf(company);
    const std::vector<v1::LedgerEntry> ledger_before = Ledger();
    auto result = call();
    EXPECT_THAT(result, StatusIs(code, substring));
    const v1::Budget after = BudgetOf(company);
    EXPECT_EQ(after.epsilon_spent(), before.epsilon_spent());
    EXPECT_EQ(after.releases(), before.releases());
    EXPECT_EQ(Ledger().size(), ledger_before.size());
  }

  // The exact count per (tier, "sex|race") over rows whose key is a subject.
  std::map<std::pair<std::string, std::string>, int64_t> ExactCounts(
      const std::vector<Row>& rows) const {
    std::map<std::string, std::string> group_of;
    for (const Subject& s : subjects_) group_of[s.key] = s.sex + "|" + s.race;
    std::map<std::pair<std::string, std::string>, int64_t> out;
    for (const char* tier : {"x", "y"}) {
      for (const char* g : {"F|A", "F|B", "F|C", "M|A", "M|B", "M|C"}) out[{tier, g}] = 0;
    }
    for (const Row& r : rows) {
      auto it = group_of.find(r.key);
      if (it != group_of.end()) ++out[{r.tier, it->second}];
    }
    return out;
  }

  std::string path_;
  FakeClock clock_{kStartMicros};
  std::mt19937_64 gen_{20240611};
  std::unique_ptr<storage::SqliteStore> store_;
  std::unique_ptr<Vault> vault_;
  Caller regulator_, acme_, globex_;
  std::string acme_key_;
  std::vector<Subject> subjects_;
  std::vector<Row> rows_;
  std::string handle_;
  std::string skewed_handle_;  // SkewedEmRequest's table
};

}  // namespace fairvault::server::testing

#endif  // FAIRVAULT_SERVER_APP_VAULT_TEST_FIXTURE_H_
