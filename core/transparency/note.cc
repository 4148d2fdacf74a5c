// C2SP signed notes and checkpoints with Ed25519 (see note.h).
#include "core/transparency/note.h"

#include <openssl/evp.h>
#include <openssl/rand.h>

#include <cstdint>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "core/util/status_macros.h"

namespace fairvault::core::transparency {
namespace {

constexpr size_t kKeyBytes = 32;
constexpr size_t kSignatureBytes = 64;
constexpr size_t kTimestampBytes = 8;
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

std::string TypeByte(KeyType type) { return std::string(1, static_cast<char>(type)); }

std::string BigEndian(uint64_t v, int bytes) {
  std::string out(bytes, '\0');
  for (int i = bytes - 1; i >= 0; --i, v >>= 8) out[i] = static_cast<char>(v & 0xff);
  return out;
}

uint64_t ReadBigEndian(absl::string_view bytes) {
  uint64_t v = 0;
  for (unsigned char c : bytes) v = (v << 8) | c;
  return v;
}

// "<name>+<hex hash>+<base64(type || key)>" -> name, hash, key, type.
absl::Status ParseKey(absl::string_view encoded, std::string* name, uint32_t* hash,
                      std::string* key, KeyType* type, absl::string_view what) {
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
      (raw[0] != static_cast<char>(KeyType::kEd25519) &&
       raw[0] != static_cast<char>(KeyType::kCosignatureV1))) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": the key is not base64 of 0x01 (a note key) or 0x04 (a cosignature/v1 key) and "
              "32 bytes of Ed25519 key"));
  }
  *type = static_cast<KeyType>(raw[0]);
  *key = raw.substr(1);
  return absl::OkStatus();
}

}  // namespace

uint32_t KeyHash(absl::string_view name, absl::string_view public_key, KeyType type) {
  const Hash h = Sha256(absl::StrCat(name, "\n", TypeByte(type), public_key));
  return static_cast<uint32_t>(ReadBigEndian(absl::string_view(h).substr(0, 4)));
}

std::string CosignedMessage(absl::string_view text, int64_t unix_seconds) {
  return absl::StrCat("cosignature/v1\ntime ", unix_seconds, "\n", text);
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
                      absl::Base64Escape(absl::StrCat(TypeByte(type), public_key)));
}

absl::StatusOr<NoteVerifier> NoteVerifier::Parse(absl::string_view encoded) {
  NoteVerifier v;
  RETURN_IF_ERROR(ParseKey(absl::StripAsciiWhitespace(encoded), &v.name, &v.key_hash,
                           &v.public_key, &v.type, "the verifier key"));
  if (KeyHash(v.name, v.public_key, v.type) != v.key_hash) {
    return absl::InvalidArgumentError("the verifier key's hash does not match its name and key");
  }
  return v;
}

bool NoteVerifier::Verify(absl::string_view text, absl::string_view signature) const {
  std::string cosigned;
  if (type == KeyType::kCosignatureV1) {
    if (signature.size() != kTimestampBytes + kSignatureBytes) return false;
    const uint64_t time = ReadBigEndian(signature.substr(0, kTimestampBytes));
    if (time > uint64_t{INT64_MAX}) return false;
    cosigned = CosignedMessage(text, static_cast<int64_t>(time));
    text = cosigned;
    signature.remove_prefix(kTimestampBytes);
  }
  if (signature.size() != kSignatureBytes) return false;
  PkeyPtr key(EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr, Bytes(public_key),
                                          public_key.size()));
  MdCtxPtr ctx(EVP_MD_CTX_new());
  if (key == nullptr || ctx == nullptr) return false;
  if (EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, key.get()) != 1) return false;
  return EVP_DigestVerify(ctx.get(), Bytes(signature), signature.size(), Bytes(text),
                          text.size()) == 1;
}

absl::StatusOr<NoteSigner> NoteSigner::Generate(absl::string_view name, KeyType type) {
  RETURN_IF_ERROR(ValidKeyName(name));
  NoteSigner s;
  s.seed_.assign(kKeyBytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(s.seed_.data()), kKeyBytes) != 1) {
    return absl::InternalError("OpenSSL's random generator failed");
  }
  s.verifier_.name = std::string(name);
  s.verifier_.type = type;
  ASSIGN_OR_RETURN(s.verifier_.public_key, PublicKeyOf(s.seed_));
  s.verifier_.key_hash = KeyHash(name, s.verifier_.public_key, type);
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
                           &s.verifier_.type, "the signing key"));
  ASSIGN_OR_RETURN(s.verifier_.public_key, PublicKeyOf(s.seed_));
  if (KeyHash(s.verifier_.name, s.verifier_.public_key, s.verifier_.type) !=
      s.verifier_.key_hash) {
    return absl::InvalidArgumentError("the signing key's hash does not match its name and key");
  }
  return s;
}

std::string NoteSigner::EncodedSecret() const {
  return absl::StrCat("PRIVATE+KEY+", verifier_.name, "+",
                      absl::StrFormat("%08x", verifier_.key_hash), "+",
                      absl::Base64Escape(absl::StrCat(TypeByte(verifier_.type), seed_)));
}

absl::StatusOr<std::string> NoteSigner::Sign(absl::string_view text, int64_t unix_seconds) const {
  std::string prefix;
  std::string cosigned;
  if (verifier_.type == KeyType::kCosignatureV1) {
    if (unix_seconds < 0) return absl::InvalidArgumentError("a cosignature's time is >= 0");
    prefix = BigEndian(static_cast<uint64_t>(unix_seconds), kTimestampBytes);
    cosigned = CosignedMessage(text, unix_seconds);
    text = cosigned;
  }
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
  return prefix + sig;
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
    s.key_hash = static_cast<uint32_t>(ReadBigEndian(absl::string_view(raw).substr(0, 4)));
    s.signature = raw.substr(4);
    out.signatures.push_back(std::move(s));
  }
  return out;
}

absl::StatusOr<std::string> SignNote(absl::string_view note_or_text, const NoteSigner& signer,
                                     int64_t unix_seconds) {
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
  if (unix_seconds == 0) unix_seconds = static_cast<int64_t>(std::time(nullptr));
  SignatureLine line{signer.name(), signer.verifier().key_hash, ""};
  ASSIGN_OR_RETURN(line.signature, signer.Sign(text, unix_seconds));
  absl::StrAppend(&lines, SignatureLineText(line));
  return absl::StrCat(text, "\n", lines);
}

namespace {
constexpr char kRotationHeader[] = "fairvault log key rotation";
}  // namespace

absl::StatusOr<std::string> EndorseRotation(const NoteSigner& old_key,
                                            const NoteSigner& new_key) {
  if (old_key.verifier().type != KeyType::kEd25519 || new_key.verifier().type != KeyType::kEd25519) {
    return absl::InvalidArgumentError("a rotation is between two log (note) keys, not witness keys");
  }
  if (old_key.verifier().public_key == new_key.verifier().public_key) {
    return absl::InvalidArgumentError("the new log key is the old one");
  }
  ASSIGN_OR_RETURN(std::string note,
                   SignNote(absl::StrCat(kRotationHeader, "\n", old_key.verifier().Encoded(),
                                         "\n", new_key.verifier().Encoded(), "\n"),
                            old_key));
  return SignNote(note, new_key);
}

absl::StatusOr<NoteVerifier> OpenRotation(absl::string_view note, const NoteVerifier& old_key) {
  if (old_key.type != KeyType::kEd25519) {
    return absl::InvalidArgumentError("the old key is a witness key, not a log (note) key");
  }
  ASSIGN_OR_RETURN(std::string text, OpenNote(note, old_key));
  const std::vector<std::string> lines = absl::StrSplit(text, '\n');
  // The header, the two keys, and the empty string after the final newline.
  if (lines.size() != 4 || lines[0] != kRotationHeader || !lines[3].empty()) {
    return absl::InvalidArgumentError("the note is not a log key rotation");
  }
  if (lines[1] != old_key.Encoded()) {
    return absl::InvalidArgumentError("the rotation is from another key than the one given");
  }
  ASSIGN_OR_RETURN(NoteVerifier new_key, NoteVerifier::Parse(lines[2]));
  if (new_key.Encoded() != lines[2]) {  // one spelling of the key, as the Python client reads it
    return absl::InvalidArgumentError("the new key is not written as its encoding");
  }
  if (new_key.type != KeyType::kEd25519) {
    return absl::InvalidArgumentError("the new key is not a log (note) key");
  }
  if (new_key.public_key == old_key.public_key) {
    return absl::InvalidArgumentError("the new log key is the old one");
  }
  if (absl::Status signed_by_new = OpenNote(note, new_key).status(); !signed_by_new.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the new key did not sign its rotation: ", signed_by_new.message()));
  }
  return new_key;
}

std::string SignatureLineText(const SignatureLine& line) {
  return absl::StrCat(kSigPrefix, line.name, " ",
                      absl::Base64Escape(BigEndian(line.key_hash, 4) + line.signature), "\n");
}

int64_t CosignatureTime(const SignatureLine& line) {
  if (line.signature.size() != kTimestampBytes + kSignatureBytes) return -1;
  const uint64_t time = ReadBigEndian(absl::string_view(line.signature).substr(0, kTimestampBytes));
  return time > uint64_t{INT64_MAX} ? -1 : static_cast<int64_t>(time);
}

absl::StatusOr<std::string> OpenNote(absl::string_view note, const NoteVerifier& verifier) {
  ASSIGN_OR_RETURN(SplitNote split, ParseNote(note));
  RETURN_IF_ERROR(VerifiedSignature(note, verifier).status());
  return split.text;
}

absl::StatusOr<SignatureLine> VerifiedSignature(absl::string_view note,
                                                const NoteVerifier& verifier) {
  ASSIGN_OR_RETURN(SplitNote split, ParseNote(note));
  for (const SignatureLine& s : split.signatures) {
    if (s.name != verifier.name || s.key_hash != verifier.key_hash) continue;
    if (!verifier.Verify(split.text, s.signature)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the signature of '", verifier.name, "' does not verify: the note was altered"));
    }
    return s;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("the note has no signature by '", verifier.name, "' (key hash ",
                   absl::StrFormat("%08x", verifier.key_hash), ")"));
}

}  // namespace fairvault::core::transparency
