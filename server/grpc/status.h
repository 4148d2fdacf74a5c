// The one mapping from absl::Status to grpc::Status (codes and messages carry over as is).
#ifndef FAIRVAULT_SERVER_GRPC_STATUS_H_
#define FAIRVAULT_SERVER_GRPC_STATUS_H_

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace fairvault::server {

inline grpc::Status ToGrpcStatus(const absl::Status& status) {
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

}  // namespace fairvault::server

#endif  // FAIRVAULT_SERVER_GRPC_STATUS_H_
