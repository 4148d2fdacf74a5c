// Training jobs as the caller sees them (issue 9 §4): a company reads and cancels its own
// jobs, auditors and the regulator read every company's. The runner itself is job_runner.h;
// the training a job runs is Vault::RunJob (vault_models.cc).
#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "core/util/status_macros.h"
#include "core/util/truncate.h"
#include "server/app/vault.h"
#include "server/app/vault_internal.h"

namespace fairvault::server {
namespace {

using storage::JobState;
using storage::Role;

v1::JobState ToProtoJobState(JobState state) {
  switch (state) {
    case JobState::kQueued:
      return v1::JOB_STATE_QUEUED;
    case JobState::kRunning:
      return v1::JOB_STATE_RUNNING;
    case JobState::kSucceeded:
      return v1::JOB_STATE_SUCCEEDED;
    case JobState::kFailed:
      return v1::JOB_STATE_FAILED;
    case JobState::kCancelled:
      return v1::JOB_STATE_CANCELLED;
  }
  return v1::JOB_STATE_UNSPECIFIED;
}

// Names of accounts and datasets, each looked up once per request.
class NameCache {
 public:
  explicit NameCache(storage::Store* store) : store_(store) {}
  absl::StatusOr<std::string> Account(int64_t id) {
    auto it = accounts_.find(id);
    if (it != accounts_.end()) return it->second;
    ASSIGN_OR_RETURN(storage::AccountRecord account, store_->GetAccountById(id));
    return accounts_[id] = account.name;
  }
  absl::StatusOr<std::string> Dataset(int64_t id) {
    auto it = datasets_.find(id);
    if (it != datasets_.end()) return it->second;
    ASSIGN_OR_RETURN(storage::DatasetRecord dataset, store_->GetDatasetById(id));
    return datasets_[id] = dataset.name;
  }

 private:
  storage::Store* store_;
  std::map<int64_t, std::string> accounts_;
  std::map<int64_t, std::string> datasets_;
};

absl::StatusOr<v1::Job> ToProtoJob(const storage::JobRecord& record, NameCache& names,
                                   int64_t now_micros) {
  v1::Job job;
  job.set_id(record.id);
  ASSIGN_OR_RETURN(*job.mutable_dataset(), names.Dataset(record.dataset_id));
  ASSIGN_OR_RETURN(*job.mutable_company(), names.Account(record.account_id));
  job.set_algorithm(static_cast<v1::FairModelAlgorithm>(record.algorithm));
  job.set_state(ToProtoJobState(record.state));
  job.set_done(record.done);
  job.set_total(record.total);
  job.set_submitted_unix(record.submitted_micros / 1'000'000);
  // A re-queued job (after a restart) keeps its last attempt's start: it is not running now.
  if (record.started_micros > 0 && record.state != JobState::kQueued) {
    const int64_t end = record.finished_micros > 0 ? record.finished_micros : now_micros;
    job.set_elapsed_seconds(std::max<int64_t>(0, end - record.started_micros) / 1e6);
  }
  if (record.state == JobState::kSucceeded) job.set_artifact_id(record.artifact_id);
  if (record.state == JobState::kFailed || record.state == JobState::kCancelled) {
    job.set_error(record.error);
  }
  job.set_ledger_seq(record.ledger_seq);
  job.set_idempotency_key(record.idempotency_key);
  return job;
}

// The job `id` if the caller may see it. To a company, another company's job is an unknown
// id: whether the id exists is not disclosed.
absl::StatusOr<storage::JobRecord> LoadJob(storage::Store* store, const Caller& caller,
                                           const std::string& id) {
  if (id.empty()) return absl::InvalidArgumentError("job_id must be set");
  const absl::Status unknown = absl::NotFoundError(
      absl::StrCat("unknown job_id '", core::Truncated(id), "'; list your jobs to see their ids"));
  auto job = store->GetJob(id);
  if (absl::IsNotFound(job.status())) return unknown;
  RETURN_IF_ERROR(job.status());
  if (caller.role == Role::kCompany && job->account_id != caller.account_id) return unknown;
  return job;
}

}  // namespace

absl::StatusOr<v1::GetJobResponse> Vault::GetJob(const Caller& caller,
                                                 const v1::GetJobRequest& req) {
  RETURN_IF_ERROR(
      internal::RequireRole(caller, {Role::kCompany, Role::kAuditor, Role::kRegulator}));
  ASSIGN_OR_RETURN(storage::JobRecord record, LoadJob(store_, caller, req.job_id()));
  NameCache names(store_);
  v1::GetJobResponse resp;
  ASSIGN_OR_RETURN(*resp.mutable_job(), ToProtoJob(record, names, clock_->NowMicros()));
  return resp;
}

absl::StatusOr<v1::ListJobsResponse> Vault::ListJobs(const Caller& caller,
                                                     const v1::ListJobsRequest& req) {
  RETURN_IF_ERROR(
      internal::RequireRole(caller, {Role::kCompany, Role::kAuditor, Role::kRegulator}));
  if (req.limit() < 0 || req.limit() > 1000) {
    return absl::InvalidArgumentError(
        absl::StrCat("limit must be 1..1000, or 0 for 100 (got ", req.limit(), ")"));
  }
  storage::JobFilter filter;
  filter.limit = req.limit() == 0 ? 100 : req.limit();
  if (caller.role == Role::kCompany) {
    if (!req.company().empty()) {
      return absl::InvalidArgumentError(
          "company: a company lists only its own jobs; leave company empty");
    }
    filter.account_id = caller.account_id;
  } else if (!req.company().empty()) {
    ASSIGN_OR_RETURN(storage::AccountRecord account, store_->GetAccountByName(req.company()));
    filter.account_id = account.id;
  }
  if (!req.dataset().empty()) {
    ASSIGN_OR_RETURN(storage::DatasetRecord dataset, store_->GetDataset(req.dataset()));
    filter.dataset_id = dataset.id;
  }
  ASSIGN_OR_RETURN(std::vector<storage::JobRecord> records, store_->ListJobs(filter));
  NameCache names(store_);
  const int64_t now = clock_->NowMicros();
  v1::ListJobsResponse resp;
  for (const storage::JobRecord& record : records) {
    ASSIGN_OR_RETURN(*resp.add_jobs(), ToProtoJob(record, names, now));
  }
  return resp;
}

absl::StatusOr<v1::CancelJobResponse> Vault::CancelJob(const Caller& caller,
                                                       const v1::CancelJobRequest& req) {
  RETURN_IF_ERROR(internal::RequireRole(caller, {Role::kCompany}));
  ASSIGN_OR_RETURN(storage::JobRecord record, LoadJob(store_, caller, req.job_id()));
  const bool unfinished = record.state == JobState::kQueued || record.state == JobState::kRunning;
  // The store decides (a finished job comes back unchanged); then a running job is told.
  ASSIGN_OR_RETURN(record, store_->CancelJob(record.id, clock_->NowMicros()));
  if (record.state == JobState::kCancelled) {
    jobs_->Cancel(record.id);
    if (unfinished && options_.metrics != nullptr) {
      options_.metrics->RecordJobFinished(JobOutcome::kCancelled);
    }
  }
  NameCache names(store_);
  v1::CancelJobResponse resp;
  ASSIGN_OR_RETURN(*resp.mutable_job(), ToProtoJob(record, names, clock_->NowMicros()));
  return resp;
}

absl::Status Vault::StartJobs() {
  jobs_->set_metrics(options_.metrics);
  return jobs_->Start();
}

void Vault::SubmitJob(const std::string& job_id) { jobs_->Submit(job_id); }

}  // namespace fairvault::server
