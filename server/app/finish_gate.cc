#include "server/app/finish_gate.h"

#include <algorithm>

namespace fairvault::server {

FinishGate::FinishGate(int limit) : limit_(std::max(1, limit)) {}

void FinishGate::Hold(const std::string& release) {
  absl::MutexLock lock(&mu_);
  ++waiting_;
  auto free = [this, &release]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !held_.contains(release);
  };
  mu_.Await(absl::Condition(&free));
  --waiting_;
  held_.insert(release);
}

void FinishGate::Drop(const std::string& release) {
  absl::MutexLock lock(&mu_);
  held_.erase(release);
}

void FinishGate::AcquireSlot() {
  absl::MutexLock lock(&mu_);
  const uint64_t ticket = next_ticket_++;
  ++waiting_;
  auto served = [this, ticket]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return ticket == serving_ && slots_taken_ < limit_;
  };
  mu_.Await(absl::Condition(&served));
  --waiting_;
  ++serving_;
  ++slots_taken_;
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
