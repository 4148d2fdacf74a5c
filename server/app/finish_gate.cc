#include "server/app/finish_gate.h"

#include <algorithm>

namespace fairvault::server {

FinishGate::FinishGate(int limit) : limit_(std::max(1, limit)) {}

bool FinishGate::Await(const absl::Condition& ready, const WaitLimit& limit) {
  const absl::Time give_up = limit.deadline - kAnswerMargin;
  while (true) {
    const absl::Time until =
        limit.cancelled ? std::min(give_up, absl::Now() + kCancelPoll) : give_up;
    if (mu_.AwaitWithDeadline(ready, until)) return true;
    if (absl::Now() >= give_up) return false;
    if (limit.cancelled) {
      // Asked without the gate's lock, which every finish of the process takes: the callback
      // is the caller's. A ticket is neither granted nor given up meanwhile, so it keeps its
      // place.
      mu_.Unlock();
      const bool cancelled = limit.cancelled();
      mu_.Lock();
      if (cancelled) return false;
    }
  }
}

bool FinishGate::Hold(const std::string& release, const WaitLimit& limit) {
  absl::MutexLock lock(&mu_);
  ++waiting_;
  auto free = [this, &release]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !held_.contains(release);
  };
  const bool held = Await(absl::Condition(&free), limit);
  --waiting_;
  if (held) held_.insert(release);
  return held;
}

void FinishGate::Drop(const std::string& release) {
  absl::MutexLock lock(&mu_);
  held_.erase(release);
}

bool FinishGate::AcquireSlot(const WaitLimit& limit) {
  absl::MutexLock lock(&mu_);
  const uint64_t ticket = next_ticket_++;
  ++waiting_;
  auto served = [this, ticket]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return ticket == serving_ && slots_taken_ < limit_;
  };
  const bool granted = Await(absl::Condition(&served), limit);
  --waiting_;
  // The next ticket to serve: past this one (granted, or given up and skipped below), and
  // past every one given up.
  if (granted) {
    ++slots_taken_;
    ++serving_;
  } else {
    abandoned_.insert(ticket);
  }
  while (abandoned_.erase(serving_) > 0) ++serving_;
  return granted;
}

void FinishGate::ReleaseSlot() {
  absl::MutexLock lock(&mu_);
  --slots_taken_;
}

int FinishGate::Waiting() {
  absl::MutexLock lock(&mu_);
  return waiting_;
}

int FinishGate::SlotsTaken() {
  absl::MutexLock lock(&mu_);
  return slots_taken_;
}

}  // namespace fairvault::server
