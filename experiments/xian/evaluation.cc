// How Xian et al.'s notebooks evaluate a run; see evaluation.h.
#include "experiments/xian/evaluation.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace fairvault::experiments::xian {

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

double MillisSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

}  // namespace fairvault::experiments::xian
