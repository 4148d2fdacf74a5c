// Bounds the post-processing that runs after a charge (Vault::PreparedRelease::finish): at
// most `limit` at once in this process, and one at a time per release (account and
// idempotency key), so that retries of a release being finished wait for that finish instead
// of each running its own long solve.
#ifndef FAIRVAULT_SERVER_APP_FINISH_GATE_H_
#define FAIRVAULT_SERVER_APP_FINISH_GATE_H_

#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"

namespace fairvault::server {

class FinishGate {
 public:
  explicit FinishGate(int limit);

  // Waits until no other call holds `release` and fewer than `limit` calls hold any, then
  // holds `release` until Leave. Returns whether another call held `release` meanwhile (it
  // may have stored the finished response: read it before finishing again).
  bool Enter(const std::string& release) ABSL_LOCKS_EXCLUDED(mu_);
  void Leave(const std::string& release) ABSL_LOCKS_EXCLUDED(mu_);

  // How many calls hold a release now (for tests).
  int Running() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const int limit_;
  absl::Mutex mu_;
  absl::CondVar left_;
  absl::flat_hash_set<std::string> held_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fairvault::server

#endif  // FAIRVAULT_SERVER_APP_FINISH_GATE_H_
