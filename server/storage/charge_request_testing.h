// Test-only: the NoisyCounts charge request the store tests make (store_test_fixture.h, the
// SQLite backend's wal_test and busy_test).
#ifndef FAIRVAULT_SERVER_STORAGE_CHARGE_REQUEST_TESTING_H_
#define FAIRVAULT_SERVER_STORAGE_CHARGE_REQUEST_TESTING_H_

#include <cstdint>
#include <string>

#include "core/accounting/accountant.h"
#include "server/storage/store.h"

namespace fairvault::server::storage {

// A pure-epsilon NoisyCounts charge of `micro` micro-epsilon by `account` on `dataset`.
inline ChargeRequest NoisyCountsCharge(const AccountRecord& account, const DatasetRecord& dataset,
                                       const std::string& key, int64_t micro,
                                       const std::string& digest = "digest") {
  ChargeRequest r;
  r.account_id = account.id;
  r.account_name = account.name;
  r.dataset_id = dataset.id;
  r.dataset_name = dataset.name;
  r.request_kind = "NoisyCounts";
  r.idempotency_key = key;
  r.params_digest = digest;
  r.cost = core::accounting::LaplaceCost(micro);
  r.epsilon = core::accounting::MicroToEpsilon(micro);
  r.mechanism = "discrete_laplace";
  return r;
}

}  // namespace fairvault::server::storage

#endif  // FAIRVAULT_SERVER_STORAGE_CHARGE_REQUEST_TESTING_H_
