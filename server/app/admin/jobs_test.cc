// Tests of the jobs use-cases: who may read and cancel which job, how a job record is shown,
// and the job limit under concurrent submissions. Jobs are created through the store's charge
// directly (as FitFairModel's charge does) or by FitFairModel with the runner not started, and
// moved through their states by the store, so no training runs here.
#include <sqlite3.h>

#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/accounting/accountant.h"
#include "server/app/vault_test_fixture.h"

namespace fairvault::server::testing {
namespace {

using ::testing::HasSubstr;

class VaultJobsTest : public VaultTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(VaultTest::SetUp());
    auto census = store_->GetDataset("census");
    ASSERT_OK(census);
    census_id_ = census->id;
    auto auditor = vault_->CreateAccountUnchecked("auditor", Role::kAuditor);
    ASSERT_OK(auditor);
    auto authed = vault_->Authenticate(auditor->api_key());
    ASSERT_OK(authed);
    auditor_ = *authed;
  }

  // Charges `company` 0.1 and creates job `id` with the charge, as a submission would.
  void CreateJob(const Caller& company, const std::string& id) {
    storage::ChargeRequest request;
    request.account_id = company.account_id;
    request.account_name = company.name;
    request.dataset_id = census_id_;
    request.dataset_name = "census";
    request.request_kind = "FitFairModel";
    request.idempotency_key = absl::StrCat("key-", id);
    request.params_digest = "digest";
    request.cost = core::accounting::LaplaceCost(100'000);
    request.epsilon = 0.1;
    request.mechanism = "test";
    storage::JobRecord job;
    job.id = id;
    job.account_id = company.account_id;
    job.dataset_id = census_id_;
    job.idempotency_key = request.idempotency_key;
    job.table_handle = handle_;
    job.algorithm = v1::FAIR_MODEL_ALGORITHM_EXPONENTIAL_MECHANISM;
    job.seed = std::string(32, '\x02');
    job.total = 40;
    ASSERT_OK(store_->Charge(
        request, clock_.NowMicros(),
        [&](int64_t, const storage::BudgetState&) -> absl::StatusOr<storage::ChargeResult> {
          return storage::ChargeResult{"resp", std::nullopt, job};
        }));
  }

  absl::StatusOr<v1::Job> Get(const Caller& caller, const std::string& id) {
    v1::GetJobRequest req;
    req.set_job_id(id);
    auto resp = vault_->GetJob(caller, req);
    if (!resp.ok()) return resp.status();
    return resp->job();
  }

  absl::StatusOr<v1::Job> Cancel(const Caller& caller, const std::string& id) {
    v1::CancelJobRequest req;
    req.set_job_id(id);
    auto resp = vault_->CancelJob(caller, req);
    if (!resp.ok()) return resp.status();
    return resp->job();
  }

  absl::StatusOr<std::vector<std::string>> List(const Caller& caller, const std::string& dataset,
                                                const std::string& company, int limit = 0) {
    v1::ListJobsRequest req;
    req.set_dataset(dataset);
    req.set_company(company);
    req.set_limit(limit);
    auto resp = vault_->ListJobs(caller, req);
    if (!resp.ok()) return resp.status();
    std::vector<std::string> ids;
    for (const v1::Job& job : resp->jobs()) ids.push_back(job.id());
    return ids;
  }

  // The listed ids, or the error's text as the only element.
  std::vector<std::string> Ids(const Caller& caller, const std::string& dataset,
                               const std::string& company, int limit = 0) {
    auto ids = List(caller, dataset, company, limit);
    if (!ids.ok()) return {ids.status().ToString()};
    return *ids;
  }

  int64_t census_id_ = 0;
  Caller auditor_;
};

TEST_F(VaultJobsTest, CompanyReadsItsOwnJobAsSubmitted) {
  ASSERT_NO_FATAL_FAILURE(CreateJob(acme_, "job_acme"));
  auto job = Get(acme_, "job_acme");
  ASSERT_OK(job);
  EXPECT_EQ(job->id(), "job_acme");
  EXPECT_EQ(job->dataset(), "census");
  EXPECT_EQ(job->company(), "acme");
  EXPECT_EQ(job->algorithm(), v1::FAIR_MODEL_ALGORITHM_EXPONENTIAL_MECHANISM);
  EXPECT_EQ(job->state(), v1::JOB_STATE_QUEUED);
  EXPECT_EQ(job->done(), 0);
  EXPECT_EQ(job->total(), 40);
  EXPECT_EQ(job->submitted_unix(), kStartMicros / 1'000'000);
  EXPECT_EQ(job->elapsed_seconds(), 0);
  EXPECT_EQ(job->ledger_seq(), Ledger().back().seq());
  EXPECT_EQ(job->idempotency_key(), "key-job_acme");
  EXPECT_TRUE(job->artifact_id().empty());
  EXPECT_TRUE(job->error().empty());
}

TEST_F(VaultJobsTest, AnotherCompanysJobLooksLikeAnUnknownId) {
  ASSERT_NO_FATAL_FAILURE(CreateJob(acme_, "job_acme"));
  auto theirs = Get(globex_, "job_acme");
  auto unknown = Get(globex_, "job_nope");
  EXPECT_THAT(theirs, StatusIs(absl::StatusCode::kNotFound, "unknown job_id 'job_acme'"));
  EXPECT_THAT(unknown, StatusIs(absl::StatusCode::kNotFound, "unknown job_id 'job_nope'"));
  EXPECT_EQ(std::string(theirs.status().message()).substr(0, 15),
            std::string(unknown.status().message()).substr(0, 15));
  EXPECT_THAT(Cancel(globex_, "job_acme"), StatusIs(absl::StatusCode::kNotFound, "unknown job_id"));
  EXPECT_EQ(Get(acme_, "job_acme")->state(), v1::JOB_STATE_QUEUED);  // not cancelled
  EXPECT_THAT(Get(acme_, ""), StatusIs(absl::StatusCode::kInvalidArgument, "job_id"));
}

TEST_F(VaultJobsTest, AuditorAndRegulatorReadEveryJob) {
  ASSERT_NO_FATAL_FAILURE(CreateJob(acme_, "job_acme"));
  ASSERT_NO_FATAL_FAILURE(CreateJob(globex_, "job_globex"));
  for (const Caller* reader : {&auditor_, &regulator_}) {
    auto job = Get(*reader, "job_acme");
    ASSERT_OK(job);
    EXPECT_EQ(job->company(), "acme");
    EXPECT_OK(Get(*reader, "job_globex"));
    EXPECT_THAT(Ids(*reader, "", ""),
                ::testing::ElementsAre("job_globex", "job_acme"));  // newest first
    EXPECT_THAT(Ids(*reader, "", "acme"), ::testing::ElementsAre("job_acme"));
    EXPECT_THAT(Ids(*reader, "census", "globex"), ::testing::ElementsAre("job_globex"));
    EXPECT_THAT(Ids(*reader, "", "", 1), ::testing::ElementsAre("job_globex"));
    EXPECT_THAT(List(*reader, "nope", ""), StatusIs(absl::StatusCode::kNotFound, "nope"));
    EXPECT_THAT(List(*reader, "", "nobody"), StatusIs(absl::StatusCode::kNotFound, "nobody"));
  }
}

TEST_F(VaultJobsTest, CompanyListsOnlyItsOwnJobsAndMayNotFilterByCompany) {
  ASSERT_NO_FATAL_FAILURE(CreateJob(acme_, "job_a1"));
  ASSERT_NO_FATAL_FAILURE(CreateJob(globex_, "job_g1"));
  ASSERT_NO_FATAL_FAILURE(CreateJob(acme_, "job_a2"));
  EXPECT_THAT(Ids(acme_, "", ""), ::testing::ElementsAre("job_a2", "job_a1"));
  EXPECT_THAT(Ids(acme_, "census", ""), ::testing::ElementsAre("job_a2", "job_a1"));
  EXPECT_THAT(Ids(globex_, "", ""), ::testing::ElementsAre("job_g1"));
  EXPECT_THAT(List(acme_, "", "globex"), StatusIs(absl::StatusCode::kInvalidArgument, "company"));
  EXPECT_THAT(List(acme_, "", "acme"), StatusIs(absl::StatusCode::kInvalidArgument, "company"));
}

TEST_F(VaultJobsTest, ListLimitIsOneToAThousandAndZeroMeansAHundred) {
  for (int i = 0; i < 102; ++i) {
    ASSERT_NO_FATAL_FAILURE(CreateJob(acme_, absl::StrCat("job_", i)));
  }
  auto page = List(acme_, "", "");
  ASSERT_OK(page);
  EXPECT_EQ(page->size(), 100u);
  EXPECT_EQ(page->front(), "job_101");
  page = List(acme_, "", "", 1000);
  ASSERT_OK(page);
  EXPECT_EQ(page->size(), 102u);
  EXPECT_THAT(List(acme_, "", "", 1001), StatusIs(absl::StatusCode::kInvalidArgument, "limit"));
  EXPECT_THAT(List(acme_, "", "", -1), StatusIs(absl::StatusCode::kInvalidArgument, "limit"));
}

TEST_F(VaultJobsTest, OnlyTheOwningCompanyCancelsAndTheChargeStays) {
  ASSERT_NO_FATAL_FAILURE(CreateJob(acme_, "job_acme"));
  EXPECT_THAT(Cancel(auditor_, "job_acme"), StatusIs(absl::StatusCode::kPermissionDenied));
  EXPECT_THAT(Cancel(regulator_, "job_acme"), StatusIs(absl::StatusCode::kPermissionDenied));
  const v1::Budget before = BudgetOf(acme_);
  const size_t ledger_rows = Ledger().size();
  auto cancelled = Cancel(acme_, "job_acme");
  ASSERT_OK(cancelled);
  EXPECT_EQ(cancelled->state(), v1::JOB_STATE_CANCELLED);
  EXPECT_THAT(cancelled->error(), HasSubstr("cancelled"));
  EXPECT_EQ(BudgetOf(acme_).epsilon_spent(), before.epsilon_spent());
  EXPECT_EQ(Ledger().size(), ledger_rows);
  // Cancelling again returns the job unchanged.
  clock_.Advance(5'000'000);
  auto again = Cancel(acme_, "job_acme");
  ASSERT_OK(again);
  EXPECT_EQ(again->SerializeAsString(), cancelled->SerializeAsString());
}

TEST_F(VaultJobsTest, CancellingAFinishedJobReturnsItUnchanged) {
  ASSERT_NO_FATAL_FAILURE(CreateJob(acme_, "job_acme"));
  ASSERT_OK(store_->StartJob("job_acme", storage::JobLease{"runner", clock_.NowMicros(),
                                                           clock_.NowMicros() + 30'000'000}));
  clock_.Advance(4'000'000);
  ASSERT_OK(store_->FinishJob(
      "job_acme", "runner",
      storage::ArtifactRecord{"art_m", acme_.account_id, census_id_, 0, 1, "model"},
      clock_.NowMicros()));
  auto cancelled = Cancel(acme_, "job_acme");
  ASSERT_OK(cancelled);
  EXPECT_EQ(cancelled->state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(cancelled->artifact_id(), "art_m");
  EXPECT_TRUE(cancelled->error().empty());
  EXPECT_DOUBLE_EQ(cancelled->elapsed_seconds(), 4.0);
  EXPECT_EQ(cancelled->done(), 40);
}

TEST_F(VaultJobsTest, ElapsedSecondsCountFromTheStartUntilTheEnd) {
  ASSERT_NO_FATAL_FAILURE(CreateJob(acme_, "job_acme"));
  clock_.Advance(10'000'000);  // queued time does not count
  EXPECT_EQ(Get(acme_, "job_acme")->elapsed_seconds(), 0);
  ASSERT_OK(store_->StartJob("job_acme", storage::JobLease{"runner", clock_.NowMicros(),
                                                           clock_.NowMicros() + 30'000'000}));
  ASSERT_OK(store_->UpdateJobProgress("job_acme", "runner", 7, 40));
  clock_.Advance(2'500'000);
  auto running = Get(acme_, "job_acme");
  ASSERT_OK(running);
  EXPECT_EQ(running->state(), v1::JOB_STATE_RUNNING);
  EXPECT_DOUBLE_EQ(running->elapsed_seconds(), 2.5);
  EXPECT_EQ(running->done(), 7);
  ASSERT_OK(store_->FailJob("job_acme", "runner", "features are constant", clock_.NowMicros()));
  clock_.Advance(60'000'000);
  auto failed = Get(auditor_, "job_acme");
  ASSERT_OK(failed);
  EXPECT_EQ(failed->state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(failed->error(), "features are constant");
  EXPECT_DOUBLE_EQ(failed->elapsed_seconds(), 2.5);
  EXPECT_TRUE(failed->artifact_id().empty());
}

// Issue 19 §1: "48 concurrent FitFairModel submissions: 41 charged and pending against a limit
// of 16". The limit is decided inside the charge transaction: exactly 16 are charged, every
// other one is charged nothing, and a retry is admitted once jobs have finished.
TEST_F(VaultJobsTest, ConcurrentSubmissionsNeverExceedTheJobLimit) {
  constexpr int kSubmissions = 48;  // against VaultOptions' default limit of 16
  const auto request = [&](int i) {
    v1::FitFairModelRequest req;
    req.set_idempotency_key(absl::StrCat("fit-", i));
    req.set_table_handle(handle_);
    req.set_algorithm(v1::FAIR_MODEL_ALGORITHM_EXPONENTIAL_MECHANISM);
    req.set_label_column("label");
    req.add_attributes("sex");
    req.add_hypothesis_columns("pred");
    req.add_hypothesis_columns("label");
    req.set_em_delta(0.01);
    req.set_epsilon(4);  // feasible: ln(100)/2 = 2.3 < 8 − 1 (CheckEmFeasible)
    return req;
  };
  const v1::Budget before = BudgetOf(acme_);
  const int charges_before = ChargeRows();
  // Another connection holds SQLite's write lock for a second while the submissions arrive,
  // so that all of them are inside the vault before the first charge commits: the widest
  // race, as when charges queue behind each other on a busy server. (The runner is not
  // started: every admitted job stays queued.)
  sqlite3* blocker = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &blocker), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(blocker, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);
  std::vector<absl::Status> results(kSubmissions);
  std::vector<std::string> job_ids(kSubmissions);
  std::vector<std::thread> threads;
  for (int i = 0; i < kSubmissions; ++i) {
    threads.emplace_back([&, i] {
      auto submitted = vault_->FitFairModel(acme_, request(i));
      results[i] = submitted.status();
      if (submitted.ok()) job_ids[i] = submitted->job().id();
    });
  }
  absl::SleepFor(absl::Seconds(1));
  EXPECT_EQ(sqlite3_exec(blocker, "COMMIT", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(blocker);
  for (std::thread& t : threads) t.join();

  std::vector<int> admitted, refused;
  for (int i = 0; i < kSubmissions; ++i) {
    if (results[i].ok()) {
      admitted.push_back(i);
    } else {
      EXPECT_THAT(results[i],
                  StatusIs(absl::StatusCode::kResourceExhausted,
                           "the vault is running its limit of 16 training jobs; retry later "
                           "(nothing was charged)"));
      refused.push_back(i);
    }
  }
  ASSERT_EQ(admitted.size(), 16u);
  ASSERT_EQ(refused.size(), 32u);
  EXPECT_EQ(ChargeRows(), charges_before + 16);
  v1::Budget after = BudgetOf(acme_);
  EXPECT_EQ(after.releases(), before.releases() + 16);
  EXPECT_NEAR(after.epsilon_spent(), before.epsilon_spent() + 16 * 4, 1e-6);
  EXPECT_THAT(Ids(acme_, "", ""), ::testing::SizeIs(16));
  for (int i : refused) {  // charged nothing: no stored response, no job
    EXPECT_THAT(store_->GetStoredResponse(acme_.account_id, absl::StrCat("fit-", i)),
                StatusIs(absl::StatusCode::kNotFound));
  }
  // A preview says so as it says a budget refusal: not admitted now.
  v1::PreviewReleaseRequest preview;
  *preview.mutable_fit_fair_model() = request(kSubmissions);
  auto priced = vault_->PreviewRelease(acme_, preview);
  ASSERT_OK(priced);
  EXPECT_FALSE(priced->admitted());
  EXPECT_EQ(priced->refusal_code(), "RESOURCE_EXHAUSTED");
  EXPECT_THAT(priced->refusal(), HasSubstr("limit of 16 training jobs"));

  // Once jobs finish (here: two cancelled), as many retries are admitted, with their keys.
  ASSERT_OK(Cancel(acme_, job_ids[admitted[0]]));
  ASSERT_OK(Cancel(acme_, job_ids[admitted[1]]));
  EXPECT_OK(vault_->FitFairModel(acme_, request(refused[0])));
  EXPECT_OK(vault_->FitFairModel(acme_, request(refused[1])));
  ExpectRefusedWithoutCharge(
      acme_, [&] { return vault_->FitFairModel(acme_, request(refused[2])); },
      absl::StatusCode::kResourceExhausted, "limit of 16 training jobs");
  // An admitted submission's retry is a replay, also at the limit.
  auto replay = vault_->FitFairModel(acme_, request(admitted[2]));
  ASSERT_OK(replay);
  EXPECT_EQ(replay->job().id(), job_ids[admitted[2]]);
  after = BudgetOf(acme_);
  EXPECT_EQ(after.releases(), before.releases() + 18);
  EXPECT_EQ(ChargeRows(), charges_before + 18);
}

TEST_F(VaultJobsTest, StartJobsStartsOnce) {
  ASSERT_OK(vault_->StartJobs());
  EXPECT_THAT(vault_->StartJobs(), StatusIs(absl::StatusCode::kFailedPrecondition));
}

}  // namespace
}  // namespace fairvault::server::testing
