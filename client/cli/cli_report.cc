// Local report commands: `report audit` renders the JSON of an audit (classifier or
// regressor) and `report sweep` a trade-off sweep CSV, each as a self-contained HTML page
// with an SVG chart (client/report/report_html.h).
#include <cmath>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "client/cli/cli_common.h"
#include "client/report/report_html.h"
#include "core/util/status_macros.h"

namespace fairvault::client::cli {
namespace {

report::Estimate ToEstimate(const v1::Interval& i) { return {i.estimate(), i.lo(), i.hi()}; }

report::ClassifierAudit ToReport(const v1::ClassifierAuditReport& r, const std::string& dataset) {
  report::ClassifierAudit audit;
  audit.dataset = dataset;
  audit.attributes.assign(r.attributes().begin(), r.attributes().end());
  for (const v1::ClassifierGroupReport& g : r.groups()) {
    // The noisy size from the released cells, so audits from older servers show it too.
    const int64_t noisy_rows = g.noisy_pred0_label0() + g.noisy_pred0_label1() +
                               g.noisy_pred1_label0() + g.noisy_pred1_label1();
    audit.groups.push_back({g.group(), ToEstimate(g.selection_rate()), ToEstimate(g.tpr()),
                            ToEstimate(g.fpr()), ToEstimate(g.error()), noisy_rows,
                            g.small_group()});
  }
  audit.small_group_threshold = r.small_group_threshold();
  audit.demographic_parity_violation = ToEstimate(r.demographic_parity_violation());
  audit.equalized_odds_violation = ToEstimate(r.equalized_odds_violation());
  if (r.has_tpr_difference() && r.has_fpr_difference()) {
    audit.tpr_difference = ToEstimate(r.tpr_difference());
    audit.fpr_difference = ToEstimate(r.fpr_difference());
  }
  audit.confidence = r.confidence();
  audit.epsilon = r.epsilon();
  audit.m = r.m();
  return audit;
}

report::RegressorAudit ToReport(const v1::RegressorAuditReport& r, const std::string& dataset) {
  report::RegressorAudit audit;
  audit.dataset = dataset;
  audit.attributes.assign(r.attributes().begin(), r.attributes().end());
  for (const v1::RegressorGroupReport& g : r.groups()) {
    int64_t noisy_rows = 0;
    for (int64_t c : g.noisy_counts()) noisy_rows += c;
    audit.groups.push_back({g.group(),
                            ToEstimate(g.mean()),
                            {g.histogram().begin(), g.histogram().end()},
                            noisy_rows,
                            g.small_group()});
  }
  audit.small_group_threshold = r.small_group_threshold();
  audit.max_ks = ToEstimate(r.max_ks());
  audit.confidence = r.confidence();
  audit.epsilon = r.epsilon();
  audit.n = r.n();
  audit.lo = r.lo();
  audit.hi = r.hi();
  audit.bins = r.bins();
  audit.scores_clipped = r.scores_clipped();
  return audit;
}

struct RenderedAudit {
  std::string html;
  std::string kind;
  int groups = 0;
};

// The page's provenance: what the audit file says of its charge, the table or model the
// caller names, and — with a key — the charge's ledger row from the vault (who, when, under
// which idempotency key). Nothing here is new information: the file and the caller's own
// ledger rows.
absl::StatusOr<report::Provenance> AuditProvenance(Context& ctx, const v1::Charge* charge,
                                                   absl::string_view request_kind) {
  const ParsedFlags& flags = ctx.flags();
  report::Provenance rows;
  if (flags.Has("table")) rows.push_back({"table", flags.Get("table")});
  if (flags.Has("model")) rows.push_back({"model", flags.Get("model")});
  if (charge == nullptr || charge->ledger_seq() == 0) {
    if (rows.empty()) return rows;
    rows.push_back({"release", "a bare report: no charge recorded in the file"});
    return rows;
  }
  rows.insert(rows.begin(), {"dataset", charge->budget_after().dataset()});
  rows.push_back({"ledger seq", absl::StrCat(charge->ledger_seq())});
  rows.push_back({"\u03b5 charged", Num(charge->cost().epsilon())});
  rows.push_back({"\u03b4 charged", Num(charge->cost().delta())});
  if (!HasApiKey(flags)) {
    rows.push_back({"company, time, idempotency key",
                    "not shown: render with the company's key (--key-file or "
                    "FAIRVAULT_API_KEY) to add its ledger row"});
    return rows;
  }
  ASSIGN_OR_RETURN(Client* const client, ctx.client());
  v1::ListLedgerRequest req;
  req.set_after_seq(charge->ledger_seq() - 1);
  req.set_limit(1);
  ASSIGN_OR_RETURN(const v1::ListLedgerResponse page, client->ListLedger(req));
  if (page.entries().empty() || page.entries(0).seq() != charge->ledger_seq()) {
    return absl::NotFoundError(absl::StrCat(
        "ledger seq ", charge->ledger_seq(),
        " is not among this key's ledger rows: render with the key of the company that was "
        "charged (or without a key, for the file's own fields only)"));
  }
  const v1::LedgerEntry& row = page.entries(0);
  // The row must be this audit's charge: a file naming another release's seq (or edited
  // numbers under a real seq) is refused rather than shown beside a real row.
  std::string differs;
  if (row.kind() != "charge" || row.request_kind() != request_kind) {
    differs = absl::StrCat("it is a ", row.kind(), " row of ", row.request_kind(), ", not of ",
                           request_kind);
  } else if (row.dataset() != charge->budget_after().dataset()) {
    differs = absl::StrCat("its dataset is '", row.dataset(), "', the file's '",
                           charge->budget_after().dataset(), "'");
  } else if (std::abs(row.epsilon() - charge->cost().epsilon()) > 1e-6 ||
             std::abs(row.delta() - charge->cost().delta()) > 1e-15) {
    differs = absl::StrCat("it charged epsilon ", Num(row.epsilon()), ", delta ",
                           Num(row.delta()), "; the file says ", Num(charge->cost().epsilon()),
                           ", ", Num(charge->cost().delta()));
  }
  if (!differs.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "ledger seq ", charge->ledger_seq(), " is not this audit's charge: ", differs,
        " (the file was edited or names another release; render it without a key to show only "
        "what the file says)"));
  }
  rows.insert(rows.begin(), {"company", row.account()});
  rows.push_back({"time", FormatUnixMicros(row.time_unix_micros())});
  rows.push_back({"request", row.request_kind()});
  rows.push_back({"idempotency key", row.idempotency_key()});
  rows.push_back({"ledger row hash", row.hash()});
  rows.push_back({"checked", "the ledger row matches the file's charge (request, dataset, "
                             "\u03b5, \u03b4); a ledger row does not sign the numbers"});
  return rows;
}

// Accepts what `audit classifier|regressor --out` or `--json` wrote (the whole response) or
// a bare report. The parser refuses unknown fields, so a regressor's JSON never reads as a
// classifier's.
absl::StatusOr<RenderedAudit> RenderAuditFile(Context& ctx, const std::string& path) {
  ASSIGN_OR_RETURN(const std::string json, ReadFileToString(path));
  RenderedAudit out;
  const v1::ClassifierAuditReport* classifier = nullptr;
  const v1::RegressorAuditReport* regressor = nullptr;
  std::string dataset;
  v1::AuditClassifierResponse classifier_response;
  v1::AuditRegressorResponse regressor_response;
  v1::ClassifierAuditReport classifier_report;
  v1::RegressorAuditReport regressor_report;
  if (FromJson(json, path, classifier_response).ok() &&
      !classifier_response.report().groups().empty()) {
    classifier = &classifier_response.report();
    dataset = classifier_response.charge().budget_after().dataset();
  } else if (FromJson(json, path, regressor_response).ok() &&
             !regressor_response.report().groups().empty()) {
    regressor = &regressor_response.report();
    dataset = regressor_response.charge().budget_after().dataset();
  } else if (FromJson(json, path, classifier_report).ok() && !classifier_report.groups().empty()) {
    classifier = &classifier_report;
  } else if (FromJson(json, path, regressor_report).ok() && !regressor_report.groups().empty()) {
    regressor = &regressor_report;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        path,
        ": not an audit with groups (expected the JSON written by `fairvault audit classifier "
        "--out` or `fairvault audit regressor --out`, or its report)"));
  }
  const v1::Charge* charge = classifier_response.has_charge()  ? &classifier_response.charge()
                             : regressor_response.has_charge() ? &regressor_response.charge()
                                                               : nullptr;
  ASSIGN_OR_RETURN(
      const report::Provenance provenance,
      AuditProvenance(ctx, charge, classifier != nullptr ? "AuditClassifier" : "AuditRegressor"));
  if (classifier != nullptr) {
    report::ClassifierAudit audit = ToReport(*classifier, dataset);
    audit.provenance = provenance;
    ASSIGN_OR_RETURN(out.html, report::RenderClassifierAuditHtml(audit));
    out.kind = "classifier";
    out.groups = classifier->groups_size();
  } else {
    report::RegressorAudit audit = ToReport(*regressor, dataset);
    audit.provenance = provenance;
    ASSIGN_OR_RETURN(out.html, report::RenderRegressorAuditHtml(audit));
    out.kind = "regressor";
    out.groups = regressor->groups_size();
  }
  return out;
}

absl::Status ReportAudit(Context& ctx) {
  const std::string out_path = ctx.flags().Get("out");
  ASSIGN_OR_RETURN(const RenderedAudit rendered, RenderAuditFile(ctx, ctx.flags().Get("audit")));
  RETURN_IF_ERROR(WriteStringToFile(out_path, rendered.html));
  std::cout << "wrote " << out_path << " (" << rendered.kind << " audit, " << rendered.groups
            << " groups)\n";
  return absl::OkStatus();
}

absl::Status ReportSweep(Context& ctx) {
  const ParsedFlags& flags = ctx.flags();
  const std::string path = flags.Get("csv");
  const std::string out_path = flags.Get("out");
  ASSIGN_OR_RETURN(const CsvTable table, ReadCsvFile(path));
  ASSIGN_OR_RETURN(report::Sweep sweep, report::SweepFromCsv(table, path));
  if (flags.Has("title")) sweep.title = flags.Get("title");
  if (flags.Has("x-label")) sweep.x_label = flags.Get("x-label");
  if (flags.Has("y-label")) sweep.y_label = flags.Get("y-label");
  if (flags.Has("facet") && flags.Has("no-facet")) {
    return absl::InvalidArgumentError("give --facet or --no-facet, not both");
  }
  sweep.log_x = flags.Has("log-x");
  if (flags.Has("facet")) sweep.facets = report::SweepFacets::kAlways;
  if (flags.Has("no-facet")) sweep.facets = report::SweepFacets::kNever;
  ASSIGN_OR_RETURN(const std::string html, report::RenderSweepHtml(sweep));
  RETURN_IF_ERROR(WriteStringToFile(out_path, html));
  std::cout << "wrote " << out_path << " (" << sweep.points.size() << " points"
            << (report::SweepUsesFacets(sweep) ? ", one panel per series" : "")
            << (sweep.log_x ? ", log x axis" : "") << ")\n";
  return absl::OkStatus();
}

}  // namespace

std::vector<Command> ReportCommands() {
  return {
      {"report audit",
       "render an audit as a self-contained HTML page with a chart",
       "Reads the JSON written by `audit classifier --out` or `audit regressor --out` (or\n"
       "--json). Classifier: per-group rates and the DP/EO violations with confidence\n"
       "intervals and the pair of groups behind each; regressor: per-group histograms and\n"
       "means. No external resources. The provenance table shows the charge the file records\n"
       "(dataset, ledger seq, epsilon and delta) and --table/--model; with the company's key\n"
       "(--key-file or FAIRVAULT_API_KEY) also its ledger row: company, time, idempotency key.",
       {{"audit", "FILE.json", "audit response (or report) as JSON", true},
        {"out", "FILE.html", "where to write the page", true},
        {"table", "HANDLE", "the audited table, for the provenance table"},
        {"model", "ID", "the audited model or artifact, for the provenance table"}},
       true,
       ReportAudit},
      {"report sweep",
       "render a privacy/fairness trade-off sweep as an HTML page with a chart",
       "CSV columns: epsilon, error, violation (epsilon may be inf); optional series (one\n"
       "colour and legend entry each) and error_lo, error_hi, violation_lo, violation_hi\n"
       "(confidence intervals; empty cells for none). Plots violation against error, each\n"
       "point labelled with its epsilon where labels do not overlap (the table lists every "
       "point).\n"
       "When the series' violations differ in scale by more than 10x (the largest |violation|\n"
       "of one series against another's), each series gets its own panel with its own y scale\n"
       "and the x scale shared (small multiples); --facet and --no-facet force the choice.",
       {{"csv", "FILE", "sweep points", true},
        {"out", "FILE.html", "where to write the page", true},
        {"title", "TEXT", "page title"},
        {"x-label", "TEXT", "x-axis title (default: error)"},
        {"y-label", "TEXT", "y-axis title (default: fairness violation)"},
        {"log-x", "", "x axis (error) on a log scale; every error must be > 0"},
        {"facet", "", "one panel per series, whatever their scales"},
        {"no-facet", "", "one chart for all series, whatever their scales"}},
       false,
       ReportSweep},
  };
}

}  // namespace fairvault::client::cli
