#include "server/app/finish_gate.h"

#include <algorithm>

namespace fairvault::server {

FinishGate::FinishGate(int limit) : limit_(std::max(1, limit)) {}

void FinishGate::Hold(const std::string& release) {
  absl::MutexLock lock(&mu_);
  ++waiting_;
  while (held_.contains(release)) changed_.Wait(&mu_);
  --waiting_;
  held_.insert(release);
}

void FinishGate::Drop(const std::string& release) {
  absl::MutexLock lock(&mu_);
  held_.erase(release);
  changed_.SignalAll();
}

void FinishGate::AcquireSlot() {
  absl::MutexLock lock(&mu_);
  const uint64_t ticket = next_ticket_++;
  ++waiting_;
  while (ticket != serving_ || slots_taken_ >= limit_) changed_.Wait(&mu_);
  --waiting_;
  ++serving_;
  ++slots_taken_;
  changed_.SignalAll();  // the next ticket may fit in another free slot
}

void FinishGate::ReleaseSlot() {
  absl::MutexLock lock(&mu_);
  --slots_taken_;
  changed_.SignalAll();
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
