// Fair models through a real server (issue 9 §5 speed targets), as vault_bench runs it: one
// fairvault-server process on loopback, its database in $TMPDIR.
// - BM_AdultFitFairModelJob: FitFairModel (the DP-oracle learner, T = 1,000) on Adult uploaded
//   once, timed from submission until GetJob says SUCCEEDED (target: under 5 s);
// - BM_BestResponseRpc1Mx50: one BestResponse on 1M rows x 50 features (target: under 1 s),
//   the table uploaded and the masses (NoisyCounts over [label]) released once, outside the
//   timed loop; every call has a fresh idempotency key. ftpl:0 (least squares) runs first, so
//   its call1 is the first call on a freshly uploaded table; ftpl:1's call1 rebuilds the game
//   with its rows (the least-squares game has only the sums).
// The in-process parts and their floors are in fair_game_bench.
#include <chrono>
#include <memory>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/bench_main.h"
#include "benchmark/benchmark.h"
#include "bench/adult_game.h"
#include "tests/server_process.h"

namespace fairvault::bench {
namespace {

namespace v1 = ::fairvault::v1;
using testing::ServerProcess;

constexpr int kRounds = 1000;
constexpr int kBigRows = 1'000'000;
constexpr int kBigFeatures = 50;

struct World {
  std::unique_ptr<ServerProcess> server;
  std::unique_ptr<client::Client> regulator, company;
};

World* world_instance = nullptr;

World& GetWorld() {
  static World* world = [] {
    auto* w = new World;
    w->server = std::make_unique<ServerProcess>(testing::TempDatabasePath("fair_model_bench"));
    auto key = w->server->Bootstrap("regulator");
    if (!key.ok() || !w->server->Start().ok()) std::abort();
    w->regulator = w->server->Connect(*key);
    v1::CreateAccountRequest acct;
    acct.set_name("acme");
    acct.set_role(v1::ROLE_COMPANY);
    w->company = w->server->Connect(w->regulator->CreateAccount(acct)->api_key());
    world_instance = w;
    return w;
  }();
  return *world;
}

// A dataset with one attribute sex{F,M}, subjects keys[i] of group groups[i], acme granted.
void CreateDataset(World& w, const std::string& name, const std::vector<std::string>& keys,
                   const std::vector<int>& groups) {
  v1::CreateDatasetRequest ds;
  ds.set_name(name);
  auto* a = ds.add_attributes();
  a->set_name("sex");
  a->add_categories("F");
  a->add_categories("M");
  if (!w.regulator->CreateDataset(ds).ok()) std::abort();
  v1::ImportHeader header;
  header.set_dataset(name);
  header.set_batch_id("all");
  header.add_attributes("sex");
  std::vector<std::string> categories;
  for (int g : groups) categories.push_back(g == 1 ? "M" : "F");
  if (!w.regulator->ImportAttributes(header, keys, categories).ok()) std::abort();
  v1::GrantBudgetRequest grant;
  grant.set_company("acme");
  grant.set_dataset(name);
  grant.set_epsilon(100000);
  grant.set_delta(1e-6);
  if (!w.regulator->GrantBudget(grant).ok()) std::abort();
}

// Uploads numeric feature columns x0..x{d-1} and the label column y; returns the handle.
std::string UploadFeatures(World& w, const std::string& dataset,
                           const std::vector<std::string>& keys, const Eigen::MatrixXd& x,
                           const std::vector<int>& labels) {
  v1::TableHeader header;
  header.set_dataset(dataset);
  std::vector<v1::ColumnValues> columns(x.cols() + 1);
  for (Eigen::Index j = 0; j <= x.cols(); ++j) {
    auto* c = header.add_columns();
    c->set_name(j < x.cols() ? absl::StrCat("x", j) : "y");
    c->set_type(v1::COLUMN_TYPE_NUMERIC);
    columns[j].mutable_numeric()->Reserve(static_cast<int>(x.rows()));
    for (Eigen::Index i = 0; i < x.rows(); ++i) {
      columns[j].add_numeric(j < x.cols() ? x(i, j) : labels[i]);
    }
  }
  auto resp = w.company->UploadTable(header, keys, columns);
  if (!resp.ok()) {
    std::fprintf(stderr, "upload: %s\n", resp.status().ToString().c_str());
    std::abort();
  }
  return resp->table_handle();
}

// The masses q̂ for BestResponse: NoisyCounts over [y], key `key`.
void ReleaseMasses(World& w, const std::string& table, const std::string& key) {
  v1::NoisyCountsRequest req;
  req.set_idempotency_key(key);
  req.set_table_handle(table);
  req.add_columns("y");
  req.set_epsilon(1);
  if (!w.company->NoisyCounts(req).ok()) std::abort();
}

void AddFeatureColumns(int d, google::protobuf::RepeatedPtrField<std::string>* out) {
  for (int j = 0; j < d; ++j) *out->Add() = absl::StrCat("x", j);
}

// ---- Adult: the managed DP-oracle learner ---------------------------------------------------

const std::string& AdultTable(World& w) {
  static const std::string handle = [&w] {
    const AdultGame& adult = SharedAdultGame();
    std::vector<std::string> keys;
    for (Eigen::Index i = 0; i < adult.features.rows(); ++i) keys.push_back(absl::StrCat("a", i));
    CreateDataset(w, "adult", keys, adult.groups);
    return UploadFeatures(w, "adult", keys, adult.features, adult.labels);
  }();
  return handle;
}

void BM_AdultFitFairModelJob(benchmark::State& state) {
  World& w = GetWorld();
  const std::string& table = AdultTable(w);
  const int d = static_cast<int>(SharedAdultGame().features.cols());
  static int i = 0;
  for (auto _ : state) {
    v1::FitFairModelRequest req;
    req.set_idempotency_key(absl::StrCat("adult-job-", i++));
    req.set_table_handle(table);
    req.set_algorithm(v1::FAIR_MODEL_ALGORITHM_DP_ORACLE_LEARNER);
    AddFeatureColumns(d, req.mutable_feature_columns());
    req.set_label_column("y");
    req.set_epsilon(10);
    req.set_gamma(0.02);
    req.set_rounds(kRounds);
    auto submitted = w.company->FitFairModel(req);
    if (!submitted.ok()) {
      state.SkipWithError(submitted.status().ToString().c_str());
      return;
    }
    v1::GetJobRequest get;
    get.set_job_id(submitted->job().id());
    v1::JobState job_state = v1::JOB_STATE_QUEUED;
    while (job_state == v1::JOB_STATE_QUEUED || job_state == v1::JOB_STATE_RUNNING) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      auto job = w.company->GetJob(get);
      if (!job.ok()) {
        state.SkipWithError(job.status().ToString().c_str());
        return;
      }
      job_state = job->job().state();
      state.counters["job_elapsed_s"] = job->job().elapsed_seconds();
    }
    if (job_state != v1::JOB_STATE_SUCCEEDED) state.SkipWithError("the job did not succeed");
  }
  state.counters["rounds"] = kRounds;
}
BENCHMARK(BM_AdultFitFairModelJob)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);

// ---- 1M rows x 50 features: one BestResponse ------------------------------------------------

const std::string& BigTable(World& w) {
  static const std::string handle = [&w] {
    std::mt19937_64 gen(11);
    std::normal_distribution<double> normal;
    Eigen::MatrixXd x(kBigRows, kBigFeatures);
    for (int j = 0; j < kBigFeatures; ++j) {
      for (int i = 0; i < kBigRows; ++i) x(i, j) = normal(gen);
    }
    std::vector<int> labels, groups;
    std::vector<std::string> keys;
    for (int i = 0; i < kBigRows; ++i) {
      labels.push_back(x(i, 0) + 0.5 * x(i, 1) + normal(gen) > 0.3 ? 1 : 0);
      groups.push_back(x(i, 2) + normal(gen) > 0 ? 1 : 0);
      keys.push_back(absl::StrFormat("%016x%016x", gen(), i));
    }
    CreateDataset(w, "big", keys, groups);
    std::string table = UploadFeatures(w, "big", keys, x, labels);
    ReleaseMasses(w, table, "big-masses");
    return table;
  }();
  return handle;
}

void BM_BestResponseRpc1Mx50(benchmark::State& state) {
  World& w = GetWorld();
  const std::string& table = BigTable(w);
  static int i = 0;
  int calls = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    v1::BestResponseRequest req;
    req.set_idempotency_key(absl::StrCat("br-", i++));
    req.set_table_handle(table);
    AddFeatureColumns(kBigFeatures, req.mutable_feature_columns());
    req.set_label_column("y");
    req.set_masses_key("big-masses");
    for (double l : {2.0, 0.0, 0.0, 1.5}) req.add_lambda(l);
    req.set_lambda_bound(10);
    req.set_gamma(0.02);
    req.set_oracle(state.range(0) == 1 ? v1::BEST_RESPONSE_ORACLE_FTPL
                                       : v1::BEST_RESPONSE_ORACLE_LEAST_SQUARES);
    req.set_epsilon(1);
    auto resp = w.company->BestResponse(req);
    if (!resp.ok() || resp->rows_used() != kBigRows) {
      state.SkipWithError(resp.status().ToString().c_str());
      return;
    }
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count();
    state.counters[absl::StrCat("call", ++calls, "_ms")] = ms;
  }
  state.SetItemsProcessed(state.iterations() * kBigRows);
}
BENCHMARK(BM_BestResponseRpc1Mx50)
    ->Arg(0)
    ->Arg(1)
    ->ArgName("ftpl")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(3);

}  // namespace

// Stops the shared server (if a benchmark started it) so no process outlives the run.
void StopWorld() {
  if (world_instance != nullptr) world_instance->server.reset();
}

}  // namespace fairvault::bench

int main(int argc, char** argv) {
  return fairvault::bench::BenchmarkMain(
      argc, argv,
      "Fair models through a real fairvault-server: FitFairModel on Adult until the job\n"
      "succeeds, BestResponse on 1M x 50.",
      fairvault::bench::StopWorld);
}
