// The ledger's hash chain: each row's hash covers its fields and its predecessor's hash, so
// an edited or deleted row breaks verification.
#ifndef FAIRVAULT_SERVER_STORAGE_LEDGER_CHAIN_H_
#define FAIRVAULT_SERVER_STORAGE_LEDGER_CHAIN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/storage/store.h"

namespace fairvault::server::storage {

// prev_hash of the first row.
inline constexpr char kGenesisHash[] =
    "0000000000000000000000000000000000000000000000000000000000000000";

// The canonical encoding of every field of `row` except `hash`, including the ids the row
// refers to (docs/operations.md, "Ledger verification and the head hash").
std::string LedgerRowEncoding(const LedgerRow& row, int64_t account_id, int64_t dataset_id);
// Hex SHA-256 of LedgerRowEncoding.
std::string LedgerRowHash(const LedgerRow& row, int64_t account_id, int64_t dataset_id);

// The nodes to store when the row with seq `seq` and hex hash `row_hash` joins the Merkle
// tree (as leaf seq - 1, whose entry is the row hash's 32 bytes): the same on every backend.
absl::StatusOr<std::vector<core::transparency::StoredNode>> TreeNodesForRow(
    int64_t seq, const std::string& row_hash, core::transparency::NodeReader read);

// The right edge of the ledger's Merkle tree (the complete subtree of each set bit of its
// size) after the last row this process added, so that the next row's nodes need no read of
// the subtrees it completes. It is used only when the row's predecessor (seq - 1 and
// prev_hash, read under the ledger head's lock) is the row it was left at: a row's hash chains
// every row before it, so the same head means the same tree, whichever transaction or process
// wrote it and whether or not the one that left it here committed. Otherwise the nodes are
// read through `read`, as without it.
class TreeFrontier {
 public:
  // TreeNodesForRow(seq, row_hash, read), reading through `read` only the nodes not known here.
  absl::StatusOr<std::vector<core::transparency::StoredNode>> NodesForRow(
      int64_t seq, const std::string& prev_hash, const std::string& row_hash,
      core::transparency::NodeReader read) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  absl::Mutex mu_;
  int64_t size_ ABSL_GUARDED_BY(mu_) = 0;
  std::string head_hash_ ABSL_GUARDED_BY(mu_) = kGenesisHash;
  // Level -> the hash of node (level, (size_ >> level) - 1), for the levels known.
  absl::flat_hash_map<int, core::transparency::Hash> nodes_ ABSL_GUARDED_BY(mu_);
};

// Little-endian int64 vector <-> bytes, for RDP curves in blobs.
std::string EncodeInt64s(const std::vector<int64_t>& values);
absl::StatusOr<std::vector<int64_t>> DecodeInt64s(const std::string& bytes);

}  // namespace fairvault::server::storage

#endif  // FAIRVAULT_SERVER_STORAGE_LEDGER_CHAIN_H_
