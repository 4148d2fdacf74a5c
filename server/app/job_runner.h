// The training-job machinery (issue 9 §4): a bounded pool of worker threads that runs jobs the
// charge path created. A job is claimed in the store (queued -> running), run by a function of
// its record, and finished atomically with its artifact. Jobs left running by a dead process
// are re-queued at start-up and run again from the same stored randomness, so they produce
// the same artifact. Training never holds the ledger's write lock or a gRPC thread.
#ifndef FAIRVAULT_SERVER_APP_JOB_RUNNER_H_
#define FAIRVAULT_SERVER_APP_JOB_RUNNER_H_

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
#include "server/app/clock.h"
#include "server/app/metrics.h"
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
  // Returning Aborted means "stopped on request": the runner then leaves the job's state to
  // whoever stopped it (cancelled stays cancelled; at shutdown it stays running and is
  // re-queued by the next process).
  using RunFn = std::function<absl::StatusOr<storage::ArtifactRecord>(
      const storage::JobRecord& job, JobControl& control)>;

  JobRunner(storage::Store* store, const Clock* clock, int workers, RunFn run);
  // Stops the workers: running jobs are asked to stop and are left for the next start.
  ~JobRunner();
  JobRunner(const JobRunner&) = delete;
  JobRunner& operator=(const JobRunner&) = delete;

  // Re-queues jobs left running, queues every unfinished job and starts the workers.
  absl::Status Start();
  // A job was created (committed): queue it.
  void Submit(const std::string& job_id);
  // Asks a running job to stop (after the store marked it cancelled).
  void Cancel(const std::string& job_id);
  // Jobs queued in memory plus running: for the queue-length limit.
  int Pending();
  // Where to count this runner's queued and running jobs and the jobs it finishes (null: not
  // counted). Call before Start.
  void set_metrics(Metrics* metrics) { metrics_ = metrics; }

 private:
  class Control;
  void Work();
  void PublishLoad() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  storage::Store* store_;
  const Clock* clock_;
  const int workers_;
  RunFn run_;
  Metrics* metrics_ = nullptr;
  absl::Mutex mu_;
  std::deque<std::string> queue_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> running_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> cancelled_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace fairvault::server

#endif  // FAIRVAULT_SERVER_APP_JOB_RUNNER_H_
