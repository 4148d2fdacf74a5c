// Shared checks and conversions for the vault's use-cases.
#include "server/app/vault_internal.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "core/util/validate.h"

namespace fairvault::server::internal {

using core::accounting::MicroToEpsilon;

absl::Status RequireRole(const Caller& caller, std::initializer_list<storage::Role> roles) {
  if (std::find(roles.begin(), roles.end(), caller.role) != roles.end()) {
    return absl::OkStatus();
  }
  return absl::PermissionDeniedError(
      absl::StrCat("account '", caller.name, "' (", v1::Role_Name(ToProtoRole(caller.role)),
                   ") may not call this method"));
}

absl::Status ValidateName(const std::string& value, const char* field) {
  bool ok = !value.empty() && value.size() <= 64;
  for (char c : value) {
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-');
  }
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, " must be 1-64 characters of [a-z0-9_-] (got '", value.substr(0, 80), "')"));
  }
  return absl::OkStatus();
}

absl::Status ValidateToken(const std::string& value, const char* field) {
  bool ok = !value.empty() && value.size() <= 128;
  for (char c : value) ok = ok && c > ' ' && c < 127;
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, " must be 1-128 printable ASCII characters without spaces (got '",
        value.substr(0, 80), "')"));
  }
  return absl::OkStatus();
}

absl::Status ValidateDelta(double delta) {
  return core::ValidateInHalfOpenRange(delta, 0, 1, "delta");
}

v1::Role ToProtoRole(storage::Role role) {
  switch (role) {
    case storage::Role::kRegulator:
      return v1::ROLE_REGULATOR;
    case storage::Role::kCompany:
      return v1::ROLE_COMPANY;
    case storage::Role::kAuditor:
      return v1::ROLE_AUDITOR;
  }
  return v1::ROLE_UNSPECIFIED;
}

v1::Budget MakeBudget(const std::string& dataset, const std::string& company,
                      int64_t granted_micro, double delta, const core::accounting::Spend& spend) {
  v1::Budget b;
  b.set_dataset(dataset);
  b.set_company(company);
  b.set_epsilon_granted(MicroToEpsilon(granted_micro));
  b.set_delta(delta);
  const int64_t spent = core::accounting::SpentEpsilonMicro(spend, delta);
  b.set_epsilon_spent(MicroToEpsilon(spent));
  b.set_epsilon_remaining(MicroToEpsilon(std::max<int64_t>(0, granted_micro - spent)));
  b.set_releases(spend.releases);
  return b;
}

}  // namespace fairvault::server::internal
