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

// The two-sided standard normal quantile: z with P(|Z| <= z) = confidence (bisection on erfc).
double NormalTwoSidedQuantile(double confidence) {
  double lo = 0, hi = 40;
  for (int i = 0; i < 200; ++i) {
    const double mid = (lo + hi) / 2;
    if (std::erfc(mid / std::sqrt(2.0)) > 1 - confidence) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return hi;
}

// Discrete Laplace, pmf ∝ q^|k| with q = exp(-1/t): P(|X| > w) = 2 q^(w+1) / (1 + q).
int64_t LaplaceHalfWidth(double t, double confidence) {
  const double q = std::exp(-1 / t);
  const auto tail = [&](int64_t w) {
    return 2 * std::pow(q, static_cast<double>(w + 1)) / (1 + q);
  };
  const double guess = std::log((1 - confidence) * (1 + q) / 2) / std::log(q) - 1;
  int64_t w = std::max<int64_t>(0, static_cast<int64_t>(std::ceil(guess)));
  // The closed form up to floating-point rounding: settle on the exact smallest w.
  while (w > 0 && tail(w - 1) <= 1 - confidence) --w;
  while (tail(w) > 1 - confidence) ++w;
  return w;
}

// Discrete Gaussian, pmf ∝ exp(-k^2 / (2 sigma^2)): the mass summed exactly for sigma up to
// 1000; above, the continuous normal quantile rounded up, which the discrete distribution's
// smaller tails only make conservative.
int64_t GaussianHalfWidth(double sigma, double confidence) {
  if (sigma > 1000) {
    return static_cast<int64_t>(std::ceil(NormalTwoSidedQuantile(confidence) * sigma));
  }
  const auto weight = [&](int64_t k) {
    return std::exp(-static_cast<double>(k) * static_cast<double>(k) / (2 * sigma * sigma));
  };
  const int64_t kmax = static_cast<int64_t>(std::ceil(40 * sigma)) + 2;
  double total = weight(0);
  for (int64_t k = 1; k <= kmax; ++k) total += 2 * weight(k);
  double inside = weight(0);
  int64_t w = 0;
  while (inside < confidence * total && w < kmax) {
    ++w;
    inside += 2 * weight(w);
  }
  return w;
}

class DiscreteLaplaceNoise final : public IntegerNoise {
 public:
  explicit DiscreteLaplaceNoise(Rational scale) : scale_(scale) {}
  int64_t AddNoise(int64_t value, absl::BitGenRef gen) const override {
    return SaturatingAdd(value, SampleDiscreteLaplace(scale_, gen));
  }
  std::string Name() const override { return "discrete_laplace"; }
  double Scale() const override { return scale_.ToDouble(); }
  int64_t HalfWidth(double confidence) const override {
    return LaplaceHalfWidth(Scale(), confidence);
  }

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
  int64_t HalfWidth(double confidence) const override {
    return GaussianHalfWidth(Scale(), confidence);
  }

 private:
  Rational sigma_squared_;
};

class ZeroNoise final : public IntegerNoise {
 public:
  int64_t AddNoise(int64_t value, absl::BitGenRef) const override { return value; }
  std::string Name() const override { return "none"; }
  double Scale() const override { return 0; }
  int64_t HalfWidth(double) const override { return 0; }
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

absl::StatusOr<int64_t> NoiseHalfWidth(const std::string& mechanism, double scale,
                                       double confidence) {
  RETURN_IF_ERROR(ValidateInOpenRange(confidence, 0, 1, "confidence"));
  if (mechanism == "discrete_laplace") {
    ASSIGN_OR_RETURN(auto noise, MakeDiscreteLaplaceNoise(scale));
    return noise->HalfWidth(confidence);
  }
  if (mechanism == "discrete_gaussian") {
    ASSIGN_OR_RETURN(auto noise, MakeDiscreteGaussianNoise(scale));
    return noise->HalfWidth(confidence);
  }
  if (mechanism == "gaussian") {
    RETURN_IF_ERROR(ValidateIsFiniteAndPositive(scale, "scale"));
    return static_cast<int64_t>(std::ceil(NormalTwoSidedQuantile(confidence) * scale));
  }
  return absl::InvalidArgumentError(absl::StrCat("mechanism: no half-width for '", mechanism, "'"));
}

}  // namespace fairvault::core::dp
