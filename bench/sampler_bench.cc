// Sampler throughput on the production generator (OS CSPRNG) and on a fast PRNG for contrast.
#include <random>

#include "bench/bench_main.h"
#include "benchmark/benchmark.h"
#include "core/dp/discrete_samplers.h"
#include "core/dp/integer_noise.h"
#include "core/learn/exponential_mechanism.h"
#include "core/random/chacha20_stream.h"
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

// The discrete Gaussian as a training job draws it: from the job's ChaCha20 stream.
void BM_DiscreteGaussianChaCha(benchmark::State& state) {
  ChaCha20Stream gen(ChaCha20Stream::Key{7});
  const double sigma = static_cast<double>(state.range(0));
  auto sigma2 = RationalAtLeast(sigma * sigma);
  int64_t sink = 0;
  for (auto _ : state) sink += SampleDiscreteGaussian(*sigma2, gen);
  benchmark::DoNotOptimize(sink);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_DiscreteGaussianChaCha)->Arg(300);

// The exponential-mechanism learner on 200 rows and J candidates (its utilities and its draw of
// 45·J proposals, each with the same fixed work), from a job's ChaCha20 stream.
void BM_ExponentialMechanism(benchmark::State& state) {
  const int candidates = static_cast<int>(state.range(0));
  learn::EmLearnerInput input;
  input.k = 2;
  for (int i = 0; i < 200; ++i) {
    input.y.push_back(i % 4 < 2 ? 1 : 0);
    input.group.push_back(i % 2);
  }
  for (int j = 0; j < candidates; ++j) {
    std::vector<uint8_t> h(200);
    for (int i = 0; i < 200; ++i) h[i] = (i * (j + 3)) % 5 < 2 ? 1 : 0;
    input.predictions.push_back(std::move(h));
  }
  auto noise = MakeDiscreteLaplaceNoise(1 / 40.0);
  ChaCha20Stream gen(ChaCha20Stream::Key{11});
  for (auto _ : state) {
    auto result = learn::ExponentialMechanismLearner(input, 40, 40, 0.01, **noise, gen);
    benchmark::DoNotOptimize(result);
  }
}
BENCHMARK(BM_ExponentialMechanism)->Arg(30)->Arg(300)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace fairvault::core::dp

int main(int argc, char** argv) {
  return fairvault::bench::BenchmarkMain(
      argc, argv,
      "Sampler throughput on the production generator (OS CSPRNG) and on a fast PRNG.");
}
