// Tests of the company's table upload on a real SQLite store: refusals naming the row, all or
// nothing when the stream breaks, no upload without a grant.
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/metrics/metrics.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/util/clock.h"
#include "server/app/vault_test_fixture.h"
#include "server/storage/sqlite/sqlite_store.h"

namespace fairvault::server::testing {
namespace {

using ::testing::HasSubstr;

// ---- upload ------------------------------------------------------------------------------------

TEST_F(VaultTest, UploadRejectsRepeatedSubjectKeyNamingTheRow) {
  std::vector<Row> rows(rows_.begin(), rows_.begin() + 5);
  rows[4].key = rows[1].key;
  auto result =
      Upload(acme_, TableHeaderFor("census"),
             {Chunk({rows.begin(), rows.begin() + 3}), Chunk({rows.begin() + 3, rows.end()})});
  EXPECT_THAT(result,
              StatusIs(absl::StatusCode::kInvalidArgument, "row 5 repeats the key of row 2"));
}

TEST_F(VaultTest, UploadRejectsNonFiniteNumbersNamingTheRow) {
  std::vector<Row> rows(rows_.begin(), rows_.begin() + 6);
  rows[4].label = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THAT(
      Upload(acme_, TableHeaderFor("census"),
             {Chunk({rows.begin(), rows.begin() + 3}), Chunk({rows.begin() + 3, rows.end()})}),
      StatusIs(absl::StatusCode::kInvalidArgument, "row 5"));
  rows[4].label = 1;
  rows[0].pred = std::numeric_limits<double>::infinity();
  EXPECT_THAT(Upload(acme_, TableHeaderFor("census"), {Chunk(rows)}),
              StatusIs(absl::StatusCode::kInvalidArgument, "'pred' row 1"));
}

TEST_F(VaultTest, UploadStoresNothingWhenTheStreamBreaksOrTheCallerIsGone) {
  const v1::TableChunk first = Chunk({rows_.begin(), rows_.begin() + 10});
  const v1::TableChunk second = Chunk({rows_.begin() + 10, rows_.end()});
  EXPECT_THAT(Upload(acme_, TableHeaderFor("census"), {}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(vault_->UploadTable(acme_, TableHeaderFor("census"),
                                  BreakAfter<v1::TableChunk>(
                                      {first}, absl::DeadlineExceededError("deadline passed"))),
              StatusIs(absl::StatusCode::kDeadlineExceeded));
  ChunkSource<v1::TableChunk> gone = Feed(std::vector<v1::TableChunk>{first, second});
  gone.live = [] { return absl::CancelledError("the client cancelled"); };
  EXPECT_THAT(vault_->UploadTable(acme_, TableHeaderFor("census"), gone),
              StatusIs(absl::StatusCode::kCancelled));
  // Only the fixture's table was ever stored.
  auto purged = store_->PurgeExpiredTables(std::numeric_limits<int64_t>::max());
  ASSERT_OK(purged);
  EXPECT_EQ(*purged, 1);
}

// The table cache answers for a table's record only until five minutes before it expires:
// after that the store is asked again, so a table that another server purged by a clock up to
// five minutes ahead is gone here too, not served from memory.
TEST_F(VaultTest, ACachedTableIsReadAgainNearItsExpiry) {
  auto table = Upload(acme_, TableHeaderFor("census", /*ttl_seconds=*/600), {Chunk(rows_)});
  ASSERT_OK(table);
  v1::NoisyCountsRequest req = CountsRequest("c1");
  req.set_table_handle(table->table_handle());
  ASSERT_OK(vault_->NoisyCounts(acme_, req));
  clock_.Advance(301'000'000);  // 299 s left
  // Another server, its clock 300 s ahead, purges the table.
  auto purged = store_->PurgeExpiredTables(clock_.NowMicros() + 300'000'000);
  ASSERT_OK(purged);
  ASSERT_GE(*purged, 1);
  req.set_idempotency_key("c2");
  EXPECT_THAT(vault_->NoisyCounts(acme_, req), StatusIs(absl::StatusCode::kNotFound));
}

TEST_F(VaultTest, UploadWithoutGrantIsPermissionDenied) {
  Caller initech;
  ASSERT_NO_FATAL_FAILURE(MakeCompany("initech", nullptr, &initech));
  EXPECT_THAT(Upload(initech, TableHeaderFor("census"), {Chunk(rows_)}),
              StatusIs(absl::StatusCode::kPermissionDenied, "grant"));
}

TEST_F(VaultTest, UploadRejectsBadShapes) {
  v1::TableChunk short_column = Chunk({rows_.begin(), rows_.begin() + 3});
  short_column.mutable_columns(0)->mutable_numeric()->RemoveLast();
  EXPECT_THAT(Upload(acme_, TableHeaderFor("census"), {short_column}),
              StatusIs(absl::StatusCode::kInvalidArgument, "pred"));
  EXPECT_THAT(Upload(acme_, TableHeaderFor("census"), {}),
              StatusIs(absl::StatusCode::kInvalidArgument, "no rows"));
  EXPECT_THAT(Upload(acme_, TableHeaderFor("census", -1), {Chunk(rows_)}),
              StatusIs(absl::StatusCode::kInvalidArgument, "ttl_seconds"));
  v1::TableHeader labelled = TableHeaderFor("census");
  labelled.set_label(std::string(256, 'l'));
  EXPECT_OK(Upload(acme_, labelled, {Chunk(rows_)}));
  labelled.set_label(std::string(257, 'l'));
  EXPECT_THAT(Upload(acme_, labelled, {Chunk(rows_)}),
              StatusIs(absl::StatusCode::kInvalidArgument, "header.label: at most 256 bytes"));
}

// ---- the table cache's memory budget ------------------------------------------------------------

// The number `name` has in the metrics' text exposition.
double MetricValue(const Metrics& metrics, const std::string& name) {
  for (absl::string_view line : absl::StrSplit(metrics.Text(), '\n')) {
    if (absl::StartsWith(line, name + " ")) return std::stod(std::string(line.substr(name.size())));
  }
  return -1;
}

// Releases on two tables with a byte budget too small for both: the cache keeps the table in
// use and evicts the other, and a release on the evicted table reads it back from the store
// (the same counts, the same charge); with room for both, both stay. The metrics say which.
TEST_F(VaultTest, TheTableCacheEvictsByItsByteBudgetAndReportsItsSize) {
  auto second = Upload(acme_, TableHeaderFor("census"), {Chunk(rows_)});
  ASSERT_OK(second);
  for (const int64_t budget : {int64_t{1}, int64_t{1} << 30}) {
    SCOPED_TRACE(budget);
    Metrics metrics({});
    VaultOptions options;
    options.table_cache_bytes = budget;
    options.metrics = &metrics;
    Vault vault(store_.get(), &clock_, absl::BitGenRef(gen_), options);
    for (const std::string& handle : {handle_, second->table_handle(), handle_}) {
      v1::NoisyCountsRequest req = CountsRequest(absl::StrCat("cache-", budget, "-", handle));
      req.set_table_handle(handle);
      auto released = vault.NoisyCounts(acme_, req);
      ASSERT_OK(released);
      EXPECT_EQ(released->rows_used(), 30);  // read back from the store when evicted
    }
    const double tables = MetricValue(metrics, "fairvault_table_cache_tables");
    const double bytes = MetricValue(metrics, "fairvault_table_cache_bytes");
    EXPECT_EQ(tables, budget == 1 ? 1 : 2);
    EXPECT_GT(bytes, 0);
  }
}

// What a cached table grows by after it is cached (here a numeric column's dictionary, built
// by the first release that crosses the column) counts against the byte budget and shows in
// the metric at once: with room for both tables before the dictionary and not after, the other
// table is evicted, and the metric always equals what the cache holds.
TEST_F(VaultTest, ATableThatGrowsInTheCacheCountsAgainstItsBudget) {
  auto second = Upload(acme_, TableHeaderFor("census"), {Chunk(rows_)});
  ASSERT_OK(second);
  auto counts = [&](Vault& vault, const std::string& handle, const std::string& column,
                    const std::string& key) {
    v1::NoisyCountsRequest req = CountsRequest(key);
    req.set_table_handle(handle);
    req.clear_columns();
    req.add_columns(column);
    return vault.NoisyCounts(acme_, req).status();
  };
  // Measured with room for everything: each table, then one grown by its dictionary.
  double one = 0, two = 0, grown = 0;
  {
    Metrics metrics({});
    VaultOptions options;
    options.metrics = &metrics;
    Vault vault(store_.get(), &clock_, absl::BitGenRef(gen_), options);
    ASSERT_OK(counts(vault, handle_, "tier", "measure-1"));
    one = MetricValue(metrics, "fairvault_table_cache_bytes");
    ASSERT_OK(counts(vault, second->table_handle(), "tier", "measure-2"));
    two = MetricValue(metrics, "fairvault_table_cache_bytes");
    ASSERT_OK(counts(vault, handle_, "pred", "measure-3"));
    grown = MetricValue(metrics, "fairvault_table_cache_bytes");
    EXPECT_EQ(MetricValue(metrics, "fairvault_table_cache_tables"), 2);
  }
  ASSERT_GT(one, 0);
  EXPECT_EQ(two, 2 * one);
  ASSERT_GT(grown, two) << "the dictionary's bytes did not reach the metric";
  ASSERT_LE(grown - two, one) << "the test needs a dictionary smaller than a table";

  Metrics metrics({});
  VaultOptions options;
  options.metrics = &metrics;
  options.table_cache_bytes = static_cast<int64_t>(two);
  Vault vault(store_.get(), &clock_, absl::BitGenRef(gen_), options);
  ASSERT_OK(counts(vault, second->table_handle(), "tier", "budget-1"));
  ASSERT_OK(counts(vault, handle_, "tier", "budget-2"));
  EXPECT_EQ(MetricValue(metrics, "fairvault_table_cache_tables"), 2);
  ASSERT_OK(counts(vault, handle_, "pred", "budget-3"));
  EXPECT_EQ(MetricValue(metrics, "fairvault_table_cache_tables"), 1);
  EXPECT_EQ(MetricValue(metrics, "fairvault_table_cache_bytes"), grown - one);
  EXPECT_LE(MetricValue(metrics, "fairvault_table_cache_bytes"), two);
}

}  // namespace
}  // namespace fairvault::server::testing
