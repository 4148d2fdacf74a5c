// The two benchmarks of Xian et al. (2024) as the authors' notebooks read them: Law School
// (bar_pass_prediction.csv, or Kusner et al.'s law_data.csv) and Communities and Crime, each
// with its public score grid, its groups and the authors' reference numbers.
#ifndef FAIRVAULT_EXPERIMENTS_XIAN_BENCHMARKS_H_
#define FAIRVAULT_EXPERIMENTS_XIAN_BENCHMARKS_H_

#include <limits>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/postprocess/statistical_parity.h"

namespace fairvault::experiments::xian {

namespace pp = ::fairvault::core::postprocess;

inline constexpr double kInf = std::numeric_limits<double>::infinity();

// The privacy levels of the authors' notebooks (cell "Results and baselines for alpha = 0":
// epsilons = [np.inf, 10, 5, 1, 0.5, 0.1]); all but inf go through the vault.
const std::vector<double>& Epsilons();

// A reference result (mean ± population std over the 50 seeds) printed by the authors' code for
// exactly this setting. The paper itself prints no numbers for these runs: its Fig. 2 draws
// them as MSE-vs-KS curves (the alpha = 0 end of each curve); the numbers are the output the
// notebooks of github.com/rxian/fair-regression (commit 1b51ad7) store, cell "Results and
// baselines for alpha = 0", rows "binning + fair" (eps = inf), "binning + private and fair
// (eps=E)", "no postprocessing" and "binning". ALGORITHMS.md §2 quotes the same values.
struct RefRow {
  std::string method;  // "fair", "none", "binning"
  double epsilon;
  double mse, mse_std, ks, ks_std;
};

// One benchmark: the rows the vault holds (key, group) and the company's scores (= targets).
struct Benchmark {
  std::string name;       // dataset name in the vault, and the series name in the sweep
  std::string title;      // for the printed table
  std::string file;       // the data file, relative to the datasets folder
  std::string attribute;  // the protected attribute's name in the vault
  std::vector<std::string> categories;
  pp::ScoreGrid grid;
  // Empty when the setting differs from the authors' (another file): nothing to compare with.
  std::vector<RefRow> refs;
  std::string ref_source;
  std::vector<std::string> keys;
  std::vector<double> y;
  std::vector<int> group;
  std::vector<std::string> notes;  // data decisions and warnings, printed above the table
};

// Law School in the file the authors' code reads (law/bar_pass_prediction.csv, 22,407 rows):
// target ugpa on [1, 4], k = 36; group race1, keeping the rows in its four named groups asian,
// black, hisp, white (21,983 rows; race1 "other" and empty are dropped), exactly as law.ipynb
// does. The notebook's features (lsat, gender, race dummies, ...) only feed train_test_split,
// whose split depends on the row count alone, so they are not read.
absl::StatusOr<Benchmark> LoadLawBarPass(const std::string& dir);

// Law School in Kusner et al.'s extract (law/law_data.csv), kept for comparison with the
// earlier runs: target UGPA on [1, 4], k = 36; race in 4 groups: asian; black; hispanic =
// Hispanic + Mexican + Puertorican; white. Amerindian and Other are dropped. Not the authors'
// file (21,399 rows, other group sizes), so no reference numbers are printed.
absl::StatusOr<Benchmark> LoadLawKusner(const std::string& dir);

// Communities and Crime from the UCI file as published (communities/communities_uci.csv: a
// header added, '?' for missing values, ViolentCrimesPerPop continuous on [0, 1]), as
// communities.ipynb reads communities.data: all 1,994 rows (the notebook drops the columns
// with missing values, never rows), target ViolentCrimesPerPop on [0, 1], k = 12, group
// racepctblack > 0.06. As for Law, the features only feed train_test_split.
absl::StatusOr<Benchmark> LoadCommunities(const std::string& dir);

// Notes that hold for any benchmark: group sizes, values outside the public range, and a
// target that is not really continuous.
void DescribeData(Benchmark& b, bool drop_out_of_range);

}  // namespace fairvault::experiments::xian

#endif  // FAIRVAULT_EXPERIMENTS_XIAN_BENCHMARKS_H_
