// Company tables: upload, resolution (ownership, expiry) and the join with the vault.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/util/status_macros.h"
#include "core/util/truncate.h"
#include "server/app/repeat_finder.h"
#include "server/app/vault.h"
#include "server/app/vault_internal.h"
#include "server/util/crypto.h"

namespace fairvault::server {

using internal::RequireRole;
using storage::Role;

namespace {
constexpr int64_t kDefaultTtlSeconds = 86'400;
constexpr int64_t kMaxTtlSeconds = 7 * 86'400;
// Enough for an exponential-mechanism learner's 5,000 candidate columns (FitFairModel) plus keys.
constexpr int kMaxColumns = 8192;
constexpr size_t kMaxNameBytes = 64;
// The company's own note on a table (kept with it, returned by no RPC).
constexpr size_t kMaxLabelBytes = 256;
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
  if (header.label().size() > kMaxLabelBytes) {
    return absl::InvalidArgumentError(absl::StrCat("header.label: at most ", kMaxLabelBytes,
                                                   " bytes (got ", header.label().size(), ")"));
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
  RepeatFinder repeats;
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
        internal::MoveStrings(chunk.mutable_columns(c)->mutable_categorical(),
                              dst->mutable_categorical());
      }
    }
    if (row + n > options_.max_rows) {
      return absl::InvalidArgumentError(
          absl::StrCat("a table may hold at most ", options_.max_rows, " rows"));
    }
    internal::MoveStrings(chunk.mutable_subject_keys(), table.mutable_keys());
    repeats.Reserve(row + n);
    for (int i = 0; i < n; ++i) {
      ++row;
      const std::string* key = &table.keys(static_cast<int>(row - 1));
      if (!internal::IsToken(*key)) {
        return internal::ValidateToken(*key, absl::StrCat("subject key at row ", row).c_str());
      }
      if (const int64_t earlier = repeats.Add(*key, row); earlier > 0) {
        // A repeated person would multiply their influence on every statistic.
        return absl::InvalidArgumentError(absl::StrCat("subject key at row ", row,
                                                       " repeats the key of row ", earlier,
                                                       "; each subject may appear once per table"));
      }
    }
  }
  if (row == 0) return absl::InvalidArgumentError("the table has no rows");

  // The blob to store is serialized on a second thread while this one joins the keys with the
  // vault (both only read the table): a tenth of a 1M-row upload.
  std::string payload;
  std::thread serializer([&table, &payload] { payload = table.SerializeAsString(); });
  internal::JoinOnExit join_serializer(serializer);

  // Presence in the vault is not protected (ALGORITHMS.md §7), so reporting it is free. The
  // join is kept with the table for its releases.
  ASSIGN_OR_RETURN(auto slot, LoadIndex(dataset));
  std::shared_ptr<const std::vector<int32_t>> subject_of_row;
  int64_t joined_subjects = 0;
  {
    absl::ReaderMutexLock lock(&slot->mu);
    subject_of_row =
        std::make_shared<const std::vector<int32_t>>(slot->index->FindAll(table.keys()));
    joined_subjects = slot->index->size();
  }
  const int64_t in_vault = std::count_if(subject_of_row->begin(), subject_of_row->end(),
                                         [](int32_t s) { return s >= 0; });

  const int64_t now = clock_->NowMicros();
  const int64_t ttl = header.ttl_seconds() == 0 ? kDefaultTtlSeconds : header.ttl_seconds();
  storage::TableRecord record;
  record.handle = absl::StrCat("tbl_", HexEncode(RandomBytes(16)));
  record.account_id = caller.account_id;
  record.dataset_id = dataset.id;
  record.rows = row;
  record.expires_micros = now + ttl * 1'000'000;
  serializer.join();
  record.payload = std::move(payload);
  RETURN_IF_ERROR(store_->PurgeExpiredTables(now).status());
  RETURN_IF_ERROR(stream.live());
  RETURN_IF_ERROR(store_->PutTable(record));
  record.payload.clear();
  CacheTable(record, std::make_shared<const CompanyTable>(std::move(table)),
             std::move(subject_of_row), joined_subjects);
  v1::UploadTableResponse resp;
  resp.set_table_handle(record.handle);
  resp.set_row_count(row);
  resp.set_expires_unix(record.expires_micros / 1'000'000);
  resp.set_rows_in_vault(in_vault);
  return resp;
}

absl::StatusOr<Vault::ResolvedTable> Vault::ResolveTable(const Caller& caller,
                                                         const std::string& handle,
                                                         bool allow_expired) {
  if (handle.empty()) return absl::InvalidArgumentError("table_handle must be set");
  ResolvedTable resolved;
  {
    absl::MutexLock lock(&table_cache_mu_);
    for (auto it = table_cache_.begin(); it != table_cache_.end(); ++it) {
      if (it->first == handle) {
        resolved.cached = it->second;
        table_cache_.splice(table_cache_.begin(), table_cache_, it);
        break;
      }
    }
  }
  // A cached table's record stands in for the store's until shortly before it expires
  // (CachedTable::record); the payload is read only when the parsed table is not in the cache.
  const int64_t now = clock_->NowMicros();
  storage::TableRecord record;
  if (resolved.cached != nullptr &&
      resolved.cached->record.expires_micros - kTableRecordMarginMicros >= now) {
    record = resolved.cached->record;
  } else {
    ASSIGN_OR_RETURN(record, store_->GetTableInfo(handle));
  }
  if (record.account_id != caller.account_id) {
    return absl::PermissionDeniedError(
        absl::StrCat("table_handle '", handle, "' belongs to another company"));
  }
  if (!allow_expired && record.expires_micros < now) {
    return absl::FailedPreconditionError(
        absl::StrCat("table_handle '", handle, "' expired at unix time ",
                     record.expires_micros / 1'000'000, "; upload the table again"));
  }
  ASSIGN_OR_RETURN(resolved.dataset, store_->GetDatasetById(record.dataset_id));
  ASSIGN_OR_RETURN(resolved.dataset_attributes, DatasetAttributes(resolved.dataset));
  if (resolved.cached == nullptr) {
    // Read and parsed without the index's lock (an import may run meanwhile: the join then
    // counts as stale and Join redoes it).
    ASSIGN_OR_RETURN(storage::TableRecord full, store_->GetTable(handle));
    ASSIGN_OR_RETURN(auto slot, LoadIndex(resolved.dataset));
    auto join = std::make_shared<std::vector<int32_t>>();
    const int64_t subjects = IndexSize(*slot);
    ASSIGN_OR_RETURN(CompanyTable table,
                     CompanyTable::Parse(full.payload, full.rows, JoinInto(*slot, join.get())));
    resolved.cached = CacheTable(record, std::make_shared<const CompanyTable>(std::move(table)),
                                 std::move(join), subjects);
  }
  resolved.table = resolved.cached->table;
  resolved.record = std::move(record);
  return resolved;
}

int64_t Vault::IndexSize(IndexSlot& slot) {
  absl::ReaderMutexLock lock(&slot.mu);
  return slot.index->size();
}

std::function<void(absl::Span<const absl::string_view>)> Vault::JoinInto(
    IndexSlot& slot, std::vector<int32_t>* subject_of_row) {
  return [&slot, subject_of_row](absl::Span<const absl::string_view> keys) {
    absl::ReaderMutexLock lock(&slot.mu);  // a block at a time: imports may run in between
    const std::vector<int32_t> found = slot.index->FindAll(keys);
    subject_of_row->insert(subject_of_row->end(), found.begin(), found.end());
  };
}

absl::Status Vault::RefreshJoin(const ResolvedTable& table, IndexSlot& slot) {
  int64_t subjects = 0;
  {
    absl::ReaderMutexLock lock(&slot.mu);
    absl::MutexLock cache_lock(&table.cached->mu);
    subjects = slot.index->size();
    if (table.cached->joined_subjects == subjects) return absl::OkStatus();
  }
  // The keys are not kept in memory: read back from the store, without the locks.
  ASSIGN_OR_RETURN(storage::TableRecord full, store_->GetTable(table.cached->handle));
  if (full.rows != table.table->rows()) {
    return absl::DataLossError(
        absl::StrCat("table '", table.cached->handle, "' changed in the database"));
  }
  auto join = std::make_shared<std::vector<int32_t>>();
  join->reserve(full.rows);
  RETURN_IF_ERROR(CompanyTable::ReadKeys(full.payload, full.rows, JoinInto(slot, join.get())));
  {
    absl::MutexLock cache_lock(&table.cached->mu);
    // Two refreshes overlapping an import may finish out of order: keep the newer join.
    if (subjects > table.cached->joined_subjects) table.cached->SetJoin(std::move(join), subjects);
  }
  TrimTableCache(table.cached.get());
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const std::vector<int32_t>>> Vault::CurrentJoin(
    const ResolvedTable& table, const SubjectIndex& index) {
  std::shared_ptr<const std::vector<int32_t>> join;
  {
    absl::MutexLock cache_lock(&table.cached->mu);
    if (table.cached->joined_subjects != index.size()) return join;
    join = table.cached->subject_of_row;
  }
  if (static_cast<int64_t>(join->size()) != table.table->rows()) {
    return absl::DataLossError(
        absl::StrCat("table '", table.cached->handle, "' changed in the database"));
  }
  return join;
}

std::shared_ptr<Vault::CachedTable> Vault::CacheTable(
    storage::TableRecord record, std::shared_ptr<const CompanyTable> table,
    std::shared_ptr<const std::vector<int32_t>> join, int64_t joined_subjects) {
  const std::string handle = record.handle;
  auto cached = std::make_shared<CachedTable>(std::move(record), std::move(table));
  {
    absl::MutexLock lock(&cached->mu);
    cached->SetJoin(std::move(join), joined_subjects);
  }
  absl::MutexLock lock(&table_cache_mu_);
  table_cache_.emplace_front(handle, cached);
  TrimTableCacheLocked(cached.get());  // never the table just cached: its request needs it
  return cached;
}

void Vault::TrimTableCache(const CachedTable* keep) {
  absl::MutexLock lock(&table_cache_mu_);
  TrimTableCacheLocked(keep);
}

void Vault::TrimTableCacheLocked(const CachedTable* keep) {
  int64_t bytes = 0;
  for (const auto& [unused, t] : table_cache_) bytes += t->Bytes();
  const size_t most = static_cast<size_t>(std::max(options_.table_cache_size, 1));
  // Least recently used out first.
  for (auto it = table_cache_.end(); it != table_cache_.begin();) {
    if (table_cache_.size() <= most && bytes <= options_.table_cache_bytes) break;
    --it;
    if (it->second.get() == keep) continue;
    bytes -= it->second->Bytes();
    it = table_cache_.erase(it);
  }
  if (options_.metrics != nullptr) {
    options_.metrics->SetTableCache(static_cast<int64_t>(table_cache_.size()), bytes);
  }
}

void Vault::CachedTable::SetJoin(std::shared_ptr<const std::vector<int32_t>> join,
                                 int64_t subjects) {
  auto bytes_of = [](const std::shared_ptr<const std::vector<int32_t>>& j) -> int64_t {
    return j == nullptr ? 0 : static_cast<int64_t>(j->capacity() * sizeof(int32_t));
  };
  derived_bytes += bytes_of(join) - bytes_of(subject_of_row);
  subject_of_row = std::move(join);
  joined_subjects = subjects;
}

std::shared_ptr<const ColumnDictionary> Vault::Dictionary(const ResolvedTable& table,
                                                          int column) {
  CachedTable& cached = *table.cached;
  if (!cached.table->numeric(column)) return cached.table->categories(column);
  std::shared_ptr<const ColumnDictionary> dict;
  {
    absl::MutexLock lock(&cached.mu);
    auto& slot = cached.dictionaries[column];
    if (slot != nullptr) return slot;
    slot = std::make_shared<const ColumnDictionary>(
        NumericDictionary(cached.table->numbers(column)));
    cached.derived_bytes += slot->Bytes();
    dict = slot;
  }
  TrimTableCache(&cached);
  return dict;
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
                                       v1::UnmatchedKeys unmatched, int64_t subject_limit) {
  if (unmatched != v1::UNMATCHED_KEYS_REJECT && unmatched != v1::UNMATCHED_KEYS_DROP) {
    return absl::InvalidArgumentError(
        absl::StrCat("unmatched: unknown value ", static_cast<int>(unmatched),
                     "; use UNMATCHED_KEYS_REJECT (0) or UNMATCHED_KEYS_DROP (1)"));
  }
  JoinedRows out;
  ASSIGN_OR_RETURN(static_cast<GroupSpec&>(out),
                   ResolveGroups(table.dataset_attributes, table.dataset.name, attrs));
  ASSIGN_OR_RETURN(auto slot, LoadIndex(table.dataset));
  // The keys are looked up once per table, and again only after an import into the dataset
  // (read back from the store: the cache does not keep them). An import that lands between the
  // refresh and the lock below makes the join stale again: then once more.
  for (int attempt = 1;; ++attempt) {
    RETURN_IF_ERROR(RefreshJoin(table, *slot));
    absl::ReaderMutexLock lock(&slot->mu);
    const SubjectIndex& index = *slot->index;
    ASSIGN_OR_RETURN(const std::shared_ptr<const std::vector<int32_t>> subject_of_row,
                     CurrentJoin(table, index));
    if (subject_of_row == nullptr) {
      if (attempt < kJoinAttempts) continue;
      return absl::UnavailableError(
          absl::StrCat("dataset '", table.dataset.name, "' is being imported into; try again"));
    }
    const int64_t rows = table.table->rows();
    out.table_rows.reserve(rows);
    out.group.reserve(rows);
    out.subjects =
        subject_limit >= 0 ? std::min<int64_t>(subject_limit, index.size()) : index.size();
    for (int64_t i = 0; i < rows; ++i) {
      const int32_t subject = (*subject_of_row)[i];
      if (subject < 0 || subject >= out.subjects) {
        ++out.dropped;
        continue;
      }
      out.table_rows.push_back(i);
      out.group.push_back(out.GroupOf(index, subject));
    }
    break;
  }
  const int64_t rows = table.table->rows();
  if (out.dropped > 0 && unmatched != v1::UNMATCHED_KEYS_DROP) {
    return absl::InvalidArgumentError(
        absl::StrCat(out.dropped, " of ", rows,
                     " table rows have subject keys that are not in the vault; remove them or set "
                     "unmatched = UNMATCHED_KEYS_DROP"));
  }
  if (out.table_rows.empty()) {
    return absl::InvalidArgumentError("no table row has a subject key in the vault");
  }
  return out;
}

absl::StatusOr<Vault::ScoredRows> Vault::LoadScores(
    const Caller& caller, const std::string& handle, const std::string& score_column,
    const google::protobuf::RepeatedPtrField<std::string>& attributes, v1::UnmatchedKeys unmatched,
    const core::postprocess::ScoreGrid& grid, PreparedRelease* release) {
  ScoredRows out;
  ASSIGN_OR_RETURN(out.table, ResolveTable(caller, handle));
  release->dataset_id = out.table.dataset.id;
  release->dataset_name = out.table.dataset.name;
  ASSIGN_OR_RETURN(int column,
                   internal::ColumnIndex(*out.table.table, score_column, "score_column"));
  ASSIGN_OR_RETURN(out.joined, Join(out.table, attributes, unmatched));
  release->SizesFrom(out.joined);
  ASSIGN_OR_RETURN(out.scores, internal::NumericColumn(*out.table.table, column,
                                                       out.joined.table_rows, "score_column"));
  ASSIGN_OR_RETURN(out.counts, core::postprocess::HistogramCounts(out.scores, out.joined.group,
                                                   out.joined.num_groups, grid, &out.clipped));
  return out;
}

absl::StatusOr<Vault::OutcomeRows> Vault::LoadOutcomes(
    const Caller& caller, const std::string& handle, const std::string& prediction_column,
    const std::string& label_column,
    const google::protobuf::RepeatedPtrField<std::string>& attributes, v1::UnmatchedKeys unmatched,
    const char* two_groups_needed, PreparedRelease* release) {
  // After the replay (a stored release replays): the labels are the true outcomes, not the
  // predictions.
  if (label_column == prediction_column) {
    return absl::InvalidArgumentError(absl::StrCat(
        "label_column: the same column as prediction_column ('", core::Truncated(label_column),
        "'); give the true outcomes' column (nothing was charged)"));
  }
  OutcomeRows out;
  ASSIGN_OR_RETURN(out.table, ResolveTable(caller, handle));
  const ResolvedTable& table = out.table;
  release->dataset_id = table.dataset.id;
  release->dataset_name = table.dataset.name;
  ASSIGN_OR_RETURN(int pred_col,
                   internal::ColumnIndex(*table.table, prediction_column, "prediction_column"));
  ASSIGN_OR_RETURN(int label_col,
                   internal::ColumnIndex(*table.table, label_column, "label_column"));
  ASSIGN_OR_RETURN(out.joined, Join(table, attributes, unmatched));
  release->SizesFrom(out.joined);
  if (two_groups_needed != nullptr && out.joined.num_groups < 2) {
    return absl::InvalidArgumentError(two_groups_needed);
  }
  ASSIGN_OR_RETURN(auto pred, internal::BinaryColumn(*table.table, pred_col,
                                                     out.joined.table_rows, "prediction_column"));
  ASSIGN_OR_RETURN(auto label, internal::BinaryColumn(*table.table, label_col,
                                                      out.joined.table_rows, "label_column"));
  ASSIGN_OR_RETURN(out.counts, core::postprocess::CountEo(pred, label, out.joined.group,
                                                          out.joined.num_groups));
  return out;
}

}  // namespace fairvault::server
