// The charge queue and one batch's transaction (see charge_batcher.h).
#include "server/storage/charge_batcher.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "server/storage/store_common.h"

namespace fairvault::server::storage {

namespace {

// What every charge of a batch is told when one charge's failure ended the batch: the
// database's own words for a failure to retry (unavailable, a conflict, a timeout), which name
// no company, dataset, key or row; otherwise `fallback`. A refusal names the company and
// dataset it refused, a database's own error can quote a row, and the batch's other callers
// may be other companies.
absl::Status BatchFailure(const absl::Status& charge_failure, absl::Status fallback) {
  // Rebuilt, not passed on: a replayed charge returns its stored failure with its own code.
  switch (charge_failure.code()) {
    case absl::StatusCode::kUnavailable:
      return DatabaseUnavailable();
    case absl::StatusCode::kAborted:
      return absl::AbortedError("the charge transaction conflicted with another; retry");
    case absl::StatusCode::kDeadlineExceeded:
      return absl::DeadlineExceededError(
          "the charge transaction ran past the database's time limit; retry");
    default:
      return fallback;
  }
}

}  // namespace

bool RunChargeBatch(absl::Span<PendingCharge* const> batch, const BatchOps& ops) {
  // Every charge of the batch gets `error`; what the transaction held is rolled back.
  auto fail_all = [&](const absl::Status& error) {
    if (ops.open()) (void)ops.exec("ROLLBACK");
    for (PendingCharge* p : batch) p->outcome = error;
    return false;
  };
  if (absl::Status begun = ops.begin(); !begun.ok()) return fail_all(begun);
  std::vector<absl::Status> failures(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    if (absl::Status s = ops.savepoint(); !s.ok()) return fail_all(s);
    absl::StatusOr<ChargeOutcome> outcome = ops.charge_one(*batch[i], &failures[i]);
    if (!ops.open()) {
      // The database gave up the transaction: the earlier charges of the batch went with it.
      const absl::Status rolled_back = absl::InternalError("the charge transaction was rolled back");
      return fail_all(outcome.ok() ? rolled_back : BatchFailure(outcome.status(), rolled_back));
    }
    // The last charge's savepoint is left to the COMMIT (which ends it with the transaction):
    // one statement fewer, a round trip on PostgreSQL, for a batch of one.
    const bool last = i + 1 == batch.size();
    absl::Status closed = outcome.ok() ? (last ? absl::OkStatus()
                                               : ops.exec("RELEASE SAVEPOINT charge"))
                                       : ops.exec("ROLLBACK TO SAVEPOINT charge");
    if (closed.ok() && !outcome.ok() && !last) closed = ops.exec("RELEASE SAVEPOINT charge");
    // A failed charge whose ROLLBACK TO fails too: the batch's BEGIN, lock or savepoint
    // (deferred to the charge's first statement) may be what failed; that is the cause.
    if (!closed.ok()) return fail_all(outcome.ok() ? closed : BatchFailure(outcome.status(), closed));
    batch[i]->outcome = std::move(outcome);
  }
  if (absl::Status committed = ops.exec("COMMIT"); !committed.ok()) return fail_all(committed);
  for (size_t i = 0; i < batch.size(); ++i) {
    // A body's failure was stored with its charge; the caller gets it now that it is durable.
    if (batch[i]->outcome.ok() && !batch[i]->outcome->replayed && !failures[i].ok()) {
      batch[i]->outcome = failures[i];
    }
  }
  return true;
}

absl::StatusOr<ChargeOutcome> ChargeBatcher::Charge(
    const ChargeRequest& request, int64_t now_micros, const ChargeBody& body,
    const std::function<bool(absl::Span<PendingCharge* const>)>& run) {
  PendingCharge charge{request, now_micros, body};
  Waiter me{&charge};
  mu_.Lock();
  queue_.push_back(&me);
  // Wait until an earlier leader answered this charge, or it is first in line.
  auto answered_or_first = [this, &me]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return me.done || queue_.front() == &me;
  };
  mu_.Await(absl::Condition(&answered_or_first));
  if (me.done) {
    mu_.Unlock();
    return std::move(charge.outcome);
  }
  // The leader: takes the queue's head (itself first), runs it outside the queue's lock so
  // that new charges queue for the next batch meanwhile, then answers them.
  const size_t n = std::min(queue_.size(), static_cast<size_t>(max_batch_));
  std::vector<Waiter*> waiters(queue_.begin(), queue_.begin() + n);
  mu_.Unlock();
  std::vector<PendingCharge*> batch;
  batch.reserve(n);
  for (Waiter* w : waiters) batch.push_back(w->charge);
  const bool committed = run(batch);
  mu_.Lock();
  for (size_t i = 0; i < n; ++i) {
    queue_.front()->done = true;
    queue_.pop_front();
  }
  if (committed && observer_) observer_(static_cast<int64_t>(n));
  mu_.Unlock();
  return std::move(charge.outcome);
}

void ChargeBatcher::SetCommitObserver(CommitObserver observer) {
  absl::MutexLock lock(&mu_);
  observer_ = std::move(observer);
}

}  // namespace fairvault::server::storage
