// The authenticated caller of a use-case.
#ifndef FAIRVAULT_SERVER_APP_CALLER_H_
#define FAIRVAULT_SERVER_APP_CALLER_H_

#include <cstdint>
#include <string>

#include "server/storage/store.h"

namespace fairvault::server {

struct Caller {
  int64_t account_id = 0;
  std::string name;
  storage::Role role = storage::Role::kCompany;
};

}  // namespace fairvault::server

#endif  // FAIRVAULT_SERVER_APP_CALLER_H_
