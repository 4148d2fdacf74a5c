#include "core/random/chacha20_stream.h"

#include <cstdlib>

#include "absl/random/distributions.h"

namespace fairvault::core {
namespace {

// Four 32-bit lanes, one per block (GCC vector extension: SSE2 on x86-64, NEON on arm64, plain
// code elsewhere).
typedef uint32_t Lanes __attribute__((vector_size(16)));

inline __attribute__((always_inline)) Lanes Rotl(Lanes x, int n) {
  return (x << n) | (x >> (32 - n));
}

// On local vectors, so that the compiler keeps the state in registers.
inline __attribute__((always_inline)) void QuarterRound(Lanes& a, Lanes& b, Lanes& c, Lanes& d) {
  a += b;
  d = Rotl(d ^ a, 16);
  c += d;
  b = Rotl(b ^ c, 12);
  a += b;
  d = Rotl(d ^ a, 8);
  c += d;
  b = Rotl(b ^ c, 7);
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
  // Lane j computes the block whose 64-bit counter (words 12-13) is the next one plus j.
  Lanes in[16];
  for (int w = 0; w < 16; ++w) in[w] = Lanes{input_[w], input_[w], input_[w], input_[w]};
  uint64_t counter = input_[12] | (static_cast<uint64_t>(input_[13]) << 32);
  // Wrapping would repeat the keystream.
  if (counter > ~uint64_t{0} - kBlocks) std::abort();
  for (int j = 0; j < kBlocks; ++j) {
    in[12][j] = static_cast<uint32_t>(counter + j);
    in[13][j] = static_cast<uint32_t>((counter + j) >> 32);
  }
  Lanes x[16];
  for (int w = 0; w < 16; ++w) x[w] = in[w];
  for (int round = 0; round < 10; ++round) {  // 20 rounds: 10 column + 10 diagonal
    QuarterRound(x[0], x[4], x[8], x[12]);
    QuarterRound(x[1], x[5], x[9], x[13]);
    QuarterRound(x[2], x[6], x[10], x[14]);
    QuarterRound(x[3], x[7], x[11], x[15]);
    QuarterRound(x[0], x[5], x[10], x[15]);
    QuarterRound(x[1], x[6], x[11], x[12]);
    QuarterRound(x[2], x[7], x[8], x[13]);
    QuarterRound(x[3], x[4], x[9], x[14]);
  }
  for (int w = 0; w < 16; ++w) {
    const Lanes out = x[w] + in[w];
    for (int j = 0; j < kBlocks; ++j) block_[16 * j + w] = out[j];
  }
  counter += kBlocks;
  input_[12] = static_cast<uint32_t>(counter);
  input_[13] = static_cast<uint32_t>(counter >> 32);
  next_ = 0;
}

ChaCha20Stream::result_type ChaCha20Stream::operator()() {
  if (next_ == 16 * kBlocks) Refill();
  const uint64_t word = block_[next_] | (static_cast<uint64_t>(block_[next_ + 1]) << 32);
  next_ += 2;
  return word;
}

}  // namespace fairvault::core
