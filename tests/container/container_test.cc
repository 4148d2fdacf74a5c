// Issue 21: the compose deployment built and run as README tells an operator, then put under
// faults. The test starts its own dockerd, makes the base image, builds the project's images
// from deploy/ and brings the stack up with docker-compose in a copy of the repository; it talks
// to the stack only through the replicas' ports published on 127.0.0.1. The tests run in file
// order on one stack: the demo through both replicas; kill -9 of a replica during charges; a
// PostgreSQL restart under load; a job that loses its replica; `down` and `up` again; a backup
// restored into a fresh stack (which finishes the job with the same artifact); an upgrade from
// the database the previous release wrote.
// Over 500 lines as one file: every scenario shares the one stack, whose set-up is the cost.
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/testing/files.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/charge_checks.h"
#include "tests/container/compose_stack.h"
#include "tests/vault_fixture.h"

namespace fairvault::testing {
namespace {

namespace v1 = ::fairvault::v1;
using ::testing::HasSubstr;
using ::testing::Not;
using Clock = std::chrono::steady_clock;
using std::chrono::seconds;

std::string Env(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : fallback;
}

// The one stack of the binary, and what later scenarios need from earlier ones.
struct Shared {
  std::string skip_reason;  // set when the engine cannot run here and CI does not require it
  std::string run_dir;
  std::unique_ptr<DockerEngine> engine;
  std::unique_ptr<ComposeStack> stack;
  std::string regulator_key;
  // The charge scenarios' vault: keys, table, and every OK response by key.
  SeededVault kill;
  std::vector<Outcome> kill_outcomes;
  // The job scenario: its vault, request and the artifact it ended with.
  SeededVault job;
  v1::FitFairModelRequest job_request;
  std::string job_id, job_artifact;
  std::string dump;  // pg_dump taken right after the job's replica was killed
};
Shared& S() {
  static Shared* shared = new Shared();
  return *shared;
}

// The README's steps, as the test runs them: each must be in README.md (or, for the restore, in
// docs/operations.md), word for word, so the test does nothing README does not say.
void ExpectDocumented(const std::string& step, const std::string& doc = "README.md") {
  static std::map<std::string, std::string> texts;
  if (!texts.count(doc)) texts[doc] = ReadFile(absl::StrCat(FAIRVAULT_SOURCE_DIR, "/", doc));
  EXPECT_THAT(texts[doc], HasSubstr(step)) << "the test runs a step " << doc << " does not say";
}

// Runs a documented operator step in the stack's copy; fatal unless it succeeds.
CommandResult Step(const std::string& command, const std::string& documented_as = "",
                   const std::string& doc = "README.md") {
  ExpectDocumented(documented_as.empty() ? command : documented_as, doc);
  CommandResult r = S().stack->Run(command);
  EXPECT_TRUE(r.ok()) << command << ":\n" << r.output;
  return r;
}

constexpr char kCompose[] = "docker-compose -f deploy/docker-compose.yml";
// The replicas' job lease (deploy/.env), which the job takeover waits out.
constexpr int kJobLeaseSeconds = 10;

class StackEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    Shared& s = S();
    const bool required = !Env("FAIRVAULT_REQUIRE_DOCKER", "").empty() || !Env("CI", "").empty();
    char tmpl[] = "/tmp/fvct.XXXXXX";  // short: the engine's sockets live under it
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    s.run_dir = tmpl;
    const std::string cache =
        Env("FAIRVAULT_CONTAINER_CACHE", Env("HOME", "/root") + "/.cache/fairvault/container");
    std::printf("container_test: engine data root (kept between runs) %s/docker, run dir %s\n",
                cache.c_str(), s.run_dir.c_str());
    auto engine = DockerEngine::Start(cache + "/docker", s.run_dir);
    if (!engine.ok()) {
      if (required) FAIL() << "no Docker engine: " << engine.status();
      s.skip_reason = absl::StrCat("no Docker engine here: ", engine.status().ToString());
      return;
    }
    s.engine = *std::move(engine);
    // Whatever an interrupted run left in the engine (containers, volumes, networks) goes; the
    // images and the build cache stay.
    Shell("docker ps -aq | xargs -r docker rm -f -v; docker volume prune -f; "
          "docker network prune -f");
    auto stack = ComposeStack::Copy(FAIRVAULT_SOURCE_DIR, s.run_dir + "/fairvault");
    ASSERT_OK(stack);
    s.stack = *std::move(stack);
    // README's `build/client/fairvault` is this build's CLI.
    ASSERT_TRUE(s.stack->Run(absl::StrCat("ln -s '", FAIRVAULT_BINARY_DIR, "' build")).ok());

    const Clock::time_point start = Clock::now();
    Step("deploy/compose-secrets.sh");
    const int p1 = FreeLoopbackPort(), p2 = FreeLoopbackPort();
    ASSERT_NE(p1, p2);
    s.stack->PublishOnLoopback(p1, p2);
    Step(absl::StrCat("printf 'FAIRVAULT_VAULT_1_PUBLISH=127.0.0.1:", p1,
                      "\\nFAIRVAULT_VAULT_2_PUBLISH=127.0.0.1:", p2, "\\n' >> deploy/.env"),
         "FAIRVAULT_VAULT_1_PUBLISH=127.0.0.1:");
    // A job of a killed replica is taken over after 10 s instead of the default 30.
    Step(absl::StrCat("printf 'FAIRVAULT_JOB_LEASE_SECONDS=", kJobLeaseSeconds,
                      "\\n' >> deploy/.env"),
         "printf 'FAIRVAULT_JOB_LEASE_SECONDS=10\\n' >> deploy/.env");
    Step("deploy/make-base-image.sh");
    const Clock::time_point build = Clock::now();
    ASSERT_TRUE(Step(absl::StrCat(kCompose, " build")).ok());
    const double build_s = std::chrono::duration<double>(Clock::now() - build).count();
    ASSERT_TRUE(Step(absl::StrCat(kCompose, " up -d")).ok());
    ASSERT_OK(s.stack->WaitHealthy({"postgres", "vault-1", "vault-2"}, seconds(180)));
    // README: "postgres, vault-1, vault-2 healthy; bootstrap Exit 0".
    const CommandResult ps = Step(absl::StrCat(kCompose, " ps"));
    std::printf("%s", ps.output.c_str());
    int healthy = 0;
    for (absl::string_view line : absl::StrSplit(ps.output, '\n')) {
      healthy += absl::StrContains(line, "Up (healthy)");
      if (absl::StartsWith(line, "deploy_bootstrap_1")) {
        EXPECT_THAT(line, HasSubstr("Exit 0"));
      }
    }
    EXPECT_EQ(healthy, 3);
    s.regulator_key =
        std::string(absl::StripAsciiWhitespace(s.stack->ReadFile("deploy/secrets/regulator.key")));
    ASSERT_FALSE(s.regulator_key.empty());
    std::printf("container_test: stack up in %.0f s (image builds %.0f s)\n",
                std::chrono::duration<double>(Clock::now() - start).count(), build_s);
  }

  void TearDown() override {
    Shared& s = S();
    if (s.stack != nullptr) {
      std::printf("%s", s.stack->Compose("logs --tail 30 vault-1 vault-2 bootstrap").output.c_str());
      s.stack->Compose("down -v");
    }
    if (s.engine != nullptr) {
      EXPECT_OK(s.engine->Stop());
    }
    if (!s.run_dir.empty()) Shell(absl::StrCat("rm -rf '", s.run_dir, "'"));
  }
};

class ContainerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!S().skip_reason.empty()) GTEST_SKIP() << S().skip_reason;
    ASSERT_NE(S().stack, nullptr) << "the stack did not come up (see the environment's failure)";
  }
  ComposeStack& stack() { return *S().stack; }
  std::unique_ptr<client::Client> Connect(int replica, const std::string& key) {
    return stack().Connect(replica, key);
  }
  // A vault of `subjects` synthetic people under names with `suffix`, through the regulator on
  // replica 1; the company uploads through replica 2.
  SeededVault Seed(const std::string& suffix, int subjects, uint64_t seed, double epsilon) {
    SeededVault out;
    auto regulator = Connect(1, S().regulator_key);
    EXPECT_NE(regulator, nullptr);
    if (regulator == nullptr) return out;
    SeedNames names{"pop_" + suffix, "acme_" + suffix, "watchdog_" + suffix};
    SeedVault(
        *regulator, [&](const std::string& key) { return Connect(2, key); },
        MakePopulation(subjects, seed), epsilon, /*delta=*/0, names, &out);
    return out;
  }
  std::map<std::string, int64_t> Check(int replica, const SeededVault& v,
                                       const std::vector<Outcome>& outcomes) {
    return CheckLedger(*Connect(replica, v.auditor_key), *Connect(replica, S().regulator_key),
                       outcomes);
  }
};

TEST_F(ContainerTest, TheDemoRunsThroughBothReplicasOverTls) {
  const std::string cli = "build/client/fairvault";
  for (int replica : {1, 2}) {
    const CommandResult health = stack().Run(absl::StrCat(
        cli, " --server 127.0.0.1:", stack().port(replica),
        " --tls-ca deploy/secrets/tls/ca.pem health"));
    EXPECT_TRUE(health.ok());
    EXPECT_THAT(health.output, HasSubstr("SERVING"));
  }
  // Plaintext to a TLS port fails.
  const CommandResult plaintext =
      stack().Run(absl::StrCat(cli, " --server 127.0.0.1:", stack().port(1), " health"));
  EXPECT_FALSE(plaintext.ok());
  EXPECT_THAT(plaintext.output, HasSubstr("a TLS vault needs --tls-ca"));
  // The regulator and the auditor on replica 1, the company on replica 2.
  const CommandResult demo = Step(
      absl::StrCat("deploy/demo-steps.sh --server 127.0.0.1:", stack().port(1),
                   " --company-server 127.0.0.1:", stack().port(2),
                   " --tls-ca deploy/secrets/tls/ca.pem --regulator-key "
                   "deploy/secrets/regulator.key --work var/compose-demo --datasets '",
                   Env("FAIRVAULT_DATASETS", FAIRVAULT_DATASETS_DIR), "'"),
      "deploy/demo-steps.sh --server localhost:50051 --company-server localhost:50052");
  for (const char* seen : {"stored release from ledger seq", "ledger ok: yes", "note: ledger intact",
                           "side by side: every model on the held-out test set",
                           "ledger verified, head hash", "Done."}) {
    EXPECT_THAT(demo.output, HasSubstr(seen));
  }
  // Both replicas sign checkpoints with the stack's log key (deploy/secrets/log.key, made by
  // compose-secrets.sh), verified with its published verifier key.
  for (int replica : {1, 2}) {
    const CommandResult checkpoint = stack().Run(absl::StrCat(
        cli, " --server 127.0.0.1:", stack().port(replica),
        " --tls-ca deploy/secrets/tls/ca.pem --key-file deploy/secrets/regulator.key "
        "log checkpoint --auditor --log-key deploy/secrets/log.pub"));
    EXPECT_TRUE(checkpoint.ok()) << checkpoint.output;
    EXPECT_THAT(checkpoint.output, HasSubstr("signature verified"));
  }
  std::printf("container_test demo: %zu lines of output, ledger verified through replica 1\n",
              std::vector<std::string>(absl::StrSplit(demo.output, '\n')).size());
}

TEST_F(ContainerTest, KillNineOfAReplicaLosesNoChargeAndItRestartsAndServes) {
  Shared& s = S();
  s.kill = Seed("kill", 1000, 8, /*epsilon=*/1000);
  ASSERT_FALSE(s.kill.table_handle.empty());
  const int restarts_before = stack().RestartCount("vault-1");
  // Found first: the kill below is one system call, not a docker query.
  const pid_t vault_1 = stack().HostPid("vault-1");
  ASSERT_GT(vault_1, 0);
  TwoReplicaLoad load(
      16, [&](bool on_1) { return Connect(on_1 ? 1 : 2, s.kill.company_key); },
      s.kill.table_handle, 0.01);
  ASSERT_TRUE(load.WaitForOk(80, std::chrono::seconds(60)))
      << "the replicas did not serve 80 charges within 60 s";
  const int ok_at_kill = load.ok();
  ASSERT_EQ(kill(vault_1, SIGKILL), 0);
  const absl::Time killed = absl::Now();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // replica 2 keeps charging
  TwoReplicaLoad::Tally tally = load.Stop();
  s.kill_outcomes = std::move(tally.all);
  const int ok_1 = tally.ok_a, ok_2 = tally.ok_b, lost_1 = tally.lost_a;
  EXPECT_GT(ok_1, 0);
  EXPECT_GT(ok_2, 0);
  const std::map<std::string, int64_t> charges = Check(2, s.kill, s.kill_outcomes);
  auto company_2 = Connect(2, s.kill.company_key);
  const size_t rows_before = ReadLedger(*Connect(2, s.kill.auditor_key)).size();
  auto budget_before = company_2->GetBudget();
  ASSERT_OK(budget_before);
  int replayed = 0;
  for (const Outcome& o : s.kill_outcomes) {
    if (!o.status.ok()) continue;
    const Outcome again = Charge(*company_2, CountsBySex(s.kill.table_handle, o.key, 0.01));
    ASSERT_OK(again.status) << o.key;
    EXPECT_EQ(again.bytes, o.bytes) << o.key;
    ++replayed;
  }
  EXPECT_EQ(ReadLedger(*Connect(2, s.kill.auditor_key)).size(), rows_before);
  auto budget_after = company_2->GetBudget();
  ASSERT_OK(budget_after);
  EXPECT_EQ(budget_after->SerializeAsString(), budget_before->SerializeAsString());
  // The calls whose answer was lost resolve through replica 2, each charged at most once.
  int committed_before_kill = 0;
  for (Outcome& o : s.kill_outcomes) {
    if (o.status.ok()) continue;
    Outcome again = Charge(*company_2, CountsBySex(s.kill.table_handle, o.key, 0.01));
    ASSERT_OK(again.status) << o.key;
    if (charges.count(o.key)) {
      ++committed_before_kill;
      EXPECT_EQ(again.ledger_seq, charges.at(o.key)) << o.key;
    }
    o = std::move(again);
  }
  Check(2, s.kill, s.kill_outcomes);

  // Docker restarts the crashed replica (restart: unless-stopped); it serves the same replays.
  auto company_1 = Connect(1, s.kill.company_key);
  bool served = false;
  const Outcome& first = s.kill_outcomes.front();
  while (!served && absl::Now() - killed < absl::Seconds(120)) {
    const Outcome again = Charge(*company_1, CountsBySex(s.kill.table_handle, first.key, 0.01));
    served = again.status.ok();
    if (served) {
      EXPECT_EQ(again.bytes, first.bytes);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  EXPECT_TRUE(served) << "replica 1 did not serve again within 120 s of the kill";
  EXPECT_EQ(stack().RestartCount("vault-1"), restarts_before + 1);
  ASSERT_OK(stack().WaitHealthy({"vault-1"}, seconds(120)));
  // When Docker started it again, by its own clock (the same host's).
  const double back_ms = absl::ToDoubleMilliseconds(stack().StartedAt("vault-1") - killed);
  EXPECT_GT(back_ms, 0);
  std::printf(
      "container_test kill -9: vault-1 killed after %d OK charges; OK through vault-1 %d, "
      "through vault-2 %d; %d calls on vault-1 failed (UNAVAILABLE), %d of them committed "
      "before the kill and returned from the store; %d responses replayed byte-identical with "
      "no new row; Docker started vault-1 again %.0f ms after the kill, and it served the replays\n",
      ok_at_kill, ok_1, ok_2, lost_1, committed_before_kill, replayed, back_ms);
}

TEST_F(ContainerTest, PostgresRestartUnderLoadLosesNothingAndTheReplicasRecoverByThemselves) {
  Shared& s = S();
  ASSERT_FALSE(s.kill.table_handle.empty()) << "needs the kill scenario's vault";
  const int restarts[2] = {stack().RestartCount("vault-1"), stack().RestartCount("vault-2")};
  constexpr int kThreads = 8;
  std::atomic<int> phase{0};  // 0 before, 1 during `docker-compose restart postgres`, 2 after
  std::atomic<bool> stop{false};
  std::atomic<int> ok_after{0};  // threads with an OK call begun after the restart
  std::vector<std::vector<Outcome>> outcomes(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto client = Connect(t % 2 == 0 ? 1 : 2, s.kill.company_key);
      bool served_after = false;
      for (int i = 0; !stop.load(); ++i) {
        const int before = phase.load();
        outcomes[t].push_back(
            Charge(*client, CountsBySex(s.kill.table_handle, absl::StrCat("r", t, "-", i), 0.01)));
        if (outcomes[t].back().status.ok() && before == 2 && !served_after) {
          served_after = true;
          ++ok_after;
        }
        if (!outcomes[t].back().status.ok()) {
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  phase = 1;
  const Clock::time_point restarting = Clock::now();
  ASSERT_TRUE(stack().Compose("restart postgres").ok());
  const double restart_ms = MillisSince(restarting);
  phase = 2;
  const Clock::time_point up = Clock::now();
  while (ok_after.load() < kThreads && MillisSince(up) < 60000) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const double resumed_ms = MillisSince(up);
  stop = true;
  for (std::thread& t : threads) t.join();
  ASSERT_GE(ok_after.load(), kThreads) << "the replicas did not serve again within 60 s";

  std::vector<Outcome> all;
  int ok = 0, unavailable = 0;
  for (const auto& per_thread : outcomes) {
    for (const Outcome& o : per_thread) {
      all.push_back(o);
      if (o.status.ok()) {
        ++ok;
      } else {
        EXPECT_TRUE(absl::IsUnavailable(o.status)) << o.key << ": " << o.status;
        // Nothing about where the database is or who connects to it.
        const std::string message = absl::AsciiStrToLower(o.status.message());
        EXPECT_THAT(message, HasSubstr("the vault's database is unavailable; retry shortly"));
        for (const char* detail : {"postgres", "5432", "fairvault@", "pgpass"}) {
          EXPECT_THAT(message, Not(HasSubstr(detail)));
        }
        ++unavailable;
      }
    }
  }
  EXPECT_GT(unavailable, 0) << "the restart was not noticed: nothing was tested";
  // Neither replica was restarted: they reconnected by themselves.
  EXPECT_EQ(stack().RestartCount("vault-1"), restarts[0]);
  EXPECT_EQ(stack().RestartCount("vault-2"), restarts[1]);
  Check(1, s.kill, all);
  auto company = Connect(2, s.kill.company_key);
  for (Outcome& o : all) {
    if (o.status.ok()) continue;
    o = Charge(*company, CountsBySex(s.kill.table_handle, o.key, 0.01));
    EXPECT_OK(o.status) << o.key;
  }
  Check(2, s.kill, all);
  for (const Outcome& o : all) s.kill_outcomes.push_back(o);
  std::printf(
      "container_test postgres restart: %d threads on both replicas; `docker-compose restart "
      "postgres` took %.0f ms; %d OK, %d UNAVAILABLE, no other code; all %d threads served "
      "again %.0f ms after it returned; no replica restarted; ledger verified, every retry "
      "charged at most once\n",
      kThreads, restart_ms, ok, unavailable, kThreads, resumed_ms);
}

TEST_F(ContainerTest, AJobSurvivesTheLossOfItsReplica) {
  Shared& s = S();
  // Longer than tests/replica_test.cc's (Release runs 60,000 rounds on 5,000 people in about
  // half a second): killed mid-run with seconds to spare.
  s.job = Seed("job", 20000, 11, /*epsilon=*/10);
  ASSERT_FALSE(s.job.table_handle.empty());
  // Only replica 1 runs jobs while replica 2 is stopped: it is the one that dies.
  ASSERT_TRUE(stack().Compose("stop vault-2").ok());
  s.job_request = LongTrainingJob(s.job.table_handle);
  s.job_request.set_rounds(100000);
  auto company_1 = Connect(1, s.job.company_key);
  auto submitted = company_1->FitFairModel(s.job_request);
  ASSERT_OK(submitted);
  s.job_id = submitted->job().id();
  const pid_t vault_1 = stack().HostPid("vault-1");
  ASSERT_GT(vault_1, 0);
  v1::GetJobRequest get;
  get.set_job_id(s.job_id);
  int64_t done_before_kill = 0;
  for (int i = 0; i < 6000; ++i) {
    auto got = company_1->GetJob(get);
    ASSERT_OK(got);
    ASSERT_NE(got->job().state(), v1::JOB_STATE_SUCCEEDED) << "the job ended before the kill";
    done_before_kill = got->job().done();
    if (got->job().state() == v1::JOB_STATE_RUNNING && done_before_kill > 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_GT(done_before_kill, 0);
  ASSERT_EQ(kill(vault_1, SIGKILL), 0);
  const Clock::time_point killed = Clock::now();
  // The crash left the job running, unfinished, in the database (state 2: RUNNING).
  const CommandResult left = stack().Compose(absl::StrCat(
      "exec -T postgres psql -U fairvault -d fairvault -At -c "
      "\"SELECT state, done < 100000 FROM jobs WHERE id='", s.job_id, "'\""));
  ASSERT_EQ(absl::StripAsciiWhitespace(left.output), "2|t") << "the job ended before the kill";
  // README's backup, right after the crash: the restore scenario finishes the job from it.
  s.dump = "var/after-kill.dump";
  Step(absl::StrCat("mkdir -p var && (umask 077; ", kCompose,
                    " exec -T postgres pg_dump -U fairvault -Fc fairvault > ", s.dump, ")"),
       absl::StrCat("(umask 077; ", kCompose,
                    " exec -T postgres \\\n     pg_dump -U fairvault -Fc fairvault >"));
  struct stat dump_stat {};
  ASSERT_EQ(stat((stack().dir() + "/" + s.dump).c_str(), &dump_stat), 0);
  EXPECT_EQ(dump_stat.st_mode & 0077, 0u) << "the backup is readable by others";
  ASSERT_TRUE(stack().Compose("start vault-2").ok());

  auto company_2 = Connect(2, s.job.company_key);
  const v1::Job taken = WaitForJob(*company_2, s.job_id, seconds(300));
  const double takeover_ms = MillisSince(killed);
  ASSERT_EQ(taken.state(), v1::JOB_STATE_SUCCEEDED) << taken.error();
  EXPECT_EQ(taken.done(), 100000);
  s.job_artifact = ArtifactBytes(*company_2, taken.artifact_id());
  ASSERT_FALSE(s.job_artifact.empty());
  // One charge; a replay returns the same job.
  auto replay = company_2->FitFairModel(s.job_request);
  ASSERT_OK(replay);
  EXPECT_EQ(replay->SerializeAsString(), submitted->SerializeAsString());
  int charges = 0;
  for (const v1::LedgerEntry& e : ReadLedger(*Connect(2, s.job.auditor_key))) {
    charges += e.kind() == "charge" && e.request_kind() == "FitFairModel" &&
               e.idempotency_key() == s.job_request.idempotency_key();
  }
  EXPECT_EQ(charges, 1);
  ASSERT_OK(stack().WaitHealthy({"vault-1", "vault-2"}, seconds(120)));
  std::printf(
      "container_test job: vault-1 killed after %lld/100000 rounds (vault-2 stopped); the job "
      "succeeded %.0f ms after the kill (lease %d s), one charge, %zu-byte artifact\n",
      static_cast<long long>(done_before_kill), takeover_ms, kJobLeaseSeconds,
      s.job_artifact.size());
}

TEST_F(ContainerTest, DownAndUpKeepDataKeysAndBudgets) {
  Shared& s = S();
  ASSERT_FALSE(s.kill.table_handle.empty()) << "needs the kill scenario's vault";
  auto auditor = Connect(1, s.kill.auditor_key);
  std::string ledger_before;
  for (const v1::LedgerEntry& e : ReadLedger(*auditor)) ledger_before += e.SerializeAsString();
  auto budget_before = Connect(1, s.kill.company_key)->GetBudget();
  ASSERT_OK(budget_before);
  const std::string key_file_before = stack().ReadFile("deploy/secrets/regulator.key");

  Step(absl::StrCat(kCompose, " down"));
  ASSERT_TRUE(stack().ContainerId("vault-1").empty());
  const Clock::time_point up = Clock::now();
  Step(absl::StrCat(kCompose, " up -d"));
  ASSERT_OK(stack().WaitHealthy({"postgres", "vault-1", "vault-2"}, seconds(180)));
  const double up_ms = MillisSince(up);

  EXPECT_EQ(stack().ReadFile("deploy/secrets/regulator.key"), key_file_before);
  EXPECT_THAT(stack().Compose("logs bootstrap").output,
              HasSubstr("regulator.key exists; no new regulator key made"));
  auto regulator = Connect(2, S().regulator_key);
  auto accounts = regulator->ListAccounts();
  ASSERT_OK(accounts);
  int regulators = 0;
  for (const v1::Account& a : accounts->accounts()) regulators += a.role() == v1::ROLE_REGULATOR;
  EXPECT_EQ(regulators, 1);
  std::string ledger_after;
  for (const v1::LedgerEntry& e : ReadLedger(*Connect(2, s.kill.auditor_key))) {
    ledger_after += e.SerializeAsString();
  }
  EXPECT_EQ(ledger_after, ledger_before);
  auto budget_after = Connect(2, s.kill.company_key)->GetBudget();
  ASSERT_OK(budget_after);
  EXPECT_EQ(budget_after->SerializeAsString(), budget_before->SerializeAsString());
  auto company = Connect(1, s.kill.company_key);
  int replayed = 0;
  for (const Outcome& o : s.kill_outcomes) {
    if (!o.status.ok() || replayed >= 50) continue;
    const Outcome again = Charge(*company, CountsBySex(s.kill.table_handle, o.key, 0.01));
    ASSERT_OK(again.status);
    EXPECT_EQ(again.bytes, o.bytes) << o.key;
    ++replayed;
  }
  Check(1, s.kill, s.kill_outcomes);
  std::printf(
      "container_test down/up: stack healthy %.0f ms after `up -d`; regulator key file and the "
      "single regulator account unchanged; ledger (%zu bytes) and budget identical; %d replays "
      "byte-identical\n",
      up_ms, ledger_after.size(), replayed);
}

TEST_F(ContainerTest, ABackupRestoredIntoAFreshStackVerifiesReplaysAndFinishesTheJob) {
  Shared& s = S();
  ASSERT_FALSE(s.dump.empty()) << "needs the job scenario's backup";
  // A fresh stack: the volume goes with `down -v`.
  ASSERT_TRUE(stack().Compose("down -v").ok());
  ASSERT_TRUE(stack().Compose("up -d").ok());
  ASSERT_OK(stack().WaitHealthy({"postgres", "vault-1", "vault-2"}, seconds(180)));
  // Fresh: the regulator key of the old database is unknown here.
  auto fresh = Connect(1, S().regulator_key)->ListAccounts();
  EXPECT_TRUE(absl::IsUnauthenticated(fresh.status())) << fresh.status();

  const Clock::time_point restore = Clock::now();
  const std::string ops = "docs/operations.md";
  Step(absl::StrCat(kCompose, " stop vault-1 vault-2"), "", ops);
  Step(absl::StrCat(kCompose,
                    " exec -T postgres pg_restore -U fairvault -d fairvault --clean --if-exists "
                    "--single-transaction < ",
                    s.dump),
       "pg_restore -U fairvault -d fairvault --clean --if-exists --single-transaction <", ops);
  Step(absl::StrCat(kCompose, " start vault-1 vault-2"), "", ops);
  ASSERT_OK(stack().WaitHealthy({"vault-1", "vault-2"}, seconds(120)));
  const CommandResult verify = Step(
      absl::StrCat("build/client/fairvault --server 127.0.0.1:", stack().port(1),
                   " --tls-ca deploy/secrets/tls/ca.pem --key-file deploy/secrets/regulator.key "
                   "ledger verify"),
      "--key-file deploy/secrets/regulator.key ledger verify", ops);
  EXPECT_THAT(verify.output, HasSubstr("ok: yes"));
  const double restore_ms = MillisSince(restore);

  // Every charge before the dump replays byte for byte, with no new row.
  const std::map<std::string, int64_t> charges = Check(2, s.kill, {});
  auto company = Connect(2, s.kill.company_key);
  const size_t rows = ReadLedger(*Connect(2, s.kill.auditor_key)).size();
  int replayed = 0;
  for (const Outcome& o : s.kill_outcomes) {
    if (!o.status.ok()) continue;
    ASSERT_TRUE(charges.count(o.key)) << o.key << " is not in the restored ledger";
    const Outcome again = Charge(*company, CountsBySex(s.kill.table_handle, o.key, 0.01));
    ASSERT_OK(again.status);
    EXPECT_EQ(again.bytes, o.bytes) << o.key;
    ++replayed;
  }
  EXPECT_EQ(ReadLedger(*Connect(2, s.kill.auditor_key)).size(), rows);
  // The dump holds the job as the crash left it: the restored stack takes it over and ends
  // with the artifact the original stack made.
  const v1::Job rerun = WaitForJob(*Connect(1, s.job.company_key), s.job_id, seconds(300));
  ASSERT_EQ(rerun.state(), v1::JOB_STATE_SUCCEEDED) << rerun.error();
  EXPECT_EQ(ArtifactBytes(*Connect(1, s.job.company_key), rerun.artifact_id()), s.job_artifact);
  Check(1, s.job, {});
  std::printf(
      "container_test restore: dump of %lld bytes restored into a fresh stack in %.0f ms (stop, "
      "pg_restore, start, healthy, ledger verify); %d replays byte-identical, no new row; the "
      "job finished again with the identical artifact\n",
      static_cast<long long>(ReadFile(stack().dir() + "/" + s.dump).size()), restore_ms, replayed);
}

TEST_F(ContainerTest, AnUpgradeServesThePreviousReleasesDatabaseWithBothReplicasStartingTogether) {
  // tests/testdata/upgrade: a vault the previous release wrote on PostgreSQL (make_upgrade_
  // fixture.sh), loaded as that release left it, then the replicas of this image start on it
  // at the same time, as `up -d` after `build` starts them.
  const std::string fixture = "tests/testdata/upgrade";
  const std::string ops = "docs/operations.md";
  ASSERT_TRUE(stack().Compose("down -v").ok());
  Step(absl::StrCat(kCompose, " up -d postgres"), "", ops);
  ASSERT_OK(stack().WaitHealthy({"postgres"}, seconds(120)));
  Step(absl::StrCat(kCompose,
                    " exec -T postgres psql -U fairvault -d fairvault -v ON_ERROR_STOP=1 "
                    "--single-transaction -q < ",
                    fixture, "/vault.sql"),
       "psql -U fairvault -d fairvault -v ON_ERROR_STOP=1 --single-transaction -q <", ops);
  const Clock::time_point up = Clock::now();
  Step(absl::StrCat(kCompose, " up -d"));
  ASSERT_OK(stack().WaitHealthy({"vault-1", "vault-2"}, seconds(180)));
  const double up_ms = MillisSince(up);

  // Both replicas opened the database under the advisory lock: each logged the schema it found,
  // and at most one migrated it.
  const std::string logs = stack().Compose("logs vault-1 vault-2").output;
  int current = 0, migrated = 0;
  for (absl::string_view line : absl::StrSplit(logs, '\n')) {
    current += absl::StrContains(line, "database schema at version");
    migrated += absl::StrContains(line, "database schema migrated from version");
  }
  EXPECT_EQ(current + migrated, 2) << logs;
  // The fixture is schema version 4; this release's is 11 (a job's validation table, issue 22;
  // the ledger's actor, issue 23; decision batches, issue 24; the ledger's Merkle tree, issue
  // 25; its witnesses' cosignatures; pending releases; the jobs' indexes by company and
  // dataset): exactly one replica migrates it, the other finds it current.
  EXPECT_EQ(migrated, 1) << logs;
  const CommandResult version = stack().Compose(
      "exec -T postgres psql -U fairvault -d fairvault -At -c "
      "'SELECT count(*), max(version) FROM schema_version'");
  EXPECT_EQ(absl::StripAsciiWhitespace(version.output), "1|11");

  // The previous release's stored release replays as it printed it, on either replica; its
  // ledger verifies with the same head.
  const std::string cli = absl::StrCat("build/client/fairvault --tls-ca deploy/secrets/tls/ca.pem");
  const std::string handle(absl::StripAsciiWhitespace(stack().ReadFile(fixture + "/table.handle")));
  for (int replica : {1, 2}) {
    const CommandResult replay = stack().Run(absl::StrCat(
        cli, " --server 127.0.0.1:", stack().port(replica), " --key-file ", fixture,
        "/acme.key counts --table ", handle,
        " --columns prediction,label --attributes sex --epsilon 0.5 --idempotency-key "
        "upgrade-counts"));
    ASSERT_TRUE(replay.ok()) << replay.output;
    std::string printed;
    for (absl::string_view line : absl::StrSplit(replay.output, '\n')) {
      // What the CLI adds to a replay: the note and the budget as it is now.
      if (!absl::StartsWith(line, "stored release from ledger seq") &&
          !absl::StartsWith(line, "budget now on '")) {
        absl::StrAppend(&printed, line, "\n");
      }
    }
    EXPECT_EQ(absl::StripTrailingAsciiWhitespace(printed),
              absl::StripTrailingAsciiWhitespace(stack().ReadFile(fixture + "/counts.txt")));
  }
  const CommandResult verify = stack().Run(absl::StrCat(
      cli, " --server 127.0.0.1:", stack().port(1), " --key-file ", fixture,
      "/watchdog.key auditor verify"));
  EXPECT_THAT(verify.output, HasSubstr("ledger ok: yes"));
  const std::string before = stack().ReadFile(fixture + "/verify.txt");
  const size_t head = before.find("head hash: ");
  ASSERT_NE(head, std::string::npos);
  EXPECT_THAT(verify.output, HasSubstr(before.substr(head, 75)));
  std::printf(
      "container_test upgrade: the previous release's database (commit %s) served by both "
      "replicas %.0f ms after `up -d`; %d replica(s) migrated, %d found it current; one "
      "schema_version row; the stored release replayed identically on both; ledger head "
      "unchanged\n",
      std::string(absl::StripAsciiWhitespace(stack().ReadFile(fixture + "/written_by_commit")))
          .c_str(),
      up_ms, migrated, current);
}

}  // namespace
}  // namespace fairvault::testing

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new fairvault::testing::StackEnvironment());
  return RUN_ALL_TESTS();
}
