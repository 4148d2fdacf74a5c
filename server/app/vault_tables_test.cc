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
}

}  // namespace
}  // namespace fairvault::server::testing
