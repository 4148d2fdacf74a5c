// `fairvault postprocess eo-scores` (company): fits the DP equalized-odds post-processor on a
// classifier's scores (issue 8 §6). Its artifact is applied with `decide` (value = score) or
// locally with `apply-eo --score-column`.
#include <iostream>

#include "absl/strings/str_cat.h"
#include "client/cli/cli_common.h"
#include "client/cli/cli_spend.h"
#include "core/util/status_macros.h"

namespace fairvault::client::cli {
namespace {

absl::Status PostprocessEoScores(Context& ctx) {
  const ParsedFlags& flags = ctx.flags();
  v1::FitEqualizedOddsScoresRequest req;
  RETURN_IF_ERROR(ReadScoreRequest(flags, &req));
  req.set_label_column(flags.Get("label-column"));
  ASSIGN_OR_RETURN(const double epsilon, RequiredEpsilon(flags));
  req.set_epsilon(epsilon);
  ASSIGN_OR_RETURN(const double gamma, flags.GetDouble("gamma", 0));
  if (!(gamma >= 0)) return UsageError(absl::StrCat("--gamma must be >= 0 (got ", gamma, ")"));
  req.set_gamma(gamma);
  req.set_all_pairs(flags.GetBool("all-pairs"));
  req.set_non_monotone(flags.GetBool("non-monotone"));
  ASSIGN_OR_RETURN(const double floor, flags.GetDouble("decision-floor", 0));
  req.set_decision_floor(floor);
  req.set_unmatched(Unmatched(flags));
  const std::string out_path = flags.Get("out");
  if (flags.GetBool("dry-run")) {
    v1::PreviewReleaseRequest preview;
    *preview.mutable_fit_equalized_odds_scores() = req;
    return RunPreview(ctx, preview);
  }

  ASSIGN_OR_RETURN(Client * client, ctx.client());
  CallInfo info;
  ASSIGN_OR_RETURN(const v1::FitEqualizedOddsScoresResponse resp,
                   client->FitEqualizedOddsScoresPostProcessor(req, &info));
  return PrintScoreFit(ctx, resp, info, out_path, req.idempotency_key(),
                       resp.artifact().equalized_odds_scores().decision_log_ratio_bound(),
                       /*applicable_locally=*/true);
}

}  // namespace

std::vector<Command> EoScoresCommands() {
  std::vector<FlagSpec> flags = {
      {"table", "HANDLE", "table handle from `table upload`", true},
      {"score-column", "COL", "numeric column with your classifier's scores", true},
      {"label-column", "COL", "numeric 0/1 column with the true labels", true}};
  for (FlagSpec& f : ScoreGridFlags()) flags.push_back(std::move(f));
  for (const FlagSpec& f : std::vector<FlagSpec>{
           AttributesFlag(),
           {"epsilon", "EPS", "privacy cost of this release (> 0)", true},
           {"gamma", "G", "allowed |TPR_a-TPR_b| and |FPR_a-FPR_b| on the noisy ROC curves (>= 0)",
            true},
           {"all-pairs", "", "constrain every pair of groups, not each against the first"},
           {"non-monotone", "",
            "allow decision probabilities that are not monotone in the score (default: a "
            "randomized threshold per group)"},
           {"decision-floor", "F",
            "in [0,0.5): keep every decision probability in [F, 1-F] so that `decide` can use the "
            "artifact (default 0; decide refuses every artifact fitted with F < 1e-6)"},
           DropUnmatchedFlag(),
           IdempotencyFlag(),
           {"out", "FILE", "write the artifact as JSON (input of apply-eo)"},
           DryRunFlag()}) {
    flags.push_back(f);
  }
  return {{"postprocess eo-scores",
           "fit a DP equalized-odds post-processor on a classifier's scores: noisy ROC curves, "
           "randomized group thresholds (company)",
           "Spends --epsilon once: the (group, label, score bin) histogram with discrete Laplace "
           "noise. The score and label columns must have been uploaded as numeric columns.",
           flags, true, PostprocessEoScores}};
}

}  // namespace fairvault::client::cli
