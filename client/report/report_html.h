// Self-contained HTML reports (inline CSS, inline SVG chart, one inline script, no external
// resources): a private fairness audit of a classifier or a regressor, and a privacy/fairness
// trade-off sweep. Pure functions of already-parsed data: the CLI converts protos and CSV
// files into these structs.
//
// Every page has one chart <svg id="chart"> whose data marks (class "mark") sit inside
// <g id="plot">. After load, the inline script sets on <body> data-chart-width and
// data-chart-height (the bounding box of #plot), data-points (the number of marks),
// data-panels (the number of <g class="panel"> small multiples, 0 for a single chart) and
// data-x-ticks (the first x axis's tick labels as "label@centre-x" joined by ';', in laid-out
// SVG pixels), so a headless browser can prove the chart was laid out.
#ifndef FAIRVAULT_CLIENT_REPORT_REPORT_HTML_H_
#define FAIRVAULT_CLIENT_REPORT_REPORT_HTML_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/lib/csv.h"

namespace fairvault::client::report {

// A point estimate with its two-sided confidence interval. Non-finite values are shown as
// "n/a" and not plotted.
struct Estimate {
  double estimate = 0;
  double lo = 0;
  double hi = 0;
};

struct ClassifierGroup {
  std::string name;
  Estimate selection_rate, tpr, fpr, error;
  int64_t noisy_rows = 0;    // the group's noisy size (sum of its released counts)
  bool small_group = false;  // noisy size below the audit's small_group_threshold
};

// Where an audit's numbers come from, shown as the page's provenance table: (label, value)
// pairs such as company, dataset, time, ledger seq, epsilon and delta charged, idempotency key,
// table or model. Empty: no table.
using Provenance = std::vector<std::pair<std::string, std::string>>;

// A classifier audit (the fields of fairvault.v1.ClassifierAuditReport).
struct ClassifierAudit {
  std::string dataset;  // optional
  std::vector<std::string> attributes;
  std::vector<ClassifierGroup> groups;
  Estimate demographic_parity_violation;
  Estimate equalized_odds_violation;
  // Its TPR and FPR parts, when the release holds them.
  std::optional<Estimate> tpr_difference, fpr_difference;
  Provenance provenance;
  double confidence = 0.95;
  double epsilon = 0;
  int64_t m = 0;
  double small_group_threshold = 0;  // 0: not reported (an audit from an older server)
};

struct RegressorGroup {
  std::string name;
  Estimate mean;
  std::vector<double> histogram;  // pmf over the bins
  int64_t noisy_rows = 0;         // the group's noisy size (sum of its released counts)
  bool small_group = false;       // noisy size below the audit's small_group_threshold
};

// A regressor audit (the fields of fairvault.v1.RegressorAuditReport).
struct RegressorAudit {
  std::string dataset;  // optional
  std::vector<std::string> attributes;
  std::vector<RegressorGroup> groups;
  Estimate max_ks;
  double confidence = 0.95;
  double epsilon = 0;
  int64_t n = 0;
  double lo = 0, hi = 1;
  int bins = 0;
  int64_t scores_clipped = 0;
  double small_group_threshold = 0;  // 0: not reported
  Provenance provenance;
};

struct Range {
  double lo = 0, hi = 0;
};

// One point of a trade-off sweep: a model's error against its fairness violation at one ε.
struct SweepPoint {
  std::string series;  // empty: the one unnamed series
  double epsilon = 0;  // > 0; +inf for the non-private reference
  double error = 0;
  double violation = 0;
  std::optional<Range> error_ci, violation_ci;
  std::optional<double> cost_epsilon;  // what the point cost (fit and audit), when known
};

// How a sweep with several series is drawn: one chart, or one panel (small multiple) per
// series, each with its own y scale and all with the same x scale.
enum class SweepFacets {
  kAuto,    // panels when the series' violation scales differ more than kSweepFacetRatio times
  kAlways,  // panels
  kNever,   // one chart
};
// A series' violation scale is the largest |violation| among its points and interval ends;
// kAuto draws panels when the largest such scale exceeds this many times the smallest non-zero
// one, where the small series would be squeezed flat on a shared axis.
inline constexpr double kSweepFacetRatio = 10;

struct Sweep {
  std::string title = "Privacy / fairness trade-off";
  std::string x_label = "error";
  std::string y_label = "fairness violation";
  std::vector<SweepPoint> points;
  // The x axis (error) on a log10 scale: every error and error interval end must be > 0.
  bool log_x = false;
  SweepFacets facets = SweepFacets::kAuto;
  // Reference points without a privacy cost, drawn as crosses (not marks) in every panel and
  // listed in the table: e.g. the constant classifier and the unprocessed model. Their
  // series names them.
  std::vector<SweepPoint> baselines;
  // What the sweep is (dataset, company, run id, measure, hold-out, ...), shown as the
  // page's provenance table.
  Provenance provenance;
};

// Whether RenderSweepHtml draws one panel per series (always false for a single series).
bool SweepUsesFacets(const Sweep& sweep);

// A sweep from CSV columns epsilon, error, violation (required; epsilon > 0, "inf" allowed)
// and optional series, error_lo, error_hi, violation_lo, violation_hi (an empty cell means no
// interval; an interval needs both ends), cost_epsilon (per point; the total is shown), kind
// ("baseline" rows are reference points, any other value or none a point) and the provenance
// columns dataset, company, run_id, measure, holdout and group_column (read from the first row
// that has them). InvalidArgument naming source and line.
absl::StatusOr<Sweep> SweepFromCsv(const CsvTable& table, absl::string_view source);

// The pages. Marks in #plot: classifier, 4 per group (selection rate, TPR, FPR, error) plus
// the demographic-parity and equalized-odds violations; regressor, 2 per group (histogram
// line, mean); sweep, 1 per point. Non-finite estimates are not plotted. InvalidArgument
// when there is nothing to plot (no groups or points; for a regressor lo >= hi or a group
// whose histogram length differs from `bins`; for a sweep with log_x an error <= 0).
absl::StatusOr<std::string> RenderClassifierAuditHtml(const ClassifierAudit& audit);
absl::StatusOr<std::string> RenderRegressorAuditHtml(const RegressorAudit& audit);
absl::StatusOr<std::string> RenderSweepHtml(const Sweep& sweep);

}  // namespace fairvault::client::report

#endif  // FAIRVAULT_CLIENT_REPORT_REPORT_HTML_H_
