// Tests of the server's hashing helpers and the keyed decision generator.
#include "server/util/crypto.h"

#include <set>

#include "gtest/gtest.h"

namespace fairvault::server {
namespace {

TEST(CryptoTest, Sha256MatchesTheFipsVector) {
  EXPECT_EQ(HexEncode(Sha256("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(CryptoTest, RandomBytesDifferAndHaveTheRequestedLength) {
  const std::string a = RandomBytes(33), b = RandomBytes(33);
  EXPECT_EQ(a.size(), 33u);
  EXPECT_NE(a, b);
}

TEST(CryptoTest, ConstantTimeEqualsComparesContentAndLength) {
  EXPECT_TRUE(ConstantTimeEquals("secret", "secret"));
  EXPECT_FALSE(ConstantTimeEquals("secret", "secreT"));
  EXPECT_FALSE(ConstantTimeEquals("secret", "secret!"));
}

}  // namespace
}  // namespace fairvault::server
