// DP-FERMI in process (issue 10 §Evidence, speed): logistic regression on Adult (sex), the
// paper's defaults (200 epochs, batch 1,024), with the real discrete Gaussian noise at the
// multiplier the vault would use for epsilon 1 (delta 1e-5; Wang-Balle-Kasiviswanathan Thm 9),
// drawn from a ChaCha20 stream as a job draws it; and a one-hidden-layer MLP (32 units) for its
// time per epoch. The floor beside each: plain non-private mini-batch training of the same model
// in the same Eigen code (core/learn/network) over the same batches and epochs.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <vector>

#include "Eigen/Dense"
#include "absl/random/distributions.h"
#include "bench/adult_game.h"
#include "bench/bench_main.h"
#include "benchmark/benchmark.h"
#include "core/accounting/subsampled_rdp.h"
#include "core/dp/integer_noise.h"
#include "core/learn/network.h"
#include "core/learn/stochastic_fair.h"
#include "core/random/chacha20_stream.h"

namespace fairvault::bench {
namespace {

namespace learn = core::learn;

const learn::StochasticData& AdultData() {
  static const learn::StochasticData* data = [] {
    const AdultGame& adult = SharedAdultGame();
    auto* d = new learn::StochasticData;
    d->k = 2;
    d->classes = 2;
    d->x.resize(adult.features.rows(), adult.features.cols() + 1);
    d->x.leftCols(adult.features.cols()) = adult.features;
    d->x.col(adult.features.cols()).setOnes();
    d->y = adult.labels;
    d->group = adult.groups;
    return d;
  }();
  return *data;
}

std::vector<double> Marginals(const learn::StochasticData& data) {
  double male = 0;
  for (int g : data.group) male += g;
  male /= static_cast<double>(data.group.size());
  return {1 - male, male};
}

// DP-FERMI with the real discrete Gaussian noise, range(0) epochs, range(1) hidden units (0: the
// logistic regression).
void BM_AdultDpFermi(benchmark::State& state) {
  const learn::StochasticData& data = AdultData();
  learn::FermiOptions options;
  options.epochs = static_cast<int>(state.range(0));
  options.lambda = 1;
  learn::NetworkShape shape{static_cast<int>(data.x.cols()), {}, 1};
  if (state.range(1) > 0) shape.hidden = {static_cast<int>(state.range(1))};
  const int64_t n = data.n();
  const int64_t steps = learn::StochasticSteps(n, options.epochs, options.batch_size);
  const double gamma = static_cast<double>(options.batch_size) / static_cast<double>(n);
  auto sigma = core::accounting::CalibrateSubsampledGaussianSigma(0.9, 1e-5, 1.0, gamma, steps);
  if (!sigma.ok()) std::abort();
  auto plan = learn::PlanDpFermi(shape, 2, n, options, std::sqrt(2.0) * *sigma);
  if (!plan.ok()) std::abort();
  const learn::NoiseFactory noise = [](double std_steps) {
    return core::dp::MakeDiscreteGaussianNoise(std_steps);
  };
  const std::vector<double> marginals = Marginals(data);
  core::ChaCha20Stream::Key key{};
  for (auto _ : state) {
    core::ChaCha20Stream stream(key);
    learn::Network net(shape);
    net.Initialize(stream);
    if (!learn::TrainDpFermi(data, marginals, options, *plan, noise, stream, nullptr, &net, nullptr)
             .ok()) {
      std::abort();
    }
    benchmark::DoNotOptimize(net.params().data());
  }
  state.counters["steps"] = static_cast<double>(steps);
  state.counters["params"] = static_cast<double>(shape.NumParams());
  state.counters["s_per_epoch"] = benchmark::Counter(
      static_cast<double>(options.epochs) * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_AdultDpFermi)
    ->Args({200, 0})
    ->Args({20, 32})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(2);

// The floor: non-private mini-batch logistic regression (or MLP) in the same Network code over
// the same batches (fixed-size, drawn without replacement): the loss gradient only, no ψ terms,
// no clipping, no noise.
void BM_AdultPlainMinibatch(benchmark::State& state) {
  const learn::StochasticData& data = AdultData();
  const int epochs = static_cast<int>(state.range(0));
  learn::NetworkShape shape{static_cast<int>(data.x.cols()), {}, 1};
  if (state.range(1) > 0) shape.hidden = {static_cast<int>(state.range(1))};
  const int64_t n = data.n(), b = 1024;
  const int64_t steps = learn::StochasticSteps(n, epochs, static_cast<int>(b));
  std::vector<int64_t> perm(n);
  std::vector<int> labels(b);
  learn::RowMatrix zero = learn::RowMatrix::Zero(b, 2);
  core::ChaCha20Stream::Key key{};
  for (auto _ : state) {
    core::ChaCha20Stream stream(key);
    std::iota(perm.begin(), perm.end(), 0);
    learn::Network net(shape);
    net.Initialize(stream);
    Eigen::VectorXd grad(shape.NumParams());
    for (int64_t step = 0; step < steps; ++step) {
      for (int64_t t = 0; t < b; ++t) {
        std::swap(perm[t], perm[t + absl::Uniform<int64_t>(stream, 0, n - t)]);
        labels[t] = data.y[perm[t]];
      }
      net.Forward(data.x, absl::MakeConstSpan(perm.data(), static_cast<size_t>(b)));
      grad.setZero();
      net.AddExactGradient(zero, labels, &grad);
      net.params() -= (0.005 / static_cast<double>(b)) * grad;
    }
    benchmark::DoNotOptimize(net.params().data());
  }
}
BENCHMARK(BM_AdultPlainMinibatch)
    ->Args({200, 0})
    ->Args({20, 32})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(2);

}  // namespace
}  // namespace fairvault::bench

int main(int argc, char** argv) {
  return fairvault::bench::BenchmarkMain(
      argc, argv,
      "DP-FERMI in process on Adult at the paper's defaults, with the vault's discrete Gaussian\n"
      "noise, beside plain mini-batch logistic regression over the same batches.");
}
