// Shared argument checks that produce messages naming the field and the fix.
#ifndef FAIRVAULT_CORE_UTIL_VALIDATE_H_
#define FAIRVAULT_CORE_UTIL_VALIDATE_H_

#include <cmath>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace fairvault::core {

// InvalidArgument unless `value` is finite and > 0: "epsilon must be finite and > 0 (got -1)".
inline absl::Status ValidateIsFiniteAndPositive(double value, absl::string_view field) {
  if (!std::isfinite(value) || value <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " must be finite and > 0 (got ", value, ")"));
  }
  return absl::OkStatus();
}

// InvalidArgument unless `value` is finite and >= 0.
inline absl::Status ValidateIsFiniteAndNonNegative(double value, absl::string_view field) {
  if (!std::isfinite(value) || value < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " must be finite and >= 0 (got ", value, ")"));
  }
  return absl::OkStatus();
}

// InvalidArgument unless lo <= value < hi (half-open), e.g. delta in [0, 1).
inline absl::Status ValidateInHalfOpenRange(double value, double lo, double hi,
                                            absl::string_view field) {
  if (!(value >= lo && value < hi)) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " must be in [", lo, ", ", hi, ") (got ", value, ")"));
  }
  return absl::OkStatus();
}

// InvalidArgument unless lo < value < hi (open), e.g. beta in (0, 1).
inline absl::Status ValidateInOpenRange(double value, double lo, double hi,
                                        absl::string_view field) {
  if (!(value > lo && value < hi)) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " must be in (", lo, ", ", hi, ") (got ", value, ")"));
  }
  return absl::OkStatus();
}

// InvalidArgument unless 0 < value <= hi, naming why the cap exists: "lr_theta must be in
// (0, 1000] (got 1e+308): <why>".
inline absl::Status ValidateIsPositiveAtMost(double value, double hi, absl::string_view field,
                                             absl::string_view why) {
  if (!(value > 0 && value <= hi)) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " must be in (0, ", hi, "] (got ", value, "): ", why));
  }
  return absl::OkStatus();
}

}  // namespace fairvault::core

#endif  // FAIRVAULT_CORE_UTIL_VALIDATE_H_
