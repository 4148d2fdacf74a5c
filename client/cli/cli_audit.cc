// Private fairness audits (company): `audit classifier` and `audit regressor`, one spending
// call each, printed as a table of estimates with confidence intervals.
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/cli/cli_common.h"
#include "client/cli/cli_spend.h"
#include "core/util/status_macros.h"

namespace fairvault::client::cli {
namespace {

// "0.4123 [0.3981, 0.4270]" for rates in [0, 1].
std::string Rate(const v1::Interval& i) {
  return absl::StrFormat("%.4f [%.4f, %.4f]", i.estimate(), i.lo(), i.hi());
}

// The same with up to 6 significant digits, for scores on any scale.
std::string Value(const v1::Interval& i) {
  return absl::StrCat(Num(i.estimate()), " [", Num(i.lo()), ", ", Num(i.hi()), "]");
}

std::string ConfidencePercent(double confidence) {
  return absl::StrCat(Num(100 * confidence), "%");
}

absl::StatusOr<double> Confidence(const ParsedFlags& flags) {
  ASSIGN_OR_RETURN(const double confidence, flags.GetDouble("confidence", 0.95));
  if (!(confidence > 0 && confidence < 1)) {
    return UsageError(absl::StrCat("--confidence must be in (0, 1) (got ", confidence, ")"));
  }
  return confidence;
}

// The footnote under a table with a SMALL column, when a group is flagged.
std::string SmallGroupNote(bool any_small, double threshold) {
  if (!any_small) return "";
  return absl::StrCat("SMALL: noisy size below ", Num(threshold),
                      " (10 noise standard deviations at this epsilon); the noise is a sizable "
                      "share of the group's counts, so its intervals are wide\n");
}

std::string FormatClassifierReport(const v1::ClassifierAuditReport& r) {
  std::string out = absl::StrCat("classifier audit over [", absl::StrJoin(r.attributes(), ", "),
                                 "]: m=", r.m(), " epsilon=", Num(r.epsilon()), ", ",
                                 ConfidencePercent(r.confidence()), " confidence intervals\n");
  TextTable table({"GROUP", "SELECTION_RATE", "TPR", "FPR", "ERROR", "NOISY_N", "SMALL"});
  bool any_small = false;
  for (const v1::ClassifierGroupReport& g : r.groups()) {
    const int64_t noisy_n = g.noisy_pred0_label0() + g.noisy_pred0_label1() +
                            g.noisy_pred1_label0() + g.noisy_pred1_label1();
    any_small |= g.small_group();
    table.AddRow({g.group(), Rate(g.selection_rate()), Rate(g.tpr()), Rate(g.fpr()),
                  Rate(g.error()), absl::StrCat(noisy_n), g.small_group() ? "SMALL" : "-"});
  }
  absl::StrAppend(
      &out, table.Render(), SmallGroupNote(any_small, r.small_group_threshold()),
      "demographic-parity violation (max |dSelection|): ", Rate(r.demographic_parity_violation()),
      "\nequalized-odds violation (max |dTPR|, |dFPR|): ", Rate(r.equalized_odds_violation()),
      "\n");
  if (r.has_tpr_difference()) {  // releases stored before these fields have neither
    absl::StrAppend(&out, "  of which max |dTPR|: ", Rate(r.tpr_difference()),
                    "; max |dFPR|: ", Rate(r.fpr_difference()), "\n");
  }
  return out;
}

std::string FormatRegressorReport(const v1::RegressorAuditReport& r) {
  std::string out =
      absl::StrCat("regressor audit over [", absl::StrJoin(r.attributes(), ", "), "]: n=", r.n(),
                   " epsilon=", Num(r.epsilon()), ", ", ConfidencePercent(r.confidence()),
                   " confidence intervals\nscore grid: [", Num(r.lo()), ", ", Num(r.hi()), "] in ",
                   r.bins(), " bins; scores clipped: ", r.scores_clipped(), "\n");
  TextTable means({"GROUP", "MEAN", "NOISY_N", "SMALL"});
  bool any_small = false;
  for (const v1::RegressorGroupReport& g : r.groups()) {
    int64_t noisy_n = 0;
    for (int64_t c : g.noisy_counts()) noisy_n += c;
    any_small |= g.small_group();
    means.AddRow(
        {g.group(), Value(g.mean()), absl::StrCat(noisy_n), g.small_group() ? "SMALL" : "-"});
  }
  absl::StrAppend(&out, means.Render(), SmallGroupNote(any_small, r.small_group_threshold()),
                  "max pairwise KS distance: ", Rate(r.max_ks()), "\n");
  // Histograms: one row per bin, one column per group (share of the group).
  std::vector<std::string> header = {"BIN"};
  for (const v1::RegressorGroupReport& g : r.groups()) header.push_back(g.group());
  TextTable hist(header);
  const double width = r.bins() > 0 ? (r.hi() - r.lo()) / r.bins() : 0;
  for (int j = 0; j < r.bins(); ++j) {
    std::vector<std::string> row = {absl::StrCat("[", Num(r.lo() + j * width), ", ",
                                                 Num(r.lo() + (j + 1) * width),
                                                 j + 1 == r.bins() ? "]" : ")")};
    for (const v1::RegressorGroupReport& g : r.groups()) {
      row.push_back(j < g.histogram_size() ? absl::StrFormat("%.4f", g.histogram(j)) : "-");
    }
    hist.AddRow(std::move(row));
  }
  absl::StrAppend(&out, "histograms (share of each group per bin):\n", hist.Render());
  return out;
}

// Writes --out (the whole response as JSON, the input of `report audit`) and prints.
template <typename Response>
absl::Status Finish(Context& ctx, const Response& resp, const CallInfo& info,
                    const std::string& report_text, const std::string& key) {
  const std::string out_path = ctx.flags().Get("out");
  if (!out_path.empty()) RETURN_IF_ERROR(WriteSpendingOutput(out_path, ToJson(resp), key));
  std::string text = absl::StrCat(report_text, "rows dropped as unmatched: ", resp.rows_dropped(),
                                  "\n", FormatCharge(resp.charge()), ReplayHint(key));
  if (!out_path.empty()) {
    absl::StrAppend(&text, "wrote ", out_path, " (render it with `fairvault report audit --audit ",
                    out_path, " --out report.html`)\n");
  }
  PrintSpending(ctx, resp, resp.charge(), info, text);
  return absl::OkStatus();
}

absl::Status AuditClassifier(Context& ctx) {
  const ParsedFlags& flags = ctx.flags();
  v1::AuditClassifierRequest req;
  RETURN_IF_ERROR(ReadOutcomeRequest(flags, &req));
  ASSIGN_OR_RETURN(const double confidence, Confidence(flags));
  req.set_confidence(confidence);
  req.set_unmatched(Unmatched(flags));
  if (flags.GetBool("dry-run")) {
    v1::PreviewReleaseRequest preview;
    *preview.mutable_audit_classifier() = req;
    return RunPreview(ctx, preview);
  }

  ASSIGN_OR_RETURN(Client * client, ctx.client());
  CallInfo info;
  ASSIGN_OR_RETURN(const v1::AuditClassifierResponse resp, client->AuditClassifier(req, &info));
  return Finish(ctx, resp, info, FormatClassifierReport(resp.report()), req.idempotency_key());
}

absl::Status AuditRegressor(Context& ctx) {
  const ParsedFlags& flags = ctx.flags();
  v1::AuditRegressorRequest req;
  RETURN_IF_ERROR(ReadScoreRequest(flags, &req));
  ASSIGN_OR_RETURN(const double epsilon, RequiredEpsilon(flags));
  req.set_epsilon(epsilon);
  ASSIGN_OR_RETURN(const double confidence, Confidence(flags));
  req.set_confidence(confidence);
  req.set_unmatched(Unmatched(flags));
  if (flags.GetBool("dry-run")) {
    v1::PreviewReleaseRequest preview;
    *preview.mutable_audit_regressor() = req;
    return RunPreview(ctx, preview);
  }

  ASSIGN_OR_RETURN(Client * client, ctx.client());
  CallInfo info;
  ASSIGN_OR_RETURN(const v1::AuditRegressorResponse resp, client->AuditRegressor(req, &info));
  return Finish(ctx, resp, info, FormatRegressorReport(resp.report()), req.idempotency_key());
}

}  // namespace

std::vector<Command> AuditCommands() {
  const FlagSpec table{"table", "HANDLE", "table handle from `table upload`", true};
  const FlagSpec epsilon{"epsilon", "EPS", "privacy cost of the whole report (> 0)", true};
  const FlagSpec confidence{"confidence", "LEVEL",
                            "confidence level of the intervals, in (0,1) (default 0.95)"};
  const FlagSpec out{"out", "FILE.json", "write the response as JSON (input of `report audit`)"};
  std::vector<Command> commands = {
      {"audit classifier",
       "private fairness audit of a binary classifier: per-group rates, DP/EO violations "
       "(company)",
       "One spending call: per-group selection rate, TPR, FPR and error, and the demographic-\n"
       "parity and equalized-odds violations, each with a confidence interval covering both\n"
       "the DP noise and sampling error (per-group rates: exact, at least the nominal level at\n"
       "every group size). Groups whose noisy size is within the noise are marked SMALL.\n"
       "Prediction and label columns: numeric 0/1.",
       {table,
        {"prediction-column", "COL", "numeric 0/1 column with your model's predictions", true},
        {"label-column", "COL", "numeric 0/1 column with the true labels", true},
        AttributesFlag(),
        epsilon,
        confidence,
        DropUnmatchedFlag(),
        IdempotencyFlag(),
        out,
        DryRunFlag()},
       true,
       AuditClassifier},
      {"audit regressor",
       "private fairness audit of a regressor: per-group means and histograms, max KS (company)",
       "One spending call (half of epsilon to the histogram, half to the group sums): per-group\n"
       "mean and histogram over the public grid [lo, hi] with k bins, and the largest KS\n"
       "distance between two groups, with confidence intervals. Scores outside [lo, hi] are\n"
       "clipped and counted.",
       ScoreGridFlags(), true, AuditRegressor},
  };
  std::vector<FlagSpec>& regressor = commands[1].flags;
  regressor.insert(regressor.begin(),
                   {table, {"score-column", "COL", "numeric column with the scores", true}});
  for (const FlagSpec& f : {AttributesFlag(), epsilon, confidence, DropUnmatchedFlag(),
                            IdempotencyFlag(), out, DryRunFlag()}) {
    regressor.push_back(f);
  }
  return commands;
}

}  // namespace fairvault::client::cli
