// Tests of the job runner on a real SQLite store: jobs run to their artifact, a cancelled job
// stops, a job interrupted by shutdown is re-run to success by the next runner, a failing job
// records its message.
#include "server/jobs/job_runner.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "core/accounting/accountant.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/util/clock.h"
#include "server/storage/sqlite/sqlite_store.h"

namespace fairvault::server {
namespace {

using ::fairvault::testing::StatusIs;
using storage::ArtifactRecord;
using storage::JobRecord;
using storage::JobState;

constexpr int64_t kStartMicros = 1'700'000'000'000'000;

class JobRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = absl::StrCat(::testing::TempDir(), "fairvault_job_runner_test_", info->name(), "_",
                         getpid(), ".db");
    RemoveFiles();
    auto opened = storage::SqliteStore::Open(path_);
    ASSERT_OK(opened);
    store_ = *std::move(opened);
    storage::AccountRecord account;
    account.name = "acme";
    account.role = storage::Role::kCompany;
    auto created = store_->CreateAccount(account);
    ASSERT_OK(created);
    acme_ = *created;
    storage::DatasetRecord dataset;
    dataset.name = "census";
    auto made = store_->CreateDataset(dataset);
    ASSERT_OK(made);
    census_ = *made;
    ASSERT_OK(store_->SetGrant(storage::GrantRecord{acme_.id, census_.id, 100'000'000, 0},
                               acme_.name, census_.name, "regulator", clock_.NowMicros()));
  }

  void TearDown() override {
    store_.reset();
    RemoveFiles();
  }

  void RemoveFiles() {
    for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
      std::remove(absl::StrCat(path_, suffix).c_str());
    }
  }

  // Creates a job the only way the vault does: with the charge that pays for it.
  void CreateJob(const std::string& id) {
    storage::ChargeRequest request;
    request.account_id = acme_.id;
    request.account_name = acme_.name;
    request.dataset_id = census_.id;
    request.dataset_name = census_.name;
    request.request_kind = "FitFairModel";
    request.idempotency_key = absl::StrCat("key-", id);
    request.params_digest = "digest";
    request.cost = core::accounting::LaplaceCost(100'000);
    request.epsilon = 0.1;
    request.mechanism = "test";
    JobRecord job;
    job.id = id;
    job.account_id = acme_.id;
    job.dataset_id = census_.id;
    job.idempotency_key = request.idempotency_key;
    job.table_handle = "tbl";
    job.seed = std::string(32, '\x05');
    job.total = 10;
    ASSERT_OK(store_->Charge(
        request, clock_.NowMicros(),
        [&](int64_t, const storage::BudgetState&) -> absl::StatusOr<storage::ChargeResult> {
          return storage::ChargeResult{"resp", std::nullopt, job};
        }));
  }

  JobRecord Job(const std::string& id) {
    auto job = store_->GetJob(id);
    EXPECT_OK(job);
    return job.ok() ? *job : JobRecord{};
  }

  // Polls the store until `done(job)` holds (up to 20 s); false on time-out.
  template <typename Done>
  bool WaitFor(const std::string& id, Done done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      auto job = store_->GetJob(id);
      if (job.ok() && done(*job)) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return false;
  }
  bool WaitForState(const std::string& id, JobState state) {
    return WaitFor(id, [state](const JobRecord& j) { return j.state == state; });
  }

  static ArtifactRecord ArtifactFor(const JobRecord& job) {
    return ArtifactRecord{absl::StrCat("art_", job.id),
                          job.account_id,
                          job.dataset_id,
                          0,
                          1,
                          absl::StrCat("model of ", job.id, " attempt ", job.attempts)};
  }

  // A RunFn that reports progress until told to stop; returns Aborted when asked to stop.
  JobRunner::RunFn RunUntilStopped(absl::Notification* started,
                                   std::atomic<int>* stopped_by_request) {
    return [started, stopped_by_request](const JobRecord&,
                                         JobControl& control) -> absl::StatusOr<ArtifactRecord> {
      if (!started->HasBeenNotified()) started->Notify();
      for (int64_t step = 0;; ++step) {
        if (!control.Progress(step % 10, 10)) {
          ++*stopped_by_request;
          return absl::AbortedError("stopped");
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    };
  }

  std::string path_;
  FakeClock clock_{kStartMicros};
  std::unique_ptr<storage::SqliteStore> store_;
  storage::AccountRecord acme_;
  storage::DatasetRecord census_;
};

TEST_F(JobRunnerTest, RunsQueuedAndSubmittedJobsToTheirArtifacts) {
  CreateJob("job_before");  // unfinished when the runner starts
  std::atomic<int> runs{0};
  JobRunner runner(
      store_.get(), &clock_, 2,
      [&](const JobRecord& job, JobControl& control) -> absl::StatusOr<ArtifactRecord> {
        ++runs;
        EXPECT_TRUE(control.Progress(10, 10));
        return ArtifactFor(job);
      });
  ASSERT_OK(runner.Start());
  CreateJob("job_after");
  runner.Submit("job_after");
  runner.Submit("job_after");  // a duplicate submission runs once
  ASSERT_TRUE(WaitForState("job_before", JobState::kSucceeded));
  ASSERT_TRUE(WaitForState("job_after", JobState::kSucceeded));
  for (const char* id : {"job_before", "job_after"}) {
    const JobRecord job = Job(id);
    EXPECT_EQ(job.artifact_id, absl::StrCat("art_", id));
    EXPECT_EQ(job.attempts, 1);
    EXPECT_EQ(job.done, 10);
    auto artifact = store_->GetArtifact(job.artifact_id);
    ASSERT_OK(artifact);
    EXPECT_EQ(artifact->payload, absl::StrCat("model of ", id, " attempt 1"));
    EXPECT_EQ(artifact->ledger_seq, job.ledger_seq);
  }
  EXPECT_EQ(runs.load(), 2);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (runner.Pending() != 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(runner.Pending(), 0);
  EXPECT_THAT(runner.Start(), StatusIs(absl::StatusCode::kFailedPrecondition));
}

TEST_F(JobRunnerTest, ProgressReachesTheStoreWhileRunning) {
  CreateJob("job_a");
  absl::Notification release;
  JobRunner runner(
      store_.get(), &clock_, 1,
      [&](const JobRecord& job, JobControl& control) -> absl::StatusOr<ArtifactRecord> {
        control.Progress(3, 10);  // the first report is written at once
        release.WaitForNotification();
        return ArtifactFor(job);
      });
  ASSERT_OK(runner.Start());
  EXPECT_TRUE(WaitFor("job_a", [](const JobRecord& j) {
    return j.state == JobState::kRunning && j.done == 3 && j.total == 10;
  }));
  EXPECT_EQ(runner.Pending(), 1);
  release.Notify();
  ASSERT_TRUE(WaitForState("job_a", JobState::kSucceeded));
}

TEST_F(JobRunnerTest, PendingCountsQueuedAndRunningJobs) {
  CreateJob("job_1");
  CreateJob("job_2");
  CreateJob("job_3");
  absl::Notification started, release;
  JobRunner runner(store_.get(), &clock_, 1,
                   [&](const JobRecord& job, JobControl&) -> absl::StatusOr<ArtifactRecord> {
                     if (!started.HasBeenNotified()) started.Notify();
                     release.WaitForNotification();
                     return ArtifactFor(job);
                   });
  ASSERT_OK(runner.Start());
  started.WaitForNotification();
  EXPECT_EQ(runner.Pending(), 3);  // one running, two queued behind the single worker
  EXPECT_EQ(Job("job_1").state, JobState::kRunning);  // oldest first
  EXPECT_EQ(Job("job_2").state, JobState::kQueued);
  // Cancelling a queued job takes it out of the queue.
  ASSERT_OK(store_->CancelJob("job_3", clock_.NowMicros()));
  runner.Cancel("job_3");
  EXPECT_EQ(runner.Pending(), 2);
  release.Notify();
  ASSERT_TRUE(WaitForState("job_2", JobState::kSucceeded));
  EXPECT_EQ(Job("job_3").state, JobState::kCancelled);
  EXPECT_TRUE(Job("job_3").artifact_id.empty());
}

TEST_F(JobRunnerTest, CancelStopsARunningJobAndStoresNoArtifact) {
  CreateJob("job_a");
  absl::Notification started;
  std::atomic<int> stopped{0};
  JobRunner runner(store_.get(), &clock_, 1, RunUntilStopped(&started, &stopped));
  ASSERT_OK(runner.Start());
  started.WaitForNotification();
  // The vault's order: the store marks it cancelled, then the runner tells the job.
  auto cancelled = store_->CancelJob("job_a", clock_.NowMicros());
  ASSERT_OK(cancelled);
  EXPECT_EQ(cancelled->state, JobState::kCancelled);
  runner.Cancel("job_a");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while ((stopped.load() == 0 || runner.Pending() != 0) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(stopped.load(), 1);
  EXPECT_EQ(runner.Pending(), 0);
  const JobRecord job = Job("job_a");
  EXPECT_EQ(job.state, JobState::kCancelled);  // Aborted leaves the state to the canceller
  EXPECT_TRUE(job.artifact_id.empty());
  EXPECT_THAT(store_->GetArtifact("art_job_a"), StatusIs(absl::StatusCode::kNotFound));
}

TEST_F(JobRunnerTest, AJobThatFinishesAfterItsCancelStaysCancelled) {
  CreateJob("job_a");
  absl::Notification started, release;
  JobRunner runner(store_.get(), &clock_, 1,
                   [&](const JobRecord& job, JobControl&) -> absl::StatusOr<ArtifactRecord> {
                     started.Notify();
                     release.WaitForNotification();
                     return ArtifactFor(job);  // ignores the cancellation
                   });
  ASSERT_OK(runner.Start());
  started.WaitForNotification();
  ASSERT_OK(store_->CancelJob("job_a", clock_.NowMicros()));
  runner.Cancel("job_a");
  release.Notify();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (runner.Pending() != 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(Job("job_a").state, JobState::kCancelled);
  EXPECT_THAT(store_->GetArtifact("art_job_a"), StatusIs(absl::StatusCode::kNotFound));
}

TEST_F(JobRunnerTest, AJobInterruptedByShutdownIsReRunByTheNextRunner) {
  CreateJob("job_a");
  {
    absl::Notification started;
    std::atomic<int> stopped{0};
    JobRunner runner(store_.get(), &clock_, 1, RunUntilStopped(&started, &stopped));
    ASSERT_OK(runner.Start());
    started.WaitForNotification();
    // The destructor asks the job to stop and waits for its worker.
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    (void)stopped;
  }
  const JobRecord left = Job("job_a");
  EXPECT_EQ(left.state, JobState::kRunning);  // for the next runner to take over
  EXPECT_EQ(left.lease_expires_micros, 0);    // at once: the lease was released
  EXPECT_EQ(left.attempts, 1);
  EXPECT_TRUE(left.artifact_id.empty());

  clock_.Advance(1'000'000);
  std::vector<std::string> seeds;
  JobRunner next(store_.get(), &clock_, 1,
                 [&](const JobRecord& job, JobControl& control) -> absl::StatusOr<ArtifactRecord> {
                   seeds.push_back(job.seed);
                   EXPECT_TRUE(control.Progress(10, 10));
                   return ArtifactFor(job);
                 });
  ASSERT_OK(next.Start());
  ASSERT_TRUE(WaitForState("job_a", JobState::kSucceeded));
  const JobRecord job = Job("job_a");
  EXPECT_EQ(job.attempts, 2);
  EXPECT_EQ(job.started_micros, kStartMicros + 1'000'000);
  EXPECT_EQ(job.artifact_id, "art_job_a");
  auto artifact = store_->GetArtifact("art_job_a");
  ASSERT_OK(artifact);
  EXPECT_EQ(artifact->payload, "model of job_a attempt 2");
  // The re-run saw the randomness stored at submission.
  EXPECT_THAT(seeds, ::testing::ElementsAre(std::string(32, '\x05')));
}

TEST_F(JobRunnerTest, AJobWhoseRunnerDiedIsTakenOverWhenItsLeaseEnds) {
  CreateJob("job_a");
  // Another process claimed it and died without releasing it: its lease runs 5 s more.
  ASSERT_OK(store_->StartJob("job_a", storage::JobLease{"dead-process", clock_.NowMicros(),
                                                        clock_.NowMicros() + 5'000'000}));
  std::atomic<int> runs{0};
  JobRunner runner(
      store_.get(), &clock_, 1,
      [&](const JobRecord& job, JobControl& control) -> absl::StatusOr<ArtifactRecord> {
        ++runs;
        EXPECT_TRUE(control.Progress(10, 10));
        return ArtifactFor(job);
      },
      /*lease_micros=*/300'000);  // the keeper looks every 100 ms
  ASSERT_OK(runner.Start());
  std::this_thread::sleep_for(std::chrono::milliseconds(400));  // several keeper rounds
  EXPECT_EQ(runs.load(), 0);                                    // the lease has not ended
  EXPECT_EQ(Job("job_a").lease_owner, "dead-process");
  clock_.Advance(5'000'001);
  ASSERT_TRUE(WaitForState("job_a", JobState::kSucceeded));
  const JobRecord job = Job("job_a");
  EXPECT_EQ(job.attempts, 2);
  EXPECT_EQ(job.lease_owner, runner.owner());
  EXPECT_EQ(runs.load(), 1);
}

// The keeper renews only jobs this runner has claimed: renewing one taken from the queue but
// not yet claimed fails (it is still queued), and once stopped the job kept its lease without
// ever finishing. With a keeper round every millisecond and a clock that never lets a lease
// end, every job must still finish.
TEST_F(JobRunnerTest, ShortJobsAllFinishWhileTheKeeperRenewsEveryMillisecond) {
  constexpr int kJobs = 150;
  for (int i = 0; i < kJobs; ++i) CreateJob(absl::StrCat("job_", i));
  JobRunner runner(
      store_.get(), &clock_, 2,
      [&](const JobRecord& job, JobControl& control) -> absl::StatusOr<ArtifactRecord> {
        for (int step = 0; step < 3; ++step) {
          if (!control.Progress(step, 3)) return absl::AbortedError("stopped");
          std::this_thread::sleep_for(std::chrono::microseconds(300));
        }
        return ArtifactFor(job);
      },
      /*lease_micros=*/3'000);
  ASSERT_OK(runner.Start());
  for (int i = 0; i < kJobs; ++i) {
    ASSERT_TRUE(WaitForState(absl::StrCat("job_", i), JobState::kSucceeded)) << "job_" << i;
  }
}

TEST_F(JobRunnerTest, AFailingJobIsFailedWithItsMessage) {
  CreateJob("job_a");
  CreateJob("job_b");
  JobRunner runner(store_.get(), &clock_, 1,
                   [&](const JobRecord& job, JobControl&) -> absl::StatusOr<ArtifactRecord> {
                     if (job.id == "job_a") {
                       return absl::InvalidArgumentError("feature_columns: 'age' is constant");
                     }
                     return ArtifactFor(job);
                   });
  ASSERT_OK(runner.Start());
  ASSERT_TRUE(WaitForState("job_a", JobState::kFailed));
  const JobRecord job = Job("job_a");
  EXPECT_EQ(job.error, "feature_columns: 'age' is constant");
  EXPECT_EQ(job.finished_micros, kStartMicros);
  EXPECT_TRUE(job.artifact_id.empty());
  // The worker goes on with the next job.
  ASSERT_TRUE(WaitForState("job_b", JobState::kSucceeded));
}

// A run the database stopped (unavailable, a conflict, a timeout, each without a stop
// requested) is not the job's failure: the job stays running, not failed after its charge, and
// when its lease ends it is run again, to its artifact.
TEST_F(JobRunnerTest, AJobTheDatabaseStoppedIsRunAgainWhenItsLeaseEnds) {
  const std::vector<absl::Status> failures = {
      absl::UnavailableError("the vault's database is unavailable; retry shortly"),
      absl::AbortedError("postgres: deadlock detected; retry"),
      absl::DeadlineExceededError("postgres: canceling statement due to statement timeout")};
  for (size_t i = 0; i < failures.size(); ++i) CreateJob(absl::StrCat("job_", i));
  std::mutex mu;
  std::map<std::string, int> runs;
  JobRunner runner(
      store_.get(), &clock_, 1,
      [&](const JobRecord& job, JobControl&) -> absl::StatusOr<ArtifactRecord> {
        std::lock_guard<std::mutex> lock(mu);
        if (runs[job.id]++ == 0) return failures[job.id.back() - '0'];
        return ArtifactFor(job);
      },
      /*lease_micros=*/300'000);
  ASSERT_OK(runner.Start());
  for (size_t i = 0; i < failures.size(); ++i) {
    const std::string id = absl::StrCat("job_", i);
    ASSERT_TRUE(WaitFor(id, [&](const JobRecord& j) {
      std::lock_guard<std::mutex> lock(mu);
      return runs[id] == 1 && j.state == JobState::kRunning;
    })) << id;
  }
  ASSERT_TRUE(WaitFor("job_0", [&](const JobRecord&) { return runner.Pending() == 0; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(400));  // several keeper rounds
  for (size_t i = 0; i < failures.size(); ++i) {
    EXPECT_EQ(Job(absl::StrCat("job_", i)).state, JobState::kRunning) << i;
  }
  clock_.Advance(300'001);
  for (size_t i = 0; i < failures.size(); ++i) {
    const std::string id = absl::StrCat("job_", i);
    ASSERT_TRUE(WaitForState(id, JobState::kSucceeded)) << id;
    const JobRecord job = Job(id);
    EXPECT_EQ(job.attempts, 2) << id;
    EXPECT_TRUE(job.error.empty()) << id;
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(runs[id], 2) << id;
  }
}

// A run the database stops every time (a statement_timeout its reads always exceed) is not
// re-run for ever: after kMaxAttemptsToRetry runs the job fails, with a message that quotes
// nothing of the database's.
TEST_F(JobRunnerTest, AJobTheDatabaseAlwaysStopsFailsAfterItsLastAttempt) {
  CreateJob("job_a");
  std::atomic<int> runs{0};
  JobRunner runner(
      store_.get(), &clock_, 1,
      [&](const JobRecord&, JobControl&) -> absl::StatusOr<ArtifactRecord> {
        ++runs;
        return absl::DeadlineExceededError(
            "postgres: ERROR:  canceling statement due to statement timeout");
      },
      /*lease_micros=*/300'000);
  ASSERT_OK(runner.Start());
  for (int attempt = 1; attempt < JobRunner::kMaxAttemptsToRetry; ++attempt) {
    // Until the runner has let the job go (the keeper renews a job it still holds), then past
    // the lease.
    ASSERT_TRUE(WaitFor("job_a", [&](const JobRecord& j) {
      return runs.load() == attempt && j.attempts == attempt && j.state == JobState::kRunning &&
             runner.Pending() == 0;
    })) << attempt;
    clock_.Advance(300'001);
  }
  ASSERT_TRUE(WaitForState("job_a", JobState::kFailed));
  const JobRecord job = Job("job_a");
  EXPECT_EQ(job.attempts, JobRunner::kMaxAttemptsToRetry);
  EXPECT_EQ(runs.load(), JobRunner::kMaxAttemptsToRetry);
  EXPECT_THAT(job.error,
              ::testing::HasSubstr("the vault's database stopped this job's run 5 times"));
  EXPECT_THAT(job.error, ::testing::Not(::testing::HasSubstr("postgres")));
}

TEST_F(JobRunnerTest, StartRefusesZeroWorkers) {
  JobRunner runner(store_.get(), &clock_, 0,
                   [](const JobRecord&, JobControl&) -> absl::StatusOr<ArtifactRecord> {
                     return absl::InternalError("never runs");
                   });
  EXPECT_THAT(runner.Start(), StatusIs(absl::StatusCode::kInvalidArgument, "job_workers"));
}

}  // namespace
}  // namespace fairvault::server
