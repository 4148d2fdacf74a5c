// Tests of the subject index (all-or-nothing appends, rollback, keys beyond one arena block)
// and of RepeatFinder.
#include "server/app/subject_index.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/app/repeat_finder.h"

namespace fairvault::server {
namespace {

SubjectIndex::Keys Keys(std::initializer_list<std::string> keys) {
  SubjectIndex::Keys out;
  for (const auto& k : keys) *out.Add() = k;
  return out;
}
SubjectIndex::Codes Codes(std::initializer_list<uint32_t> codes) {
  SubjectIndex::Codes out;
  for (uint32_t c : codes) out.Add(c);
  return out;
}

TEST(SubjectIndexTest, AppendsABatchAndFindsItsRowsAndCodes) {
  SubjectIndex index(2);
  EXPECT_FALSE(index.Append(Keys({"a", "b"}), Codes({0, 1, 1, 2})).has_value());
  EXPECT_EQ(index.size(), 2);
  EXPECT_EQ(index.Find("b"), 1);
  EXPECT_EQ(index.Code(1, 1), 2);
  EXPECT_EQ(index.Find("c"), -1);
}

TEST(SubjectIndexTest, ARepeatAddsNothingAndSaysWhichKeys) {
  SubjectIndex index(1);
  ASSERT_FALSE(index.Append(Keys({"a", "b"}), Codes({0, 1})).has_value());
  // Within the batch: position 3 repeats position 1.
  auto repeat = index.Append(Keys({"c", "d", "e", "d"}), Codes({0, 0, 0, 0}));
  ASSERT_TRUE(repeat.has_value());
  EXPECT_EQ(repeat->position, 3);
  EXPECT_EQ(repeat->earlier_position, 1);
  // Against the index: position 1 is an earlier batch's subject.
  repeat = index.Append(Keys({"f", "a"}), Codes({0, 0}));
  ASSERT_TRUE(repeat.has_value());
  EXPECT_EQ(repeat->position, 1);
  EXPECT_EQ(repeat->earlier_position, -1);
  EXPECT_EQ(index.size(), 2);
  for (const char* gone : {"c", "d", "e", "f"}) EXPECT_EQ(index.Find(gone), -1) << gone;
  // The refused keys can come in a later batch.
  EXPECT_FALSE(index.Append(Keys({"c", "d"}), Codes({1, 1})).has_value());
  EXPECT_EQ(index.Find("d"), 3);
}

TEST(SubjectIndexTest, RemoveLastUndoesTheLastBatch) {
  SubjectIndex index(1);
  ASSERT_FALSE(index.Append(Keys({"a"}), Codes({0})).has_value());
  const SubjectIndex::Keys batch = Keys({"b", "c"});
  ASSERT_FALSE(index.Append(batch, Codes({1, 1})).has_value());
  index.RemoveLast(batch);
  EXPECT_EQ(index.size(), 1);
  EXPECT_EQ(index.Find("b"), -1);
  EXPECT_FALSE(index.Append(batch, Codes({0, 0})).has_value());
  EXPECT_EQ(index.Find("c"), 2);
  EXPECT_EQ(index.Code(2, 0), 0);
}

TEST(SubjectIndexTest, KeysSpanManyArenaBlocks) {
  // 40,000 keys of 64 bytes: 2.5 MB of keys, three 1 MiB blocks.
  SubjectIndex index(1);
  SubjectIndex::Keys keys;
  SubjectIndex::Codes codes;
  for (int i = 0; i < 40000; ++i) {
    *keys.Add() = absl::StrCat(std::string(58, 'k'), i);
    codes.Add(i % 3);
  }
  ASSERT_FALSE(index.Append(keys, codes).has_value());
  for (int i = 0; i < 40000; i += 997) {
    EXPECT_EQ(index.Find(absl::StrCat(std::string(58, 'k'), i)), i);
    EXPECT_EQ(index.Code(i, 0), i % 3);
  }
}

TEST(RepeatFinderTest, FindsTheEarlierRowOfARepeatedKey) {
  RepeatFinder finder;
  const std::string keys[] = {"x", "y", "z", "y", "x"};
  EXPECT_EQ(finder.Add(keys[0], 1), 0);
  EXPECT_EQ(finder.Add(keys[1], 2), 0);
  EXPECT_EQ(finder.Add(keys[2], 3), 0);
  EXPECT_EQ(finder.Add(keys[3], 4), 2);
  EXPECT_EQ(finder.Add(keys[4], 5), 1);
}

}  // namespace
}  // namespace fairvault::server
