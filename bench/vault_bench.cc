// The vault over loopback with the ledger on disk: importing 1M subjects, uploading and
// joining a 1M-row table, NoisyCounts over it, and charged requests per second on SQLite and on
// PostgreSQL beside the disk's raw sync rate. One real server process on SQLite serves the
// release benchmarks; charged requests get a server per backend. Databases live in $TMPDIR
// (SQLite, default /tmp) and /tmp (PostgreSQL).
// Over 500 lines as one file: the benchmarks share the loaded server and its 1M-row tables, which
// are most of the code.
#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/bench_main.h"
#include "benchmark/benchmark.h"
#include "client/lib/ledger_check.h"
#include "client/lib/receipts.h"
#include "core/testing/files.h"
#include "core/transparency/note.h"
#include "server/storage/postgres/test_postgres.h"
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

// Creates a dataset with attributes sex{F,M} and band{u,v} (4 joint groups), imports `keys`
// (two categories per key), grants acme.
std::string PopulateDataset(client::Client& regulator, const std::string& name,
                            const std::vector<std::string>& keys,
                            const std::vector<std::string>& categories) {
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
  if (!regulator.CreateDataset(ds).ok()) std::abort();
  v1::ImportHeader header;
  header.set_dataset(name);
  header.set_batch_id("all");
  header.add_attributes("sex");
  header.add_attributes("band");
  if (!regulator.ImportAttributes(header, keys, categories).ok()) std::abort();
  v1::GrantBudgetRequest grant;
  grant.set_company("acme");
  grant.set_dataset(name);
  grant.set_epsilon(100000);
  grant.set_delta(1e-6);
  if (!regulator.GrantBudget(grant).ok()) std::abort();
  return name;
}

// A dataset of all kRows keys.
std::string NewPopulatedDataset(World& w) {
  return PopulateDataset(*w.regulator, absl::StrCat("pop", w.datasets++), w.keys, w.categories);
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
PreparedTable Prepare(const std::vector<std::string>& keys, const std::string& dataset, int rows) {
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
  t.keys.assign(keys.begin(), keys.begin() + rows);
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
    auto resp = Upload(w, Prepare(w.keys, NewPopulatedDataset(w), kRows));
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
  const PreparedTable table = Prepare(w.keys, NewPopulatedDataset(w), kRows);
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

// Decide on 1M rows, for the key and table paths: `decide` decides them with an artifact. Arg
// 0: first decisions, with a fresh equalized-odds artifact per iteration (fitted outside the
// timed part): the licence charge, 1M draws from the secure generator and 1M stored decisions.
// Arg 1: the same rows asked again: the stored decisions are returned.
void DecideBenchmark(benchmark::State& state,
                     const std::function<absl::StatusOr<client::DecideResult>(
                         const std::string& artifact_id)>& decide) {
  World& w = GetWorld();
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
      if (again && !decide(artifact_id).ok()) {
        state.SkipWithError("first decide failed");
        return;
      }
      state.ResumeTiming();
    }
    auto result = decide(artifact_id);
    if (!result.ok() || result->outputs.size() != static_cast<size_t>(kRows)) {
      state.SkipWithError("decide failed");
    }
  }
  state.SetItemsProcessed(state.iterations() * kRows);
}

// By keys: 5 calls of 200,000.
void BM_Decide1MRows(benchmark::State& state) {
  World& w = GetWorld();
  std::vector<std::string> keys(w.keys.begin(), w.keys.begin() + kRows);
  std::vector<double> values(kRows);
  for (int r = 0; r < kRows; ++r) values[r] = r % 2;
  DecideBenchmark(state, [&](const std::string& artifact_id) {
    return w.company->DecideInChunks(artifact_id, keys, values);
  });
}
BENCHMARK(BM_Decide1MRows)
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3)
    ->UseRealTime();

// Decide by table handle on the same 1M-row table: the keys crossed the wire at upload, so a
// call sends none (one call of 1M rows, 8 MB of outputs back).
void BM_DecideTable1MRows(benchmark::State& state) {
  World& w = GetWorld();
  DecideBenchmark(state, [&](const std::string& artifact_id) {
    return w.company->DecideTable(artifact_id, BigTable(w), "prediction");
  });
}
BENCHMARK(BM_DecideTable1MRows)
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3)
    ->UseRealTime();

// The floor under BM_Decide1MRows that no Decide can beat on this machine: its messages alone,
// in memory. The client library's five requests of 200,000 64-character keys and values are
// built and serialized as DecideInChunks builds them, parsed as the server's handler receives
// them, and each gets a response of 200,000 outputs, serialized and parsed back: no network, no
// lookup, no decision, no store.
void BM_DecideMessagesFloor(benchmark::State& state) {
  std::mt19937_64 gen(5);
  std::vector<std::string> keys(kRows);
  for (std::string& key : keys) {
    key = absl::StrFormat("%016x%016x%016x%016x", gen(), gen(), gen(), gen());
  }
  std::vector<double> values(kRows);
  for (int r = 0; r < kRows; ++r) values[r] = r % 2;
  for (auto _ : state) {
    v1::DecideRequest req;
    req.set_artifact_id("art_floor");
    std::vector<double> outputs;
    outputs.reserve(kRows);
    for (size_t begin = 0; begin < keys.size(); begin += client::kDecideChunkRows) {
      const size_t end = std::min(keys.size(), begin + client::kDecideChunkRows);
      req.clear_subject_keys();
      req.clear_values();
      req.mutable_subject_keys()->Reserve(static_cast<int>(end - begin));
      for (size_t i = begin; i < end; ++i) req.add_subject_keys(keys[i]);
      req.mutable_values()->Add(values.begin() + begin, values.begin() + end);
      const std::string wire = req.SerializeAsString();
      v1::DecideRequest received;
      if (!received.ParseFromString(wire)) std::abort();
      v1::DecideResponse resp;
      resp.mutable_outputs()->Reserve(received.values_size());
      for (double v : received.values()) resp.add_outputs(v);
      const std::string back = resp.SerializeAsString();
      v1::DecideResponse answer;
      if (!answer.ParseFromString(back)) std::abort();
      outputs.insert(outputs.end(), answer.outputs().begin(), answer.outputs().end());
    }
    benchmark::DoNotOptimize(outputs.data());
  }
  state.SetItemsProcessed(state.iterations() * kRows);
}
BENCHMARK(BM_DecideMessagesFloor)->Unit(benchmark::kMillisecond)->UseRealTime();

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
    auto resp = Upload(w, Prepare(w.keys, SharedDataset(w), rows));
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

// The disk's raw sync rate, the ceiling of one-commit-per-charge: write and sync, in a loop,
// on a file in the databases' directory ($TMPDIR or /tmp). Arg append 0 overwrites blocks of a
// preallocated file and calls fdatasync (what a WAL commit does: PostgreSQL's default
// wal_sync_method, SQLite's reused WAL); append 1 appends and calls fsync (the file grows, so
// the inode is written too). Arg pages: how many 4 KiB blocks each sync makes durable, in one
// write (a one-client SQLite charge commits about 9 pages). With several threads each thread
// syncs a file of its own.
void BM_FsyncFloor(benchmark::State& state) {
  const bool append = state.range(0) == 1;
  const int pages = static_cast<int>(state.range(1));
  const std::string path = testing::TempDatabasePath("fsync-floor");
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) {
    state.SkipWithError("cannot create the file");
    return;
  }
  constexpr int kBlock = 4096, kBlocks = 256;
  const std::vector<char> blocks(static_cast<size_t>(kBlock) * pages, 'x');
  const ssize_t length = static_cast<ssize_t>(blocks.size());
  bool ok = true;
  if (!append) {
    for (int i = 0; i < kBlocks; ++i) ok = ok && write(fd, blocks.data(), kBlock) == kBlock;
    ok = ok && fsync(fd) == 0;
  }
  off_t offset = 0;
  for (auto _ : state) {
    ok = ok && pwrite(fd, blocks.data(), length, offset) == length;
    offset += length;
    // Overwriting: back to the start before a write would run past the preallocated blocks.
    if (!append && offset + length > off_t{kBlock} * kBlocks) offset = 0;
    ok = ok && (append ? fsync(fd) : fdatasync(fd)) == 0;
  }
  close(fd);
  unlink(path.c_str());
  if (!ok) state.SkipWithError("write or sync failed");
  state.counters["syncs_per_s"] =
      benchmark::Counter(state.iterations(), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_FsyncFloor)
    ->ArgNames({"append", "pages"})
    ->Args({0, 1})
    ->Args({1, 1})
    ->Args({0, 10})
    ->Threads(1)
    ->Threads(8)
    ->UseRealTime()
    ->MinTime(3);

// What batching several charges per SQLite transaction could reach, without the vault: a
// SQLite file as the server opens it (WAL, synchronous=FULL), inserting one 256-byte row per
// "charge", state.range(0) rows per transaction (one WAL sync per commit). The vault commits
// each charge on its own (batch 1); batch > 1 is the ceiling of a group commit it does not do.
void BM_SqliteCommitFloor(benchmark::State& state) {
  const int batch = static_cast<int>(state.range(0));
  const std::string path = testing::TempDatabasePath("commit-floor");
  sqlite3* db = nullptr;
  bool ok = sqlite3_open(path.c_str(), &db) == SQLITE_OK;
  auto exec = [&](const char* sql) {
    ok = ok && sqlite3_exec(db, sql, nullptr, nullptr, nullptr) == SQLITE_OK;
  };
  exec("PRAGMA journal_mode=WAL");
  exec("PRAGMA synchronous=FULL");
  exec("CREATE TABLE ledger (seq INTEGER PRIMARY KEY, row BLOB)");
  sqlite3_stmt* insert = nullptr;
  ok = ok && sqlite3_prepare_v2(db, "INSERT INTO ledger (row) VALUES (?)", -1, &insert, nullptr) ==
                 SQLITE_OK;
  const std::string row(256, 'r');
  int64_t charges = 0;
  for (auto _ : state) {
    exec("BEGIN IMMEDIATE");
    for (int i = 0; i < batch && ok; ++i) {
      sqlite3_bind_blob(insert, 1, row.data(), static_cast<int>(row.size()), SQLITE_STATIC);
      ok = sqlite3_step(insert) == SQLITE_DONE && sqlite3_reset(insert) == SQLITE_OK;
    }
    exec("COMMIT");
    charges += batch;
  }
  sqlite3_finalize(insert);
  sqlite3_close(db);
  for (const char* suffix : {"", "-wal", "-shm"}) unlink((path + suffix).c_str());
  if (!ok) state.SkipWithError("SQLite failed");
  state.counters["charges_per_s"] =
      benchmark::Counter(static_cast<double>(charges), benchmark::Counter::kIsRate);
  state.counters["commits_per_s"] =
      benchmark::Counter(state.iterations(), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_SqliteCommitFloor)
    ->ArgName("batch")
    ->Arg(1)
    ->Arg(8)
    ->Arg(32)
    ->UseRealTime()
    ->MinTime(3);

// Charged requests on each backend, a server of its own: kSqlite, a SQLite file in $TMPDIR or
// /tmp (WAL, synchronous=FULL); kPostgres, a private PostgreSQL with fsync on, its data
// directory under /tmp (the same disk); kPostgresCommitDelay, the same server with
// commit_delay = 1 ms and commit_siblings = 1 (PostgreSQL's group commit made to wait for
// company).
enum ChargeBackend : int64_t { kSqlite = 0, kPostgres = 1, kPostgresCommitDelay = 2 };

struct ChargeWorld {
  std::unique_ptr<server::storage::TestPostgres> pg;  // declared first: destroyed last
  std::unique_ptr<ServerProcess> server;
  std::unique_ptr<client::Client> company;
  std::unique_ptr<client::Client> auditor;
  std::string table;
};

ChargeWorld* charge_worlds[2] = {nullptr, nullptr};

// A server on the backend with a 1,000-subject dataset, acme's grant and a 1,000-row table.
ChargeWorld* NewChargeWorld(bool postgres) {
  auto* w = new ChargeWorld;
  std::string db = testing::TempDatabasePath("charges");
  if (postgres) {
    auto pg =
        server::storage::TestPostgres::Start(server::storage::TestPostgres::Options{.fsync = true});
    if (!pg.ok()) {
      fprintf(stderr, "PostgreSQL: %s\n", pg.status().ToString().c_str());
      std::abort();
    }
    w->pg = *std::move(pg);
    auto uri = w->pg->CreateDatabase("charges");
    if (!uri.ok()) std::abort();
    db = *uri;
    fprintf(stderr, "PostgreSQL (fsync on) in %s\n", w->pg->dir().c_str());
  }
  fprintf(stderr, "charged-request server on %s\n", db.c_str());
  w->server = std::make_unique<ServerProcess>(db);
  auto key = w->server->Bootstrap("regulator");
  if (!key.ok() || !w->server->Start().ok()) std::abort();
  auto regulator = w->server->Connect(*key);
  v1::CreateAccountRequest acct;
  acct.set_name("acme");
  acct.set_role(v1::ROLE_COMPANY);
  w->company = w->server->Connect(regulator->CreateAccount(acct)->api_key());
  acct.set_name("watchdog");
  acct.set_role(v1::ROLE_AUDITOR);
  w->auditor = w->server->Connect(regulator->CreateAccount(acct)->api_key());
  std::mt19937_64 gen(2);
  std::vector<std::string> keys, categories;
  for (int i = 0; i < 1000; ++i) {
    keys.push_back(absl::StrFormat("%016x%016x%016x%016x", gen(), gen(), gen(), i));
    categories.push_back(gen() % 2 ? "F" : "M");
    categories.push_back(gen() % 3 ? "u" : "v");
  }
  const std::string dataset = PopulateDataset(*regulator, "small", keys, categories);
  const PreparedTable t = Prepare(keys, dataset, 1000);
  auto resp = w->company->UploadTable(t.header, t.keys, t.columns);
  if (!resp.ok()) std::abort();
  w->table = resp->table_handle();
  charge_worlds[postgres ? 1 : 0] = w;
  return w;
}

ChargeWorld& GetChargeWorld(ChargeBackend backend) {
  if (backend == kSqlite) {
    static ChargeWorld* sqlite = NewChargeWorld(false);  // thread-safe static initialisation
    return *sqlite;
  }
  static ChargeWorld* postgres = NewChargeWorld(true);
  return *postgres;
}

// Small charged requests (NoisyCounts on the 1,000-row table, ε = 0.001): each is one ledger
// transaction, serialised against every other charge, one commit = one sync of the WAL.
// state.range(0) is the ChargeBackend; the threads are the concurrent clients (one channel).
void BM_ChargedRequests(benchmark::State& state) {
  const auto backend = static_cast<ChargeBackend>(state.range(0));
  ChargeWorld& w = GetChargeWorld(backend);
  if (backend != kSqlite && state.thread_index() == 0) {
    const bool delay = backend == kPostgresCommitDelay;
    // One statement after the other (the operands of + may be evaluated in any order).
    std::string error =
        w.pg->Exec("postgres", absl::StrCat("ALTER SYSTEM SET commit_delay = ", delay ? 1000 : 0));
    error +=
        w.pg->Exec("postgres", absl::StrCat("ALTER SYSTEM SET commit_siblings = ", delay ? 1 : 5));
    error += w.pg->Exec("postgres", "SELECT pg_reload_conf()");
    if (!error.empty()) {
      state.SkipWithError(error.c_str());
      return;
    }
    // The postmaster rereads its configuration asynchronously; new connections then see it.
    const int64_t want = delay ? 1000 : 0;
    bool applied = false;
    for (int i = 0; i < 100 && !applied; ++i) {
      usleep(100'000);
      applied = w.pg->Scalar("charges",
                             "SELECT setting::int FROM pg_settings WHERE name = "
                             "'commit_delay'") == want;
    }
    if (!applied) {
      state.SkipWithError("commit_delay was not applied within 10 s");
      return;
    }
  }
  static std::atomic<int> counter{0};
  for (auto _ : state) {
    v1::NoisyCountsRequest req;
    req.set_idempotency_key(absl::StrCat("small-", counter++));
    req.set_table_handle(w.table);
    req.set_epsilon(0.001);
    if (!w.company->NoisyCounts(req).ok()) state.SkipWithError("charged request failed");
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["charges_per_s"] =
      benchmark::Counter(state.iterations(), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_ChargedRequests)
    ->ArgName("backend")
    ->Arg(kSqlite)
    ->Arg(kPostgres)
    ->Arg(kPostgresCommitDelay)
    ->Threads(1)
    ->Threads(8)
    ->Threads(32)
    ->UseRealTime()
    ->MinTime(3);

// The floor of a charge's round trip on the same server: the same NoisyCounts request with an
// idempotency key charged before, so the server authenticates it, finds the stored response
// and returns its bytes: the RPC, the caller's lookup and one read, without the release, the
// ledger write or the sync. No charge can be faster than this on the machine.
void BM_ReplayedRequests(benchmark::State& state) {
  ChargeWorld& w = GetChargeWorld(kSqlite);
  v1::NoisyCountsRequest req;
  req.set_idempotency_key("replayed");
  req.set_table_handle(w.table);
  req.set_epsilon(0.001);
  // Every thread once before the timed loop (one of them charges, the others replay).
  if (!w.company->NoisyCounts(req).ok()) state.SkipWithError("the first request failed");
  for (auto _ : state) {
    if (!w.company->NoisyCounts(req).ok()) state.SkipWithError("replayed request failed");
  }
  state.counters["requests_per_s"] =
      benchmark::Counter(state.iterations(), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_ReplayedRequests)->Threads(1)->Threads(8)->Threads(32)->UseRealTime()->MinTime(3);

// The floor of any call on the same server and channel: gRPC's health check, which the
// vault's own code does not handle (no API key, no store read). A replayed request's time
// beyond it is the vault's work on the way to the stored bytes; a charge cannot take less
// than it plus one sync.
void BM_HealthChecks(benchmark::State& state) {
  ChargeWorld& w = GetChargeWorld(kSqlite);
  for (auto _ : state) {
    if (!w.company->CheckHealth().ok()) state.SkipWithError("health check failed");
  }
  state.counters["requests_per_s"] =
      benchmark::Counter(state.iterations(), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_HealthChecks)->Threads(1)->Threads(8)->Threads(32)->UseRealTime()->MinTime(3);

// An auditor's own check of the whole ledger (`auditor verify --log-key`, client/lib/
// ledger_check.h) on the SQLite charge server's ledger, topped up to 20,000 rows: the latest
// signed checkpoint, every row listed with its canonical encoding, each row's hash, the chain,
// the Merkle root and each charge's admission recomputed. state.range(0) = 0 is the floor:
// the same rows listed without their encodings and not checked.
void BM_AuditorChecksTheLedger(benchmark::State& state) {
  ChargeWorld& w = GetChargeWorld(kSqlite);
  const bool check = state.range(0) == 1;
  static std::atomic<int> counter{0};
  auto rows_now = [&]() -> int64_t {
    auto cp = w.auditor->GetCheckpoint(v1::GetCheckpointRequest(), /*auditor=*/true);
    return cp.ok() ? cp->checkpoint().size() : -1;
  };
  while (rows_now() >= 0 && rows_now() < 20'000) {
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&] {
        for (int i = 0; i < 250; ++i) {
          v1::NoisyCountsRequest req;
          req.set_idempotency_key(absl::StrCat("audited-", counter++));
          req.set_table_handle(w.table);
          req.set_epsilon(0.001);
          (void)w.company->NoisyCounts(req);
        }
      });
    }
    for (auto& t : threads) t.join();
  }
  auto signer = core::transparency::NoteSigner::Parse(
      testing::ReadFile(w.server->db_path() + ".log-key"));
  if (!signer.ok()) {
    state.SkipWithError("no log key");
    return;
  }
  const core::transparency::NoteVerifier verifier = signer->verifier();
  int64_t rows = 0;
  for (auto _ : state) {
    auto cp = w.auditor->GetCheckpoint(v1::GetCheckpointRequest(), /*auditor=*/true);
    if (!cp.ok()) state.SkipWithError("GetCheckpoint failed");
    auto opened = client::OpenCheckpoint(cp->checkpoint().note(), verifier);
    if (!opened.ok()) state.SkipWithError("the checkpoint does not verify");
    client::LedgerCheck ledger(*opened);
    v1::ListLedgerRequest req;
    req.set_limit(10000);
    req.set_with_canonical(check);
    rows = 0;
    while (true) {
      auto page = w.auditor->AuditorListLedger(req);
      if (!page.ok()) state.SkipWithError("ListLedger failed");
      if (!page.ok() || page->entries().empty()) break;
      for (const v1::LedgerEntry& e : page->entries()) {
        if (check && !ledger.Add(e).ok()) state.SkipWithError("a row did not verify");
      }
      rows += page->entries_size();
      req.set_after_seq(page->entries(page->entries_size() - 1).seq());
    }
    if (check && !ledger.Finish().ok()) state.SkipWithError("the ledger did not verify");
  }
  state.counters["rows"] = static_cast<double>(rows);
  state.counters["rows_per_s"] =
      benchmark::Counter(static_cast<double>(rows) * state.iterations(),
                         benchmark::Counter::kIsRate);
}
BENCHMARK(BM_AuditorChecksTheLedger)
    ->ArgName("check")
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(3);

// Runs `long_call` (which returns whether it succeeded) on one thread while this one sends
// small NoisyCounts charges one after another until it returns; counters: the charges made
// meanwhile, the longest of them, and the long call's time.
void ChargesBeside(benchmark::State& state, ChargeWorld& w,
                   const std::function<bool(int key)>& long_call) {
  static std::atomic<int> counter{0};
  double charges = 0, longest_ms = 0, long_s = 0;
  for (auto _ : state) {
    std::atomic<bool> running{true};
    bool long_ok = false;
    std::thread beside([&] {
      const absl::Time start = absl::Now();
      long_ok = long_call(counter++);
      long_s = absl::ToDoubleSeconds(absl::Now() - start);
      running = false;
    });
    charges = 0;
    longest_ms = 0;
    while (running) {
      v1::NoisyCountsRequest req;
      req.set_idempotency_key(absl::StrCat("beside-", counter++));
      req.set_table_handle(w.table);
      req.set_epsilon(0.001);
      const absl::Time start = absl::Now();
      if (!w.company->NoisyCounts(req).ok()) state.SkipWithError("charged request failed");
      longest_ms = std::max(longest_ms, absl::ToDoubleMilliseconds(absl::Now() - start));
      ++charges;
    }
    beside.join();
    if (!long_ok) state.SkipWithError("the long request failed");
  }
  state.counters["charges_during_fit"] = charges;
  state.counters["longest_charge_ms"] = longest_ms;
  state.counters["fit_s"] = long_s;
}

// A request on the table's "score" column over [0, 1] in state.range(0) bins at epsilon 1,
// under key `prefix``key`: what the long requests beside the charges share.
template <typename Request>
Request ScoresOnTheTable(const ChargeWorld& w, const char* prefix, int key,
                         const benchmark::State& state) {
  Request req;
  req.set_idempotency_key(absl::StrCat(prefix, key));
  req.set_table_handle(w.table);
  req.set_score_column("score");
  req.set_lo(0);
  req.set_hi(1);
  req.set_bins(static_cast<int>(state.range(0)));
  req.set_epsilon(1);
  return req;
}

// Charges beside a long post-processing: one client fits the statistical-parity
// post-processor with the LP at state.range(0) bins on the 1,000-row table (4 groups; 200 bins
// are 160,000 coupling variables, about 5 s of LP) while another sends small NoisyCounts
// charges one after another until the fit returns. The fit's noisy histogram is charged in a
// batch like any other; its LP runs after that commit, so the charges beside it need not wait
// for it.
void BM_ChargesBesideALongFit(benchmark::State& state) {
  ChargeWorld& w = GetChargeWorld(kSqlite);
  ChargesBeside(state, w, [&](int key) {
    auto req = ScoresOnTheTable<v1::FitStatisticalParityRequest>(w, "long-fit-", key, state);
    req.set_alpha(0.1);
    req.set_solver(v1::SP_SOLVER_LINEAR_PROGRAM);
    return w.company->FitStatisticalParityPostProcessor(req).ok();
  });
}
BENCHMARK(BM_ChargesBesideALongFit)->Arg(200)->Iterations(1)->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// The same beside a regressor audit at state.range(0) bins on the 1,000-row table (4 groups:
// 1,000 bins are the audits' limit of 4,000 cells, whose bootstrap makes 100 draws of every
// cell in each of its two passes). The audit's noisy counts and sums are charged in a batch;
// its bootstrap runs after that commit.
void BM_ChargesBesideALongAudit(benchmark::State& state) {
  ChargeWorld& w = GetChargeWorld(kSqlite);
  ChargesBeside(state, w, [&](int key) {
    const auto req = ScoresOnTheTable<v1::AuditRegressorRequest>(w, "long-audit-", key, state);
    return w.company->AuditRegressor(req).ok();
  });
}
BENCHMARK(BM_ChargesBesideALongAudit)->Arg(1000)->Iterations(1)->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace

// Stops the shared server (if a benchmark started it) so no process outlives the run.
void StopWorld() {
  if (world_instance != nullptr) world_instance->server.reset();
  for (ChargeWorld* w : charge_worlds) {
    if (w == nullptr) continue;
    w->server.reset();
    w->pg.reset();
  }
}

}  // namespace fairvault::bench

int main(int argc, char** argv) {
  return fairvault::bench::BenchmarkMain(
      argc, argv,
      "The vault over loopback with the ledger on disk (a real fairvault-server): 1M-subject\n"
      "imports, 1M-row uploads and NoisyCounts, charged requests per second on SQLite and\n"
      "PostgreSQL beside the disk's sync rate.",
      fairvault::bench::StopWorld);
}
