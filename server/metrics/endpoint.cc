// The metrics endpoint on prometheus-cpp's pull library (Debian's prometheus-cpp-dev), which
// embeds civetweb. Only /metrics is served; any other path is 404.
#include "server/metrics/endpoint.h"

#include <arpa/inet.h>

#include <exception>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "prometheus/exposer.h"
#include "prometheus/registry.h"

namespace fairvault::server {
namespace {

absl::Status ValidateAddress(const std::string& address) {
  const auto bad = [&address] {
    return absl::InvalidArgumentError(absl::StrCat(
        "--metrics-listen must be IPv4:PORT, e.g. 127.0.0.1:9464 (got '", address, "')"));
  };
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return bad();
  in_addr ip;
  int port = -1;
  if (inet_pton(AF_INET, address.substr(0, colon).c_str(), &ip) != 1 ||
      !absl::SimpleAtoi(address.substr(colon + 1), &port) || port < 0 || port > 65535) {
    return bad();
  }
  return absl::OkStatus();
}

}  // namespace

MetricsEndpoint::MetricsEndpoint(std::unique_ptr<prometheus::Exposer> exposer,
                                 std::shared_ptr<prometheus::Registry> registry, int port)
    : exposer_(std::move(exposer)), registry_(std::move(registry)), port_(port) {}

MetricsEndpoint::~MetricsEndpoint() = default;

absl::StatusOr<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(
    const std::string& address, std::shared_ptr<prometheus::Registry> registry) {
  if (absl::Status valid = ValidateAddress(address); !valid.ok()) return valid;
  std::unique_ptr<prometheus::Exposer> exposer;
  try {
    // Two threads: a scrape is cheap, and a stuck client must not block the next scrape.
    exposer = std::make_unique<prometheus::Exposer>(address, /*num_threads=*/2);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen for metrics on ", address, ": ", e.what()));
  }
  exposer->RegisterCollectable(registry);
  const std::vector<int> ports = exposer->GetListeningPorts();
  if (ports.size() != 1 || ports[0] <= 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen for metrics on ", address));
  }
  return std::unique_ptr<MetricsEndpoint>(
      new MetricsEndpoint(std::move(exposer), std::move(registry), ports[0]));
}

}  // namespace fairvault::server
