#include "client/apply/artifact_files.h"

#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"

namespace fairvault::client {

absl::Status FromJson(absl::string_view json, absl::string_view source,
                      google::protobuf::Message& message) {
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  auto status = google::protobuf::util::JsonStringToMessage(std::string(json), &message, options);
  if (!status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": not a ", message.GetDescriptor()->full_name(), " in JSON: ", status.ToString()));
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::FairModel> FairModelOf(const v1::Artifact& artifact, absl::string_view source) {
  if (artifact.has_fair_model()) return artifact.fair_model();
  return absl::InvalidArgumentError(absl::StrCat(
      source, ": artifact '", artifact.id(),
      "' is not a fair model (an attribute-aware post-processor: use `fairvault decide`, or "
      "`fairvault apply-eo` where the groups are known)"));
}

absl::StatusOr<v1::FairModel> ParseFairModelArtifact(absl::string_view content,
                                                     absl::string_view source) {
  if (absl::StartsWith(absl::StripLeadingAsciiWhitespace(content), "{")) {
    v1::Artifact artifact;
    if (FromJson(content, source, artifact).ok()) return FairModelOf(artifact, source);
    v1::BestResponseResponse response;  // a superset of GetArtifactResponse
    if (FromJson(content, source, response).ok()) return FairModelOf(response.artifact(), source);
    v1::FairModel model;
    absl::Status status = FromJson(content, source, model);
    if (!status.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          source,
          ": not a fair-model artifact in JSON (expected what `fairvault artifact get --out` "
          "writes): ",
          status.message()));
    }
    return model;
  }
  v1::Artifact artifact;
  if (!artifact.ParseFromString(std::string(content))) {
    return absl::InvalidArgumentError(
        absl::StrCat(source,
                     ": neither JSON nor a binary fairvault.v1.Artifact (expected what `fairvault "
                     "artifact get --out` writes)"));
  }
  return FairModelOf(artifact, source);
}

absl::StatusOr<EqualizedOddsApplier> ParseEqualizedOddsArtifact(absl::string_view json,
                                                                absl::string_view source) {
  v1::Artifact artifact;
  if (FromJson(json, source, artifact).ok()) {
    if (artifact.has_equalized_odds()) {
      return EqualizedOddsApplier::Create(artifact.equalized_odds());
    }
    if (artifact.has_equalized_odds_scores()) {
      return EqualizedOddsApplier::Create(artifact.equalized_odds_scores());
    }
  }
  v1::FitEqualizedOddsResponse response;  // a superset of GetArtifactResponse
  if (FromJson(json, source, response).ok() && response.artifact().has_equalized_odds()) {
    return EqualizedOddsApplier::Create(response.artifact().equalized_odds());
  }
  v1::FitEqualizedOddsScoresResponse scores_response;
  if (FromJson(json, source, scores_response).ok() &&
      scores_response.artifact().has_equalized_odds_scores()) {
    return EqualizedOddsApplier::Create(scores_response.artifact().equalized_odds_scores());
  }
  v1::EqualizedOddsPostProcessor processor;
  absl::Status status = FromJson(json, source, processor);
  if (!status.ok() || processor.groups().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source,
                     ": not an equalized-odds artifact (expected the JSON written by "
                     "`fairvault postprocess eo --out`, `postprocess eo-scores --out` or "
                     "`fairvault artifact get --out`)"));
  }
  return EqualizedOddsApplier::Create(processor);
}

}  // namespace fairvault::client
