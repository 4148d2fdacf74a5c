// DP-FERMI in process (issue 10 §Evidence, speed): logistic regression on Adult (sex), the
// paper's defaults (200 epochs, batch 1,024), with the real discrete Gaussian noise at the
// multiplier the vault would use for epsilon 1 (delta 1e-5; Wang-Balle-Kasiviswanathan Thm 9),
// drawn from a ChaCha20 stream as a job draws it. The floor beside it: a plain non-private
// mini-batch logistic regression in the same Eigen code over the same batches and epochs.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <vector>

#include "Eigen/Dense"
#include "absl/random/distributions.h"
#include "bench/adult_game.h"
#include "benchmark/benchmark.h"
#include "core/accounting/subsampled_rdp.h"
#include "core/dp/integer_noise.h"
#include "core/learn/dp_fermi.h"
#include "core/random/chacha20_stream.h"

namespace fairvault::bench {
namespace {

namespace learn = core::learn;

const learn::FermiData& AdultFermi() {
  static const learn::FermiData* data = [] {
    const AdultGame& adult = SharedAdultGame();
    auto* d = new learn::FermiData;
    d->k = 2;
    d->x.resize(adult.features.rows(), adult.features.cols() + 1);
    d->x.leftCols(adult.features.cols()) = adult.features;
    d->x.col(adult.features.cols()).setOnes();
    d->y = adult.labels;
    d->group = adult.groups;
    double male = 0;
    for (int g : d->group) male += g;
    male /= static_cast<double>(d->group.size());
    d->marginals = {1 - male, male};
    return d;
  }();
  return *data;
}

void BM_AdultDpFermi(benchmark::State& state) {
  const learn::FermiData& data = AdultFermi();
  learn::FermiOptions options;
  options.epochs = static_cast<int>(state.range(0));
  options.lambda = 1;
  const int64_t n = data.x.rows();
  const int64_t steps = learn::FermiSteps(n, options);
  const double gamma = static_cast<double>(options.batch_size) / static_cast<double>(n);
  auto sigma = core::accounting::CalibrateSubsampledGaussianSigma(0.9, 1e-5, 1.0, gamma, steps);
  if (!sigma.ok()) std::abort();
  auto plan =
      learn::PlanFermiNoise(static_cast<int>(data.x.cols()), 2, options, std::sqrt(2.0) * *sigma);
  if (!plan.ok()) std::abort();
  auto noise_theta = core::dp::MakeDiscreteGaussianNoise(plan->std_theta_steps);
  auto noise_w = core::dp::MakeDiscreteGaussianNoise(plan->std_w_steps);
  if (!noise_theta.ok() || !noise_w.ok()) std::abort();
  core::ChaCha20Stream::Key key{};
  for (auto _ : state) {
    core::ChaCha20Stream stream(key);
    auto theta = learn::TrainDpFermiLogistic(data, options, *plan, **noise_theta, **noise_w, stream,
                                             nullptr);
    if (!theta.ok()) std::abort();
    benchmark::DoNotOptimize(theta->data());
  }
  state.counters["steps"] = static_cast<double>(steps);
}
BENCHMARK(BM_AdultDpFermi)->Arg(200)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(2);

// The floor: non-private mini-batch logistic regression, the same batches (fixed-size, drawn
// without replacement) and per-row gradients, no ψ terms and no noise.
void BM_AdultPlainMinibatchLogistic(benchmark::State& state) {
  const learn::FermiData& data = AdultFermi();
  const int epochs = static_cast<int>(state.range(0));
  const int64_t n = data.x.rows(), b = 1024;
  const int64_t steps = static_cast<int64_t>(epochs) * ((n + b - 1) / b);
  std::vector<int64_t> perm(n);
  core::ChaCha20Stream::Key key{};
  for (auto _ : state) {
    core::ChaCha20Stream stream(key);
    std::iota(perm.begin(), perm.end(), 0);
    Eigen::VectorXd theta = Eigen::VectorXd::Zero(data.x.cols());
    Eigen::VectorXd grad(data.x.cols());
    for (int64_t step = 0; step < steps; ++step) {
      for (int64_t t = 0; t < b; ++t) {
        std::swap(perm[t], perm[t + absl::Uniform<int64_t>(stream, 0, n - t)]);
      }
      grad.setZero();
      for (int64_t t = 0; t < b; ++t) {
        const auto x = data.x.row(perm[t]).transpose();
        const double s = 1 / (1 + std::exp(-x.dot(theta)));
        grad.noalias() += (s - data.y[perm[t]]) * x;
      }
      theta -= (0.005 / static_cast<double>(b)) * grad;
    }
    benchmark::DoNotOptimize(theta.data());
  }
}
BENCHMARK(BM_AdultPlainMinibatchLogistic)
    ->Arg(200)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(2);

}  // namespace
}  // namespace fairvault::bench

BENCHMARK_MAIN();
