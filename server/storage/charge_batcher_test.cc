// The charge queue: the first in line runs a batch of everything queued behind the running one,
// in queue order, and every caller gets its own outcome; RunChargeBatch's savepoints and its
// all-or-nothing commit, against a scripted connection.
#include "server/storage/charge_batcher.h"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fairvault::server::storage {
namespace {

using ::fairvault::testing::StatusIs;
using ::testing::ElementsAre;

ChargeRequest Request(const std::string& key) {
  ChargeRequest r;
  r.idempotency_key = key;
  return r;
}

const ChargeBody kNoBody = [](int64_t, const BudgetState&) -> absl::StatusOr<ChargeResult> {
  return ChargeResult{};
};

TEST(ChargeBatcherTest, ChargesQueuedBehindARunningBatchAreCommittedTogether) {
  ChargeBatcher batcher;
  std::vector<int64_t> committed;
  batcher.SetCommitObserver([&](int64_t n) { committed.push_back(n); });
  absl::Notification first_running, release_first;
  std::atomic<int> arrived{0};
  std::vector<std::vector<std::string>> batches;  // keys per batch, in the order run
  auto run = [&](absl::Span<PendingCharge* const> batch) {
    std::vector<std::string> keys;
    for (PendingCharge* p : batch) {
      keys.push_back(p->request.idempotency_key);
      p->outcome = ChargeOutcome{absl::StrCat("response to ", p->request.idempotency_key), false};
    }
    batches.push_back(keys);  // runs are serial: one leader at a time
    if (keys.front() == "first") {
      first_running.Notify();
      release_first.WaitForNotification();
    }
    return true;
  };
  std::vector<std::string> answers(6);
  std::thread first(
      [&] { answers[0] = batcher.Charge(Request("first"), 1, kNoBody, run)->response_payload; });
  first_running.WaitForNotification();
  std::vector<std::thread> others;
  for (int i = 1; i <= 5; ++i) {
    others.emplace_back([&, i] {
      ++arrived;
      answers[i] = batcher.Charge(Request(absl::StrCat("k", i)), 1, kNoBody, run)->response_payload;
    });
  }
  // Let the five queue behind the running batch (they cannot run before it ends).
  while (arrived.load() < 5) absl::SleepFor(absl::Milliseconds(1));
  absl::SleepFor(absl::Milliseconds(100));
  release_first.Notify();
  first.join();
  for (std::thread& t : others) t.join();
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_THAT(batches[0], ElementsAre("first"));
  EXPECT_EQ(batches[1].size(), 5u);  // one transaction, one sync, for the five
  EXPECT_THAT(committed, ElementsAre(1, 5));
  EXPECT_EQ(answers[0], "response to first");
  for (int i = 1; i <= 5; ++i) EXPECT_EQ(answers[i], absl::StrCat("response to k", i));
}

// Charges "a" and "b" in one batch.
struct TwoCharges {
  ChargeRequest a = Request("a"), b = Request("b");
  PendingCharge pa{a, 1, kNoBody}, pb{b, 1, kNoBody};
  std::vector<PendingCharge*> batch{&pa, &pb};
};

// A connection that logs its statements and fails the ones it is told to.
struct ScriptedConnection {
  std::vector<std::string> log;
  std::string fail_on;  // a statement that fails
  bool open = false;
  BatchOps Ops(std::function<absl::StatusOr<ChargeOutcome>(const PendingCharge&, absl::Status*)>
                   charge_one) {
    return BatchOps{[this] {
                      log.push_back("BEGIN");
                      open = true;
                      return absl::OkStatus();
                    },
                    [this] {
                      log.push_back("SAVEPOINT charge");
                      if (fail_on == "SAVEPOINT charge") return absl::InternalError("disk full");
                      return absl::OkStatus();
                    },
                    [this](const char* sql) {
                      log.push_back(sql);
                      if (sql == fail_on) return absl::InternalError("disk full");
                      if (std::string(sql) == "COMMIT" || std::string(sql) == "ROLLBACK") {
                        open = false;
                      }
                      return absl::OkStatus();
                    },
                    [this] { return open; }, std::move(charge_one)};
  }
};

TEST(RunChargeBatchTest, AFailingChargeIsRolledBackAloneAndBodyFailuresComeAfterTheCommit) {
  ScriptedConnection conn;
  ChargeRequest a = Request("a"), b = Request("b"), c = Request("c");
  PendingCharge pa{a, 1, kNoBody}, pb{b, 1, kNoBody}, pc{c, 1, kNoBody};
  std::vector<PendingCharge*> batch = {&pa, &pb, &pc};
  const bool committed = RunChargeBatch(
      batch,
      conn.Ops([](const PendingCharge& p, absl::Status* failure) -> absl::StatusOr<ChargeOutcome> {
        if (p.request.idempotency_key == "b") return absl::AlreadyExistsError("artifact id taken");
        if (p.request.idempotency_key == "c") *failure = absl::InternalError("solver failed");
        return ChargeOutcome{p.request.idempotency_key, false};
      }));
  EXPECT_TRUE(committed);
  EXPECT_THAT(conn.log, ElementsAre("BEGIN", "SAVEPOINT charge", "RELEASE SAVEPOINT charge",
                                    "SAVEPOINT charge", "ROLLBACK TO SAVEPOINT charge",
                                    "RELEASE SAVEPOINT charge", "SAVEPOINT charge", "COMMIT"));
  ASSERT_TRUE(pa.outcome.ok());
  EXPECT_EQ(pa.outcome->response_payload, "a");
  EXPECT_EQ(pb.outcome.status().code(), absl::StatusCode::kAlreadyExists);
  // c's body failed after its noise was drawn: stored with its charge, returned after the commit.
  EXPECT_EQ(pc.outcome.status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(pc.outcome.status().message(), "solver failed");
}

// The last charge's savepoint ends with the COMMIT: rolled back to if it failed, never released.
TEST(RunChargeBatchTest, AFailingLastChargeIsRolledBackBeforeTheCommit) {
  ScriptedConnection conn;
  TwoCharges two;
  const std::vector<PendingCharge*>& batch = two.batch;
  EXPECT_TRUE(RunChargeBatch(
      batch, conn.Ops([](const PendingCharge& p, absl::Status*) -> absl::StatusOr<ChargeOutcome> {
        if (p.request.idempotency_key == "b") return absl::ResourceExhaustedError("over budget");
        return ChargeOutcome{"released", false};
      })));
  EXPECT_THAT(conn.log, ElementsAre("BEGIN", "SAVEPOINT charge", "RELEASE SAVEPOINT charge",
                                    "SAVEPOINT charge", "ROLLBACK TO SAVEPOINT charge", "COMMIT"));
  EXPECT_TRUE(two.pa.outcome.ok());
  EXPECT_EQ(two.pb.outcome.status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(RunChargeBatchTest, AFailedCommitFailsEveryChargeOfTheBatch) {
  ScriptedConnection conn;
  conn.fail_on = "COMMIT";
  TwoCharges two;
  const std::vector<PendingCharge*>& batch = two.batch;
  EXPECT_FALSE(RunChargeBatch(
      batch, conn.Ops([](const PendingCharge& p, absl::Status*) -> absl::StatusOr<ChargeOutcome> {
        return ChargeOutcome{"released", false};
      })));
  EXPECT_EQ(conn.log.back(), "ROLLBACK");
  EXPECT_EQ(two.pa.outcome.status().message(), "disk full");
  EXPECT_EQ(two.pb.outcome.status().message(), "disk full");
}

TEST(RunChargeBatchTest, ATransactionTheDatabaseAbandonedFailsTheChargesBeforeItToo) {
  ScriptedConnection conn;
  ChargeRequest a = Request("a"), b = Request("b"), c = Request("c");
  PendingCharge pa{a, 1, kNoBody}, pb{b, 1, kNoBody}, pc{c, 1, kNoBody};
  std::vector<PendingCharge*> batch = {&pa, &pb, &pc};
  EXPECT_FALSE(RunChargeBatch(
      batch,
      conn.Ops([&conn](const PendingCharge& p, absl::Status*) -> absl::StatusOr<ChargeOutcome> {
        if (p.request.idempotency_key == "b") {
          conn.open = false;  // e.g. SQLite rolled back after an I/O error
          return absl::InternalError("disk I/O error");
        }
        return ChargeOutcome{"released", false};
      })));
  EXPECT_THAT(conn.log, ::testing::Not(::testing::Contains("COMMIT")));
  // The database's own message can quote a row: the batch's callers get a generic one.
  for (PendingCharge* p : batch) {
    EXPECT_THAT(p->outcome, StatusIs(absl::StatusCode::kInternal,
                                     "the charge transaction was rolled back"));
  }
}

// PostgreSQL sends the batch's BEGIN, lock and savepoint with the first charge's reads: when
// the lock fails (a deadlock to retry), that charge fails, its ROLLBACK TO finds no savepoint,
// and every charge is told the cause, not the missing savepoint.
TEST(RunChargeBatchTest, AFailedDeferredLockIsTheBatchsError) {
  ScriptedConnection conn;
  conn.fail_on = "ROLLBACK TO SAVEPOINT charge";
  TwoCharges two;
  const std::vector<PendingCharge*>& batch = two.batch;
  EXPECT_FALSE(RunChargeBatch(
      batch, conn.Ops([](const PendingCharge&, absl::Status*) -> absl::StatusOr<ChargeOutcome> {
        return absl::AbortedError("postgres: deadlock detected; retry");
      })));
  for (PendingCharge* p : batch) {
    EXPECT_THAT(p->outcome, StatusIs(absl::StatusCode::kAborted, "conflicted with another"));
  }
  // A statement timeout (the operator's statement_timeout) is told as one, in fixed words.
  TwoCharges timed_out;
  EXPECT_FALSE(RunChargeBatch(
      timed_out.batch,
      conn.Ops([](const PendingCharge&, absl::Status*) -> absl::StatusOr<ChargeOutcome> {
        return absl::DeadlineExceededError(
            "postgres: canceling statement due to statement timeout; retry");
      })));
  for (PendingCharge* p : timed_out.batch) {
    EXPECT_THAT(p->outcome, StatusIs(absl::StatusCode::kDeadlineExceeded,
                                     "ran past the database's time limit; retry"));
  }
}

// A refusal names the company and dataset it refused; when the batch then fails, the other
// callers (other companies) are told the batch's error, not that refusal.
TEST(RunChargeBatchTest, ARefusalIsNotToldToTheOtherChargesOfAFailedBatch) {
  ScriptedConnection conn;
  conn.fail_on = "ROLLBACK TO SAVEPOINT charge";
  TwoCharges two;
  const std::vector<PendingCharge*>& batch = two.batch;
  EXPECT_FALSE(RunChargeBatch(
      batch,
      conn.Ops([](const PendingCharge& p, absl::Status*) -> absl::StatusOr<ChargeOutcome> {
        if (p.request.idempotency_key == "b") {
          return absl::PermissionDeniedError("company 'acme' has no budget grant on 'census'");
        }
        return ChargeOutcome{"released", false};
      })));
  for (PendingCharge* p : batch) {
    EXPECT_THAT(p->outcome, StatusIs(absl::StatusCode::kInternal, "disk full"));
  }
}

}  // namespace
}  // namespace fairvault::server::storage
