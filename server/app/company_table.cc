// Compact columns of a company table.
#include "server/app/company_table.h"

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"

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
ColumnDictionary Sorted(std::vector<std::string> distinct, const std::vector<int32_t>& first_code) {
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
  dict.code.resize(first_code.size());
  for (size_t r = 0; r < first_code.size(); ++r) dict.code[r] = rank[first_code[r]];
  return dict;
}

// Codes a column by a hash map over its values (each distinct value named once by `name`).
template <typename Value, typename Name>
ColumnDictionary Dictionary(int64_t rows, const Value& value_of, const Name& name) {
  absl::flat_hash_map<decltype(value_of(0)), int32_t> code_of;
  std::vector<int32_t> first_code(rows);
  std::vector<std::string> distinct;
  for (int64_t r = 0; r < rows; ++r) {
    auto [it, inserted] = code_of.emplace(value_of(r), static_cast<int32_t>(distinct.size()));
    if (inserted) distinct.push_back(name(value_of(r)));
    first_code[r] = it->second;
  }
  return Sorted(std::move(distinct), first_code);
}

}  // namespace

int64_t ColumnDictionary::Bytes() const {
  int64_t bytes = static_cast<int64_t>(code.capacity() * sizeof(int32_t));
  for (const std::string& d : domain) bytes += static_cast<int64_t>(sizeof(d) + d.capacity());
  return bytes;
}

ColumnDictionary NumericDictionary(absl::Span<const double> values) {
  return Dictionary(
      static_cast<int64_t>(values.size()), [&](int64_t r) { return values[r] + 0.0; },
      [](double v) { return ExactDecimal(v); });
}

CompanyTable::CompanyTable(storage::StoredTable&& table)
    : rows_(table.keys_size()), label_(table.label()) {
  table.clear_keys();
  specs_.assign(table.specs().begin(), table.specs().end());
  numbers_.resize(specs_.size());
  categories_.resize(specs_.size());
  for (int c = 0; c < num_columns(); ++c) {
    v1::ColumnValues* values = table.mutable_columns(c);
    if (numeric(c)) {
      numbers_[c].assign(values->numeric().begin(), values->numeric().end());
      bytes_ += static_cast<int64_t>(numbers_[c].capacity() * sizeof(double));
    } else {
      auto dict = std::make_shared<ColumnDictionary>(Dictionary(
          rows_, [&](int64_t r) -> absl::string_view { return values->categorical(r); },
          [](absl::string_view v) { return std::string(v); }));
      bytes_ += dict->Bytes();
      categories_[c] = std::move(dict);
    }
    values->Clear();  // this column's memory back before the next is built
  }
}

}  // namespace fairvault::server
