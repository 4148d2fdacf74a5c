// The training-job worker pool: a queue of job ids in memory, a fixed number of workers that
// claim jobs in the store, run them and store their outcome.
#include "server/jobs/job_runner.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/util/status_macros.h"
#include "server/storage/store_common.h"
#include "server/util/crypto.h"

namespace fairvault::server {
namespace {

// Progress is written to the store at most this often per job: a learner may report every
// round, and each write is a SQLite transaction behind the store's one connection.
constexpr std::chrono::milliseconds kProgressPeriod(200);

// A store failure the runner cannot hand to anyone (a worker thread has no caller).
void Report(const std::string& job_id, const char* what, const absl::Status& status) {
  std::cerr << "fairvault: job " << job_id << ": " << what << ": " << status << "\n";
}

// "host:pid:random": unique per runner, readable in the jobs table.
std::string NewOwnerId() {
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  return absl::StrCat(host, ":", getpid(), ":", HexEncode(RandomBytes(6)));
}

}  // namespace

class JobRunner::Control final : public JobControl {
 public:
  Control(JobRunner* runner, std::string job_id) : runner_(runner), job_id_(std::move(job_id)) {}

  bool Progress(int64_t done, int64_t total) override {
    if (runner_->StopRequested(job_id_)) return false;
    const auto now = std::chrono::steady_clock::now();
    if (!written_ || now - last_write_ >= kProgressPeriod) {
      written_ = true;
      last_write_ = now;
      // Progress is advisory: a failed write must not stop the training.
      absl::Status s = runner_->store_->UpdateJobProgress(job_id_, runner_->owner_, done, total);
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

JobRunner::JobRunner(storage::Store* store, const Clock* clock, int workers, RunFn run,
                     int64_t lease_micros)
    : store_(store),
      clock_(clock),
      workers_(workers),
      run_(std::move(run)),
      lease_micros_(lease_micros),
      owner_(NewOwnerId()) {}

JobRunner::~JobRunner() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& t : threads_) t.join();
  if (keeper_.joinable()) keeper_.join();
}

storage::JobLease JobRunner::LeaseFrom(int64_t now_micros) const {
  return storage::JobLease{owner_, now_micros, now_micros + lease_micros_};
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
  if (lease_micros_ < 3'000) {
    return absl::InvalidArgumentError(
        absl::StrCat("the job lease must be at least 3 ms (got ", lease_micros_, " us)"));
  }
  {
    absl::MutexLock lock(&mu_);
    if (started_) return absl::FailedPreconditionError("the job runner was started already");
    started_ = true;
  }
  RETURN_IF_ERROR(Scan());
  absl::MutexLock lock(&mu_);
  for (int i = 0; i < workers_; ++i) threads_.emplace_back([this] { Work(); });
  keeper_ = std::thread([this] { Keep(); });
  return absl::OkStatus();
}

absl::Status JobRunner::Scan() {
  const int64_t now = clock_->NowMicros();
  ASSIGN_OR_RETURN(std::vector<storage::JobRecord> unfinished, store_->ListUnfinishedJobs());
  absl::MutexLock lock(&mu_);
  for (const storage::JobRecord& job : unfinished) {
    const bool claimable =
        job.state == storage::JobState::kQueued ||
        (job.state == storage::JobState::kRunning && job.lease_expires_micros < now);
    if (claimable && running_.count(job.id) == 0 &&
        std::find(queue_.begin(), queue_.end(), job.id) == queue_.end()) {
      queue_.push_back(job.id);
    }
  }
  PublishLoad();
  return absl::OkStatus();
}

void JobRunner::Keep() {
  const absl::Duration period = std::min(absl::Seconds(1), absl::Microseconds(lease_micros_ / 3));
  while (true) {
    std::vector<std::string> running;
    {
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&stopping_), period)) return;
      running.assign(claimed_.begin(), claimed_.end());
    }
    for (const std::string& id : running) {
      absl::Status renewed = store_->RenewJobLease(id, LeaseFrom(clock_->NowMicros()));
      if (absl::IsFailedPrecondition(renewed) || absl::IsNotFound(renewed)) {
        // Cancelled, or taken over after a lease this runner could not renew in time: stop it
        // (its FinishJob would be refused anyway).
        absl::MutexLock lock(&mu_);
        if (claimed_.count(id) > 0) cancelled_.insert(id);
      } else if (!renewed.ok()) {
        Report(id, "lease not renewed", renewed);
      }
    }
    if (absl::Status scanned = Scan(); !scanned.ok()) Report("*", "jobs not listed", scanned);
  }
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

bool JobRunner::Stopping() {
  absl::MutexLock lock(&mu_);
  return stopping_;
}

bool JobRunner::StopRequested(const std::string& id) {
  absl::MutexLock lock(&mu_);
  return stopping_ || cancelled_.count(id) > 0;
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
    absl::StatusOr<storage::JobRecord> job = store_->StartJob(id, LeaseFrom(clock_->NowMicros()));
    if (job.ok()) {
      {
        absl::MutexLock lock(&mu_);
        claimed_.insert(id);
      }
      Control control(this, id);
      absl::StatusOr<storage::ArtifactRecord> artifact = run_(*job, control);
      if (artifact.ok()) {
        absl::Status s = store_->FinishJob(id, owner_, *artifact, clock_->NowMicros());
        // FailedPrecondition: cancelled while it ran (it stays cancelled, without artifact),
        // or taken over by another runner (which stores the same artifact).
        if (!s.ok() && !absl::IsFailedPrecondition(s)) Report(id, "artifact not stored", s);
        if (s.ok() && metrics_ != nullptr) metrics_->RecordJobFinished(JobOutcome::kSucceeded);
      } else if (absl::IsAborted(artifact.status()) && StopRequested(id)) {
        if (Stopping()) {
          // Stopped by shutdown: the lease ends now, so another runner takes the job over at
          // once. (Stopped by a cancel, the canceller owns the state.)
          absl::Status s = store_->RenewJobLease(id, storage::JobLease{owner_, 0, 0});
          if (!s.ok() && !absl::IsFailedPrecondition(s)) Report(id, "lease not released", s);
        }
      } else if (storage::IsFailureToRetry(artifact.status()) &&
                 job->attempts < kMaxAttemptsToRetry) {
        // The vault's database (or an import under way) stopped the run, not the job: it is
        // not failed, after its charge, for that. Its lease is no longer renewed; when it
        // ends, a runner (this one too) takes the job over and runs it again from its stored
        // randomness, to the same artifact. The lease is the wait between two attempts.
        Report(id, "stopped; it runs again when its lease ends", artifact.status());
      } else {
        // The database's own words stay in the log: the job's error is the company's to read.
        const bool stopped_by_database = storage::IsFailureToRetry(artifact.status());
        if (stopped_by_database) Report(id, "failed", artifact.status());
        const std::string error =
            stopped_by_database
                ? absl::StrCat("the vault's database stopped this job's run ", job->attempts,
                               " times (unavailable, a conflict or a time limit); nothing more "
                               "was charged, submit it again with a new idempotency key")
                : std::string(artifact.status().message());
        absl::Status s = store_->FailJob(id, owner_, error, clock_->NowMicros());
        if (!s.ok() && !absl::IsFailedPrecondition(s)) Report(id, "failure not stored", s);
        if (s.ok() && metrics_ != nullptr) metrics_->RecordJobFinished(JobOutcome::kFailed);
      }
    } else if (!absl::IsFailedPrecondition(job.status())) {
      Report(id, "not started", job.status());
    }
    absl::MutexLock lock(&mu_);
    running_.erase(id);
    claimed_.erase(id);
    cancelled_.erase(id);
    PublishLoad();
  }
}

}  // namespace fairvault::server
