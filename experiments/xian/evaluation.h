// How Xian et al.'s notebooks evaluate a run: sklearn's train/test split reproduced bit for
// bit, the test MSE (sampled, and averaged over the sampler) and the largest pairwise KS
// distance between the groups' outputs.
#ifndef FAIRVAULT_EXPERIMENTS_XIAN_EVALUATION_H_
#define FAIRVAULT_EXPERIMENTS_XIAN_EVALUATION_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/postprocess/statistical_parity.h"
#include "experiments/xian/benchmarks.h"

namespace fairvault::experiments::xian {

inline constexpr double kTestFraction = 0.3;

struct Split {
  std::vector<size_t> train, test;
};

// numpy's legacy RandomState(seed).permutation(n), bit for bit: MT19937 seeded with
// init_genrand(seed) (std::mt19937 is the same generator), then for i = n-1, ..., 1 swap i with
// j = random_interval(i), which draws 32-bit words masked to the smallest all-ones mask >= i
// until one is <= i (numpy's distributions.c). Checked against numpy 1.24 for n = 1994 and
// 21983, seeds 33, 57, 82.
std::vector<size_t> NumpyLegacyPermutation(size_t n, uint32_t seed);

// sklearn's train_test_split(..., test_size=0.3, random_state=seed) as the authors' notebooks
// call it (no stratification, so ShuffleSplit): the permutation above, its first
// ceil(0.3 n) entries are the test rows and the rest the train rows. The same rows as the
// authors' runs for the same seed.
Split PaperSplit(size_t n, uint32_t seed);

// Two-sample KS statistic sup_v |F_a(v) - F_b(v)| of the empirical CDFs (as scipy's ks_2samp:
// evaluated at every observed value, ties handled exactly).
double KsDistance(std::vector<double> a, std::vector<double> b);

double MaxPairwiseKs(const std::vector<double>& outputs, const std::vector<int>& groups,
                     int num_groups);

// The test MSE averaged over the sampler: mean over the test rows of
// Σ_l g_a[bin(y)][l] (v_l − y)², from the transport alone. It removes the draw-to-draw noise of
// the sampler, so that two implementations fitted on the same histogram give the same number,
// and runs differ only by their histogram noise.
double ExpectedMse(const pp::SpSolution& solution, const pp::ScoreGrid& grid,
                   const std::vector<double>& y, const std::vector<int>& groups);

// Mean squared error of outputs against y.
double Mse(const std::vector<double>& outputs, const std::vector<double>& y);

// Milliseconds from `start` to now.
double MillisSince(std::chrono::steady_clock::time_point start);

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

}  // namespace fairvault::experiments::xian

#endif  // FAIRVAULT_EXPERIMENTS_XIAN_EVALUATION_H_
