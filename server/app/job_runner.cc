// The training-job worker pool: a queue of job ids in memory, a fixed number of workers that
// claim jobs in the store, run them and store their outcome.
#include "server/app/job_runner.h"

#include <algorithm>
#include <chrono>
#include <iostream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/util/status_macros.h"

namespace fairvault::server {
namespace {

// Progress is written to the store at most this often per job: a learner may report every
// round, and each write is a SQLite transaction behind the store's one connection.
constexpr std::chrono::milliseconds kProgressPeriod(200);

// A store failure the runner cannot hand to anyone (a worker thread has no caller).
void Report(const std::string& job_id, const char* what, const absl::Status& status) {
  std::cerr << "fairvault: job " << job_id << ": " << what << ": " << status << "\n";
}

}  // namespace

class JobRunner::Control final : public JobControl {
 public:
  Control(JobRunner* runner, std::string job_id) : runner_(runner), job_id_(std::move(job_id)) {}

  bool Progress(int64_t done, int64_t total) override {
    {
      absl::MutexLock lock(&runner_->mu_);
      if (runner_->stopping_ || runner_->cancelled_.count(job_id_) > 0) return false;
    }
    const auto now = std::chrono::steady_clock::now();
    if (!written_ || now - last_write_ >= kProgressPeriod) {
      written_ = true;
      last_write_ = now;
      // Progress is advisory: a failed write must not stop the training.
      absl::Status s = runner_->store_->UpdateJobProgress(job_id_, done, total);
      if (!s.ok()) Report(job_id_, "progress not recorded", s);
    }
    return true;
  }

 private:
  JobRunner* runner_;
  const std::string job_id_;
  bool written_ = false;
  std::chrono::steady_clock::time_point last_write_;
};

JobRunner::JobRunner(storage::Store* store, const Clock* clock, int workers, RunFn run)
    : store_(store), clock_(clock), workers_(workers), run_(std::move(run)) {}

JobRunner::~JobRunner() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& t : threads_) t.join();
}

absl::Status JobRunner::Start() {
  if (workers_ < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("job_workers must be >= 1 (got ", workers_, ")"));
  }
  {
    absl::MutexLock lock(&mu_);
    if (started_) return absl::FailedPreconditionError("the job runner was started already");
  }
  // Jobs left running belong to a runner that died with its process.
  RETURN_IF_ERROR(store_->RequeueRunningJobs());
  ASSIGN_OR_RETURN(std::vector<storage::JobRecord> unfinished, store_->ListUnfinishedJobs());
  absl::MutexLock lock(&mu_);
  if (started_) return absl::FailedPreconditionError("the job runner was started already");
  for (const storage::JobRecord& job : unfinished) {
    if (std::find(queue_.begin(), queue_.end(), job.id) == queue_.end()) {
      queue_.push_back(job.id);
    }
  }
  PublishLoad();
  started_ = true;
  for (int i = 0; i < workers_; ++i) threads_.emplace_back([this] { Work(); });
  return absl::OkStatus();
}

void JobRunner::Submit(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  // Start() may have queued it already (it lists every unfinished job).
  if (running_.count(job_id) > 0 ||
      std::find(queue_.begin(), queue_.end(), job_id) != queue_.end()) {
    return;
  }
  queue_.push_back(job_id);
  PublishLoad();
}

void JobRunner::Cancel(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  queue_.erase(std::remove(queue_.begin(), queue_.end(), job_id), queue_.end());
  // Only a running job has a Control to tell; the set entry goes when its worker is done.
  if (running_.count(job_id) > 0) cancelled_.insert(job_id);
  PublishLoad();
}

int JobRunner::Pending() {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(queue_.size() + running_.size());
}

void JobRunner::PublishLoad() {
  if (metrics_ != nullptr) {
    metrics_->SetJobLoad(static_cast<int>(queue_.size()), static_cast<int>(running_.size()));
  }
}

void JobRunner::Work() {
  while (true) {
    std::string id;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]()
                       ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || !queue_.empty(); };
      mu_.Await(absl::Condition(&ready));
      if (stopping_) return;
      id = std::move(queue_.front());
      queue_.pop_front();
      running_.insert(id);
      PublishLoad();
    }
    // The claim is the store's: a job cancelled or taken meanwhile is not run.
    absl::StatusOr<storage::JobRecord> job = store_->StartJob(id, clock_->NowMicros());
    if (job.ok()) {
      Control control(this, id);
      absl::StatusOr<storage::ArtifactRecord> artifact = run_(*job, control);
      if (artifact.ok()) {
        absl::Status s = store_->FinishJob(id, *artifact, clock_->NowMicros());
        // FailedPrecondition: cancelled while it ran (it stays cancelled, without artifact).
        if (!s.ok() && !absl::IsFailedPrecondition(s)) Report(id, "artifact not stored", s);
        if (s.ok() && metrics_ != nullptr) metrics_->RecordJobFinished(JobOutcome::kSucceeded);
      } else if (!absl::IsAborted(artifact.status())) {
        absl::Status s =
            store_->FailJob(id, std::string(artifact.status().message()), clock_->NowMicros());
        if (!s.ok() && !absl::IsFailedPrecondition(s)) Report(id, "failure not stored", s);
        if (s.ok() && metrics_ != nullptr) metrics_->RecordJobFinished(JobOutcome::kFailed);
      }
      // Aborted: stopped on request; whoever asked owns the state (cancelled, or left running
      // at shutdown for the next process to re-queue).
    } else if (!absl::IsFailedPrecondition(job.status())) {
      Report(id, "not started", job.status());
    }
    absl::MutexLock lock(&mu_);
    running_.erase(id);
    cancelled_.erase(id);
    PublishLoad();
  }
}

}  // namespace fairvault::server
