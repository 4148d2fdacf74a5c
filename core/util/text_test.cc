// What the vault and the CLI echo back (Truncated) and what the CLI reads as a number
// (ParseDecimal).
#include <string>

#include "core/util/decimal.h"
#include "core/util/truncate.h"
#include "gtest/gtest.h"

namespace fairvault::core {
namespace {

TEST(TruncatedTest, BoundsLengthKeepsUtf8AndShowsControlCharacters) {
  EXPECT_EQ(Truncated("acme-1"), "acme-1");
  EXPECT_EQ(Truncated(std::string(100, 'k'), 8), "kkkkkkkk...(100 bytes)");
  // "é" is two bytes: the cut backs up rather than split it.
  EXPECT_EQ(Truncated("abcdefg\xc3\xa9xyz", 8), "abcdefg...(12 bytes)");
  // A terminal escape and a forged log line come back as text.
  EXPECT_EQ(Truncated("key\x1b[2J\nERROR forged\x7f"), "key\\x1b[2J\\x0aERROR forged\\x7f");
  EXPECT_EQ(Truncated(std::string("a\0b", 3)), "a\\x00b");
  // A backslash is doubled, so a value holding the text "\x1b" is not shown as an escape.
  EXPECT_EQ(Truncated("a\\x1b"), "a\\\\x1b");
  // The C1 controls (U+009B, CSI) are escaped; other two-byte characters are not.
  EXPECT_EQ(Truncated("x\xc2\x9b" "2J\xc2\xa0\xc3\xa9"), "x\\u009b2J\xc2\xa0\xc3\xa9");
}

TEST(ParseDecimalTest, ReadsDecimalTextOnly) {
  double v = 0;
  for (const auto& [text, value] : std::vector<std::pair<const char*, double>>{
           {"0.25", 0.25}, {"+2", 2}, {" 1e3 ", 1000}, {"-0.5", -0.5}, {"7", 7}}) {
    ASSERT_TRUE(ParseDecimal(text, &v)) << text;
    EXPECT_EQ(v, value) << text;
  }
  for (const char* bad : {"0x10", "0X1p3", "0x", "", " ", "+", "+-1", "1_0", "1e400", "1,5",
                          "1.5x"}) {
    EXPECT_FALSE(ParseDecimal(bad, &v)) << bad;
  }
}

}  // namespace
}  // namespace fairvault::core
