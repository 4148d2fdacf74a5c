// gtest matchers for absl::Status / StatusOr: EXPECT_THAT(s, IsOk()), StatusIs(code[, substr]).
#ifndef FAIRVAULT_CORE_TESTING_STATUS_MATCHERS_H_
#define FAIRVAULT_CORE_TESTING_STATUS_MATCHERS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"

namespace fairvault::testing {

inline const absl::Status& GetStatus(const absl::Status& s) { return s; }
template <typename T>
const absl::Status& GetStatus(const absl::StatusOr<T>& s) {
  return s.status();
}

MATCHER(IsOk, "is OK") {
  const absl::Status& s = ::fairvault::testing::GetStatus(arg);
  *result_listener << "status is " << s.ToString();
  return s.ok();
}

MATCHER_P(StatusIs, code, "has status code " + absl::StatusCodeToString(code)) {
  const absl::Status& s = ::fairvault::testing::GetStatus(arg);
  *result_listener << "status is " << s.ToString();
  return s.code() == code;
}

MATCHER_P2(StatusIs, code, substring,
           "has status code " + absl::StatusCodeToString(code) + " and message containing \"" +
               std::string(substring) + "\"") {
  const absl::Status& s = ::fairvault::testing::GetStatus(arg);
  *result_listener << "status is " << s.ToString();
  return s.code() == code && s.message().find(substring) != absl::string_view::npos;
}

}  // namespace fairvault::testing

#define ASSERT_OK(expr) ASSERT_THAT((expr), ::fairvault::testing::IsOk())
#define EXPECT_OK(expr) EXPECT_THAT((expr), ::fairvault::testing::IsOk())

// `lhs = *expr` when expr (a StatusOr) is OK; otherwise fails the test with its status.
#define FAIRVAULT_TESTING_CONCAT_INNER(a, b) a##b
#define FAIRVAULT_TESTING_CONCAT(a, b) FAIRVAULT_TESTING_CONCAT_INNER(a, b)
#define ASSERT_OK_AND_ASSIGN(lhs, expr) \
  ASSERT_OK_AND_ASSIGN_IMPL(FAIRVAULT_TESTING_CONCAT(status_or_, __LINE__), lhs, expr)
#define ASSERT_OK_AND_ASSIGN_IMPL(var, lhs, expr) \
  auto var = (expr);                              \
  ASSERT_TRUE(var.ok()) << var.status();          \
  lhs = std::move(var).value()

#endif  // FAIRVAULT_CORE_TESTING_STATUS_MATCHERS_H_
