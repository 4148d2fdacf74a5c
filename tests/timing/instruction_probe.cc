// Runs one learner once on one of two neighbouring datasets (subject 0's group differs), from a
// fixed random stream, for tests/timing/instruction_count_test.sh: under callgrind, which counts
// the instructions a function executes (deterministically, whatever the machine is doing), the
// learner must execute exactly as many on both neighbours. Usage:
//   instruction_probe em|pfld|fermi d|d2
//   instruction_probe laplace d|d2   (two accepted draws of different values, same draws)
// The datasets are chosen so that the learners' group-dependent branches would differ if they
// had any: the exponential mechanism's candidates tie on one neighbour and are a sensitivity
// apart on the other (its rejection sampler of before issue 19 made about 50 times as many
// proposals on one); the stochastic learners' row with a large feature is in the small group on
// one neighbour and in the large one on the other, so its group-dependent gradient is clipped on
// one and not the other. The stochastic learners' runs release the same values on both
// neighbours (recorded from a run with real noise, then replayed): see CountedRun.
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/numeric/int128.h"
#include "core/dp/discrete_samplers.h"
#include "core/dp/integer_noise.h"
#include "core/learn/exponential_mechanism.h"
#include "core/learn/network.h"
#include "core/learn/stochastic_fair.h"
#include "core/random/chacha20_stream.h"

namespace fairvault::core::learn {
namespace {

int RunEm(bool neighbour) {
  constexpr int kRows = 200, kCandidates = 50;
  EmLearnerInput input;
  input.k = 2;
  for (int i = 0; i < kRows; ++i) {
    input.group.push_back(i == 0 ? (neighbour ? 1 : 0) : i % 2);
    input.y.push_back(i % 4 < 2 ? 1 : 0);
  }
  for (int j = 0; j < kCandidates; ++j) {
    std::vector<uint8_t> h(kRows);
    for (int i = 0; i < kRows; ++i) {
      const bool label = i % 4 < 2;
      const bool base = label && i > 1 && ((i % 2 == 0 && (i % 8 == 0 || i % 16 == 4)) ||
                                           (i % 2 == 1 && i % 8 == 1));
      h[i] = base;
      if (i == 0) h[i] = j > 0;
      if (i == 1) h[i] = j == 0;
    }
    input.predictions.push_back(std::move(h));
  }
  auto noise = dp::MakeDiscreteLaplaceNoise(1 / 40.0);
  if (!noise.ok()) return 2;
  ChaCha20Stream stream(ChaCha20Stream::Key{19});
  auto result = ExponentialMechanismLearner(input, 40, 40, 0.01, **noise, stream);
  return result.ok() ? 0 : 3;
}

// The released integers, in the order the learner released them: recorded from one run with
// real noise, then replayed as the "noisy" values of the counted runs, so that both neighbours
// release exactly the same values. (A learner may legitimately take other paths for other
// released values — its later steps start from them — so only under this coupling must the
// instruction counts be equal: a difference then comes from the group itself.)
struct ReleaseLog {
  std::vector<int64_t> values;
  size_t next = 0;
};

class RecordingNoise final : public dp::IntegerNoise {
 public:
  RecordingNoise(std::unique_ptr<dp::IntegerNoise> real, ReleaseLog* log)
      : real_(std::move(real)), log_(log) {}
  int64_t AddNoise(int64_t value, absl::BitGenRef gen) const override {
    const int64_t out = real_->AddNoise(value, gen);
    log_->values.push_back(out);
    return out;
  }
  std::string Name() const override { return real_->Name(); }
  double Scale() const override { return real_->Scale(); }

 private:
  std::unique_ptr<dp::IntegerNoise> real_;
  ReleaseLog* log_;
};

class ReplayNoise final : public dp::IntegerNoise {
 public:
  ReplayNoise(double scale, ReleaseLog* log) : scale_(scale), log_(log) {}
  int64_t AddNoise(int64_t, absl::BitGenRef) const override {
    return log_->next < log_->values.size() ? log_->values[log_->next++] : 0;
  }
  std::string Name() const override { return "replay"; }
  double Scale() const override { return scale_; }

 private:
  double scale_;
  ReleaseLog* log_;
};

StochasticData Data(bool neighbour) {
  constexpr int kRows = 20;
  StochasticData data;
  data.k = 2;
  data.classes = 2;
  data.x.resize(kRows, 2);
  for (int i = 0; i < kRows; ++i) {
    data.x(i, 0) = i == 0 ? 40 : static_cast<double>(i % 5) / 5;
    data.x(i, 1) = 1;
    data.y.push_back(i % 3 == 0 ? 1 : 0);
    data.group.push_back(i == 0 ? (neighbour ? 1 : 0) : (i < 4 ? 0 : 1));
  }
  return data;
}

absl::Status Train(bool pfld, const StochasticData& data, const NoiseFactory& noise) {
  Network net(NetworkShape{2, {}, 1});
  ChaCha20Stream stream(ChaCha20Stream::Key{23});
  net.Initialize(stream);
  const int64_t n = data.n();
  if (pfld) {
    PfldOptions options;
    options.epochs = 20;
    options.batch_size = static_cast<int>(n);
    options.clip = 10;
    auto plan = PlanPfld(net.shape(), 2, n, options, 2.0);
    if (!plan.ok()) return plan.status();
    const std::vector<double> released = {4, 16};  // public: the same on both neighbours
    return TrainPfld(data, released, options, *plan, noise, stream, nullptr, &net, nullptr);
  }
  FermiOptions options;
  options.epochs = 20;
  options.batch_size = static_cast<int>(n);
  options.lambda = 5;
  auto plan = PlanDpFermi(net.shape(), 2, n, options, 2.0);
  if (!plan.ok()) return plan.status();
  const std::vector<double> fractions = {0.2, 0.8};
  return TrainDpFermi(data, fractions, options, *plan, noise, stream, nullptr, &net, nullptr);
}

// What callgrind counts (--toggle-collect=*CountedRun*): the training, releasing the log's
// values.
__attribute__((noinline)) absl::Status CountedRun(bool pfld, const StochasticData& data,
                                                  ReleaseLog* log) {
  const NoiseFactory replay = [log](double scale)
      -> absl::StatusOr<std::unique_ptr<dp::IntegerNoise>> {
    return std::make_unique<ReplayNoise>(scale, log);
  };
  return Train(pfld, data, replay);
}

int RunStochastic(bool pfld, bool neighbour) {
  ReleaseLog log;
  const NoiseFactory recording = [&log](double std_steps)
      -> absl::StatusOr<std::unique_ptr<dp::IntegerNoise>> {
    auto real = dp::MakeDiscreteGaussianNoise(std_steps);
    if (!real.ok()) return real.status();
    return std::make_unique<RecordingNoise>(*std::move(real), &log);
  };
  if (!Train(pfld, Data(false), recording).ok()) return 3;
  return CountedRun(pfld, Data(neighbour), &log).ok() ? 0 : 3;
}

// Scripted generator words, then ~0 (which gives bound − 1 for any bound up to 2^63).
class Words {
 public:
  using result_type = uint64_t;
  explicit Words(std::vector<uint64_t> words) : words_(std::move(words)) {}
  static constexpr result_type min() { return 0; }
  static constexpr result_type max() { return ~uint64_t{0}; }
  result_type operator()() { return next_ < words_.size() ? words_[next_++] : ~uint64_t{0}; }

 private:
  std::vector<uint64_t> words_;
  size_t next_ = 0;
};

// The word the samplers' uniform below `bound` turns into `value` on its first try.
uint64_t WordFor(uint64_t value, uint64_t bound) {
  const absl::uint128 top = (absl::uint128(value + 1) << 64) - 1;
  return absl::Uint128Low64(top / bound);
}

// What callgrind counts for the sampler (--toggle-collect=*SampledOnce*).
__attribute__((noinline)) int64_t SampledOnce(Words& words) {
  return dp::SampleDiscreteLaplace(dp::Rational{3, 1}, words);
}

// One accepted attempt of the discrete Laplace of scale 3, with the same 67 draws: on "d" the
// value 2 (U = 2, positive; D's first failed trial K = 1; V = 0), on "d2" the value −5 (U = 2,
// negative; K = 3; V = 1). Different values, signs, first failures and geometric counts: the
// sampler must execute the same instructions.
int RunLaplace(bool other) {
  constexpr uint64_t k20 = 2432902008176640000;  // 20!
  std::vector<uint64_t> words;
  if (!other) {
    words = {WordFor(4, 6), WordFor(2, 3)};  // U = 2, positive; trial 1 fails (2 >= 2)
    for (int k = 2; k <= 21; ++k) words.push_back(~uint64_t{0});
    words.push_back(WordFor(k20 - 1, k20));  // V = 0
  } else {
    words = {WordFor(5, 6), WordFor(0, 3), WordFor(0, 6), WordFor(8, 9)};  // negative; K = 3
    for (int k = 4; k <= 21; ++k) words.push_back(~uint64_t{0});
    words.push_back(WordFor(k20 / 2 - 1, k20));  // V = 1
    words.push_back(WordFor(k20 - 1, k20));
  }
  words.resize(80, ~uint64_t{0});  // the same script length: the harness takes the same path
  Words gen(std::move(words));
  const int64_t expected = other ? -5 : 2;
  return SampledOnce(gen) == expected ? 0 : 3;
}

}  // namespace
}  // namespace fairvault::core::learn

int main(int argc, char** argv) {
  if (argc != 3 || (std::strcmp(argv[2], "d") != 0 && std::strcmp(argv[2], "d2") != 0)) {
    std::fprintf(stderr, "usage: instruction_probe em|pfld|fermi|laplace d|d2\n");
    return 2;
  }
  const std::string learner = argv[1];
  const bool neighbour = std::strcmp(argv[2], "d2") == 0;
  if (learner == "em") return fairvault::core::learn::RunEm(neighbour);
  if (learner == "laplace") return fairvault::core::learn::RunLaplace(neighbour);
  if (learner == "pfld" || learner == "fermi") {
    return fairvault::core::learn::RunStochastic(learner == "pfld", neighbour);
  }
  std::fprintf(stderr, "usage: instruction_probe em|pfld|fermi d|d2\n");
  return 2;
}
