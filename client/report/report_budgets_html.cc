// The auditor's budgets report; see report_budgets_html.h.
#include "client/report/report_budgets_html.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string_view>
#include <tuple>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "client/lib/csv.h"
#include "client/report/report_svg.h"

namespace fairvault::client::report {
namespace {

std::string Time(int64_t micros) {
  return absl::FormatTime("%Y-%m-%d %H:%M:%SZ", absl::FromUnixMicros(micros), absl::UTCTimeZone());
}

std::string Cell(const std::string& text) {
  return absl::StrCat("<td>", HtmlEscape(text), "</td>");
}

std::string Cell(int64_t n) { return absl::StrCat("<td>", n, "</td>"); }

std::string SeriesName(const std::string& company, const std::string& dataset) {
  return absl::StrCat(company, " / ", dataset);
}

// One (company, dataset)'s charges in ledger order, with the running sum of their ε.
struct SpendSeries {
  std::string company, dataset;
  std::vector<const LedgerRow*> charges;
  std::vector<double> cumulative;
  // What the line shows: the composed spend after each charge when known, else the sum.
  std::vector<double> plotted;
};

std::string VerificationTable(const LedgerVerification& v) {
  std::string html =
      "<table id=\"verification\"><caption>Ledger verification (VerifyLedger)</caption>";
  absl::StrAppend(&html, "<tr><th>status</th><td><b id=\"ledger-status\">",
                  v.ok ? "verified" : "FAILED", "</b></td></tr><tr><th>rows checked</th>",
                  Cell(v.rows_checked), "</tr><tr><th>head hash</th><td><code id=\"head-hash\">",
                  HtmlEscape(v.head_hash), "</code></td></tr>");
  if (!v.ok) {
    absl::StrAppend(&html, "<tr><th>first bad seq</th>", Cell(v.first_bad_seq),
                    "</tr><tr><th>what failed</th>", Cell(v.message), "</tr>");
  }
  html +=
      "</table><p class=\"note\">Every row's hash covers its content and its predecessor's "
      "hash; publish the head hash to detect a truncated or rewritten ledger later.</p>";
  return html;
}

std::string CheckpointTable(const CheckpointCheck& c) {
  if (!c.present && c.ok) return "";
  if (!c.present) {  // asked to check a checkpoint the vault does not serve
    return absl::StrCat(
        "<table id=\"checkpoint\"><caption>Transparency log: the latest signed checkpoint"
        "</caption><tr><th>status</th><td><b id=\"checkpoint-status\">FAILED</b></td></tr>"
        "<tr><th>vault's signature</th>",
        Cell(c.signature), "</tr></table>");
  }
  std::string html = absl::StrCat(
      "<table id=\"checkpoint\"><caption>Transparency log: the latest signed checkpoint"
      "</caption><tr><th>status</th><td><b id=\"checkpoint-status\">",
      c.ok ? "verified" : "FAILED", "</b></td></tr><tr><th>log</th>", Cell(c.origin),
      "</tr><tr><th>tree size (rows)</th>", Cell(c.size),
      "</tr><tr><th>root hash</th><td><code id=\"checkpoint-root\">", HtmlEscape(c.root_hex),
      "</code></td></tr><tr><th>vault's signature</th>",
      Cell(c.signature.empty() ? "not checked (no --log-key)" : c.signature),
      "</tr><tr><th>witness cosignatures</th>", Cell(static_cast<int64_t>(c.cosignatures)),
      "</tr>");
  if (!c.witnesses.empty()) absl::StrAppend(&html, "<tr><th>witnesses</th>", Cell(c.witnesses), "</tr>");
  absl::StrAppend(&html, "<tr><th>consistency</th><td id=\"checkpoint-consistency\">",
                  HtmlEscape(c.consistency.empty() ? "not checked (no --kept checkpoint)"
                                                   : c.consistency),
                  "</td></tr><tr><th>ledger rows</th><td id=\"checkpoint-ledger\">",
                  HtmlEscape(c.ledger.empty() ? "not checked here (needs --log-key, and a checkpoint that "
                                                "verifies)"
                                              : c.ledger),
                  "</td></tr><tr><th>signed note</th><td><pre>", HtmlEscape(c.note),
                  "</pre></td></tr></table><p class=\"note\">Keep the note: `auditor "
                  "consistency --from` (or the next `report budgets --kept`) proves later "
                  "ledgers extend it, and companies' receipts cite checkpoints like it.</p>");
  return html;
}

std::string BudgetsTable(const std::vector<BudgetRow>& budgets) {
  std::string html =
      "<table id=\"budgets\"><caption>Grants and caps (ListBudgets)</caption><tr><th>company</th>"
      "<th>dataset</th><th>\u03b5 granted</th><th>\u03b4</th><th>\u03b5 spent</th>"
      "<th>\u03b5 remaining</th><th>releases</th></tr>";
  for (const BudgetRow& b : budgets) {
    absl::StrAppend(&html, "<tr>",
                    b.company.empty() ? "<td><i>cap (all companies)</i></td>" : Cell(b.company),
                    Cell(b.dataset), Cell(FormatNumber(b.epsilon_granted, 6)),
                    Cell(FormatNumber(b.delta, 3)), Cell(FormatNumber(b.epsilon_spent, 6)),
                    Cell(FormatNumber(b.epsilon_remaining, 6)), Cell(b.releases), "</tr>");
  }
  if (budgets.empty()) html += "<tr><td colspan=\"7\">no grants or caps</td></tr>";
  html +=
      "</table><p class=\"note\">Spent is what the vault's accountant composes (the smaller of "
      "the sum of \u03b5 and the R\u00e9nyi bound at the grant's \u03b4): the privacy filter "
      "admits a charge against it. It can be below the chart's plain sum of the releases' "
      "\u03b5; the chart's diamonds mark it.</p>";
  return html;
}

// Σ ε per (company, dataset, request kind), the releases counted.
std::string KindTable(const std::vector<const LedgerRow*>& charges) {
  struct Total {
    int64_t releases = 0;
    double epsilon = 0;
  };
  std::map<std::tuple<std::string, std::string, std::string>, Total> totals;
  for (const LedgerRow* c : charges) {
    Total& t = totals[{c->account, c->dataset, c->request_kind}];
    ++t.releases;
    t.epsilon += c->epsilon;
  }
  std::string html =
      "<table id=\"by-kind\"><caption>Spend by request kind (ledger)</caption><tr>"
      "<th>company</th><th>dataset</th><th>request</th><th>releases</th><th>\u03a3 \u03b5</th>"
      "</tr>";
  for (const auto& [key, t] : totals) {
    const auto& [company, dataset, kind] = key;
    absl::StrAppend(&html, "<tr>", Cell(company), Cell(dataset), Cell(kind), Cell(t.releases),
                    Cell(FormatNumber(t.epsilon, 6)), "</tr>");
  }
  if (totals.empty()) html += "<tr><td colspan=\"5\">no charges</td></tr>";
  html += "</table>";
  return html;
}

// Every grant and cap row, in ledger order: who set which budget, when.
std::string GrantHistoryTable(const std::vector<LedgerRow>& ledger) {
  std::string html =
      "<table id=\"grant-history\"><caption>Grant and cap history (ledger)</caption><tr>"
      "<th>seq</th><th>time</th><th>granted by</th><th>company</th><th>dataset</th>"
      "<th>new \u03b5</th><th>\u03b4</th></tr>";
  int64_t rows = 0;
  for (const LedgerRow& row : ledger) {
    if (row.kind != "grant" && row.kind != "cap") continue;
    ++rows;
    absl::StrAppend(
        &html, "<tr>", Cell(row.seq), Cell(Time(row.time_unix_micros)),
        row.actor.empty() ? "<td><i>not recorded</i></td>" : Cell(row.actor),
        row.kind == "cap" ? "<td><i>cap (all companies)</i></td>" : Cell(row.account),
        Cell(row.dataset), Cell(FormatNumber(row.epsilon, 6)), Cell(FormatNumber(row.delta, 3)),
        "</tr>");
  }
  if (rows == 0) html += "<tr><td colspan=\"7\">no grants or caps</td></tr>";
  html +=
      "</table><p class=\"note\">Each row sets the budget from then on. \u201cGranted by\u201d is "
      "the regulator account that made the change, covered by the row's hash; rows written "
      "before the vault recorded it (database schema version 6) say \u201cnot recorded\u201d.</p>";
  return html;
}

// What a charge created: its artifact and its training job, either, both or none.
std::string CreatedCell(const LedgerRow& c) {
  std::vector<std::string> parts;
  if (!c.artifact_id.empty()) parts.push_back(absl::StrCat("artifact ", c.artifact_id));
  if (!c.job_id.empty()) parts.push_back(absl::StrCat("job ", c.job_id));
  if (parts.empty()) return "<td>\u2013</td>";
  return absl::StrCat("<td><code>", HtmlEscape(absl::StrJoin(parts, ", ")), "</code></td>");
}

// Every charge, in ledger order.
std::string ChargesTable(const std::vector<const LedgerRow*>& charges) {
  std::string html =
      "<div class=\"wide\"><table id=\"charges\"><caption>Every charge (ledger)</caption><tr>"
      "<th>seq</th>"
      "<th>time</th><th>company</th><th>dataset</th><th>request</th><th>\u03b5</th>"
      "<th>\u03b4</th><th>mechanism</th><th>idempotency key</th><th>artifact or job</th></tr>";
  for (const LedgerRow* c : charges) {
    absl::StrAppend(&html, "<tr>", Cell(c->seq), Cell(Time(c->time_unix_micros)),
                    Cell(c->account), Cell(c->dataset), Cell(c->request_kind),
                    Cell(FormatNumber(c->epsilon, 6)), Cell(FormatNumber(c->delta, 3)),
                    Cell(c->mechanism), "<td><code>", HtmlEscape(c->idempotency_key),
                    "</code></td>", CreatedCell(*c), "</tr>");
  }
  if (charges.empty()) html += "<tr><td colspan=\"10\">no charges</td></tr>";
  html += "</table></div>";
  return html;
}

// The charges in ledger order.
std::vector<const LedgerRow*> ChargesOf(const std::vector<LedgerRow>& ledger) {
  std::vector<const LedgerRow*> charges;
  for (const LedgerRow& row : ledger) {
    if (row.kind == "charge") charges.push_back(&row);
  }
  std::stable_sort(charges.begin(), charges.end(),
                   [](const LedgerRow* a, const LedgerRow* b) { return a->seq < b->seq; });
  return charges;
}

std::string AccessTable(const std::vector<AccessRow>& rows) {
  struct Volume {
    int64_t calls = 0, rows = 0, new_decisions = 0;
    bool all_recorded = true;
    int64_t last = 0;
  };
  std::map<std::tuple<std::string, std::string, std::string>, Volume> volume;
  int64_t calls = 0, total_rows = 0;
  for (const AccessRow& r : rows) {
    Volume& v = volume[{r.account, r.dataset, r.artifact_id}];
    ++v.calls;
    v.rows += r.rows;
    if (r.new_decisions < 0) {
      v.all_recorded = false;
    } else {
      v.new_decisions += r.new_decisions;
    }
    v.last = std::max(v.last, r.time_unix_micros);
    ++calls;
    total_rows += r.rows;
  }
  std::string html = absl::StrCat(
      "<table id=\"access\"><caption>Access log (ListAccessLog): ", calls, " Decide calls, ",
      total_rows,
      " rows</caption><tr><th>company</th><th>dataset</th><th>artifact</th><th>calls</th>"
      "<th>rows</th><th>new decisions</th><th>last call</th></tr>");
  for (const auto& [key, v] : volume) {
    const auto& [company, dataset, artifact] = key;
    absl::StrAppend(&html, "<tr>", Cell(company), Cell(dataset), "<td><code>", HtmlEscape(artifact),
                    "</code></td>", Cell(v.calls), Cell(v.rows),
                    v.all_recorded ? Cell(v.new_decisions) : Cell(std::string("?")),
                    Cell(Time(v.last)), "</tr>");
  }
  if (volume.empty()) html += "<tr><td colspan=\"7\">no Decide calls</td></tr>";
  html += "</table>";
  return html;
}

}  // namespace

absl::StatusOr<std::string> RenderBudgetsHtml(const BudgetsReport& report) {
  // Series by (company, dataset), in that order; cumulative ε in ledger order.
  int64_t grants = 0, caps = 0;
  for (const LedgerRow& row : report.ledger) {
    if (row.kind == "charge" && !std::isfinite(row.epsilon)) {
      return absl::InvalidArgumentError(
          absl::StrCat("ledger row ", row.seq, " has a non-finite epsilon"));
    }
    grants += row.kind == "grant";
    caps += row.kind == "cap";
  }
  const std::vector<const LedgerRow*> ordered = ChargesOf(report.ledger);
  std::map<std::pair<std::string, std::string>, SpendSeries> by_key;
  for (const LedgerRow* row : ordered) {
    SpendSeries& s = by_key[{row->account, row->dataset}];
    s.company = row->account;
    s.dataset = row->dataset;
    s.charges.push_back(row);
    s.cumulative.push_back((s.cumulative.empty() ? 0 : s.cumulative.back()) + row->epsilon);
  }
  // The composed spend when every charge has it (a vault's ledger rows carry the costs).
  bool composed_known = !ordered.empty();
  for (const LedgerRow* row : ordered) composed_known &= row->composed_after.has_value();
  std::vector<SpendSeries> series;
  for (auto& [key, s] : by_key) {
    for (size_t j = 0; j < s.charges.size(); ++j) {
      s.plotted.push_back(composed_known ? *s.charges[j]->composed_after : s.cumulative[j]);
    }
    series.push_back(std::move(s));
  }

  // The budget lines: each (company, dataset)'s grant and each dataset's cap, as steps over
  // time from the ledger's grant and cap rows (a row sets the new budget).
  struct Step {
    double at = 0, value = 0;
  };
  std::map<std::pair<std::string, std::string>, std::vector<Step>> grant_steps;
  std::map<std::string, std::vector<Step>> cap_steps;
  for (const LedgerRow& row : report.ledger) {
    const double at = static_cast<double>(row.time_unix_micros) / 1e6;
    if (row.kind == "grant") grant_steps[{row.account, row.dataset}].push_back({at, row.epsilon});
    if (row.kind == "cap") cap_steps[row.dataset].push_back({at, row.epsilon});
  }
  // What the accountant composes now (ListBudgets), per (company, dataset).
  std::map<std::pair<std::string, std::string>, double> composed;
  for (const BudgetRow& b : report.budgets) {
    if (!b.company.empty()) composed[{b.company, b.dataset}] = b.epsilon_spent;
  }

  // Extents: x is time (every row, so grants before the first charge show as room on the
  // left), y from 0 to the largest running sum or budget line of a plotted series.
  double x_lo = 0, x_hi = 60, y_hi = 0;
  if (!report.ledger.empty()) {
    x_lo = x_hi = static_cast<double>(report.ledger.front().time_unix_micros) / 1e6;
    for (const LedgerRow& row : report.ledger) {
      x_lo = std::min(x_lo, static_cast<double>(row.time_unix_micros) / 1e6);
      x_hi = std::max(x_hi, static_cast<double>(row.time_unix_micros) / 1e6);
    }
  }
  for (const SpendSeries& s : series) {
    y_hi = std::max(y_hi, s.cumulative.back());
    for (const Step& g : grant_steps[{s.company, s.dataset}]) y_hi = std::max(y_hi, g.value);
    for (const Step& c : cap_steps[s.dataset]) y_hi = std::max(y_hi, c.value);
  }
  if (y_hi <= 0) y_hi = 1;

  std::vector<std::pair<std::string, std::string>> legend;
  for (size_t i = 0; i < series.size(); ++i) {
    legend.push_back({SeriesName(series[i].company, series[i].dataset), SeriesColour(i)});
  }
  constexpr double kPlotWidth = 590, kHeight = 420;
  const double kWidth = 80 + kPlotWidth + 24 + LegendWidth(legend);
  const Rect area{80, 24, kPlotWidth, kHeight - 24 - 66};
  const TimeScale x = TimeScale::Nice(x_lo, x_hi, area.left, area.right(), 6);
  const LinearScale y = LinearScale::Nice(0, y_hi * 1.03, area.bottom(), area.top, 6);
  const double x_end = x_hi;
  auto at = [](const LedgerRow* row) { return static_cast<double>(row->time_unix_micros) / 1e6; };

  std::string svg = SvgOpen(kWidth, kHeight, "cumulative privacy spend per company and dataset");
  AppendXAxis(svg, x, area, "time (UTC)");
  AppendYAxis(svg, y, area,
              composed_known ? "\u03b5: composed spend, grant, cap" : "\u03b5: \u03a3 of charges, grant, cap");
  // A step line through `steps` (flat until the next one) to the end of the ledger.
  auto step_path = [&](const std::vector<Step>& steps, const char* colour, const char* dash,
                       absl::string_view title) {
    if (steps.empty()) return std::string();
    std::string d = absl::StrFormat("M%.2f %.2f", x(steps[0].at), y(steps[0].value));
    for (size_t j = 1; j < steps.size(); ++j) {
      absl::StrAppendFormat(&d, "H%.2fV%.2f", x(steps[j].at), y(steps[j].value));
    }
    absl::StrAppendFormat(&d, "H%.2f", x(x_end));
    return absl::StrFormat(
        "<path class=\"budget-line\" d=\"%s\" fill=\"none\" stroke=\"%s\" "
        "stroke-width=\"1.5\" stroke-dasharray=\"%s\"><title>%s</title></path>",
        d, colour, dash, HtmlEscape(title));
  };
  std::set<std::string> capped;
  for (size_t i = 0; i < series.size(); ++i) {
    const SpendSeries& s = series[i];
    svg += step_path(grant_steps[{s.company, s.dataset}], SeriesColour(i), "6 4",
                     absl::StrCat("grant to ", s.company, " on ", s.dataset));
    if (capped.insert(s.dataset).second) {
      svg += step_path(cap_steps[s.dataset], "#777777", "2 3",
                       absl::StrCat("dataset-wide cap on ", s.dataset));
    }
  }
  std::string plot = "<g id=\"plot\">";
  for (size_t i = 0; i < series.size(); ++i) {
    const SpendSeries& s = series[i];
    const char* colour = SeriesColour(i);
    const std::string name = SeriesName(s.company, s.dataset);
    // A step line: flat until the next charge, then up; from 0 at the first charge to the
    // end of the ledger. The composed spend, with the plain sum faint above it; or the sum.
    auto steps = [&](const std::vector<double>& values) {
      std::string d = absl::StrFormat("M%.2f %.2f", x(at(s.charges[0])), y(0));
      for (size_t j = 0; j < s.charges.size(); ++j) {
        absl::StrAppendFormat(&d, "H%.2fV%.2f", x(at(s.charges[j])), y(values[j]));
      }
      absl::StrAppendFormat(&d, "H%.2f", x(x_end));
      return d;
    };
    if (composed_known) {
      absl::StrAppendFormat(&svg,
                            "<path class=\"sum-line\" d=\"%s\" fill=\"none\" stroke=\"%s\" "
                            "stroke-width=\"1\" stroke-opacity=\"0.35\"><title>%s</title>"
                            "</path>",
                            steps(s.cumulative), colour,
                            HtmlEscape(absl::StrCat(name, ": plain sum of \u03b5")));
    }
    absl::StrAppendFormat(&plot,
                          "<path class=\"line\" d=\"%s\" fill=\"none\" stroke=\"%s\" "
                          "stroke-width=\"2\" stroke-opacity=\"0.8\"/>",
                          steps(s.plotted), colour);
    for (size_t j = 0; j < s.charges.size(); ++j) {
      const LedgerRow& c = *s.charges[j];
      AppendMark(
          plot, x(at(&c)), y(s.plotted[j]), colour,
          absl::StrCat(name, ": seq ", c.seq, " at ", Time(c.time_unix_micros), ", ",
                       c.request_kind, " ", c.mechanism, " \u03b5 ", FormatNumber(c.epsilon, 6),
                       composed_known
                           ? absl::StrCat(" (composed ", FormatNumber(s.plotted[j], 6), ", sum ",
                                          FormatNumber(s.cumulative[j], 6), ")")
                           : absl::StrCat(" (total ", FormatNumber(s.cumulative[j], 6), ")")));
    }
    if (auto it = composed.find({s.company, s.dataset}); it != composed.end()) {
      const double cx = x(x_end), cy = y(it->second);
      absl::StrAppendFormat(&plot,
                            "<path class=\"composed\" d=\"M%.2f %.2fl6 6l-6 6l-6 -6z\" "
                            "fill=\"%s\"><title>%s</title></path>",
                            cx, cy - 6, colour,
                            HtmlEscape(absl::StrCat(name, ": composed spend now ",
                                                    FormatNumber(it->second, 6))));
    }
  }
  plot += "</g>";
  svg += plot;
  if (series.empty()) {
    absl::StrAppendFormat(&svg,
                          "<text class=\"axis-label\" x=\"%.2f\" y=\"%.2f\" "
                          "text-anchor=\"middle\">no charges yet</text>",
                          area.left + area.width / 2, area.top + area.height / 2);
  }
  AppendLegend(svg, area.right() + 24, area.top + 4, legend);
  svg += "</svg>";

  std::string body = VerificationTable(report.verification);
  body += CheckpointTable(report.checkpoint);
  body += BudgetsTable(report.budgets);
  body += GrantHistoryTable(report.ledger);
  body += KindTable(ordered);
  body +=
      "<table id=\"spend\"><caption>Charges per company and dataset (ledger)</caption><tr>"
      "<th>company</th><th>dataset</th><th>charges</th><th>\u03a3 \u03b5</th>"
      "<th>composed \u03b5</th><th>first</th><th>last</th></tr>";
  for (const SpendSeries& s : series) {
    absl::StrAppend(&body, "<tr>", Cell(s.company), Cell(s.dataset),
                    Cell(static_cast<int64_t>(s.charges.size())),
                    Cell(FormatNumber(s.cumulative.back(), 6)),
                    Cell(composed_known ? FormatNumber(s.plotted.back(), 6) : "\u2013"),
                    Cell(Time(s.charges.front()->time_unix_micros)),
                    Cell(Time(s.charges.back()->time_unix_micros)), "</tr>");
  }
  if (series.empty()) body += "<tr><td colspan=\"7\">no charges</td></tr>";
  body += "</table>";
  body += ChargesTable(ordered);
  body += AccessTable(report.access_log);

  std::vector<std::pair<std::string, std::string>> meta;
  if (!report.server.empty()) meta.push_back({"vault", report.server});
  if (!report.generated_at.empty()) meta.push_back({"generated", report.generated_at});
  if (!report.filters.empty()) meta.push_back({"rows", report.filters});
  meta.push_back({"ledger rows", absl::StrCat(report.ledger.size())});
  meta.push_back({"charges", absl::StrCat(ordered.size())});
  meta.push_back({"grants", absl::StrCat(grants)});
  meta.push_back({"caps", absl::StrCat(caps)});
  meta.push_back({"ledger", report.verification.ok ? "verified" : "FAILED verification"});
  if (report.checkpoint.present) {
    meta.push_back({"checkpoint", absl::StrCat(report.checkpoint.size, " rows, ",
                                               report.checkpoint.ok ? "verified" : "FAILED")});
  } else if (!report.checkpoint.ok) {
    meta.push_back({"checkpoint", "none served, FAILED"});
  }
  return HtmlPage(report.title, meta, svg,
                  absl::StrCat(
                  "Privacy spend of each company on each dataset over time: ",
                  composed_known
                      ? "what the accountant composes after each charge (the spend the privacy "
                        "filter admits against; recomputed from the ledger rows' costs at the "
                        "grant's \u03b4), the plain sum of the releases' \u03b5 faint above it"
                      : "the running sum of its charged releases' \u03b5",
                  ", one point per charge (hover for "
                  "its time, request and mechanism); dashed in the same colour, its grant, and "
                  "dotted grey, the dataset's cap, each a step at every grant or cap row; the "
                  "diamond at the right edge is what the accountant composes now (at most the "
                  "sum). Replays are not charges and do not appear."),
                  body);
}

// A text field a spreadsheet would read as a formula (=, +, -, @, tab, CR first) gets a
// leading apostrophe: an idempotency key or a name chosen by a company must not run in the
// auditor's spreadsheet.
std::string SpreadsheetText(const std::string& text) {
  if (!text.empty() && std::string_view("=+-@\t\r").find(text[0]) != std::string_view::npos) {
    return "'" + text;
  }
  return text;
}

std::string ChargesCsv(const BudgetsReport& report) {
  std::vector<std::vector<std::string>> rows;
  for (const LedgerRow* c : ChargesOf(report.ledger)) {
    rows.push_back({absl::StrCat(c->seq), Time(c->time_unix_micros),
                    SpreadsheetText(c->account), SpreadsheetText(c->dataset),
                    SpreadsheetText(c->request_kind), absl::StrFormat("%.17g", c->epsilon),
                    absl::StrFormat("%.17g", c->delta), SpreadsheetText(c->mechanism),
                    SpreadsheetText(c->idempotency_key), SpreadsheetText(c->artifact_id),
                    SpreadsheetText(c->job_id)});
  }
  return FormatCsv({"seq", "time", "company", "dataset", "request", "epsilon", "delta",
                    "mechanism", "idempotency_key", "artifact_id", "job_id"},
                   rows);
}

}  // namespace fairvault::client::report
