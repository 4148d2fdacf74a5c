// A running vault with a synthetic population, for end-to-end tests: one dataset "pop" with
// attributes sex{F,M} and race{A,B,C}, a company "acme" with a grant, an auditor, and the
// company's uploaded table (columns region, prediction, label).
#ifndef FAIRVAULT_TESTS_VAULT_FIXTURE_H_
#define FAIRVAULT_TESTS_VAULT_FIXTURE_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/server_process.h"

namespace fairvault::testing {

struct Population {
  std::vector<std::string> keys;
  std::vector<int> sex;     // 0 = F, 1 = M
  std::vector<int> race;    // 0..2
  std::vector<int> region;  // 0 = north, 1 = south
  std::vector<int> label;
  std::vector<int> prediction;
};

// Deterministic synthetic population of n subjects (seeded).
Population MakePopulation(int n, uint64_t seed);

// A DP-oracle learner job of 60,000 rounds on the fixture's table ("prediction" → "label", by
// sex, ε 5, γ 0.01): long enough to kill its server mid-run, deterministic given its seed.
v1::FitFairModelRequest LongTrainingJob(const std::string& table_handle);

// A client for an API key, on whatever vault the caller means.
using ConnectFn = std::function<std::unique_ptr<client::Client>(const std::string& api_key)>;

// The names SeedVault gives what it creates (the fixture's defaults).
struct SeedNames {
  std::string dataset = "pop";
  std::string company = "acme";
  std::string auditor = "watchdog";
};
// What SeedVault made.
struct SeededVault {
  std::string company_key, auditor_key, table_handle;
};

// Through the regulator's client: creates the dataset (sex{F,M}, race{A,B,C}) and imports
// `population`'s attributes, creates the company and the auditor, grants the company (epsilon,
// delta) on the dataset; then the company (a client from `connect`) uploads its table (region,
// prediction, label). Fatal test failures on any error.
void SeedVault(client::Client& regulator, const ConnectFn& connect, const Population& population,
               double epsilon, double delta, const SeedNames& names, SeededVault* out);

class VaultFixture : public ::testing::Test {
 protected:
  // Starts the server and loads `population` with a grant of (epsilon, delta) for acme.
  void StartVault(const Population& population, double epsilon, double delta);
  void TearDown() override;

  // Set before StartVault: the --db (a new SQLite file when empty; a postgresql:// URI selects
  // PostgreSQL), extra `serve` flags, and a file for the server's stdout and stderr.
  std::string db_;
  std::vector<std::string> serve_flags_;
  std::string server_log_;
  std::unique_ptr<ServerProcess> server_;
  std::string regulator_key_, company_key_, auditor_key_;
  std::unique_ptr<client::Client> regulator_, company_, auditor_;
  std::string table_handle_;
};

}  // namespace fairvault::testing

#endif  // FAIRVAULT_TESTS_VAULT_FIXTURE_H_
