// Shared pieces of the fair-learning experiments (jagielski_fig1, em_adult, fair_game_rpc,
// stochastic_fair_repro, tradeoff_adult): the benchmark tables (Adult, Credit, Parkinsons) encoded
// for a linear learner, a vault session on a real fairvault-server, training jobs submitted and
// awaited through the client library, fair models and the equalized-odds post-processor applied
// to test rows, and the metrics of a classifier's decisions and of a randomized classifier.
#ifndef FAIRVAULT_EXPERIMENTS_FAIR_LEARNING_COMMON_H_
#define FAIRVAULT_EXPERIMENTS_FAIR_LEARNING_COMMON_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "Eigen/Dense"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/lib/client.h"
#include "fairvault/v1/fairvault.pb.h"
#include "tests/server_process.h"

namespace fairvault::experiments {

namespace v1 = ::fairvault::v1;

// Rows of features (the company's), 0/1 labels and 0/1 groups (the regulator's).
struct LabeledRows {
  Eigen::MatrixXd x;
  std::vector<int> y;
  std::vector<int> group;
};

// A benchmark table prepared for a fair learner: the company's encoded features and labels and
// the regulator's groups, split into train and test rows. Every loader encodes the same way:
// numeric columns standardised with the train rows' mean and (population) std, categorical ones
// one-hot on the values seen in the train rows (a test value never seen: all zeros); the
// protected attribute is never a feature. Groups: 0 Female, 1 Male.
struct FairDataset {
  std::string name;                     // as LoadFairDataset takes it
  std::string attribute = "sex";        // the protected attribute's name in the vault
  std::vector<std::string> categories;  // group names by id: {"Female", "Male"}
  LabeledRows train, test;
  std::vector<std::string> feature_names;
  std::string description;  // file, label, features and split, for the result tables
};
using AdultData = FairDataset;

// Adult as eo_scores_adult.cc encodes it: numeric age, education-num, capital-gain,
// capital-loss, hours-per-week; categorical workclass, education, marital-status, occupation,
// relationship, native-country; no sex, no race, no fnlwgt. Label: income > 50K. Train and test
// are the official adult.data and adult.test.
absl::StatusOr<AdultData> LoadAdult(const std::string& datasets_dir);

// UCI Default of Credit Card Clients (credit/UCI_Credit_Card.csv) with the DP-FERMI authors'
// column roles: numeric LIMIT_BAL, AGE, BILL_AMT1-6, PAY_AMT1-6; categorical EDUCATION,
// MARRIAGE, PAY_0, PAY_2-6; no ID, no SEX (1 Male, 2 Female). Label: default.payment.next.month.
// Rows with a missing number are dropped (this copy has AGE 'nan' twice); test: 25% of the others
// (SplitIndices with `split_seed`).
absl::StatusOr<FairDataset> LoadCreditCard(const std::string& datasets_dir, uint64_t split_seed);

// UCI Parkinsons Telemonitoring (parkinsons/parkinsons_updrs.csv). Label: total_UPDRS above the
// median of all 5,875 rows. Features, all numeric: age, test_time, the 16 voice measures and,
// if `motor_updrs`, motor_UPDRS (the DP-FERMI authors' processed file keeps it, and it nearly
// determines total_UPDRS); no subject#, no sex (0 Male, 1 Female), no total_UPDRS. Test: 25% of
// the rows (SplitIndices with `split_seed`; a subject's recordings fall on both sides, as in the
// authors' row split).
absl::StatusOr<FairDataset> LoadParkinsons(const std::string& datasets_dir, uint64_t split_seed,
                                           bool motor_updrs);

// By name: adult, credit, parkinsons (with motor_UPDRS) or parkinsons_no_motor.
absl::StatusOr<FairDataset> LoadFairDataset(const std::string& name,
                                            const std::string& datasets_dir, uint64_t split_seed);

// A seeded split of the indices 0..n-1: a Fisher-Yates permutation drawn from
// std::mt19937_64(seed) with client::DrawComponent (the same split on every platform); the first
// round(n · second_fraction) indices of the permutation form the second part. Both parts come
// back in increasing order.
std::pair<std::vector<int>, std::vector<int>> SplitIndices(int n, double second_fraction,
                                                           uint64_t seed);
// The rows `indices` of `rows`, in that order.
LabeledRows TakeRows(const LabeledRows& rows, const std::vector<int>& indices);

// Metrics of hard decisions pred[i] ∈ 0..classes-1 against labels y[i] and groups group[i]:
// error; demographic-parity violation, the largest |P(ŷ = c | g1) − P(ŷ = c | g2)| over predicted
// classes c and pairs of groups; equalized-odds violation, the same among the rows of each true
// label, largest over labels; and the rate of ŷ = 1. Groups without rows are skipped.
struct DecisionMetrics {
  double error = 0, dp_violation = 0, eo_violation = 0, positive_rate = 0;
};
DecisionMetrics ScoreDecisions(const std::vector<int>& pred, const std::vector<int>& y,
                               const std::vector<int>& group, int classes = 2);

// Test-set metrics of a randomized classifier from each row's probability of a positive
// decision p_i: expected error mean |p_i − y_i|, equalized-odds violation
// max_y |mean_{a=0,y} p − mean_{a=1,y} p| and demographic-parity violation
// |mean_{a=0} p − mean_{a=1} p| (two groups; for a 0/1 decision the max over ŷ of the gap).
struct Metrics {
  double error = 0, violation = 0;  // violation: equalized odds
  double dp_violation = 0;
};
Metrics ExpectedMetrics(const std::vector<double>& p, const std::vector<int>& y,
                        const std::vector<int>& group);

struct MeanStd {
  double mean = 0, std = 0;  // population std, as numpy's default
};
MeanStd Summarize(const std::vector<double>& v);
// Feature column names f0 .. f{d-1}, as the experiments upload them.
std::vector<std::string> FeatureNames(Eigen::Index d);
std::string EpsilonText(double eps);

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
// client/model_apply (no group needed): a mixture's fraction of components deciding 1 (exact,
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

#endif  // FAIRVAULT_EXPERIMENTS_FAIR_LEARNING_COMMON_H_
