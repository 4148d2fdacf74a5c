// Identifier hashing on the company's side: keyed pseudonyms for subject keys (so the vault
// never sees raw ids) and plain SHA-256 fingerprints (e.g. default import batch ids).
#ifndef FAIRVAULT_CLIENT_LIB_PSEUDONYMISE_H_
#define FAIRVAULT_CLIENT_LIB_PSEUDONYMISE_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

struct evp_md_ctx_st;  // OpenSSL's EVP_MD_CTX

namespace fairvault::client {

// Shortest secret ReadSecretFile accepts, in bytes.
inline constexpr size_t kMinSecretBytes = 16;

// Lower-case hex HMAC-SHA256(secret, raw_id): 64 characters. The regulator and the company
// must use the same secret so that their pseudonyms of one person match. Thread-safe.
std::string Pseudonymise(absl::string_view secret, absl::string_view raw_id);

// Lower-case hex SHA-256 of `data`: 64 characters. Thread-safe.
std::string Sha256Hex(absl::string_view data);

// SHA-256 over data fed in pieces: Sha256Hex(a + b) == (Update(a), Update(b), HexDigest()).
// Not thread-safe; HexDigest ends it.
class Sha256Hasher {
 public:
  Sha256Hasher();
  ~Sha256Hasher();
  Sha256Hasher(const Sha256Hasher&) = delete;
  Sha256Hasher& operator=(const Sha256Hasher&) = delete;
  void Update(absl::string_view data);
  // Lower-case hex, 64 characters.
  std::string HexDigest();

 private:
  ::evp_md_ctx_st* ctx_;  // OpenSSL's EVP_MD_CTX
};

// Reads an HMAC secret from a file: the file's bytes with trailing "\n" / "\r\n" removed.
// NotFound if the file cannot be read; InvalidArgument if fewer than kMinSecretBytes remain.
absl::StatusOr<std::string> ReadSecretFile(const std::string& path);

}  // namespace fairvault::client

#endif  // FAIRVAULT_CLIENT_LIB_PSEUDONYMISE_H_
