// The ledger's hash chain: each row's hash covers its fields and its predecessor's hash, so
// an edited or deleted row breaks verification.
#ifndef FAIRVAULT_SERVER_STORAGE_LEDGER_CHAIN_H_
#define FAIRVAULT_SERVER_STORAGE_LEDGER_CHAIN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/storage/store.h"

namespace fairvault::server::storage {

// prev_hash of the first row.
inline constexpr char kGenesisHash[] =
    "0000000000000000000000000000000000000000000000000000000000000000";

// The canonical encoding of every field of `row` except `hash`, including the ids the row
// refers to (docs/operations.md, "The ledger's hash chain").
std::string LedgerRowEncoding(const LedgerRow& row, int64_t account_id, int64_t dataset_id);
// Hex SHA-256 of LedgerRowEncoding.
std::string LedgerRowHash(const LedgerRow& row, int64_t account_id, int64_t dataset_id);

// The nodes to store when the row with seq `seq` and hex hash `row_hash` joins the Merkle
// tree (as leaf seq - 1, whose entry is the row hash's 32 bytes): the same on every backend.
absl::StatusOr<std::vector<core::transparency::StoredNode>> TreeNodesForRow(
    int64_t seq, const std::string& row_hash, core::transparency::NodeReader read);

// Little-endian int64 vector <-> bytes, for RDP curves in blobs.
std::string EncodeInt64s(const std::vector<int64_t>& values);
absl::StatusOr<std::vector<int64_t>> DecodeInt64s(const std::string& bytes);

}  // namespace fairvault::server::storage

#endif  // FAIRVAULT_SERVER_STORAGE_LEDGER_CHAIN_H_
