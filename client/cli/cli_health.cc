// `fairvault health`: asks the vault's standard gRPC health service (grpc.health.v1.Health)
// whether it is serving, for probes: container health checks, load balancers, scripts.
#include <iostream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/cli/cli_common.h"
#include "core/util/status_macros.h"

namespace fairvault::client::cli {
namespace {

using ServingStatus = grpc::health::v1::HealthCheckResponse::ServingStatus;

// A probe must answer within seconds, not the 600 s the other calls may take.
constexpr double kHealthDeadlineSeconds = 5;

absl::Status Health(Context& ctx) {
  const std::string service = ctx.flags().Get("service");
  ASSIGN_OR_RETURN(Client * client, ctx.keyless_client(kHealthDeadlineSeconds));
  const std::string what = service.empty() ? "the server" : absl::StrCat("service '", service, "'");
  absl::StatusOr<ServingStatus> status = client->CheckHealth(service);
  if (status.status().code() == absl::StatusCode::kNotFound) {
    const std::string known = absl::StrJoin(
        {v1::RegulatorService::service_full_name(), v1::CompanyService::service_full_name(),
         v1::AuditorService::service_full_name()},
        ", ");
    return WithMessage(
        status.status(),
        absl::StrCat(client->target(), " has no ", what, " (server: ", status.status().message(),
                     "); the vault answers for \"\" (the whole server) and ", known));
  }
  if (!status.ok()) return status.status();
  grpc::health::v1::HealthCheckResponse response;
  response.set_status(*status);
  const std::string name = grpc::health::v1::HealthCheckResponse::ServingStatus_Name(*status);
  if (ctx.json()) {
    PrintJson(response);
  } else {
    std::cout << name << "\n";
  }
  if (*status != grpc::health::v1::HealthCheckResponse::SERVING) {
    // The vault turns every service NOT_SERVING when a shutdown starts.
    return absl::UnavailableError(absl::StrCat(
        what, " at ", client->target(), " is ", name,
        *status == grpc::health::v1::HealthCheckResponse::NOT_SERVING ? " (shutting down?)" : ""));
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<Command> HealthCommands() {
  return {
      {"health",
       "is the vault serving? (gRPC health check; no API key needed)",
       "Calls grpc.health.v1.Health/Check and prints the status (SERVING, NOT_SERVING, ...).\n"
       "Exit status 0 only when SERVING; 1 when the status is anything else, the service name\n"
       "is unknown (NOT_FOUND), the server cannot be reached or does not answer within the\n"
       "deadline (UNAVAILABLE, DEADLINE_EXCEEDED; default 5 s here) or TLS fails. For a TLS\n"
       "server pass --tls-ca (and --tls-server-name when the address is not a name in its\n"
       "certificate). Made for container health checks:\n"
       "  fairvault health --server 127.0.0.1:50051 --tls-ca /run/secrets/tls_ca",
       {{"service", "NAME",
         "service to ask about: \"\" (default) for the whole server, or a full name such as "
         "fairvault.v1.CompanyService"}},
       true,
       Health,
       /*binary_exit=*/true},
  };
}

}  // namespace fairvault::client::cli
