// Small status-propagation macros: Debian's Abseil (20220623) ships none.
#ifndef FAIRVAULT_CORE_UTIL_STATUS_MACROS_H_
#define FAIRVAULT_CORE_UTIL_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define FV_CONCAT_INNER_(a, b) a##b
#define FV_CONCAT_(a, b) FV_CONCAT_INNER_(a, b)

// Returns from the enclosing function if `expr` (an absl::Status) is not OK.
#define RETURN_IF_ERROR(expr)                         \
  do {                                                \
    ::absl::Status fv_status_ = (expr);               \
    if (!fv_status_.ok()) return fv_status_;          \
  } while (0)

// `ASSIGN_OR_RETURN(auto x, MakeX());` binds the value or returns the error.
#define ASSIGN_OR_RETURN(lhs, expr) \
  FV_ASSIGN_OR_RETURN_IMPL_(FV_CONCAT_(fv_statusor_, __LINE__), lhs, expr)
#define FV_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                              \
  if (!statusor.ok()) return statusor.status();        \
  lhs = std::move(statusor).value()

#endif  // FAIRVAULT_CORE_UTIL_STATUS_MACROS_H_
