// The vault over loopback with the ledger on disk: importing 1M subjects, uploading and
// joining a 1M-row table, NoisyCounts over it, and charged requests per second. One real
// server process serves every benchmark; the database lives in $TMPDIR.
#include <atomic>
#include <map>
#include <memory>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "benchmark/benchmark.h"
#include "tests/server_process.h"

namespace fairvault::bench {
namespace {

namespace v1 = ::fairvault::v1;
using testing::ServerProcess;

constexpr int kRows = 1'000'000;

struct World {
  std::unique_ptr<ServerProcess> server;
  std::unique_ptr<client::Client> regulator, company;
  std::vector<std::string> keys;
  std::vector<std::string> categories;
  std::string big_table, small_table;
  int datasets = 0;
};

World* world_instance = nullptr;

World& GetWorld() {
  static World* world = [] {
    auto* w = new World;
    w->server = std::make_unique<ServerProcess>(testing::TempDatabasePath("bench"));
    auto key = w->server->Bootstrap("regulator");
    if (!key.ok() || !w->server->Start().ok()) std::abort();
    w->regulator = w->server->Connect(*key);
    std::mt19937_64 gen(1);
    for (int i = 0; i < kRows; ++i) {
      // Keys as the CLI sends them: 64-hex-character HMAC pseudonyms.
      w->keys.push_back(absl::StrFormat("%016x%016x%016x%016x", gen(), gen(), gen(), i));
      w->categories.push_back(gen() % 2 ? "F" : "M");
      w->categories.push_back(gen() % 3 ? "u" : "v");
    }
    v1::CreateAccountRequest acct;
    acct.set_name("acme");
    acct.set_role(v1::ROLE_COMPANY);
    w->company = w->server->Connect(w->regulator->CreateAccount(acct)->api_key());
    world_instance = w;
    return w;
  }();
  return *world;
}

// Creates a dataset with attributes sex{F,M} and band{u,v} (4 joint groups), imports every
// key, grants acme.
std::string NewPopulatedDataset(World& w) {
  const std::string name = absl::StrCat("pop", w.datasets++);
  v1::CreateDatasetRequest ds;
  ds.set_name(name);
  auto* a = ds.add_attributes();
  a->set_name("sex");
  a->add_categories("F");
  a->add_categories("M");
  a = ds.add_attributes();
  a->set_name("band");
  a->add_categories("u");
  a->add_categories("v");
  if (!w.regulator->CreateDataset(ds).ok()) std::abort();
  v1::ImportHeader header;
  header.set_dataset(name);
  header.set_batch_id("all");
  header.add_attributes("sex");
  header.add_attributes("band");
  if (!w.regulator->ImportAttributes(header, w.keys, w.categories).ok()) std::abort();
  v1::GrantBudgetRequest grant;
  grant.set_company("acme");
  grant.set_dataset(name);
  grant.set_epsilon(100000);
  grant.set_delta(1e-6);
  if (!w.regulator->GrantBudget(grant).ok()) std::abort();
  return name;
}

// One populated dataset shared by the benchmarks that only need one (created on first use, so
// that each of them also runs alone under --benchmark_filter).
const std::string& SharedDataset(World& w) {
  static const std::string name = NewPopulatedDataset(w);
  return name;
}

struct PreparedTable {
  v1::TableHeader header;
  std::vector<std::string> keys;
  std::vector<v1::ColumnValues> columns;
};

// The company's table in memory (its own work, outside the timed upload).
PreparedTable Prepare(World& w, const std::string& dataset, int rows) {
  PreparedTable t;
  v1::TableHeader& header = t.header;
  header.set_dataset(dataset);
  auto* c = header.add_columns();
  c->set_name("region");
  c->set_type(v1::COLUMN_TYPE_CATEGORICAL);
  c = header.add_columns();
  c->set_name("prediction");
  c->set_type(v1::COLUMN_TYPE_NUMERIC);
  c = header.add_columns();
  c->set_name("label");
  c->set_type(v1::COLUMN_TYPE_NUMERIC);
  c = header.add_columns();
  c->set_name("score");
  c->set_type(v1::COLUMN_TYPE_NUMERIC);
  t.columns.resize(4);
  std::mt19937_64 gen(7);
  std::normal_distribution<double> normal(0.5, 0.2);
  t.keys.assign(w.keys.begin(), w.keys.begin() + rows);
  for (int i = 0; i < rows; ++i) {
    t.columns[0].add_categorical(i % 3 == 0 ? "north" : (i % 3 == 1 ? "south" : "east"));
    t.columns[1].add_numeric(i % 2);
    t.columns[2].add_numeric((i / 2) % 2);
    t.columns[3].add_numeric(normal(gen));
  }
  return t;
}

absl::StatusOr<v1::UploadTableResponse> Upload(World& w, const PreparedTable& t) {
  return w.company->UploadTable(t.header, t.keys, t.columns);
}

// The 1M-row table of BM_UploadAndJoin1MRows, uploaded here if that benchmark did not run
// (e.g. under --benchmark_filter).
const std::string& BigTable(World& w) {
  if (w.big_table.empty()) {
    auto resp = Upload(w, Prepare(w, NewPopulatedDataset(w), kRows));
    if (!resp.ok()) std::abort();
    w.big_table = resp->table_handle();
  }
  return w.big_table;
}

void BM_Import1MSubjects(benchmark::State& state) {
  World& w = GetWorld();
  for (auto _ : state) NewPopulatedDataset(w);
  state.SetItemsProcessed(state.iterations() * kRows);
}
BENCHMARK(BM_Import1MSubjects)->Unit(benchmark::kMillisecond)->Iterations(2)->UseRealTime();

void BM_UploadAndJoin1MRows(benchmark::State& state) {
  World& w = GetWorld();
  const PreparedTable table = Prepare(w, NewPopulatedDataset(w), kRows);
  for (auto _ : state) {
    auto resp = Upload(w, table);
    if (!resp.ok() || resp->rows_in_vault() != kRows) state.SkipWithError("upload failed");
    w.big_table = resp->table_handle();
  }
  state.SetItemsProcessed(state.iterations() * kRows);
}
BENCHMARK(BM_UploadAndJoin1MRows)->Unit(benchmark::kMillisecond)->Iterations(2)->UseRealTime();

void BM_NoisyCounts1MRows(benchmark::State& state) {
  World& w = GetWorld();
  const std::string table = BigTable(w);  // uploaded outside the timed loop
  int i = 0;
  for (auto _ : state) {
    v1::NoisyCountsRequest req;
    req.set_idempotency_key(absl::StrCat("big-", i++));
    req.set_table_handle(table);
    req.add_columns("region");
    req.set_epsilon(0.01);
    if (!w.company->NoisyCounts(req).ok()) state.SkipWithError("NoisyCounts failed");
  }
  state.SetItemsProcessed(state.iterations() * kRows);
}
BENCHMARK(BM_NoisyCounts1MRows)->Unit(benchmark::kMillisecond)->Iterations(5)->UseRealTime();

// Xian et al. post-processor on 1M scores, k = 100, K = 4, through the vault: histogram,
// noise and the solver (state.range(0): 1 = GLPK LP, 2 = quantile solver).
void BM_FitStatisticalParity1MRows(benchmark::State& state) {
  World& w = GetWorld();
  const std::string table = BigTable(w);  // uploaded outside the timed loop
  static int i = 0;
  for (auto _ : state) {
    v1::FitStatisticalParityRequest req;
    req.set_idempotency_key(absl::StrCat("sp-", i++));
    req.set_table_handle(table);
    req.set_score_column("score");
    req.set_lo(0);
    req.set_hi(1);
    req.set_bins(100);
    req.set_epsilon(1);
    req.set_solver(static_cast<v1::SpSolverKind>(state.range(0)));
    auto resp = w.company->FitStatisticalParityPostProcessor(req);
    if (!resp.ok() || resp->artifact().statistical_parity().groups_size() != 4) {
      state.SkipWithError("fit failed");
    }
  }
  state.SetItemsProcessed(state.iterations() * kRows);
}
BENCHMARK(BM_FitStatisticalParity1MRows)
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3)
    ->UseRealTime();

// Decide on 1M rows (5 calls of 200,000) with a fresh equalized-odds artifact per iteration:
// the licence charge, 1M draws from the secure generator and 1M stored decisions. Then the
// same rows again: the stored decisions are returned.
void BM_Decide1MRows(benchmark::State& state) {
  World& w = GetWorld();
  std::vector<std::string> keys(w.keys.begin(), w.keys.begin() + kRows);
  std::vector<double> values(kRows);
  for (int r = 0; r < kRows; ++r) values[r] = r % 2;
  static int fits = 0;
  const bool again = state.range(0) == 1;
  std::string artifact_id;
  for (auto _ : state) {
    if (!again || artifact_id.empty()) {
      state.PauseTiming();
      v1::FitEqualizedOddsRequest fit;
      fit.set_idempotency_key(absl::StrCat("eo-for-decide-", fits++));
      fit.set_table_handle(BigTable(w));
      fit.set_prediction_column("prediction");
      fit.set_label_column("label");
      fit.set_epsilon(1);
      fit.set_gamma(0.01);
      fit.set_decision_floor(0.1);
      auto artifact = w.company->FitEqualizedOddsPostProcessor(fit);
      if (!artifact.ok()) {
        state.SkipWithError("fit failed");
        return;
      }
      artifact_id = artifact->artifact().id();
      if (again && !w.company->DecideInChunks(artifact_id, keys, values).ok()) {
        state.SkipWithError("first decide failed");
        return;
      }
      state.ResumeTiming();
    }
    auto result = w.company->DecideInChunks(artifact_id, keys, values);
    if (!result.ok() || result->outputs.size() != static_cast<size_t>(kRows)) {
      state.SkipWithError("decide failed");
    }
  }
  state.SetItemsProcessed(state.iterations() * kRows);
}
// Arg 0: first decisions; arg 1: the same rows asked again.
BENCHMARK(BM_Decide1MRows)
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3)
    ->UseRealTime();

// One release on an uploaded table of state.range(1) rows (its join with the vault is kept with
// the table, so a release reads no key again): state.range(0) = 0 NoisyCounts over one column,
// 1 equalized-odds fit, 2 statistical-parity fit (quantile solver). Growth from 10K to 1M rows
// shows whether a release is linear in the rows.
void BM_ReleaseByRows(benchmark::State& state) {
  World& w = GetWorld();
  const int kind = static_cast<int>(state.range(0));
  const int rows = static_cast<int>(state.range(1));
  static std::map<int, std::string> tables;  // rows -> handle, uploaded outside the timed loop
  if (tables.count(rows) == 0) {
    auto resp = Upload(w, Prepare(w, SharedDataset(w), rows));
    if (!resp.ok()) std::abort();
    tables[rows] = resp->table_handle();
  }
  const std::string& table = tables[rows];
  static int i = 0;
  for (auto _ : state) {
    const std::string key = absl::StrCat("scale-", i++);
    bool ok = false;
    if (kind == 0) {
      v1::NoisyCountsRequest req;
      req.set_idempotency_key(key);
      req.set_table_handle(table);
      req.add_columns("region");
      req.set_epsilon(0.01);
      ok = w.company->NoisyCounts(req).ok();
    } else if (kind == 1) {
      v1::FitEqualizedOddsRequest req;
      req.set_idempotency_key(key);
      req.set_table_handle(table);
      req.set_prediction_column("prediction");
      req.set_label_column("label");
      req.set_epsilon(0.01);
      req.set_gamma(0.01);
      ok = w.company->FitEqualizedOddsPostProcessor(req).ok();
    } else {
      v1::FitStatisticalParityRequest req;
      req.set_idempotency_key(key);
      req.set_table_handle(table);
      req.set_score_column("score");
      req.set_lo(0);
      req.set_hi(1);
      req.set_bins(100);
      req.set_epsilon(0.01);
      req.set_solver(v1::SP_SOLVER_QUANTILE);
      ok = w.company->FitStatisticalParityPostProcessor(req).ok();
    }
    if (!ok) state.SkipWithError("release failed");
  }
  state.SetItemsProcessed(state.iterations() * rows);
}
BENCHMARK(BM_ReleaseByRows)
    ->ArgsProduct({{0, 1, 2}, {10'000, 100'000, 1'000'000}})
    ->ArgNames({"kind", "rows"})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(5)
    ->UseRealTime();

// The in-memory floor of a release: one pass over 1M (group, bin) pairs into a histogram.
void BM_HistogramFloor1MRows(benchmark::State& state) {
  std::mt19937_64 gen(3);
  std::vector<int32_t> group(kRows), bin(kRows);
  for (int i = 0; i < kRows; ++i) {
    group[i] = static_cast<int32_t>(gen() % 4);
    bin[i] = static_cast<int32_t>(gen() % 100);
  }
  std::vector<int64_t> counts(400);
  for (auto _ : state) {
    std::fill(counts.begin(), counts.end(), 0);
    for (int i = 0; i < kRows; ++i) ++counts[group[i] * 100 + bin[i]];
    benchmark::DoNotOptimize(counts.data());
  }
  state.SetItemsProcessed(state.iterations() * kRows);
}
BENCHMARK(BM_HistogramFloor1MRows)->Unit(benchmark::kMillisecond);

// Small charged requests (a 1,000-row table, one fsync'd ledger transaction each).
void BM_ChargedRequests(benchmark::State& state) {
  World& w = GetWorld();
  static std::atomic<int> counter{0};
  if (state.thread_index() == 0 && w.small_table.empty()) {
    auto resp = Upload(w, Prepare(w, SharedDataset(w), 1000));
    if (!resp.ok()) std::abort();
    w.small_table = resp->table_handle();
  }
  auto client = w.company.get();
  for (auto _ : state) {
    v1::NoisyCountsRequest req;
    req.set_idempotency_key(absl::StrCat("small-", counter++));
    req.set_table_handle(w.small_table);
    req.set_epsilon(0.001);
    if (!client->NoisyCounts(req).ok()) state.SkipWithError("charged request failed");
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ChargedRequests)->UseRealTime()->Threads(1)->Threads(4)->Threads(16)->MinTime(3);

}  // namespace

// Stops the shared server (if a benchmark started it) so no process outlives the run.
void StopWorld() {
  if (world_instance != nullptr) world_instance->server.reset();
}

}  // namespace fairvault::bench

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  fairvault::bench::StopWorld();
  return 0;
}
