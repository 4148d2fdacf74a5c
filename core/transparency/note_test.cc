// Signed notes and checkpoints: the Go reference implementation's and the C2SP spec's
// vectors byte for byte, and every alteration a verifier must refuse.
#include "core/transparency/note.h"

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
