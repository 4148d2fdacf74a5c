// The SQLite store beside a long read: charges while the ledger is verified (`admin
// verify-ledger`, one pass over every row, grant, spend and tree node). The store under test is
// the server's own (SqliteStore on a file in the temp directory, synchronous=FULL); the ledger
// is filled first by 32 threads charging. Reports the verification's wall time and, for the
// charges one thread made one after another while it ran, how many there were and the longest
// one took: a charge that waited for the verification takes as long as it.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/bench_main.h"
#include "benchmark/benchmark.h"
#include "core/accounting/accountant.h"
#include "server/storage/sqlite/sqlite_store.h"

namespace fairvault::server::storage {
namespace {

struct Vault {
  std::string path;
  std::unique_ptr<SqliteStore> store;
  AccountRecord acme;
  DatasetRecord census;
  std::atomic<int64_t> next_key{0};
};

ChargeRequest RequestFor(Vault& v) {
  ChargeRequest r;
  r.account_id = v.acme.id;
  r.account_name = v.acme.name;
  r.dataset_id = v.census.id;
  r.dataset_name = v.census.name;
  r.request_kind = "NoisyCounts";
  r.idempotency_key = absl::StrCat("k", v.next_key.fetch_add(1));
  r.params_digest = "digest";
  r.cost = core::accounting::LaplaceCost(1);
  r.epsilon = core::accounting::MicroToEpsilon(1);
  r.mechanism = "discrete_laplace";
  return r;
}

bool ChargeOnce(Vault& v) {
  auto outcome = v.store->Charge(
      RequestFor(v), absl::ToUnixMicros(absl::Now()),
      [](int64_t seq, const BudgetState&) -> absl::StatusOr<ChargeResult> {
        return ChargeResult{absl::StrCat("payload-", seq), std::nullopt, std::nullopt};
      });
  return outcome.ok();
}

Vault* vault = new Vault;

// A store whose ledger holds `rows` rows, made once.
Vault* VaultWith(int64_t rows) {
  if (vault->store != nullptr) return vault;
  vault->path =
      (std::filesystem::temp_directory_path() / absl::StrCat("fv-store-bench-", getpid(), ".db"))
          .string();
  auto store = SqliteStore::Open(vault->path);
  if (!store.ok()) return nullptr;
  vault->store = *std::move(store);
  AccountRecord a;
  a.name = "acme";
  a.role = Role::kCompany;
  a.key_salt = "salt";
  a.key_hash = std::string(32, 'h');
  DatasetRecord d;
  d.name = "census";
  d.attributes = "attrs";
  auto acme = vault->store->CreateAccount(a);
  auto census = vault->store->CreateDataset(d);
  if (!acme.ok() || !census.ok()) return nullptr;
  vault->acme = *acme;
  vault->census = *census;
  if (!vault->store->SetGrant(GrantRecord{acme->id, census->id, int64_t{1} << 50, 0}, "acme",
                              "census", "regulator", 1)
           .ok()) {
    return nullptr;
  }
  std::vector<std::thread> fill;
  for (int t = 0; t < 32; ++t) {
    fill.emplace_back([&] {
      while (vault->next_key.load() < rows) ChargeOnce(*vault);
    });
  }
  for (std::thread& t : fill) t.join();
  return vault;
}

void BM_ChargesWhileVerifying(benchmark::State& state) {
  Vault* v = VaultWith(state.range(0));
  if (v == nullptr) {
    state.SkipWithError("could not make the store");
    return;
  }
  double verify_ms = 0, longest_ms = 0, charges = 0;
  for (auto _ : state) {
    std::atomic<bool> done{false};
    absl::Duration verify;
    bool verified = false;
    std::thread verifier([&] {
      const absl::Time start = absl::Now();
      if (state.range(1) == 1) {
        auto result = v->store->VerifyLedger();
        verified = result.ok() && result->ok;
      } else {
        absl::SleepFor(absl::Milliseconds(400));  // the baseline: nothing beside the charges
        verified = true;
      }
      verify = absl::Now() - start;
      done = true;
    });
    absl::Duration longest;
    int64_t n = 0;
    while (!done.load()) {
      const absl::Time start = absl::Now();
      if (!ChargeOnce(*v)) state.SkipWithError("a charge failed");
      longest = std::max(longest, absl::Now() - start);
      ++n;
    }
    verifier.join();
    if (!verified) state.SkipWithError("the ledger did not verify");
    verify_ms += absl::ToDoubleMilliseconds(verify);
    longest_ms = std::max(longest_ms, absl::ToDoubleMilliseconds(longest));
    charges += static_cast<double>(n);
  }
  const double iterations = static_cast<double>(state.iterations());
  state.counters["verify_ms"] = verify_ms / iterations;
  state.counters["charges_meanwhile"] = charges / iterations;
  state.counters["longest_charge_ms"] = longest_ms;
}
BENCHMARK(BM_ChargesWhileVerifying)
    ->ArgNames({"rows", "verify"})
    ->Args({50'000, 0})
    ->Args({50'000, 1})
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

void RemoveVault() {
  if (vault->store == nullptr) return;
  vault->store.reset();
  for (const char* suffix : {"", "-wal", "-shm"}) std::remove((vault->path + suffix).c_str());
}

}  // namespace fairvault::server::storage

int main(int argc, char** argv) {
  return fairvault::bench::BenchmarkMain(
      argc, argv,
      "Charges on the SQLite store while its ledger (50,000 rows) is verified: the "
      "verification's time, the charges one thread made meanwhile and the longest of them.",
      [] { fairvault::server::storage::RemoveVault(); });
}
