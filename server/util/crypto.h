// Hashing and secret generation for the server (OpenSSL): API-key hashes, ledger chain,
// request digests, artifact ids.
#ifndef FAIRVAULT_SERVER_UTIL_CRYPTO_H_
#define FAIRVAULT_SERVER_UTIL_CRYPTO_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace fairvault::server {

// Raw 32-byte SHA-256 digest.
std::string Sha256(absl::string_view data);
// Lower-case hex of arbitrary bytes.
std::string HexEncode(absl::string_view bytes);
// `n` bytes from the OS CSPRNG (through core::SecureBitGen).
std::string RandomBytes(size_t n);
// Compares in time independent of where the inputs differ.
bool ConstantTimeEquals(absl::string_view a, absl::string_view b);

// A cryptographically secure generator for one (key, message) pair: word i comes from
// HMAC-SHA256(key, message || i). The same pair always yields the same stream; without the
// key it is unpredictable. Used where a randomized output must be reproducible (the same
// subject asked twice gets the same decision), with the key drawn from the OS CSPRNG.
class KeyedBitGen {
 public:
  using result_type = uint64_t;
  static constexpr result_type min() { return 0; }
  static constexpr result_type max() { return ~result_type{0}; }
  KeyedBitGen(absl::string_view key, absl::string_view message);
  result_type operator()();

 private:
  std::string key_;
  std::string message_;  // message followed by an 8-byte block counter
  uint64_t block_ = 0;
  uint64_t words_[4] = {0, 0, 0, 0};
  int next_ = 4;
};

}  // namespace fairvault::server

#endif  // FAIRVAULT_SERVER_UTIL_CRYPTO_H_
