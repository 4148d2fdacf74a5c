// The HTTP endpoint that serves the operators' metrics (GET /metrics, Prometheus text format)
// on its own address, apart from the gRPC port: prometheus-cpp's pull exposer (civetweb).
// It has no authentication and no TLS: bind it to loopback or a private network.
#ifndef FAIRVAULT_SERVER_METRICS_ENDPOINT_H_
#define FAIRVAULT_SERVER_METRICS_ENDPOINT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace prometheus {
class Exposer;
class Registry;
}  // namespace prometheus

namespace fairvault::server {

class MetricsEndpoint {
 public:
  // Listens on `address`, "IPv4:PORT" (port 0: one the kernel picks), and serves `registry`
  // at /metrics until destroyed. InvalidArgument for another form of address, Unavailable if
  // it cannot be bound.
  static absl::StatusOr<std::unique_ptr<MetricsEndpoint>> Start(
      const std::string& address, std::shared_ptr<prometheus::Registry> registry);
  ~MetricsEndpoint();
  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;

  // The port it listens on (the real one when the address asked for 0).
  int port() const { return port_; }

 private:
  MetricsEndpoint(std::unique_ptr<prometheus::Exposer> exposer,
                  std::shared_ptr<prometheus::Registry> registry, int port);
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::shared_ptr<prometheus::Registry> registry_;  // the exposer holds only a weak pointer
  int port_;
};

}  // namespace fairvault::server

#endif  // FAIRVAULT_SERVER_METRICS_ENDPOINT_H_
