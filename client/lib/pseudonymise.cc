// HMAC-SHA256 pseudonyms and SHA-256 fingerprints through OpenSSL.
#include "client/lib/pseudonymise.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cstdio>
#include <cstdlib>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "client/lib/csv.h"

namespace fairvault::client {
namespace {

std::string ToHex(const unsigned char* bytes, unsigned int size) {
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(bytes), size));
}

}  // namespace

std::string Pseudonymise(absl::string_view secret, absl::string_view raw_id) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int mac_size = 0;
  // An empty key or message is valid HMAC input; OpenSSL wants non-null pointers.
  static const unsigned char kEmpty = 0;
  const unsigned char* key =
      secret.empty() ? &kEmpty : reinterpret_cast<const unsigned char*>(secret.data());
  const unsigned char* data =
      raw_id.empty() ? &kEmpty : reinterpret_cast<const unsigned char*>(raw_id.data());
  if (HMAC(EVP_sha256(), key, static_cast<int>(secret.size()), data, raw_id.size(), mac,
           &mac_size) == nullptr) {
    // Only an OpenSSL internal failure (e.g. out of memory) gets here; a pseudonym we cannot
    // compute must never silently become the raw id.
    std::fprintf(stderr, "fatal: OpenSSL HMAC-SHA256 failed\n");
    std::abort();
  }
  return ToHex(mac, mac_size);
}

std::string Sha256Hex(absl::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int digest_size = 0;
  if (EVP_Digest(data.data(), data.size(), digest, &digest_size, EVP_sha256(), nullptr) != 1) {
    std::fprintf(stderr, "fatal: OpenSSL SHA-256 failed\n");
    std::abort();
  }
  return ToHex(digest, digest_size);
}

namespace {
void CheckSha(int ok) {
  if (ok != 1) {
    std::fprintf(stderr, "fatal: OpenSSL SHA-256 failed\n");
    std::abort();
  }
}
}  // namespace

Sha256Hasher::Sha256Hasher() : ctx_(EVP_MD_CTX_new()) {
  CheckSha(ctx_ != nullptr && EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr));
}

Sha256Hasher::~Sha256Hasher() { EVP_MD_CTX_free(ctx_); }

void Sha256Hasher::Update(absl::string_view data) {
  CheckSha(EVP_DigestUpdate(ctx_, data.data(), data.size()));
}

std::string Sha256Hasher::HexDigest() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int digest_size = 0;
  CheckSha(EVP_DigestFinal_ex(ctx_, digest, &digest_size));
  return ToHex(digest, digest_size);
}

absl::StatusOr<std::string> ReadSecretFile(const std::string& path) {
  absl::StatusOr<std::string> content = ReadFileToString(path);
  if (!content.ok()) return content.status();
  std::string secret = *std::move(content);
  while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r')) {
    secret.pop_back();
  }
  if (secret.size() < kMinSecretBytes) {
    return absl::InvalidArgumentError(absl::StrCat("HMAC secret in '", path, "' is ", secret.size(),
                                                   " bytes; use at least ", kMinSecretBytes,
                                                   " (e.g. `openssl rand -hex 32 > ", path, "`)"));
  }
  return secret;
}

}  // namespace fairvault::client
