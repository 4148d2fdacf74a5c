// Tests of the server's hashing helpers and the keyed decision generator.
#include "server/util/crypto.h"

#include <set>

#include "absl/random/distributions.h"
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

TEST(KeyedBitGenTest, SameKeyAndMessageGiveTheSameStream) {
  KeyedBitGen a("key", "art_1\0subject"), b("key", "art_1\0subject");
  for (int i = 0; i < 20; ++i) EXPECT_EQ(a(), b());
}

TEST(KeyedBitGenTest, KeyOrMessageChangesTheStream) {
  KeyedBitGen base("key", "m"), other_key("kez", "m"), other_message("key", "n");
  const uint64_t first = base();
  EXPECT_NE(first, other_key());
  EXPECT_NE(first, other_message());
}

TEST(KeyedBitGenTest, WordsAreDistinctAcrossBlocks) {
  KeyedBitGen gen("key", "m");
  std::set<uint64_t> seen;
  for (int i = 0; i < 1000; ++i) seen.insert(gen());
  EXPECT_EQ(seen.size(), 1000u);
}

// Bernoulli(0.3) over 20,000 independent streams: 5 standard errors (~0.016) tolerance,
// false-failure probability below 1e-6.
TEST(KeyedBitGenTest, DrivesAbslDistributionsUniformly) {
  int ones = 0;
  constexpr int kTrials = 20000;
  for (int i = 0; i < kTrials; ++i) {
    KeyedBitGen gen("key", std::to_string(i));
    ones += absl::Bernoulli(gen, 0.3);
  }
  EXPECT_NEAR(static_cast<double>(ones) / kTrials, 0.3, 5 * std::sqrt(0.3 * 0.7 / kTrials));
}

}  // namespace
}  // namespace fairvault::server
