// Adult (adult.data, 32,561 rows) as the fair game sees it, for the learner benchmarks: the
// `train-logreg` encoding (numeric columns standardised, categorical ones one-hot, no sex or
// race), labels 1{>50K}, group = sex (0 Female, 1 Male).
#ifndef FAIRVAULT_BENCH_ADULT_GAME_H_
#define FAIRVAULT_BENCH_ADULT_GAME_H_

#include <string>
#include <vector>

#include "Eigen/Dense"
#include "absl/status/statusor.h"

namespace fairvault::bench {

struct AdultGame {
  Eigen::MatrixXd features;                // n x d, before the game's clipping and intercept
  std::vector<std::string> feature_names;  // "age", "workclass=Private", ...
  std::vector<int> labels;                 // 1 iff >50K
  std::vector<int> groups;                 // 0 Female, 1 Male
};

// $FAIRVAULT_DATASETS/adult/adult.data, default <source>/../shared/datasets/adult/adult.data.
std::string AdultDataPath();

absl::StatusOr<AdultGame> LoadAdultGame(const std::string& path);

// Loaded once per process; aborts if the file cannot be read.
const AdultGame& SharedAdultGame();

}  // namespace fairvault::bench

#endif  // FAIRVAULT_BENCH_ADULT_GAME_H_
