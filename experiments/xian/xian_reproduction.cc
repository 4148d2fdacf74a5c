// Reproduction of Xian, Li, Kamath, Zhao (2024) "Differentially private post-processing for fair
// regression", Sec. 4 / ALGORITHMS.md §2, against a real vault.
//
// Protocol (the paper's Sec. 4 "Setup" and its public code, github.com/rxian/fair-regression,
// law.ipynb and communities.ipynb): the scores are the true targets (s = y: the paper "access[es]
// the ground-truth responses and directly appl[ies] Algorithm 1"; its notebooks build the
// feature matrix only to pass it to train_test_split and fit no regressor); the splits are
// sklearn's train_test_split(test_size=0.3, random_state=seed) for seeds 33..82, reproduced
// exactly (numpy's legacy RandomState permutation); the post-processor is fitted on the train
// rows with k bins on the public range (Law k = 36 on [1, 4], Communities k = 12 on [0, 1]) and
// alpha = 0, for eps in {inf, 10, 5, 1, 0.5, 0.1}; the test MSE is mean (f(s, a) - y)^2 over the
// test rows and the violation is the max over pairs of groups of the two-sample KS distance
// between the groups' test outputs. Mean and (population) standard deviation over the seeds.
//
// The program plays both sides. As the regulator it starts the real fairvault-server on a temp
// SQLite file, creates one dataset per benchmark and imports each row's group under the key
// "<dataset>-<row>", and grants the company a budget. As the company it uploads the train rows
// (key, score) as a table and calls FitStatisticalParityPostProcessor for each finite eps;
// the regulator, who holds the test rows' groups, applies the released artifact to them and
// evaluates (the paper's f(s, a) on test data, with a floor-0 artifact as in the paper).
//
// eps = infinity cannot go through the vault (it refuses a non-finite epsilon), so those rows
// call the core library directly on the same split: exact histogram, the same solver, and the
// same sampler with a seeded generator.
//
// Usage: xian_reproduction [--datasets DIR] [--seeds N] [--first-seed S] [--quick]
//                          [--only law|communities] [--law-file bar_pass|law_data]
//                          [--out per_seed.csv] [--sweep sweep.csv] [--drop-out-of-range]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/lib/client.h"
#include "client/lib/csv.h"
#include "core/postprocess/statistical_parity.h"
#include "core/util/status_macros.h"
#include "tests/server_process.h"

#ifndef FAIRVAULT_SOURCE_DIR
#error "FAIRVAULT_SOURCE_DIR must be defined by the build"
#endif

namespace fairvault::experiments {
namespace {

namespace v1 = ::fairvault::v1;
namespace pp = ::fairvault::core::postprocess;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kTestFraction = 0.3;
// The authors' notebooks use random_state = 33, ..., 82 (seeds = range(33, 83)).
constexpr int kFirstPaperSeed = 33;
constexpr char kCompany[] = "xian-lab";
constexpr char kScoreColumn[] = "score";

// The privacy levels of the authors' notebooks (cell "Results and baselines for alpha = 0":
// epsilons = [np.inf, 10, 5, 1, 0.5, 0.1]); all but inf go through the vault.
const std::vector<double>& Epsilons() {
  static const auto* eps = new std::vector<double>{kInf, 10.0, 5.0, 1.0, 0.5, 0.1};
  return *eps;
}

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

struct Flags {
  std::string datasets = std::string(FAIRVAULT_SOURCE_DIR) + "/../shared/datasets";
  int seeds = 50;
  int first_seed = kFirstPaperSeed;
  bool quick = false;
  std::string only;
  // "bar_pass": law/bar_pass_prediction.csv, the file of the authors' code (default);
  // "law_data": law/law_data.csv, Kusner et al.'s extract (no reference numbers).
  std::string law_file = "bar_pass";
  std::string out = "xian_per_seed.csv";
  std::string sweep = "xian_sweep.csv";
  // Sensitivity check: drop the rows whose target lies outside the public range.
  bool drop_out_of_range = false;
};

// ---- Data -------------------------------------------------------------------------------

absl::StatusOr<double> ParseDouble(const std::string& text, const std::string& what) {
  double v;
  if (!absl::SimpleAtod(text, &v) || !std::isfinite(v)) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": '", text, "' is not a number"));
  }
  return v;
}

// A pandas export may start with an unnamed row-index column, which the CSV reader refuses: it
// is named "row" here.
absl::StatusOr<client::CsvTable> ReadIndexedCsv(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, client::ReadFileToString(path));
  if (!text.empty() && text[0] == ',') text.insert(0, "row");
  return client::ParseCsv(text, path);
}

// Law School in the file the authors' code reads (law/bar_pass_prediction.csv, 22,407 rows):
// target ugpa on [1, 4], k = 36; group race1, keeping the rows in its four named groups asian,
// black, hisp, white (21,983 rows; race1 "other" and empty are dropped), exactly as law.ipynb
// does. The notebook's features (lsat, gender, race dummies, ...) only feed train_test_split,
// whose split depends on the row count alone, so they are not read.
absl::StatusOr<Benchmark> LoadLawBarPass(const std::string& dir) {
  Benchmark b;
  b.file = "law/bar_pass_prediction.csv";
  const std::string path = dir + "/" + b.file;
  ASSIGN_OR_RETURN(client::CsvTable csv, ReadIndexedCsv(path));
  ASSIGN_OR_RETURN(size_t race_col, csv.ColumnIndex("race1"));
  ASSIGN_OR_RETURN(size_t ugpa_col, csv.ColumnIndex("ugpa"));
  // Group codes as np.unique orders the names in the notebook.
  const std::map<std::string, int> kGroup = {{"asian", 0}, {"black", 1}, {"hisp", 2}, {"white", 3}};
  b.name = "law";
  b.title = absl::StrCat("Law School (", b.file, "): target ugpa, group race1");
  b.attribute = "race";
  b.categories = {"asian", "black", "hisp", "white"};
  b.grid = pp::ScoreGrid{1.0, 4.0, 36};
  b.refs = {{"fair", kInf, 0.010439, 0.000494, 0.085150, 0.023165},
            {"fair", 10.0, 0.010451, 0.000481, 0.085540, 0.023160},
            {"fair", 5.0, 0.010466, 0.000470, 0.086038, 0.023252},
            {"fair", 1.0, 0.010634, 0.000645, 0.091368, 0.024884},
            {"fair", 0.5, 0.010909, 0.001103, 0.104694, 0.032631},
            {"fair", 0.1, 0.013972, 0.005009, 0.280689, 0.090332},
            {"none", kInf, 0.0, 0.0, 0.349900, 0.018699},
            {"binning", kInf, 0.000610, 0.000005, 0.349900, 0.018699}};
  b.ref_source = "law.ipynb";
  std::map<std::string, int> dropped;
  for (size_t r = 0; r < csv.rows.size(); ++r) {
    const std::string& race = csv.rows[r][race_col];
    auto it = kGroup.find(race);
    if (it == kGroup.end()) {
      ++dropped[race.empty() ? "(empty)" : race];
      continue;
    }
    ASSIGN_OR_RETURN(double ugpa,
                     ParseDouble(csv.rows[r][ugpa_col], absl::StrCat(path, " row ", r + 1)));
    b.keys.push_back(absl::StrCat("law-", r));
    b.y.push_back(ugpa);
    b.group.push_back(it->second);
  }
  std::vector<std::string> parts;
  int64_t total_dropped = 0;
  for (const auto& [race, count] : dropped) {
    parts.push_back(absl::StrCat(race, " ", count));
    total_dropped += count;
  }
  b.notes.push_back(absl::StrCat("rows: ", csv.rows.size(), " in the file; dropped ", total_dropped,
                                 " whose race1 is not one of the four named groups (",
                                 absl::StrJoin(parts, ", "), "), as law.ipynb does"));
  return b;
}

// Law School in Kusner et al.'s extract (law/law_data.csv), kept for comparison with the
// earlier runs: target UGPA on [1, 4], k = 36; race in 4 groups: asian; black; hispanic =
// Hispanic + Mexican + Puertorican; white. Amerindian and Other are dropped. Not the authors'
// file (21,399 rows, other group sizes), so no reference numbers are printed.
absl::StatusOr<Benchmark> LoadLawKusner(const std::string& dir) {
  Benchmark b;
  b.file = "law/law_data.csv";
  const std::string path = dir + "/" + b.file;
  ASSIGN_OR_RETURN(client::CsvTable csv, ReadIndexedCsv(path));
  ASSIGN_OR_RETURN(size_t race_col, csv.ColumnIndex("race"));
  ASSIGN_OR_RETURN(size_t ugpa_col, csv.ColumnIndex("UGPA"));
  const std::map<std::string, int> kGroup = {{"Asian", 0},   {"Black", 1},       {"Hispanic", 2},
                                             {"Mexican", 2}, {"Puertorican", 2}, {"White", 3}};
  b.name = "law";
  b.title = absl::StrCat("Law School (", b.file, ", Kusner et al.'s extract): target UGPA, group race");
  b.attribute = "race";
  b.categories = {"asian", "black", "hispanic", "white"};
  b.grid = pp::ScoreGrid{1.0, 4.0, 36};
  std::map<std::string, int> dropped;
  for (size_t r = 0; r < csv.rows.size(); ++r) {
    const std::string& race = csv.rows[r][race_col];
    auto it = kGroup.find(race);
    if (it == kGroup.end()) {
      ++dropped[race];
      continue;
    }
    ASSIGN_OR_RETURN(double ugpa,
                     ParseDouble(csv.rows[r][ugpa_col], absl::StrCat(path, " row ", r + 1)));
    // The first (unnamed) column is the row index of the distributed file.
    b.keys.push_back(absl::StrCat("law-", csv.rows[r][0]));
    b.y.push_back(ugpa);
    b.group.push_back(it->second);
  }
  std::vector<std::string> parts;
  int64_t total_dropped = 0;
  for (const auto& [race, count] : dropped) {
    parts.push_back(absl::StrCat(race, " ", count));
    total_dropped += count;
  }
  b.notes.push_back(absl::StrCat("rows: ", csv.rows.size(), " in the file; dropped ", total_dropped,
                                 " (", absl::StrJoin(parts, ", "),
                                 "); hispanic = Hispanic + Mexican + Puertorican"));
  b.notes.push_back(
      "not the file of the authors' code (law/bar_pass_prediction.csv): no reference numbers");
  return b;
}

// Communities and Crime from the UCI file as published (communities/communities_uci.csv: a
// header added, '?' for missing values, ViolentCrimesPerPop continuous on [0, 1]), as
// communities.ipynb reads communities.data: all 1,994 rows (the notebook drops the columns
// with missing values, never rows), target ViolentCrimesPerPop on [0, 1], k = 12, group
// racepctblack > 0.06. As for Law, the features only feed train_test_split.
absl::StatusOr<Benchmark> LoadCommunities(const std::string& dir) {
  Benchmark b;
  b.file = "communities/communities_uci.csv";
  const std::string path = dir + "/" + b.file;
  ASSIGN_OR_RETURN(client::CsvTable csv, ReadIndexedCsv(path));
  ASSIGN_OR_RETURN(size_t black_col, csv.ColumnIndex("racepctblack"));
  ASSIGN_OR_RETURN(size_t target_col, csv.ColumnIndex("ViolentCrimesPerPop"));
  b.name = "communities";
  b.title = absl::StrCat("Communities & Crime (", b.file,
                         "): target ViolentCrimesPerPop, group racepctblack > 0.06");
  b.attribute = "black_share";
  b.categories = {"le_6pct", "gt_6pct"};
  b.grid = pp::ScoreGrid{0.0, 1.0, 12};
  b.refs = {{"fair", kInf, 0.018486, 0.001028, 0.064075, 0.024100},
            {"fair", 10.0, 0.018441, 0.001079, 0.064352, 0.024214},
            {"fair", 5.0, 0.018396, 0.001102, 0.064654, 0.025137},
            {"fair", 1.0, 0.018106, 0.001894, 0.068496, 0.026381},
            {"fair", 0.5, 0.017691, 0.003149, 0.075991, 0.031572},
            {"fair", 0.1, 0.015489, 0.008970, 0.162784, 0.094371},
            {"none", kInf, 0.0, 0.0, 0.457663, 0.033567},
            {"binning", kInf, 0.000562, 0.000016, 0.449961, 0.035186}};
  b.ref_source = "communities.ipynb";
  for (size_t r = 0; r < csv.rows.size(); ++r) {
    const std::string where = absl::StrCat(path, " row ", r + 1);
    ASSIGN_OR_RETURN(double black, ParseDouble(csv.rows[r][black_col], where));
    ASSIGN_OR_RETURN(double target, ParseDouble(csv.rows[r][target_col], where));
    b.keys.push_back(absl::StrCat("communities-", r));
    b.y.push_back(target);
    b.group.push_back(black > 0.06 ? 1 : 0);
  }
  b.notes.push_back(absl::StrCat("rows: ", csv.rows.size(), " in the file, none dropped"));
  return b;
}

// Notes that hold for any benchmark: group sizes, values outside the public range, and a
// target that is not really continuous.
void DescribeData(Benchmark& b, bool drop_out_of_range) {
  if (drop_out_of_range) {
    size_t kept = 0;
    for (size_t i = 0; i < b.y.size(); ++i) {
      if (b.y[i] < b.grid.lo || b.y[i] > b.grid.hi) continue;
      b.keys[kept] = b.keys[i];
      b.y[kept] = b.y[i];
      b.group[kept] = b.group[i];
      ++kept;
    }
    b.notes.push_back(absl::StrCat("--drop-out-of-range: dropped ", b.y.size() - kept,
                                   " rows whose target is outside [", b.grid.lo, ", ", b.grid.hi,
                                   "]"));
    b.keys.resize(kept);
    b.y.resize(kept);
    b.group.resize(kept);
  }
  std::vector<int64_t> sizes(b.categories.size(), 0);
  for (int g : b.group) ++sizes[g];
  std::vector<std::string> parts;
  for (size_t g = 0; g < sizes.size(); ++g) {
    parts.push_back(absl::StrCat(b.categories[g], " ", sizes[g]));
  }
  b.notes.push_back(absl::StrCat("n = ", b.y.size(), "; groups: ", absl::StrJoin(parts, ", ")));
  int64_t below = 0, above = 0;
  std::map<double, int64_t> distinct;
  for (double v : b.y) {
    below += v < b.grid.lo;
    above += v > b.grid.hi;
    if (distinct.size() <= 1000) ++distinct[v];
  }
  if (below + above > 0) {
    b.notes.push_back(absl::StrCat(below, " targets below ", b.grid.lo, " and ", above, " above ",
                                   b.grid.hi,
                                   ": kept (the paper keeps every row); the post-processor "
                                   "clips them into the end bins, the MSE uses the true value"));
  }
  if (distinct.size() <= 2) {
    std::vector<std::string> values;
    for (const auto& [v, count] : distinct) values.push_back(absl::StrCat(v, " (", count, ")"));
    b.notes.push_back(absl::StrCat(
        "WARNING: the target takes only ", distinct.size(),
        " distinct values in this file: ", absl::StrJoin(values, ", "),
        ". The paper post-processes the continuous target; results are not comparable."));
  }
  // The vault snaps (s - lo) k / (hi - lo) to a bin edge within a few ulps; the authors' code
  // takes floor((s - lo) / w) with w = (hi - lo) / k. Count the rows the two bin differently.
  const double w = (b.grid.hi - b.grid.lo) / b.grid.k;
  int64_t differ = 0;
  for (double v : b.y) {
    const double x = std::floor((v - b.grid.lo) / w);
    const int paper_bin = static_cast<int>(std::clamp(x, 0.0, static_cast<double>(b.grid.k - 1)));
    differ += paper_bin != b.grid.Bin(v);
  }
  b.notes.push_back(absl::StrCat("rows binned differently by the vault and by the authors' ",
                                 "floor((s - lo) / w): ", differ));
}

// ---- Evaluation ---------------------------------------------------------------------------

struct Split {
  std::vector<size_t> train, test;
};

// numpy's legacy RandomState(seed).permutation(n), bit for bit: MT19937 seeded with
// init_genrand(seed) (std::mt19937 is the same generator), then for i = n-1, ..., 1 swap i with
// j = random_interval(i), which draws 32-bit words masked to the smallest all-ones mask >= i
// until one is <= i (numpy's distributions.c). Checked against numpy 1.24 for n = 1994 and
// 21983, seeds 33, 57, 82.
std::vector<size_t> NumpyLegacyPermutation(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  for (size_t i = n; i-- > 1;) {
    uint64_t mask = i;
    for (int shift = 1; shift <= 32; shift *= 2) mask |= mask >> shift;
    uint64_t j;
    do {
      j = static_cast<uint64_t>(gen()) & mask;
    } while (j > i);
    std::swap(order[i], order[j]);
  }
  return order;
}

// sklearn's train_test_split(..., test_size=0.3, random_state=seed) as the authors' notebooks
// call it (no stratification, so ShuffleSplit): the permutation above, its first
// ceil(0.3 n) entries are the test rows and the rest the train rows. The same rows as the
// authors' runs for the same seed.
Split PaperSplit(size_t n, uint32_t seed) {
  const std::vector<size_t> order = NumpyLegacyPermutation(n, seed);
  const size_t n_test = static_cast<size_t>(std::ceil(kTestFraction * static_cast<double>(n)));
  Split s;
  s.test.assign(order.begin(), order.begin() + n_test);
  s.train.assign(order.begin() + n_test, order.end());
  return s;
}

// Two-sample KS statistic sup_v |F_a(v) - F_b(v)| of the empirical CDFs (as scipy's ks_2samp:
// evaluated at every observed value, ties handled exactly).
double KsDistance(std::vector<double> a, std::vector<double> b) {
  if (a.empty() || b.empty()) return 0;
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  size_t i = 0, j = 0;
  double d = 0;
  while (i < a.size() && j < b.size()) {
    const double v = std::min(a[i], b[j]);
    while (i < a.size() && a[i] <= v) ++i;
    while (j < b.size() && b[j] <= v) ++j;
    d = std::max(d,
                 std::abs(static_cast<double>(i) / a.size() - static_cast<double>(j) / b.size()));
  }
  return d;
}

double MaxPairwiseKs(const std::vector<double>& outputs, const std::vector<int>& groups,
                     int num_groups) {
  std::vector<std::vector<double>> by_group(num_groups);
  for (size_t i = 0; i < outputs.size(); ++i) by_group[groups[i]].push_back(outputs[i]);
  double worst = 0;
  for (int a = 0; a < num_groups; ++a) {
    for (int b = a + 1; b < num_groups; ++b) {
      if (by_group[a].empty() || by_group[b].empty()) continue;
      worst = std::max(worst, KsDistance(by_group[a], by_group[b]));
    }
  }
  return worst;
}

// The test MSE averaged over the sampler: mean over the test rows of
// Σ_l g_a[bin(y)][l] (v_l − y)², from the transport alone. It removes the draw-to-draw noise of
// the sampler, so that two implementations fitted on the same histogram give the same number,
// and runs differ only by their histogram noise.
double ExpectedMse(const pp::SpSolution& solution, const pp::ScoreGrid& grid,
                   const std::vector<double>& y, const std::vector<int>& groups) {
  double sum = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    const int bin = grid.Bin(y[i]);
    const double* row = solution.transport[groups[i]].data() + static_cast<size_t>(bin) * grid.k;
    double total = 0, weighted = 0;
    for (int l = 0; l < grid.k; ++l) {
      if (!(row[l] > 0)) continue;
      const double d = grid.Center(l) - y[i];
      total += row[l];
      weighted += row[l] * d * d;
    }
    if (total > 0) {
      sum += weighted / total;
    } else {
      const double d = grid.Center(bin) - y[i];  // SampleFairScore's fallback
      sum += d * d;
    }
  }
  return y.empty() ? 0 : sum / static_cast<double>(y.size());
}

double Mse(const std::vector<double>& outputs, const std::vector<double>& y) {
  double sum = 0;
  for (size_t i = 0; i < y.size(); ++i) sum += (outputs[i] - y[i]) * (outputs[i] - y[i]);
  return y.empty() ? 0 : sum / static_cast<double>(y.size());
}

struct MeanStd {
  double mean = 0, std = 0;
};

// Mean and population standard deviation (ddof = 0, as numpy's default in the paper's code).
MeanStd Summarize(const std::vector<double>& v) {
  MeanStd s;
  if (v.empty()) return s;
  for (double x : v) s.mean += x;
  s.mean /= static_cast<double>(v.size());
  for (double x : v) s.std += (x - s.mean) * (x - s.mean);
  s.std = std::sqrt(s.std / static_cast<double>(v.size()));
  return s;
}

// One evaluated configuration for one seed.
struct SeedResult {
  // "fair" (Alg. 1), "fair_lp" (Alg. 1 on the GLPK LP, eps = inf only), "none" (raw targets),
  // "binning" (bin centres only).
  std::string method;
  double epsilon = kInf;
  std::string path;  // "vault", "core" or "local"
  double mse = 0, ks = 0;
  // ExpectedMse: the MSE averaged over the sampler's draws (the baselines: equal to mse).
  double mse_expected = 0;
  double objective = 0;
  int64_t clipped = 0;
  double fit_ms = 0, decide_ms = 0;
};

double MillisSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

std::string EpsilonText(double eps) { return std::isinf(eps) ? "inf" : absl::StrCat(eps); }

// ---- The vault ----------------------------------------------------------------------------

// The running server with the regulator's and the company's connections.
struct Vault {
  std::unique_ptr<testing::ServerProcess> server;
  std::unique_ptr<client::Client> regulator, company;
};

absl::StatusOr<Vault> StartVault() {
  Vault v;
  v.server = std::make_unique<testing::ServerProcess>(testing::TempDatabasePath("xian"));
  ASSIGN_OR_RETURN(std::string regulator_key, v.server->Bootstrap("regulator"));
  RETURN_IF_ERROR(v.server->Start());
  v.regulator = v.server->Connect(regulator_key);
  if (v.regulator == nullptr) return absl::InternalError("cannot connect as the regulator");
  v1::CreateAccountRequest account;
  account.set_name(kCompany);
  account.set_role(v1::ROLE_COMPANY);
  ASSIGN_OR_RETURN(auto created, v.regulator->CreateAccount(account));
  v.company = v.server->Connect(created.api_key());
  if (v.company == nullptr) return absl::InternalError("cannot connect as the company");
  return v;
}

// Regulator: the dataset, its subjects' groups, and a grant covering every fit of the run.
absl::Status LoadIntoVault(Vault& v, const Benchmark& b, double grant) {
  v1::CreateDatasetRequest dataset;
  dataset.set_name(b.name);
  v1::Attribute* attribute = dataset.add_attributes();
  attribute->set_name(b.attribute);
  for (const auto& c : b.categories) attribute->add_categories(c);
  RETURN_IF_ERROR(v.regulator->CreateDataset(dataset).status());

  v1::ImportHeader header;
  header.set_dataset(b.name);
  header.set_batch_id(absl::StrCat(b.name, "-all"));
  header.add_attributes(b.attribute);
  std::vector<std::string> categories;
  categories.reserve(b.keys.size());
  for (int g : b.group) categories.push_back(b.categories[g]);
  ASSIGN_OR_RETURN(auto imported, v.regulator->ImportAttributes(header, b.keys, categories));
  if (imported.subject_count() != static_cast<int64_t>(b.keys.size())) {
    return absl::InternalError(absl::StrCat("imported ", imported.subject_count(), " subjects, ",
                                            "expected ", b.keys.size()));
  }
  v1::GrantBudgetRequest budget;
  budget.set_company(kCompany);
  budget.set_dataset(b.name);
  budget.set_epsilon(grant);
  budget.set_delta(0);
  return v.regulator->GrantBudget(budget).status();
}

// Company: uploads the train rows (key, score) and returns the table handle.
absl::StatusOr<std::string> UploadTrain(Vault& v, const Benchmark& b, const Split& split,
                                        int seed) {
  v1::TableHeader header;
  header.set_dataset(b.name);
  header.set_label(absl::StrCat("xian ", b.name, " seed ", seed, " train"));
  v1::ColumnSpec* column = header.add_columns();
  column->set_name(kScoreColumn);
  column->set_type(v1::COLUMN_TYPE_NUMERIC);
  std::vector<std::string> keys;
  std::vector<v1::ColumnValues> columns(1);
  keys.reserve(split.train.size());
  columns[0].mutable_numeric()->Reserve(static_cast<int>(split.train.size()));
  for (size_t i : split.train) {
    keys.push_back(b.keys[i]);
    columns[0].add_numeric(b.y[i]);
  }
  ASSIGN_OR_RETURN(auto uploaded, v.company->UploadTable(header, keys, columns));
  if (uploaded.rows_in_vault() != static_cast<int64_t>(keys.size())) {
    return absl::InternalError(absl::StrCat("only ", uploaded.rows_in_vault(), " of ", keys.size(),
                                            " train keys are in the vault"));
  }
  return uploaded.table_handle();
}

// Company: fit through the vault; the regulator applies the artifact to the test rows.
absl::StatusOr<SeedResult> FitInVaultAndApply(Vault& v, const Benchmark& b, const Split& split,
                                              const std::string& table, int seed, double eps) {
  SeedResult r;
  r.method = "fair";
  r.epsilon = eps;
  r.path = "vault";
  v1::FitStatisticalParityRequest fit;
  fit.set_idempotency_key(absl::StrCat("xian-", b.name, "-seed", seed, "-eps", eps));
  fit.set_table_handle(table);
  fit.set_score_column(kScoreColumn);
  fit.set_lo(b.grid.lo);
  fit.set_hi(b.grid.hi);
  fit.set_bins(b.grid.k);
  fit.set_alpha(0);
  fit.set_epsilon(eps);
  fit.set_solver(v1::SP_SOLVER_AUTO);
  fit.set_unmatched(v1::UNMATCHED_KEYS_REJECT);
  auto start = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(v1::FitStatisticalParityResponse fitted,
                   v.company->FitStatisticalParityPostProcessor(fit));
  r.fit_ms = MillisSince(start);
  if (std::abs(fitted.charge().cost().epsilon() - eps) > 1e-9) {
    return absl::InternalError(
        absl::StrCat("charged epsilon ", fitted.charge().cost().epsilon(), " for a fit at ", eps));
  }
  r.objective = fitted.artifact().statistical_parity().objective();
  r.clipped = fitted.scores_clipped();

  // The regulator applies the released artifact to the test rows: it holds their groups.
  // (Decide, the vault's own decision path, refuses a post-processor fitted without a
  // decision floor: at floor 0 some decisions reveal a subject's group exactly.)
  pp::SpSolution transport;
  for (const auto& g : fitted.artifact().statistical_parity().groups()) {
    transport.transport.emplace_back(g.transport().begin(), g.transport().end());
  }
  std::seed_seq seq{static_cast<uint64_t>(seed), uint64_t{0xdec1de}};
  std::mt19937_64 gen(seq);
  std::vector<double> outputs, y_test;
  std::vector<int> g_test;
  start = std::chrono::steady_clock::now();
  for (size_t i : split.test) {
    outputs.push_back(pp::SampleFairScore(transport, b.grid, b.group[i], b.grid.Bin(b.y[i]), gen));
    y_test.push_back(b.y[i]);
    g_test.push_back(b.group[i]);
  }
  r.decide_ms = MillisSince(start);
  r.mse = Mse(outputs, y_test);
  r.mse_expected = ExpectedMse(transport, b.grid, y_test, g_test);
  r.ks = MaxPairwiseKs(outputs, g_test, static_cast<int>(b.categories.size()));
  return r;
}

// eps = infinity: the core library on the exact histogram of the same train rows, and the same
// sampler driven by a seeded generator.
// `solver` kAuto is what the vault uses (the quantile solver at alpha = 0); kLinearProgram is
// the §2 LP on GLPK, the paper's formulation, run as a cross-check of the solver choice.
absl::StatusOr<SeedResult> FitAndDecideExact(const Benchmark& b, const Split& split, int seed,
                                             pp::SpSolver solver) {
  SeedResult r;
  r.method = solver == pp::SpSolver::kLinearProgram ? "fair_lp" : "fair";
  r.epsilon = kInf;
  r.path = "core";
  const int num_groups = static_cast<int>(b.categories.size());
  std::vector<double> y_train;
  std::vector<int> g_train;
  for (size_t i : split.train) {
    y_train.push_back(b.y[i]);
    g_train.push_back(b.group[i]);
  }
  auto start = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(std::vector<int64_t> counts,
                   pp::HistogramCounts(y_train, g_train, num_groups, b.grid, &r.clipped));
  std::vector<double> masses(counts.size());
  for (size_t i = 0; i < counts.size(); ++i) {
    masses[i] = static_cast<double>(counts[i]) / static_cast<double>(y_train.size());
  }
  pp::SpOptions options;
  options.alpha = 0;
  options.solver = solver;
  ASSIGN_OR_RETURN(pp::SpSolution solution,
                   pp::SolveStatisticalParity(masses, num_groups, b.grid, options));
  r.fit_ms = MillisSince(start);
  r.objective = solution.objective;

  std::seed_seq seq{static_cast<uint64_t>(seed), uint64_t{0x5eed1e55}};
  std::mt19937_64 gen(seq);
  std::vector<double> outputs, y_test;
  std::vector<int> g_test;
  start = std::chrono::steady_clock::now();
  for (size_t i : split.test) {
    outputs.push_back(pp::SampleFairScore(solution, b.grid, b.group[i], b.grid.Bin(b.y[i]), gen));
    y_test.push_back(b.y[i]);
    g_test.push_back(b.group[i]);
  }
  r.decide_ms = MillisSince(start);
  r.mse = Mse(outputs, y_test);
  r.mse_expected = ExpectedMse(solution, b.grid, y_test, g_test);
  r.ks = MaxPairwiseKs(outputs, g_test, num_groups);
  return r;
}

// Baselines on the same test rows: the raw targets (no post-processing: MSE 0, the data's own
// KS), and the bin centres alone (the discretization error the fair rows cannot go below).
std::vector<SeedResult> Baselines(const Benchmark& b, const Split& split) {
  std::vector<double> y_test, centres;
  std::vector<int> g_test;
  for (size_t i : split.test) {
    y_test.push_back(b.y[i]);
    centres.push_back(b.grid.Center(b.grid.Bin(b.y[i])));
    g_test.push_back(b.group[i]);
  }
  const int num_groups = static_cast<int>(b.categories.size());
  SeedResult none;
  none.method = "none";
  none.path = "local";
  none.mse = 0;
  none.mse_expected = 0;
  none.ks = MaxPairwiseKs(y_test, g_test, num_groups);
  SeedResult binning;
  binning.method = "binning";
  binning.path = "local";
  binning.mse = Mse(centres, y_test);
  binning.mse_expected = binning.mse;
  binning.ks = MaxPairwiseKs(centres, g_test, num_groups);
  return {none, binning};
}

// ---- The run ------------------------------------------------------------------------------

struct BenchmarkRun {
  const Benchmark* benchmark;
  size_t n_train = 0, n_test = 0;
  std::vector<int> seeds;  // the random_state of each split, in order
  // (method, epsilon) -> per-seed results, in seed order.
  std::map<std::pair<std::string, double>, std::vector<SeedResult>> results;
  double seconds = 0;
};

absl::StatusOr<BenchmarkRun> Run(Vault& v, const Benchmark& b, int first_seed, int seeds) {
  BenchmarkRun run;
  run.benchmark = &b;
  const auto start = std::chrono::steady_clock::now();
  for (int seed = first_seed; seed < first_seed + seeds; ++seed) {
    const Split split = PaperSplit(b.y.size(), static_cast<uint32_t>(seed));
    run.n_train = split.train.size();
    run.n_test = split.test.size();
    run.seeds.push_back(seed);
    for (SeedResult& r : Baselines(b, split)) run.results[{r.method, r.epsilon}].push_back(r);
    ASSIGN_OR_RETURN(SeedResult exact, FitAndDecideExact(b, split, seed, pp::SpSolver::kAuto));
    run.results[{"fair", kInf}].push_back(exact);
    ASSIGN_OR_RETURN(SeedResult lp,
                     FitAndDecideExact(b, split, seed, pp::SpSolver::kLinearProgram));
    if (std::abs(lp.objective - exact.objective) > 1e-6) {
      return absl::InternalError(absl::StrCat("seed ", seed, ": the LP objective ", lp.objective,
                                              " differs from the quantile solver's ",
                                              exact.objective));
    }
    run.results[{"fair_lp", kInf}].push_back(lp);
    ASSIGN_OR_RETURN(std::string table, UploadTrain(v, b, split, seed));
    for (double eps : Epsilons()) {
      if (std::isinf(eps)) continue;
      ASSIGN_OR_RETURN(SeedResult r, FitInVaultAndApply(v, b, split, table, seed, eps));
      if (r.clipped != exact.clipped) {
        return absl::InternalError(absl::StrCat("the vault clipped ", r.clipped,
                                                " train scores, the core library ", exact.clipped));
      }
      run.results[{"fair", eps}].push_back(r);
    }
  }
  run.seconds = MillisSince(start) / 1000;
  std::fprintf(stderr, "%s: %d seeds done in %.1f s\n", b.name.c_str(), seeds, run.seconds);
  return run;
}

const RefRow* FindRef(const Benchmark& b, const std::string& method, double eps) {
  for (const RefRow& r : b.refs) {
    if (r.method == method && r.epsilon == eps) return &r;
  }
  return nullptr;
}

std::string FormatTable(const BenchmarkRun& run) {
  const Benchmark& b = *run.benchmark;
  const bool with_refs = !b.refs.empty();
  std::string out = absl::StrCat("== ", b.title, " ==\n");
  for (const auto& note : b.notes) absl::StrAppend(&out, "  ", note, "\n");
  const double width = (b.grid.hi - b.grid.lo) / b.grid.k;
  absl::StrAppendFormat(&out,
                        "  k = %d bins on [%g, %g] (w = %.6g, w^2/12 = %.6g), alpha = 0, scores = "
                        "true targets (s = y)\n",
                        b.grid.k, b.grid.lo, b.grid.hi, width, width * width / 12);
  absl::StrAppendFormat(&out,
                        "  %d seeds: sklearn train_test_split(test_size=0.3, random_state=%d..%d) "
                        "reproduced exactly: %d train / %d test rows\n",
                        run.seeds.size(), run.seeds.front(), run.seeds.back(), run.n_train,
                        run.n_test);
  absl::StrAppend(
      &out,
      "  mean ± std over seeds (std: population, seed-to-seed spread); eps = inf "
      "via the core library, the others fitted through the vault and applied by the regulator\n");
  if (with_refs) {
    absl::StrAppend(&out, "  authors' = the output stored in ", b.ref_source,
                    " of github.com/rxian/fair-regression (commit 1b51ad7), cell \"Results and "
                    "baselines for alpha = 0\": same file, rows, splits (random_state 33..82), k, "
                    "alpha and eps; the paper shows these runs only as the alpha = 0 ends of the "
                    "curves of its Fig. 2\n");
  }
  absl::StrAppend(&out, "\n");
  auto header = [&](const char* first) {
    absl::StrAppendFormat(&out, "  %-8s | %-19s | %-15s", first, "test MSE", "max pairwise KS");
    if (with_refs) absl::StrAppendFormat(&out, " | %-19s | %-13s", "authors' MSE", "authors' KS");
    absl::StrAppend(&out, "\n  ", std::string(8, '-'), "-+-", std::string(19, '-'), "-+-",
                    std::string(15, '-'));
    if (with_refs) {
      absl::StrAppend(&out, "-+-", std::string(19, '-'), "-+-", std::string(13, '-'));
    }
    absl::StrAppend(&out, "\n");
  };
  auto row = [&](const std::string& label, const std::string& method, double eps) {
    auto it = run.results.find({method, eps});
    if (it == run.results.end()) return;
    std::vector<double> mse, ks;
    for (const auto& r : it->second) {
      mse.push_back(r.mse);
      ks.push_back(r.ks);
    }
    const MeanStd m = Summarize(mse), k = Summarize(ks);
    absl::StrAppendFormat(&out, "  %-8s | %.5f ± %.5f   | %.3f ± %.3f  ", label, m.mean, m.std,
                          k.mean, k.std);
    if (const RefRow* ref = with_refs ? FindRef(b, method, eps) : nullptr; ref != nullptr) {
      absl::StrAppendFormat(&out, " | %.5f ± %.5f   | %.3f ± %.3f", ref->mse, ref->mse_std,
                            ref->ks, ref->ks_std);
    } else if (with_refs) {
      absl::StrAppend(&out, " | ", std::string(19, ' '), " |");
    }
    absl::StrAppend(&out, "\n");
  };
  header("eps");
  for (double eps : Epsilons()) row(EpsilonText(eps), "fair", eps);
  // The sampler-free MSE: what the sampled MSE above averages to over the sampler's draws,
  // given each seed's fitted transport. At eps = inf it is a deterministic function of the
  // split (comparable digit for digit with any implementation of the same algorithm).
  absl::StrAppend(&out, "\n  test MSE averaged over the sampler (E over the transport rows of "
                        "(v_L - y)^2), mean ± std over seeds:");
  for (double eps : Epsilons()) {
    auto it = run.results.find({"fair", eps});
    if (it == run.results.end()) continue;
    std::vector<double> e;
    for (const auto& r : it->second) e.push_back(r.mse_expected);
    const MeanStd m = Summarize(e);
    absl::StrAppendFormat(&out, "\n    eps=%-4s %.6f ± %.5f", EpsilonText(eps), m.mean, m.std);
  }
  absl::StrAppend(&out, "\n");
  absl::StrAppend(&out,
                  "\n  checks on the same test rows: eps = inf with the GLPK LP instead of the "
                  "quantile solver (same objective to 1e-6, same sampler seed); no "
                  "post-processing; bin centres only (the authors' \"binning\": alpha = 1):\n");
  header("check");
  row("inf, LP", "fair_lp", kInf);
  row("none", "none", kInf);
  row("binning", "binning", kInf);
  // Where the time goes, per call (fit and decide include the RPC for the vault rows).
  absl::StrAppend(&out, "\n  mean time per seed:");
  for (double eps : Epsilons()) {
    auto it = run.results.find({"fair", eps});
    if (it == run.results.end()) continue;
    double fit = 0, decide = 0;
    for (const auto& r : it->second) {
      fit += r.fit_ms;
      decide += r.decide_ms;
    }
    absl::StrAppendFormat(&out, " eps=%s fit %.1f ms + decide %.1f ms;", EpsilonText(eps),
                          fit / it->second.size(), decide / it->second.size());
  }
  absl::StrAppendFormat(&out, "\n  wall time for this dataset: %.1f s\n", run.seconds);
  return out;
}

absl::Status WriteCsvs(const std::vector<BenchmarkRun>& runs, const Flags& flags) {
  if (!flags.out.empty()) {
    std::vector<std::vector<std::string>> rows;
    for (const BenchmarkRun& run : runs) {
      for (const auto& [config, results] : run.results) {
        for (size_t i = 0; i < results.size(); ++i) {
          const SeedResult& r = results[i];
          rows.push_back({run.benchmark->name, absl::StrCat(run.seeds[i]), r.method, EpsilonText(r.epsilon),
                          r.path, absl::StrFormat("%.9g", r.mse), absl::StrFormat("%.9g", r.ks),
                          absl::StrFormat("%.9g", r.mse_expected),
                          absl::StrFormat("%.9g", r.objective), absl::StrCat(r.clipped),
                          absl::StrFormat("%.3f", r.fit_ms), absl::StrFormat("%.3f", r.decide_ms)});
        }
      }
    }
    RETURN_IF_ERROR(client::WriteStringToFile(
        flags.out, client::FormatCsv({"dataset", "seed", "method", "epsilon", "path", "mse", "ks",
                                      "mse_expected", "objective", "clipped", "fit_ms", "decide_ms"},
                                     rows)));
  }
  if (!flags.sweep.empty()) {
    // The trade-off sweep for `fairvault report sweep`: one point per (dataset, epsilon), the
    // means over the seeds, with a normal-approximation 95% confidence interval of each mean
    // (mean ± 1.96 std / sqrt(seeds)) in the optional interval columns.
    std::vector<std::vector<std::string>> rows;
    auto interval = [](const std::vector<double>& v) {
      const MeanStd m = Summarize(v);
      const double half = 1.96 * m.std / std::sqrt(static_cast<double>(v.size()));
      return std::vector<std::string>{absl::StrFormat("%.9g", m.mean - half),
                                      absl::StrFormat("%.9g", m.mean + half)};
    };
    for (const BenchmarkRun& run : runs) {
      for (double eps : Epsilons()) {
        auto it = run.results.find({"fair", eps});
        if (it == run.results.end()) continue;
        std::vector<double> mse, ks;
        for (const auto& r : it->second) {
          mse.push_back(r.mse);
          ks.push_back(r.ks);
        }
        const auto mse_ci = interval(mse), ks_ci = interval(ks);
        rows.push_back({EpsilonText(eps), absl::StrFormat("%.9g", Summarize(mse).mean),
                        absl::StrFormat("%.9g", Summarize(ks).mean), run.benchmark->name, mse_ci[0],
                        mse_ci[1], ks_ci[0], ks_ci[1]});
      }
    }
    RETURN_IF_ERROR(client::WriteStringToFile(
        flags.sweep, client::FormatCsv({"epsilon", "error", "violation", "series", "error_lo",
                                        "error_hi", "violation_lo", "violation_hi"},
                                       rows)));
  }
  return absl::OkStatus();
}

absl::StatusOr<Flags> ParseFlags(int argc, char** argv) {
  Flags flags;
  bool seeds_set = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    const size_t eq = arg.find('=');
    const bool has_inline = eq != std::string::npos;
    if (has_inline) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    }
    auto next = [&]() -> absl::StatusOr<std::string> {
      if (has_inline) return value;
      if (i + 1 >= argc) return absl::InvalidArgumentError(absl::StrCat(arg, " needs a value"));
      return std::string(argv[++i]);
    };
    if (arg == "--quick") {
      flags.quick = true;
    } else if (arg == "--drop-out-of-range") {
      flags.drop_out_of_range = true;
    } else if (arg == "--datasets") {
      ASSIGN_OR_RETURN(flags.datasets, next());
    } else if (arg == "--seeds") {
      ASSIGN_OR_RETURN(std::string text, next());
      if (!absl::SimpleAtoi(text, &flags.seeds) || flags.seeds < 1 || flags.seeds > 10000) {
        return absl::InvalidArgumentError(
            absl::StrCat("--seeds must be an integer in [1, 10000] (got '", text, "')"));
      }
      seeds_set = true;
    } else if (arg == "--first-seed") {
      ASSIGN_OR_RETURN(std::string text, next());
      if (!absl::SimpleAtoi(text, &flags.first_seed) || flags.first_seed < 0 ||
          flags.first_seed > 1000000) {
        return absl::InvalidArgumentError(
            absl::StrCat("--first-seed must be an integer in [0, 1000000] (got '", text, "')"));
      }
    } else if (arg == "--law-file") {
      ASSIGN_OR_RETURN(flags.law_file, next());
      if (flags.law_file != "bar_pass" && flags.law_file != "law_data") {
        return absl::InvalidArgumentError("--law-file must be 'bar_pass' or 'law_data'");
      }
    } else if (arg == "--only") {
      ASSIGN_OR_RETURN(flags.only, next());
      if (flags.only != "law" && flags.only != "communities") {
        return absl::InvalidArgumentError("--only must be 'law' or 'communities'");
      }
    } else if (arg == "--out") {
      ASSIGN_OR_RETURN(flags.out, next());
    } else if (arg == "--sweep") {
      ASSIGN_OR_RETURN(flags.sweep, next());
    } else if (arg == "--help" || arg == "-h") {
      return absl::CancelledError(
          "usage: xian_reproduction [--datasets DIR] [--seeds N] [--first-seed S] [--quick]\n"
          "         [--only law|communities] [--law-file bar_pass|law_data]\n"
          "         [--out per_seed.csv] [--sweep sweep.csv] [--drop-out-of-range]\n"
          "  --datasets    folder with law/ and communities/ (default: <repo>/../shared/datasets)\n"
          "  --seeds       splits (default 50; 3 with --quick), random_state S, S+1, ...\n"
          "  --first-seed  S (default 33: the authors' seeds are 33..82)\n"
          "  --law-file    bar_pass: law/bar_pass_prediction.csv, the authors' file (default);\n"
          "                law_data: law/law_data.csv, Kusner et al.'s extract (no reference)\n"
          "  --out         per-seed results CSV ('' to skip; default xian_per_seed.csv)\n"
          "  --sweep       sweep CSV for `fairvault report sweep` (default xian_sweep.csv)\n"
          "  --drop-out-of-range  drop rows whose target is outside the public range (a\n"
          "                sensitivity check; by default every row is kept, as in the paper)");
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag '", arg, "' (see --help)"));
    }
  }
  if (flags.quick && !seeds_set) flags.seeds = 3;
  return flags;
}

int Main(int argc, char** argv) {
  auto flags = ParseFlags(argc, argv);
  if (absl::IsCancelled(flags.status())) {
    std::printf("%s\n", std::string(flags.status().message()).c_str());
    return 0;
  }
  if (!flags.ok()) {
    std::fprintf(stderr, "xian_reproduction: %s\n", flags.status().ToString().c_str());
    return 2;
  }
  const auto start = std::chrono::steady_clock::now();
  std::vector<Benchmark> benchmarks;
  for (auto [name, load] :
       {std::make_pair("law", flags->law_file == "law_data" ? &LoadLawKusner : &LoadLawBarPass),
        std::make_pair("communities", &LoadCommunities)}) {
    if (!flags->only.empty() && flags->only != name) continue;
    auto b = load(flags->datasets);
    if (!b.ok()) {
      std::fprintf(stderr, "xian_reproduction: loading %s: %s\n", name,
                   b.status().ToString().c_str());
      return 1;
    }
    DescribeData(*b, flags->drop_out_of_range);
    benchmarks.push_back(*std::move(b));
  }

  auto vault = StartVault();
  if (!vault.ok()) {
    std::fprintf(stderr, "xian_reproduction: starting the vault: %s\n",
                 vault.status().ToString().c_str());
    return 1;
  }
  // Every fit of the run: seeds x (10 + 5 + 1 + 0.5 + 0.1), with room to spare.
  double per_seed = 0;
  for (double eps : Epsilons()) per_seed += std::isinf(eps) ? 0 : eps;
  const double grant = std::ceil(flags->seeds * per_seed) + 1;
  std::printf(
      "Xian et al. (2024) reproduction: %d seeds, eps in {inf, 10, 5, 1, 0.5, 0.1}, alpha = 0\n\n",
      flags->seeds);
  std::vector<BenchmarkRun> runs;
  for (const Benchmark& b : benchmarks) {
    if (auto s = LoadIntoVault(*vault, b, grant); !s.ok()) {
      std::fprintf(stderr, "xian_reproduction: loading %s into the vault: %s\n", b.name.c_str(),
                   s.ToString().c_str());
      return 1;
    }
    auto run = Run(*vault, b, flags->first_seed, flags->seeds);
    if (!run.ok()) {
      std::fprintf(stderr, "xian_reproduction: %s: %s\n", b.name.c_str(),
                   run.status().ToString().c_str());
      return 1;
    }
    std::string table = FormatTable(*run);
    v1::GetBudgetRequest budget_req;
    budget_req.set_dataset(b.name);
    auto budget = vault->company->GetBudget(budget_req);
    if (!budget.ok() || budget->budgets_size() != 1) {
      std::fprintf(stderr, "xian_reproduction: reading the budget on %s: %s\n", b.name.c_str(),
                   budget.status().ToString().c_str());
      return 1;
    }
    absl::StrAppendFormat(&table, "  company budget on '%s': %g of %g spent over %d releases\n\n",
                          b.name, budget->budgets(0).epsilon_spent(),
                          budget->budgets(0).epsilon_granted(), budget->budgets(0).releases());
    std::printf("%s", table.c_str());
    std::fflush(stdout);
    runs.push_back(*std::move(run));
  }
  if (auto s = WriteCsvs(runs, *flags); !s.ok()) {
    std::fprintf(stderr, "xian_reproduction: %s\n", s.ToString().c_str());
    return 1;
  }
  std::printf("total wall time: %.1f s\n", MillisSince(start) / 1000);
  return 0;
}

}  // namespace
}  // namespace fairvault::experiments

int main(int argc, char** argv) { return fairvault::experiments::Main(argc, argv); }
