// The auditor's budgets report; see report_budgets_html.h.
#include "client/report/report_budgets_html.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
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
      "the sum of \u03b5 and the R\u00e9nyi bound at the grant's \u03b4), so it can be below "
      "the chart's plain sum of the releases' \u03b5.</p>";
  return html;
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
  std::vector<const LedgerRow*> ordered;
  int64_t grants = 0, caps = 0;
  for (const LedgerRow& row : report.ledger) {
    if (row.kind == "charge") {
      if (!std::isfinite(row.epsilon)) {
        return absl::InvalidArgumentError(
            absl::StrCat("ledger row ", row.seq, " has a non-finite epsilon"));
      }
      ordered.push_back(&row);
    }
    grants += row.kind == "grant";
    caps += row.kind == "cap";
  }
  std::stable_sort(ordered.begin(), ordered.end(),
                   [](const LedgerRow* a, const LedgerRow* b) { return a->seq < b->seq; });
  std::map<std::pair<std::string, std::string>, SpendSeries> by_key;
  for (const LedgerRow* row : ordered) {
    SpendSeries& s = by_key[{row->account, row->dataset}];
    s.company = row->account;
    s.dataset = row->dataset;
    s.charges.push_back(row);
    s.cumulative.push_back((s.cumulative.empty() ? 0 : s.cumulative.back()) + row->epsilon);
  }
  std::vector<SpendSeries> series;
  for (auto& [key, s] : by_key) series.push_back(std::move(s));

  // Extents: x is the ledger seq (every row, so grants before the first charge show as room on
  // the left), y the cumulative ε from 0.
  double x_lo = 0, x_hi = 1, y_hi = 0;
  if (!report.ledger.empty()) {
    x_lo = x_hi = static_cast<double>(report.ledger.front().seq);
    for (const LedgerRow& row : report.ledger) {
      x_lo = std::min(x_lo, static_cast<double>(row.seq));
      x_hi = std::max(x_hi, static_cast<double>(row.seq));
    }
  }
  for (const SpendSeries& s : series) y_hi = std::max(y_hi, s.cumulative.back());
  if (y_hi <= 0) y_hi = 1;

  constexpr double kWidth = 880, kHeight = 420, kLegendWidth = 210;
  const Rect area{80, 24, kWidth - 80 - kLegendWidth, kHeight - 24 - 66};
  const LinearScale x = LinearScale::Nice(x_lo, x_hi, area.left, area.right(), 6);
  const LinearScale y = LinearScale::Nice(0, y_hi * 1.03, area.bottom(), area.top, 6);

  std::string svg = SvgOpen(kWidth, kHeight, "cumulative privacy spend per company and dataset");
  AppendXAxis(svg, x, area, "ledger seq (time order)");
  AppendYAxis(svg, y, area, "cumulative \u03b5 charged");
  std::string plot = "<g id=\"plot\">";
  std::vector<std::pair<std::string, std::string>> legend;
  for (size_t i = 0; i < series.size(); ++i) {
    const SpendSeries& s = series[i];
    const char* colour = SeriesColour(i);
    const std::string name = SeriesName(s.company, s.dataset);
    legend.push_back({name, colour});
    // A step line: flat at the running total until the next charge, then up; from 0 at the
    // first charge's seq to the last seq of the ledger.
    std::string d = absl::StrFormat("M%.2f %.2f", x(static_cast<double>(s.charges[0]->seq)), y(0));
    for (size_t j = 0; j < s.charges.size(); ++j) {
      absl::StrAppendFormat(&d, "H%.2fV%.2f", x(static_cast<double>(s.charges[j]->seq)),
                            y(s.cumulative[j]));
    }
    absl::StrAppendFormat(&d, "H%.2f", x(x_hi));
    absl::StrAppendFormat(&plot,
                          "<path class=\"line\" d=\"%s\" fill=\"none\" stroke=\"%s\" "
                          "stroke-width=\"2\" stroke-opacity=\"0.8\"/>",
                          d, colour);
    for (size_t j = 0; j < s.charges.size(); ++j) {
      const LedgerRow& c = *s.charges[j];
      AppendMark(
          plot, x(static_cast<double>(c.seq)), y(s.cumulative[j]), colour,
          absl::StrCat(name, ": seq ", c.seq, " at ", Time(c.time_unix_micros), ", ",
                       c.request_kind, " ", c.mechanism, " \u03b5 ", FormatNumber(c.epsilon, 6),
                       " (total ", FormatNumber(s.cumulative[j], 6), ")"));
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
  body += BudgetsTable(report.budgets);
  body +=
      "<table id=\"spend\"><caption>Charges per company and dataset (ledger)</caption><tr>"
      "<th>company</th><th>dataset</th><th>charges</th><th>\u03a3 \u03b5</th>"
      "<th>first</th><th>last</th></tr>";
  for (const SpendSeries& s : series) {
    absl::StrAppend(&body, "<tr>", Cell(s.company), Cell(s.dataset),
                    Cell(static_cast<int64_t>(s.charges.size())),
                    Cell(FormatNumber(s.cumulative.back(), 6)),
                    Cell(Time(s.charges.front()->time_unix_micros)),
                    Cell(Time(s.charges.back()->time_unix_micros)), "</tr>");
  }
  if (series.empty()) body += "<tr><td colspan=\"6\">no charges</td></tr>";
  body += "</table>";
  body += AccessTable(report.access_log);

  std::vector<std::pair<std::string, std::string>> meta;
  if (!report.server.empty()) meta.push_back({"vault", report.server});
  if (!report.generated_at.empty()) meta.push_back({"generated", report.generated_at});
  meta.push_back({"ledger rows", absl::StrCat(report.ledger.size())});
  meta.push_back({"charges", absl::StrCat(ordered.size())});
  meta.push_back({"grants", absl::StrCat(grants)});
  meta.push_back({"caps", absl::StrCat(caps)});
  meta.push_back({"ledger", report.verification.ok ? "verified" : "FAILED verification"});
  return HtmlPage(report.title, meta, svg,
                  "Cumulative privacy spend of each company on each dataset: the running sum of "
                  "its charged releases' \u03b5 in ledger order, one point per charge (hover for "
                  "its time, request and mechanism). Replays are not charges and do not appear.",
                  body);
}

}  // namespace fairvault::client::report
