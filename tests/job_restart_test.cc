// A training job survives kill -9 (issue 9 §4): the server is killed while a DP-oracle learner
// runs; restarted, it re-queues the job and finishes it from the job's stored randomness. A copy
// of the database taken right after the crash, served by another server process, runs the same
// job again without interruption: both artifacts are byte-identical, so a crash cannot be used
// to draw fresh noise. The ledger holds one charge for the job and verifies.
#include <chrono>
#include <filesystem>
#include <thread>

#include "core/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "tests/vault_fixture.h"

namespace fairvault::testing {
namespace {

namespace v1 = ::fairvault::v1;

class JobRestartTest : public VaultFixture {
 protected:
  // The job's lease is 2 s (not the default 30): the restarted server takes the job of the
  // killed one over once that lease has ended.
  void SetUp() override {
    serve_flags_ = {"--job-lease-seconds", "2"};
    StartVault(MakePopulation(5000, 11), /*epsilon=*/10, /*delta=*/0);
  }

  // Polls until the job leaves QUEUED/RUNNING (at most 120 s) and returns it.
  static v1::Job WaitFor(client::Client& company, const std::string& id) {
    v1::GetJobRequest get;
    get.set_job_id(id);
    v1::Job job;
    for (int i = 0; i < 12000; ++i) {
      auto got = company.GetJob(get);
      EXPECT_OK(got);
      if (!got.ok()) return job;
      job = got->job();
      if (job.state() != v1::JOB_STATE_QUEUED && job.state() != v1::JOB_STATE_RUNNING) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return job;
  }

  static std::string ArtifactBytes(client::Client& company, const std::string& id) {
    v1::GetArtifactRequest get;
    get.set_artifact_id(id);
    auto artifact = company.GetArtifact(get);
    EXPECT_OK(artifact);
    return artifact.ok() ? artifact->artifact().SerializeAsString() : "";
  }
};

TEST_F(JobRestartTest, KilledMidJobFinishesWithTheSameArtifactAsAnUninterruptedRun) {
  const v1::FitFairModelRequest fit = LongTrainingJob(table_handle_);
  auto submitted = company_->FitFairModel(fit);
  ASSERT_OK(submitted);
  const std::string job_id = submitted->job().id();

  // Kill -9 once the job has made progress but before it ends.
  v1::GetJobRequest get;
  get.set_job_id(job_id);
  bool running = false;
  for (int i = 0; i < 2000 && !running; ++i) {
    auto got = company_->GetJob(get);
    ASSERT_OK(got);
    ASSERT_NE(got->job().state(), v1::JOB_STATE_SUCCEEDED) << "the job ended before the kill";
    running = got->job().state() == v1::JOB_STATE_RUNNING && got->job().done() > 0;
    if (!running) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(running);
  ASSERT_OK(server_->Kill());

  // A copy of the crashed database, for an independent uninterrupted run.
  const std::string copy = TempDatabasePath("job-copy");
  for (const char* suffix : {"", "-wal", "-shm"}) {
    const std::string from = server_->db_path() + suffix;
    if (std::filesystem::exists(from)) {
      std::filesystem::copy_file(from, copy + suffix);
    }
  }

  ASSERT_OK(server_->Start());
  company_ = server_->Connect(company_key_);
  auditor_ = server_->Connect(auditor_key_);
  const v1::Job resumed = WaitFor(*company_, job_id);
  ASSERT_EQ(resumed.state(), v1::JOB_STATE_SUCCEEDED) << resumed.error();
  EXPECT_EQ(resumed.done(), 60000);
  const std::string after_crash = ArtifactBytes(*company_, resumed.artifact_id());
  ASSERT_FALSE(after_crash.empty());

  ServerProcess other(copy);
  other.set_serve_flags(serve_flags_);
  ASSERT_OK(other.Start());
  auto other_company = other.Connect(company_key_);
  const v1::Job rerun = WaitFor(*other_company, job_id);
  ASSERT_EQ(rerun.state(), v1::JOB_STATE_SUCCEEDED) << rerun.error();
  EXPECT_EQ(rerun.artifact_id(), resumed.artifact_id());
  EXPECT_EQ(ArtifactBytes(*other_company, rerun.artifact_id()), after_crash);
  ASSERT_OK(other.Stop());

  // One charge for the job; a replayed submission returns the same job without another.
  auto replay = company_->FitFairModel(fit);
  ASSERT_OK(replay);
  EXPECT_EQ(replay->SerializeAsString(), submitted->SerializeAsString());
  auto ledger = auditor_->AuditorListLedger();
  ASSERT_OK(ledger);
  int charges = 0;
  for (const v1::LedgerEntry& e : ledger->entries()) {
    charges += e.kind() == "charge" && e.request_kind() == "FitFairModel";
  }
  EXPECT_EQ(charges, 1);
  auto verify = auditor_->AuditorVerifyLedger();
  ASSERT_OK(verify);
  EXPECT_TRUE(verify->ok()) << verify->message();
}

}  // namespace
}  // namespace fairvault::testing
