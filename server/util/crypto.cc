// OpenSSL-backed helpers; randomness comes from the one secure generator.
#include "server/util/crypto.h"

#include <openssl/crypto.h>

#include <cstring>

#include "core/random/secure_bitgen.h"
#include "core/transparency/merkle.h"

namespace fairvault::server {

std::string Sha256(absl::string_view data) { return core::transparency::Sha256(data); }

std::string HexEncode(absl::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

std::string RandomBytes(size_t n) {
  core::SecureBitGen gen;
  std::string out(n, '\0');
  for (size_t i = 0; i < n; i += 8) {
    uint64_t word = gen();
    std::memcpy(&out[i], &word, std::min<size_t>(8, n - i));
  }
  return out;
}

bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace fairvault::server
