// What every Store backend decides the same way, whatever its SQL: the privacy filter's
// admission of a declared cost, the ledger rows a grant, a cap and a charge append, the
// ledger's verification against the totals the filter reads, and the wording of the errors a
// caller sees. SQLite (sqlite_store.cc) and PostgreSQL (pg_store.cc) differ only in how they
// read and write rows.
#ifndef FAIRVAULT_SERVER_STORAGE_STORE_COMMON_H_
#define FAIRVAULT_SERVER_STORAGE_STORE_COMMON_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/accounting/accountant.h"
#include "server/storage/store.h"

namespace fairvault::server::storage {

// The budget after an admitted charge.
struct Admission {
  BudgetState after;
};

// A charge's admission, decided the same way by every backend inside its charge transaction
// (which every other charge waits for), before anything is debited:
// 1. the privacy filter on the declared cost alone: the grant (NotFound: none), this company's
//    spend, the dataset (for its cap) and, only when it has a cap, the composed spend of all
//    companies on it. PermissionDenied without a grant, ResourceExhausted when the cost does
//    not fit the grant or the cap, FailedPrecondition for a non-pure cost under a cap with
//    delta 0;
// 2. for a charge that creates a training job (request.job_limit set), the job limit:
//    `unfinished_jobs` (called only then) counts the queued and running jobs in the store, of
//    every process on it; ResourceExhausted (JobLimitReached) when they are at the limit.
//    After the filter, so that a company out of budget is told so rather than to retry.
absl::StatusOr<Admission> AdmitCharge(
    const ChargeRequest& request, const absl::StatusOr<GrantRecord>& grant,
    const core::accounting::Spend& spend, const absl::StatusOr<DatasetRecord>& dataset,
    const std::function<absl::StatusOr<core::accounting::Spend>()>& dataset_spend,
    const std::function<absl::StatusOr<int64_t>()>& unfinished_jobs);

// ResourceExhausted: `limit` training jobs are queued or running.
absl::Status JobLimitReached(int64_t limit);

// Unavailable: the database cannot be reached, or dropped the connection. What the caller
// gets names nothing about the database (host, port, socket, user, name, password): the
// backend logs its driver's account of the failure for the operator.
absl::Status DatabaseUnavailable();

// Whether `status` is a failure the same call may retry and succeed: the database unavailable,
// a transaction that lost to another or another process's write first (Aborted), a time limit
// (DeadlineExceeded).
bool IsFailureToRetry(const absl::Status& status);

// The ledger rows (without seq and hashes, which the append fills in).
LedgerRow GrantLedgerRow(const GrantRecord& grant, const std::string& account_name,
                         const std::string& dataset_name, const std::string& actor,
                         int64_t now_micros);
LedgerRow CapLedgerRow(const std::string& dataset_name, int64_t epsilon_micro, double delta,
                       const std::string& actor, int64_t now_micros);
LedgerRow ChargeLedgerRow(const ChargeRequest& request, int64_t now_micros);

// A failure of a charge's body after its noise was drawn: kept, stored and returned.
absl::Status ChargedFailure(const absl::Status& computed);

// Runs a charge's body for ledger row `seq`: its result, or an empty result with the body's
// failure (ChargedFailure) in `*failure`, to be stored with the charge.
ChargeResult RunChargeBody(const ChargeBody& body, int64_t seq, const BudgetState& after,
                           absl::Status* failure);

// FailedPrecondition for a replay whose parameters differ from the stored request's.
absl::Status IdempotencyKeyReused(const std::string& key);

// What VerifyLedger reads from a backend: the ledger in seq order (with the ids each row
// refers to) and the state the filter reads (grants, caps, spend totals, live datasets).
class LedgerReader {
 public:
  using RowFn =
      std::function<absl::Status(const LedgerRow&, int64_t account_id, int64_t dataset_id)>;
  // (account_id, dataset_id, epsilon_micro, delta) of each grant.
  using GrantFn = std::function<absl::Status(int64_t, int64_t, int64_t, double)>;
  // (dataset_id, cap_micro, cap_delta) of each dataset with a cap.
  using CapFn = std::function<absl::Status(int64_t, int64_t, double)>;
  using SpendFn = std::function<absl::Status(int64_t account_id, int64_t dataset_id,
                                             const core::accounting::Spend&)>;

  virtual ~LedgerReader() = default;
  virtual absl::Status ForEachLedgerRow(const RowFn& fn) = 0;
  virtual absl::Status ForEachGrant(const GrantFn& fn) = 0;
  virtual absl::Status ForEachCap(const CapFn& fn) = 0;
  virtual absl::Status ForEachSpend(const SpendFn& fn) = 0;
  virtual absl::StatusOr<bool> DatasetExists(int64_t dataset_id) = 0;
  // The stored Merkle tree nodes of one level, (index, raw hash) in index order.
  using NodeFn = std::function<absl::Status(int64_t index, const std::string& hash)>;
  virtual absl::Status ForEachTreeNode(int level, const NodeFn& fn) = 0;
};

// The end of a listing of the ledger or the access log after `filter`'s cursor, in seq order:
// " WHERE seq > p AND account = p AND dataset = p ORDER BY seq LIMIT p" with only the filters
// that are set (the dataset's only if `by_dataset`), its parameters numbered from 1 after
// `style` ('?' on SQLite, '$' on PostgreSQL). Written as `(p IS NULL OR account = p)`, one
// text for every filter, the account's filter could not use ledger_by_account: a company's
// page read every row after its cursor (on a 1M-row ledger, 129 ms against 1 ms for a company
// with no rows, SQLite).
// Its parameters, in order: the cursor, the filters' values, the limit.
struct ListingQuery {
  std::string sql;
  int64_t after_seq = 0;
  std::vector<std::string> filters;
  int64_t limit = 0;
};
ListingQuery ListingAfterCursor(const LedgerFilter& filter, char style, bool by_dataset);

// The end of a listing of jobs, newest first: " WHERE account_id = p AND dataset_id = p ORDER
// BY ledger_seq DESC LIMIT p" with only the filters that are set, so that a company's listing
// searches jobs_by_account and a dataset's jobs_by_dataset (schema version 11) instead of
// walking every job from the newest. Its parameters, in order: the filters' values, the limit.
struct JobListingQuery {
  std::string sql;
  std::vector<int64_t> params;
};
JobListingQuery JobsNewestFirst(const JobFilter& filter, char style);

// Recomputes the hash chain and the spend totals from the ledger rows and checks the grants,
// caps and totals the filter reads against them (both ways: a missing spend row would reset a
// budget), and the stored Merkle tree against the rows: every leaf and complete subtree, none
// missing and none beyond the ledger (issue 25). Read from one snapshot of the store.
absl::StatusOr<LedgerVerification> VerifyLedgerFrom(LedgerReader& reader);

// Aborted: another vault process stored a decision batch of the artifact first; nothing of
// this call was stored or returned.
absl::Status DecidedConcurrently();

// NotFound: `what` (a table, an artifact's decisions) belongs to a dataset deleted while the
// call ran; nothing of the call was stored.
absl::Status DeletedWithItsDataset(const std::string& what);

// Error texts shared by the backends.
std::string UnknownJob(const std::string& id);
const char* JobStateName(JobState state);
absl::Status AccountNameTaken(const std::string& name);
absl::Status DatasetNameTaken(const std::string& name);
std::string UnknownDataset(const std::string& name);
std::string UnknownTable(const std::string& handle);
absl::Status BatchImportedConcurrently(const std::string& batch_id);
// Aborted: the dataset's subject count is not what the importer's index was built on (another
// vault process imported meanwhile).
absl::Status DatasetChangedConcurrently(int64_t dataset_id);
// FailedPrecondition unless `job` is running under `owner`'s lease (naming `action`).
absl::Status RequireLeaseHolder(const JobRecord& job, const std::string& owner, const char* action);
// FailedPrecondition for a claim of a job that is neither queued nor running on an expired
// lease.
absl::Status NotClaimable(const JobRecord& job, int64_t now_micros);

// The text of a cancelled job's error.
inline constexpr char kCancelledByCompany[] =
    "cancelled by its company; the charge paid at submission stays";

}  // namespace fairvault::server::storage

#endif  // FAIRVAULT_SERVER_STORAGE_STORE_COMMON_H_
