// The fair game in process (issue 9 §5 speed targets), beside its physical floors:
// - the DP-oracle learner on Adult (32,561 rows, sex) with T = 1,000 rounds: target < 5 s;
// - one least-squares best response on 1M rows x 50 features (synthetic): target < 1 s;
// - the floors: one pass over the n x d matrix (X·w) and XᵀX alone.
// Real discrete Laplace noise, drawn from a ChaCha20 stream as a job draws it.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <vector>

#include "Eigen/Dense"
#include "bench/bench_main.h"
#include "benchmark/benchmark.h"
#include "bench/adult_game.h"
#include "core/accounting/accountant.h"
#include "core/dp/integer_noise.h"
#include "core/learn/fair_game.h"
#include "core/learn/reductions.h"
#include "core/learn/selection.h"
#include "core/random/chacha20_stream.h"

namespace fairvault::bench {
namespace {

namespace learn = core::learn;

constexpr int kRounds = 1000;
constexpr int64_t kBigRows = 1'000'000;
constexpr int kBigFeatures = 50;

learn::NoiseFactory Laplace() {
  return [](double scale) { return core::dp::MakeDiscreteLaplaceNoise(scale); };
}

template <typename T>
T OrDie(absl::StatusOr<T> v) {
  if (!v.ok()) {
    std::fprintf(stderr, "%s\n", v.status().ToString().c_str());
    std::abort();
  }
  return *std::move(v);
}

// The job's plan for a total epsilon (as FitFairModel computes it): 10% on the masses, the rest
// calibrated over the 2T per-round releases.
learn::LearnerPlan PlanFor(double epsilon, double delta, int rounds) {
  const double masses = 0.1 * epsilon;
  const int64_t micro = OrDie(core::accounting::EpsilonToMicro(epsilon));
  const std::vector<core::accounting::PureDpRepetition> fixed = {{masses, 1}};
  return {masses,
          OrDie(core::accounting::CalibrateRepeatedPureDp(micro, delta, fixed, 2 * rounds))};
}

learn::LearnerOptions AdultOptions() {
  learn::LearnerOptions options;
  options.rounds = kRounds;
  options.lambda_bound = 10;
  options.learning_rate = 1;
  options.gamma = 0.02;
  return options;
}

// ---- Adult, the DP-oracle learner -------------------------------------------------------------

void BM_AdultBuildGameData(benchmark::State& state) {
  const AdultGame& adult = SharedAdultGame();
  for (auto _ : state) {
    auto data = learn::BuildGameData(adult.features, adult.labels, adult.groups, 2, 0, true);
    if (!data.ok()) state.SkipWithError("BuildGameData failed");
    benchmark::DoNotOptimize(data);
  }
  state.counters["rows"] = static_cast<double>(adult.features.rows());
  state.counters["features"] = static_cast<double>(adult.features.cols() + 1);
}
BENCHMARK(BM_AdultBuildGameData)->Unit(benchmark::kMillisecond)->UseRealTime();

// The whole learner: BuildGameData (XᵀX factorized once) and T = 1,000 rounds.
void BM_AdultDpOracleLearner(benchmark::State& state) {
  const AdultGame& adult = SharedAdultGame();
  const learn::LearnerPlan plan = PlanFor(/*epsilon=*/10, /*delta=*/1e-6, kRounds);
  core::ChaCha20Stream stream(core::ChaCha20Stream::Key{1, 2, 3, 4, 5, 6, 7, 8});
  for (auto _ : state) {
    auto data = learn::BuildGameData(adult.features, adult.labels, adult.groups, 2, 0, true);
    if (!data.ok()) {
      state.SkipWithError("BuildGameData failed");
      return;
    }
    auto result = learn::RunDpOracleLearner(*data, AdultOptions(), plan, Laplace(), stream, {});
    if (!result.ok() || result->components.size() != kRounds) {
      state.SkipWithError(result.status().ToString().c_str());
      return;
    }
  }
  state.counters["rounds"] = kRounds;
}
BENCHMARK(BM_AdultDpOracleLearner)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);

// The rounds alone (the game's data built outside the timed loop).
void BM_AdultDpOracleRounds(benchmark::State& state) {
  const AdultGame& adult = SharedAdultGame();
  const learn::LearnerPlan plan = PlanFor(10, 1e-6, kRounds);
  const learn::GameData data =
      OrDie(learn::BuildGameData(adult.features, adult.labels, adult.groups, 2, 0, true));
  core::ChaCha20Stream stream(core::ChaCha20Stream::Key{1, 2, 3, 4, 5, 6, 7, 8});
  for (auto _ : state) {
    auto result = learn::RunDpOracleLearner(data, AdultOptions(), plan, Laplace(), stream, {});
    if (!result.ok()) state.SkipWithError(result.status().ToString().c_str());
  }
  state.SetItemsProcessed(state.iterations() * kRounds);
}
BENCHMARK(BM_AdultDpOracleRounds)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);

// The exponentiated-gradient learner (issue 22) on Adult with T = 500 rounds at ε = 1: the cell
// releases once, then per round one best response from the released sums (a d x d solve), one
// pass X·w, the positives per cell with discrete Gaussian noise, and the final LP over the
// distinct responses. The game's data is built outside the timed loop (BM_AdultBuildGameData).
// Floor: 500 passes X·w (BM_AdultFloorMatVec x 500).
// The noise the exponentiated-gradient job plans at ε = 1, δ = 1e-6 with the default shares
// (0.05, 0.45): the time does not depend on the scales.
struct EgNoises {
  std::unique_ptr<core::dp::IntegerNoise> counts, sums, positives;
  explicit EgNoises(const learn::GameData& data)
      : counts(OrDie(core::dp::MakeDiscreteLaplaceNoise(1 / 0.05))),
        sums(OrDie(core::dp::MakeDiscreteLaplaceNoise(static_cast<double>(data.max_row_steps) /
                                                      0.45))),
        positives(OrDie(core::dp::MakeDiscreteGaussianNoise(200))) {}
  learn::ReductionNoises Get() const { return {counts.get(), sums.get(), positives.get()}; }
};

void BM_AdultExponentiatedGradient500(benchmark::State& state) {
  constexpr int kEgRounds = 500;
  const AdultGame& adult = SharedAdultGame();
  const learn::GameData data =
      OrDie(learn::BuildGameData(adult.features, adult.labels, adult.groups, 2, 0, true));
  const EgNoises noises(data);
  learn::ReductionOptions options;
  options.rounds = kEgRounds;
  core::ChaCha20Stream stream(core::ChaCha20Stream::Key{4, 2});
  size_t components = 0;
  for (auto _ : state) {
    auto result = learn::RunReductionsLearner(data, options, noises.Get(), stream, {});
    if (!result.ok()) {
      state.SkipWithError(result.status().ToString().c_str());
      return;
    }
    components = result->components.size();
  }
  state.counters["rounds"] = kEgRounds;
  state.counters["components"] = static_cast<double>(components);
}
BENCHMARK(BM_AdultExponentiatedGradient500)->Unit(benchmark::kMillisecond)->UseRealTime()
    ->Iterations(3);

// The managed selection (issue 22 §3) over 20 candidates on Adult: the learner's released cells
// (once, outside the loop, with a short T = 20 run for λ̄), then per iteration: the validation
// counts, 20 best responses from the cells (d x d solves), their decisions on the validation rows
// (20 passes X_v·w), the utilities, the exponential mechanism and the chosen model's positives.
// Validation = the Adult rows themselves (the timing does not depend on which rows).
// Floor: 20 passes X·w (20 x BM_AdultFloorMatVec).
void BM_AdultSelection20(benchmark::State& state) {
  const AdultGame& adult = SharedAdultGame();
  const learn::GameData data =
      OrDie(learn::BuildGameData(adult.features, adult.labels, adult.groups, 2, 0, true));
  const EgNoises noises(data);
  learn::ReductionOptions options;
  options.rounds = 20;
  options.mixture = learn::FinalMixture::kAverage;
  core::ChaCha20Stream stream(core::ChaCha20Stream::Key{4, 3});
  const learn::ReductionResult trained =
      OrDie(learn::RunReductionsLearner(data, options, noises.Get(), stream, {}));
  learn::ValidationRows validation;
  validation.x = *data.x;
  validation.y = data.y;
  validation.group = adult.groups;
  validation.k = 2;
  const auto validation_counts = OrDie(core::dp::MakeDiscreteLaplaceNoise(1 / 0.06));
  const auto score = OrDie(core::dp::MakeDiscreteLaplaceNoise(1 / 0.04));
  learn::SelectionOptions selection;
  selection.candidates = 20;
  int chosen = -1;
  for (auto _ : state) {
    auto result = learn::RunSelection(data, trained.cells, trained.lambda_average, validation,
                                      selection, {validation_counts.get(), score.get(), 0.1},
                                      stream);
    if (!result.ok()) {
      state.SkipWithError(result.status().ToString().c_str());
      return;
    }
    chosen = result->chosen;
  }
  state.counters["candidates"] = 20;
  state.counters["chosen"] = chosen;
}
BENCHMARK(BM_AdultSelection20)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(5);

// Floor of one round: one pass over the n x d matrix, X·w (the decisions of a best response).
void BM_AdultFloorMatVec(benchmark::State& state) {
  const AdultGame& adult = SharedAdultGame();
  const Eigen::MatrixXd x = adult.features;
  const Eigen::VectorXd w = Eigen::VectorXd::Constant(x.cols(), 0.01);
  Eigen::VectorXd margin(x.rows());
  for (auto _ : state) {
    margin.noalias() = x * w;
    benchmark::DoNotOptimize(margin.data());
  }
  state.SetItemsProcessed(state.iterations() * x.rows());
}
BENCHMARK(BM_AdultFloorMatVec)->Unit(benchmark::kMicrosecond);

// Floor of the set-up: XᵀX alone (Eigen's rankUpdate, the lower triangle).
void BM_AdultFloorGram(benchmark::State& state) {
  const Eigen::MatrixXd& x = SharedAdultGame().features;
  for (auto _ : state) {
    Eigen::MatrixXd gram = Eigen::MatrixXd::Zero(x.cols(), x.cols());
    gram.selfadjointView<Eigen::Lower>().rankUpdate(x.transpose());
    benchmark::DoNotOptimize(gram.data());
  }
}
BENCHMARK(BM_AdultFloorGram)->Unit(benchmark::kMillisecond);

// ---- 1M rows x 50 features, one best response -------------------------------------------------

struct Synthetic {
  Eigen::MatrixXd features;  // kBigRows x kBigFeatures, standard normal
  std::vector<int> labels, groups;
  std::vector<double> masses;  // from the exact counts (their noise does not change the time)
  std::vector<int64_t> rows;   // 0..n-1: the join's row indices into the stored columns
  // The features as the server reads them: columns in place, through the row indices.
  learn::FeatureColumns Columns() const {
    learn::FeatureColumns f;
    for (Eigen::Index j = 0; j < features.cols(); ++j) {
      f.columns.emplace_back(features.col(j).data(), static_cast<size_t>(features.rows()));
    }
    f.rows = rows;
    return f;
  }
};

// Generated once per process.
const Synthetic& SharedSynthetic() {
  static const Synthetic* s = [] {
    auto* out = new Synthetic;
    std::mt19937_64 gen(11);
    std::normal_distribution<double> normal;
    out->features.resize(kBigRows, kBigFeatures);
    for (int j = 0; j < kBigFeatures; ++j) {
      for (int64_t i = 0; i < kBigRows; ++i) out->features(i, j) = normal(gen);
    }
    std::vector<int64_t> counts(4, 0);
    for (int64_t i = 0; i < kBigRows; ++i) {
      const double score = out->features(i, 0) + 0.5 * out->features(i, 1) + normal(gen);
      out->labels.push_back(score > 0.3 ? 1 : 0);
      out->groups.push_back(out->features(i, 2) + normal(gen) > 0 ? 1 : 0);
      ++counts[2 * out->groups.back() + out->labels.back()];
    }
    out->masses = learn::MassesFromNoisyCounts(counts, kBigRows, 1);
    for (int64_t i = 0; i < kBigRows; ++i) out->rows.push_back(i);
    return out;
  }();
  return *s;
}

const std::vector<double> kLambda = {2, 0, 0, 1.5};
constexpr double kLambdaBound = 3.5;  // ‖kLambda‖₁

// The core call as the server makes it on a table's first call: BuildGameData from the stored
// columns (the matrix kept only for FTPL), then one private best response.
// state.range(0): 0 least squares, 1 FTPL.
void BM_BestResponse1Mx50(benchmark::State& state) {
  const Synthetic& s = SharedSynthetic();
  const learn::Oracle oracle = state.range(0) == 0 ? learn::Oracle::kLeastSquares
                                                   : learn::Oracle::kFtpl;
  const learn::KeepMatrix keep =
      oracle == learn::Oracle::kFtpl ? learn::KeepMatrix::kYes : learn::KeepMatrix::kNo;
  core::ChaCha20Stream stream(core::ChaCha20Stream::Key{9});
  for (auto _ : state) {
    auto data = learn::BuildGameData(s.Columns(), s.labels, s.groups, 2, 0, true, keep);
    if (!data.ok()) {
      state.SkipWithError("BuildGameData failed");
      return;
    }
    auto grid = learn::PlanCostGrid(data->n, data->max_row_steps, kLambdaBound, s.masses, oracle, 1.0);
    if (!grid.ok()) {
      state.SkipWithError("PlanCostGrid failed");
      return;
    }
    auto br = learn::PrivateBestResponse(*data, kLambda, s.masses, oracle, 1.0, *grid, Laplace(),
                                         stream);
    if (!br.ok()) state.SkipWithError(br.status().ToString().c_str());
  }
  state.SetItemsProcessed(state.iterations() * kBigRows);
}
BENCHMARK(BM_BestResponse1Mx50)
    ->Arg(0)
    ->Arg(1)
    ->ArgName("ftpl")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(3);

// Its two parts: BuildGameData alone, and the best response on built data. state.range(0): 0
// from a const matrix (BuildGameData copies it: 400 MB of fresh memory), 1 moved in (as the
// server does; the caller's copy is made outside the timing).
void BM_BuildGameData1Mx50(benchmark::State& state) {
  const Synthetic& s = SharedSynthetic();
  for (auto _ : state) {
    absl::StatusOr<learn::GameData> data;
    if (state.range(0) == 0) {
      data = learn::BuildGameData(s.features, s.labels, s.groups, 2, 0, true);
    } else {
      state.PauseTiming();
      Eigen::MatrixXd features = s.features;
      state.ResumeTiming();
      data = learn::BuildGameData(std::move(features), s.labels, s.groups, 2, 0, true);
    }
    if (!data.ok()) state.SkipWithError("BuildGameData failed");
    state.PauseTiming();
    data = absl::InternalError("freed outside the timing");
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * kBigRows);
}
BENCHMARK(BM_BuildGameData1Mx50)
    ->Arg(0)
    ->Arg(1)
    ->ArgName("moved")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(3);

// BuildGameData from columns read in place (as the server calls it). state.range(0): 1 keeps the
// n x d matrix (FTPL, the learner: 400 MB of fresh memory), 0 keeps only the sums (least
// squares: one 4,096-row block).
void BM_BuildGameDataColumns1Mx50(benchmark::State& state) {
  const Synthetic& s = SharedSynthetic();
  const learn::KeepMatrix keep = state.range(0) == 1 ? learn::KeepMatrix::kYes
                                                     : learn::KeepMatrix::kNo;
  for (auto _ : state) {
    auto data = learn::BuildGameData(s.Columns(), s.labels, s.groups, 2, 0, true, keep);
    if (!data.ok()) state.SkipWithError("BuildGameData failed");
    state.PauseTiming();
    data = absl::InternalError("freed outside the timing");
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * kBigRows);
}
BENCHMARK(BM_BuildGameDataColumns1Mx50)
    ->Arg(0)
    ->Arg(1)
    ->ArgName("keep")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(3);

void BM_PrivateBestResponseOnly1Mx50(benchmark::State& state) {
  const Synthetic& s = SharedSynthetic();
  const learn::Oracle oracle = state.range(0) == 0 ? learn::Oracle::kLeastSquares
                                                   : learn::Oracle::kFtpl;
  const learn::GameData data =
      OrDie(learn::BuildGameData(s.features, s.labels, s.groups, 2, 0, true));
  core::ChaCha20Stream stream(core::ChaCha20Stream::Key{9});
  const double grid = OrDie(
      learn::PlanCostGrid(data.n, data.max_row_steps, kLambdaBound, s.masses, oracle, 1.0));
  for (auto _ : state) {
    auto br =
        learn::PrivateBestResponse(data, kLambda, s.masses, oracle, 1.0, grid, Laplace(), stream);
    if (!br.ok()) state.SkipWithError(br.status().ToString().c_str());
  }
}
BENCHMARK(BM_PrivateBestResponseOnly1Mx50)
    ->Arg(0)
    ->Arg(1)
    ->ArgName("ftpl")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Floors on the 1M x 50 matrix: one pass (X·w), XᵀX alone, and one copy of the matrix.
void BM_FloorMatVec1Mx50(benchmark::State& state) {
  const Eigen::MatrixXd& x = SharedSynthetic().features;
  const Eigen::VectorXd w = Eigen::VectorXd::Constant(x.cols(), 0.01);
  Eigen::VectorXd margin(x.rows());
  for (auto _ : state) {
    margin.noalias() = x * w;
    benchmark::DoNotOptimize(margin.data());
  }
  state.SetItemsProcessed(state.iterations() * x.rows());
}
BENCHMARK(BM_FloorMatVec1Mx50)->Unit(benchmark::kMillisecond);

void BM_FloorGram1Mx50(benchmark::State& state) {
  const Eigen::MatrixXd& x = SharedSynthetic().features;
  for (auto _ : state) {
    Eigen::MatrixXd gram = Eigen::MatrixXd::Zero(x.cols(), x.cols());
    gram.selfadjointView<Eigen::Lower>().rankUpdate(x.transpose());
    benchmark::DoNotOptimize(gram.data());
  }
  state.SetItemsProcessed(state.iterations() * x.rows());
}
BENCHMARK(BM_FloorGram1Mx50)->Unit(benchmark::kMillisecond)->UseRealTime();

// state.range(0): 1 into fresh memory (a new 400 MB matrix: its first touch, page faults, is
// most of the time on a VM), 0 into memory already touched.
void BM_FloorCopy1Mx50(benchmark::State& state) {
  const Eigen::MatrixXd& x = SharedSynthetic().features;
  Eigen::MatrixXd warm = x;
  for (auto _ : state) {
    if (state.range(0) == 1) {
      Eigen::MatrixXd copy = x;
      benchmark::DoNotOptimize(copy.data());
      state.PauseTiming();  // the free is not part of the copy
      copy.resize(0, 0);
      state.ResumeTiming();
    } else {
      warm = x;
      benchmark::DoNotOptimize(warm.data());
    }
  }
  state.SetBytesProcessed(state.iterations() * x.size() * 8);
}
BENCHMARK(BM_FloorCopy1Mx50)
    ->Arg(0)
    ->Arg(1)
    ->ArgName("fresh")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(2);

}  // namespace
}  // namespace fairvault::bench

int main(int argc, char** argv) {
  return fairvault::bench::BenchmarkMain(
      argc, argv,
      "The fair game in process: the DP-oracle learner on Adult (T = 1,000), a least-squares\n"
      "best response on 1M x 50, and their floors.");
}
