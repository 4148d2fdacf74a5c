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
};

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
