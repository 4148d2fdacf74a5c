// The one production random source: a URBG over the OS CSPRNG (getrandom(2)).
// Pass it to samplers as absl::BitGenRef; tests pass a seeded std::mt19937_64 instead.
#ifndef FAIRVAULT_CORE_RANDOM_SECURE_BITGEN_H_
#define FAIRVAULT_CORE_RANDOM_SECURE_BITGEN_H_

#include <cstdint>
#include <limits>

namespace fairvault::core {

// Uniform 64-bit words from getrandom(2). Bytes are fetched in blocks into a thread-local
// buffer (the block is consumed once, never reused), so one object may be shared by all
// threads. Aborts the process if the kernel CSPRNG fails: continuing without secure
// randomness would silently break every guarantee.
class SecureBitGen {
 public:
  using result_type = uint64_t;
  static constexpr result_type min() { return 0; }
  static constexpr result_type max() { return std::numeric_limits<result_type>::max(); }
  result_type operator()();
};

}  // namespace fairvault::core

#endif  // FAIRVAULT_CORE_RANDOM_SECURE_BITGEN_H_
