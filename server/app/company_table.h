// A company's uploaded table as releases read it in memory: each column in compact form (numbers
// as doubles, categorical values as codes into their sorted distinct values), without the
// subject keys, which stay in the store (the table cache keeps their join with the vault).
#ifndef FAIRVAULT_SERVER_APP_COMPANY_TABLE_H_
#define FAIRVAULT_SERVER_APP_COMPANY_TABLE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "fairvault/v1/fairvault.pb.h"
#include "server/storage/records.pb.h"

namespace fairvault::server {

// A column's distinct values in string order (numbers as their shortest exact decimal) and the
// code of each table row into them.
struct ColumnDictionary {
  std::vector<std::string> domain;
  std::vector<int32_t> code;  // per table row
  int64_t Bytes() const;
};

// The dictionary of a numeric column (distinct doubles; -0 and 0 are one value, as == says).
ColumnDictionary NumericDictionary(absl::Span<const double> values);

class CompanyTable {
 public:
  // Takes the columns of a parsed table (its keys are dropped, its strings freed as each
  // categorical column is coded). The table must be valid as UploadTable stores it: every
  // column has one value per key, of its spec's type.
  explicit CompanyTable(storage::StoredTable&& table);
  // Receives a stored table's keys in order, a block at a time, as views into its payload
  // (valid during the call only).
  using KeysFn = absl::FunctionRef<void(absl::Span<const absl::string_view>)>;
  // Reads a stored table (storage::StoredTable's wire format, as protobuf writes it: fields in
  // number order) of `rows` rows, as its record says, without a string object per row: the
  // columns straight into compact form, the keys handed to `keys`. DataLoss if the payload is
  // not such a table (another number of keys included). Fields a later version adds are
  // skipped.
  static absl::StatusOr<CompanyTable> Parse(absl::string_view payload, int64_t rows, KeysFn keys);
  // The same for the keys alone (the columns are skipped, not checked).
  static absl::Status ReadKeys(absl::string_view payload, int64_t rows, KeysFn keys);

  int64_t rows() const { return rows_; }
  const std::string& label() const { return label_; }
  int num_columns() const { return static_cast<int>(specs_.size()); }
  const v1::ColumnSpec& spec(int c) const { return specs_[c]; }
  const std::vector<v1::ColumnSpec>& specs() const { return specs_; }
  bool numeric(int c) const { return spec(c).type() == v1::COLUMN_TYPE_NUMERIC; }
  // A numeric column's values by table row (empty for a categorical column).
  absl::Span<const double> numbers(int c) const { return numbers_[c]; }
  // A categorical column's dictionary (null for a numeric column).
  const std::shared_ptr<const ColumnDictionary>& categories(int c) const {
    return categories_[c];
  }
  // The memory the columns hold.
  int64_t Bytes() const { return bytes_; }

 private:
  class Builder;
  CompanyTable() = default;
  // Parse (into *table) or ReadKeys (table null).
  static absl::Status Read(absl::string_view payload, int64_t rows, KeysFn keys,
                           std::optional<CompanyTable>* table);

  int64_t rows_ = 0;
  std::string label_;
  std::vector<v1::ColumnSpec> specs_;
  std::vector<std::vector<double>> numbers_;
  std::vector<std::shared_ptr<const ColumnDictionary>> categories_;
  int64_t bytes_ = 0;
};

}  // namespace fairvault::server

#endif  // FAIRVAULT_SERVER_APP_COMPANY_TABLE_H_
