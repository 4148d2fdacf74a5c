// The trade-off sweep report and its CSV input; the audit reports are in
// report_audit_html.cc.
#include "client/report/report_html.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <numeric>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/report/report_svg.h"
#include "core/util/decimal.h"

namespace fairvault::client::report {
namespace {

// The column's index, or -1 when the header lacks it.
int OptionalColumn(const CsvTable& table, absl::string_view name) {
  absl::StatusOr<size_t> index = table.ColumnIndex(name);
  return index.ok() ? static_cast<int>(*index) : -1;
}

absl::Status CellError(const CsvTable& table, absl::string_view source, size_t row, int column,
                       absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(source, ":", table.row_lines[row], ": column '",
                                                 table.header[column], "' must be ", what,
                                                 " (got '", table.rows[row][column], "')"));
}

absl::StatusOr<double> FiniteCell(const CsvTable& table, absl::string_view source, size_t row,
                                  int column) {
  double value = 0;
  if (!core::ParseDecimal(table.rows[row][column], &value) || !std::isfinite(value)) {
    return CellError(table, source, row, column, "a finite number");
  }
  return value;
}

// An interval from two optional columns: none when both cells are empty.
absl::StatusOr<std::optional<Range>> IntervalCells(const CsvTable& table, absl::string_view source,
                                                   size_t row, int lo_column, int hi_column) {
  if (lo_column < 0) return std::optional<Range>();
  const bool lo_empty = table.rows[row][lo_column].empty();
  const bool hi_empty = table.rows[row][hi_column].empty();
  if (lo_empty && hi_empty) return std::optional<Range>();
  if (lo_empty || hi_empty) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ":", table.row_lines[row], ": give both '", table.header[lo_column],
                     "' and '", table.header[hi_column], "', or leave both empty"));
  }
  Range range;
  absl::StatusOr<double> lo = FiniteCell(table, source, row, lo_column);
  if (!lo.ok()) return lo.status();
  absl::StatusOr<double> hi = FiniteCell(table, source, row, hi_column);
  if (!hi.ok()) return hi.status();
  if (*lo > *hi) {
    return CellError(table, source, row, lo_column,
                     absl::StrCat("<= ", table.header[hi_column], " (", *hi, ")"));
  }
  range.lo = *lo;
  range.hi = *hi;
  return std::optional<Range>(range);
}

// Point labels that do not overlap: each goes to the first free spot of four around its
// point (right or left, above or below; left first near the right edge, clear of the legend),
// and is left out when all four are taken. The point's mark keeps its tooltip and the table
// under the chart lists every point, so nothing is lost. Text extents are estimated from the
// 11px label font.
class PointLabels {
 public:
  explicit PointLabels(const Rect& area) : area_(area) {}

  void Place(std::string& svg, double px, double py, const std::string& text) {
    const double width = kCharWidth * static_cast<double>(CodePoints(text));
    const bool prefer_left = px > area_.left + 0.85 * area_.width;
    for (int attempt = 0; attempt < 4; ++attempt) {
      const bool left = prefer_left != (attempt >= 2);
      const double baseline = (attempt % 2 == 0) ? py - 7 : py + 7 + kHeight;
      const Box box{left ? px - 7 - width : px + 7, baseline - kHeight,
                    left ? px - 7 : px + 7 + width, baseline + 2};
      if (box.x0 < area_.left || box.x1 > area_.right() + 20 || box.y0 < area_.top - 20 ||
          box.y1 > area_.bottom()) {
        continue;
      }
      bool free = true;
      for (const Box& other : placed_) free = free && !box.Overlaps(other);
      if (!free) continue;
      placed_.push_back(box);
      absl::StrAppendFormat(&svg,
                            "<text class=\"pt-label\" x=\"%.2f\" y=\"%.2f\" "
                            "text-anchor=\"%s\">%s</text>",
                            left ? px - 7 : px + 7, baseline, left ? "end" : "start",
                            HtmlEscape(text));
      return;
    }
  }

 private:
  static constexpr double kCharWidth = 6.5;  // average advance of the 11px label font
  static constexpr double kHeight = 11;
  struct Box {
    double x0, y0, x1, y1;
    bool Overlaps(const Box& o) const { return x0 < o.x1 && o.x0 < x1 && y0 < o.y1 && o.y0 < y1; }
  };
  static size_t CodePoints(const std::string& text) {
    size_t n = 0;
    for (unsigned char c : text) n += (c & 0xC0) != 0x80;
    return n;
  }
  Rect area_;
  std::vector<Box> placed_;
};

std::string EpsilonLabel(double epsilon) {
  return std::isinf(epsilon) ? "\u03b5=\u221e" : absl::StrCat("\u03b5=", FormatNumber(epsilon));
}

// [min, max] of the values and interval ends, padded by 3% (not below 0 if all are >= 0).
std::pair<double, double> PaddedExtent(const std::vector<double>& values) {
  const auto [lo_it, hi_it] = std::minmax_element(values.begin(), values.end());
  double lo = *lo_it, hi = *hi_it;
  const double pad = 0.03 * (hi - lo);
  return {lo >= 0 ? std::max(0.0, lo - pad) : lo - pad, hi + pad};
}

}  // namespace

absl::StatusOr<Sweep> SweepFromCsv(const CsvTable& table, absl::string_view source) {
  int required[3];
  const char* names[3] = {"epsilon", "error", "violation"};
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<size_t> index = table.ColumnIndex(names[i]);
    if (!index.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": ", index.status().message()));
    }
    required[i] = static_cast<int>(*index);
  }
  const int series = OptionalColumn(table, "series");
  const int cost = OptionalColumn(table, "cost_epsilon");
  const int kind = OptionalColumn(table, "kind");
  int ends[4];
  const char* end_names[4] = {"error_lo", "error_hi", "violation_lo", "violation_hi"};
  for (int i = 0; i < 4; ++i) ends[i] = OptionalColumn(table, end_names[i]);
  for (int i = 0; i < 4; i += 2) {
    if ((ends[i] < 0) != (ends[i + 1] < 0)) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": give both columns ", end_names[i],
                                                     " and ", end_names[i + 1], ", or neither"));
    }
  }
  if (table.rows.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": no points (only a header row)"));
  }
  Sweep sweep;
  // The provenance columns, from the first row holding each.
  for (const auto& [column, label] : std::vector<std::pair<const char*, const char*>>{
           {"dataset", "dataset"}, {"company", "company"}, {"run_id", "run id"},
           {"measure", "violation"}, {"holdout", "hold-out"}, {"group_column", "groups"}}) {
    const int c = OptionalColumn(table, column);
    if (c < 0) continue;
    for (const std::vector<std::string>& row : table.rows) {
      if (!row[c].empty()) {
        sweep.provenance.push_back({label, row[c]});
        break;
      }
    }
  }
  for (size_t r = 0; r < table.rows.size(); ++r) {
    SweepPoint point;
    if (series >= 0) point.series = table.rows[r][series];
    double epsilon = 0;
    if (!core::ParseDecimal(table.rows[r][required[0]], &epsilon) || std::isnan(epsilon) ||
        epsilon <= 0) {
      return CellError(table, source, r, required[0], "> 0 (or inf)");
    }
    point.epsilon = epsilon;
    absl::StatusOr<double> error = FiniteCell(table, source, r, required[1]);
    if (!error.ok()) return error.status();
    absl::StatusOr<double> violation = FiniteCell(table, source, r, required[2]);
    if (!violation.ok()) return violation.status();
    point.error = *error;
    point.violation = *violation;
    absl::StatusOr<std::optional<Range>> error_ci =
        IntervalCells(table, source, r, ends[0], ends[1]);
    if (!error_ci.ok()) return error_ci.status();
    absl::StatusOr<std::optional<Range>> violation_ci =
        IntervalCells(table, source, r, ends[2], ends[3]);
    if (!violation_ci.ok()) return violation_ci.status();
    point.error_ci = *error_ci;
    point.violation_ci = *violation_ci;
    if (cost >= 0 && !table.rows[r][cost].empty()) {
      absl::StatusOr<double> c = FiniteCell(table, source, r, cost);
      if (!c.ok()) return c.status();
      point.cost_epsilon = *c;
    }
    if (kind >= 0 && table.rows[r][kind] == "baseline") {
      sweep.baselines.push_back(std::move(point));
    } else {
      sweep.points.push_back(std::move(point));
    }
  }
  return sweep;
}

namespace {

// The series in order of first appearance, each with its points' indices.
struct SeriesIndex {
  std::vector<std::string> names;
  std::map<std::string, std::vector<size_t>> members;
};

SeriesIndex IndexSeries(const Sweep& sweep) {
  SeriesIndex index;
  for (size_t i = 0; i < sweep.points.size(); ++i) {
    const std::string& name = sweep.points[i].series;
    if (index.members.find(name) == index.members.end()) index.names.push_back(name);
    index.members[name].push_back(i);
  }
  return index;
}

// The x values (errors and their interval ends) and y values of some points.
void Extents(const Sweep& sweep, const std::vector<size_t>& points, std::vector<double>& xs,
             std::vector<double>& ys) {
  for (size_t i : points) {
    const SweepPoint& p = sweep.points[i];
    xs.push_back(p.error);
    ys.push_back(p.violation);
    if (p.error_ci) xs.insert(xs.end(), {p.error_ci->lo, p.error_ci->hi});
    if (p.violation_ci) ys.insert(ys.end(), {p.violation_ci->lo, p.violation_ci->hi});
  }
}

// One plotting area: its series share its y scale.
struct Panel {
  Rect area;
  std::vector<size_t> series;  // indices into SeriesIndex::names
};

}  // namespace

bool SweepUsesFacets(const Sweep& sweep) {
  const SeriesIndex index = IndexSeries(sweep);
  if (index.names.size() < 2 || sweep.facets == SweepFacets::kNever) return false;
  if (sweep.facets == SweepFacets::kAlways) return true;
  double smallest = std::numeric_limits<double>::infinity(), largest = 0;
  for (const std::string& name : index.names) {
    std::vector<double> xs, ys;
    Extents(sweep, index.members.at(name), xs, ys);
    double scale = 0;
    for (double y : ys) scale = std::max(scale, std::abs(y));
    if (!(scale > 0) || !std::isfinite(scale)) continue;  // an all-zero series fits any axis
    smallest = std::min(smallest, scale);
    largest = std::max(largest, scale);
  }
  return largest > kSweepFacetRatio * smallest;
}

absl::StatusOr<std::string> RenderSweepHtml(const Sweep& sweep) {
  if (sweep.points.empty()) return absl::InvalidArgumentError("the sweep has no points to plot");
  for (const SweepPoint& p : sweep.points) {
    if (!std::isfinite(p.error) || !std::isfinite(p.violation) || std::isnan(p.epsilon)) {
      return absl::InvalidArgumentError(absl::StrCat("sweep point of series '", p.series,
                                                     "' at epsilon ", p.epsilon,
                                                     " has a non-finite error or violation"));
    }
    if (sweep.log_x && (!(p.error > 0) || (p.error_ci && !(p.error_ci->lo > 0)))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a log x axis needs every error and error interval end > 0: series '", p.series, "' at ",
          EpsilonLabel(p.epsilon), " has error ", FormatNumber(p.error),
          p.error_ci ? absl::StrCat(" [", FormatNumber(p.error_ci->lo), ", ",
                                    FormatNumber(p.error_ci->hi), "]")
                     : ""));
    }
  }
  // Series in order of first appearance; points of a series joined in order of epsilon.
  const SeriesIndex index = IndexSeries(sweep);
  const std::vector<std::string>& series = index.names;
  const bool facets = SweepUsesFacets(sweep);

  // One chart with the legend to its right, or panels two to a row beside the legend; the
  // legend's column as wide as its longest entry.
  std::vector<std::pair<std::string, std::string>> legend;
  for (size_t s = 0; s < series.size(); ++s) {
    legend.push_back({series[s].empty() ? "points" : series[s], SeriesColour(s)});
  }
  const double kLegendWidth = std::max(120.0, 24 + LegendWidth(legend));
  const double kWidth = 670 + kLegendWidth;
  std::vector<Panel> panels;
  double height = 520;
  if (!facets) {
    std::vector<size_t> all(series.size());
    std::iota(all.begin(), all.end(), 0);
    panels.push_back({Rect{80, 30, kWidth - 80 - kLegendWidth, height - 30 - 70}, all});
  } else {
    const size_t columns = std::min<size_t>(2, series.size());
    const size_t rows = (series.size() + columns - 1) / columns;
    const double panel_width = (kWidth - kLegendWidth) / static_cast<double>(columns);
    constexpr double kPanelHeight = 260;
    height = kPanelHeight * static_cast<double>(rows) + 10;
    for (size_t s = 0; s < series.size(); ++s) {
      const double left = panel_width * static_cast<double>(s % columns);
      const double top = kPanelHeight * static_cast<double>(s / columns);
      panels.push_back(
          {Rect{left + 72, top + 34, panel_width - 72 - 14, kPanelHeight - 34 - 62}, {s}});
    }
  }
  std::vector<double> all_xs, all_ys;
  std::vector<size_t> every(sweep.points.size());
  std::iota(every.begin(), every.end(), 0);
  Extents(sweep, every, all_xs, all_ys);
  for (const SweepPoint& b : sweep.baselines) {  // the references are in every panel
    if (std::isfinite(b.error) && (!sweep.log_x || b.error > 0)) all_xs.push_back(b.error);
  }
  const auto [x_min, x_max] = PaddedExtent(all_xs);
  const std::string x_title =
      sweep.log_x ? absl::StrCat(sweep.x_label, " (log scale)") : sweep.x_label;

  std::string svg = SvgOpen(kWidth, height, sweep.title);
  std::string marks = "<g id=\"plot\">";
  std::string body =
      "<table><caption>Points</caption><tr><th>series</th><th>\u03b5</th><th>error</th>"
      "<th>violation</th><th>cost \u03b5</th></tr>";
  auto cost_cell = [](const SweepPoint& p) {
    return p.cost_epsilon ? FormatNumber(*p.cost_epsilon) : std::string("\u2013");
  };
  for (const Panel& panel : panels) {
    const Rect& area = panel.area;
    // The same x domain in every panel: the scales differ only in their pixel range.
    std::unique_ptr<Scale> x;
    if (sweep.log_x) {
      const auto [lo_it, hi_it] = std::minmax_element(all_xs.begin(), all_xs.end());
      x = std::make_unique<LogScale>(
          LogScale::Nice(*lo_it, *hi_it, area.left, area.right(), facets ? 4 : 6));
    } else {
      x = std::make_unique<LinearScale>(
          LinearScale::Nice(x_min, x_max, area.left, area.right(), facets ? 4 : 6));
    }
    std::vector<size_t> panel_points;
    for (size_t s : panel.series) {
      const std::vector<size_t>& m = index.members.at(series[s]);
      panel_points.insert(panel_points.end(), m.begin(), m.end());
    }
    std::vector<double> xs, ys;
    Extents(sweep, panel_points, xs, ys);
    for (const SweepPoint& b : sweep.baselines) {
      if (std::isfinite(b.violation)) ys.push_back(b.violation);
    }
    auto [y_min, y_max] = PaddedExtent(ys);
    if (y_min == 0 && y_max == 0) y_max = 0.1;  // no violation at all: an axis from 0 up
    const LinearScale y = LinearScale::Nice(y_min, y_max, area.bottom(), area.top, facets ? 4 : 6);
    if (facets) {
      const size_t s = panel.series[0];
      absl::StrAppendFormat(&svg,
                            "<g class=\"panel\"><text class=\"panel-title\" x=\"%.2f\" "
                            "y=\"%.2f\" fill=\"%s\">%s</text>",
                            area.left, area.top - 12, SeriesColour(s), HtmlEscape(legend[s].first));
    }
    AppendXAxis(svg, *x, area, x_title);
    AppendYAxis(svg, y, area, sweep.y_label);
    if (facets) svg += "</g>";

    PointLabels labels(area);
    for (size_t s : panel.series) {
      const char* colour = SeriesColour(s);
      const std::string& name = legend[s].first;
      std::vector<size_t> order = index.members.at(series[s]);
      std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        return sweep.points[a].epsilon < sweep.points[b].epsilon;
      });
      std::string polyline;
      for (size_t i : order) {
        absl::StrAppendFormat(&polyline, "%.2f,%.2f ", (*x)(sweep.points[i].error),
                              y(sweep.points[i].violation));
      }
      absl::StrAppendFormat(&marks,
                            "<polyline class=\"line\" points=\"%s\" fill=\"none\" stroke=\"%s\" "
                            "stroke-width=\"1.5\" stroke-opacity=\"0.7\"/>",
                            polyline, colour);
      for (size_t i : order) {
        const SweepPoint& p = sweep.points[i];
        const double px = (*x)(p.error), py = y(p.violation);
        if (p.error_ci) {
          AppendHorizontalWhisker(marks, (*x)(p.error_ci->lo), (*x)(p.error_ci->hi), py, colour);
        }
        if (p.violation_ci) {
          AppendVerticalWhisker(marks, px, y(p.violation_ci->lo), y(p.violation_ci->hi), colour);
        }
        const std::string error_text = p.error_ci
                                           ? FormatInterval(p.error, p.error_ci->lo, p.error_ci->hi)
                                           : FormatNumber(p.error);
        const std::string violation_text =
            p.violation_ci ? FormatInterval(p.violation, p.violation_ci->lo, p.violation_ci->hi)
                           : FormatNumber(p.violation);
        AppendMark(marks, px, py, colour,
                   absl::StrCat(name, " ", EpsilonLabel(p.epsilon), ": error ", error_text,
                                ", violation ", violation_text));
        labels.Place(marks, px, py, EpsilonLabel(p.epsilon));
        absl::StrAppend(&body, "<tr><td>", HtmlEscape(name), "</td><td>",
                        std::isinf(p.epsilon) ? "\u221e" : FormatNumber(p.epsilon), "</td><td>",
                        HtmlEscape(error_text), "</td><td>", HtmlEscape(violation_text),
                        "</td><td>", cost_cell(p), "</td></tr>");
      }
    }
    // The references: a grey cross with its name, in every panel.
    for (const SweepPoint& b : sweep.baselines) {
      if (!std::isfinite(b.error) || !std::isfinite(b.violation)) continue;
      if (sweep.log_x && !(b.error > 0)) continue;
      const double px = (*x)(b.error), py = y(b.violation);
      absl::StrAppendFormat(&svg,
                            "<path class=\"baseline\" d=\"M%.2f %.2fl10 10m0 -10l-10 10\" "
                            "stroke=\"#555\" stroke-width=\"2\"><title>%s</title></path>",
                            px - 5, py - 5,
                            HtmlEscape(absl::StrCat(b.series, ": error ", FormatNumber(b.error),
                                                    ", violation ", FormatNumber(b.violation))));
      labels.Place(svg, px, py, b.series);
    }
  }
  for (const SweepPoint& b : sweep.baselines) {
    absl::StrAppend(&body, "<tr><td><i>", HtmlEscape(b.series), "</i></td><td>\u2013</td><td>",
                    FormatNumber(b.error), "</td><td>", FormatNumber(b.violation), "</td><td>",
                    cost_cell(b), "</td></tr>");
  }
  svg += marks;
  svg += "</g>";
  AppendLegend(svg, kWidth - kLegendWidth + 24, 34, legend);
  svg += "</svg>";
  body += "</table>";
  std::vector<std::pair<std::string, std::string>> meta = {
      {"points", absl::StrCat(sweep.points.size())}, {"series", absl::StrCat(series.size())}};
  if (facets) meta.push_back({"panels", absl::StrCat(panels.size())});
  double total_cost = 0;
  bool costed = false;
  for (const SweepPoint& p : sweep.points) {
    if (p.cost_epsilon) total_cost += *p.cost_epsilon, costed = true;
  }
  if (costed) meta.push_back({"total cost \u03b5", FormatNumber(total_cost)});
  return HtmlPage(
      sweep.title, meta, svg,
      absl::StrCat(
          sweep.y_label, " against ", sweep.x_label, sweep.log_x ? " (log scale)" : "",
          facets ? "; one panel per series, each with its own y scale (the x scale is shared)" : "",
          "; each point is labelled with its privacy budget \u03b5 where labels do not overlap "
          "(hover a point, or see the table), points of "
          "a series are joined in order of \u03b5, whiskers are confidence "
          "intervals where given",
          sweep.baselines.empty() ? "." : "; grey crosses are references without privacy cost."),
      body, sweep.provenance);
}

}  // namespace fairvault::client::report
