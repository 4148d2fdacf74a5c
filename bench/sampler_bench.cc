// Sampler throughput on the production generator (OS CSPRNG) and on a fast PRNG for contrast.
#include <random>

#include "bench/bench_main.h"
#include "benchmark/benchmark.h"
#include "core/dp/discrete_samplers.h"
#include "core/random/secure_bitgen.h"

namespace fairvault::core::dp {
namespace {

template <typename Gen>
void BM_DiscreteLaplace(benchmark::State& state) {
  Gen gen;
  auto scale = RationalAtLeast(static_cast<double>(state.range(0)));
  int64_t sink = 0;
  for (auto _ : state) sink += SampleDiscreteLaplace(*scale, gen);
  benchmark::DoNotOptimize(sink);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK_TEMPLATE(BM_DiscreteLaplace, SecureBitGen)->Arg(2)->Arg(20)->Arg(2000);
BENCHMARK_TEMPLATE(BM_DiscreteLaplace, std::mt19937_64)->Arg(2);

void BM_DiscreteGaussian(benchmark::State& state) {
  SecureBitGen gen;
  const double sigma = static_cast<double>(state.range(0));
  auto sigma2 = RationalAtLeast(sigma * sigma);
  int64_t sink = 0;
  for (auto _ : state) sink += SampleDiscreteGaussian(*sigma2, gen);
  benchmark::DoNotOptimize(sink);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_DiscreteGaussian)->Arg(3)->Arg(300);

}  // namespace
}  // namespace fairvault::core::dp

int main(int argc, char** argv) {
  return fairvault::bench::BenchmarkMain(
      argc, argv,
      "Sampler throughput on the production generator (OS CSPRNG) and on a fast PRNG.");
}
