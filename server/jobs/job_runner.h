// The training-job machinery (issue 9 §4): a bounded pool of worker threads that runs jobs the
// charge path created. A job is claimed in the store (queued -> running), run by a function of
// its record, and finished atomically with its artifact. Several runners (one per vault
// process, replicas on one PostgreSQL) share the store: a claim is a lease the runner renews
// while the job runs; a job whose runner died (its lease ended) is taken over by any runner and
// run again from the same stored randomness, so it produces the same artifact. Training never
// holds the ledger's write lock or a gRPC thread.
#ifndef FAIRVAULT_SERVER_JOBS_JOB_RUNNER_H_
#define FAIRVAULT_SERVER_JOBS_JOB_RUNNER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/util/clock.h"
#include "server/metrics/metrics.h"
#include "server/storage/store.h"

namespace fairvault::server {

// What a running job sees of its runner.
class JobControl {
 public:
  virtual ~JobControl() = default;
  // Reports progress (`done` of `total` steps); returns false when the job should stop now
  // (it was cancelled, or the runner is shutting down).
  virtual bool Progress(int64_t done, int64_t total) = 0;
};

class JobRunner {
 public:
  // Computes a job's artifact. Must be deterministic given the record and stored data.
  // Returning Aborted after a stop was requested (JobControl::Progress returned false) means
  // "stopped on request": the runner then leaves the job's state to whoever stopped it
  // (cancelled stays cancelled; at shutdown it stays running and is re-queued by the next
  // process). Returning a failure to retry (storage::IsFailureToRetry: the database
  // unavailable, a conflict, a timeout) leaves the job running until its lease ends; then it is
  // run again, up to kMaxAttemptsToRetry runs in all, then failed. Any other error fails the
  // job with its message.
  using RunFn = std::function<absl::StatusOr<storage::ArtifactRecord>(const storage::JobRecord& job,
                                                                      JobControl& control)>;

  static constexpr int64_t kDefaultLeaseMicros = 30'000'000;
  // Runs a failure to retry may stop before the job fails with it (a statement_timeout its
  // reads always exceed would otherwise keep it running, and holding a job slot, for ever).
  static constexpr int32_t kMaxAttemptsToRetry = 5;

  // `lease_micros`: how long a claim lasts without renewal, so how long a dead runner's job
  // waits before another takes it over. Renewed every lease/3 (at most every second).
  JobRunner(storage::Store* store, const Clock* clock, int workers, RunFn run,
            int64_t lease_micros = kDefaultLeaseMicros);
  // Stops the workers: running jobs are asked to stop and their leases released, so another
  // runner (or the next process) takes them over at once.
  ~JobRunner();
  JobRunner(const JobRunner&) = delete;
  JobRunner& operator=(const JobRunner&) = delete;

  // Queues every unfinished job (queued, or running on a lease that ended) and starts the
  // workers and the keeper, which renews this runner's leases and picks up jobs other runners
  // submitted or left behind.
  absl::Status Start();
  // A job was created (committed): queue it.
  void Submit(const std::string& job_id);
  // Asks a running job to stop (after the store marked it cancelled).
  void Cancel(const std::string& job_id);
  // Jobs queued in memory plus running here. (The job limit counts the store's unfinished
  // jobs instead, inside the charge: storage::ChargeRequest::job_limit.)
  int Pending();
  // Where to count this runner's queued and running jobs and the jobs it finishes (null: not
  // counted). Call before Start.
  void set_metrics(Metrics* metrics) { metrics_ = metrics; }
  // This runner's lease owner id (host, process and random suffix).
  const std::string& owner() const { return owner_; }

 private:
  class Control;
  void Work();
  void PublishLoad() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Every period: renews the leases of running jobs (a lost lease stops its job) and queues
  // claimable jobs from the store.
  void Keep();
  // Queues the claimable unfinished jobs that are neither queued nor running here.
  absl::Status Scan();
  storage::JobLease LeaseFrom(int64_t now_micros) const;
  bool Stopping();
  // Whether the job was asked to stop: the runner is stopping, or the job was cancelled or
  // lost its lease.
  bool StopRequested(const std::string& id);

  storage::Store* store_;
  const Clock* clock_;
  const int workers_;
  RunFn run_;
  Metrics* metrics_ = nullptr;
  const int64_t lease_micros_;
  const std::string owner_;
  absl::Mutex mu_;
  std::deque<std::string> queue_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> running_ ABSL_GUARDED_BY(mu_);
  // Of those, the ones this runner has claimed in the store (holds a lease on): only these are
  // renewed (a job taken from the queue but not yet claimed has no lease to renew).
  std::set<std::string> claimed_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> cancelled_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
  std::thread keeper_;
};

}  // namespace fairvault::server

#endif  // FAIRVAULT_SERVER_JOBS_JOB_RUNNER_H_
