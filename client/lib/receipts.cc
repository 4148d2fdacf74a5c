// Receipts, checkpoints and consistency proofs checked offline (see receipts.h).
#include "client/lib/receipts.h"

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/transparency/merkle.h"
#include "core/util/status_macros.h"
#include "core/util/truncate.h"

namespace fairvault::client {
namespace tlog = core::transparency;

namespace {

absl::Status Bad(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("receipt: ", what));
}

// The canonical encoding's fields against the entry's.
absl::Status CheckCanonical(const v1::LedgerEntry& e, const std::string& canonical) {
  std::vector<std::string> f = absl::StrSplit(canonical, '\x1f');
  if (f.size() != 15 && f.size() != 16) {
    return absl::InvalidArgumentError(absl::StrCat(
        "row ", e.seq(), ": its canonical encoding has ", f.size(), " fields, not 15 or 16"));
  }
  const std::string pure =
      e.has_pure_epsilon_micro() ? absl::StrCat(e.pure_epsilon_micro()) : std::string("-");
  const std::pair<const char*, std::pair<std::string, std::string>> checks[] = {
      {"seq", {f[0], absl::StrCat(e.seq())}},
      {"time", {f[1], absl::StrCat(e.time_unix_micros())}},
      {"kind", {f[2], e.kind()}},
      {"account", {f[4], e.account()}},
      {"dataset", {f[6], e.dataset()}},
      {"request kind", {f[7], e.request_kind()}},
      {"idempotency key", {f[8], e.idempotency_key()}},
      {"epsilon", {f[9], absl::StrFormat("%.17g", e.epsilon())}},
      {"delta", {f[10], absl::StrFormat("%.17g", e.delta())}},
      {"mechanism", {f[11], e.mechanism()}},
      {"pure epsilon", {f[12], pure}},
      {"Renyi curve", {f[13], absl::StrJoin(e.rdp_nano(), ",")}},
      {"previous hash", {f[14], e.prev_hash()}},
      {"actor", {f.size() == 16 ? f[15] : std::string(),
                 e.actor().empty() ? std::string() : absl::StrCat("actor=", e.actor())}},
  };
  for (const auto& [name, pair] : checks) {
    if (pair.first != pair.second) {
      return absl::InvalidArgumentError(
          absl::StrCat("row ", e.seq(), ": its ", name, " is '", core::Truncated(pair.second),
                       "' but its hashed encoding says '", core::Truncated(pair.first), "'"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status VerifyRowEncoding(const v1::LedgerEntry& e, const std::string& canonical) {
  if (absl::BytesToHexString(tlog::Sha256(canonical)) != e.hash()) {
    return absl::InvalidArgumentError(
        absl::StrCat("row ", e.seq(), ": its encoding does not hash to its hash"));
  }
  return CheckCanonical(e, canonical);
}

absl::StatusOr<tlog::Checkpoint> OpenCheckpoint(const std::string& note,
                                                const tlog::NoteVerifier& verifier) {
  ASSIGN_OR_RETURN(std::string text, tlog::OpenNote(note, verifier));
  ASSIGN_OR_RETURN(tlog::Checkpoint checkpoint, tlog::ParseCheckpointText(text));
  if (checkpoint.origin != verifier.name) {
    return absl::InvalidArgumentError(absl::StrCat("the checkpoint is of log '",
                                                   checkpoint.origin, "', the key of '",
                                                   verifier.name, "'"));
  }
  return checkpoint;
}

absl::StatusOr<tlog::Checkpoint> VerifyReceipt(const v1::Receipt& receipt,
                                               const tlog::NoteVerifier& verifier) {
  const v1::LedgerEntry& e = receipt.entry();
  if (e.seq() < 1) return Bad("a ledger row's seq is >= 1");
  if (absl::Status row = VerifyRowEncoding(e, receipt.canonical()); !row.ok()) {
    return Bad(row.message());
  }
  if (receipt.leaf_index() != e.seq() - 1) {
    return Bad(absl::StrCat("row ", e.seq(), " must be leaf ", e.seq() - 1, ", not ",
                            receipt.leaf_index()));
  }
  absl::StatusOr<tlog::Checkpoint> checkpoint =
      OpenCheckpoint(receipt.checkpoint().note(), verifier);
  if (!checkpoint.ok()) return Bad(checkpoint.status().message());
  const std::vector<tlog::Hash> proof(receipt.inclusion_proof().begin(),
                                      receipt.inclusion_proof().end());
  absl::Status included =
      tlog::VerifyInclusion(tlog::LeafHash(absl::HexStringToBytes(e.hash())), receipt.leaf_index(),
                            checkpoint->size, proof, checkpoint->root);
  if (!included.ok()) {
    return Bad(absl::StrCat("row ", e.seq(), " in the signed tree of ", checkpoint->size,
                            " rows: ", included.message()));
  }
  return checkpoint;
}

absl::Status VerifyConsistency(const std::string& from_note, const std::string& to_note,
                               const google::protobuf::RepeatedPtrField<std::string>& proof,
                               const tlog::NoteVerifier& verifier,
                               const tlog::NoteVerifier* from_verifier) {
  ASSIGN_OR_RETURN(tlog::Checkpoint from,
                   OpenCheckpoint(from_note, from_verifier ? *from_verifier : verifier));
  ASSIGN_OR_RETURN(tlog::Checkpoint to, OpenCheckpoint(to_note, verifier));
  return tlog::VerifyConsistency(from.size, to.size,
                                 std::vector<tlog::Hash>(proof.begin(), proof.end()), from.root,
                                 to.root);
}

absl::StatusOr<std::vector<std::string>> VerifyCosignatures(
    const std::string& note, const std::vector<tlog::NoteVerifier>& witnesses, int quorum) {
  for (size_t i = 0; i < witnesses.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (witnesses[j].name == witnesses[i].name ||
          witnesses[j].public_key == witnesses[i].public_key) {
        return absl::InvalidArgumentError(absl::StrCat(
            "witness '", witnesses[i].name, "' is given twice: each counts once"));
      }
    }
  }
  ASSIGN_OR_RETURN(tlog::SplitNote split, tlog::ParseNote(note));
  std::vector<std::string> cosigned, missing;
  for (const tlog::NoteVerifier& w : witnesses) {
    const tlog::SignatureLine* line = nullptr;
    for (const tlog::SignatureLine& s : split.signatures) {
      if (s.name == w.name && s.key_hash == w.key_hash) {
        line = &s;
        break;
      }
    }
    if (line == nullptr) {
      missing.push_back(w.name);
    } else if (!w.Verify(split.text, line->signature)) {
      return absl::InvalidArgumentError(
          absl::StrCat("the cosignature of witness '", w.name, "' does not verify"));
    } else {
      cosigned.push_back(w.name);
    }
  }
  if (static_cast<int>(cosigned.size()) < quorum) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the checkpoint is cosigned by ", cosigned.size(), " of the ", witnesses.size(),
        " witnesses given, fewer than the quorum of ", quorum, " (missing: ",
        absl::StrJoin(missing, ", "), ")"));
  }
  return cosigned;
}

absl::StatusOr<std::vector<tlog::NoteVerifier>> ParseWitnessKeys(absl::string_view text) {
  std::vector<tlog::NoteVerifier> out;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    for (absl::string_view key : absl::StrSplit(line, ',', absl::SkipWhitespace())) {
      ASSIGN_OR_RETURN(tlog::NoteVerifier w, tlog::NoteVerifier::Parse(key));
      if (w.type != tlog::KeyType::kCosignatureV1) {
        return absl::InvalidArgumentError(absl::StrCat(
            "witness key '", w.name, "' is a note key (type 0x01), not a cosignature/v1 key"));
      }
      out.push_back(std::move(w));
    }
  }
  if (out.empty()) return absl::InvalidArgumentError("no witness key given");
  return out;
}

}  // namespace fairvault::client
