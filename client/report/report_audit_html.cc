// The audit reports: a forest plot of a classifier audit (per-group rates and the two
// violations with confidence intervals), and a regressor audit's per-group histograms and
// means. Declared in report_html.h.
#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/report/report_html.h"
#include "client/report/report_svg.h"

namespace fairvault::client::report {
namespace {

constexpr const char* kViolationColour = "#333333";

std::string Percent(double confidence) { return absl::StrCat(FormatNumber(100 * confidence), "%"); }

std::string Attributes(const std::vector<std::string>& attributes) {
  return attributes.empty() ? "(all)" : absl::StrJoin(attributes, ", ");
}

// Rates and their differences in one format: four decimals.
std::string IntervalText(const Estimate& e) { return FormatRateInterval(e.estimate, e.lo, e.hi); }

// The finite ends of the estimates, for an axis extent.
void AddExtent(const Estimate& e, std::vector<double>& values) {
  for (double v : {e.estimate, e.lo, e.hi}) {
    if (std::isfinite(v)) values.push_back(v);
  }
}

// A point with its horizontal whisker at row y; nothing when the estimate is not finite. A
// small group's point is a ring.
void AppendRowEstimate(std::string& svg, const LinearScale& x, double y, const Estimate& e,
                       const char* colour, absl::string_view tooltip, bool small = false) {
  if (!std::isfinite(e.estimate)) return;
  AppendHorizontalWhisker(svg, x(e.lo), x(e.hi), y, colour);
  AppendMark(svg, x(e.estimate), y, colour,
             absl::StrCat(tooltip, small ? " (small group)" : "", ": ", IntervalText(e)), small);
}

// The pair of groups behind a max-over-pairs difference of `field`: the groups with the
// largest and the smallest estimate ("Male vs Female"), or "" with fewer than two groups.
std::string PairBehind(const std::vector<ClassifierGroup>& groups,
                       Estimate ClassifierGroup::*field) {
  if (groups.size() < 2) return "";
  size_t hi = 0, lo = 0;
  for (size_t g = 1; g < groups.size(); ++g) {
    if ((groups[g].*field).estimate > (groups[hi].*field).estimate) hi = g;
    if ((groups[g].*field).estimate < (groups[lo].*field).estimate) lo = g;
  }
  return absl::StrCat(groups[hi].name, " vs ", groups[lo].name);
}

void AppendRowLabel(std::string& svg, double x, double y, absl::string_view text) {
  absl::StrAppendFormat(&svg,
                        "<text class=\"row-label\" x=\"%.2f\" y=\"%.2f\" "
                        "text-anchor=\"end\">%s</text>",
                        x, y + 4, HtmlEscape(text));
}

// A group's name in the charts and legends, marked when the group is small.
std::string GroupLabel(const std::string& name, bool small_group) {
  return small_group ? absl::StrCat(name, " (small)") : name;
}

// The table cells for a group's noisy size and its small-group flag.
std::string SizeCells(int64_t noisy_rows, bool small_group) {
  return absl::StrCat("<td>", noisy_rows, "</td><td>",
                      small_group ? "<strong class=\"small-group\">small</strong>" : "–", "</td>");
}

// The note under a table when some group is small.
std::string SmallGroupNote(bool any_small, double threshold) {
  if (!any_small) return "";
  return absl::StrCat(
      "<p class=\"small-group-note\"><strong>small</strong>: the group's noisy size is below ",
      HtmlEscape(FormatNumber(threshold)),
      " (10 standard deviations of the noise at this ε, a public threshold; the flag is "
      "computed from the noisy counts only). The noise is a sizable share of its counts, so its "
      "intervals are wide.</p>");
}

std::vector<std::pair<std::string, std::string>> GroupMeta(absl::string_view dataset,
                                                           const std::vector<std::string>& attrs,
                                                           double epsilon, double confidence) {
  std::vector<std::pair<std::string, std::string>> meta;
  if (!dataset.empty()) meta.push_back({"dataset", std::string(dataset)});
  meta.push_back({"groups over", Attributes(attrs)});
  meta.push_back({"\u03b5", FormatNumber(epsilon)});
  meta.push_back({"confidence", Percent(confidence)});
  return meta;
}

}  // namespace

absl::StatusOr<std::string> RenderClassifierAuditHtml(const ClassifierAudit& audit) {
  if (audit.groups.empty()) return absl::InvalidArgumentError("the audit has no groups to plot");
  struct Metric {
    const char* label;
    Estimate ClassifierGroup::*field;
  };
  const Metric metrics[] = {{"selection rate", &ClassifierGroup::selection_rate},
                            {"TPR", &ClassifierGroup::tpr},
                            {"FPR", &ClassifierGroup::fpr},
                            {"error", &ClassifierGroup::error}};
  const size_t groups = audit.groups.size();
  std::vector<double> extent = {0, 1};
  for (const ClassifierGroup& g : audit.groups) {
    for (const Metric& m : metrics) AddExtent(g.*(m.field), extent);
  }
  AddExtent(audit.demographic_parity_violation, extent);
  AddExtent(audit.equalized_odds_violation, extent);

  std::vector<std::pair<std::string, std::string>> legend;
  for (size_t g = 0; g < groups; ++g) {
    legend.push_back(
        {GroupLabel(audit.groups[g].name, audit.groups[g].small_group), SeriesColour(g)});
  }
  legend.push_back({"max over group pairs", kViolationColour});
  // One band per metric with a row per group, then one band per violation; the legend's
  // column as wide as its longest group name (shown whole).
  constexpr double kPlotWidth = 530, kRow = 16, kViolationBand = 32;
  const double kWidth = 140 + kPlotWidth + 24 + LegendWidth(legend);
  const double metric_band = static_cast<double>(groups) * kRow + 16;
  const Rect area{140, 20, kPlotWidth, 4 * metric_band + 2 * kViolationBand};
  const double height = area.bottom() + 60;
  const auto [lo_it, hi_it] = std::minmax_element(extent.begin(), extent.end());
  const LinearScale x = LinearScale::Nice(*lo_it, *hi_it, area.left, area.right(), 5);

  std::string svg = SvgOpen(kWidth, height, "classifier fairness audit");
  for (int band = 0; band < 6; band += 2) {  // shade every other band
    const double top =
        area.top + (band < 4 ? band * metric_band : 4 * metric_band + (band - 4) * kViolationBand);
    const double h = band < 4 ? metric_band : kViolationBand;
    absl::StrAppendFormat(&svg,
                          "<rect class=\"band\" x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" "
                          "height=\"%.2f\"/>",
                          area.left, top, area.width, h);
  }
  AppendXAxis(svg, x, area,
              absl::StrCat("estimate with ", Percent(audit.confidence), " confidence interval"));
  std::string plot = "<g id=\"plot\">";
  for (size_t m = 0; m < 4; ++m) {
    const double top = area.top + static_cast<double>(m) * metric_band;
    AppendRowLabel(svg, area.left - 10, top + metric_band / 2, metrics[m].label);
    for (size_t g = 0; g < groups; ++g) {
      const ClassifierGroup& group = audit.groups[g];
      AppendRowEstimate(plot, x, top + 8 + (static_cast<double>(g) + 0.5) * kRow,
                        group.*(metrics[m].field), SeriesColour(g),
                        absl::StrCat(group.name, " ", metrics[m].label), group.small_group);
    }
  }
  const std::pair<const char*, const Estimate*> violations[] = {
      {"DP violation", &audit.demographic_parity_violation},
      {"EO violation", &audit.equalized_odds_violation}};
  for (size_t v = 0; v < 2; ++v) {
    const double y = area.top + 4 * metric_band + (static_cast<double>(v) + 0.5) * kViolationBand;
    AppendRowLabel(svg, area.left - 10, y, violations[v].first);
    AppendRowEstimate(plot, x, y, *violations[v].second, kViolationColour, violations[v].first);
  }
  svg += plot + "</g>";
  AppendLegend(svg, area.right() + 24, area.top + 4, legend);
  svg += "</svg>";

  std::string body =
      absl::StrCat("<table><caption>Per-group estimates (", Percent(audit.confidence),
                   " confidence intervals)</caption><tr><th>group</th>");
  for (const Metric& m : metrics) absl::StrAppend(&body, "<th>", m.label, "</th>");
  body += "<th>noisy size</th><th>small group</th></tr>";
  bool any_small = false;
  for (const ClassifierGroup& g : audit.groups) {
    any_small |= g.small_group;
    absl::StrAppend(&body, "<tr><td>", HtmlEscape(g.name), "</td>");
    for (const Metric& m : metrics) {
      absl::StrAppend(&body, "<td>", HtmlEscape(IntervalText(g.*(m.field))), "</td>");
    }
    absl::StrAppend(&body, SizeCells(g.noisy_rows, g.small_group), "</tr>");
  }
  // Each violation with the pair of groups behind its estimate (the groups with the largest
  // and smallest estimate: post-processing of the release). Equalized odds is the larger of
  // its TPR and FPR parts, whose own intervals the release holds (audits from older servers
  // have only the whole).
  const std::string tpr_pair = PairBehind(audit.groups, &ClassifierGroup::tpr);
  const std::string fpr_pair = PairBehind(audit.groups, &ClassifierGroup::fpr);
  const double tpr_gap = audit.tpr_difference ? audit.tpr_difference->estimate : -1;
  const double fpr_gap = audit.fpr_difference ? audit.fpr_difference->estimate : -1;
  const std::string eo_pair =
      !audit.tpr_difference ? "" : (tpr_gap >= fpr_gap ? absl::StrCat(tpr_pair, " (TPR)")
                                                       : absl::StrCat(fpr_pair, " (FPR)"));
  auto violation_row = [](absl::string_view measure, const Estimate& e,
                          absl::string_view pair) {
    return absl::StrCat("<tr><td>", measure, "</td><td>", HtmlEscape(IntervalText(e)),
                        "</td><td>", HtmlEscape(pair), "</td></tr>");
  };
  absl::StrAppend(&body, "</table>", SmallGroupNote(any_small, audit.small_group_threshold),
                  "<table><caption>Fairness violations (max over pairs of groups)</caption>"
                  "<tr><th>measure</th><th>estimate</th><th>pair of groups</th></tr>",
                  violation_row("demographic parity: max |selection<sub>a</sub> \u2212 "
                                "selection<sub>b</sub>|",
                                audit.demographic_parity_violation,
                                PairBehind(audit.groups, &ClassifierGroup::selection_rate)),
                  violation_row("equalized odds: max(|\u0394TPR|, |\u0394FPR|)",
                                audit.equalized_odds_violation, eo_pair));
  if (audit.tpr_difference && audit.fpr_difference) {
    absl::StrAppend(&body, violation_row("&#8195;of which max |\u0394TPR|",
                                         *audit.tpr_difference, tpr_pair),
                    violation_row("&#8195;of which max |\u0394FPR|", *audit.fpr_difference,
                                  fpr_pair));
  }
  body += "</table>";
  std::vector<std::pair<std::string, std::string>> meta =
      GroupMeta(audit.dataset, audit.attributes, audit.epsilon, audit.confidence);
  meta.push_back({"m", absl::StrCat(audit.m)});
  return HtmlPage(
      "Classifier fairness audit", meta, svg,
      "Per-group selection rate, true- and false-positive rates and error of the classifier, "
      "and the demographic-parity (DP) and equalized-odds (EO) violations, from one "
      "differentially private release; whiskers are confidence intervals covering the DP "
      "noise and sampling error (per-group rates: exact, at least the stated level at every "
      "group size). Groups marked (small), drawn as rings, have a noisy size within the noise.",
      body, audit.provenance);
}

absl::StatusOr<std::string> RenderRegressorAuditHtml(const RegressorAudit& audit) {
  if (audit.groups.empty()) return absl::InvalidArgumentError("the audit has no groups to plot");
  if (!std::isfinite(audit.lo) || !std::isfinite(audit.hi) || audit.lo >= audit.hi) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the score range must be finite with lo < hi (got [", audit.lo, ", ", audit.hi, "])"));
  }
  double max_mass = 0;
  for (const RegressorGroup& g : audit.groups) {
    if (audit.bins < 1 || g.histogram.size() != static_cast<size_t>(audit.bins)) {
      return absl::InvalidArgumentError(
          absl::StrCat("group '", g.name, "' has ", g.histogram.size(),
                       " histogram bins; the audit has ", audit.bins));
    }
    for (double p : g.histogram) {
      if (std::isfinite(p)) max_mass = std::max(max_mass, p);
    }
  }
  std::vector<double> extent = {audit.lo, audit.hi};
  for (const RegressorGroup& g : audit.groups) AddExtent(g.mean, extent);
  const auto [lo_it, hi_it] = std::minmax_element(extent.begin(), extent.end());

  const size_t groups = audit.groups.size();
  std::vector<std::pair<std::string, std::string>> legend;
  for (size_t g = 0; g < groups; ++g) {
    legend.push_back(
        {GroupLabel(audit.groups[g].name, audit.groups[g].small_group), SeriesColour(g)});
  }
  constexpr double kPlotWidth = 540, kRow = 22;
  const double kWidth = 130 + kPlotWidth + 24 + LegendWidth(legend);
  const Rect hist{130, 34, kPlotWidth, 240};
  const Rect means{hist.left, hist.bottom() + 96, hist.width,
                   static_cast<double>(groups) * kRow + 12};
  const double height = means.bottom() + 60;
  const LinearScale x = LinearScale::Nice(*lo_it, *hi_it, hist.left, hist.right(), 6);
  const LinearScale y = LinearScale::Nice(0, max_mass, hist.bottom(), hist.top, 5);
  const double width = (audit.hi - audit.lo) / audit.bins;

  std::string svg = SvgOpen(kWidth, height, "regressor fairness audit");
  absl::StrAppendFormat(&svg,
                        "<text class=\"panel-title\" x=\"%.2f\" y=\"%.2f\">Score histogram by "
                        "group</text><text class=\"panel-title\" x=\"%.2f\" y=\"%.2f\">Mean "
                        "score by group (%s confidence interval)</text>",
                        hist.left, hist.top - 14, means.left, means.top - 14,
                        HtmlEscape(Percent(audit.confidence)));
  AppendXAxis(svg, x, hist, "score");
  AppendYAxis(svg, y, hist, "share of the group");
  AppendXAxis(svg, x, means, "mean score");
  std::string plot = "<g id=\"plot\">";
  for (size_t g = 0; g < groups; ++g) {
    const RegressorGroup& group = audit.groups[g];
    const char* colour = SeriesColour(g);
    // The histogram's outline: up at the first edge, across each bin, down at the last.
    if (std::all_of(group.histogram.begin(), group.histogram.end(),
                    [](double p) { return std::isfinite(p); })) {
      std::string d = absl::StrFormat("M%.2f %.2f", x(audit.lo), y(0));
      for (int j = 0; j < audit.bins; ++j) {
        absl::StrAppendFormat(&d, "V%.2fH%.2f", y(group.histogram[j]),
                              x(audit.lo + (j + 1) * width));
      }
      absl::StrAppendFormat(&d, "V%.2f", y(0));
      absl::StrAppendFormat(&plot,
                            "<path class=\"mark hist\" d=\"%s\" fill=\"none\" stroke=\"%s\" "
                            "stroke-width=\"2\" stroke-opacity=\"0.85\"><title>%s</title></path>",
                            d, colour, HtmlEscape(group.name));
    }
    const double row_y = means.top + 6 + (static_cast<double>(g) + 0.5) * kRow;
    AppendRowLabel(svg, means.left - 10, row_y, GroupLabel(group.name, group.small_group));
    AppendRowEstimate(plot, x, row_y, group.mean, colour, absl::StrCat(group.name, " mean"));
  }
  svg += plot + "</g>";
  AppendLegend(svg, hist.right() + 24, hist.top + 4, legend);
  svg += "</svg>";

  std::string body = absl::StrCat("<table><caption>Per-group means (", Percent(audit.confidence),
                                  " confidence intervals)</caption><tr><th>group</th>"
                                  "<th>mean</th><th>noisy size</th><th>small group</th></tr>");
  bool any_small = false;
  for (const RegressorGroup& g : audit.groups) {
    any_small |= g.small_group;
    absl::StrAppend(&body, "<tr><td>", HtmlEscape(g.name), "</td><td>",
                    HtmlEscape(IntervalText(g.mean)), "</td>",
                    SizeCells(g.noisy_rows, g.small_group), "</tr>");
  }
  absl::StrAppend(&body, "<tr><td>max pairwise KS distance</td><td>",
                  HtmlEscape(IntervalText(audit.max_ks)), "</td><td></td><td></td></tr></table>",
                  SmallGroupNote(any_small, audit.small_group_threshold));
  if (audit.bins <= 50) {
    body += "<table><caption>Histograms (share of each group per bin)</caption><tr><th>bin</th>";
    for (const RegressorGroup& g : audit.groups) {
      absl::StrAppend(&body, "<th>", HtmlEscape(g.name), "</th>");
    }
    body += "</tr>";
    for (int j = 0; j < audit.bins; ++j) {
      absl::StrAppend(&body, "<tr><td>[", FormatNumber(audit.lo + j * width), ", ",
                      FormatNumber(audit.lo + (j + 1) * width), j + 1 == audit.bins ? "]" : ")",
                      "</td>");
      for (const RegressorGroup& g : audit.groups) {
        absl::StrAppend(&body, "<td>", FormatNumber(g.histogram[j], 3), "</td>");
      }
      body += "</tr>";
    }
    body += "</table>";
  }
  std::vector<std::pair<std::string, std::string>> meta =
      GroupMeta(audit.dataset, audit.attributes, audit.epsilon, audit.confidence);
  meta.push_back({"n", absl::StrCat(audit.n)});
  meta.push_back({"range", absl::StrCat("[", FormatNumber(audit.lo), ", ", FormatNumber(audit.hi),
                                        "], ", audit.bins, " bins")});
  meta.push_back({"clipped", absl::StrCat(audit.scores_clipped)});
  meta.push_back({"max KS", IntervalText(audit.max_ks)});
  return HtmlPage("Regressor fairness audit", meta, svg,
                  "Per-group score histograms (the released noisy counts, repaired into "
                  "distributions) and per-group mean scores from one differentially private "
                  "release; whiskers are confidence intervals covering the DP noise and "
                  "sampling error.",
                  body, audit.provenance);
}

}  // namespace fairvault::client::report
