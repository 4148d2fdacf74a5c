// Fuzzes the reader of a stored company table (server/app/company_table: CompanyTable::Parse
// over storage::StoredTable's wire format). The input's first byte is the row count the
// table's record states, the rest the stored bytes. Whatever they are, it refuses them with DataLoss
// or gives a table whose every column has one value per key handed out (numbers by row,
// categories as codes within their sorted distinct values). Whenever protobuf itself parses the
// bytes into a whole table (a value per key in every column, of its spec's type), Parse gives
// the same table from that message as protobuf writes it (fields in number order, as the vault
// stores tables; Parse refuses a key or a spec after the first column).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "server/app/company_table.h"
#include "tests/fuzz/fuzz_contract.h"

namespace {

using fairvault::fuzz::Fail;

// Whether a parsed message is a table as UploadTable stores it.
bool Whole(const fairvault::server::storage::StoredTable& t) {
  if (t.columns_size() != t.specs_size()) return false;
  for (int c = 0; c < t.specs_size(); ++c) {
    const bool numeric = t.specs(c).type() == fairvault::v1::COLUMN_TYPE_NUMERIC;
    const auto& v = t.columns(c);
    if ((numeric ? v.numeric_size() : v.categorical_size()) != t.keys_size()) return false;
    if ((numeric ? v.categorical_size() : v.numeric_size()) != 0) return false;
  }
  return true;
}

bool SameBits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using fairvault::server::CompanyTable;
  if (size == 0) return 0;
  const int64_t stated_rows = data[0];
  ++data;
  --size;
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> keys;
  absl::StatusOr<CompanyTable> table =
      CompanyTable::Parse(bytes, stated_rows, [&](absl::Span<const absl::string_view> block) {
        for (absl::string_view k : block) keys.emplace_back(k);
      });
  if (!table.ok()) {
    if (table.status().code() != absl::StatusCode::kDataLoss) {
      Fail("a refusal that is not DataLoss", table.status().ToString());
    }
  } else {
    if (table->rows() != static_cast<int64_t>(keys.size()) || table->rows() != stated_rows) {
      Fail("rows", "differ from the keys or the record");
    }
    std::vector<std::string> alone;
    const absl::Status read = CompanyTable::ReadKeys(bytes, stated_rows,
                                                     [&](absl::Span<const absl::string_view> b) {
                                                       for (absl::string_view k : b) alone.emplace_back(k);
                                                     });
    if (!read.ok() || alone != keys) Fail("ReadKeys", "disagrees with Parse");
    int64_t bytes_held = 0;
    for (int c = 0; c < table->num_columns(); ++c) {
      if (table->numeric(c)) {
        if (static_cast<int64_t>(table->numbers(c).size()) != table->rows()) Fail("numbers", "");
        if (table->categories(c) != nullptr) Fail("a numeric column with categories", "");
        bytes_held += static_cast<int64_t>(table->numbers(c).size() * sizeof(double));
      } else {
        const auto& dict = table->categories(c);
        if (dict == nullptr || static_cast<int64_t>(dict->code.size()) != table->rows()) {
          Fail("categories", "");
        }
        for (int32_t code : dict->code) {
          if (code < 0 || code >= static_cast<int32_t>(dict->domain.size())) Fail("a code", "");
        }
        for (size_t i = 1; i < dict->domain.size(); ++i) {
          if (!(dict->domain[i - 1] < dict->domain[i])) Fail("the domain's order", "");
        }
      }
    }
    if (table->Bytes() < bytes_held) Fail("Bytes()", "below the numbers it holds");
  }
  fairvault::server::storage::StoredTable message;
  if (!message.ParseFromArray(data, static_cast<int>(size)) || !Whole(message)) return 0;
  const std::string canonical = message.SerializeAsString();
  keys.clear();
  table = CompanyTable::Parse(canonical, message.keys_size(),
                              [&](absl::Span<const absl::string_view> block) {
    for (absl::string_view k : block) keys.emplace_back(k);
  });
  if (!table.ok()) {
    std::string hex;
    for (unsigned char c : canonical) hex += "0123456789abcdef"[c >> 4], hex += "0123456789abcdef"[c & 15];
    Fail("a whole table refused", table.status().ToString() + " " + hex);
  }
  if (keys != std::vector<std::string>(message.keys().begin(), message.keys().end())) {
    Fail("the keys", "differ from protobuf's");
  }
  if (table->label() != message.label()) Fail("the label", "");
  for (int c = 0; c < message.specs_size(); ++c) {
    if (table->spec(c).name() != message.specs(c).name()) Fail("a spec", "");
    if (table->numeric(c)) {
      for (int r = 0; r < message.keys_size(); ++r) {
        if (!SameBits(table->numbers(c)[r], message.columns(c).numeric(r))) Fail("a number", "");
      }
    } else {
      const auto& dict = *table->categories(c);
      for (int r = 0; r < message.keys_size(); ++r) {
        if (dict.domain[dict.code[r]] != message.columns(c).categorical(r)) Fail("a category", "");
      }
    }
  }
  return 0;
}
