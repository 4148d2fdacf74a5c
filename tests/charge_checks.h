// What the fault tests (tests/replica_test.cc on processes, tests/container/ on the compose
// stack) check after a crash or an outage: every response a client received has its ledger row,
// the chain verifies, no key is charged twice; and the calls they make to get there.
#ifndef FAIRVAULT_TESTS_CHARGE_CHECKS_H_
#define FAIRVAULT_TESTS_CHARGE_CHECKS_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "client/lib/client.h"

namespace fairvault::testing {

// What a client received for one idempotency key.
struct Outcome {
  std::string key;
  absl::Status status;
  std::string bytes;  // the serialized response when OK
  int64_t ledger_seq = 0;
};

// Noisy counts of the table's rows by sex at `epsilon`, under idempotency key `key`.
v1::NoisyCountsRequest CountsBySex(const std::string& table_handle, const std::string& key,
                                   double epsilon);
// Sends `req` and records what came back.
Outcome Charge(client::Client& client, const v1::NoisyCountsRequest& req);

// The whole ledger as the auditor reads it, oldest first.
std::vector<v1::LedgerEntry> ReadLedger(client::Client& auditor);

// The ledger verifies for the auditor and the regulator; its seqs are 1..n without a gap or a
// repeat; no idempotency key is charged twice; every OK outcome has its row (same seq, key).
// Returns the charge rows' seqs by key. Non-fatal test failures.
std::map<std::string, int64_t> CheckLedger(client::Client& auditor, client::Client& regulator,
                                           const std::vector<Outcome>& outcomes);

// Charges through two replicas of one vault until stopped, the load of the kill -9 tests:
// `threads` client threads, the even ones on replica A, the odd ones on B, each sending
// CountsBySex(table_handle, "k<thread>-<i>", epsilon) in turn. A thread on A stops at its first
// failure (A is gone); the threads on B go on until Stop.
class TwoReplicaLoad {
 public:
  // A client of the company on replica A (true) or B (false).
  using ClientFor = std::function<std::unique_ptr<client::Client>(bool on_a)>;
  TwoReplicaLoad(int threads, const ClientFor& client_for, std::string table_handle,
                 double epsilon);
  ~TwoReplicaLoad();

  // Waits until `n` calls have succeeded; false if not within `limit`.
  bool WaitForOk(int n, std::chrono::milliseconds limit) const;
  int ok() const { return ok_.load(); }

  // What the threads saw, once they are joined. Test failures unless only A's threads failed,
  // and only with UNAVAILABLE.
  struct Tally {
    std::vector<Outcome> all;
    int ok_a = 0, ok_b = 0, lost_a = 0;
  };
  Tally Stop();

 private:
  std::atomic<bool> stop_{false};
  std::atomic<int> ok_{0};
  std::vector<std::vector<Outcome>> outcomes_;
  std::vector<std::thread> threads_;
};

// Polls until the job leaves QUEUED/RUNNING (at most `limit`) and returns it.
v1::Job WaitForJob(client::Client& company, const std::string& id,
                   std::chrono::seconds limit = std::chrono::seconds(120));
// The artifact's serialized bytes ("" and a test failure when it cannot be read).
std::string ArtifactBytes(client::Client& company, const std::string& id);

// Milliseconds from `start` to now.
double MillisSince(std::chrono::steady_clock::time_point start);

}  // namespace fairvault::testing

#endif  // FAIRVAULT_TESTS_CHARGE_CHECKS_H_
