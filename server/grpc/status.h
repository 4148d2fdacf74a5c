// The one mapping from absl::Status to grpc::Status (codes and messages carry over as is).
#ifndef FAIRVAULT_SERVER_GRPC_STATUS_H_
#define FAIRVAULT_SERVER_GRPC_STATUS_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "core/util/truncate.h"
#include "grpcpp/support/status.h"

namespace fairvault::server {

// Longest status message sent, in bytes: the message travels in the trailers, and one past the
// peer's metadata limit would reach the client as RESOURCE_EXHAUSTED (the budget code) instead
// of the real error. Use-cases already shorten the user values they echo (core::Truncated).
inline constexpr size_t kMaxStatusMessageBytes = 2048;

inline grpc::Status ToGrpcStatus(const absl::Status& status) {
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      core::Truncated(status.message(), kMaxStatusMessageBytes));
}

}  // namespace fairvault::server

#endif  // FAIRVAULT_SERVER_GRPC_STATUS_H_
