// Tests of the compact columns a cached company table holds.
#include "server/app/company_table.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fairvault::server {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::IsNull;

storage::StoredTable Table(const std::vector<std::string>& keys, const std::vector<double>& score,
                           const std::vector<std::string>& region) {
  storage::StoredTable table;
  table.set_label("test");
  v1::ColumnSpec* s = table.add_specs();
  s->set_name("score");
  s->set_type(v1::COLUMN_TYPE_NUMERIC);
  s = table.add_specs();
  s->set_name("region");
  s->set_type(v1::COLUMN_TYPE_CATEGORICAL);
  for (const std::string& k : keys) table.add_keys(k);
  v1::ColumnValues* numbers = table.add_columns();
  for (double v : score) numbers->add_numeric(v);
  v1::ColumnValues* names = table.add_columns();
  for (const std::string& r : region) names->add_categorical(r);
  return table;
}

TEST(CompanyTableTest, NumbersStayByRowAndCategoriesAreCodedInStringOrder) {
  const CompanyTable table(
      Table({"k1", "k2", "k3", "k4"}, {0.5, -2, 0.5, 1e300}, {"west", "east", "north", "east"}));
  EXPECT_EQ(table.rows(), 4);
  EXPECT_EQ(table.label(), "test");
  ASSERT_EQ(table.num_columns(), 2);
  EXPECT_TRUE(table.numeric(0));
  EXPECT_FALSE(table.numeric(1));
  EXPECT_THAT(table.numbers(0), ElementsAre(0.5, -2, 0.5, 1e300));
  EXPECT_THAT(table.categories(0), IsNull());
  EXPECT_TRUE(table.numbers(1).empty());
  ASSERT_NE(table.categories(1), nullptr);
  EXPECT_THAT(table.categories(1)->domain, ElementsAre("east", "north", "west"));
  EXPECT_THAT(table.categories(1)->code, ElementsAre(2, 0, 1, 0));
}

// The memory the table holds is its columns': eight bytes a number, four a coded category and
// the distinct names, nothing for the keys (64 characters each here).
TEST(CompanyTableTest, HoldsTheColumnsNotTheKeys) {
  const int rows = 10'000;
  std::vector<std::string> keys;
  std::vector<double> score;
  std::vector<std::string> region;
  for (int i = 0; i < rows; ++i) {
    keys.push_back(std::string(60, 'k') + std::to_string(1000 + i));
    score.push_back(i * 0.25);
    region.push_back(i % 3 == 0 ? "a" : "b");
  }
  storage::StoredTable stored = Table(keys, score, region);
  const int64_t parsed_bytes = static_cast<int64_t>(stored.SpaceUsedLong());
  const CompanyTable table(std::move(stored));
  const int64_t columns = rows * 8 + rows * 4;
  EXPECT_GE(table.Bytes(), columns);
  EXPECT_LE(table.Bytes(), columns + 400);  // + the specs, the label, the arrays' headers
  EXPECT_GT(parsed_bytes, 8 * table.Bytes());  // what the cache held before (keys included)
}

TEST(CompanyTableTest, NumericDictionaryNamesEachDistinctNumberExactly) {
  const ColumnDictionary dict = NumericDictionary(std::vector<double>{0.1, 2, -0.0, 0.1, 0});
  EXPECT_THAT(dict.domain, ElementsAre("0", "0.1", "2"));
  EXPECT_THAT(dict.code, ElementsAre(1, 2, 0, 1, 0));
}

// Reading the stored bytes gives the table the parsed message gives, and the keys in order (in
// blocks: 10,000 rows cross the block size).
TEST(CompanyTableTest, ParsingTheStoredBytesGivesTheSameTableAndTheKeysInOrder) {
  std::vector<std::string> keys;
  std::vector<double> score;
  std::vector<std::string> region;
  for (int i = 0; i < 10'000; ++i) {
    keys.push_back("key" + std::to_string(i));
    score.push_back(i % 7 == 0 ? -0.5 : i * 1e-3);
    region.push_back(i % 5 == 0 ? "a fairly long region name, not inline" : "b");
  }
  const std::string payload = Table(keys, score, region).SerializeAsString();
  std::vector<std::string> seen;
  auto parsed = CompanyTable::Parse(payload, 10'000, [&](absl::Span<const absl::string_view> block) {
    EXPECT_LE(block.size(), 4096u);
    for (absl::string_view k : block) seen.emplace_back(k);
  });
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const CompanyTable direct(Table(keys, score, region));
  EXPECT_EQ(seen, keys);
  EXPECT_EQ(parsed->rows(), 10'000);
  EXPECT_EQ(parsed->label(), "test");
  EXPECT_EQ(parsed->num_columns(), 2);
  EXPECT_EQ(parsed->spec(1).name(), "region");
  EXPECT_THAT(parsed->numbers(0), ElementsAreArray(direct.numbers(0)));
  EXPECT_EQ(parsed->categories(1)->domain, direct.categories(1)->domain);
  EXPECT_EQ(parsed->categories(1)->code, direct.categories(1)->code);
  EXPECT_EQ(parsed->Bytes(), direct.Bytes());
}

TEST(CompanyTableTest, AStoredTableThatIsNotWholeIsDataLoss) {
  const std::vector<std::string> keys = {"k1", "k2", "k3"};
  storage::StoredTable table = Table(keys, {1, 2, 3}, {"x", "y", "x"});
  const auto none = [](absl::Span<const absl::string_view>) {};
  const std::string whole = table.SerializeAsString();
  EXPECT_TRUE(CompanyTable::Parse(whole, 3, none).ok());
  EXPECT_EQ(CompanyTable::Parse(whole.substr(0, whole.size() - 1), 3, none).status().code(),
            absl::StatusCode::kDataLoss);
  storage::StoredTable short_column = table;
  short_column.mutable_columns(0)->mutable_numeric()->RemoveLast();
  EXPECT_EQ(CompanyTable::Parse(short_column.SerializeAsString(), 3, none).status().code(),
            absl::StatusCode::kDataLoss);
  storage::StoredTable wrong_type = table;
  wrong_type.mutable_columns(1)->add_numeric(1);
  EXPECT_EQ(CompanyTable::Parse(wrong_type.SerializeAsString(), 3, none).status().code(),
            absl::StatusCode::kDataLoss);
  storage::StoredTable missing = table;
  missing.mutable_columns()->RemoveLast();
  EXPECT_EQ(CompanyTable::Parse(missing.SerializeAsString(), 3, none).status().code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(CompanyTable::Parse("\xff\xff\xff", 3, none).status().code(),
            absl::StatusCode::kDataLoss);
  // Another number of keys than the table's record says.
  EXPECT_EQ(CompanyTable::Parse(whole, 2, none).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(CompanyTable::Parse(whole, 4, none).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(CompanyTable::ReadKeys(whole, 4, none).code(), absl::StatusCode::kDataLoss);
  // A length beyond 32 bits (protobuf refuses it; a truncating read would take it as 0).
  EXPECT_EQ(CompanyTable::Parse(std::string("\x12\x80\x80\x80\x80\x10", 6), 1, none)
                .status()
                .code(),
            absl::StatusCode::kDataLoss);
}

// A field a later version adds to a column is skipped; the keys can be read alone.
TEST(CompanyTableTest, SkipsFieldsOfLaterVersionsAndReadsKeysAlone) {
  storage::StoredTable table = Table({"k1", "k2"}, {1, 2}, {"x", "y"});
  table.mutable_columns(0)->GetReflection()->MutableUnknownFields(table.mutable_columns(0))
      ->AddVarint(7, 42);
  const std::string payload = table.SerializeAsString();
  auto parsed = CompanyTable::Parse(payload, 2, [](absl::Span<const absl::string_view>) {});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_THAT(parsed->numbers(0), ElementsAre(1, 2));
  std::vector<std::string> keys;
  ASSERT_TRUE(CompanyTable::ReadKeys(payload, 2, [&](absl::Span<const absl::string_view> block) {
                for (absl::string_view k : block) keys.emplace_back(k);
              }).ok());
  EXPECT_THAT(keys, ElementsAre("k1", "k2"));
}

}  // namespace
}  // namespace fairvault::server
