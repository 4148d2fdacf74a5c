// Signed notes and checkpoints: the Go reference implementation's and the C2SP spec's
// vectors byte for byte, and every alteration a verifier must refuse.
#include "core/transparency/note.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fairvault::core::transparency {
namespace {

using ::testing::HasSubstr;

// Data only, from golang.org/x/mod/sumdb/note (its package documentation and note_test.go):
// Ed25519 signatures are deterministic, so the same key and text must give exactly this note.
constexpr char kGoSigner[] =
    "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz";
constexpr char kGoVerifier[] = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW";
constexpr char kGoText[] =
    "If you think cryptography is the answer to your problem,\n"
    "then you don't know what your problem is.\n";
constexpr char kGoNote[] =
    "If you think cryptography is the answer to your problem,\n"
    "then you don't know what your problem is.\n"
    "\n"
    "\xe2\x80\x94 PeterNeumann "
    "x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n";
// From the C2SP signed-note specification's example.
constexpr char kSpecVerifier[] =
    "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k";
constexpr char kSpecNote[] =
    "This is an example message.\n\n\xe2\x80\x94 example.com/foo "
    "Uw2QOkn8srV1yJGh2VYRlL1Tnagv1YEq6TfXppzi2ONncAlTgK7Ztg1ERYNZXsYjOBH3mFXmRKuwHjG1Yu72IneyaQM=\n";

TEST(NoteTest, SignsExactlyAsTheGoReferenceDoes) {
  auto signer = NoteSigner::Parse(kGoSigner);
  ASSERT_TRUE(signer.ok()) << signer.status();
  EXPECT_EQ(signer->verifier().Encoded(), kGoVerifier);
  EXPECT_EQ(signer->EncodedSecret(), kGoSigner);
  auto note = SignNote(kGoText, *signer);
  ASSERT_TRUE(note.ok()) << note.status();
  EXPECT_EQ(*note, kGoNote);
}

TEST(NoteTest, OpensTheReferenceNotes) {
  auto go = NoteVerifier::Parse(kGoVerifier);
  ASSERT_TRUE(go.ok()) << go.status();
  auto text = OpenNote(kGoNote, *go);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, kGoText);
  auto spec = NoteVerifier::Parse(kSpecVerifier);
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto spec_text = OpenNote(kSpecNote, *spec);
  ASSERT_TRUE(spec_text.ok()) << spec_text.status();
  EXPECT_EQ(*spec_text, "This is an example message.\n");
}

TEST(NoteTest, AlteredNotesAndWrongKeysAreRefused) {
  auto go = NoteVerifier::Parse(kGoVerifier);
  ASSERT_TRUE(go.ok());
  std::string altered = kGoNote;
  altered[3] = 'X';
  EXPECT_THAT(OpenNote(altered, *go).status().message(), HasSubstr("altered"));
  auto spec = NoteVerifier::Parse(kSpecVerifier);
  ASSERT_TRUE(spec.ok());
  EXPECT_THAT(OpenNote(kGoNote, *spec).status().message(), HasSubstr("no signature by"));
  EXPECT_FALSE(OpenNote("no blank line\n", *go).ok());
  // A verifier key whose hash does not match its name.
  EXPECT_FALSE(NoteVerifier::Parse("PeterNeumann+c74f20a4+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW").ok());
  EXPECT_FALSE(NoteSigner::Generate("has space").ok());
  EXPECT_FALSE(NoteSigner::Generate("a+b").ok());
}

TEST(NoteTest, CosigningKeepsEarlierSignatures) {
  auto vault = NoteSigner::Generate("vault.example/ledger");
  auto witness = NoteSigner::Generate("witness.example");
  ASSERT_TRUE(vault.ok() && witness.ok());
  auto signed_once = SignNote("text\n", *vault);
  ASSERT_TRUE(signed_once.ok());
  auto cosigned = SignNote(*signed_once, *witness);
  ASSERT_TRUE(cosigned.ok()) << cosigned.status();
  EXPECT_TRUE(OpenNote(*cosigned, vault->verifier()).ok());
  EXPECT_TRUE(OpenNote(*cosigned, witness->verifier()).ok());
  auto split = ParseNote(*cosigned);
  ASSERT_TRUE(split.ok());
  EXPECT_EQ(split->signatures.size(), 2u);
  // A fresh key round-trips through its encodings.
  auto again = NoteSigner::Parse(vault->EncodedSecret());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->verifier().Encoded(), vault->verifier().Encoded());
}

// The old log key endorses the new one; the holder of the old verifier key alone takes the new
// key from the note, and nothing else passes: another old key, an edited new key, a note the
// new key did not sign, a key rotated to itself.
TEST(NoteTest, ARotationIsEndorsedByTheOldKeyAndTheNew) {
  auto old_key = NoteSigner::Generate("vault.example/ledger");
  auto new_key = NoteSigner::Generate("vault.example/ledger-2");
  auto stranger = NoteSigner::Generate("vault.example/ledger-3");
  ASSERT_TRUE(old_key.ok() && new_key.ok() && stranger.ok());
  auto rotation = EndorseRotation(*old_key, *new_key);
  ASSERT_TRUE(rotation.ok()) << rotation.status();
  auto opened = OpenRotation(*rotation, old_key->verifier());
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ(opened->Encoded(), new_key->verifier().Encoded());

  EXPECT_THAT(OpenRotation(*rotation, stranger->verifier()).status().message(),
              HasSubstr("no signature by"));
  // The new key replaced by the stranger's, re-signed by the old key alone.
  auto swapped = SignNote(absl::StrCat("fairvault log key rotation\n",
                                       old_key->verifier().Encoded(), "\n",
                                       stranger->verifier().Encoded(), "\n"),
                          *old_key);
  ASSERT_TRUE(swapped.ok());
  EXPECT_THAT(OpenRotation(*swapped, old_key->verifier()).status().message(),
              HasSubstr("the new key did not sign its rotation"));
  // An edited note: the old key's signature no longer verifies.
  std::string edited = *rotation;
  edited.replace(edited.find("ledger-2"), 8, "ledger-3");
  EXPECT_FALSE(OpenRotation(edited, old_key->verifier()).ok());
  // Some other note the old key signed.
  auto checkpoint = SignNote("vault.example/ledger\n5\nAAAA\n", *old_key);
  ASSERT_TRUE(checkpoint.ok());
  EXPECT_THAT(OpenRotation(*checkpoint, old_key->verifier()).status().message(),
              HasSubstr("not a log key rotation"));
  EXPECT_THAT(EndorseRotation(*old_key, *old_key).status().message(), HasSubstr("is the old one"));
  // The new key spelled otherwise than its encoding (an uppercase key hash), though both keys
  // signed: refused, as the Python client refuses it.
  std::string upper = new_key->verifier().Encoded();
  const size_t plus = upper.find('+');
  for (size_t i = plus + 1; i < plus + 9; ++i) upper[i] = absl::ascii_toupper(upper[i]);
  ASSERT_NE(upper, new_key->verifier().Encoded());
  auto respelled = SignNote(absl::StrCat("fairvault log key rotation\n",
                                         old_key->verifier().Encoded(), "\n", upper, "\n"),
                            *old_key);
  ASSERT_TRUE(respelled.ok());
  respelled = SignNote(*respelled, *new_key);
  ASSERT_TRUE(respelled.ok());
  EXPECT_THAT(OpenRotation(*respelled, old_key->verifier()).status().message(),
              HasSubstr("not written as its encoding"));
  // A witness key is no log key.
  auto witness = NoteSigner::Generate("witness.example", KeyType::kCosignatureV1);
  ASSERT_TRUE(witness.ok());
  EXPECT_THAT(EndorseRotation(*old_key, *witness).status().message(), HasSubstr("witness"));
}

TEST(NoteTest, CosignaturesFollowTlogCosignatureV1) {
  auto vault = NoteSigner::Generate("vault.example/ledger");
  auto witness = NoteSigner::Generate("witness.example/w1", KeyType::kCosignatureV1);
  ASSERT_TRUE(vault.ok() && witness.ok());
  // The key's type byte is 0x04 in its hash and in both encodings.
  EXPECT_EQ(witness->verifier().key_hash,
            KeyHash("witness.example/w1", witness->verifier().public_key, KeyType::kCosignatureV1));
  EXPECT_NE(witness->verifier().key_hash,
            KeyHash("witness.example/w1", witness->verifier().public_key));
  auto parsed = NoteVerifier::Parse(witness->verifier().Encoded());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->type, KeyType::kCosignatureV1);
  auto secret = NoteSigner::Parse(witness->EncodedSecret());
  ASSERT_TRUE(secret.ok()) << secret.status();
  EXPECT_EQ(secret->verifier().Encoded(), witness->verifier().Encoded());

  const std::string text = CheckpointText({"vault.example/ledger", 7, LeafHash("x"), {}});
  auto note = SignNote(text, *vault);
  ASSERT_TRUE(note.ok());
  auto cosigned = SignNote(*note, *witness, 1679315147);
  ASSERT_TRUE(cosigned.ok()) << cosigned.status();
  auto line = VerifiedSignature(*cosigned, *parsed);
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_EQ(CosignatureTime(*line), 1679315147);
  // The signature is over the cosigned message: the timestamp line, then the checkpoint.
  EXPECT_TRUE(parsed->Verify(text, line->signature));
  NoteVerifier plain = *parsed;
  plain.type = KeyType::kEd25519;
  EXPECT_TRUE(plain.Verify(CosignedMessage(text, 1679315147), line->signature.substr(8)));
  EXPECT_FALSE(plain.Verify(text, line->signature.substr(8)));
  // The vault's own signature is still there and still verifies.
  EXPECT_TRUE(OpenNote(*cosigned, vault->verifier()).ok());
  // A changed timestamp breaks the cosignature.
  SignatureLine moved = *line;
  moved.signature[7] ^= 1;
  auto split = ParseNote(*cosigned);
  ASSERT_TRUE(split.ok());
  std::string forged = split->text + "\n" + SignatureLineText(moved);
  EXPECT_THAT(VerifiedSignature(forged, *parsed).status().message(), HasSubstr("altered"));
  EXPECT_EQ(SignatureLineText(*line), cosigned->substr(cosigned->rfind("\xe2\x80\x94")));
}

TEST(NoteTest, CheckpointTextRoundTripsAndRefusesMalformedBodies) {
  Checkpoint c{"vault.example/ledger", 1234, LeafHash("x"), {}};
  const std::string text = CheckpointText(c);
  auto parsed = ParseCheckpointText(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->origin, c.origin);
  EXPECT_EQ(parsed->size, 1234);
  EXPECT_EQ(parsed->root, c.root);
  EXPECT_FALSE(ParseCheckpointText("origin\n12\n").ok());
  EXPECT_FALSE(ParseCheckpointText("origin\n012\nAAAA\n").ok());
  EXPECT_FALSE(ParseCheckpointText("origin\n-1\n" + text.substr(text.rfind('\n', text.size() - 2) + 1)).ok());
  EXPECT_FALSE(ParseCheckpointText("origin\n12\nnot base64\n").ok());
}

}  // namespace
}  // namespace fairvault::core::transparency
