// A study's vault: a real fairvault-server on a temp SQLite file with a regulator and one
// company, the regulator's dataset and grant, the company's uploads, training jobs submitted
// and awaited through the client library, fair models applied to test rows, and the
// equalized-odds post-processor fitted in the vault or exactly and applied.
#ifndef FAIRVAULT_EXPERIMENTS_COMMON_VAULT_SESSION_H_
#define FAIRVAULT_EXPERIMENTS_COMMON_VAULT_SESSION_H_

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "Eigen/Dense"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/lib/client.h"
#include "experiments/common/datasets.h"
#include "fairvault/v1/fairvault.pb.h"
#include "tests/server_process.h"

namespace fairvault::experiments {

namespace v1 = ::fairvault::v1;

// Feature column names f0 .. f{d-1}, as the experiments upload them.
std::vector<std::string> FeatureNames(Eigen::Index d);

// A vault on a temp SQLite file with a regulator and one company account.
struct VaultSession {
  std::unique_ptr<testing::ServerProcess> server;
  std::unique_ptr<client::Client> regulator, company;
  std::string company_name;
};
absl::StatusOr<VaultSession> StartVault(const std::string& stem, const std::string& company);

// The regulator creates `dataset` with attribute `attribute` = categories, imports the subjects
// (keys[i] in category groups[i]) and grants the company `grant` epsilon with `delta` (0: pure
// releases only; Gaussian learners such as DP-FERMI need delta > 0).
absl::Status AddDataset(VaultSession& v, const std::string& dataset, const std::string& attribute,
                        const std::vector<std::string>& categories,
                        const std::vector<std::string>& keys, const std::vector<int>& groups,
                        double grant, double delta = 0);

// The company uploads numeric columns (columns[j][i] is row i of column names[j]); returns the
// table handle.
absl::StatusOr<std::string> UploadNumeric(VaultSession& v, const std::string& dataset,
                                          const std::vector<std::string>& keys,
                                          const std::vector<std::string>& names,
                                          const std::vector<std::vector<double>>& columns,
                                          size_t chunk_rows = 20000);

// Submits every request (at most `parallel` unfinished at a time), waits for each job and
// returns the fair models in request order; a job that ends FAILED or CANCELLED gives a
// FailedPrecondition naming it and its error (a submission or polling error ends the call).
// If `runs` is given, it receives per request the submission's response (its charge: the
// noise plan) and the job's last state (elapsed_seconds: the vault's own training time).
struct JobRun {
  v1::FitFairModelResponse submitted;
  v1::Job finished;
};
absl::StatusOr<std::vector<absl::StatusOr<v1::FairModel>>> RunJobs(
    VaultSession& v, const std::vector<v1::FitFairModelRequest>& reqs, int parallel = 8,
    std::vector<JobRun>* runs = nullptr);

// Each row's probability of a positive decision under a fair model applied locally with
// client/apply/model_apply (no group needed): a mixture's fraction of components deciding 1 (exact,
// no draws), a hypothesis column's 0/1 value, and a one-logit network's decision (0 or 1: a
// network decides deterministically, so its sigmoid is a score, not a decision probability).
absl::StatusOr<std::vector<double>> PositiveProbabilities(const v1::FairModel& model,
                                                          const Eigen::MatrixXd& x);

// An equalized-odds post-processor of 0/1 predictions (Jagielski et al. 2019 Alg. 1): per group
// (in the dataset's category order), P(Ỹ = 1 | Ŷ = 0) and P(Ỹ = 1 | Ŷ = 1).
using EoMixing = std::vector<std::pair<double, double>>;
// Fits it in the vault: FitEqualizedOddsPostProcessor on the table's 0/1 prediction and label
// columns, γ = 0, the default β and min_group_count = 0 (the paper's LP), one release of
// `epsilon` under idempotency key `key`. `categories` names the groups in order.
absl::StatusOr<EoMixing> FitEoPostProcessor(VaultSession& v, const std::string& key,
                                            const std::string& handle,
                                            const std::string& prediction_column,
                                            const std::string& label_column, double epsilon,
                                            const std::vector<std::string>& categories);
// The same LP on the exact counts of the rows' predictions (ε = ∞; core library, no vault).
absl::StatusOr<EoMixing> ExactEoPostProcessor(const std::vector<int>& prediction,
                                              const LabeledRows& rows);
// P(positive decision) of each row after post-processing its 0/1 prediction (needs the group).
std::vector<double> PostProcessedProbabilities(const EoMixing& mixing,
                                               const std::vector<int>& prediction,
                                               const std::vector<int>& group);

}  // namespace fairvault::experiments

#endif  // FAIRVAULT_EXPERIMENTS_COMMON_VAULT_SESSION_H_
