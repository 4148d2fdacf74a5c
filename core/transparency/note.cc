// C2SP signed notes and checkpoints with Ed25519 (see note.h).
#include "core/transparency/note.h"

#include <openssl/evp.h>
#include <openssl/rand.h>

#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "core/util/status_macros.h"

namespace fairvault::core::transparency {
namespace {

constexpr char kAlgEd25519 = 0x01;
constexpr size_t kKeyBytes = 32;
constexpr size_t kSignatureBytes = 64;
// "— " (U+2014 EM DASH, then a space) opens every signature line.
constexpr absl::string_view kSigPrefix = "\xe2\x80\x94 ";

struct PkeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct MdCtxFree {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;
using MdCtxPtr = std::unique_ptr<EVP_MD_CTX, MdCtxFree>;

const unsigned char* Bytes(absl::string_view s) {
  return reinterpret_cast<const unsigned char*>(s.data());
}

absl::StatusOr<std::string> PublicKeyOf(absl::string_view seed) {
  PkeyPtr key(EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nullptr, Bytes(seed), seed.size()));
  if (key == nullptr) return absl::InternalError("OpenSSL refused the Ed25519 key");
  std::string pub(kKeyBytes, '\0');
  size_t len = pub.size();
  if (EVP_PKEY_get_raw_public_key(key.get(), reinterpret_cast<unsigned char*>(pub.data()),
                                  &len) != 1 ||
      len != kKeyBytes) {
    return absl::InternalError("OpenSSL gave no Ed25519 public key");
  }
  return pub;
}

// "<name>+<hex hash>+<base64(0x01 || key)>" -> name, hash, key.
absl::Status ParseKey(absl::string_view encoded, std::string* name, uint32_t* hash,
                      std::string* key, absl::string_view what) {
  // The base64 may hold '+' too: split at the first two.
  std::vector<absl::string_view> parts = absl::StrSplit(encoded, absl::MaxSplits('+', 2));
  if (parts.size() != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " is not <name>+<hex hash>+<base64 key> (", parts.size(), " parts)"));
  }
  *name = std::string(parts[0]);
  RETURN_IF_ERROR(ValidKeyName(*name));
  if (parts[1].size() != 8 || !absl::SimpleHexAtoi(parts[1], hash)) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": the key hash is not 8 hex digits"));
  }
  std::string raw;
  if (!absl::Base64Unescape(parts[2], &raw) || raw.size() != 1 + kKeyBytes ||
      raw[0] != kAlgEd25519) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": the key is not base64 of 0x01 and 32 bytes (an Ed25519 key)"));
  }
  *key = raw.substr(1);
  return absl::OkStatus();
}

}  // namespace

uint32_t KeyHash(absl::string_view name, absl::string_view public_key) {
  const Hash h = Sha256(absl::StrCat(name, "\n", std::string(1, kAlgEd25519), public_key));
  return (uint32_t{static_cast<unsigned char>(h[0])} << 24) |
         (uint32_t{static_cast<unsigned char>(h[1])} << 16) |
         (uint32_t{static_cast<unsigned char>(h[2])} << 8) | uint32_t{static_cast<unsigned char>(h[3])};
}

absl::Status ValidKeyName(absl::string_view name) {
  if (name.empty()) return absl::InvalidArgumentError("a key name must not be empty");
  for (unsigned char c : name) {
    if (c <= ' ' || c == '+' || c == 0x7f) {
      return absl::InvalidArgumentError(absl::StrCat(
          "key name '", name, "' has a space, '+' or control character; use e.g. host/path"));
    }
  }
  return absl::OkStatus();
}

std::string CheckpointText(const Checkpoint& checkpoint) {
  std::string out = absl::StrCat(checkpoint.origin, "\n", checkpoint.size, "\n",
                                 absl::Base64Escape(checkpoint.root), "\n");
  for (const std::string& line : checkpoint.extensions) absl::StrAppend(&out, line, "\n");
  return out;
}

absl::StatusOr<Checkpoint> ParseCheckpointText(absl::string_view text) {
  if (text.empty() || text.back() != '\n') {
    return absl::InvalidArgumentError("a checkpoint ends with a newline");
  }
  std::vector<std::string> lines = absl::StrSplit(text.substr(0, text.size() - 1), '\n');
  if (lines.size() < 3) {
    return absl::InvalidArgumentError(
        "a checkpoint has at least three lines: origin, tree size, base64 root hash");
  }
  Checkpoint c;
  c.origin = lines[0];
  if (c.origin.empty()) return absl::InvalidArgumentError("the checkpoint's origin is empty");
  if (lines[1].empty() || !absl::ascii_isdigit(lines[1][0]) || !absl::SimpleAtoi(lines[1], &c.size) ||
      (lines[1].size() > 1 && lines[1][0] == '0')) {
    return absl::InvalidArgumentError(
        absl::StrCat("the checkpoint's tree size '", lines[1], "' is not a decimal number"));
  }
  if (!absl::Base64Unescape(lines[2], &c.root) || c.root.size() != kHashBytes) {
    return absl::InvalidArgumentError("the checkpoint's root hash is not base64 of 32 bytes");
  }
  for (size_t i = 3; i < lines.size(); ++i) {
    if (lines[i].empty()) return absl::InvalidArgumentError("a checkpoint has no empty line");
    c.extensions.push_back(lines[i]);
  }
  return c;
}

std::string NoteVerifier::Encoded() const {
  return absl::StrCat(name, "+", absl::StrFormat("%08x", key_hash), "+",
                      absl::Base64Escape(absl::StrCat(std::string(1, kAlgEd25519), public_key)));
}

absl::StatusOr<NoteVerifier> NoteVerifier::Parse(absl::string_view encoded) {
  NoteVerifier v;
  RETURN_IF_ERROR(ParseKey(absl::StripAsciiWhitespace(encoded), &v.name, &v.key_hash,
                           &v.public_key, "the verifier key"));
  if (KeyHash(v.name, v.public_key) != v.key_hash) {
    return absl::InvalidArgumentError("the verifier key's hash does not match its name and key");
  }
  return v;
}

bool NoteVerifier::Verify(absl::string_view text, absl::string_view signature) const {
  if (signature.size() != kSignatureBytes) return false;
  PkeyPtr key(EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr, Bytes(public_key),
                                          public_key.size()));
  MdCtxPtr ctx(EVP_MD_CTX_new());
  if (key == nullptr || ctx == nullptr) return false;
  if (EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, key.get()) != 1) return false;
  return EVP_DigestVerify(ctx.get(), Bytes(signature), signature.size(), Bytes(text),
                          text.size()) == 1;
}

absl::StatusOr<NoteSigner> NoteSigner::Generate(absl::string_view name) {
  RETURN_IF_ERROR(ValidKeyName(name));
  NoteSigner s;
  s.seed_.assign(kKeyBytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(s.seed_.data()), kKeyBytes) != 1) {
    return absl::InternalError("OpenSSL's random generator failed");
  }
  s.verifier_.name = std::string(name);
  ASSIGN_OR_RETURN(s.verifier_.public_key, PublicKeyOf(s.seed_));
  s.verifier_.key_hash = KeyHash(name, s.verifier_.public_key);
  return s;
}

absl::StatusOr<NoteSigner> NoteSigner::Parse(absl::string_view encoded) {
  encoded = absl::StripAsciiWhitespace(encoded);
  constexpr absl::string_view kPrefix = "PRIVATE+KEY+";
  if (!absl::ConsumePrefix(&encoded, kPrefix)) {
    return absl::InvalidArgumentError("a signing key starts with PRIVATE+KEY+");
  }
  NoteSigner s;
  RETURN_IF_ERROR(ParseKey(encoded, &s.verifier_.name, &s.verifier_.key_hash, &s.seed_,
                           "the signing key"));
  ASSIGN_OR_RETURN(s.verifier_.public_key, PublicKeyOf(s.seed_));
  if (KeyHash(s.verifier_.name, s.verifier_.public_key) != s.verifier_.key_hash) {
    return absl::InvalidArgumentError("the signing key's hash does not match its name and key");
  }
  return s;
}

std::string NoteSigner::EncodedSecret() const {
  return absl::StrCat("PRIVATE+KEY+", verifier_.name, "+",
                      absl::StrFormat("%08x", verifier_.key_hash), "+",
                      absl::Base64Escape(absl::StrCat(std::string(1, kAlgEd25519), seed_)));
}

absl::StatusOr<std::string> NoteSigner::Sign(absl::string_view text) const {
  PkeyPtr key(EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nullptr, Bytes(seed_), seed_.size()));
  MdCtxPtr ctx(EVP_MD_CTX_new());
  if (key == nullptr || ctx == nullptr ||
      EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, key.get()) != 1) {
    return absl::InternalError("OpenSSL could not start an Ed25519 signature");
  }
  std::string sig(kSignatureBytes, '\0');
  size_t len = sig.size();
  if (EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &len, Bytes(text),
                     text.size()) != 1 ||
      len != kSignatureBytes) {
    return absl::InternalError("OpenSSL could not sign");
  }
  return sig;
}

absl::StatusOr<SplitNote> ParseNote(absl::string_view note) {
  const size_t split = note.rfind("\n\n");
  if (split == absl::string_view::npos) {
    return absl::InvalidArgumentError("a signed note has a blank line before its signatures");
  }
  SplitNote out;
  out.text = std::string(note.substr(0, split + 1));
  absl::string_view sigs = note.substr(split + 2);
  if (sigs.empty() || sigs.back() != '\n') {
    return absl::InvalidArgumentError("a signed note ends with a newline after its signatures");
  }
  for (absl::string_view line : absl::StrSplit(sigs.substr(0, sigs.size() - 1), '\n')) {
    if (!absl::ConsumePrefix(&line, kSigPrefix)) {
      return absl::InvalidArgumentError("a signature line starts with '— ' (an em dash)");
    }
    const size_t space = line.rfind(' ');
    if (space == absl::string_view::npos) {
      return absl::InvalidArgumentError("a signature line is '— <name> <base64 signature>'");
    }
    SignatureLine s;
    s.name = std::string(line.substr(0, space));
    RETURN_IF_ERROR(ValidKeyName(s.name));
    std::string raw;
    if (!absl::Base64Unescape(line.substr(space + 1), &raw) || raw.size() < 5) {
      return absl::InvalidArgumentError(
          absl::StrCat("the signature of '", s.name, "' is not base64 of a key hash and bytes"));
    }
    s.key_hash = (uint32_t{static_cast<unsigned char>(raw[0])} << 24) |
                 (uint32_t{static_cast<unsigned char>(raw[1])} << 16) |
                 (uint32_t{static_cast<unsigned char>(raw[2])} << 8) |
                 uint32_t{static_cast<unsigned char>(raw[3])};
    s.signature = raw.substr(4);
    out.signatures.push_back(std::move(s));
  }
  return out;
}

absl::StatusOr<std::string> SignNote(absl::string_view note_or_text, const NoteSigner& signer) {
  std::string text;
  std::string lines;
  if (note_or_text.find("\n\n") != absl::string_view::npos) {
    ASSIGN_OR_RETURN(SplitNote split, ParseNote(note_or_text));
    text = split.text;
    lines = std::string(note_or_text.substr(text.size() + 1));
  } else {
    text = std::string(note_or_text);
  }
  if (text.empty() || text.back() != '\n') {
    return absl::InvalidArgumentError("a note's text ends with a newline");
  }
  ASSIGN_OR_RETURN(std::string sig, signer.Sign(text));
  const uint32_t h = signer.verifier().key_hash;
  const std::string prefix = {static_cast<char>(h >> 24), static_cast<char>(h >> 16),
                              static_cast<char>(h >> 8), static_cast<char>(h)};
  absl::StrAppend(&lines, kSigPrefix, signer.name(), " ", absl::Base64Escape(prefix + sig), "\n");
  return absl::StrCat(text, "\n", lines);
}

absl::StatusOr<std::string> OpenNote(absl::string_view note, const NoteVerifier& verifier) {
  ASSIGN_OR_RETURN(SplitNote split, ParseNote(note));
  for (const SignatureLine& s : split.signatures) {
    if (s.name != verifier.name || s.key_hash != verifier.key_hash) continue;
    if (!verifier.Verify(split.text, s.signature)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the signature of '", verifier.name, "' does not verify: the note was altered"));
    }
    return split.text;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("the note has no signature by '", verifier.name, "' (key hash ",
                   absl::StrFormat("%08x", verifier.key_hash), ")"));
}

}  // namespace fairvault::core::transparency
