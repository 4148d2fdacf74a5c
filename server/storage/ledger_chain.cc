// Canonical row encoding and chaining for the ledger.
#include "server/storage/ledger_chain.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/util/status_macros.h"
#include "server/util/crypto.h"

namespace fairvault::server::storage {

std::string LedgerRowEncoding(const LedgerRow& row, int64_t account_id, int64_t dataset_id) {
  // Unit-separated fields; %.17g makes doubles round-trip exactly. The actor (schema version 6)
  // is appended only when set, so rows written before it verify unchanged; a row that has one
  // cannot lose it, since its hash would no longer match.
  std::string canonical = absl::StrJoin(
      {absl::StrCat(row.seq), absl::StrCat(row.time_micros), row.kind, absl::StrCat(account_id),
       row.account, absl::StrCat(dataset_id), row.dataset, row.request_kind, row.idempotency_key,
       absl::StrFormat("%.17g", row.epsilon), absl::StrFormat("%.17g", row.delta), row.mechanism,
       row.pure_micro ? absl::StrCat(*row.pure_micro) : std::string("-"),
       absl::StrJoin(row.rdp_nano, ","), row.prev_hash},
      "\x1f");
  if (!row.actor.empty()) absl::StrAppend(&canonical, "\x1f", "actor=", row.actor);
  return canonical;
}

std::string LedgerRowHash(const LedgerRow& row, int64_t account_id, int64_t dataset_id) {
  return HexEncode(Sha256(LedgerRowEncoding(row, account_id, dataset_id)));
}

absl::StatusOr<std::vector<core::transparency::StoredNode>> TreeNodesForRow(
    int64_t seq, const std::string& row_hash, core::transparency::NodeReader read) {
  if (row_hash.size() != 64 ||
      !std::all_of(row_hash.begin(), row_hash.end(), [](char c) { return absl::ascii_isxdigit(c); })) {
    return absl::DataLossError(absl::StrCat("ledger row ", seq, " has a malformed hash"));
  }
  return core::transparency::NodesForAppend(
      seq - 1, core::transparency::LeafHash(absl::HexStringToBytes(row_hash)), read);
}

absl::StatusOr<std::vector<core::transparency::StoredNode>> TreeFrontier::NodesForRow(
    int64_t seq, const std::string& prev_hash, const std::string& row_hash,
    core::transparency::NodeReader read) {
  absl::MutexLock lock(&mu_);
  const int64_t size = seq - 1;  // the tree's before the row joins it
  if (size != size_ || prev_hash != head_hash_) nodes_.clear();  // another head: nothing known
  ASSIGN_OR_RETURN(
      std::vector<core::transparency::StoredNode> nodes,
      TreeNodesForRow(seq, row_hash,
                      [&](int level, int64_t index) -> absl::StatusOr<core::transparency::Hash> {
                        auto it = nodes_.find(level);
                        if (it != nodes_.end() && index == (size >> level) - 1) return it->second;
                        return read(level, index);
                      }));
  // The highest new node is the edge's node at its level and replaces every level below it.
  const core::transparency::StoredNode& top = nodes.back();
  for (int level = 0; level < top.level; ++level) nodes_.erase(level);
  nodes_[top.level] = top.hash;
  size_ = seq;
  head_hash_ = row_hash;
  return nodes;
}

std::string EncodeInt64s(const std::vector<int64_t>& values) {
  std::string out(values.size() * 8, '\0');
  for (size_t i = 0; i < values.size(); ++i) {
    uint64_t v = static_cast<uint64_t>(values[i]);
    for (int b = 0; b < 8; ++b) out[i * 8 + b] = static_cast<char>((v >> (8 * b)) & 0xff);
  }
  return out;
}

absl::StatusOr<std::vector<int64_t>> DecodeInt64s(const std::string& bytes) {
  if (bytes.size() % 8 != 0) {
    return absl::DataLossError(absl::StrCat("int64 blob of ", bytes.size(), " bytes"));
  }
  std::vector<int64_t> out(bytes.size() / 8);
  for (size_t i = 0; i < out.size(); ++i) {
    uint64_t v = 0;
    for (int b = 7; b >= 0; --b) v = (v << 8) | static_cast<unsigned char>(bytes[i * 8 + b]);
    out[i] = static_cast<int64_t>(v);
  }
  return out;
}

}  // namespace fairvault::server::storage
