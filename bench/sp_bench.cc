// Statistical-parity post-processor (ALGORITHMS.md §2) at the sizes the service targets: the
// joint histogram of 1M scores, and step 5 on k = 100 bins and K = 4 groups (40,000 coupling
// variables) with the GLPK LP and with the exact α = 0 quantile solver.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_main.h"
#include "benchmark/benchmark.h"
#include "core/postprocess/statistical_parity.h"

namespace fairvault::core::postprocess {
namespace {

constexpr int kGroups = 4;
constexpr int kBins = 100;

// Scores of four groups with shifted, differently spread bell shapes on [0, 1] (a few fall
// outside and are clipped), group sizes 40/30/20/10 %.
struct Population {
  std::vector<double> scores;
  std::vector<int> group;
};

Population MakePopulation(int n) {
  std::mt19937_64 rng(2024);
  std::discrete_distribution<int> pick({40, 30, 20, 10});
  Population pop;
  pop.scores.reserve(n);
  pop.group.reserve(n);
  for (int i = 0; i < n; ++i) {
    const int a = pick(rng);
    std::normal_distribution<double> score(0.3 + 0.12 * a, 0.1 + 0.03 * a);
    pop.scores.push_back(score(rng));
    pop.group.push_back(a);
  }
  return pop;
}

// Masses on `bins` bins as fractions of n of a 100,000-subject population (exact, no noise: the
// noise does not change the LP's size).
std::vector<double> Masses(int bins) {
  const int n = 100'000;
  const Population pop = MakePopulation(n);
  auto counts = HistogramCounts(pop.scores, pop.group, kGroups, ScoreGrid{0, 1, bins});
  std::vector<double> m(counts->size());
  for (size_t i = 0; i < counts->size(); ++i) m[i] = static_cast<double>((*counts)[i]) / n;
  return m;
}

void BM_SpHistogram1M(benchmark::State& state) {
  const Population pop = MakePopulation(1'000'000);
  const ScoreGrid grid{0, 1, kBins};
  int64_t clipped = 0;
  for (auto _ : state) {
    auto counts = HistogramCounts(pop.scores, pop.group, kGroups, grid, &clipped);
    benchmark::DoNotOptimize(counts);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(pop.scores.size()));
}
BENCHMARK(BM_SpHistogram1M)->Unit(benchmark::kMillisecond);

void Solve(benchmark::State& state, double alpha, SpSolver solver, int bins = kBins) {
  const ScoreGrid grid{0, 1, bins};
  const std::vector<double> masses = Masses(bins);
  SpOptions options;
  options.alpha = alpha;
  options.solver = solver;
  double objective = 0;
  for (auto _ : state) {
    auto solution = SolveStatisticalParity(masses, kGroups, grid, options);
    if (!solution.ok()) {
      state.SkipWithError(std::string(solution.status().message()).c_str());
      return;
    }
    objective = solution->objective;
  }
  state.counters["objective"] = objective;
}

// Arg: alpha in hundredths.
void BM_SpLp(benchmark::State& state) {
  Solve(state, static_cast<double>(state.range(0)) / 100, SpSolver::kLinearProgram);
}
BENCHMARK(BM_SpLp)->Arg(0)->Arg(10)->Unit(benchmark::kMillisecond);

void BM_SpQuantile(benchmark::State& state) { Solve(state, 0, SpSolver::kQuantile); }
BENCHMARK(BM_SpQuantile)->Unit(benchmark::kMillisecond);

// The LP (alpha = 0.1) by bins, up to its size limit: 4 groups x 316^2 = 399,424 of the 400,000
// coupling variables the service admits. A release's LP runs after its charge.
void BM_SpLpByBins(benchmark::State& state) {
  Solve(state, 0.1, SpSolver::kLinearProgram, static_cast<int>(state.range(0)));
}
BENCHMARK(BM_SpLpByBins)->Arg(100)->Arg(200)->Arg(316)->Unit(benchmark::kMillisecond)
    ->UseRealTime()->Iterations(1);

}  // namespace
}  // namespace fairvault::core::postprocess

int main(int argc, char** argv) {
  return fairvault::bench::BenchmarkMain(
      argc, argv,
      "The statistical-parity post-processor: the joint histogram of 1M scores and the LP and\n"
      "quantile solvers on k = 100 bins, K = 4 groups.");
}
