#include "server/app/finish_gate.h"

#include <algorithm>

namespace fairvault::server {

FinishGate::FinishGate(int limit) : limit_(std::max(1, limit)) {}

bool FinishGate::Enter(const std::string& release) {
  absl::MutexLock lock(&mu_);
  bool held_by_another = false;
  while (held_.contains(release) || static_cast<int>(held_.size()) >= limit_) {
    held_by_another = held_by_another || held_.contains(release);
    left_.Wait(&mu_);
  }
  held_.insert(release);
  return held_by_another;
}

void FinishGate::Leave(const std::string& release) {
  absl::MutexLock lock(&mu_);
  held_.erase(release);
  left_.SignalAll();
}

int FinishGate::Running() {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(held_.size());
}

}  // namespace fairvault::server
