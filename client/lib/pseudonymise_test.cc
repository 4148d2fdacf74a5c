// Tests of HMAC-SHA256 pseudonyms (RFC 4231), SHA-256 fingerprints and secret files.
#include "client/lib/pseudonymise.h"

#include <unistd.h>

#include <cstdlib>
#include <string>

#include "client/lib/csv.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fairvault::client {
namespace {

using ::fairvault::testing::StatusIs;

TEST(PseudonymiseTest, MatchesRfc4231TestCase2) {
  EXPECT_EQ(Pseudonymise("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST(PseudonymiseTest, MatchesRfc4231TestCase1) {
  const std::string key(20, '\x0b');
  EXPECT_EQ(Pseudonymise(key, "Hi There"),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
}

TEST(PseudonymiseTest, DependsOnSecretAndIdAndHandlesEmptyInputs) {
  const std::string a = Pseudonymise("secret-one-0123456789", "id-1");
  EXPECT_EQ(a.size(), 64u);
  EXPECT_NE(a, Pseudonymise("secret-two-0123456789", "id-1"));
  EXPECT_NE(a, Pseudonymise("secret-one-0123456789", "id-2"));
  EXPECT_EQ(Pseudonymise("", "").size(), 64u);
}

TEST(Sha256HasherTest, PiecesHashAsTheirConcatenation) {
  Sha256Hasher hasher;
  hasher.Update("a");
  hasher.Update("");
  hasher.Update("bc");
  EXPECT_EQ(hasher.HexDigest(), Sha256Hex("abc"));
}

TEST(Sha256HexTest, MatchesKnownDigests) {
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

class SecretFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char name[] = "/tmp/fairvault_secret_XXXXXX";
    const int fd = mkstemp(name);
    ASSERT_GE(fd, 0);
    close(fd);
    path_ = name;
  }
  void TearDown() override { unlink(path_.c_str()); }
  std::string path_;
};

TEST_F(SecretFileTest, TrimsTrailingNewline) {
  ASSERT_OK(WriteStringToFile(path_, "0123456789abcdef0123\n"));
  absl::StatusOr<std::string> secret = ReadSecretFile(path_);
  ASSERT_OK(secret);
  EXPECT_EQ(*secret, "0123456789abcdef0123");
  ASSERT_OK(WriteStringToFile(path_, "0123456789abcdef\r\n"));
  secret = ReadSecretFile(path_);
  ASSERT_OK(secret);
  EXPECT_EQ(*secret, "0123456789abcdef");
}

TEST_F(SecretFileTest, RejectsShortSecret) {
  ASSERT_OK(WriteStringToFile(path_, "0123456789abcde\n"));  // 15 bytes after trimming
  EXPECT_THAT(ReadSecretFile(path_), StatusIs(absl::StatusCode::kInvalidArgument, "15 bytes"));
}

TEST(ReadSecretFileTest, MissingFileIsNotFound) {
  EXPECT_THAT(ReadSecretFile("/nonexistent/secret"), StatusIs(absl::StatusCode::kNotFound));
}

}  // namespace
}  // namespace fairvault::client
