// Training jobs as the caller sees them (issue 9 §4). Skeleton; filled in next.
#include "server/app/vault.h"

namespace fairvault::server {

absl::StatusOr<v1::GetJobResponse> Vault::GetJob(const Caller&, const v1::GetJobRequest&) {
  return absl::UnimplementedError("jobs are not built yet");
}
absl::StatusOr<v1::ListJobsResponse> Vault::ListJobs(const Caller&, const v1::ListJobsRequest&) {
  return absl::UnimplementedError("jobs are not built yet");
}
absl::StatusOr<v1::CancelJobResponse> Vault::CancelJob(const Caller&,
                                                       const v1::CancelJobRequest&) {
  return absl::UnimplementedError("jobs are not built yet");
}
absl::Status Vault::StartJobs() { return absl::UnimplementedError("jobs are not built yet"); }

}  // namespace fairvault::server
