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

// Hex SHA-256 over the canonical encoding of every field of `row` except `hash`, including
// the ids the row refers to.
std::string LedgerRowHash(const LedgerRow& row, int64_t account_id, int64_t dataset_id);

// Little-endian int64 vector <-> bytes, for RDP curves in blobs.
std::string EncodeInt64s(const std::vector<int64_t>& values);
absl::StatusOr<std::vector<int64_t>> DecodeInt64s(const std::string& bytes);

}  // namespace fairvault::server::storage

#endif  // FAIRVAULT_SERVER_STORAGE_LEDGER_CHAIN_H_
