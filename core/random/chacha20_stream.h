// A keyed, replayable stream of secure random words: the ChaCha20 keystream (RFC 8439 block
// function) under a 256-bit key. For computations that must replay the same random draws (a
// bootstrap's two passes over one set of simulated releases) without falling back to a
// non-cryptographic generator: key it once from SecureBitGen, then make one stream per pass.
#ifndef FAIRVAULT_CORE_RANDOM_CHACHA20_STREAM_H_
#define FAIRVAULT_CORE_RANDOM_CHACHA20_STREAM_H_

#include <array>
#include <cstdint>
#include <limits>

#include "absl/random/bit_gen_ref.h"

namespace fairvault::core {

class ChaCha20Stream {
 public:
  using result_type = uint64_t;
  using Key = std::array<uint32_t, 8>;

  // State words 12..15 start as `counter_and_nonce` (words 12-13: a 64-bit block counter, low
  // word first; 14-15: nonce). With words 13-15 zero the output is RFC 8439's keystream for
  // nonce 0 from block `counter_and_nonce[0]`.
  explicit ChaCha20Stream(const Key& key, const std::array<uint32_t, 4>& counter_and_nonce = {});

  // A fresh 256-bit key from `gen` (the secure generator in production).
  static Key NewKey(absl::BitGenRef gen);

  static constexpr result_type min() { return 0; }
  static constexpr result_type max() { return std::numeric_limits<result_type>::max(); }
  // The next 8 keystream bytes as a little-endian word. Aborts before the 64-bit block counter
  // would wrap.
  result_type operator()();

 private:
  void Refill();

  // Four consecutive blocks are computed at once (SIMD lanes); the keystream order is the same
  // as one block at a time.
  static constexpr int kBlocks = 4;
  std::array<uint32_t, 16> input_;
  std::array<uint32_t, 16 * kBlocks> block_{};
  int next_ = 16 * kBlocks;  // index of the next unread 32-bit word of block_ (even)
};

}  // namespace fairvault::core

#endif  // FAIRVAULT_CORE_RANDOM_CHACHA20_STREAM_H_
