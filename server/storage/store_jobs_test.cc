// The Store's training jobs (one suite over both backends; fixtures in store_test_fixture.h):
// created with their charge, admitted under the job limit, claimed once under a lease, finished
// with their artifact, listed, purged and kept across reopen.
#include "server/storage/store_test_fixture.h"

#include <libpq-fe.h>

#include <chrono>

namespace fairvault::server::storage::store_testing {
namespace {

TEST_P(StoreJobTest, JobIsCreatedQueuedWithItsCharge) {
  const int64_t before = SpentMicro(acme_, census_);
  const int64_t seq = Submit(NewJob("job_a", acme_, census_));
  ASSERT_GT(seq, 0);
  const JobRecord job = Job("job_a");
  EXPECT_EQ(job.state, JobState::kQueued);
  EXPECT_EQ(job.ledger_seq, seq);
  EXPECT_EQ(job.account_id, acme_.id);
  EXPECT_EQ(job.dataset_id, census_.id);
  EXPECT_EQ(job.idempotency_key, "key-job_a");
  EXPECT_EQ(job.table_handle, "tbl_job");
  EXPECT_EQ(job.algorithm, 2);
  EXPECT_EQ(job.request, std::string("req\0uest", 8));
  EXPECT_EQ(job.plan, "plan");
  EXPECT_EQ(job.seed, std::string(32, '\x01'));
  EXPECT_EQ(job.subject_limit, 30);
  EXPECT_EQ(job.done, 0);
  EXPECT_EQ(job.total, 50);
  EXPECT_EQ(job.submitted_micros, now_);
  EXPECT_EQ(job.started_micros, 0);
  EXPECT_EQ(job.finished_micros, 0);
  EXPECT_EQ(job.attempts, 0);
  EXPECT_EQ(SpentMicro(acme_, census_), before + 100'000);
  EXPECT_EQ(Ledger().back().seq, seq);
  EXPECT_THAT(store_->GetJob("job_zzz"), StatusIs(absl::StatusCode::kNotFound, "job_zzz"));

  // A replay of the submission returns the stored response and creates nothing more.
  bool called = false;
  auto replay =
      store_->Charge(Request(acme_, census_, "key-job_a", 100'000), ++now_, Body(&called));
  ASSERT_OK(replay);
  EXPECT_TRUE(replay->replayed);
  EXPECT_FALSE(called);
  auto all = store_->ListJobs(JobFilter{});
  ASSERT_OK(all);
  EXPECT_EQ(all->size(), 1u);
}

TEST_P(StoreJobTest, TheLedgerNamesTheArtifactOrJobEachChargeCreated) {
  const int64_t job_seq = Submit(NewJob("job_a", acme_, census_));
  bool called = false;
  ASSERT_OK(store_->Charge(Request(acme_, census_, "k-art", 100'000), ++now_,
                           Body(&called, ArtifactRecord{"art_1", acme_.id, census_.id, 0, 7, "m"})));
  ASSERT_OK(Charge(Request(acme_, census_, "k-plain", 100'000)));
  std::map<int64_t, std::pair<std::string, std::string>> created;
  for (const LedgerRow& row : Ledger()) created[row.seq] = {row.artifact_id, row.job_id};
  const int64_t head = Ledger().back().seq;
  EXPECT_EQ(created[job_seq], std::make_pair(std::string(), std::string("job_a")));
  EXPECT_EQ(created[head - 1], std::make_pair(std::string("art_1"), std::string()));
  EXPECT_EQ(created[head], std::make_pair(std::string(), std::string()));
  EXPECT_EQ(created[1], std::make_pair(std::string(), std::string()));  // a grant
}

TEST_P(StoreJobTest, FailingBodyIsChargedButCreatesNoJob) {
  const size_t rows = Ledger().size();
  auto failed = store_->Charge(Request(acme_, census_, "k1", 100'000), ++now_,
                               [](int64_t, const BudgetState&) -> absl::StatusOr<ChargeResult> {
                                 return absl::InvalidArgumentError("bad plan");
                               });
  EXPECT_THAT(failed, StatusIs(absl::StatusCode::kInvalidArgument, "bad plan"));
  EXPECT_EQ(Ledger().size(), rows + 1);  // charged, as every failed release
  EXPECT_EQ(Scalar("SELECT COUNT(*) FROM jobs"), 0);

  // A body that fails after building its job still creates none: the job is only the
  // successful result's.
  JobRecord job = NewJob("job_f", acme_, census_);
  auto also_failed =
      store_->Charge(Request(acme_, census_, "k2", 100'000), ++now_,
                     [&](int64_t, const BudgetState&) -> absl::StatusOr<ChargeResult> {
                       ChargeResult result{"x", std::nullopt, job};
                       (void)result;
                       return absl::InternalError("solver exploded");
                     });
  EXPECT_THAT(also_failed, StatusIs(absl::StatusCode::kInternal));
  EXPECT_THAT(store_->GetJob("job_f"), StatusIs(absl::StatusCode::kNotFound));

  // A refused charge (over budget) creates no job and no ledger row.
  bool called = false;
  EXPECT_THAT(store_->Charge(Request(acme_, census_, "k3", 100'000'000), ++now_, Body(&called)),
              StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_EQ(Scalar("SELECT COUNT(*) FROM jobs"), 0);
}

TEST_P(StoreJobTest, AJobThatCannotBeStoredRollsBackItsCharge) {
  ASSERT_GT(Submit(NewJob("job_a", acme_, census_)), 0);
  const size_t rows = Ledger().size();
  const int64_t spent = SpentMicro(acme_, census_);
  JobRecord duplicate = NewJob("job_a", acme_, census_);
  duplicate.idempotency_key = "other-key";
  auto charged = store_->Charge(Request(acme_, census_, "other-key", 100'000), ++now_,
                                [&](int64_t, const BudgetState&) -> absl::StatusOr<ChargeResult> {
                                  return ChargeResult{"x", std::nullopt, duplicate};
                                });
  EXPECT_THAT(charged, ::testing::Not(IsOk()));
  EXPECT_EQ(Ledger().size(), rows);
  EXPECT_EQ(SpentMicro(acme_, census_), spent);
  EXPECT_THAT(store_->GetStoredResponse(acme_.id, "other-key"),
              StatusIs(absl::StatusCode::kNotFound));
  EXPECT_TRUE(Verify().ok);
}

// Issue 19 §1: the job limit is decided inside the charge transaction, on the jobs every
// process on the database shares, before the privacy filter debits anything.
TEST_P(StoreJobTest, JobLimitCountsUnfinishedJobsInsideTheCharge) {
  const auto submit = [&](const std::string& id, int64_t limit, bool* called) {
    JobRecord job = NewJob(id, acme_, census_);
    ChargeRequest request = Request(acme_, census_, job.idempotency_key, 100'000);
    request.job_limit = limit;
    *called = false;
    return store_->Charge(request, ++now_,
                          [&](int64_t, const BudgetState&) -> absl::StatusOr<ChargeResult> {
                            *called = true;
                            return ChargeResult{"submitted", std::nullopt, job};
                          });
  };
  bool called = false;
  ASSERT_OK(submit("job_a", 2, &called));
  ASSERT_OK(submit("job_b", 2, &called));
  ASSERT_OK(store_->StartJob("job_b", Lease(now_)));  // running counts as much as queued
  const size_t rows = Ledger().size();
  const int64_t spent = SpentMicro(acme_, census_);
  EXPECT_THAT(submit("job_c", 2, &called),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       "the vault is running its limit of 2 training jobs; retry later (nothing "
                       "was charged)"));
  EXPECT_FALSE(called);
  EXPECT_EQ(Ledger().size(), rows);
  EXPECT_EQ(SpentMicro(acme_, census_), spent);
  EXPECT_THAT(store_->GetJob("job_c"), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(store_->GetStoredResponse(acme_.id, "key-job_c"),
              StatusIs(absl::StatusCode::kNotFound));
  // A replay of an admitted submission is not a new job: it is answered at the limit too.
  auto replay = submit("job_a", 2, &called);
  ASSERT_OK(replay);
  EXPECT_TRUE(replay->replayed);
  // Another company's job counts: the limit is the vault's, not the company's.
  EXPECT_THAT(submit("job_c", 3, &called), IsOk());
  {
    JobRecord theirs = NewJob("job_g", globex_, census_);
    ChargeRequest request = Request(globex_, census_, theirs.idempotency_key, 100'000);
    request.job_limit = 3;
    EXPECT_THAT(store_->Charge(request, ++now_, Body(&called)),
                StatusIs(absl::StatusCode::kResourceExhausted, "limit of 3 training jobs"));
  }
  // A finished, failed or cancelled job frees its place; the refused key can be used again.
  ASSERT_OK(store_->CancelJob("job_a", ++now_));
  ASSERT_OK(store_->FailJob("job_b", kOwner, "x", ++now_));
  EXPECT_THAT(submit("job_d", 2, &called), IsOk());
  EXPECT_TRUE(called);
  EXPECT_THAT(submit("job_e", 2, &called), StatusIs(absl::StatusCode::kResourceExhausted));
  // A charge without a limit (no job) is not counted against it.
  EXPECT_THAT(Charge(Request(acme_, census_, "counts", 100'000)), IsOk());
  // Refused before the privacy filter debits, but after it decides: a company out of budget
  // is told so, not to retry later.
  ChargeRequest over = Request(acme_, census_, "key-job_f", 100'000'000);
  over.job_limit = 2;
  EXPECT_THAT(store_->Charge(over, ++now_, Body(&called)),
              StatusIs(absl::StatusCode::kResourceExhausted, "grant"));
  EXPECT_TRUE(Verify().ok);
}

// What replicas do: job submissions from several store instances at once against one limit.
// Exactly the limit is admitted; every refused one is charged nothing and runs no body.
TEST_P(StoreJobTest, ConcurrentJobChargesFromSeveralStoresAdmitExactlyTheLimit) {
  constexpr int kLimit = 5, kThreads = 16, kAttempts = 4;  // 64 submissions
  std::vector<std::unique_ptr<Store>> stores;
  for (int i = 0; i < 2; ++i) {
    auto another = OpenAnother();
    ASSERT_OK(another);
    stores.push_back(*std::move(another));
  }
  const size_t rows = Ledger().size();
  std::atomic<int> admitted{0}, refused{0}, refused_bodies{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      while (!go.load()) std::this_thread::yield();
      Store* store = t % 3 == 0 ? store_.get() : stores[t % 2].get();
      const AccountRecord& who = t % 2 == 0 ? acme_ : globex_;
      for (int i = 0; i < kAttempts; ++i) {
        const JobRecord job = NewJob(absl::StrCat("job_", t, "_", i), who, census_);
        ChargeRequest request = Request(who, census_, job.idempotency_key, 100'000);
        request.job_limit = kLimit;
        bool called = false;
        auto outcome =
            store->Charge(request, now_ + 1 + t * kAttempts + i,
                          [&](int64_t, const BudgetState&) -> absl::StatusOr<ChargeResult> {
                            called = true;
                            return ChargeResult{"submitted", std::nullopt, job};
                          });
        if (outcome.ok()) {
          ++admitted;
        } else if (absl::IsResourceExhausted(outcome.status())) {
          EXPECT_THAT(outcome.status().message(), HasSubstr("limit of 5 training jobs"));
          refused_bodies += called;
          ++refused;
        } else {
          ADD_FAILURE() << outcome.status();
        }
      }
    });
  }
  go = true;
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(admitted.load(), kLimit);
  EXPECT_EQ(refused.load(), kThreads * kAttempts - kLimit);
  EXPECT_EQ(refused_bodies.load(), 0);
  EXPECT_EQ(Scalar("SELECT COUNT(*) FROM jobs"), kLimit);
  EXPECT_EQ(Scalar("SELECT COUNT(*) FROM responses"), kLimit);
  EXPECT_EQ(Ledger().size(), rows + kLimit);
  EXPECT_EQ(SpentMicro(acme_, census_) + SpentMicro(globex_, census_), kLimit * 100'000);
  const LedgerVerification v = Verify();
  EXPECT_TRUE(v.ok) << v.message;
}

TEST_P(StoreJobTest, StartClaimsAQueuedJobOnce) {
  ASSERT_GT(Submit(NewJob("job_a", acme_, census_)), 0);
  auto started = store_->StartJob("job_a", Lease(5'000));
  ASSERT_OK(started);
  EXPECT_EQ(started->state, JobState::kRunning);
  EXPECT_EQ(started->attempts, 1);
  EXPECT_EQ(started->started_micros, 5'000);
  EXPECT_THAT(store_->StartJob("job_a", Lease(6'000)),
              StatusIs(absl::StatusCode::kFailedPrecondition, "running"));
  EXPECT_THAT(store_->StartJob("job_zzz", Lease(6'000)), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_EQ(Job("job_a").started_micros, 5'000);
}

TEST_P(StoreJobTest, OfTwoThreadsClaimingTheSameJobExactlyOneWins) {
  for (int round = 0; round < 20; ++round) {
    const std::string id = absl::StrCat("job_", round);
    ASSERT_GT(Submit(NewJob(id, acme_, census_)), 0);
    std::atomic<int> wins{0}, refusals{0};
    std::atomic<bool> go{false};
    auto claim = [&] {
      while (!go.load()) std::this_thread::yield();
      auto s = store_->StartJob(id, Lease(7'000));
      if (s.ok()) {
        ++wins;
      } else if (absl::IsFailedPrecondition(s.status())) {
        ++refusals;
      }
    };
    std::thread a(claim), b(claim);
    go = true;
    a.join();
    b.join();
    EXPECT_EQ(wins.load(), 1) << id;
    EXPECT_EQ(refusals.load(), 1) << id;
    EXPECT_EQ(Job(id).attempts, 1) << id;
  }
}

TEST_P(StoreJobTest, ProgressIsRecordedOnlyWhileRunning) {
  ASSERT_GT(Submit(NewJob("job_a", acme_, census_)), 0);
  ASSERT_OK(store_->UpdateJobProgress("job_a", kOwner, 5, 60));  // queued: ignored
  EXPECT_EQ(Job("job_a").done, 0);
  ASSERT_OK(store_->StartJob("job_a", Lease(1)));
  ASSERT_OK(store_->UpdateJobProgress("job_a", kOwner, 5, 60));
  EXPECT_EQ(Job("job_a").done, 5);
  EXPECT_EQ(Job("job_a").total, 60);
}

TEST_P(StoreJobTest, FinishStoresTheArtifactAndSucceeds) {
  const int64_t seq = Submit(NewJob("job_a", acme_, census_));
  ASSERT_OK(store_->StartJob("job_a", Lease(1'000)));
  ASSERT_OK(store_->UpdateJobProgress("job_a", kOwner, 10, 50));
  ASSERT_OK(store_->FinishJob("job_a", kOwner,
                              ArtifactRecord{"art_j", acme_.id, census_.id, 0, 9, "model"}, 2'000));
  const JobRecord job = Job("job_a");
  EXPECT_EQ(job.state, JobState::kSucceeded);
  EXPECT_EQ(job.artifact_id, "art_j");
  EXPECT_EQ(job.finished_micros, 2'000);
  EXPECT_EQ(job.done, 50);  // throttled progress ends at the total
  EXPECT_TRUE(job.error.empty());
  auto art = store_->GetArtifact("art_j");
  ASSERT_OK(art);
  EXPECT_EQ(art->payload, "model");
  EXPECT_EQ(art->ledger_seq, seq);  // paid by the submission's charge
  // Finishing twice is refused and changes nothing.
  EXPECT_THAT(store_->FinishJob("job_a", kOwner,
                                ArtifactRecord{"art_k", acme_.id, census_.id, 0, 9, "m"}, 3'000),
              StatusIs(absl::StatusCode::kFailedPrecondition, "succeeded"));
  EXPECT_THAT(store_->GetArtifact("art_k"), StatusIs(absl::StatusCode::kNotFound));
  // Cancelling a finished job returns it unchanged.
  auto cancelled = store_->CancelJob("job_a", 4'000);
  ASSERT_OK(cancelled);
  EXPECT_EQ(cancelled->state, JobState::kSucceeded);
  EXPECT_EQ(cancelled->finished_micros, 2'000);
}

TEST_P(StoreJobTest, FinishAfterCancelIsRefusedAndStoresNoArtifact) {
  ASSERT_GT(Submit(NewJob("job_a", acme_, census_)), 0);
  ASSERT_OK(store_->StartJob("job_a", Lease(1'000)));
  auto cancelled = store_->CancelJob("job_a", 1'500);
  ASSERT_OK(cancelled);
  EXPECT_EQ(cancelled->state, JobState::kCancelled);
  EXPECT_EQ(cancelled->finished_micros, 1'500);
  EXPECT_THAT(cancelled->error, HasSubstr("cancelled"));
  EXPECT_THAT(store_->FinishJob("job_a", kOwner,
                                ArtifactRecord{"art_j", acme_.id, census_.id, 0, 9, "m"}, 2'000),
              StatusIs(absl::StatusCode::kFailedPrecondition, "cancelled"));
  EXPECT_THAT(store_->GetArtifact("art_j"), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(store_->FailJob("job_a", kOwner, "late", 2'000),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  const JobRecord job = Job("job_a");
  EXPECT_EQ(job.state, JobState::kCancelled);
  EXPECT_TRUE(job.artifact_id.empty());
  // A cancelled job cannot be claimed again.
  EXPECT_THAT(store_->StartJob("job_a", Lease(3'000)),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  // A queued job can be cancelled too.
  ASSERT_GT(Submit(NewJob("job_b", acme_, census_)), 0);
  auto queued = store_->CancelJob("job_b", 3'500);
  ASSERT_OK(queued);
  EXPECT_EQ(queued->state, JobState::kCancelled);
  EXPECT_EQ(queued->started_micros, 0);
  EXPECT_THAT(store_->CancelJob("job_zzz", 1), StatusIs(absl::StatusCode::kNotFound));
}

TEST_P(StoreJobTest, FailRecordsTheErrorOfARunningJob) {
  ASSERT_GT(Submit(NewJob("job_a", acme_, census_)), 0);
  EXPECT_THAT(store_->FailJob("job_a", kOwner, "too early", 1),
              StatusIs(absl::StatusCode::kFailedPrecondition, "queued"));
  ASSERT_OK(store_->StartJob("job_a", Lease(1'000)));
  ASSERT_OK(store_->FailJob("job_a", kOwner, "features are constant", 2'000));
  const JobRecord job = Job("job_a");
  EXPECT_EQ(job.state, JobState::kFailed);
  EXPECT_EQ(job.error, "features are constant");
  EXPECT_EQ(job.finished_micros, 2'000);
  EXPECT_THAT(store_->FailJob("job_zzz", kOwner, "x", 1), StatusIs(absl::StatusCode::kNotFound));
}

TEST_P(StoreJobTest, AnotherRunnerTakesOverOnlyAfterTheLeaseEnds) {
  for (const char* id : {"job_1", "job_2", "job_3"}) {
    ASSERT_GT(Submit(NewJob(id, acme_, census_)), 0);
  }
  ASSERT_OK(store_->StartJob("job_1", Lease(1'000)));  // lease until 1'001'000
  ASSERT_OK(store_->UpdateJobProgress("job_1", kOwner, 7, 50));
  ASSERT_OK(store_->StartJob("job_2", Lease(1'000)));
  ASSERT_OK(store_->FailJob("job_2", kOwner, "x", 1'100));

  // While the lease lasts, no one else may claim the job, and renewing extends it.
  EXPECT_THAT(store_->StartJob("job_1", Lease(500'000, "runner-b")),
              StatusIs(absl::StatusCode::kFailedPrecondition, "lease"));
  ASSERT_OK(store_->RenewJobLease("job_1", Lease(900'000)));  // now until 1'900'000
  EXPECT_THAT(store_->StartJob("job_1", Lease(1'500'000, "runner-b")),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(Job("job_1").lease_expires_micros, 1'900'000);

  // Once it ended (the runner died), another runner takes over and starts from scratch.
  auto taken = store_->StartJob("job_1", Lease(2'000'000, "runner-b"));
  ASSERT_OK(taken);
  EXPECT_EQ(taken->attempts, 2);
  EXPECT_EQ(taken->done, 0);
  EXPECT_EQ(taken->lease_owner, "runner-b");
  EXPECT_EQ(taken->started_micros, 2'000'000);
  // The old holder can no longer renew, report progress, finish or fail it.
  EXPECT_THAT(store_->RenewJobLease("job_1", Lease(2'100'000)),
              StatusIs(absl::StatusCode::kFailedPrecondition, "taken over"));
  ASSERT_OK(store_->UpdateJobProgress("job_1", kOwner, 9, 50));  // ignored
  EXPECT_EQ(Job("job_1").done, 0);
  EXPECT_THAT(
      store_->FinishJob("job_1", kOwner, ArtifactRecord{"art_old", acme_.id, census_.id, 0, 9, "m"},
                        2'200'000),
      StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(store_->FailJob("job_1", kOwner, "late", 2'200'000),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(store_->GetArtifact("art_old"), StatusIs(absl::StatusCode::kNotFound));
  ASSERT_OK(store_->FinishJob(
      "job_1", "runner-b", ArtifactRecord{"art_new", acme_.id, census_.id, 0, 9, "m"}, 2'300'000));
  EXPECT_EQ(Job("job_1").state, JobState::kSucceeded);

  // A released lease (expiry 0, at shutdown) is claimable at once; finished jobs never are.
  ASSERT_OK(store_->StartJob("job_3", Lease(3'000'000)));
  ASSERT_OK(store_->RenewJobLease("job_3", JobLease{kOwner, 0, 0}));
  ASSERT_OK(store_->StartJob("job_3", Lease(3'000'001, "runner-b")));
  EXPECT_THAT(store_->StartJob("job_2", Lease(9'000'000'000, "runner-b")),
              StatusIs(absl::StatusCode::kFailedPrecondition, "failed"));
  auto unfinished = store_->ListUnfinishedJobs();
  ASSERT_OK(unfinished);
  EXPECT_THAT(Ids(*unfinished), ::testing::ElementsAre("job_3"));
}

TEST_P(StoreJobTest, ListIsNewestFirstWithFilters) {
  DatasetRecord other = MakeDataset("other");
  Grant(acme_, other, 10'000'000);
  ASSERT_GT(Submit(NewJob("job_1", acme_, census_)), 0);
  ASSERT_GT(Submit(NewJob("job_2", globex_, census_)), 0);
  ASSERT_GT(Submit(NewJob("job_3", acme_, other)), 0);
  ASSERT_GT(Submit(NewJob("job_4", acme_, census_)), 0);

  auto all = store_->ListJobs(JobFilter{});
  ASSERT_OK(all);
  EXPECT_THAT(Ids(*all), ::testing::ElementsAre("job_4", "job_3", "job_2", "job_1"));
  auto acme = store_->ListJobs(JobFilter{acme_.id, std::nullopt, 100});
  ASSERT_OK(acme);
  EXPECT_THAT(Ids(*acme), ::testing::ElementsAre("job_4", "job_3", "job_1"));
  auto census = store_->ListJobs(JobFilter{std::nullopt, census_.id, 100});
  ASSERT_OK(census);
  EXPECT_THAT(Ids(*census), ::testing::ElementsAre("job_4", "job_2", "job_1"));
  auto both = store_->ListJobs(JobFilter{acme_.id, census_.id, 1});
  ASSERT_OK(both);
  EXPECT_THAT(Ids(*both), ::testing::ElementsAre("job_4"));
}

TEST_P(StoreJobTest, PurgeKeepsTheTableOfAnUnfinishedJob) {
  ASSERT_OK(store_->PutTable(TableRecord{"t_queued", acme_.id, census_.id, 1, 100, "a"}));
  ASSERT_OK(store_->PutTable(TableRecord{"t_running", acme_.id, census_.id, 1, 100, "b"}));
  ASSERT_OK(store_->PutTable(TableRecord{"t_done", acme_.id, census_.id, 1, 100, "c"}));
  ASSERT_OK(store_->PutTable(TableRecord{"t_free", acme_.id, census_.id, 1, 100, "d"}));
  ASSERT_GT(Submit(NewJob("job_q", acme_, census_, "t_queued")), 0);
  ASSERT_GT(Submit(NewJob("job_r", acme_, census_, "t_running")), 0);
  ASSERT_GT(Submit(NewJob("job_d", acme_, census_, "t_done")), 0);
  ASSERT_OK(store_->StartJob("job_r", Lease(1)));
  ASSERT_OK(store_->StartJob("job_d", Lease(1)));
  ASSERT_OK(store_->FailJob("job_d", kOwner, "x", 2));

  auto purged = store_->PurgeExpiredTables(1'000);
  ASSERT_OK(purged);
  EXPECT_EQ(*purged, 2);
  EXPECT_OK(store_->GetTable("t_queued"));
  EXPECT_OK(store_->GetTable("t_running"));
  EXPECT_THAT(store_->GetTable("t_done"), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(store_->GetTable("t_free"), StatusIs(absl::StatusCode::kNotFound));

  // Once its job finishes, an expired table goes with the next purge.
  ASSERT_OK(store_->CancelJob("job_q", 3));
  purged = store_->PurgeExpiredTables(1'000);
  ASSERT_OK(purged);
  EXPECT_EQ(*purged, 1);
  EXPECT_THAT(store_->GetTable("t_queued"), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_OK(store_->GetTable("t_running"));
}

// Issue 22 §3: a managed selection's job reads a second table, its validation rows: kept from
// the purge like the first while the job is unfinished, purged once it is done.
TEST_P(StoreJobTest, PurgeKeepsTheValidationTableOfAnUnfinishedJob) {
  ASSERT_OK(store_->PutTable(TableRecord{"t_train", acme_.id, census_.id, 1, 100, "a"}));
  ASSERT_OK(store_->PutTable(TableRecord{"t_valid", acme_.id, census_.id, 1, 100, "b"}));
  JobRecord job = NewJob("job_v", acme_, census_, "t_train");
  job.validation_table_handle = "t_valid";
  ASSERT_GT(Submit(job), 0);
  auto purged = store_->PurgeExpiredTables(1'000);
  ASSERT_OK(purged);
  EXPECT_EQ(*purged, 0);
  EXPECT_OK(store_->GetTable("t_valid"));
  ASSERT_OK(store_->CancelJob("job_v", 3));
  purged = store_->PurgeExpiredTables(1'000);
  ASSERT_OK(purged);
  EXPECT_EQ(*purged, 2);
  EXPECT_THAT(store_->GetTable("t_valid"), StatusIs(absl::StatusCode::kNotFound));
}

TEST_P(StoreJobTest, DeletedDatasetTakesItsJobsWithIt) {
  DatasetRecord other = MakeDataset("other");
  Grant(acme_, other, 10'000'000);
  ASSERT_GT(Submit(NewJob("job_c", acme_, census_)), 0);
  ASSERT_GT(Submit(NewJob("job_o", acme_, other)), 0);
  ASSERT_OK(store_->StartJob("job_c", Lease(1)));
  ASSERT_OK(store_->DeleteDataset(census_.id));
  EXPECT_THAT(store_->GetJob("job_c"), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_OK(store_->GetJob("job_o"));
  auto unfinished = store_->ListUnfinishedJobs();
  ASSERT_OK(unfinished);
  EXPECT_THAT(Ids(*unfinished), ::testing::ElementsAre("job_o"));
  // The runner of a deleted job finds it gone.
  EXPECT_THAT(store_->FinishJob("job_c", kOwner,
                                ArtifactRecord{"art_c", acme_.id, census_.id, 0, 1, "m"}, 2),
              StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(store_->GetArtifact("art_c"), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_TRUE(Verify().ok);
}

// PostgreSQL, where another process may delete the dataset while a job finishes, a Decide
// records its decisions or an upload stores its table: each of those holds the dataset's row
// (key share) in the order DeleteDataset takes its locks, so it waits for a deletion under way
// and then stores nothing. Before, each went ahead beside the deletion and left a row of a
// deleted dataset (an artifact, decisions, a table) that nothing would ever remove. A second
// connection plays DeleteDataset's statements with a pause between its deletes.
TEST_P(StoreJobTest, WritesBesideADatasetsDeletionWaitForItAndStoreNothing) {
  if (GetParam() != Backend::kPostgres) GTEST_SKIP() << "SQLite has one writer at a time";
  bool called = false;
  ASSERT_OK(
      store_->Charge(Request(acme_, census_, "k_art", 100'000), ++now_,
                     Body(&called, ArtifactRecord{"art_c", acme_.id, census_.id, 0, 1, "c"})));
  ASSERT_GT(Submit(NewJob("job_c", acme_, census_)), 0);
  ASSERT_OK(store_->StartJob("job_c", Lease(now_)));

  PGconn* deleter = PQconnectdb(path_.c_str());
  ASSERT_EQ(PQstatus(deleter), CONNECTION_OK);
  auto run = [&](const std::string& sql) {
    PGresult* r = PQexec(deleter, sql.c_str());
    const ExecStatusType status = PQresultStatus(r);
    EXPECT_TRUE(status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK)
        << sql << ": " << PQerrorMessage(deleter);
    PQclear(r);
  };
  const std::string id = absl::StrCat(census_.id);
  run("BEGIN");
  run("SELECT name FROM heads WHERE name='ledger' FOR UPDATE");
  run("SELECT id FROM datasets WHERE id=" + id + " FOR UPDATE");
  run("DELETE FROM company_tables WHERE dataset_id=" + id);
  run("DELETE FROM decision_batches WHERE artifact_id IN (SELECT id FROM artifacts WHERE "
      "dataset_id=" + id + ")");
  run("DELETE FROM artifacts WHERE dataset_id=" + id);

  absl::Status finished, decided, uploaded;
  std::thread job([&] {
    finished = store_->FinishJob("job_c", kOwner,
                                 ArtifactRecord{"art_j", acme_.id, census_.id, 0, now_, "m"}, now_);
  });
  std::thread decide([&] {
    decided = store_->RecordDecisionBatch(
        "art_c", 1, "decisions", AccessLogRow{0, now_, "acme", "census", "art_c", 2, 2}).status();
  });
  std::thread upload([&] {
    uploaded = store_->PutTable(TableRecord{"t_late", acme_.id, census_.id, 1, now_ + 1, "t"});
  });
  // Until the three wait for the dataset's row (at most 10 s: without that wait each would
  // have committed by then).
  int64_t waiting = 0;
  for (int i = 0; i < 200; ++i) {
    waiting = Scalar("SELECT COUNT(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND "
                     "datname = current_database()");
    if (waiting >= 3) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(waiting, 3);
  run("DELETE FROM jobs WHERE dataset_id=" + id);
  run("DELETE FROM grants WHERE dataset_id=" + id);
  run("DELETE FROM spend WHERE dataset_id=" + id);
  run("DELETE FROM datasets WHERE id=" + id);
  run("COMMIT");
  job.join();
  decide.join();
  upload.join();
  PQfinish(deleter);

  EXPECT_THAT(finished, StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(decided, StatusIs(absl::StatusCode::kNotFound, "dataset that was deleted"));
  EXPECT_THAT(uploaded, StatusIs(absl::StatusCode::kNotFound, "dataset that was deleted"));
  EXPECT_EQ(Scalar("SELECT COUNT(*) FROM artifacts"), 0);
  EXPECT_EQ(Scalar("SELECT COUNT(*) FROM decision_batches"), 0);
  EXPECT_EQ(Scalar("SELECT COUNT(*) FROM access_log"), 0);
  EXPECT_EQ(Scalar("SELECT COUNT(*) FROM company_tables"), 0);
  EXPECT_EQ(Scalar("SELECT COUNT(*) FROM jobs"), 0);
}

TEST_P(StoreJobTest, JobsSurviveCloseAndReopen) {
  const int64_t seq = Submit(NewJob("job_a", acme_, census_));
  ASSERT_GT(Submit(NewJob("job_b", globex_, census_)), 0);
  ASSERT_OK(store_->StartJob("job_a", Lease(1'000)));
  ASSERT_OK(store_->UpdateJobProgress("job_a", kOwner, 3, 50));
  const JobRecord before = Job("job_a");

  ASSERT_NO_FATAL_FAILURE(Reopen());

  const JobRecord after = Job("job_a");
  EXPECT_EQ(after.state, JobState::kRunning);
  EXPECT_EQ(after.ledger_seq, seq);
  EXPECT_EQ(after.seed, before.seed);
  EXPECT_EQ(after.request, before.request);
  EXPECT_EQ(after.plan, before.plan);
  EXPECT_EQ(after.done, 3);
  EXPECT_EQ(after.attempts, 1);
  EXPECT_EQ(after.started_micros, 1'000);
  EXPECT_EQ(Job("job_b").state, JobState::kQueued);
  // The process that held it died with the store closed: another takes it over later.
  ASSERT_OK(store_->StartJob("job_a", Lease(2'000'000, "runner-b")));
  ASSERT_OK(store_->FinishJob("job_a", "runner-b",
                              ArtifactRecord{"art_a", acme_.id, census_.id, 0, 1, "m"}, 3'000));

  ASSERT_NO_FATAL_FAILURE(Reopen());
  EXPECT_EQ(Job("job_a").state, JobState::kSucceeded);
  EXPECT_EQ(Job("job_a").attempts, 2);
  EXPECT_OK(store_->GetArtifact("art_a"));
  EXPECT_TRUE(Verify().ok);
}

}  // namespace
}  // namespace fairvault::server::storage::store_testing
