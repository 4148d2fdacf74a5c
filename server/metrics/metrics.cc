// The operators' metrics on prometheus-cpp's core library (Debian's prometheus-cpp-dev).
#include "server/metrics/metrics.h"

#include <sstream>

#include "absl/strings/match.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"

namespace fairvault::server {
namespace {

// The payload that marks a status whose outcome the charge path has counted. Payloads stay in
// the process: ToGrpcStatus sends only the code and the message.
constexpr char kCountedPayload[] = "type.fairvault.dev/metrics.counted";

constexpr const char* kStatusCodeNames[] = {
    "OK",        "CANCELLED",      "UNKNOWN",           "INVALID_ARGUMENT",   "DEADLINE_EXCEEDED",
    "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
    "ABORTED",   "OUT_OF_RANGE",   "UNIMPLEMENTED",     "INTERNAL",           "UNAVAILABLE",
    "DATA_LOSS", "UNAUTHENTICATED"};

// Seconds: from a cheap read (~1 ms) to the longest releases and uploads (minutes).
const prometheus::Histogram::BucketBoundaries& LatencyBuckets() {
  static const auto* buckets = new prometheus::Histogram::BucketBoundaries{
      0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300};
  return *buckets;
}

}  // namespace

const char* RefusalName(Refusal reason) {
  switch (reason) {
    case Refusal::kNoGrant:
      return "no_grant";
    case Refusal::kBudgetExhausted:
      return "budget_exhausted";
    case Refusal::kCapExhausted:
      return "cap_exhausted";
    case Refusal::kDeltaRequired:
      return "delta_required";
    case Refusal::kJobQueueFull:
      return "job_queue_full";
    case Refusal::kUnauthenticated:
      return "unauthenticated";
    case Refusal::kPermissionDenied:
      return "permission_denied";
    case Refusal::kInvalidArgument:
      return "invalid_argument";
    case Refusal::kNotFound:
      return "not_found";
    case Refusal::kFailedPrecondition:
      return "failed_precondition";
    case Refusal::kOther:
      return "other";
  }
  return "other";
}

const char* JobOutcomeName(JobOutcome outcome) {
  switch (outcome) {
    case JobOutcome::kSucceeded:
      return "succeeded";
    case JobOutcome::kFailed:
      return "failed";
    case JobOutcome::kCancelled:
      return "cancelled";
  }
  return "unknown";
}

const std::vector<std::string>& ChargedRequestKinds() {
  static const auto* kinds = new std::vector<std::string>{"NoisyCounts",
                                                          "FitEqualizedOddsPostProcessor",
                                                          "FitStatisticalParityPostProcessor",
                                                          "FitEqualizedOddsScoresPostProcessor",
                                                          "AuditClassifier",
                                                          "AuditRegressor",
                                                          "BestResponse",
                                                          "CellSums",
                                                          "FitFairModel",
                                                          "DecisionLicence"};
  return *kinds;
}

const char* StatusCodeName(int code) {
  if (code < 0 || code >= static_cast<int>(std::size(kStatusCodeNames))) return "UNKNOWN";
  return kStatusCodeNames[code];
}

Metrics::Metrics(const std::vector<std::string>& methods)
    : methods_(methods.begin(), methods.end()),
      kinds_(ChargedRequestKinds().begin(), ChargedRequestKinds().end()),
      registry_(std::make_shared<prometheus::Registry>()) {
  requests_ = &prometheus::BuildCounter()
                   .Name("fairvault_grpc_requests_total")
                   .Help("Finished gRPC calls by full method name and status code.")
                   .Register(*registry_);
  latency_ = &prometheus::BuildHistogram()
                  .Name("fairvault_grpc_request_duration_seconds")
                  .Help("Time from the start of a gRPC call to its status, by method and code.")
                  .Register(*registry_);
  charges_ = &prometheus::BuildCounter()
                  .Name("fairvault_charges_total")
                  .Help(
                      "Charges committed to the ledger by this process, by request kind; "
                      "outcome=failed: the release failed after its noise was drawn and was "
                      "charged all the same. Replays are not charges.")
                  .Register(*registry_);
  replays_ = &prometheus::BuildCounter()
                  .Name("fairvault_replays_total")
                  .Help(
                      "Spending requests answered from their stored response (same "
                      "idempotency key and parameters), not charged again, by request kind.")
                  .Register(*registry_);
  refusals_ = &prometheus::BuildCounter()
                   .Name("fairvault_refusals_total")
                   .Help(
                       "Spending requests turned down without a charge, by request kind and "
                       "reason.")
                   .Register(*registry_);
  auto& queued = prometheus::BuildGauge()
                     .Name("fairvault_jobs_queued")
                     .Help("Training jobs waiting for a worker of this process.")
                     .Register(*registry_);
  jobs_queued_ = &queued.Add({});
  auto& running = prometheus::BuildGauge()
                      .Name("fairvault_jobs_running")
                      .Help("Training jobs running on this process's workers.")
                      .Register(*registry_);
  jobs_running_ = &running.Add({});
  jobs_finished_ = &prometheus::BuildCounter()
                        .Name("fairvault_jobs_finished_total")
                        .Help(
                            "Training jobs finished by this process, by final state "
                            "(cancelled: counted where the cancel was accepted).")
                        .Register(*registry_);
  auto& wal = prometheus::BuildGauge()
                  .Name("fairvault_sqlite_wal_bytes")
                  .Help(
                      "Size of the SQLite store's write-ahead log file (<db>-wal) in bytes, "
                      "sampled every 200 ms; 0 on PostgreSQL.")
                  .Register(*registry_);
  sqlite_wal_bytes_ = &wal.Add({});
  table_cache_tables_ = &prometheus::BuildGauge()
                             .Name("fairvault_table_cache_tables")
                             .Help("Company tables kept parsed in memory (--table-cache-bytes).")
                             .Register(*registry_)
                             .Add({});
  table_cache_bytes_ = &prometheus::BuildGauge()
                            .Name("fairvault_table_cache_bytes")
                            .Help(
                                "Estimated bytes of those tables: parsed columns, joins with "
                                "the subject index and column dictionaries.")
                            .Register(*registry_)
                            .Add({});
  charge_commits_ = &prometheus::BuildCounter()
                         .Name("fairvault_charge_commits_total")
                         .Help(
                             "Committed transactions of charges (one sync each); concurrent "
                             "charges share one (group commit).")
                         .Register(*registry_)
                         .Add({});
  charge_commit_charges_ = &prometheus::BuildCounter()
                                .Name("fairvault_charge_commit_charges_total")
                                .Help(
                                    "Charges (and replays) in those transactions: divided by "
                                    "fairvault_charge_commits_total, the charges per sync.")
                                .Register(*registry_)
                                .Add({});
  // Series that exist from the start, so that rates and alerts see a 0 before the first event.
  for (const std::string& kind : kinds_) {
    charges_->Add({{"kind", kind}, {"outcome", "released"}});
    charges_->Add({{"kind", kind}, {"outcome", "failed"}});
    replays_->Add({{"kind", kind}});
  }
  for (JobOutcome o : {JobOutcome::kSucceeded, JobOutcome::kFailed, JobOutcome::kCancelled}) {
    jobs_finished_->Add({{"state", JobOutcomeName(o)}});
  }
}

Metrics::~Metrics() = default;

std::string Metrics::KindLabel(absl::string_view kind) const {
  return kinds_.contains(kind) ? std::string(kind) : "other";
}

void Metrics::RecordRpc(absl::string_view method, int code, double seconds) {
  const prometheus::Labels labels = {
      {"method", methods_.contains(method) ? std::string(method) : "unknown"},
      {"code", StatusCodeName(code)}};
  requests_->Add(labels).Increment();
  latency_->Add(labels, LatencyBuckets()).Observe(seconds);
}

void Metrics::RecordCharge(absl::string_view kind, bool failed) {
  charges_->Add({{"kind", KindLabel(kind)}, {"outcome", failed ? "failed" : "released"}})
      .Increment();
}

void Metrics::RecordReplay(absl::string_view kind) {
  replays_->Add({{"kind", KindLabel(kind)}}).Increment();
}

void Metrics::RecordRefusal(absl::string_view kind, Refusal reason) {
  refusals_->Add({{"kind", KindLabel(kind)}, {"reason", RefusalName(reason)}}).Increment();
}

void Metrics::SetJobLoad(int queued, int running) {
  jobs_queued_->Set(queued);
  jobs_running_->Set(running);
}

void Metrics::RecordJobFinished(JobOutcome outcome) {
  jobs_finished_->Add({{"state", JobOutcomeName(outcome)}}).Increment();
}

void Metrics::SetTableCache(int64_t tables, int64_t bytes) {
  table_cache_tables_->Set(static_cast<double>(tables));
  table_cache_bytes_->Set(static_cast<double>(bytes));
}

void Metrics::RecordChargeCommit(int64_t charges) {
  charge_commits_->Increment();
  charge_commit_charges_->Increment(static_cast<double>(charges));
}

void Metrics::SetSqliteWalBytes(int64_t bytes) {
  sqlite_wal_bytes_->Set(static_cast<double>(bytes));
}

std::string Metrics::Text() const {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, registry_->Collect());
  return out.str();
}

absl::Status MarkCounted(absl::Status status) {
  if (!status.ok()) status.SetPayload(kCountedPayload, absl::Cord());
  return status;
}

bool IsCounted(const absl::Status& status) {
  return status.GetPayload(kCountedPayload).has_value();
}

Refusal RefusalFromCode(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kUnauthenticated:
      return Refusal::kUnauthenticated;
    case absl::StatusCode::kPermissionDenied:
      return Refusal::kPermissionDenied;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      return Refusal::kInvalidArgument;
    case absl::StatusCode::kNotFound:
      return Refusal::kNotFound;
    case absl::StatusCode::kFailedPrecondition:
      return Refusal::kFailedPrecondition;
    default:
      return Refusal::kOther;
  }
}

std::optional<Refusal> FilterRefusal(const absl::Status& status) {
  // The wording is storage::AdmitCharge's (store_common.cc), the same for every backend. No
  // name can contain these phrases: names are [a-z0-9_-].
  switch (status.code()) {
    case absl::StatusCode::kPermissionDenied:
      return Refusal::kNoGrant;
    case absl::StatusCode::kResourceExhausted:
      if (absl::StrContains(status.message(), " training jobs; retry later")) {
        return Refusal::kJobQueueFull;  // storage::JobLimitReached
      }
      return absl::StrContains(status.message(), "dataset-wide cap") ? Refusal::kCapExhausted
                                                                     : Refusal::kBudgetExhausted;
    case absl::StatusCode::kFailedPrecondition:
      if (absl::StrContains(status.message(), "delta 0")) return Refusal::kDeltaRequired;
      return std::nullopt;
    default:
      return std::nullopt;
  }
}

}  // namespace fairvault::server
