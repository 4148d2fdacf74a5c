// The backend-independent half of the store: admission, ledger rows, verification, errors.
#include "server/storage/store_common.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <map>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/util/status_macros.h"
#include "core/util/truncate.h"
#include "server/storage/ledger_chain.h"

namespace fairvault::server::storage {

using core::accounting::MicroToEpsilon;
using core::accounting::PrivacyCost;
using core::accounting::Spend;
using core::accounting::SpentEpsilonMicro;

absl::StatusOr<Admission> AdmitCharge(
    const ChargeRequest& request, const absl::StatusOr<GrantRecord>& grant, const Spend& spend,
    const absl::StatusOr<DatasetRecord>& dataset,
    const std::function<absl::StatusOr<Spend>()>& dataset_spend,
    const std::function<absl::StatusOr<int64_t>()>& unfinished_jobs) {
  if (absl::IsNotFound(grant.status())) {
    return absl::PermissionDeniedError(
        absl::StrCat("company '", request.account_name, "' has no budget grant on dataset '",
                     request.dataset_name, "'; ask the regulator for a grant"));
  }
  RETURN_IF_ERROR(grant.status());
  const int64_t spent_before = SpentEpsilonMicro(spend, grant->delta);
  Spend after = spend;
  after.Add(request.cost);
  const int64_t spent_after = SpentEpsilonMicro(after, grant->delta);
  if (spent_after > grant->epsilon_micro) {
    const int64_t left = std::max<int64_t>(0, grant->epsilon_micro - spent_before);
    return absl::ResourceExhaustedError(
        absl::StrCat("request costs epsilon=", request.epsilon, " (delta=", grant->delta,
                     ") but the grant on dataset '", request.dataset_name, "' has epsilon ",
                     MicroToEpsilon(left), " left of ", MicroToEpsilon(grant->epsilon_micro),
                     "; ask for less or for a larger grant"));
  }
  RETURN_IF_ERROR(dataset.status());
  if (dataset->cap_micro) {
    ASSIGN_OR_RETURN(Spend all, dataset_spend());
    all.Add(request.cost);
    if (!request.cost.pure_epsilon_micro && dataset->cap_delta <= 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the dataset-wide cap on '", request.dataset_name,
          "' has delta 0, which admits only pure-epsilon releases; use "
          "NOISE_KIND_DISCRETE_LAPLACE or ask the regulator for a cap with delta > 0"));
    }
    if (SpentEpsilonMicro(all, dataset->cap_delta) > *dataset->cap_micro) {
      // Neither the cap nor what is left of it: that is every company's spend together, which
      // companies do not see (ListDatasets shows the cap to the regulator and auditors only).
      return absl::ResourceExhaustedError(
          absl::StrCat("request costs epsilon=", request.epsilon, " but the dataset-wide cap on '",
                       request.dataset_name,
                       "' (all companies together) does not admit it; ask the regulator"));
    }
  }
  if (request.job_limit) {
    ASSIGN_OR_RETURN(const int64_t unfinished, unfinished_jobs());
    if (unfinished >= *request.job_limit) return JobLimitReached(*request.job_limit);
  }
  return Admission{BudgetState{*grant, after, spent_after}};
}

absl::Status JobLimitReached(int64_t limit) {
  // The wording FilterRefusal (server/metrics/metrics.cc) counts as a full job queue.
  return absl::ResourceExhaustedError(absl::StrCat("the vault is running its limit of ", limit,
                                                   " training jobs; retry later (nothing was "
                                                   "charged)"));
}

LedgerRow GrantLedgerRow(const GrantRecord& grant, const std::string& account_name,
                         const std::string& dataset_name, const std::string& actor,
                         int64_t now_micros) {
  LedgerRow row;
  row.time_micros = now_micros;
  row.kind = "grant";
  row.account = account_name;
  row.dataset = dataset_name;
  row.epsilon = MicroToEpsilon(grant.epsilon_micro);
  row.delta = grant.delta;
  row.actor = actor;
  return row;
}

LedgerRow CapLedgerRow(const std::string& dataset_name, int64_t epsilon_micro, double delta,
                       const std::string& actor, int64_t now_micros) {
  LedgerRow row;
  row.time_micros = now_micros;
  row.kind = "cap";
  row.dataset = dataset_name;
  row.epsilon = MicroToEpsilon(epsilon_micro);
  row.delta = delta;
  row.actor = actor;
  return row;
}

LedgerRow ChargeLedgerRow(const ChargeRequest& request, int64_t now_micros) {
  LedgerRow row;
  row.time_micros = now_micros;
  row.kind = "charge";
  row.account = request.account_name;
  row.dataset = request.dataset_name;
  row.request_kind = request.request_kind;
  row.idempotency_key = request.idempotency_key;
  row.epsilon = request.epsilon;
  row.delta = request.delta;
  row.mechanism = request.mechanism;
  row.pure_micro = request.cost.pure_epsilon_micro;
  row.rdp_nano = request.cost.rdp_nano;
  return row;
}

absl::Status DecidedConcurrently() {
  return absl::AbortedError(
      "another vault process decided for this artifact concurrently; retry the call (the "
      "stored decisions will be returned)");
}

absl::Status DeletedWithItsDataset(const std::string& what) {
  return absl::NotFoundError(absl::StrCat(
      what, " belongs to a dataset that was deleted during this call; nothing was stored"));
}

absl::Status DatabaseUnavailable() {
  return absl::UnavailableError("the vault's database is unavailable; retry shortly");
}

bool IsFailureToRetry(const absl::Status& status) {
  return absl::IsUnavailable(status) || absl::IsAborted(status) ||
         absl::IsDeadlineExceeded(status);
}

ChargeResult RunChargeBody(const ChargeBody& body, int64_t seq, const BudgetState& after,
                           absl::Status* failure) {
  absl::StatusOr<ChargeResult> computed = body(seq, after);
  if (computed.ok()) return *std::move(computed);
  *failure = ChargedFailure(computed.status());
  return ChargeResult{};
}

absl::Status ChargedFailure(const absl::Status& computed) {
  return absl::Status(
      computed.code(),
      absl::StrCat(computed.message(),
                   " (this release was charged: its noise had already been drawn)"));
}

absl::Status IdempotencyKeyReused(const std::string& key) {
  return absl::FailedPreconditionError(
      absl::StrCat("idempotency_key '", key,
                   "' was already used with different parameters; use a new key for a new "
                   "request"));
}

ListingQuery ListingAfterCursor(const LedgerFilter& filter, char style, bool by_dataset) {
  ListingQuery q;
  q.after_seq = filter.after_seq;
  q.limit = filter.limit;
  auto next = [&] { return absl::StrCat(std::string(1, style), q.filters.size() + 2); };
  q.sql = " WHERE seq > " + std::string(1, style) + "1";
  auto add = [&](const char* column, const std::string& value) {
    absl::StrAppend(&q.sql, " AND ", column, " = ", next());
    q.filters.push_back(value);
  };
  if (filter.account) add("account", *filter.account);
  if (by_dataset && filter.dataset) add("dataset", *filter.dataset);
  absl::StrAppend(&q.sql, " ORDER BY seq LIMIT ", next());
  return q;
}

JobListingQuery JobsNewestFirst(const JobFilter& filter, char style) {
  JobListingQuery q;
  std::vector<std::string> conditions;
  auto next = [&] { return absl::StrCat(std::string(1, style), q.params.size()); };
  auto add = [&](const char* column, int64_t value) {
    q.params.push_back(value);
    conditions.push_back(absl::StrCat(column, " = ", next()));
  };
  if (filter.account_id) add("account_id", *filter.account_id);
  if (filter.dataset_id) add("dataset_id", *filter.dataset_id);
  if (!conditions.empty()) q.sql = absl::StrCat(" WHERE ", absl::StrJoin(conditions, " AND "));
  q.params.push_back(filter.limit);
  absl::StrAppend(&q.sql, " ORDER BY ledger_seq DESC LIMIT ", next());
  return q;
}

absl::StatusOr<LedgerVerification> VerifyLedgerFrom(LedgerReader& reader) {
  LedgerVerification v;
  v.head_hash = kGenesisHash;
  std::map<std::pair<int64_t, int64_t>, Spend> recomputed;
  // The last grant per (account, dataset) and cap per dataset, as the ledger records them.
  std::map<std::pair<int64_t, int64_t>, std::pair<int64_t, double>> grants;
  std::map<int64_t, std::pair<int64_t, double>> caps;
  // A finding stops the walk: the status carries no error, `v` says what was found.
  const absl::Status found = absl::CancelledError("verification failed");
  auto fail = [&](int64_t seq, std::string message) {
    v.ok = false;
    v.first_bad_seq = seq;
    v.message = std::move(message);
    return found;
  };
  auto finish = [&](const absl::Status& s) -> absl::StatusOr<LedgerVerification> {
    if (!v.ok) return v;
    RETURN_IF_ERROR(s);
    return v;
  };

  int64_t expected_seq = 1;
  std::vector<core::transparency::Hash> level;  // the tree's leaves, from the rows
  absl::Status walked = reader.ForEachLedgerRow(
      [&](const LedgerRow& row, int64_t account_id, int64_t dataset_id) -> absl::Status {
        ++v.rows_checked;
        if (row.seq != expected_seq) {
          return fail(expected_seq,
                      absl::StrCat("row ", expected_seq, " is missing (next is ", row.seq, ")"));
        }
        if (row.prev_hash != v.head_hash) {
          return fail(row.seq,
                      absl::StrCat("row ", row.seq, " does not chain to its predecessor's hash"));
        }
        if (LedgerRowHash(row, account_id, dataset_id) != row.hash) {
          return fail(row.seq, absl::StrCat("row ", row.seq, " was modified: hash mismatch"));
        }
        if (row.kind == "charge") {
          recomputed[{account_id, dataset_id}].Add(PrivacyCost{row.pure_micro, row.rdp_nano});
        } else if (row.kind == "grant") {
          grants[{account_id, dataset_id}] = {std::llround(row.epsilon * 1e6), row.delta};
        } else if (row.kind == "cap") {
          caps[dataset_id] = {std::llround(row.epsilon * 1e6), row.delta};
        }
        v.head_hash = row.hash;
        level.push_back(core::transparency::LeafHash(absl::HexStringToBytes(row.hash)));
        ++expected_seq;
        return absl::OkStatus();
      });
  if (!walked.ok()) return finish(walked);

  // The stored tree, level by level: each node is the hash of the rows under it (level 0:
  // the rows' leaves; above, the hash of the two stored nodes below), none missing, none more.
  // The first row under node `index` of level `l` (saturated: a forged node may be anywhere).
  auto first_row_under = [](int l, int64_t index) -> int64_t {
    return index <= ((INT64_MAX - 1) >> l) ? (index << l) + 1 : INT64_MAX;
  };
  int l = 0;
  for (; !level.empty(); ++l) {
    int64_t next = 0;
    absl::Status nodes = reader.ForEachTreeNode(l, [&](int64_t index,
                                                       const std::string& hash) -> absl::Status {
      const int64_t first_row = first_row_under(l, index);
      if (index >= static_cast<int64_t>(level.size())) {
        return fail(first_row, absl::StrCat("the Merkle tree has node ", l, "/", index,
                                            " beyond the ledger's ", expected_seq - 1, " rows"));
      }
      if (index != next) {
        return fail(first_row_under(l, next),
                    absl::StrCat("the Merkle tree lacks node ", l, "/", next));
      }
      if (hash != level[index]) {
        return fail(first_row, absl::StrCat("the Merkle tree's node ", l, "/", index,
                                            " does not match the ledger rows ", first_row, "..",
                                            first_row + (int64_t{1} << l) - 1));
      }
      ++next;
      return absl::OkStatus();
    });
    if (!nodes.ok()) return finish(nodes);
    if (next != static_cast<int64_t>(level.size())) {
      (void)fail(first_row_under(l, next),
                 absl::StrCat("the Merkle tree lacks node ", l, "/", next));
      return v;
    }
    std::vector<core::transparency::Hash> up(level.size() / 2);
    for (size_t i = 0; i < up.size(); ++i) {
      up[i] = core::transparency::NodeHash(level[2 * i], level[2 * i + 1]);
    }
    level = std::move(up);
  }
  // Nothing above: a node no row accounts for (on an empty ledger, or above the highest
  // complete subtree) would block the append that needs its place.
  for (; l < 63; ++l) {
    absl::Status stray = reader.ForEachTreeNode(l, [&](int64_t index, const std::string&) {
      return fail(first_row_under(l, index), absl::StrCat("the Merkle tree has node ", l, "/", index,
                                                 " beyond the ledger's ", expected_seq - 1,
                                                 " rows"));
    });
    if (!stray.ok()) return finish(stray);
  }

  // The grants and caps the filter reads must be the last ones the ledger recorded.
  absl::Status checked = reader.ForEachGrant(
      [&](int64_t account_id, int64_t dataset_id, int64_t micro, double delta) -> absl::Status {
        auto it = grants.find({account_id, dataset_id});
        if (it == grants.end() || it->second != std::make_pair(micro, delta)) {
          return fail(0, absl::StrCat("the grant of account ", account_id, " on dataset ",
                                      dataset_id, " differs from the ledger's last grant row"));
        }
        return absl::OkStatus();
      });
  if (!checked.ok()) return finish(checked);
  checked = reader.ForEachCap([&](int64_t dataset_id, int64_t micro, double delta) -> absl::Status {
    auto it = caps.find(dataset_id);
    if (it == caps.end() || it->second != std::make_pair(micro, delta)) {
      return fail(0, absl::StrCat("the cap of dataset ", dataset_id,
                                  " differs from the ledger's last cap row"));
    }
    caps.erase(it);
    return absl::OkStatus();
  });
  if (!checked.ok()) return finish(checked);
  // A cap the ledger set must still be in force (clearing it would lift the limit).
  for (const auto& [dataset_id, cap] : caps) {
    ASSIGN_OR_RETURN(bool exists, reader.DatasetExists(dataset_id));
    if (exists) {
      (void)fail(0, absl::StrCat("the cap of dataset ", dataset_id,
                                 " was removed behind the ledger's back"));
      return v;
    }
  }
  // The spend totals the filter reads must equal the ledger's composition, both ways: a
  // missing spend row would reset a budget. Deleted datasets keep their ledger rows but not
  // their spend (dataset ids are never reused).
  checked = reader.ForEachSpend(
      [&](int64_t account_id, int64_t dataset_id, const Spend& stored) -> absl::Status {
        auto it = recomputed.find({account_id, dataset_id});
        if (it == recomputed.end() || !(it->second == stored)) {
          return fail(0, absl::StrCat("spend totals of account ", account_id, " on dataset ",
                                      dataset_id, " differ from the ledger"));
        }
        recomputed.erase(it);
        return absl::OkStatus();
      });
  if (!checked.ok()) return finish(checked);
  for (const auto& [ids, spend] : recomputed) {
    ASSIGN_OR_RETURN(bool exists, reader.DatasetExists(ids.second));
    if (exists) {
      (void)fail(0, absl::StrCat("spend totals of account ", ids.first, " on dataset ", ids.second,
                                 " are missing but the ledger charges them"));
      return v;
    }
  }
  return v;
}

std::string UnknownJob(const std::string& id) {
  return absl::StrCat("unknown job_id '", core::Truncated(id), "'");
}

const char* JobStateName(JobState state) {
  switch (state) {
    case JobState::kQueued:
      return "queued";
    case JobState::kRunning:
      return "running";
    case JobState::kSucceeded:
      return "succeeded";
    case JobState::kFailed:
      return "failed";
    case JobState::kCancelled:
      return "cancelled";
  }
  return "unknown";
}

absl::Status AccountNameTaken(const std::string& name) {
  return absl::AlreadyExistsError(
      absl::StrCat("account name '", name, "' is taken; choose another name"));
}

absl::Status DatasetNameTaken(const std::string& name) {
  return absl::AlreadyExistsError(
      absl::StrCat("dataset '", name, "' already exists; choose another name or delete it first"));
}

std::string UnknownDataset(const std::string& name) {
  return absl::StrCat("unknown dataset '", core::Truncated(name),
                      "'; list datasets to see the names");
}

std::string UnknownTable(const std::string& handle) {
  return absl::StrCat("unknown table_handle '", core::Truncated(handle),
                      "'; upload the table first (handles expire and are purged)");
}

absl::Status BatchImportedConcurrently(const std::string& batch_id) {
  return absl::FailedPreconditionError(
      absl::StrCat("batch_id '", batch_id, "' was imported concurrently; retry"));
}

absl::Status DatasetChangedConcurrently(int64_t dataset_id) {
  return absl::AbortedError(absl::StrCat(
      "dataset ", dataset_id,
      " received subjects from another vault process during this import; retry the import"));
}

absl::Status RequireLeaseHolder(const JobRecord& job, const std::string& owner,
                                const char* action) {
  if (job.state != JobState::kRunning) {
    return absl::FailedPreconditionError(absl::StrCat("job '", job.id, "' is ",
                                                      JobStateName(job.state),
                                                      ", not running; cannot ", action, " it"));
  }
  if (job.lease_owner != owner) {
    return absl::FailedPreconditionError(
        absl::StrCat("job '", job.id, "' was taken over by another runner after its lease ",
                     "ended; cannot ", action, " it"));
  }
  return absl::OkStatus();
}

absl::Status NotClaimable(const JobRecord& job, int64_t now_micros) {
  if (job.state == JobState::kRunning) {
    return absl::FailedPreconditionError(
        absl::StrCat("job '", job.id, "' is running under a lease that ends in ",
                     (job.lease_expires_micros - now_micros) / 1000, " ms"));
  }
  return absl::FailedPreconditionError(
      absl::StrCat("job '", job.id, "' is ", JobStateName(job.state), ", not queued"));
}

}  // namespace fairvault::server::storage
