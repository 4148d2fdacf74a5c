// The transparency log's RPCs (issue 25): signed checkpoints of the ledger's Merkle tree,
// receipts (a row, its inclusion proof and a checkpoint that holds it) and consistency proofs
// between checkpoints. The tree is the store's (extended with every ledger row); here it is
// only read and signed. Nothing here reads a protected attribute: the rows are charges, grants
// and caps, and the proofs are hashes of them.
#include <utility>

#include "absl/strings/str_cat.h"
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

}  // namespace

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
  ASSIGN_OR_RETURN(storage::CheckpointRecord record,
                   req.size() == 0 ? CheckpointNow() : store_->GetCheckpoint(req.size()));
  v1::GetCheckpointResponse resp;
  *resp.mutable_checkpoint() = CheckpointProto(record);
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
  absl::StatusOr<storage::CheckpointRecord> checkpoint = store_->CheckpointCovering(seq);
  if (absl::IsNotFound(checkpoint.status())) checkpoint = CheckpointNow();
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
  *receipt->mutable_checkpoint() = CheckpointProto(*checkpoint);
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
  if (from.ok()) *resp.mutable_from() = CheckpointProto(*from);
  *resp.mutable_to() = CheckpointProto(to);
  return resp;
}

}  // namespace fairvault::server
