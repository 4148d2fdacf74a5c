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

}  // namespace fairvault::server

#endif  // FAIRVAULT_SERVER_UTIL_CRYPTO_H_
