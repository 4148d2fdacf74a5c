// OpenSSL-backed helpers; randomness comes from the one secure generator.
#include "server/util/crypto.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include <cstring>

#include "core/random/secure_bitgen.h"

namespace fairvault::server {

std::string Sha256(absl::string_view data) {
  unsigned char out[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), out);
  return std::string(reinterpret_cast<const char*>(out), sizeof(out));
}

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

KeyedBitGen::KeyedBitGen(absl::string_view key, absl::string_view message)
    : key_(key), message_(message) {
  message_.append(8, '\0');
}

KeyedBitGen::result_type KeyedBitGen::operator()() {
  if (next_ == 4) {
    for (int b = 0; b < 8; ++b) {
      message_[message_.size() - 8 + b] = static_cast<char>((block_ >> (8 * b)) & 0xff);
    }
    ++block_;
    unsigned char out[32];
    unsigned int len = 0;
    HMAC(EVP_sha256(), key_.data(), static_cast<int>(key_.size()),
         reinterpret_cast<const unsigned char*>(message_.data()), message_.size(), out, &len);
    std::memcpy(words_, out, sizeof(words_));
    next_ = 0;
  }
  return words_[next_++];
}

}  // namespace fairvault::server
