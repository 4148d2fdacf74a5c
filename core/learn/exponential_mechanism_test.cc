// The exponential-mechanism learner's timing (issue 19): the draws it makes do not depend on
// the utilities, so the time a job takes says nothing about the groups; and the refusals that
// public sizes can foresee come before the charge (CheckEmFeasible).
#include "core/learn/exponential_mechanism.h"

#include <cstdint>
#include <random>
#include <vector>

#include "core/dp/integer_noise.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fairvault::core::learn {
namespace {

using ::fairvault::testing::StatusIs;


// A seeded URBG that counts its calls: the work a draw does on the generator.
struct CountingUrbg {
  using result_type = uint64_t;
  static constexpr result_type min() { return 0; }
  static constexpr result_type max() { return UINT64_MAX; }
  explicit CountingUrbg(uint64_t seed) : engine(seed) {}
  result_type operator()() {
    ++calls;
    return engine();
  }
  std::mt19937_64 engine;
  int64_t calls = 0;
};

// n rows, k groups, J random candidates; `seed` fixes the data.
EmLearnerInput RandomInput(int n, int k, int candidates, uint64_t seed) {
  std::mt19937_64 gen(seed);
  EmLearnerInput input;
  input.k = k;
  for (int i = 0; i < n; ++i) {
    input.y.push_back(static_cast<int>(gen() % 2));
    input.group.push_back(static_cast<int>(gen() % k));
  }
  for (int j = 0; j < candidates; ++j) {
    std::vector<uint8_t> h(n);
    // Candidates from nearly perfect to nearly constant: very different utilities.
    const uint64_t noise = 1 + gen() % 8;
    for (int i = 0; i < n; ++i) h[i] = gen() % noise == 0 ? 1 - input.y[i] : input.y[i];
    if (j == 0) std::fill(h.begin(), h.end(), 0);
    input.predictions.push_back(std::move(h));
  }
  return input;
}

// The same seed makes the same calls on the generator for neighbouring datasets (one
// subject's group changed) and for unrelated data of the same shape: the number, bounds and
// order of the draws depend only on the number of candidates. Under the rejection sampler
// before issue 19 the counts differed by the utilities (the set bits of each gap, and the
// number of proposals until one was accepted).
TEST(ExponentialMechanismTimingTest, DrawsDoNotDependOnTheUtilities) {
  const std::unique_ptr<dp::IntegerNoise> zero_noise = dp::MakeZeroNoise();
  const dp::IntegerNoise& zero = *zero_noise;
  for (uint64_t trial = 0; trial < 20; ++trial) {
    EmLearnerInput input = RandomInput(400, 3, 12, 100 + trial);
    EmLearnerInput neighbour = input;
    neighbour.group[trial] = (neighbour.group[trial] + 1) % neighbour.k;
    const EmLearnerInput unrelated = RandomInput(400, 3, 12, 900 + trial);
    std::vector<int64_t> calls;
    std::vector<int> chosen;
    for (const EmLearnerInput* in : std::vector<const EmLearnerInput*>{&input, &neighbour, &unrelated}) {
      CountingUrbg gen(7 + trial);
      ASSERT_OK_AND_ASSIGN(EmLearnerResult result,
                           ExponentialMechanismLearner(*in, 1, 2, 1e-3, zero, gen));
      calls.push_back(gen.calls);
      chosen.push_back(result.chosen);
    }
    EXPECT_EQ(calls[1], calls[0]) << "trial " << trial;
    EXPECT_EQ(calls[2], calls[0]) << "trial " << trial;
    // 45 proposals per candidate, each with 1 + 45 + 21 draws (and the rare rejections of
    // the bounded uniforms).
    EXPECT_GE(calls[0], 45 * 12 * (1 + 45 + 21));
    EXPECT_LE(calls[0], 45 * 12 * (1 + 45 + 21) * 11 / 10);
  }
}

// ε and δ that cannot work are refused from public sizes: the example of issue 19 (300
// label-1 rows in two groups, ε 0.1, δ = exp(−√300)) subtracts 346 from a minimum of at most
// 150.
TEST(CheckEmFeasibleTest, RefusesWhatPublicSizesShowCannotSucceed) {
  const double delta = std::exp(-std::sqrt(300.0));
  EXPECT_THAT(CheckEmFeasible(300, 2, 0.05, 0.05, delta),
              StatusIs(absl::StatusCode::kInvalidArgument, "use epsilon > 0.23"));
  EXPECT_OK(CheckEmFeasible(300, 2, 0.5, 0.5, delta));  // shift 34.6 < 150 - 1
  // Too few label-1 rows per group for any epsilon.
  EXPECT_THAT(CheckEmFeasible(3, 2, 10, 10, 0.5),
              StatusIs(absl::StatusCode::kInvalidArgument, "label_column"));
  // The selection's epsilon must be representable whatever M is.
  EXPECT_THAT(CheckEmFeasible(300, 2, 10, 1e-7, delta),
              StatusIs(absl::StatusCode::kInvalidArgument, "below what the exact"));
  EXPECT_THAT(CheckEmFeasible(300, 2, 10, 2e6, delta),
              StatusIs(absl::StatusCode::kInvalidArgument, "above what the exact"));
}

// Whatever CheckEmFeasible admits, the sampler represents: at the smallest admitted selection
// epsilon and the extremes of M the learner runs (M from the zero-noise release).
TEST(CheckEmFeasibleTest, AdmittedEpsilonsAreRepresentable) {
  const EmLearnerInput input = RandomInput(2000, 2, 4, 5);
  int64_t ones = 0;
  for (int y : input.y) ones += y;
  const double smallest = 2 * (std::ldexp(1.0, 20) + 1) / std::ldexp(1.0, 40);
  for (double eps_em : {smallest, 3.0, 2 * (std::ldexp(1.0, 19) + 1)}) {
    ASSERT_OK(CheckEmFeasible(ones, 2, 1e6, eps_em, 0.5)) << eps_em;
    std::mt19937_64 gen(3);
    EXPECT_OK(ExponentialMechanismLearner(input, 1e6, eps_em, 0.5, *dp::MakeZeroNoise(), gen)
                  .status())
        << eps_em;
  }
}

}  // namespace
}  // namespace fairvault::core::learn
