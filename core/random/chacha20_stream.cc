#include "core/random/chacha20_stream.h"

#include <cstdlib>

#include "absl/random/distributions.h"

namespace fairvault::core {
namespace {

constexpr uint32_t Rotl(uint32_t x, int n) { return (x << n) | (x >> (32 - n)); }

void QuarterRound(std::array<uint32_t, 16>& s, int a, int b, int c, int d) {
  s[a] += s[b];
  s[d] = Rotl(s[d] ^ s[a], 16);
  s[c] += s[d];
  s[b] = Rotl(s[b] ^ s[c], 12);
  s[a] += s[b];
  s[d] = Rotl(s[d] ^ s[a], 8);
  s[c] += s[d];
  s[b] = Rotl(s[b] ^ s[c], 7);
}

}  // namespace

ChaCha20Stream::ChaCha20Stream(const Key& key, const std::array<uint32_t, 4>& counter_and_nonce) {
  // "expand 32-byte k"
  input_[0] = 0x61707865;
  input_[1] = 0x3320646e;
  input_[2] = 0x79622d32;
  input_[3] = 0x6b206574;
  for (int i = 0; i < 8; ++i) input_[4 + i] = key[i];
  for (int i = 0; i < 4; ++i) input_[12 + i] = counter_and_nonce[i];
}

ChaCha20Stream::Key ChaCha20Stream::NewKey(absl::BitGenRef gen) {
  Key key;
  for (int i = 0; i < 8; i += 2) {
    const uint64_t word = absl::Uniform<uint64_t>(gen);
    key[i] = static_cast<uint32_t>(word);
    key[i + 1] = static_cast<uint32_t>(word >> 32);
  }
  return key;
}

void ChaCha20Stream::Refill() {
  block_ = input_;
  for (int round = 0; round < 10; ++round) {  // 20 rounds: 10 column + 10 diagonal
    QuarterRound(block_, 0, 4, 8, 12);
    QuarterRound(block_, 1, 5, 9, 13);
    QuarterRound(block_, 2, 6, 10, 14);
    QuarterRound(block_, 3, 7, 11, 15);
    QuarterRound(block_, 0, 5, 10, 15);
    QuarterRound(block_, 1, 6, 11, 12);
    QuarterRound(block_, 2, 7, 8, 13);
    QuarterRound(block_, 3, 4, 9, 14);
  }
  for (int i = 0; i < 16; ++i) block_[i] += input_[i];
  // Next block: the 64-bit counter in words 12-13. Wrapping would repeat the keystream.
  if (++input_[12] == 0 && ++input_[13] == 0) std::abort();
  next_ = 0;
}

ChaCha20Stream::result_type ChaCha20Stream::operator()() {
  if (next_ == 16) Refill();
  const uint64_t word = block_[next_] | (static_cast<uint64_t>(block_[next_ + 1]) << 32);
  next_ += 2;
  return word;
}

}  // namespace fairvault::core
