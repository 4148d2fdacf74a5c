// Local application of equalized-odds artifacts; see eo_apply.h.
#include "client/apply/eo_apply.h"

#include <cmath>
#include <utility>

#include "absl/random/distributions.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace fairvault::client {
namespace {

absl::Status CheckProbability(double p, absl::string_view field, absl::string_view group) {
  if (!(p >= 0.0 && p <= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("artifact group '", group, "': ", field, " must be in [0, 1] (got ", p, ")"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<EqualizedOddsApplier> EqualizedOddsApplier::Create(
    const v1::EqualizedOddsPostProcessor& processor) {
  if (processor.groups().empty()) {
    return absl::InvalidArgumentError("artifact has no groups");
  }
  EqualizedOddsApplier applier;
  for (const v1::EqualizedOddsGroup& g : processor.groups()) {
    absl::Status status =
        CheckProbability(g.p_flip_to_1_given_0(), "p_flip_to_1_given_0", g.group());
    if (status.ok()) {
      status = CheckProbability(g.p_keep_1_given_1(), "p_keep_1_given_1", g.group());
    }
    if (!status.ok()) return status;
    Probabilities p{g.p_flip_to_1_given_0(), g.p_keep_1_given_1()};
    if (!applier.by_group_.emplace(g.group(), p).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("artifact lists group '", g.group(), "' twice"));
    }
    applier.groups_.push_back(g.group());
  }
  return applier;
}

absl::StatusOr<EqualizedOddsApplier> EqualizedOddsApplier::Create(
    const v1::EqualizedOddsScoresPostProcessor& processor) {
  if (processor.groups().empty()) {
    return absl::InvalidArgumentError("artifact has no groups");
  }
  EqualizedOddsApplier applier;
  applier.grid_ = core::postprocess::ScoreGrid{processor.lo(), processor.hi(), processor.bins()};
  absl::Status grid_status = applier.grid_.Validate();
  if (!grid_status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("artifact grid: ", grid_status.message()));
  }
  for (const v1::EqualizedOddsScoresGroup& g : processor.groups()) {
    if (g.p_positive_size() != processor.bins()) {
      return absl::InvalidArgumentError(absl::StrCat("artifact group '", g.group(), "' has ",
                                                     g.p_positive_size(), " probabilities for ",
                                                     processor.bins(), " bins"));
    }
    for (double p : g.p_positive()) {
      absl::Status status = CheckProbability(p, "p_positive", g.group());
      if (!status.ok()) return status;
    }
    if (!applier.by_bin_
             .emplace(g.group(), std::vector<double>(g.p_positive().begin(), g.p_positive().end()))
             .second) {
      return absl::InvalidArgumentError(
          absl::StrCat("artifact lists group '", g.group(), "' twice"));
    }
    applier.groups_.push_back(g.group());
  }
  return applier;
}

absl::StatusOr<int> EqualizedOddsApplier::DecideScore(double score, absl::string_view group,
                                                      absl::BitGenRef gen) const {
  if (!takes_scores()) {
    return absl::InvalidArgumentError(
        "this artifact decides binary predictions, not scores; pass the prediction");
  }
  if (!std::isfinite(score)) {
    return absl::InvalidArgumentError(absl::StrCat("score must be finite (got ", score, ")"));
  }
  auto it = by_bin_.find(group);
  if (it == by_bin_.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown group '", group, "' (the artifact's groups: ", absl::StrJoin(groups_, ", "), ")"));
  }
  const double p = it->second[grid_.Bin(score)];
  if (p <= 0.0) return 0;
  if (p >= 1.0) return 1;
  return absl::Bernoulli(gen, p) ? 1 : 0;
}

absl::StatusOr<int> EqualizedOddsApplier::Decide(int prediction, absl::string_view group,
                                                 absl::BitGenRef gen) const {
  if (takes_scores()) {
    return absl::InvalidArgumentError(
        "this artifact was fitted on scores; pass the score (DecideScore), not a prediction");
  }
  if (prediction != 0 && prediction != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("prediction must be 0 or 1 (got ", prediction, ")"));
  }
  auto it = by_group_.find(group);
  if (it == by_group_.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown group '", group, "' (the artifact's groups: ", absl::StrJoin(groups_, ", "), ")"));
  }
  const double p = prediction == 1 ? it->second.given_1 : it->second.given_0;
  if (p <= 0.0) return 0;
  if (p >= 1.0) return 1;
  return absl::Bernoulli(gen, p) ? 1 : 0;
}

absl::StatusOr<std::vector<int>> ApplyEqualizedOdds(const v1::EqualizedOddsPostProcessor& processor,
                                                    absl::Span<const int> predictions,
                                                    absl::Span<const std::string> groups,
                                                    absl::BitGenRef gen) {
  if (predictions.size() != groups.size()) {
    return absl::InvalidArgumentError(absl::StrCat("got ", predictions.size(), " predictions but ",
                                                   groups.size(), " group labels"));
  }
  absl::StatusOr<EqualizedOddsApplier> applier = EqualizedOddsApplier::Create(processor);
  if (!applier.ok()) return applier.status();
  std::vector<int> out;
  out.reserve(predictions.size());
  for (size_t i = 0; i < predictions.size(); ++i) {
    absl::StatusOr<int> decision = applier->Decide(predictions[i], groups[i], gen);
    if (!decision.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("row ", i, ": ", decision.status().message()));
    }
    out.push_back(*decision);
  }
  return out;
}

}  // namespace fairvault::client
