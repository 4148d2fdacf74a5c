// IntegerNoise implementations: discrete Laplace and discrete Gaussian over the
// exact CKS samplers, and a zero-noise stand-in for logic tests.
#include "core/dp/integer_noise.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/util/status_macros.h"
#include "core/util/validate.h"

namespace fairvault::core::dp {
namespace {

constexpr int kMaxLog2 = 40;  // Rational parts are at most 2^40.

// Saturates instead of overflowing: only reachable for values within a noise
// draw of INT64_MAX, which no count comes near.
int64_t SaturatingAdd(int64_t a, int64_t b) {
  int64_t sum;
  if (__builtin_add_overflow(a, b, &sum)) {
    return b > 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
  }
  return sum;
}

// The smallest rational >= x with the finest power-of-two denominator (at most
// 2^40) that keeps the numerator <= 2^40: rounds x up by less than max(2^-39 x,
// 2^-40).
absl::StatusOr<Rational> FineRationalAtLeast(double x) {
  int exponent = 0;
  std::frexp(x, &exponent);  // x < 2^exponent, so x * 2^(40 - exponent) < 2^40
  const int log2_den = std::clamp(kMaxLog2 - exponent, 0, kMaxLog2);
  return RationalAtLeast(x, uint64_t{1} << log2_den);
}

class DiscreteLaplaceNoise final : public IntegerNoise {
 public:
  explicit DiscreteLaplaceNoise(Rational scale) : scale_(scale) {}
  int64_t AddNoise(int64_t value, absl::BitGenRef gen) const override {
    return SaturatingAdd(value, SampleDiscreteLaplace(scale_, gen));
  }
  std::string Name() const override { return "discrete_laplace"; }
  double Scale() const override { return scale_.ToDouble(); }

 private:
  Rational scale_;
};

class DiscreteGaussianNoise final : public IntegerNoise {
 public:
  explicit DiscreteGaussianNoise(Rational sigma_squared) : sigma_squared_(sigma_squared) {}
  int64_t AddNoise(int64_t value, absl::BitGenRef gen) const override {
    return SaturatingAdd(value, SampleDiscreteGaussian(sigma_squared_, gen));
  }
  std::string Name() const override { return "discrete_gaussian"; }
  double Scale() const override { return std::sqrt(sigma_squared_.ToDouble()); }

 private:
  Rational sigma_squared_;
};

class ZeroNoise final : public IntegerNoise {
 public:
  int64_t AddNoise(int64_t value, absl::BitGenRef) const override { return value; }
  std::string Name() const override { return "none"; }
  double Scale() const override { return 0; }
};

}  // namespace

absl::StatusOr<std::unique_ptr<IntegerNoise>> MakeDiscreteLaplaceNoise(double scale) {
  RETURN_IF_ERROR(ValidateIsFiniteAndPositive(scale, "scale"));
  ASSIGN_OR_RETURN(const Rational rational, FineRationalAtLeast(scale));
  return std::make_unique<DiscreteLaplaceNoise>(rational);
}

absl::StatusOr<std::unique_ptr<IntegerNoise>> MakeDiscreteGaussianNoise(double sigma) {
  RETURN_IF_ERROR(ValidateIsFiniteAndPositive(sigma, "sigma"));
  if (sigma > 1048576.0) {
    return absl::InvalidArgumentError(
        absl::StrCat("sigma must be <= 2^20 = 1048576 (got ", sigma, ")"));
  }
  // Round sigma^2 up, never down: fma gives the exact rounding error of the
  // product.
  double sigma_squared = sigma * sigma;
  if (std::fma(sigma, sigma, -sigma_squared) > 0) {
    sigma_squared = std::nextafter(sigma_squared, std::numeric_limits<double>::infinity());
  }
  ASSIGN_OR_RETURN(const Rational rational, FineRationalAtLeast(sigma_squared));
  return std::make_unique<DiscreteGaussianNoise>(rational);
}

std::unique_ptr<IntegerNoise> MakeZeroNoise() { return std::make_unique<ZeroNoise>(); }

}  // namespace fairvault::core::dp
