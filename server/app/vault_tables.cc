// Company tables: upload, resolution (ownership, expiry) and the join with the vault.
#include <cmath>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/util/status_macros.h"
#include "core/util/truncate.h"
#include "server/app/vault.h"
#include "server/app/vault_internal.h"
#include "server/util/crypto.h"

namespace fairvault::server {

using internal::RequireRole;
using storage::Role;

namespace {
constexpr int64_t kDefaultTtlSeconds = 86'400;
constexpr int64_t kMaxTtlSeconds = 7 * 86'400;
constexpr int kMaxColumns = 256;
constexpr size_t kMaxNameBytes = 64;
}  // namespace

absl::StatusOr<v1::UploadTableResponse> Vault::UploadTable(
    const Caller& caller, const v1::TableHeader& header,
    const ChunkSource<v1::TableChunk>& stream) {
  RETURN_IF_ERROR(RequireRole(caller, {Role::kCompany}));
  ASSIGN_OR_RETURN(auto dataset, store_->GetDataset(header.dataset()));
  if (!store_->GetBudget(caller.account_id, dataset.id).ok()) {
    return absl::PermissionDeniedError(
        absl::StrCat("company '", caller.name, "' has no grant on dataset '", dataset.name,
                     "'; ask the regulator for a grant before uploading"));
  }
  if (header.ttl_seconds() < 0 || header.ttl_seconds() > kMaxTtlSeconds) {
    return absl::InvalidArgumentError(absl::StrCat("header.ttl_seconds must be in [1, ",
                                                   kMaxTtlSeconds, "] or 0 for the default (got ",
                                                   header.ttl_seconds(), ")"));
  }
  if (header.columns_size() > kMaxColumns) {
    return absl::InvalidArgumentError(
        absl::StrCat("header.columns: at most ", kMaxColumns, " columns"));
  }
  storage::StoredTable table;
  table.set_label(header.label());
  absl::flat_hash_map<std::string, int> seen;
  for (const v1::ColumnSpec& spec : header.columns()) {
    if (spec.name().empty() || spec.name().size() > 64) {
      return absl::InvalidArgumentError("header.columns: names must be 1-64 characters");
    }
    if (!seen.emplace(spec.name(), 0).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("header.columns: '", spec.name(), "' is repeated"));
    }
    if (spec.type() != v1::COLUMN_TYPE_NUMERIC && spec.type() != v1::COLUMN_TYPE_CATEGORICAL) {
      return absl::InvalidArgumentError(
          absl::StrCat("header.columns: column '", spec.name(),
                       "' needs type COLUMN_TYPE_NUMERIC or COLUMN_TYPE_CATEGORICAL"));
    }
    *table.add_specs() = spec;
    table.add_columns();
  }

  // Views into table.keys(): RepeatedPtrField never moves its strings as it grows.
  absl::flat_hash_map<absl::string_view, int64_t> row_of_key;
  v1::TableChunk chunk;
  int64_t row = 0;
  while (true) {
    ASSIGN_OR_RETURN(const bool more, stream.next(&chunk));
    if (!more) break;
    const int n = chunk.subject_keys_size();
    if (chunk.columns_size() != header.columns_size()) {
      return absl::InvalidArgumentError(absl::StrCat("chunk has ", chunk.columns_size(),
                                                     " columns; the header declares ",
                                                     header.columns_size()));
    }
    for (int c = 0; c < header.columns_size(); ++c) {
      const v1::ColumnValues& values = chunk.columns(c);
      const bool numeric = header.columns(c).type() == v1::COLUMN_TYPE_NUMERIC;
      const int count = numeric ? values.numeric_size() : values.categorical_size();
      if (count != n || (numeric ? values.categorical_size() : values.numeric_size()) != 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "column '", header.columns(c).name(), "' must carry ", n, " ",
            numeric ? "numeric" : "categorical", " values in this chunk (one per key)"));
      }
      for (int i = 0; i < n; ++i) {
        if (numeric && !std::isfinite(values.numeric(i))) {
          return absl::InvalidArgumentError(
              absl::StrCat("column '", header.columns(c).name(), "' row ", row + i + 1,
                           " is not a finite number; fix or drop the row"));
        }
      }
      v1::ColumnValues* dst = table.mutable_columns(c);
      if (numeric) {
        dst->mutable_numeric()->Add(values.numeric().begin(), values.numeric().end());
      } else {
        for (std::string& v : *chunk.mutable_columns(c)->mutable_categorical()) {
          *dst->add_categorical() = std::move(v);
        }
      }
    }
    for (int i = 0; i < n; ++i) {
      ++row;
      if (row > options_.max_rows) {
        return absl::InvalidArgumentError(
            absl::StrCat("a table may hold at most ", options_.max_rows, " rows"));
      }
      std::string* key = table.add_keys();
      *key = std::move(*chunk.mutable_subject_keys(i));
      RETURN_IF_ERROR(
          internal::ValidateToken(*key, absl::StrCat("subject key at row ", row).c_str()));
      auto [it, inserted] = row_of_key.emplace(*key, row);
      if (!inserted) {
        // A repeated person would multiply their influence on every statistic.
        return absl::InvalidArgumentError(absl::StrCat("subject key at row ", row,
                                                       " repeats the key of row ", it->second,
                                                       "; each subject may appear once per table"));
      }
    }
  }
  if (row == 0) return absl::InvalidArgumentError("the table has no rows");

  // Presence in the vault is not protected (ALGORITHMS.md §7), so reporting it is free.
  ASSIGN_OR_RETURN(auto slot, LoadIndex(dataset));
  int64_t in_vault = 0;
  {
    absl::ReaderMutexLock lock(&slot->mu);
    for (const std::string& key : table.keys()) in_vault += slot->index->Find(key) >= 0;
  }

  const int64_t now = clock_->NowMicros();
  const int64_t ttl = header.ttl_seconds() == 0 ? kDefaultTtlSeconds : header.ttl_seconds();
  storage::TableRecord record;
  record.handle = absl::StrCat("tbl_", HexEncode(RandomBytes(16)));
  record.account_id = caller.account_id;
  record.dataset_id = dataset.id;
  record.rows = row;
  record.expires_micros = now + ttl * 1'000'000;
  record.payload = table.SerializeAsString();
  RETURN_IF_ERROR(store_->PurgeExpiredTables(now).status());
  RETURN_IF_ERROR(stream.live());
  RETURN_IF_ERROR(store_->PutTable(record));
  {
    absl::MutexLock lock(&table_cache_mu_);
    table_cache_.emplace_front(record.handle,
                               std::make_shared<const storage::StoredTable>(std::move(table)));
    while (static_cast<int>(table_cache_.size()) > options_.table_cache_size) {
      table_cache_.pop_back();
    }
  }
  v1::UploadTableResponse resp;
  resp.set_table_handle(record.handle);
  resp.set_row_count(row);
  resp.set_expires_unix(record.expires_micros / 1'000'000);
  resp.set_rows_in_vault(in_vault);
  return resp;
}

absl::StatusOr<Vault::ResolvedTable> Vault::ResolveTable(const Caller& caller,
                                                         const std::string& handle) {
  if (handle.empty()) return absl::InvalidArgumentError("table_handle must be set");
  ASSIGN_OR_RETURN(storage::TableRecord record, store_->GetTable(handle));
  if (record.account_id != caller.account_id) {
    return absl::PermissionDeniedError(
        absl::StrCat("table_handle '", handle, "' belongs to another company"));
  }
  if (record.expires_micros < clock_->NowMicros()) {
    return absl::FailedPreconditionError(
        absl::StrCat("table_handle '", handle, "' expired at unix time ",
                     record.expires_micros / 1'000'000, "; upload the table again"));
  }
  ResolvedTable resolved;
  ASSIGN_OR_RETURN(resolved.dataset, store_->GetDatasetById(record.dataset_id));
  ASSIGN_OR_RETURN(resolved.dataset_attributes, DatasetAttributes(resolved.dataset));
  {
    absl::MutexLock lock(&table_cache_mu_);
    for (auto it = table_cache_.begin(); it != table_cache_.end(); ++it) {
      if (it->first == handle) {
        resolved.table = it->second;
        table_cache_.splice(table_cache_.begin(), table_cache_, it);
        break;
      }
    }
  }
  if (resolved.table == nullptr) {
    auto parsed = std::make_shared<storage::StoredTable>();
    if (!parsed->ParseFromString(record.payload)) {
      return absl::DataLossError(absl::StrCat("table '", handle, "' is corrupt"));
    }
    resolved.table = parsed;
    absl::MutexLock lock(&table_cache_mu_);
    table_cache_.emplace_front(handle, parsed);
    while (static_cast<int>(table_cache_.size()) > options_.table_cache_size) {
      table_cache_.pop_back();
    }
  }
  record.payload.clear();
  resolved.record = std::move(record);
  return resolved;
}

absl::StatusOr<GroupSpec> ResolveGroups(
    const std::vector<v1::Attribute>& all, const std::string& dataset_name,
    const google::protobuf::RepeatedPtrField<std::string>& names) {
  GroupSpec spec;
  if (names.empty()) {
    for (int k = 0; k < static_cast<int>(all.size()); ++k) spec.attribute_index.push_back(k);
  } else {
    for (const std::string& name : names) {
      if (name.empty() || name.size() > kMaxNameBytes) {
        return absl::InvalidArgumentError(absl::StrCat(
            "attributes: names are 1-", kMaxNameBytes, " bytes (got one of ", name.size(), ": '",
            core::Truncated(name), "'); the dataset's attributes are listed by ListDatasets"));
      }
      auto it = std::find_if(all.begin(), all.end(),
                             [&](const v1::Attribute& a) { return a.name() == name; });
      if (it == all.end()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "attributes: '", core::Truncated(name), "' is not an attribute of dataset '",
            dataset_name, "' (it has: ",
            absl::StrJoin(all, ", ",
                          [](std::string* o, const v1::Attribute& a) { o->append(a.name()); }),
            ")"));
      }
      const int k = static_cast<int>(it - all.begin());
      if (std::find(spec.attribute_index.begin(), spec.attribute_index.end(), k) !=
          spec.attribute_index.end()) {
        return absl::InvalidArgumentError(absl::StrCat("attributes: '", name, "' is repeated"));
      }
      spec.attribute_index.push_back(k);
    }
  }
  spec.num_groups = 1;
  spec.group_labels.assign(1, "");
  for (int k : spec.attribute_index) {
    spec.num_groups *= all[k].categories_size();
    if (spec.num_groups > 4096) {
      return absl::InvalidArgumentError("attributes: at most 4096 joint groups");
    }
    spec.radix.push_back(all[k].categories_size());
    spec.attributes.push_back(all[k].name());
    std::vector<std::string> next;
    for (const std::string& prefix : spec.group_labels) {
      for (const std::string& c : all[k].categories()) {
        next.push_back(prefix.empty() ? c : absl::StrCat(prefix, "|", c));
      }
    }
    spec.group_labels = std::move(next);
  }
  return spec;
}

absl::StatusOr<JoinedRows> Vault::Join(const ResolvedTable& table,
                                       const google::protobuf::RepeatedPtrField<std::string>& attrs,
                                       v1::UnmatchedKeys unmatched) {
  if (unmatched != v1::UNMATCHED_KEYS_REJECT && unmatched != v1::UNMATCHED_KEYS_DROP) {
    return absl::InvalidArgumentError(
        absl::StrCat("unmatched: unknown value ", static_cast<int>(unmatched),
                     "; use UNMATCHED_KEYS_REJECT (0) or UNMATCHED_KEYS_DROP (1)"));
  }
  JoinedRows out;
  ASSIGN_OR_RETURN(static_cast<GroupSpec&>(out),
                   ResolveGroups(table.dataset_attributes, table.dataset.name, attrs));
  ASSIGN_OR_RETURN(auto slot, LoadIndex(table.dataset));
  absl::ReaderMutexLock lock(&slot->mu);
  const SubjectIndex& index = *slot->index;
  const auto& keys = table.table->keys();
  out.table_rows.reserve(keys.size());
  out.group.reserve(keys.size());
  for (int64_t i = 0; i < keys.size(); ++i) {
    const int64_t subject = index.Find(keys[i]);
    if (subject < 0) {
      ++out.dropped;
      continue;
    }
    out.table_rows.push_back(i);
    out.group.push_back(out.GroupOf(index, subject));
  }
  if (out.dropped > 0 && unmatched != v1::UNMATCHED_KEYS_DROP) {
    return absl::InvalidArgumentError(
        absl::StrCat(out.dropped, " of ", keys.size(),
                     " table rows have subject keys that are not in the vault; remove them or set "
                     "unmatched = UNMATCHED_KEYS_DROP"));
  }
  if (out.table_rows.empty()) {
    return absl::InvalidArgumentError("no table row has a subject key in the vault");
  }
  return out;
}

}  // namespace fairvault::server
