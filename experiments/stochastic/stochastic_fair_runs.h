// stochastic_fair_repro's jobs: each data set uploaded to the vault once, one FitFairModel job
// per row (setting × configuration × ε × λ × seed) run and its network applied to the evaluation
// rows, and the rows summarised as table cells and CSV.
#ifndef FAIRVAULT_EXPERIMENTS_STOCHASTIC_STOCHASTIC_FAIR_RUNS_H_
#define FAIRVAULT_EXPERIMENTS_STOCHASTIC_STOCHASTIC_FAIR_RUNS_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "Eigen/Dense"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "experiments/common/datasets.h"
#include "experiments/common/metrics.h"
#include "experiments/common/vault_session.h"
#include "experiments/stochastic/stochastic_fair_settings.h"

namespace fairvault::experiments::stochastic_fair {

// One job: what was asked and what came out.
struct Row {
  Setting setting;
  Config config;
  double epsilon = 0, lambda = 0;
  int seed = 0;
  DecisionMetrics m;
  double objective = 0;  // tuning: CE + λ·ERMI on the validation rows
  double z = 0;          // the noise multiplier (the charge's "steps" part)
  double elapsed = 0;    // the job's own elapsed_seconds
  std::string note;

  double violation() const { return setting.eo ? m.eo_violation : m.dp_violation; }
};

// A data set in the vault: its rows there (train, or the tuning part of train) and the rows the
// models are scored on (test, or the validation rows).
struct Uploaded {
  FairDataset data;
  LabeledRows fit, eval;
  std::string handle;
  std::vector<std::string> features;
};

// Loads each named data set: fit = train and eval = test, or with `tune` fit and eval the two
// parts of train (SplitIndices with kValidationFraction and `split_seed`).
absl::StatusOr<std::map<std::string, Uploaded>> LoadAll(const std::set<std::string>& names,
                                                        const std::string& datasets_dir,
                                                        uint64_t split_seed, bool tune);

// The grant a data set needs for the rows' jobs: twice the sum of their ε, plus 1.
double GrantFor(const std::vector<Row>& rows, const std::string& dataset);

// The regulator imports u's fit rows' groups and grants `grant` (δ = kDelta); the company uploads
// its features f0.. and label; sets u->handle and u->features.
absl::Status Upload(VaultSession& vault, double grant, Uploaded* u);

// Runs the rows' jobs (in groups, printing progress) and scores each model on its data set's
// evaluation rows.
absl::Status RunRows(VaultSession& vault, std::map<std::string, Uploaded>& data, bool objective,
                     std::vector<Row>& rows);

// "error / violation" of the rows, mean ± population std if more than one ("" for none).
std::string Cell(const std::vector<const Row*>& rows);

// The rows of a setting, configuration, ε and λ.
std::vector<const Row*> Select(const std::vector<Row>& rows, const Setting& s,
                               const std::string& config, double eps, double lambda);

// One CSV line per row (with the validation objective if `objective`).
std::string CsvOf(const std::vector<Row>& rows, bool objective);

}  // namespace fairvault::experiments::stochastic_fair

#endif  // FAIRVAULT_EXPERIMENTS_STOCHASTIC_STOCHASTIC_FAIR_RUNS_H_
