// The benchmark tables of the fair-learning studies (Adult, Credit, Parkinsons), encoded for a
// linear learner the same way and split into train and test rows with a seeded split.
#ifndef FAIRVAULT_EXPERIMENTS_COMMON_DATASETS_H_
#define FAIRVAULT_EXPERIMENTS_COMMON_DATASETS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "Eigen/Dense"
#include "absl/status/statusor.h"

namespace fairvault::experiments {

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

// Adult: numeric age, education-num, capital-gain, capital-loss, hours-per-week; categorical
// workclass, education, marital-status, occupation, relationship, native-country; no sex, no
// race, no fnlwgt. Label: income > 50K. Train and test are the official adult.data and adult.test.
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

}  // namespace fairvault::experiments

#endif  // FAIRVAULT_EXPERIMENTS_COMMON_DATASETS_H_
