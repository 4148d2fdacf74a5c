// Reading an artifact the CLI wrote (`artifact get --out`, `best-response --out`,
// `postprocess eo --out`, `--json`) back for local application: JSON, or an Artifact as binary
// protobuf. What `predict --artifact-file` and `apply-eo --artifact` read, and fuzz_artifact
// fuzzes.
#ifndef FAIRVAULT_CLIENT_APPLY_ARTIFACT_FILES_H_
#define FAIRVAULT_CLIENT_APPLY_ARTIFACT_FILES_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/apply/eo_apply.h"
#include "fairvault/v1/fairvault.pb.h"
#include "google/protobuf/message.h"

namespace fairvault::client {

// Parses JSON into `message`; unknown fields are an error. InvalidArgument naming `source`.
absl::Status FromJson(absl::string_view json, absl::string_view source,
                      google::protobuf::Message& message);

// The artifact's fair model; InvalidArgument naming `source` and the artifact for another kind.
absl::StatusOr<v1::FairModel> FairModelOf(const v1::Artifact& artifact, absl::string_view source);

// The fair model in `content`: an Artifact, a GetArtifact or BestResponse response or a bare
// FairModel as JSON, or an Artifact as binary protobuf. InvalidArgument naming `source` for
// anything else, or for an artifact of another kind. The model is not validated here:
// FairModelApplier::Create does that.
absl::StatusOr<v1::FairModel> ParseFairModelArtifact(absl::string_view content,
                                                     absl::string_view source);

// The equalized-odds post-processor in `json` (an Artifact, a Fit/GetArtifact response, or a
// bare EqualizedOddsPostProcessor; fitted on predictions or on scores), validated and ready to
// apply. InvalidArgument naming `source` otherwise.
absl::StatusOr<EqualizedOddsApplier> ParseEqualizedOddsArtifact(absl::string_view json,
                                                                absl::string_view source);

}  // namespace fairvault::client

#endif  // FAIRVAULT_CLIENT_APPLY_ARTIFACT_FILES_H_
