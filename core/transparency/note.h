// Signed checkpoints in the formats existing transparency-log verifiers read:
// - C2SP tlog-checkpoint: "<origin>\n<tree size>\n<base64 root hash>\n" then optional lines;
// - C2SP signed-note: the text, a blank line, and one line per signature,
//   "— <key name> <base64(4-byte key hash || Ed25519 signature)>", where the key hash is the
//   first 4 bytes of SHA-256(<key name> "\n" 0x01 <32-byte public key>);
// - keys as Go's golang.org/x/mod/sumdb/note writes them: verifier "<name>+<hex hash>+<base64
//   (0x01 || public key)>", signer "PRIVATE+KEY+<name>+<hex hash>+<base64(0x01 || seed)>";
// - C2SP tlog-cosignature (cosignature/v1): a witness's Ed25519 key has type byte 0x04 in its
//   key hash and encodings, and its signature line holds (big-endian u64 timestamp || Ed25519
//   signature) over "cosignature/v1\ntime <timestamp>\n" followed by the checkpoint's text.
// Ed25519 through OpenSSL.
#ifndef FAIRVAULT_CORE_TRANSPARENCY_NOTE_H_
#define FAIRVAULT_CORE_TRANSPARENCY_NOTE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/transparency/merkle.h"

namespace fairvault::core::transparency {

struct Checkpoint {
  std::string origin;  // the log's name, e.g. "fairvault.example.org/ledger"
  int64_t size = 0;
  Hash root;
  // Lines after the root (none written by the vault; kept when read).
  std::vector<std::string> extensions;
};

std::string CheckpointText(const Checkpoint& checkpoint);
absl::StatusOr<Checkpoint> ParseCheckpointText(absl::string_view text);

// The signature types of the formats: a plain Ed25519 note signature (the vault's), and a
// witness's timestamped cosignature/v1.
enum class KeyType : uint8_t { kEd25519 = 0x01, kCosignatureV1 = 0x04 };

// A public key that verifies notes.
struct NoteVerifier {
  std::string name;
  uint32_t key_hash = 0;
  std::string public_key;  // 32 raw bytes
  KeyType type = KeyType::kEd25519;
  // The Go note encoding, "<name>+<hex hash>+<base64(type || key)>".
  std::string Encoded() const;
  static absl::StatusOr<NoteVerifier> Parse(absl::string_view encoded);
  // `signature` is the signature line's bytes after the key hash (for a cosignature, the
  // timestamp and the Ed25519 signature).
  bool Verify(absl::string_view text, absl::string_view signature) const;
};

// An Ed25519 signing key with its name. Its encoding is a secret: never log it.
class NoteSigner {
 public:
  // A new key from OpenSSL's CSPRNG.
  static absl::StatusOr<NoteSigner> Generate(absl::string_view name,
                                             KeyType type = KeyType::kEd25519);
  // From the Go note encoding, "PRIVATE+KEY+<name>+<hex hash>+<base64>".
  static absl::StatusOr<NoteSigner> Parse(absl::string_view encoded);

  const NoteVerifier& verifier() const { return verifier_; }
  const std::string& name() const { return verifier_.name; }
  std::string EncodedSecret() const;
  // The signature line's bytes after the key hash for `text`: the 64-byte Ed25519 signature,
  // or for a cosigner the timestamp (`unix_seconds`) and the signature of the cosigned message.
  absl::StatusOr<std::string> Sign(absl::string_view text, int64_t unix_seconds = 0) const;

 private:
  std::string seed_;
  NoteVerifier verifier_;
};

// The key hash the signed-note format gives an Ed25519 key of `type`.
uint32_t KeyHash(absl::string_view name, absl::string_view public_key,
                 KeyType type = KeyType::kEd25519);
// What a cosignature/v1 signs: "cosignature/v1\ntime <unix_seconds>\n" then the note's text.
std::string CosignedMessage(absl::string_view text, int64_t unix_seconds);
// A name the formats accept: not empty, no spaces, no '+', no control characters.
absl::Status ValidKeyName(absl::string_view name);

// `text` (which must end in a newline) with `signer`'s signature line added; a note already
// signed by others keeps their lines (cosigning). A cosigner's line carries `unix_seconds`
// (0: now).
absl::StatusOr<std::string> SignNote(absl::string_view note_or_text, const NoteSigner& signer,
                                     int64_t unix_seconds = 0);

// A log key's rotation, endorsed: the note whose text is "fairvault log key rotation\n<old
// verifier key>\n<new verifier key>\n", signed by the old key and then by the new one. Whoever
// holds the old verifier key (published out of band) can then take the new one from the
// operator without a second out-of-band step, and sees the old key hand over to it.
absl::StatusOr<std::string> EndorseRotation(const NoteSigner& old_key, const NoteSigner& new_key);
// The new key `old_key` endorsed in `note`: the text names `old_key`, and both its signature and
// the new key's verify. InvalidArgument naming what failed.
absl::StatusOr<NoteVerifier> OpenRotation(absl::string_view note, const NoteVerifier& old_key);

struct SignatureLine {
  std::string name;
  uint32_t key_hash = 0;
  std::string signature;  // without the key hash
};
struct SplitNote {
  std::string text;
  std::vector<SignatureLine> signatures;
};
// Splits a signed note into its text and signature lines (nothing verified).
absl::StatusOr<SplitNote> ParseNote(absl::string_view note);

// The note's text if `verifier` signed it; InvalidArgument naming what failed otherwise.
absl::StatusOr<std::string> OpenNote(absl::string_view note, const NoteVerifier& verifier);

// `verifier`'s signature line in the note, checked; InvalidArgument naming what failed.
absl::StatusOr<SignatureLine> VerifiedSignature(absl::string_view note,
                                                const NoteVerifier& verifier);
// A cosignature's timestamp (the first 8 bytes of its signature, big-endian); -1 if the
// signature is not a cosignature/v1 one.
int64_t CosignatureTime(const SignatureLine& line);
// The signature line as the note writes it ("— <name> <base64>", newline included).
std::string SignatureLineText(const SignatureLine& line);

}  // namespace fairvault::core::transparency

#endif  // FAIRVAULT_CORE_TRANSPARENCY_NOTE_H_
