// The transparency log's RPCs (issue 25): signed checkpoints of the ledger's Merkle tree,
// receipts (a row, its inclusion proof and a checkpoint that holds it) and consistency proofs
// between checkpoints. The tree is the store's (extended with every ledger row); here it is
// only read and signed. Nothing here reads a protected attribute: the rows are charges, grants
// and caps, and the proofs are hashes of them.
#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/transparency/merkle.h"
#include "core/transparency/note.h"
#include "core/util/status_macros.h"
#include "server/app/vault.h"
#include "server/app/vault_internal.h"
#include "server/storage/ledger_chain.h"

namespace fairvault::server {

namespace tlog = core::transparency;
using storage::Role;

namespace {

v1::Checkpoint CheckpointProto(const storage::CheckpointRecord& record) {
  v1::Checkpoint out;
  out.set_size(record.size);
  out.set_root_hash(record.root);
  out.set_note(record.note);
  out.set_created_unix(record.created_micros / 1'000'000);
  auto text = tlog::ParseNote(record.note);
  if (text.ok()) {
    auto parsed = tlog::ParseCheckpointText(text->text);
    if (parsed.ok()) out.set_origin(parsed->origin);
  }
  return out;
}

bool SameKey(const tlog::NoteVerifier& key, absl::string_view name, int64_t key_hash) {
  return key.name == name && int64_t{key.key_hash} == key_hash;
}

}  // namespace

absl::StatusOr<v1::Checkpoint> Vault::ServedCheckpoint(const storage::CheckpointRecord& record) {
  v1::Checkpoint out = CheckpointProto(record);
  ASSIGN_OR_RETURN(std::vector<storage::CosignatureRecord> cosignatures,
                   store_->ListCosignatures(record.size));
  for (const storage::CosignatureRecord& c : cosignatures) out.mutable_note()->append(c.line);
  out.set_cosignatures(static_cast<int>(cosignatures.size()));
  return out;
}

absl::StatusOr<storage::CheckpointRecord> Vault::WitnessedCheckpoint(int64_t min_size,
                                                                     bool newest) {
  const int quorum = options_.witness_quorum;
  if (quorum == 0) {
    return absl::FailedPreconditionError(
        "this vault has no witness quorum (its operator starts it with --witnesses FILE)");
  }
  // Stored cosignatures were checked when they came; a witness the operator no longer lists
  // stops counting. The candidates (enough cosignatures of any witness) come in pages, so
  // sizes cosigned only by former witnesses never hide a later qualifying one.
  constexpr int kPage = 64;
  // The sizes still to look at: [low, high], high 0: no bound (low >= 1, so a page ending at
  // size 1 ends the walk instead of reading as "no bound").
  int64_t low = std::max<int64_t>(min_size, 1), high = 0;
  while (true) {
    ASSIGN_OR_RETURN(std::vector<int64_t> sizes,
                     store_->CosignedSizes(low, high, quorum, newest, kPage));
    for (int64_t size : sizes) {
      ASSIGN_OR_RETURN(std::vector<storage::CosignatureRecord> cosignatures,
                       store_->ListCosignatures(size));
      int listed = 0;
      for (const tlog::NoteVerifier& w : options_.witnesses) {
        for (const storage::CosignatureRecord& c : cosignatures) {
          if (SameKey(w, c.witness, c.key_hash)) {
            ++listed;
            break;
          }
        }
      }
      if (listed >= quorum) return store_->GetCheckpoint(size);
    }
    if (static_cast<int>(sizes.size()) < kPage) break;
    if (newest) {
      high = sizes.back() - 1;
      if (high < low) break;
    } else {
      low = sizes.back() + 1;
    }
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "no checkpoint of ", min_size > 1 ? absl::StrCat("at least ", min_size, " rows ") : "",
      "has been cosigned by ", quorum, " of this vault's ", options_.witnesses.size(),
      " witnesses yet: retry after their next run (fairvault witness cosign)"));
}

absl::StatusOr<storage::CheckpointRecord> Vault::CheckpointNow() {
  if (!options_.log_signer.has_value()) {
    return absl::FailedPreconditionError(
        "this vault signs no checkpoints: its operator starts it with a log key "
        "(fairvault-server log-key; docs/operations.md, \"The transparency log\")");
  }
  absl::MutexLock lock(&checkpoint_mu_);
  int64_t size = 0;
  tlog::Hash root;
  RETURN_IF_ERROR(store_->ReadTree([&](int64_t n, tlog::NodeReader read) -> absl::Status {
    size = n;
    ASSIGN_OR_RETURN(root, tlog::RootHash(n, read));
    return absl::OkStatus();
  }));
  absl::StatusOr<storage::CheckpointRecord> latest = store_->GetCheckpoint(0);
  if (latest.ok() && latest->size >= size) return latest;
  if (!latest.ok() && !absl::IsNotFound(latest.status())) return latest.status();
  const tlog::Checkpoint checkpoint{options_.log_signer->name(), size, root, {}};
  ASSIGN_OR_RETURN(std::string note,
                   tlog::SignNote(tlog::CheckpointText(checkpoint), *options_.log_signer));
  storage::CheckpointRecord record{size, root, std::move(note), clock_->NowMicros()};
  absl::Status put = store_->PutCheckpoint(record);
  // Another replica signed this size first: its checkpoint is the one kept (same root).
  if (absl::IsAlreadyExists(put)) return store_->GetCheckpoint(size);
  RETURN_IF_ERROR(put);
  return record;
}

absl::StatusOr<bool> Vault::CheckpointIfDue(int64_t every_rows, int64_t every_micros) {
  if (!options_.log_signer.has_value()) return false;
  int64_t size = 0;
  RETURN_IF_ERROR(store_->ReadTree([&](int64_t n, tlog::NodeReader) {
    size = n;
    return absl::OkStatus();
  }));
  absl::StatusOr<storage::CheckpointRecord> latest = store_->GetCheckpoint(0);
  if (!latest.ok() && !absl::IsNotFound(latest.status())) return latest.status();
  const int64_t signed_size = latest.ok() ? latest->size : 0;
  const int64_t age = latest.ok() ? clock_->NowMicros() - latest->created_micros : every_micros;
  if (size <= signed_size || (size - signed_size < every_rows && age < every_micros)) {
    return false;
  }
  RETURN_IF_ERROR(CheckpointNow().status());
  return true;
}

absl::StatusOr<v1::GetCheckpointResponse> Vault::GetCheckpoint(
    const Caller& caller, const v1::GetCheckpointRequest& req) {
  (void)caller;  // every role may read checkpoints
  if (req.size() < 0) {
    return absl::InvalidArgumentError("size must be >= 0 (0: the whole ledger as it stands)");
  }
  if (req.witnessed() && req.size() != 0) {
    return absl::InvalidArgumentError(
        "witnessed asks for the latest witnessed checkpoint: leave size 0");
  }
  ASSIGN_OR_RETURN(storage::CheckpointRecord record,
                   req.witnessed()     ? WitnessedCheckpoint(1, /*newest=*/true)
                   : req.size() == 0 ? CheckpointNow()
                                     : store_->GetCheckpoint(req.size()));
  v1::GetCheckpointResponse resp;
  ASSIGN_OR_RETURN(*resp.mutable_checkpoint(), ServedCheckpoint(record));
  if (options_.log_signer.has_value()) {
    resp.set_verifier_key(options_.log_signer->verifier().Encoded());
  }
  return resp;
}

absl::StatusOr<v1::GetReceiptResponse> Vault::GetReceipt(const Caller& caller,
                                                        const v1::GetReceiptRequest& req) {
  if ((req.seq() != 0) == !req.idempotency_key().empty()) {
    return absl::InvalidArgumentError(
        "set exactly one of seq (a ledger row) and idempotency_key (your release's key)");
  }
  if (req.seq() < 0) return absl::InvalidArgumentError("seq must be >= 1");
  int64_t seq = req.seq();
  if (!req.idempotency_key().empty()) {
    if (caller.role != Role::kCompany) {
      return absl::InvalidArgumentError(
          "idempotency_key names a company's own release: as an auditor, ask by seq");
    }
    absl::StatusOr<storage::StoredResponse> stored =
        store_->GetStoredResponse(caller.account_id, req.idempotency_key());
    if (absl::IsNotFound(stored.status())) {
      return absl::NotFoundError(absl::StrCat("idempotency_key '", req.idempotency_key(),
                                              "' charged nothing of yours"));
    }
    RETURN_IF_ERROR(stored.status());
    seq = stored->ledger_seq;
  }
  absl::StatusOr<storage::LedgerRow> row = store_->GetLedgerRow(seq);
  // A company sees only its own rows: another's row and a missing one read alike.
  if (absl::IsNotFound(row.status()) ||
      (row.ok() && caller.role == Role::kCompany && row->account != caller.name)) {
    return absl::NotFoundError(
        absl::StrCat("seq ", seq, ": no ledger row of yours has this number"));
  }
  RETURN_IF_ERROR(row.status());
  // The smallest checkpoint that holds the row; a row newer than every checkpoint gets one now.
  // With witnesses, the smallest that holds it and that they have cosigned.
  absl::StatusOr<storage::CheckpointRecord> checkpoint =
      options_.witness_quorum > 0 ? WitnessedCheckpoint(seq, /*newest=*/false)
                                  : store_->CheckpointCovering(seq);
  if (options_.witness_quorum == 0 && absl::IsNotFound(checkpoint.status())) {
    checkpoint = CheckpointNow();
  }
  RETURN_IF_ERROR(checkpoint.status());

  v1::GetReceiptResponse resp;
  v1::Receipt* receipt = resp.mutable_receipt();
  internal::FillLedgerEntry(*row, receipt->mutable_entry());
  receipt->set_canonical(storage::LedgerRowEncoding(*row, row->account_id, row->dataset_id));
  receipt->set_leaf_index(seq - 1);
  const int64_t size = checkpoint->size;
  RETURN_IF_ERROR(store_->ReadTree([&](int64_t, tlog::NodeReader read) -> absl::Status {
    ASSIGN_OR_RETURN(std::vector<tlog::Hash> proof, tlog::InclusionProof(seq - 1, size, read));
    for (tlog::Hash& h : proof) receipt->add_inclusion_proof(std::move(h));
    return absl::OkStatus();
  }));
  ASSIGN_OR_RETURN(*receipt->mutable_checkpoint(), ServedCheckpoint(*checkpoint));
  return resp;
}

absl::StatusOr<v1::GetConsistencyProofResponse> Vault::GetConsistencyProof(
    const Caller& caller, const v1::GetConsistencyProofRequest& req) {
  (void)caller;
  if (req.from_size() < 1 || req.to_size() < 0 ||
      (req.to_size() != 0 && req.to_size() < req.from_size())) {
    return absl::InvalidArgumentError(
        "from_size must be >= 1 and to_size >= from_size (to_size 0: the latest)");
  }
  ASSIGN_OR_RETURN(storage::CheckpointRecord to, req.to_size() == 0
                                                     ? CheckpointNow()
                                                     : store_->GetCheckpoint(req.to_size()));
  if (req.from_size() > to.size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "from_size ", req.from_size(), " is beyond the checkpoint of ", to.size, " rows"));
  }
  // The proof comes from the tree, whatever checkpoints are stored: an auditor's checkpoint of
  // any size is answered (a vault that lost or dropped its own copy cannot decline).
  v1::GetConsistencyProofResponse resp;
  RETURN_IF_ERROR(store_->ReadTree([&](int64_t, tlog::NodeReader read) -> absl::Status {
    ASSIGN_OR_RETURN(std::vector<tlog::Hash> proof,
                     tlog::ConsistencyProof(req.from_size(), to.size, read));
    for (tlog::Hash& h : proof) resp.add_proof(std::move(h));
    return absl::OkStatus();
  }));
  absl::StatusOr<storage::CheckpointRecord> from = store_->GetCheckpoint(req.from_size());
  if (from.ok()) {
    ASSIGN_OR_RETURN(*resp.mutable_from(), ServedCheckpoint(*from));
  }
  ASSIGN_OR_RETURN(*resp.mutable_to(), ServedCheckpoint(to));
  return resp;
}

absl::StatusOr<v1::AddCosignatureResponse> Vault::AddCosignature(
    const Caller& caller, const v1::AddCosignatureRequest& req) {
  (void)caller;  // the witness keys are the authority here, not the account
  if (options_.witnesses.empty()) {
    return absl::FailedPreconditionError(
        "this vault accepts no cosignatures: its operator lists the witnesses' keys with "
        "serve --witnesses FILE");
  }
  // A checkpoint, the vault's line and a line per witness: a few hundred bytes per line.
  constexpr size_t kMaxNoteBytes = 64 * 1024;
  if (req.note().size() > kMaxNoteBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "note: ", req.note().size(), " bytes; a cosigned checkpoint is at most ", kMaxNoteBytes));
  }
  absl::StatusOr<tlog::SplitNote> note = tlog::ParseNote(req.note());
  if (!note.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("note: ", note.status().message()));
  }
  absl::StatusOr<tlog::Checkpoint> checkpoint = tlog::ParseCheckpointText(note->text);
  if (!checkpoint.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("note: ", checkpoint.status().message()));
  }
  if (checkpoint->size < 1) {
    return absl::InvalidArgumentError("note: a checkpoint of the empty ledger is not cosigned");
  }
  absl::StatusOr<storage::CheckpointRecord> stored = store_->GetCheckpoint(checkpoint->size);
  if (absl::IsNotFound(stored.status())) {
    return absl::NotFoundError(absl::StrCat("note: no checkpoint of ", checkpoint->size,
                                            " rows is stored; cosign one GetCheckpoint served"));
  }
  RETURN_IF_ERROR(stored.status());
  ASSIGN_OR_RETURN(tlog::SplitNote ours, tlog::ParseNote(stored->note));
  if (ours.text != note->text) {
    return absl::InvalidArgumentError(absl::StrCat(
        "note: its checkpoint of ", checkpoint->size,
        " rows is not this vault's (another origin or root): nothing stored"));
  }
  // Every listed witness's line is checked before any is stored; one line per witness.
  std::vector<storage::CosignatureRecord> verified;
  for (const tlog::SignatureLine& line : note->signatures) {
    const tlog::NoteVerifier* witness = nullptr;
    for (const tlog::NoteVerifier& w : options_.witnesses) {
      if (SameKey(w, line.name, line.key_hash)) witness = &w;
    }
    if (witness == nullptr) continue;  // the vault's own line, or a witness not listed
    for (const storage::CosignatureRecord& earlier : verified) {
      if (earlier.witness == line.name) {
        return absl::InvalidArgumentError(absl::StrCat(
            "note: witness '", line.name, "' has more than one line: nothing stored"));
      }
    }
    if (!witness->Verify(note->text, line.signature)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "note: the cosignature of witness '", line.name, "' does not verify: nothing stored"));
    }
    verified.push_back({checkpoint->size, line.name, int64_t{line.key_hash},
                        tlog::SignatureLineText(line), clock_->NowMicros()});
  }
  v1::AddCosignatureResponse resp;
  for (const storage::CosignatureRecord& c : verified) {
    RETURN_IF_ERROR(store_->PutCosignature(c));
    resp.add_witnesses(c.witness);
  }
  if (resp.witnesses().empty()) {
    std::vector<std::string> names;
    for (const tlog::NoteVerifier& w : options_.witnesses) names.push_back(w.name);
    return absl::InvalidArgumentError(absl::StrCat(
        "note: no cosignature line by a witness this vault lists (", absl::StrJoin(names, ", "),
        "); cosign with one of their keys"));
  }
  ASSIGN_OR_RETURN(*resp.mutable_checkpoint(), ServedCheckpoint(*stored));
  return resp;
}

}  // namespace fairvault::server
