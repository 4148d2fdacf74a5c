// The operators' metrics (issue 11 §4): request counts and latencies per RPC and status,
// charges, replays and refusals per request kind, training jobs, the SQLite log's size. One
// Prometheus registry, exposed in the text format by `fairvault-server serve --metrics-listen`
// (metrics_endpoint.h).
//
// Every label value comes from a fixed set compiled into the server: gRPC method names of the
// services it serves, status code names, request kinds, refusal reasons and job outcomes. A
// value outside its set is replaced by "unknown" (methods) or "other" (kinds), so no subject
// key, attribute value, account or dataset name, table handle, idempotency key or anything a
// client chose can become a label, however it reaches these functions.
#ifndef FAIRVAULT_SERVER_METRICS_METRICS_H_
#define FAIRVAULT_SERVER_METRICS_METRICS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace prometheus {
class Counter;
class Gauge;
class Histogram;
class Registry;
template <typename T>
class Family;
}  // namespace prometheus

namespace fairvault::server {

// Why a spending request was turned down without a charge.
enum class Refusal {
  kNoGrant,             // the company has no grant on the dataset
  kBudgetExhausted,     // the cost does not fit the company's grant
  kCapExhausted,        // the cost does not fit the dataset-wide cap
  kDeltaRequired,       // a Gaussian (non-pure) cost under a grant or cap with delta 0
  kJobQueueFull,        // FitFairModel beyond the limit of queued and running jobs
  kUnauthenticated,     // no key or a wrong key
  kPermissionDenied,    // the caller's role may not make the request
  kInvalidArgument,     // malformed request
  kNotFound,            // unknown table, artifact, dataset ...
  kFailedPrecondition,  // expired table, idempotency key reused with other parameters ...
  kOther,               // any other error before the charge (internal, unavailable ...)
};
const char* RefusalName(Refusal reason);

enum class JobOutcome { kSucceeded, kFailed, kCancelled };
const char* JobOutcomeName(JobOutcome outcome);

// The request kinds the charge path knows (the ledger's request_kind values).
const std::vector<std::string>& ChargedRequestKinds();

// Thread-safe. Owned by main; the vault, the job runner and the gRPC interceptor hold a
// pointer that may be null (no metrics: tests and the embedded use).
class Metrics {
 public:
  // `methods`: the full gRPC method names the server serves ("/fairvault.v1.CompanyService/
  // NoisyCounts", ...), the only values the `method` label takes besides "unknown".
  explicit Metrics(const std::vector<std::string>& methods);
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // The registry to expose (and to collect in tests).
  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }

  // One finished RPC: its full method name, gRPC status code (0..16) and duration.
  void RecordRpc(absl::string_view method, int code, double seconds);
  // A charge committed to the ledger by this process (not a replay); `failed`: the release
  // failed after its noise was drawn and was charged all the same.
  void RecordCharge(absl::string_view kind, bool failed);
  // A request answered from its stored response (or stored failure), without a charge.
  void RecordReplay(absl::string_view kind);
  void RecordRefusal(absl::string_view kind, Refusal reason);
  // Training jobs of this process's runner: queued in memory, running.
  void SetJobLoad(int queued, int running);
  void RecordJobFinished(JobOutcome outcome);
  // The size of the SQLite store's write-ahead log file, in bytes (its checkpointer reports it).
  void SetSqliteWalBytes(int64_t bytes);
  // The company tables kept parsed in memory: how many, and their estimated bytes.
  void SetTableCache(int64_t tables, int64_t bytes);
  // A committed transaction of `charges` charges (group commit: one sync for all of them).
  void RecordChargeCommit(int64_t charges);

  // The text exposition format of everything registered (what GET /metrics returns).
  std::string Text() const;

 private:
  // `kind` if the charge path knows it, else "other".
  std::string KindLabel(absl::string_view kind) const;

  const absl::flat_hash_set<std::string> methods_;
  const absl::flat_hash_set<std::string> kinds_;
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>* requests_;
  prometheus::Family<prometheus::Histogram>* latency_;
  prometheus::Family<prometheus::Counter>* charges_;
  prometheus::Family<prometheus::Counter>* replays_;
  prometheus::Family<prometheus::Counter>* refusals_;
  prometheus::Gauge* jobs_queued_;
  prometheus::Gauge* jobs_running_;
  prometheus::Family<prometheus::Counter>* jobs_finished_;
  prometheus::Gauge* sqlite_wal_bytes_;
  prometheus::Gauge* table_cache_tables_;
  prometheus::Gauge* table_cache_bytes_;
  prometheus::Counter* charge_commits_;
  prometheus::Counter* charge_commit_charges_;
};

// The gRPC name of a status code ("OK", "INVALID_ARGUMENT", ...); "UNKNOWN" outside 0..16.
const char* StatusCodeName(int code);

// A spending call's outcome is counted once, where it is known best: the charge path counts
// charges, replays and the privacy filter's refusals and marks the status it returns; the
// gRPC handler counts any other failure of a spending call as a refusal by its code.
absl::Status MarkCounted(absl::Status status);
bool IsCounted(const absl::Status& status);
// The refusal a status code stands for when nothing more precise is known.
Refusal RefusalFromCode(absl::StatusCode code);
// The admission's refusal behind a storage::Store::Charge error, if it is one:
// PermissionDenied (no grant), ResourceExhausted (the grant, the dataset-wide cap when the
// message names it, or the job limit in storage::JobLimitReached's words), FailedPrecondition
// naming delta 0. Nothing for other errors.
std::optional<Refusal> FilterRefusal(const absl::Status& status);

}  // namespace fairvault::server

#endif  // FAIRVAULT_SERVER_METRICS_METRICS_H_
