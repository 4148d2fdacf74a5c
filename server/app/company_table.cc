// Compact columns of a company table.
#include "server/app/company_table.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/wire_format_lite.h"
#include "absl/strings/string_view.h"
#include "core/util/status_macros.h"

namespace fairvault::server {
namespace {

// The shortest decimal that reads back as exactly `v`, so distinct numbers never share a cell.
std::string ExactDecimal(double v) {
  for (int digits = 6; digits < 17; ++digits) {
    std::string text = absl::StrFormat("%.*g", digits, v);
    if (std::strtod(text.c_str(), nullptr) == v) return text;
  }
  return absl::StrFormat("%.17g", v);
}

// Rows coded by first appearance (`first_code`, `distinct`) recoded in the string order of
// their values.
ColumnDictionary Sorted(std::vector<std::string> distinct, std::vector<int32_t> first_code) {
  ColumnDictionary dict;
  std::vector<int32_t> order(distinct.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
  std::sort(order.begin(), order.end(),
            [&](int32_t a, int32_t b) { return distinct[a] < distinct[b]; });
  std::vector<int32_t> rank(distinct.size());
  dict.domain.reserve(distinct.size());
  for (size_t i = 0; i < order.size(); ++i) {
    rank[order[i]] = static_cast<int32_t>(i);
    dict.domain.push_back(std::move(distinct[order[i]]));
  }
  for (int32_t& code : first_code) code = rank[code];
  dict.code = std::move(first_code);
  return dict;
}

// Codes a column's values as they come, by first appearance, then in string order.
template <typename Value>
class Coder {
 public:
  explicit Coder(int64_t rows_hint) { first_code_.reserve(rows_hint); }
  // `name` gives the distinct value's name, called once per distinct value.
  template <typename Name>
  void Add(Value value, const Name& name) {
    auto [it, inserted] = code_of_.emplace(value, static_cast<int32_t>(distinct_.size()));
    if (inserted) distinct_.push_back(name(value));
    first_code_.push_back(it->second);
  }
  ColumnDictionary Finish() && { return Sorted(std::move(distinct_), std::move(first_code_)); }

 private:
  absl::flat_hash_map<Value, int32_t> code_of_;
  std::vector<std::string> distinct_;
  std::vector<int32_t> first_code_;
};

}  // namespace

int64_t ColumnDictionary::Bytes() const {
  int64_t bytes = static_cast<int64_t>(code.capacity() * sizeof(int32_t));
  for (const std::string& d : domain) bytes += static_cast<int64_t>(sizeof(d) + d.capacity());
  return bytes;
}

ColumnDictionary NumericDictionary(absl::Span<const double> values) {
  Coder<double> coder(static_cast<int64_t>(values.size()));
  // + 0.0: -0 and 0 are one value (named "0").
  for (double v : values) coder.Add(v + 0.0, [](double d) { return ExactDecimal(d); });
  return std::move(coder).Finish();
}

// A table's columns gathered value by value, one column at a time, from either source.
class CompanyTable::Builder {
 public:
  explicit Builder(std::vector<v1::ColumnSpec> specs) {
    table_.specs_ = std::move(specs);
    table_.numbers_.resize(table_.specs_.size());
    table_.categories_.resize(table_.specs_.size());
  }
  int num_columns() const { return table_.num_columns(); }
  bool numeric(int c) const { return table_.numeric(c); }
  // Starts column c (0, 1, ... in order) of `rows` values (an estimate is enough).
  void Start(int c, int64_t rows) {
    column_ = c;
    if (numeric(c)) {
      table_.numbers_[c].reserve(rows);
    } else {
      coder_.emplace(rows);
    }
  }
  void Number(double v) { table_.numbers_[column_].push_back(v); }
  // A categorical value, viewed until the column ends.
  void Category(absl::string_view v) {
    coder_->Add(v, [](absl::string_view d) { return std::string(d); });
  }
  // Ends the current column: it must hold `rows` values.
  bool End(int64_t rows) {
    const int c = column_;
    if (numeric(c)) {
      std::vector<double>& numbers = table_.numbers_[c];
      numbers.shrink_to_fit();
      table_.bytes_ += static_cast<int64_t>(numbers.capacity() * sizeof(double));
      return static_cast<int64_t>(numbers.size()) == rows;
    }
    auto dict = std::make_shared<ColumnDictionary>(std::move(*coder_).Finish());
    coder_.reset();
    table_.bytes_ += dict->Bytes();
    const bool whole = static_cast<int64_t>(dict->code.size()) == rows;
    table_.categories_[c] = std::move(dict);
    return whole;
  }
  CompanyTable Finish(int64_t rows, std::string label) && {
    table_.rows_ = rows;
    table_.label_ = std::move(label);
    table_.bytes_ += static_cast<int64_t>(table_.label_.capacity());
    // What every column costs whatever its rows: its spec and the arrays' headers.
    for (const v1::ColumnSpec& spec : table_.specs_) {
      table_.bytes_ += static_cast<int64_t>(sizeof(spec) + spec.name().capacity() +
                                            sizeof(std::vector<double>) +
                                            sizeof(std::shared_ptr<const ColumnDictionary>));
    }
    return std::move(table_);
  }

 private:
  CompanyTable table_;
  int column_ = -1;
  std::optional<Coder<absl::string_view>> coder_;
};

CompanyTable::CompanyTable(storage::StoredTable&& table) {
  const int64_t rows = table.keys_size();
  table.clear_keys();
  Builder builder({table.specs().begin(), table.specs().end()});
  for (int c = 0; c < builder.num_columns(); ++c) {
    v1::ColumnValues* values = table.mutable_columns(c);
    builder.Start(c, rows);
    if (builder.numeric(c)) {
      for (double v : values->numeric()) builder.Number(v);
    } else {
      for (const std::string& v : values->categorical()) builder.Category(v);
    }
    builder.End(rows);
    values->Clear();  // this column's memory back before the next is built
  }
  *this = std::move(builder).Finish(rows, table.label());
}

absl::StatusOr<CompanyTable> CompanyTable::Parse(absl::string_view payload, int64_t rows,
                                                 KeysFn keys) {
  std::optional<CompanyTable> table;
  RETURN_IF_ERROR(Read(payload, rows, keys, &table));
  return *std::move(table);
}

absl::Status CompanyTable::ReadKeys(absl::string_view payload, int64_t rows, KeysFn keys) {
  return Read(payload, rows, keys, nullptr);
}

absl::Status CompanyTable::Read(absl::string_view payload, int64_t expected_rows, KeysFn keys,
                                std::optional<CompanyTable>* table) {
  using google::protobuf::internal::WireFormatLite;
  const auto corrupt = [](absl::string_view what) {
    return absl::DataLossError(absl::StrCat("the stored table is corrupt: ", what));
  };
  if (payload.size() > static_cast<size_t>(std::numeric_limits<int>::max())) {
    return corrupt("over 2 GiB");
  }
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(payload.data()),
                                            static_cast<int>(payload.size()));
  // A view of the next length-delimited value of `from` (which reads `within`), skipped.
  const auto view = [](google::protobuf::io::CodedInputStream& from, absl::string_view within,
                       absl::string_view* out) {
    int len = 0;
    if (!from.ReadVarintSizeAsInt(&len)) return false;
    const int at = from.CurrentPosition();
    if (!from.Skip(len)) return false;
    *out = within.substr(at, len);
    return true;
  };
  std::vector<v1::ColumnSpec> specs;
  std::string label;
  std::optional<Builder> builder;
  bool keys_done = false;  // a column was reached: the keys are all read and handed out
  std::vector<absl::string_view> block;
  constexpr size_t kBlock = 4096;
  int64_t rows = 0;
  int columns = 0;
  // Hands out the last keys; the record's row count must match.
  const auto end_keys = [&]() -> absl::Status {
    if (keys_done) return absl::OkStatus();
    keys_done = true;
    if (rows != expected_rows) {
      return corrupt(absl::StrCat(rows, " keys where its record says ", expected_rows, " rows"));
    }
    keys(block);
    block.clear();
    if (table != nullptr) builder.emplace(std::move(specs));
    return absl::OkStatus();
  };
  absl::string_view bytes;
  while (const uint32_t tag = in.ReadTag()) {
    const int field = WireFormatLite::GetTagFieldNumber(tag);
    const bool delimited =
        WireFormatLite::GetTagWireType(tag) == WireFormatLite::WIRETYPE_LENGTH_DELIMITED;
    if (field == 1 && delimited) {  // specs, before any column
      if (keys_done || !view(in, payload, &bytes) ||
          !specs.emplace_back().ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
        return corrupt("a column spec");
      }
    } else if (field == 2 && delimited) {  // keys, before any column
      if (keys_done || !view(in, payload, &bytes)) return corrupt("a key");
      if (++rows > expected_rows) return corrupt("more keys than its record's rows");
      block.push_back(bytes);
      if (block.size() == kBlock) {
        keys(block);
        block.clear();
      }
    } else if (field == 3 && delimited) {  // columns, in the specs' order
      RETURN_IF_ERROR(end_keys());
      const int c = columns++;
      if (!view(in, payload, &bytes)) return corrupt("a column");
      if (table == nullptr) continue;  // keys only
      if (c >= builder->num_columns()) return corrupt("more columns than specs");
      builder->Start(c, rows);
      google::protobuf::io::CodedInputStream col(reinterpret_cast<const uint8_t*>(bytes.data()),
                                                 static_cast<int>(bytes.size()));
      const bool numeric = builder->numeric(c);
      while (const uint32_t t = col.ReadTag()) {
        const int f = WireFormatLite::GetTagFieldNumber(t);
        const auto type = WireFormatLite::GetTagWireType(t);
        uint64_t word = 0;
        int len = 0;
        absl::string_view value;
        const bool number = f == 1 && (type == WireFormatLite::WIRETYPE_LENGTH_DELIMITED ||
                                       type == WireFormatLite::WIRETYPE_FIXED64);
        const bool category = f == 2 && type == WireFormatLite::WIRETYPE_LENGTH_DELIMITED;
        if ((number && !numeric) || (category && numeric)) {
          return corrupt("a value of another type than its column's");
        }
        if (number && type == WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
          if (!col.ReadVarintSizeAsInt(&len) || len % 8 != 0) return corrupt("numbers");
          for (int i = 0; i < len / 8; ++i) {
            if (!col.ReadLittleEndian64(&word)) return corrupt("numbers");
            builder->Number(WireFormatLite::DecodeDouble(word));
          }
        } else if (number) {
          if (!col.ReadLittleEndian64(&word)) return corrupt("numbers");
          builder->Number(WireFormatLite::DecodeDouble(word));
        } else if (category) {
          if (!view(col, bytes, &value)) return corrupt("a category");
          builder->Category(value);
        } else if (!WireFormatLite::SkipField(&col, t)) {
          // A later version's field, or a wire type protobuf too keeps as an unknown field.
          return corrupt("an unreadable field in a column");
        }
      }
      if (!col.ConsumedEntireMessage() || !builder->End(rows)) {
        return corrupt("a column without one value per key");
      }
    } else if (field == 4 && delimited) {
      if (!view(in, payload, &bytes)) return corrupt("the label");
      label = std::string(bytes);
    } else if (!WireFormatLite::SkipField(&in, tag)) {
      return corrupt("an unreadable field");
    }
  }
  if (!in.ConsumedEntireMessage()) return corrupt("its end");
  RETURN_IF_ERROR(end_keys());
  if (table == nullptr) return absl::OkStatus();
  if (columns != builder->num_columns()) return corrupt("a missing column");
  table->emplace(std::move(*builder).Finish(rows, std::move(label)));
  return absl::OkStatus();
}

}  // namespace fairvault::server
