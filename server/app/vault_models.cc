// Fair models without the attribute at decision time (issue 9): private best responses and
// the managed learners. Skeleton; the use-cases follow.
#include "server/app/vault.h"

namespace fairvault::server {

absl::StatusOr<v1::BestResponseResponse> Vault::BestResponse(const Caller&,
                                                             const v1::BestResponseRequest&) {
  return absl::UnimplementedError("BestResponse is not built yet");
}

absl::StatusOr<v1::FitFairModelResponse> Vault::FitFairModel(const Caller&,
                                                             const v1::FitFairModelRequest&) {
  return absl::UnimplementedError("FitFairModel is not built yet");
}

absl::StatusOr<storage::ArtifactRecord> Vault::RunJob(const storage::JobRecord&, JobControl&) {
  return absl::UnimplementedError("training jobs are not built yet");
}

}  // namespace fairvault::server
