// The regulator's use-cases: accounts and keys, datasets, attribute import, grants, caps,
// ledger verification.
#include <algorithm>
#include <optional>
#include <set>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/accounting/accountant.h"
#include "core/util/status_macros.h"
#include "core/util/truncate.h"
#include "core/util/validate.h"
#include "server/app/vault.h"
#include "server/app/vault_internal.h"
#include "server/util/crypto.h"

namespace fairvault::server {

using internal::RequireRole;
using storage::Role;

absl::Status VaultOptions::Validate() const {
  if (max_rows < 1) return absl::InvalidArgumentError("max_rows must be >= 1");
  if (table_cache_size < 0) return absl::InvalidArgumentError("table_cache_size must be >= 0");
  if (table_cache_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("table_cache_bytes must be >= 0 (got ", table_cache_bytes, ")"));
  }
  if (job_workers < 1 || job_workers > 256) {
    return absl::InvalidArgumentError(
        absl::StrCat("job_workers must be 1..256 (got ", job_workers, ")"));
  }
  if (job_lease_micros < 1'000'000 || job_lease_micros > 3'600'000'000) {
    return absl::InvalidArgumentError(
        absl::StrCat("job_lease_seconds must be 1..3600 (got ", job_lease_micros / 1e6, ")"));
  }
  if (max_pending_jobs < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_pending_jobs must be >= 1 (got ", max_pending_jobs, ")"));
  }
  if (max_job_cells < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_job_cells must be >= 1 (got ", max_job_cells, ")"));
  }
  if (witness_quorum < 0 || witness_quorum > static_cast<int>(witnesses.size())) {
    return absl::InvalidArgumentError(absl::StrCat("witness_quorum must be 0..",
                                                   witnesses.size(), " (the witnesses listed; got ",
                                                   witness_quorum, ")"));
  }
  for (size_t i = 0; i < witnesses.size(); ++i) {
    const core::transparency::NoteVerifier& w = witnesses[i];
    for (size_t j = 0; j < i; ++j) {
      if (witnesses[j].name == w.name || witnesses[j].public_key == w.public_key) {
        return absl::InvalidArgumentError(absl::StrCat(
            "witness '", w.name, "' is listed twice (by name or key): a quorum counts each "
            "witness once"));
      }
    }
    if (w.type != core::transparency::KeyType::kCosignatureV1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "witness '", w.name, "' has a note key (type 0x01), not a cosignature/v1 key "
          "(type 0x04, made by fairvault witness key)"));
    }
  }
  if (max_job_rounds < 1 || max_job_rounds > 100'000) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_job_rounds must be 1..100000 (got ", max_job_rounds, ")"));
  }
  return absl::OkStatus();
}

Vault::Vault(storage::Store* store, const Clock* clock, absl::BitGenRef gen, VaultOptions options)
    : store_(store),
      clock_(clock),
      gen_(gen),
      options_(options),
      finish_gate_(options_.max_concurrent_finishes),
      jobs_(std::make_unique<JobRunner>(
          store_, clock_, options_.job_workers,
          [this](const storage::JobRecord& job, JobControl& control) {
            return RunJob(job, control);
          },
          options_.job_lease_micros)) {}

// ---- accounts --------------------------------------------------------------------------------

// Keys look like "fv_<account id>_<64 hex chars>"; the vault stores SHA-256(salt || secret).
// The secret has 256 bits of entropy, so a fast hash is enough (no password stretching).
absl::StatusOr<v1::CreateAccountResponse> Vault::CreateAccountUnchecked(const std::string& name,
                                                                        Role role) {
  RETURN_IF_ERROR(internal::ValidateName(name, "name"));
  const std::string secret = HexEncode(RandomBytes(32));
  storage::AccountRecord record;
  record.name = name;
  record.role = role;
  record.key_salt = RandomBytes(16);
  record.key_hash = Sha256(record.key_salt + secret);
  record.created_micros = clock_->NowMicros();
  ASSIGN_OR_RETURN(record, store_->CreateAccount(record));
  v1::CreateAccountResponse resp;
  resp.mutable_account()->set_name(record.name);
  resp.mutable_account()->set_role(internal::ToProtoRole(role));
  resp.mutable_account()->set_created_unix(record.created_micros / 1'000'000);
  resp.set_api_key(absl::StrCat("fv_", record.id, "_", secret));
  return resp;
}

absl::StatusOr<Caller> Vault::Authenticate(const std::string& api_key) {
  const absl::Status bad = absl::UnauthenticatedError(
      "invalid API key; send 'authorization: Bearer fv_<id>_<secret>' with a key issued by the "
      "regulator");
  std::vector<std::string> parts = absl::StrSplit(api_key, absl::MaxSplits('_', 2));
  int64_t id = 0;
  // The id as the vault writes it (no sign, no leading zeros): one text per key, so that
  // variants of a key cannot each take a place in the cache below.
  if (parts.size() != 3 || parts[0] != "fv" || !absl::SimpleAtoi(parts[1], &id) ||
      absl::StrCat(id) != parts[1] || parts[2].size() != 64) {
    return bad;
  }
  // Remembered by the whole key's digest, and only once the key has checked out: a key that
  // has not is always checked against the store, so how fast it is refused does not tell
  // whether the account it names was used in the last second.
  const std::string digest = Sha256(api_key);
  const int64_t now = clock_->NowMicros();
  {
    absl::MutexLock lock(&accounts_mu_);
    auto it = accounts_.find(digest);
    if (it != accounts_.end() && now >= it->second.read_micros &&
        now - it->second.read_micros < kAccountReuseMicros) {
      const storage::AccountRecord& account = it->second.record;
      return Caller{account.id, account.name, account.role};
    }
  }
  auto account = store_->GetAccountById(id);
  if (absl::IsNotFound(account.status())) return bad;
  RETURN_IF_ERROR(account.status());
  if (!ConstantTimeEquals(Sha256(account->key_salt + parts[2]), account->key_hash)) return bad;
  absl::MutexLock lock(&accounts_mu_);
  // Entries past their second are dropped whenever the map has doubled since the last sweep:
  // it holds about the keys used in the last second, at a constant cost per insert.
  if (accounts_.size() >= accounts_sweep_at_) {
    absl::erase_if(accounts_, [now](const auto& entry) {
      return now < entry.second.read_micros ||
             now - entry.second.read_micros >= kAccountReuseMicros;
    });
    accounts_sweep_at_ = std::max<size_t>(64, 2 * accounts_.size());
  }
  accounts_.insert_or_assign(digest, KnownAccount{*account, now});
  return Caller{account->id, account->name, account->role};
}

absl::StatusOr<v1::CreateAccountResponse> Vault::CreateAccount(
    const Caller& caller, const v1::CreateAccountRequest& req) {
  RETURN_IF_ERROR(RequireRole(caller, {Role::kRegulator}));
  switch (req.role()) {
    case v1::ROLE_REGULATOR:
      return CreateAccountUnchecked(req.name(), Role::kRegulator);
    case v1::ROLE_COMPANY:
      return CreateAccountUnchecked(req.name(), Role::kCompany);
    case v1::ROLE_AUDITOR:
      return CreateAccountUnchecked(req.name(), Role::kAuditor);
    default:
      return absl::InvalidArgumentError(
          "role must be ROLE_COMPANY, ROLE_AUDITOR or ROLE_REGULATOR");
  }
}

absl::StatusOr<v1::ListAccountsResponse> Vault::ListAccounts(const Caller& caller) {
  RETURN_IF_ERROR(RequireRole(caller, {Role::kRegulator, Role::kAuditor}));
  ASSIGN_OR_RETURN(auto accounts, store_->ListAccounts());
  v1::ListAccountsResponse resp;
  for (const auto& a : accounts) {
    v1::Account* out = resp.add_accounts();
    out->set_name(a.name);
    out->set_role(internal::ToProtoRole(a.role));
    out->set_created_unix(a.created_micros / 1'000'000);
  }
  return resp;
}

// ---- datasets --------------------------------------------------------------------------------

absl::StatusOr<std::vector<v1::Attribute>> Vault::DatasetAttributes(
    const storage::DatasetRecord& dataset) const {
  storage::DatasetAttributes attrs;
  if (!attrs.ParseFromString(dataset.attributes)) {
    return absl::DataLossError(absl::StrCat("dataset '", dataset.name, "' has corrupt attributes"));
  }
  return std::vector<v1::Attribute>(attrs.attributes().begin(), attrs.attributes().end());
}

absl::StatusOr<v1::CreateDatasetResponse> Vault::CreateDataset(
    const Caller& caller, const v1::CreateDatasetRequest& req) {
  RETURN_IF_ERROR(RequireRole(caller, {Role::kRegulator}));
  RETURN_IF_ERROR(internal::ValidateName(req.name(), "name"));
  if (req.attributes_size() == 0 || req.attributes_size() > 8) {
    return absl::InvalidArgumentError("attributes must list 1 to 8 protected attributes");
  }
  std::set<std::string> names;
  for (const v1::Attribute& a : req.attributes()) {
    RETURN_IF_ERROR(internal::ValidateName(a.name(), "attributes.name"));
    if (!names.insert(a.name()).second) {
      return absl::InvalidArgumentError(absl::StrCat("attribute '", a.name(), "' is repeated"));
    }
    if (a.categories_size() < 2 || a.categories_size() > 256) {
      return absl::InvalidArgumentError(absl::StrCat("attribute '", a.name(),
                                                     "' must have 2 to 256 categories (got ",
                                                     a.categories_size(), ")"));
    }
    std::set<std::string> cats;
    for (const std::string& c : a.categories()) {
      if (c.empty() || c.size() > 64 || c.find('|') != std::string::npos) {
        return absl::InvalidArgumentError(absl::StrCat("category labels of '", a.name(),
                                                       "' must be 1-64 characters without '|'"));
      }
      if (!cats.insert(c).second) {
        return absl::InvalidArgumentError(
            absl::StrCat("category '", c, "' of attribute '", a.name(), "' is repeated"));
      }
    }
  }
  storage::DatasetAttributes attrs;
  *attrs.mutable_attributes() = req.attributes();
  storage::DatasetRecord record;
  record.name = req.name();
  record.attributes = attrs.SerializeAsString();
  record.created_micros = clock_->NowMicros();
  ASSIGN_OR_RETURN(record, store_->CreateDataset(record));
  v1::CreateDatasetResponse resp;
  v1::Dataset* d = resp.mutable_dataset();
  d->set_name(record.name);
  *d->mutable_attributes() = req.attributes();
  d->set_created_unix(record.created_micros / 1'000'000);
  return resp;
}

absl::StatusOr<v1::ListDatasetsResponse> Vault::ListDatasets(const Caller& caller) {
  ASSIGN_OR_RETURN(auto datasets, store_->ListDatasets());
  v1::ListDatasetsResponse resp;
  for (const auto& record : datasets) {
    v1::Dataset* d = resp.add_datasets();
    d->set_name(record.name);
    ASSIGN_OR_RETURN(auto attrs, DatasetAttributes(record));
    for (auto& a : attrs) *d->add_attributes() = std::move(a);
    d->set_subject_count(record.subject_count);
    d->set_created_unix(record.created_micros / 1'000'000);
    if (record.cap_micro && caller.role != Role::kCompany) {
      ASSIGN_OR_RETURN(auto spend, store_->GetDatasetSpend(record.id));
      *d->mutable_cap() =
          internal::MakeBudget(record.name, "", *record.cap_micro, record.cap_delta, spend);
    }
  }
  return resp;
}

absl::StatusOr<v1::DeleteDatasetResponse> Vault::DeleteDataset(
    const Caller& caller, const v1::DeleteDatasetRequest& req) {
  RETURN_IF_ERROR(RequireRole(caller, {Role::kRegulator}));
  if (!req.confirm()) {
    return absl::InvalidArgumentError(
        "confirm must be true: deleting removes the dataset's subjects, tables and artifacts");
  }
  ASSIGN_OR_RETURN(auto dataset, store_->GetDataset(req.name()));
  absl::MutexLock import_lock(&import_mu_);
  RETURN_IF_ERROR(store_->DeleteDataset(dataset.id));
  absl::MutexLock lock(&index_mu_);
  indexes_.erase(dataset.id);
  return v1::DeleteDatasetResponse();
}

// ---- subjects --------------------------------------------------------------------------------

absl::StatusOr<std::shared_ptr<Vault::IndexSlot>> Vault::LoadIndex(
    const storage::DatasetRecord& dataset) {
  std::shared_ptr<IndexSlot> slot;
  {
    absl::MutexLock lock(&index_mu_);
    auto& entry = indexes_[dataset.id];
    if (entry == nullptr) entry = std::make_shared<IndexSlot>();
    slot = entry;
  }
  absl::MutexLock lock(&slot->mu);
  // Loaded and current: another vault process on the same store (a replica) may have imported
  // subjects since, which `dataset`, read from the store, counts. Batches are read in import
  // order, so a reloaded index keeps every subject's position.
  if (slot->loaded && slot->index->size() >= dataset.subject_count) return slot;
  ASSIGN_OR_RETURN(auto attrs, DatasetAttributes(dataset));
  auto index = std::make_unique<SubjectIndex>(static_cast<int>(attrs.size()));
  index->Reserve(dataset.subject_count);
  RETURN_IF_ERROR(store_->ForEachSubjectBatch(dataset.id, [&](const std::string& payload) {
    storage::SubjectBatch batch;
    if (!batch.ParseFromString(payload)) return absl::DataLossError("corrupt subject batch");
    if (index->Append(batch.keys(), batch.codes()).has_value()) {
      return absl::DataLossError("stored subject batches repeat a subject key");
    }
    return absl::OkStatus();
  }));
  slot->index = std::move(index);
  slot->loaded = true;
  return slot;
}

absl::StatusOr<v1::ImportAttributesResponse> Vault::ImportAttributes(
    const Caller& caller, const v1::ImportHeader& header,
    const ChunkSource<v1::SubjectRows>& stream) {
  RETURN_IF_ERROR(RequireRole(caller, {Role::kRegulator}));
  RETURN_IF_ERROR(internal::ValidateToken(header.batch_id(), "header.batch_id"));
  ASSIGN_OR_RETURN(auto dataset, store_->GetDataset(header.dataset()));
  ASSIGN_OR_RETURN(auto attrs, DatasetAttributes(dataset));
  const int num_attrs = static_cast<int>(attrs.size());

  // Map the header's column order to the dataset's attribute order.
  if (header.attributes_size() != num_attrs) {
    return absl::InvalidArgumentError(absl::StrCat(
        "header.attributes must name each of the dataset's ", num_attrs, " attributes once"));
  }
  std::vector<int> column_of_attr(num_attrs, -1);
  std::vector<absl::flat_hash_map<std::string, uint32_t>> code_of(num_attrs);
  for (int k = 0; k < num_attrs; ++k) {
    for (int c = 0; c < attrs[k].categories_size(); ++c) code_of[k][attrs[k].categories(c)] = c;
  }
  for (int col = 0; col < num_attrs; ++col) {
    auto it = std::find_if(attrs.begin(), attrs.end(), [&](const v1::Attribute& a) {
      return a.name() == header.attributes(col);
    });
    if (it == attrs.end() || column_of_attr[it - attrs.begin()] != -1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "header.attributes: '", header.attributes(col),
          "' is unknown or repeated; the dataset's attributes are ",
          absl::StrJoin(attrs, ", ",
                        [](std::string* out, const v1::Attribute& a) { out->append(a.name()); })));
    }
    column_of_attr[it - attrs.begin()] = col;
  }

  // Read and validate the whole batch before storing any of it.
  storage::SubjectBatch batch;
  v1::SubjectRows chunk;
  int64_t row = 0;
  while (true) {
    ASSIGN_OR_RETURN(const bool more, stream.next(&chunk));
    if (!more) break;
    const int64_t n = chunk.subject_keys_size();
    if (chunk.categories_size() != n * num_attrs) {
      return absl::InvalidArgumentError(absl::StrCat("rows chunk has ", n, " subject_keys but ",
                                                     chunk.categories_size(), " categories; send ",
                                                     num_attrs, " categories per key"));
    }
    for (int64_t i = 0; i < n; ++i) {
      ++row;
      if (row > options_.max_rows) {
        return absl::InvalidArgumentError(
            absl::StrCat("a batch may hold at most ", options_.max_rows, " rows; split it"));
      }
      const std::string& key = chunk.subject_keys(i);
      if (!internal::IsToken(key)) {
        return internal::ValidateToken(key, absl::StrCat("subject key at row ", row).c_str());
      }
      for (int k = 0; k < num_attrs; ++k) {
        const std::string& label = chunk.categories(i * num_attrs + column_of_attr[k]);
        auto code = code_of[k].find(label);
        if (code == code_of[k].end()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "row ", row, ": '", core::Truncated(label), "' is not a category of attribute '",
              attrs[k].name(), "' (allowed: ", absl::StrJoin(attrs[k].categories(), ", "), ")"));
        }
        batch.add_codes(code->second);
      }
    }
    internal::MoveStrings(chunk.mutable_subject_keys(), batch.mutable_keys());
  }
  if (row == 0) return absl::InvalidArgumentError("the import stream has no rows");

  // The blob and its digest are computed on a second thread while this one checks the batch
  // id and adds the keys to the index (both only read the batch).
  std::string payload, digest;
  std::thread fingerprint([&batch, &payload, &digest] {
    payload = batch.SerializeAsString();
    digest = HexEncode(Sha256(payload));
  });
  internal::JoinOnExit join_fingerprint(fingerprint);
  v1::ImportAttributesResponse resp;

  absl::MutexLock import_lock(&import_mu_);
  auto existing = store_->GetBatchDigest(dataset.id, header.batch_id());
  if (existing.ok()) {
    fingerprint.join();
    if (*existing != digest) {
      return absl::FailedPreconditionError(
          absl::StrCat("batch_id '", header.batch_id(),
                       "' was already imported with different content; use a new batch_id"));
    }
    ASSIGN_OR_RETURN(auto now, store_->GetDataset(header.dataset()));
    resp.set_replayed(true);
    resp.set_subject_count(now.subject_count);
    return resp;
  }
  if (!absl::IsNotFound(existing.status())) return existing.status();

  ASSIGN_OR_RETURN(auto slot, LoadIndex(dataset));
  absl::MutexLock index_lock(&slot->mu);
  const int64_t subjects_before = slot->index->size();
  // One pass over the keys finds repeats within the batch and subjects imported before.
  if (auto repeat = slot->index->Append(batch.keys(), batch.codes())) {
    if (repeat->earlier_position >= 0) {
      return absl::InvalidArgumentError(absl::StrCat("subject key at row ", repeat->position + 1,
                                                     " repeats the key of row ",
                                                     repeat->earlier_position + 1));
    }
    return absl::InvalidArgumentError(
        absl::StrCat("subject key at row ", repeat->position + 1, " is already in dataset '",
                     dataset.name, "' (imported by an earlier batch); remove it from this batch"));
  }
  fingerprint.join();
  // A caller who gave up must not find half a batch, nor a whole one it was told failed.
  absl::Status stored = stream.live();
  if (stored.ok()) {
    // Stored only if no other process imported since the index was read: the keys were
    // checked against every subject.
    stored = store_->PutSubjectBatch(dataset.id, header.batch_id(), digest, subjects_before, row,
                                     payload);
  }
  if (!stored.ok()) {
    slot->index->RemoveLast(batch.keys());
    if (absl::IsAborted(stored)) slot->loaded = false;  // reread with the other's import
    return stored;
  }
  resp.set_rows_imported(row);
  resp.set_subject_count(slot->index->size());
  return resp;
}

// ---- grants, caps, ledger --------------------------------------------------------------------

absl::StatusOr<v1::GrantBudgetResponse> Vault::GrantBudget(const Caller& caller,
                                                           const v1::GrantBudgetRequest& req) {
  RETURN_IF_ERROR(RequireRole(caller, {Role::kRegulator}));
  ASSIGN_OR_RETURN(int64_t micro, core::accounting::EpsilonToMicro(req.epsilon()));
  RETURN_IF_ERROR(internal::ValidateDelta(req.delta()));
  auto company = store_->GetAccountByName(req.company());
  if (absl::IsNotFound(company.status())) {
    return absl::NotFoundError(
        absl::StrCat("unknown company '", core::Truncated(req.company()), "'"));
  }
  RETURN_IF_ERROR(company.status());
  if (company->role != Role::kCompany) {
    return absl::InvalidArgumentError(absl::StrCat(
        "company: account '", core::Truncated(req.company()), "' is not a company account"));
  }
  ASSIGN_OR_RETURN(auto dataset, store_->GetDataset(req.dataset()));
  storage::GrantRecord grant{company->id, dataset.id, micro, req.delta()};
  RETURN_IF_ERROR(
      store_->SetGrant(grant, company->name, dataset.name, caller.name, clock_->NowMicros())
          .status());
  v1::GrantBudgetResponse resp;
  ASSIGN_OR_RETURN(*resp.mutable_budget(), BudgetView(company->id, company->name, dataset));
  return resp;
}

absl::StatusOr<v1::SetDatasetCapResponse> Vault::SetDatasetCap(
    const Caller& caller, const v1::SetDatasetCapRequest& req) {
  RETURN_IF_ERROR(RequireRole(caller, {Role::kRegulator}));
  ASSIGN_OR_RETURN(int64_t micro, core::accounting::EpsilonToMicro(req.epsilon()));
  RETURN_IF_ERROR(internal::ValidateDelta(req.delta()));
  ASSIGN_OR_RETURN(auto dataset, store_->GetDataset(req.dataset()));
  RETURN_IF_ERROR(
      store_->SetCap(dataset.id, dataset.name, micro, req.delta(), caller.name, clock_->NowMicros()));
  ASSIGN_OR_RETURN(auto spend, store_->GetDatasetSpend(dataset.id));
  v1::SetDatasetCapResponse resp;
  *resp.mutable_cap() = internal::MakeBudget(dataset.name, "", micro, req.delta(), spend);
  return resp;
}

absl::StatusOr<v1::VerifyLedgerResponse> Vault::VerifyLedger(const Caller& caller) {
  RETURN_IF_ERROR(RequireRole(caller, {Role::kRegulator, Role::kAuditor}));
  ASSIGN_OR_RETURN(auto v, store_->VerifyLedger());
  v1::VerifyLedgerResponse resp;
  resp.set_ok(v.ok);
  resp.set_rows_checked(v.rows_checked);
  resp.set_first_bad_seq(v.first_bad_seq);
  resp.set_message(v.ok ? "ledger intact" : v.message);
  resp.set_head_hash(v.head_hash);
  return resp;
}

}  // namespace fairvault::server
