// The authenticated caller of a use-case.
#ifndef FAIRVAULT_SERVER_APP_CALLER_H_
#define FAIRVAULT_SERVER_APP_CALLER_H_

#include <cstdint>
#include <optional>
#include <string>

#include "fairvault/v1/fairvault.pb.h"
#include "server/app/finish_gate.h"
#include "server/storage/store.h"

namespace fairvault::server {

// What a spending use-case tells its gRPC handler besides the response (not stored with it).
struct CallOutputs {
  // The response (or the failure) is a stored release returned again: its ledger seq. Sent as
  // trailing metadata `fairvault-replayed-ledger-seq`.
  std::optional<int64_t> replayed_ledger_seq;
  // Non-null: price the release instead of charging it (PreviewRelease). The charge path fills
  // it, sets `priced` and stops the use-case before anything is charged or stored.
  v1::PreviewReleaseResponse* preview = nullptr;
  bool priced = false;
};

struct Caller {
  int64_t account_id = 0;
  std::string name;
  storage::Role role = storage::Role::kCompany;
  // Per-call outputs of a spending use-case; null where nobody reads them.
  CallOutputs* outputs = nullptr;
  // The RPC's deadline and cancellation: a call that waits for other calls' work without
  // having charged anything (a retry waiting for a finish, FinishGate) stops waiting by them,
  // so that a client gone does not keep a server thread.
  WaitLimit wait_limit = {};

  bool Previewing() const { return outputs != nullptr && outputs->preview != nullptr; }
};

}  // namespace fairvault::server

#endif  // FAIRVAULT_SERVER_APP_CALLER_H_
