// Offline verification of what the vault's transparency log hands out (issue 25): receipts,
// signed checkpoints and consistency proofs, with nothing but the vault's verifier key. The
// vault is not trusted here: every hash is recomputed.
#ifndef FAIRVAULT_CLIENT_LIB_RECEIPTS_H_
#define FAIRVAULT_CLIENT_LIB_RECEIPTS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/transparency/note.h"
#include "fairvault/v1/fairvault.pb.h"

namespace fairvault::client {

// The checkpoint a signed note states, if `verifier` signed it.
absl::StatusOr<core::transparency::Checkpoint> OpenCheckpoint(
    const std::string& note, const core::transparency::NoteVerifier& verifier);

// Checks a ledger row against its canonical encoding (docs/operations.md, "Ledger verification
// and the head hash"): the encoding hashes to the entry's hash and says what the entry says.
// InvalidArgument naming the row and the first field that differs.
absl::Status VerifyRowEncoding(const v1::LedgerEntry& entry, const std::string& canonical);

// Checks a receipt: the row's canonical encoding hashes to its hash and says what the entry
// says; the row is leaf seq - 1 of the checkpoint's tree (the inclusion proof); the checkpoint
// is signed by `verifier` and states the tree's size and root. Returns the checkpoint.
// InvalidArgument naming the first thing that failed.
absl::StatusOr<core::transparency::Checkpoint> VerifyReceipt(
    const v1::Receipt& receipt, const core::transparency::NoteVerifier& verifier);

// Checks that at least `quorum` of `witnesses` (cosignature/v1 keys) cosigned the checkpoint
// note; returns the names of those that did. InvalidArgument naming what is missing or which
// cosignature does not verify.
absl::StatusOr<std::vector<std::string>> VerifyCosignatures(
    const std::string& note, const std::vector<core::transparency::NoteVerifier>& witnesses,
    int quorum);

// Witness keys from a text: keys separated by newlines or commas ('#' starts a comment line).
absl::StatusOr<std::vector<core::transparency::NoteVerifier>> ParseWitnessKeys(
    absl::string_view text);

// Checks that the log of checkpoint `to` extends that of `from` (both signed by `verifier`; or
// `from` by `from_verifier` when given: the vault's key before a rotation).
absl::Status VerifyConsistency(const std::string& from_note, const std::string& to_note,
                               const google::protobuf::RepeatedPtrField<std::string>& proof,
                               const core::transparency::NoteVerifier& verifier,
                               const core::transparency::NoteVerifier* from_verifier = nullptr);

}  // namespace fairvault::client

#endif  // FAIRVAULT_CLIENT_LIB_RECEIPTS_H_
