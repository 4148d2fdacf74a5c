// Shared checks and conversions for the vault's use-cases.
#include "server/app/vault_internal.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/util/status_macros.h"
#include "core/util/truncate.h"
#include "core/util/validate.h"

namespace fairvault::server::internal {

std::vector<int64_t> AddNoiseToEach(const std::vector<int64_t>& exact,
                                    const core::dp::IntegerNoise& noise, absl::BitGenRef gen) {
  std::vector<int64_t> noisy(exact.size());
  for (size_t i = 0; i < exact.size(); ++i) noisy[i] = noise.AddNoise(exact[i], gen);
  return noisy;
}

using core::accounting::MicroToEpsilon;

absl::Status RequireRole(const Caller& caller, std::initializer_list<storage::Role> roles) {
  if (std::find(roles.begin(), roles.end(), caller.role) != roles.end()) {
    return absl::OkStatus();
  }
  return absl::PermissionDeniedError(absl::StrCat("account '", caller.name, "' (",
                                                  v1::Role_Name(ToProtoRole(caller.role)),
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

absl::StatusOr<core::postprocess::ScoreGrid> MakeGrid(double lo, double hi, int bins) {
  namespace pp = core::postprocess;
  if (!std::isfinite(lo) || !std::isfinite(hi) || !(lo < hi)) {
    return absl::InvalidArgumentError(
        absl::StrCat("lo and hi must be finite with lo < hi (got lo=", lo, ", hi=", hi, ")"));
  }
  if (bins < 1 || bins > pp::ScoreGrid::kMaxBins) {
    return absl::InvalidArgumentError(
        absl::StrCat("bins must be in [1, ", pp::ScoreGrid::kMaxBins, "] (got ", bins, ")"));
  }
  pp::ScoreGrid grid{lo, hi, bins};
  absl::Status valid = grid.Validate();
  if (!valid.ok()) return valid;
  return grid;
}

void MoveStrings(google::protobuf::RepeatedPtrField<std::string>* from,
                 google::protobuf::RepeatedPtrField<std::string>* to) {
  const int n = from->size();
  std::vector<std::string*> moved(n);
  from->ExtractSubrange(0, n, moved.data());
  to->Reserve(to->size() + n);
  for (std::string* s : moved) to->AddAllocated(s);
}

bool IsToken(absl::string_view value) {
  bool ok = !value.empty() && value.size() <= 128;
  for (char c : value) ok &= c > ' ' && c < 127;
  return ok;
}

absl::Status ValidateToken(const std::string& value, const char* field) {
  if (!IsToken(value)) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " must be 1-128 printable ASCII characters without spaces (got '",
                     core::Truncated(value), "')"));
  }
  return absl::OkStatus();
}

absl::Status ValidateDelta(double delta) {
  return core::ValidateInHalfOpenRange(delta, 0, 1, "delta");
}

absl::StatusOr<storage::LedgerFilter> PageFilter(int64_t after_seq, int32_t limit) {
  if (after_seq < 0) return absl::InvalidArgumentError("after_seq must be >= 0");
  if (limit < 0 || limit > 10000) {
    return absl::InvalidArgumentError(
        absl::StrCat("limit must be in [1, 10000] or 0 for 1000 (got ", limit, ")"));
  }
  storage::LedgerFilter filter;
  filter.after_seq = after_seq;
  filter.limit = limit == 0 ? 1000 : limit;
  return filter;
}

namespace {

// max |log p_a(x) - log p_b(x)| over outcomes x and pairs of groups, for one input.
double LogRatioBound(const std::vector<std::vector<double>>& probs_by_group) {
  double bound = 0;
  for (size_t a = 0; a < probs_by_group.size(); ++a) {
    for (size_t b = a + 1; b < probs_by_group.size(); ++b) {
      for (size_t x = 0; x < probs_by_group[a].size(); ++x) {
        const double pa = probs_by_group[a][x], pb = probs_by_group[b][x];
        if (pa <= 0 && pb <= 0) continue;
        if (pa <= 0 || pb <= 0) return std::numeric_limits<double>::infinity();
        bound = std::max(bound, std::abs(std::log(pa) - std::log(pb)));
      }
    }
  }
  return bound;
}

}  // namespace

absl::StatusOr<double> DecisionLogRatioBound(const v1::Artifact& artifact) {
  double bound = 0;
  if (artifact.has_equalized_odds()) {
    std::vector<std::vector<double>> given0, given1;
    for (const auto& g : artifact.equalized_odds().groups()) {
      given0.push_back({1 - g.p_flip_to_1_given_0(), g.p_flip_to_1_given_0()});
      given1.push_back({1 - g.p_keep_1_given_1(), g.p_keep_1_given_1()});
    }
    return std::max(LogRatioBound(given0), LogRatioBound(given1));
  }
  if (artifact.has_statistical_parity()) {
    const auto& sp = artifact.statistical_parity();
    const int k = sp.bins();
    for (int j = 0; j < k; ++j) {
      std::vector<std::vector<double>> row;
      for (const auto& g : sp.groups()) {
        if (g.transport_size() != k * k) return absl::DataLossError("transport of wrong size");
        row.emplace_back(g.transport().begin() + j * k, g.transport().begin() + (j + 1) * k);
      }
      bound = std::max(bound, LogRatioBound(row));
    }
    return bound;
  }
  if (artifact.has_equalized_odds_scores()) {
    // Per score bin, the outcome distribution (1 − p, p) of each group.
    const auto& eo = artifact.equalized_odds_scores();
    for (int j = 0; j < eo.bins(); ++j) {
      std::vector<std::vector<double>> given_bin;
      for (const auto& g : eo.groups()) {
        if (g.p_positive_size() != eo.bins()) {
          return absl::DataLossError("p_positive of wrong size");
        }
        given_bin.push_back({1 - g.p_positive(j), g.p_positive(j)});
      }
      bound = std::max(bound, LogRatioBound(given_bin));
    }
    return bound;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("artifact '", artifact.id(), "' is not an attribute-aware post-processor"));
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

v1::Budget MakeBudget(const std::string& dataset, const std::string& company, int64_t granted_micro,
                      double delta, const core::accounting::Spend& spend) {
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

absl::Status ValidateColumns(const google::protobuf::RepeatedPtrField<std::string>& columns,
                             const char* field, int lo, int hi) {
  if (columns.size() < lo || columns.size() > hi) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": give ", lo, "..", hi, " columns (got ", columns.size(), ")"));
  }
  std::set<std::string> seen;
  for (const std::string& c : columns) {
    if (c.empty()) return absl::InvalidArgumentError(absl::StrCat(field, ": empty column name"));
    if (!seen.insert(c).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": column '", core::Truncated(c), "' given twice"));
    }
  }
  return absl::OkStatus();
}

absl::Status RequireNotAmong(const std::string& column, const char* field,
                             const google::protobuf::RepeatedPtrField<std::string>& others,
                             const char* others_field) {
  for (const std::string& other : others) {
    if (other == column) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ": column '", core::Truncated(column), "' is also in ", others_field,
          "; a column cannot be both (nothing was charged)"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int> ColumnIndex(const CompanyTable& table, const std::string& name,
                                const char* field) {
  if (name.empty() || name.size() > 64) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": column names are 1-64 bytes (got one of ", name.size(), ": '",
                     core::Truncated(name), "')"));
  }
  for (int c = 0; c < table.num_columns(); ++c) {
    if (table.spec(c).name() == name) return c;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      field, ": unknown column '", core::Truncated(name), "'; the table has: ",
      absl::StrJoin(table.specs(), ", ",
                    [](std::string* o, const v1::ColumnSpec& s) { o->append(s.name()); })));
}

absl::StatusOr<absl::Span<const double>> NumericValues(const CompanyTable& table,
                                                       int column, const char* field) {
  if (!table.numeric(column)) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": column '", table.spec(column).name(), "' must be numeric"));
  }
  return table.numbers(column);
}

absl::StatusOr<std::vector<double>> NumericColumn(const CompanyTable& table, int column,
                                                  const std::vector<int64_t>& rows,
                                                  const char* field) {
  ASSIGN_OR_RETURN(const absl::Span<const double> values, NumericValues(table, column, field));
  std::vector<double> out(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) out[i] = values[rows[i]];
  return out;
}

absl::StatusOr<std::vector<int>> ClassColumn(const CompanyTable& table, int column,
                                             const std::vector<int64_t>& rows, const char* field,
                                             int classes) {
  const std::string allowed = classes == 2 ? "0 or 1" : absl::StrCat("integers 0..", classes - 1);
  if (!table.numeric(column)) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": column '", table.spec(column).name(),
                                                   "' must be numeric with values ", allowed));
  }
  const absl::Span<const double> values = table.numbers(column);
  std::vector<int> out(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    const double v = values[rows[i]];
    if (!(v >= 0 && v < classes) || v != std::floor(v)) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": column '", table.spec(column).name(), "' row ", rows[i] + 1,
                       " is ", v, "; values must be ", allowed));
    }
    out[i] = static_cast<int>(v);
  }
  return out;
}

absl::StatusOr<std::vector<int>> BinaryColumn(const CompanyTable& table, int column,
                                              const std::vector<int64_t>& rows, const char* field) {
  return ClassColumn(table, column, rows, field, 2);
}

void FillLedgerEntry(const storage::LedgerRow& r, v1::LedgerEntry* e) {
  e->set_seq(r.seq);
  e->set_time_unix_micros(r.time_micros);
  e->set_kind(r.kind);
  e->set_account(r.account);
  e->set_dataset(r.dataset);
  e->set_request_kind(r.request_kind);
  e->set_idempotency_key(r.idempotency_key);
  e->set_epsilon(r.epsilon);
  e->set_delta(r.delta);
  e->set_mechanism(r.mechanism);
  e->set_prev_hash(r.prev_hash);
  e->set_hash(r.hash);
  if (r.pure_micro) e->set_pure_epsilon_micro(*r.pure_micro);
  for (int64_t v : r.rdp_nano) e->add_rdp_nano(v);
  e->set_actor(r.actor);
  e->set_artifact_id(r.artifact_id);
  e->set_job_id(r.job_id);
}

}  // namespace fairvault::server::internal
