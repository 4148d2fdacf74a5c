// Counts every gRPC call the server finishes, by full method name and status code, with its
// duration (the fairvault_grpc_* metrics): one server interceptor, so that no handler, nor the
// health and reflection services, needs its own counting.
#ifndef FAIRVAULT_SERVER_GRPC_METRICS_INTERCEPTOR_H_
#define FAIRVAULT_SERVER_GRPC_METRICS_INTERCEPTOR_H_

#include <string>
#include <vector>

#include "grpcpp/support/server_interceptor.h"
#include "server/metrics/metrics.h"

namespace fairvault::server {

// The full names ("/fairvault.v1.CompanyService/NoisyCounts") of every method the server
// serves: the vault's three services, gRPC health and server reflection. The `method` label
// takes only these values (and "unknown" for a call to any other name, which a client chooses
// freely and must never become a label).
std::vector<std::string> ServedMethodNames();

class MetricsInterceptorFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit MetricsInterceptorFactory(Metrics* metrics) : metrics_(metrics) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override;

 private:
  Metrics* metrics_;
};

}  // namespace fairvault::server

#endif  // FAIRVAULT_SERVER_GRPC_METRICS_INTERCEPTOR_H_
