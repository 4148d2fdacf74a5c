// Issue 11 §2: two fairvault-server replicas on one PostgreSQL database, under faults, as real
// processes: concurrent charges across both never overspend a grant or a cap nor fork the ledger;
// a replica killed mid-charge leaves a row for every response a client received, and the other
// replica replays those byte for byte; a PostgreSQL restart under load fails requests with
// UNAVAILABLE only and the replica serves again by itself; a training job whose replica died is
// taken over by the other once its lease ends and ends with the artifact of an undisturbed run.
// Over 500 lines as one file: every fault shares the two replica processes and the database they
// start.
#include <glob.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/storage/postgres/test_postgres.h"
#include "tests/charge_checks.h"
#include "tests/vault_fixture.h"

namespace fairvault::testing {
namespace {

namespace v1 = ::fairvault::v1;
using server::storage::TestPostgres;
using ::testing::HasSubstr;
using ::testing::Not;
using Clock = std::chrono::steady_clock;

// One PostgreSQL server for the whole binary (started on first use), one database per test.
// Durable commits (fsync and synchronous_commit on): with synchronous_commit off, the restart
// test's immediate stop could drop a commit a client had already been told about.
TestPostgres* SharedPostgres() {
  static std::unique_ptr<TestPostgres> pg = []() -> std::unique_ptr<TestPostgres> {
    TestPostgres::Options options;
    options.fsync = true;
    auto started = TestPostgres::Start(options);
    if (!started.ok()) ADD_FAILURE() << started.status();
    return started.ok() ? *std::move(started) : nullptr;
  }();  // stopped and removed at exit
  return pg.get();
}

class ReplicaTest : public VaultFixture {
 protected:
  // Replica A is the fixture's server_; B runs on the same database with the same flags.
  void StartReplicas(int subjects, uint64_t seed, double epsilon) {
    pg_ = SharedPostgres();
    ASSERT_NE(pg_, nullptr);
    // PostgreSQL names are at most 63 bytes: a number per test, not the test's name.
    static int tests = 0;
    db_name_ = absl::StrCat("replica_", ++tests);
    ASSERT_OK_AND_ASSIGN(db_, pg_->CreateDatabase(db_name_));
    serve_flags_ = {"--job-lease-seconds", "2"};
    ASSERT_NO_FATAL_FAILURE(StartVault(MakePopulation(subjects, seed), epsilon, /*delta=*/0));
    b_ = std::make_unique<ServerProcess>(db_);
    b_->set_serve_flags(serve_flags_);
    ASSERT_OK(b_->Start());
  }

  void TearDown() override {
    b_.reset();
    VaultFixture::TearDown();
  }

  v1::NoisyCountsRequest Counts(const std::string& key, double epsilon) const {
    return CountsBySex(table_handle_, key, epsilon);
  }

  // The whole ledger through the auditor of `server`, oldest first.
  std::vector<v1::LedgerEntry> Ledger(const ServerProcess& server) const {
    return ReadLedger(*server.Connect(auditor_key_));
  }

  // tests/charge_checks.h's CheckLedger through `server`.
  std::map<std::string, int64_t> CheckLedger(const ServerProcess& server,
                                             const std::vector<Outcome>& outcomes) const {
    return ::fairvault::testing::CheckLedger(*server.Connect(auditor_key_),
                                             *server.Connect(regulator_key_), outcomes);
  }

  TestPostgres* pg_ = nullptr;
  std::string db_name_;
  std::unique_ptr<ServerProcess> b_;
};

TEST_F(ReplicaTest, ConcurrentChargesOnTwoReplicasSpendExactlyTheGrantAndTheCap) {
  // The grant (1.5) is larger than the dataset cap (1.0): the cap decides, 50 x 0.02 fit.
  ASSERT_NO_FATAL_FAILURE(StartReplicas(1000, 7, /*epsilon=*/1.5));
  v1::SetDatasetCapRequest cap;
  cap.set_dataset("pop");
  cap.set_epsilon(1.0);
  ASSERT_OK(regulator_->SetDatasetCap(cap));

  constexpr int kThreads = 64, kPerThread = 4, kAdmissible = 50;
  std::vector<std::vector<Outcome>> outcomes(kThreads);
  std::vector<std::thread> threads;
  const Clock::time_point start = Clock::now();
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto client = (t % 2 == 0 ? *server_ : *b_).Connect(company_key_);
      for (int i = 0; i < kPerThread; ++i) {
        outcomes[t].push_back(Charge(*client, Counts(absl::StrCat("t", t, "-", i), 0.02)));
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const double wall_ms = MillisSince(start);

  std::vector<Outcome> all;
  int admitted = 0, refused = 0, admitted_by[2] = {0, 0};
  for (int t = 0; t < kThreads; ++t) {
    for (const Outcome& o : outcomes[t]) {
      all.push_back(o);
      if (o.status.ok()) {
        ++admitted;
        ++admitted_by[t % 2];
      } else if (absl::IsResourceExhausted(o.status)) {
        ++refused;
      } else {
        ADD_FAILURE() << o.key << ": " << o.status;
      }
    }
  }
  std::printf(
      "replica_test concurrency: %d attempts from %d threads over 2 replicas, %d admitted (A %d, "
      "B %d), %d refused (RESOURCE_EXHAUSTED), wall %.0f ms\n",
      kThreads * kPerThread, kThreads, admitted, admitted_by[0], admitted_by[1], refused, wall_ms);
  EXPECT_EQ(admitted, kAdmissible);
  EXPECT_EQ(refused, kThreads * kPerThread - kAdmissible);

  const std::map<std::string, int64_t> charges = CheckLedger(*b_, all);
  EXPECT_EQ(charges.size(), static_cast<size_t>(kAdmissible));
  std::set<int64_t> seqs;
  for (const Outcome& o : all) {
    if (o.status.ok()) {
      EXPECT_TRUE(seqs.insert(o.ledger_seq).second) << o.ledger_seq;
    }
  }
  auto budget = company_->GetBudget();
  ASSERT_OK(budget);
  ASSERT_EQ(budget->budgets_size(), 1);
  EXPECT_DOUBLE_EQ(budget->budgets(0).epsilon_spent(), 1.0);
}

TEST_F(ReplicaTest, ReplicaKilledMidChargeLeavesARowForEveryResponseAndTheOtherReplaysIt) {
  ASSERT_NO_FATAL_FAILURE(StartReplicas(1000, 8, /*epsilon=*/1000));
  TwoReplicaLoad load(
      16, [&](bool on_a) { return (on_a ? *server_ : *b_).Connect(company_key_); },
      table_handle_, 0.01);
  ASSERT_TRUE(load.WaitForOk(80, std::chrono::seconds(60)));
  const int ok_at_kill = load.ok();
  ASSERT_OK(server_->Kill());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // B keeps charging meanwhile
  const TwoReplicaLoad::Tally tally = load.Stop();
  const std::vector<Outcome>& all = tally.all;
  const int ok_a = tally.ok_a, ok_b = tally.ok_b, lost_a = tally.lost_a;
  std::printf(
      "replica_test kill -9: replica A killed after %d OK charges; OK through A %d, through B %d; "
      "%d calls on A failed (UNAVAILABLE)\n",
      ok_at_kill, ok_a, ok_b, lost_a);
  EXPECT_GT(ok_a, 0);
  EXPECT_GT(lost_a, 0);

  // Every response a client received has its row.
  const std::map<std::string, int64_t> charges = CheckLedger(*b_, all);
  const size_t rows_before = Ledger(*b_).size();
  auto company_b = b_->Connect(company_key_);
  auto budget_before = company_b->GetBudget();
  ASSERT_OK(budget_before);

  // Replays through B: the same bytes, nothing charged.
  int replayed = 0;
  for (const Outcome& o : all) {
    if (!o.status.ok()) continue;
    const Outcome again = Charge(*company_b, Counts(o.key, 0.01));
    ASSERT_OK(again.status) << o.key;
    EXPECT_EQ(again.bytes, o.bytes) << o.key;
    ++replayed;
  }
  EXPECT_EQ(Ledger(*b_).size(), rows_before);
  auto budget_after = company_b->GetBudget();
  ASSERT_OK(budget_after);
  EXPECT_EQ(budget_after->SerializeAsString(), budget_before->SerializeAsString());

  // The calls whose outcome A's clients never learned resolve by retrying through B: each key
  // is charged at most once (a call A committed before dying returns its stored response).
  int resolved_stored = 0;
  std::vector<Outcome> retried = all;
  for (const Outcome& o : all) {
    if (o.status.ok()) continue;
    const Outcome again = Charge(*company_b, Counts(o.key, 0.01));
    ASSERT_OK(again.status) << o.key;
    resolved_stored += charges.count(o.key);
    if (charges.count(o.key)) {
      EXPECT_EQ(again.ledger_seq, charges.at(o.key)) << o.key;
    }
    retried.push_back(again);
  }
  std::printf(
      "replica_test kill -9: %d OK responses replayed byte-identical through B with no new row; "
      "of %d lost calls, %d had been committed by A and were returned from the store\n",
      replayed, lost_a, resolved_stored);
  CheckLedger(*b_, retried);
}

TEST_F(ReplicaTest, PostgresRestartUnderLoadFailsWithUnavailableAndServiceResumes) {
  ASSERT_NO_FATAL_FAILURE(StartReplicas(1000, 9, /*epsilon=*/1000));
  constexpr int kThreads = 8;
  // 0: before the outage, 1: PostgreSQL down, 2: PostgreSQL back.
  std::atomic<int> phase{0};
  std::atomic<bool> stop{false};
  std::atomic<int> ok_after{0};
  struct Seen {
    Outcome outcome;
    int phase_at_start, phase_at_end;
  };
  std::vector<std::vector<Seen>> seen(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto client = server_->Connect(company_key_);
      for (int i = 0; !stop.load(); ++i) {
        const int before = phase.load();
        Outcome o = Charge(*client, Counts(absl::StrCat("r", t, "-", i), 0.01));
        const int after = phase.load();
        if (o.status.ok() && before == 2) ++ok_after;
        seen[t].push_back({std::move(o), before, after});
        if (!seen[t].back().outcome.status.ok()) {
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  // Phase 1 starts once PostgreSQL is down (pg_ctl -w) and ends before it is back: a call that
  // began and ended in phase 1 ran wholly during the outage.
  const Clock::time_point stopping = Clock::now();
  ASSERT_OK(pg_->Stop());
  phase = 1;
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  phase = 2;
  ASSERT_OK(pg_->Restart());
  const Clock::time_point up = Clock::now();
  // The same replica serves again by itself: no restart of the process.
  const Clock::time_point deadline = up + std::chrono::seconds(30);
  double first_ok_ms = -1;
  while (ok_after.load() < kThreads && Clock::now() < deadline) {
    if (first_ok_ms < 0 && ok_after.load() > 0) first_ok_ms = MillisSince(up);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const double resumed_ms = MillisSince(up);
  if (first_ok_ms < 0) first_ok_ms = resumed_ms;
  stop = true;
  for (std::thread& t : threads) t.join();
  ASSERT_GE(ok_after.load(), kThreads) << "the replica did not serve again within 30 s";

  std::vector<Outcome> all;
  int ok = 0, unavailable = 0, unavailable_in_outage = 0, ok_in_outage = 0;
  for (const auto& per_thread : seen) {
    for (const Seen& s : per_thread) {
      all.push_back(s.outcome);
      const absl::Status& st = s.outcome.status;
      if (st.ok()) {
        ++ok;
        // A call that began and ended while PostgreSQL was down cannot have succeeded.
        ok_in_outage += s.phase_at_start == 1 && s.phase_at_end == 1;
      } else if (absl::IsUnavailable(st)) {
        ++unavailable;
        unavailable_in_outage += s.phase_at_start == 1 || s.phase_at_end == 1;
        // Issue 19 §2: to retry, and nothing about where the database is or who connects.
        const std::string message(st.message());
        EXPECT_THAT(message, HasSubstr("the vault's database is unavailable; retry shortly"));
        for (const std::string& detail :
             {pg_->dir(), std::string("5433"), std::string("socket"), std::string("fairvault")}) {
          EXPECT_THAT(message, Not(HasSubstr(detail)));
        }
      } else {
        EXPECT_TRUE(absl::IsResourceExhausted(st)) << s.outcome.key << ": " << st;
      }
    }
  }
  std::printf(
      "replica_test postgres restart: %d threads on one replica; PostgreSQL down %.0f ms; %d OK, "
      "%d UNAVAILABLE (%d during the outage), no other code; after pg_ctl start: first OK after "
      "%.0f ms, %d OK after %.0f ms, no replica restart\n",
      kThreads, std::chrono::duration<double, std::milli>(up - stopping).count(), ok, unavailable,
      unavailable_in_outage, first_ok_ms, kThreads, resumed_ms);
  EXPECT_GT(unavailable_in_outage, 0);
  EXPECT_EQ(ok_in_outage, 0);
  CheckLedger(*server_, all);
  // Every failed call can be retried: it returns the stored response if its commit had reached
  // PostgreSQL before the connection was cut, and is charged now otherwise (never twice).
  auto company = server_->Connect(company_key_);
  for (const Outcome& o : all) {
    if (!absl::IsUnavailable(o.status)) continue;
    const Outcome again = Charge(*company, Counts(o.key, 0.01));
    EXPECT_OK(again.status) << o.key;
  }
  CheckLedger(*server_, all);
}

// What `fairvault-server ARGS` printed (stdout and stderr) and its exit status.
std::pair<std::string, int> RunServer(const std::string& args) {
  std::string out;
  FILE* pipe = popen(absl::StrCat(FAIRVAULT_SERVER_BINARY, " ", args, " 2>&1").c_str(), "r");
  if (pipe == nullptr) return {"popen failed", -1};
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
  const int status = pclose(pipe);
  return {out, WIFEXITED(status) ? WEXITSTATUS(status) : -1};
}

// Issue 19 §2: what the server prints when it cannot open its PostgreSQL database names the
// database by its URI, with the password replaced, and libpq's detail without it.
TEST(PostgresStartupTest, TheServerNeverPrintsTheDatabasePassword) {
  // libpq quotes a malformed part of the URI, here the password. A string libpq cannot parse
  // is not shown at all (the server cannot tell where in it a password is).
  auto [malformed, status] =
      RunServer("bootstrap --name r --db 'postgresql://vault:s3cr%zzet@/ledger?host=/nowhere'");
  EXPECT_EQ(status, 1) << malformed;
  EXPECT_THAT(malformed, HasSubstr("PostgreSQL database (a connection string not shown"));
  EXPECT_THAT(malformed, HasSubstr("does not parse"));
  EXPECT_THAT(malformed, Not(HasSubstr("s3cr")));

  auto [unreachable, code] = RunServer(
      "serve --listen 127.0.0.1:0 --db "
      "'postgresql://vault:s3cret-pw@/ledger?host=/nowhere&port=5433&sslmode=disable'");
  EXPECT_EQ(code, 1) << unreachable;
  EXPECT_THAT(unreachable, HasSubstr("UNAVAILABLE"));
  EXPECT_THAT(unreachable, HasSubstr("postgresql://vault:********@/ledger?host=/nowhere"));
  EXPECT_THAT(unreachable, HasSubstr("/nowhere/.s.PGSQL.5433"));  // libpq's detail, logged
  EXPECT_THAT(unreachable, Not(HasSubstr("s3cret")));
}

// The newest PostgreSQL client tool `name` (as TestPostgres finds the server binaries).
std::string PgTool(const std::string& name) {
  glob_t g;
  std::string found;
  if (glob(absl::StrCat("/usr/lib/postgresql/*/bin/", name).c_str(), 0, nullptr, &g) == 0) {
    found = g.gl_pathv[g.gl_pathc - 1];
  }
  globfree(&g);
  return found;
}

TEST_F(ReplicaTest, JobOfAKilledReplicaIsTakenOverAndEndsWithTheUndisturbedArtifact) {
  // The job of tests/job_restart_test.cc.
  ASSERT_NO_FATAL_FAILURE(StartReplicas(5000, 11, /*epsilon=*/10));
  const v1::FitFairModelRequest fit = LongTrainingJob(table_handle_);
  auto submitted = company_->FitFairModel(fit);
  ASSERT_OK(submitted);
  const std::string job_id = submitted->job().id();

  v1::GetJobRequest get;
  get.set_job_id(job_id);
  bool running = false;
  int64_t done_before_kill = 0;
  for (int i = 0; i < 2000 && !running; ++i) {
    auto got = company_->GetJob(get);
    ASSERT_OK(got);
    ASSERT_NE(got->job().state(), v1::JOB_STATE_SUCCEEDED) << "the job ended before the kill";
    running = got->job().state() == v1::JOB_STATE_RUNNING && got->job().done() > 0;
    done_before_kill = got->job().done();
    if (!running) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(running);
  ASSERT_OK(server_->Kill());
  const Clock::time_point killed = Clock::now();

  // A snapshot of the database right after the crash (pg_dump reads one consistent snapshot
  // while B stays connected), for an undisturbed run of the same job by a third process.
  const std::string dump = TempDatabasePath("job-dump");
  const std::string copy_name = db_name_ + "_copy";
  ASSERT_OK_AND_ASSIGN(const std::string copy, pg_->CreateDatabase(copy_name));
  ASSERT_EQ(
      std::system(absl::StrCat(PgTool("pg_dump"), " -Fc -f '", dump, "' '", db_, "'").c_str()), 0);
  ASSERT_EQ(
      std::system(
          absl::StrCat(PgTool("pg_restore"), " --no-owner -d '", copy, "' '", dump, "'").c_str()),
      0);
  std::remove(dump.c_str());
  ASSERT_EQ(pg_->Scalar(copy_name, "SELECT count(*) FROM artifacts"), 0)
      << "the copy was taken after the job ended: nothing would be re-run";

  // B takes the job over once A's lease (2 s) has ended, and finishes it.
  auto company_b = b_->Connect(company_key_);
  const v1::Job taken = WaitForJob(*company_b, job_id);
  const double takeover_ms = MillisSince(killed);
  ASSERT_EQ(taken.state(), v1::JOB_STATE_SUCCEEDED) << taken.error();
  EXPECT_EQ(taken.done(), 60000);
  const std::string after_crash = ArtifactBytes(*company_b, taken.artifact_id());
  ASSERT_FALSE(after_crash.empty());

  ServerProcess other(copy);
  other.set_serve_flags(serve_flags_);
  ASSERT_OK(other.Start());
  auto other_company = other.Connect(company_key_);
  const v1::Job rerun = WaitForJob(*other_company, job_id);
  ASSERT_EQ(rerun.state(), v1::JOB_STATE_SUCCEEDED) << rerun.error();
  EXPECT_EQ(rerun.artifact_id(), taken.artifact_id());
  EXPECT_EQ(ArtifactBytes(*other_company, rerun.artifact_id()), after_crash);
  // The restored dump is a whole vault: its ledger verifies (and chains the job's charge).
  CheckLedger(other, {});
  ASSERT_OK(other.Stop());
  std::printf(
      "replica_test job takeover: replica A killed after %lld/60000 rounds; B finished the "
      "job %.0f ms after the kill (lease 2 s); artifact identical to the undisturbed run (%zu "
      "bytes)\n",
      static_cast<long long>(done_before_kill), takeover_ms, after_crash.size());

  // One charge for the job; a replay through B returns the same job without another.
  auto replay = company_b->FitFairModel(fit);
  ASSERT_OK(replay);
  EXPECT_EQ(replay->SerializeAsString(), submitted->SerializeAsString());
  int charges = 0;
  for (const v1::LedgerEntry& e : Ledger(*b_)) {
    charges += e.kind() == "charge" && e.request_kind() == "FitFairModel";
  }
  EXPECT_EQ(charges, 1);
  CheckLedger(*b_, {});
}

}  // namespace
}  // namespace fairvault::testing
