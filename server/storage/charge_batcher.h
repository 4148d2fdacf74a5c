// Group commit of charges: concurrent charges queue, and the first in line runs every queued
// charge (up to a batch limit) in one transaction with one sync, in queue order, each in its
// own savepoint. Each charge still sees every earlier one (the privacy filter's check-and-debit
// stays exact and serial), a charge that fails leaves nothing behind, and every caller is
// answered only after the commit that made its rows durable. The backends supply the
// statements (BatchOps); the queue and the batch's control flow are here, once.
#ifndef FAIRVAULT_SERVER_STORAGE_CHARGE_BATCHER_H_
#define FAIRVAULT_SERVER_STORAGE_CHARGE_BATCHER_H_

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "server/storage/store.h"

namespace fairvault::server::storage {

// One charge as the batch runs it.
struct PendingCharge {
  const ChargeRequest& request;
  int64_t now_micros;
  const ChargeBody& body;
  // The caller's answer, set by the batch.
  absl::StatusOr<ChargeOutcome> outcome = absl::InternalError("the charge was not run");
};

// What a backend provides to run a batch on one connection.
struct BatchOps {
  // Opens the transaction and takes the ledger's lock. Both may be deferred to the first
  // charge's first statement (PostgreSQL sends them with its reads): their failure is then that
  // charge's, and its ROLLBACK TO fails the batch.
  std::function<absl::Status()> begin;
  // Opens the savepoint "charge" before each charge, deferred the same way.
  std::function<absl::Status()> savepoint;
  // Runs one statement in it (RELEASE, ROLLBACK TO, COMMIT, ROLLBACK).
  std::function<absl::Status(const char* sql)> exec;
  // Whether the transaction is still open: a database may roll it back on its own after some
  // errors (SQLite after an I/O error or a full disk; a dropped PostgreSQL connection).
  std::function<bool()> open;
  // One charge inside the open transaction: replay, admission, body, ledger row, spend,
  // stored response, artifact and job. A body's failure is stored and put in `*failure`,
  // returned to the caller after the commit.
  std::function<absl::StatusOr<ChargeOutcome>(const PendingCharge&, absl::Status* failure)>
      charge_one;
};

// Runs `batch` in one transaction: every outcome is set; on a failed begin, savepoint or
// commit, every charge of the batch gets that error and nothing of the batch is stored.
// Returns whether the batch committed.
bool RunChargeBatch(absl::Span<PendingCharge* const> batch, const BatchOps& ops);

class ChargeBatcher {
 public:
  // Called after each committed batch with the number of charges it held (for metrics).
  using CommitObserver = std::function<void(int64_t charges)>;

  // At most `max_batch` (at least 1) charges a transaction: the first in line waits for every
  // body of its batch, so a small bound keeps one caller's wait short.
  explicit ChargeBatcher(int max_batch = 32) : max_batch_(std::max(1, max_batch)) {}

  // Queues the charge; the caller whose charge reaches the head of the queue runs the batch
  // (`run`, which sets every outcome and returns whether the batch committed) and the others
  // wait for it. Returns this charge's outcome.
  absl::StatusOr<ChargeOutcome> Charge(
      const ChargeRequest& request, int64_t now_micros, const ChargeBody& body,
      const std::function<bool(absl::Span<PendingCharge* const>)>& run) ABSL_LOCKS_EXCLUDED(mu_);

  void SetCommitObserver(CommitObserver observer) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Waiter {
    PendingCharge* charge;
    bool done = false;
  };

  const int max_batch_;
  absl::Mutex mu_;
  std::deque<Waiter*> queue_ ABSL_GUARDED_BY(mu_);
  CommitObserver observer_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fairvault::server::storage

#endif  // FAIRVAULT_SERVER_STORAGE_CHARGE_BATCHER_H_
