// Helpers shared by the vault's use-case files (not part of the vault's interface).
#ifndef FAIRVAULT_SERVER_APP_VAULT_INTERNAL_H_
#define FAIRVAULT_SERVER_APP_VAULT_INTERNAL_H_

#include <initializer_list>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "absl/random/bit_gen_ref.h"
#include "core/dp/integer_noise.h"
#include "core/postprocess/statistical_parity.h"
#include "fairvault/v1/fairvault.pb.h"
#include "server/app/caller.h"
#include "server/app/company_table.h"
#include "server/storage/records.pb.h"
#include "server/storage/store.h"

namespace fairvault::server::internal {

// One fresh draw of `noise` added to every value (a released histogram or vector).
std::vector<int64_t> AddNoiseToEach(const std::vector<int64_t>& exact,
                                    const core::dp::IntegerNoise& noise, absl::BitGenRef gen);

// PermissionDenied unless the caller has one of `roles`.
absl::Status RequireRole(const Caller& caller, std::initializer_list<storage::Role> roles);

// InvalidArgument unless `value` matches [a-z0-9_-]{1,64}.
absl::Status ValidateName(const std::string& value, const char* field);

// Whether `value` is 1-128 printable ASCII characters without spaces (ValidateToken without
// building a message: for per-row checks).
bool IsToken(absl::string_view value);
// The public score grid of a request: lo < hi finite, 1..kMaxBins bins; InvalidArgument naming
// the field otherwise.
absl::StatusOr<core::postprocess::ScoreGrid> MakeGrid(double lo, double hi, int bins);

// Joins a thread when the scope ends (early returns included) unless it was joined already, so
// that a helper thread never outlives the data it reads.
class JoinOnExit {
 public:
  explicit JoinOnExit(std::thread& thread) : thread_(thread) {}
  JoinOnExit(const JoinOnExit&) = delete;
  JoinOnExit& operator=(const JoinOnExit&) = delete;
  ~JoinOnExit() {
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::thread& thread_;
};

// Moves every string of `from` to the end of `to` without copying or allocating one (the
// string objects change owner; `from` is left empty). Neither may be on an arena.
void MoveStrings(google::protobuf::RepeatedPtrField<std::string>* from,
                 google::protobuf::RepeatedPtrField<std::string>* to);
// InvalidArgument unless IsToken(value), naming `field`.
absl::Status ValidateToken(const std::string& value, const char* field);

// InvalidArgument unless delta is in [0, 1).
absl::Status ValidateDelta(double delta);

v1::Role ToProtoRole(storage::Role role);

// What one decision by an attribute-aware artifact can reveal about a subject's group:
// max over inputs, outcomes and pairs of groups of |log P(out | input, a) - log P(out | input,
// b)|; +inf when an outcome is possible for one group only. Computed from the artifact (a DP
// release), so it is public. InvalidArgument for an artifact that is not a post-processor.
absl::StatusOr<double> DecisionLogRatioBound(const v1::Artifact& artifact);

// A page of rows with seq > after_seq (>= 0), at most `limit` (1..10000; 0 means 1000).
absl::StatusOr<storage::LedgerFilter> PageFilter(int64_t after_seq, int32_t limit);

// A ledger row as the API shows it (ListLedger, receipts).
void FillLedgerEntry(const storage::LedgerRow& row, v1::LedgerEntry* entry);

// InvalidArgument unless `columns` holds lo..hi distinct non-empty names (naming `field`).
absl::Status ValidateColumns(const google::protobuf::RepeatedPtrField<std::string>& columns,
                             const char* field, int lo, int hi);
// InvalidArgument naming `field` when `column` is one of `others` (a label among the features).
absl::Status RequireNotAmong(const std::string& column, const char* field,
                             const google::protobuf::RepeatedPtrField<std::string>& others,
                             const char* others_field);

// Index of a named column in a stored table, or InvalidArgument listing the columns.
absl::StatusOr<int> ColumnIndex(const CompanyTable& table, const std::string& name,
                                const char* field);

// The column's values on `rows` as class labels 0..classes-1 (integers); InvalidArgument naming
// the field, the column and the first bad row otherwise.
absl::StatusOr<std::vector<int>> ClassColumn(const CompanyTable& table, int column,
                                             const std::vector<int64_t>& rows, const char* field,
                                             int classes);
// A binary (0/1) numeric column over the given table rows, or InvalidArgument naming the row.
absl::StatusOr<std::vector<int>> BinaryColumn(const CompanyTable& table, int column,
                                              const std::vector<int64_t>& rows, const char* field);

// All the values of a numeric column, read in place (valid while `table` lives), or
// InvalidArgument if it is not numeric.
absl::StatusOr<absl::Span<const double>> NumericValues(const CompanyTable& table,
                                                       int column, const char* field);

// A numeric column over the given table rows, or InvalidArgument if it is not numeric.
absl::StatusOr<std::vector<double>> NumericColumn(const CompanyTable& table, int column,
                                                  const std::vector<int64_t>& rows,
                                                  const char* field);

// The Budget message for a grant (or cap) and its spend.
v1::Budget MakeBudget(const std::string& dataset, const std::string& company, int64_t granted_micro,
                      double delta, const core::accounting::Spend& spend);

}  // namespace fairvault::server::internal

#endif  // FAIRVAULT_SERVER_APP_VAULT_INTERNAL_H_
