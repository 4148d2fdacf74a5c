// Time source seam, so expiry and ledger timestamps are testable.
#ifndef FAIRVAULT_SERVER_UTIL_CLOCK_H_
#define FAIRVAULT_SERVER_UTIL_CLOCK_H_

#include <atomic>
#include <cstdint>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace fairvault::server {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual int64_t NowMicros() const = 0;
};

class RealClock final : public Clock {
 public:
  int64_t NowMicros() const override { return absl::ToUnixMicros(absl::Now()); }
};

// For tests: time moves only when told to.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(int64_t now_micros) : now_(now_micros) {}
  int64_t NowMicros() const override { return now_.load(); }
  void Advance(int64_t micros) { now_ += micros; }

 private:
  std::atomic<int64_t> now_;
};

}  // namespace fairvault::server

#endif  // FAIRVAULT_SERVER_UTIL_CLOCK_H_
