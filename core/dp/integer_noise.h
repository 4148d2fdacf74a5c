// Noise-mechanism interface for integer-valued releases, so algorithms can be tested with
// zero noise (exact arithmetic) and run in production with the secure samplers.
#ifndef FAIRVAULT_CORE_DP_INTEGER_NOISE_H_
#define FAIRVAULT_CORE_DP_INTEGER_NOISE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/random/bit_gen_ref.h"
#include "absl/status/statusor.h"
#include "core/dp/discrete_samplers.h"

namespace fairvault::core::dp {

// Adds independent integer noise to counts. Not thread-safe across concurrent calls with the
// same generator unless the generator is (SecureBitGen is).
class IntegerNoise {
 public:
  virtual ~IntegerNoise() = default;
  // One fresh noise draw added to `value`.
  virtual int64_t AddNoise(int64_t value, absl::BitGenRef gen) const = 0;
  // "discrete_laplace", "discrete_gaussian" or "none".
  virtual std::string Name() const = 0;
  // The distribution's parameter: Laplace scale t or Gaussian sigma; 0 for none.
  virtual double Scale() const = 0;
  // The smallest integer w >= 0 with P(|noise| <= w) >= confidence, for confidence in (0, 1):
  // value ± w is a confidence interval for the value behind one noisy integer. A function of
  // the scale alone (public). 0 for test doubles that do not override it.
  virtual int64_t HalfWidth(double /*confidence*/) const { return 0; }
};

// HalfWidth of the noise a Cost part describes: mechanism "discrete_laplace" (scale t),
// "discrete_gaussian" (sigma) or "gaussian" (continuous sigma, the rounded-up normal
// quantile). InvalidArgument for another mechanism or a scale the samplers refuse.
absl::StatusOr<int64_t> NoiseHalfWidth(const std::string& mechanism, double scale,
                                       double confidence);

// The largest discrete Laplace scale the exact sampler represents (numerator <= 2^40 over
// denominator 1).
inline constexpr double kMaxDiscreteLaplaceScale = 0x1p40;
// Discrete Laplace with scale `scale` (rounded up to a rational). InvalidArgument above
// kMaxDiscreteLaplaceScale.
absl::StatusOr<std::unique_ptr<IntegerNoise>> MakeDiscreteLaplaceNoise(double scale);
// Discrete Gaussian with std `sigma` (sigma^2 rounded up to a rational).
absl::StatusOr<std::unique_ptr<IntegerNoise>> MakeDiscreteGaussianNoise(double sigma);
// No noise: for logic tests only, never wired into the server.
std::unique_ptr<IntegerNoise> MakeZeroNoise();

}  // namespace fairvault::core::dp

#endif  // FAIRVAULT_CORE_DP_INTEGER_NOISE_H_
