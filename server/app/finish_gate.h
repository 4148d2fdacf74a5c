// Bounds the post-processing that runs after a charge (Vault::PreparedRelease::finish). A
// call first holds its release (account and idempotency key): one call at a time per release,
// so that a retry of a release being finished waits for that finish, then reads the store and
// finds it done. A call that still has to solve then takes one of `limit` slots, granted in
// the order asked, so that at most `limit` long solves run at once in the process. A retry's
// wait gives up a second before its RPC's deadline, or when its client cancels (its thread is
// not kept for a client that stopped waiting, and the client gets the reason); a ticket given
// up is skipped.
#ifndef FAIRVAULT_SERVER_APP_FINISH_GATE_H_
#define FAIRVAULT_SERVER_APP_FINISH_GATE_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace fairvault::server {

// How long a call waits for other calls' work: until a second before its deadline (so that its
// client still gets the answer saying why), or until `cancelled` says its client gave up
// (asked every kCancelPoll). The default waits for good.
struct WaitLimit {
  absl::Time deadline = absl::InfiniteFuture();
  std::function<bool()> cancelled;
};

class FinishGate {
 public:
  explicit FinishGate(int limit);

  static constexpr absl::Duration kAnswerMargin = absl::Seconds(1);
  static constexpr absl::Duration kCancelPoll = absl::Milliseconds(250);

  // Waits while another call holds `release`, then holds it until Drop and returns true; or
  // returns false, holding nothing, if `limit` ends the wait first.
  bool Hold(const std::string& release, const WaitLimit& limit = {}) ABSL_LOCKS_EXCLUDED(mu_);
  void Drop(const std::string& release) ABSL_LOCKS_EXCLUDED(mu_);

  // Waits for a slot, first come first served, and keeps it until ReleaseSlot (true); or
  // gives its place up if `limit` ends the wait first (false).
  bool AcquireSlot(const WaitLimit& limit = {}) ABSL_LOCKS_EXCLUDED(mu_);
  void ReleaseSlot() ABSL_LOCKS_EXCLUDED(mu_);

  // For tests: calls waiting in Hold or AcquireSlot, and slots taken.
  int Waiting() ABSL_LOCKS_EXCLUDED(mu_);
  int SlotsTaken() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // Awaits `ready` within `limit`: true once it holds, false if the limit ended the wait.
  bool Await(const absl::Condition& ready, const WaitLimit& limit)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int limit_;
  // Waits are Await with a condition (the mutex re-evaluates it at every unlock).
  absl::Mutex mu_;
  absl::flat_hash_set<std::string> held_ ABSL_GUARDED_BY(mu_);
  int waiting_ ABSL_GUARDED_BY(mu_) = 0;
  int slots_taken_ ABSL_GUARDED_BY(mu_) = 0;
  // Tickets for slots: the next to hand out, and the next to be served.
  uint64_t next_ticket_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t serving_ ABSL_GUARDED_BY(mu_) = 0;
  // Tickets whose callers gave up before being served: skipped when their turn comes.
  absl::flat_hash_set<uint64_t> abandoned_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fairvault::server

#endif  // FAIRVAULT_SERVER_APP_FINISH_GATE_H_
