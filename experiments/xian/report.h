// A run's results: the table printed beside the authors' numbers, the per-seed CSV and the
// sweep CSV for `fairvault report sweep`.
#ifndef FAIRVAULT_EXPERIMENTS_XIAN_REPORT_H_
#define FAIRVAULT_EXPERIMENTS_XIAN_REPORT_H_

#include <cstddef>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "experiments/xian/benchmarks.h"
#include "experiments/xian/evaluation.h"

namespace fairvault::experiments::xian {

// Every seed of one benchmark.
struct BenchmarkRun {
  const Benchmark* benchmark;
  size_t n_train = 0, n_test = 0;
  std::vector<int> seeds;  // the random_state of each split, in order
  // (method, epsilon) -> per-seed results, in seed order.
  std::map<std::pair<std::string, double>, std::vector<SeedResult>> results;
  double seconds = 0;
};

// The benchmark's table: the fair rows at every epsilon beside the authors' (when the file is
// theirs), the sampler-free MSE, the checks (LP, no post-processing, binning) and the times.
std::string FormatTable(const BenchmarkRun& run);

// The per-seed CSV at `out` and the sweep CSV at `sweep` (means with 95% intervals per
// epsilon); an empty path skips its file.
absl::Status WriteCsvs(const std::vector<BenchmarkRun>& runs, const std::string& out,
                       const std::string& sweep);

}  // namespace fairvault::experiments::xian

#endif  // FAIRVAULT_EXPERIMENTS_XIAN_REPORT_H_
