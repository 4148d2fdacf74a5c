// Fuzzes the CSV reader (client/lib/csv): whatever the bytes, ParseCsv either refuses them with
// an error naming the source and the line, or gives a table that the writer turns back into
// text parsing to the same table; the streaming reader agrees with ParseCsv row for row.
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "client/lib/csv.h"
#include "tests/fuzz/fuzz_contract.h"

using fairvault::fuzz::Fail;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fairvault::client;
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<CsvTable> table = ParseCsv(text, "in");
  auto reader = CsvReader::FromString(text, "in");
  if (!table.ok()) {
    // "in:<line>: ..." (or "in: ..." for an input with no header at all).
    if (!absl::StartsWith(table.status().message(), "in:")) {
      Fail("an error that does not name the source", std::string(table.status().message()));
    }
    return 0;
  }
  // Every row as wide as the header, each with the line it starts on.
  if (table->rows.size() != table->row_lines.size()) Fail("row lines", "count differs");
  for (size_t r = 0; r < table->rows.size(); ++r) {
    if (table->rows[r].size() != table->header.size()) Fail("a ragged row", std::to_string(r));
    if (r > 0 && table->row_lines[r] <= table->row_lines[r - 1]) Fail("row lines", "not rising");
  }
  // The streaming reader reads the same rows.
  if (!reader.ok()) Fail("the reader refused what ParseCsv took", reader.status().ToString());
  if ((*reader)->header() != table->header) Fail("the reader's header", "differs");
  std::vector<std::string> fields;
  int64_t line = 0;
  for (size_t r = 0;; ++r) {
    absl::StatusOr<bool> more = (*reader)->Next(&fields, &line);
    if (!more.ok()) Fail("the reader refused a row ParseCsv took", more.status().ToString());
    if (!*more) {
      if (r != table->rows.size()) Fail("the reader's row count", std::to_string(r));
      break;
    }
    if (r >= table->rows.size() || fields != table->rows[r] || line != table->row_lines[r]) {
      Fail("the reader's row", std::to_string(r));
    }
  }
  // Written back and read again: the same table (the header too, whatever named it).
  const std::string written = FormatCsv(table->header, table->rows);
  absl::StatusOr<CsvTable> again = ParseCsv(written, "again");
  if (!again.ok()) Fail("the writer's output does not parse", again.status().ToString());
  if (again->header != table->header || again->rows != table->rows) {
    Fail("the round trip", written);
  }
  return 0;
}
