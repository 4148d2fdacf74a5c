// The transparency log's costs (issue 25): appending a leaf (the stored subtrees it completes)
// and producing an inclusion or a consistency proof, on trees of 10^6 and 10^7 leaves held in
// memory (the hashing and the O(log^2 n) node reads alone), and on 10^6 leaves in a SQLite
// table shaped as the store's merkle_nodes (each read a point lookup, as a receipt pays).
#include <sqlite3.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/bench_main.h"
#include "benchmark/benchmark.h"
#include "core/transparency/merkle.h"

namespace fairvault::core::transparency {
namespace {

// Complete subtrees by level, as flat arrays of 32-byte hashes.
class MemoryTree {
 public:
  void Append(const Hash& leaf) {
    auto nodes = NodesForAppend(size_, leaf, Reader());
    for (const StoredNode& n : *nodes) {
      if (levels_.size() <= static_cast<size_t>(n.level)) levels_.resize(n.level + 1);
      auto& level = levels_[n.level];
      level.resize(n.index + 1);
      std::memcpy(level[n.index].data(), n.hash.data(), kHashBytes);
    }
    ++size_;
  }
  std::function<absl::StatusOr<Hash>(int, int64_t)> Reader() const {
    return [this](int level, int64_t index) -> absl::StatusOr<Hash> {
      const auto& h = levels_[level][index];
      return Hash(h.data(), h.size());
    };
  }
  int64_t size() const { return size_; }

 private:
  int64_t size_ = 0;
  std::vector<std::vector<std::array<char, kHashBytes>>> levels_;
};

MemoryTree& TreeOf(int64_t leaves) {
  static auto* trees = new std::map<int64_t, std::unique_ptr<MemoryTree>>;
  auto& tree = (*trees)[leaves];
  if (tree == nullptr) {
    tree = std::make_unique<MemoryTree>();
    for (int64_t i = 0; i < leaves; ++i) tree->Append(LeafHash(absl::StrCat("row ", i)));
  }
  return *tree;
}

void BM_AppendLeaf(benchmark::State& state) {
  MemoryTree tree;
  int64_t i = 0;
  for (auto _ : state) tree.Append(LeafHash(absl::StrCat("row ", i++)));
}
BENCHMARK(BM_AppendLeaf);

void BM_InclusionProofInMemory(benchmark::State& state) {
  MemoryTree& tree = TreeOf(state.range(0));
  const int64_t n = tree.size();
  int64_t m = 12345;
  for (auto _ : state) {
    auto proof = InclusionProof(m, n, tree.Reader());
    benchmark::DoNotOptimize(proof);
    m = (m * 7919 + 1) % n;
  }
}
BENCHMARK(BM_InclusionProofInMemory)->Arg(1'000'000)->Arg(10'000'000)->Unit(benchmark::kMicrosecond);

void BM_ConsistencyProofInMemory(benchmark::State& state) {
  MemoryTree& tree = TreeOf(state.range(0));
  const int64_t n = tree.size();
  int64_t m = 12345;
  for (auto _ : state) {
    auto proof = ConsistencyProof(m, n, tree.Reader());
    benchmark::DoNotOptimize(proof);
    m = (m * 7919 + 1) % (n - 1) + 1;
  }
}
BENCHMARK(BM_ConsistencyProofInMemory)
    ->Arg(1'000'000)
    ->Arg(10'000'000)
    ->Unit(benchmark::kMicrosecond);

// 10^6 leaves in SQLite, the store's table and lookup.
void BM_InclusionProofSqlite(benchmark::State& state) {
  const std::string path =
      (std::filesystem::temp_directory_path() / "fv-merkle-bench.db").string();
  std::filesystem::remove(path);
  sqlite3* db = nullptr;
  sqlite3_open(path.c_str(), &db);
  sqlite3_exec(db,
               "PRAGMA journal_mode=WAL; CREATE TABLE merkle_nodes(level INTEGER NOT NULL, idx "
               "INTEGER NOT NULL, hash BLOB NOT NULL, PRIMARY KEY(level, idx)) WITHOUT ROWID; "
               "BEGIN",
               nullptr, nullptr, nullptr);
  sqlite3_stmt* insert = nullptr;
  sqlite3_prepare_v2(db, "INSERT INTO merkle_nodes VALUES(?,?,?)", -1, &insert, nullptr);
  MemoryTree& tree = TreeOf(state.range(0));
  auto read_memory = tree.Reader();
  for (int level = 0; (int64_t{1} << level) <= tree.size(); ++level) {
    for (int64_t i = 0; i < (tree.size() >> level); ++i) {
      Hash h = *read_memory(level, i);
      sqlite3_bind_int64(insert, 1, level);
      sqlite3_bind_int64(insert, 2, i);
      sqlite3_bind_blob(insert, 3, h.data(), h.size(), SQLITE_TRANSIENT);
      sqlite3_step(insert);
      sqlite3_reset(insert);
    }
  }
  sqlite3_finalize(insert);
  sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr);
  sqlite3_stmt* select = nullptr;
  sqlite3_prepare_v2(db, "SELECT hash FROM merkle_nodes WHERE level=? AND idx=?", -1, &select,
                     nullptr);
  auto read = [select](int level, int64_t index) -> absl::StatusOr<Hash> {
    sqlite3_bind_int64(select, 1, level);
    sqlite3_bind_int64(select, 2, index);
    if (sqlite3_step(select) != SQLITE_ROW) {
      sqlite3_reset(select);
      return absl::NotFoundError("no node");
    }
    Hash h(static_cast<const char*>(sqlite3_column_blob(select, 0)), kHashBytes);
    sqlite3_reset(select);
    return h;
  };
  const int64_t n = tree.size();
  int64_t m = 12345;
  for (auto _ : state) {
    auto proof = InclusionProof(m, n, read);
    auto consistency = ConsistencyProof(m + 1, n, read);
    benchmark::DoNotOptimize(proof);
    benchmark::DoNotOptimize(consistency);
    m = (m * 7919 + 1) % (n - 1);
  }
  sqlite3_finalize(select);
  sqlite3_close(db);
  std::filesystem::remove(path);
  std::filesystem::remove(path + "-wal");
  std::filesystem::remove(path + "-shm");
}
BENCHMARK(BM_InclusionProofSqlite)->Arg(1'000'000)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace fairvault::core::transparency

int main(int argc, char** argv) {
  return fairvault::bench::BenchmarkMain(
      argc, argv,
      "The transparency log: appending a leaf, and an inclusion and a consistency proof on "
      "trees of 10^6 and 10^7 leaves (in memory) and 10^6 (SQLite, as a receipt reads them).");
}
