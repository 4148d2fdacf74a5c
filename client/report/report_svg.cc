// SVG building blocks of the HTML reports; see report_svg.h.
#include "client/report/report_svg.h"

#include <algorithm>
#include <cmath>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"

namespace fairvault::client::report {

std::string HtmlEscape(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

std::string HtmlPage(absl::string_view title, const Pairs& meta, absl::string_view svg,
                     absl::string_view caption, absl::string_view body_html,
                     const Pairs& provenance) {
  static constexpr absl::string_view kStyle =
      "body{font-family:system-ui,'DejaVu Sans',Arial,sans-serif;color:#222;max-width:960px;"
      "margin:24px auto;padding:0 16px}"
      "h1{font-size:22px;margin:0 0 6px}"
      ".meta{color:#555;font-size:14px;margin:0 0 14px}.meta span{margin-right:18px}"
      "figure{margin:0 0 18px}figcaption,.note{color:#666;font-size:13px}"
      "svg{display:block;max-width:100%;height:auto;font-size:12px}svg text{fill:#333}"
      ".grid{stroke:#e8e8e8}.tick,.axis-line{stroke:#888}"
      ".axis-label,.panel-title{font-size:13px;font-weight:600}"
      ".band{fill:#f6f6f6}.pt-label{font-size:11px;fill:#444}.row-label{font-size:12px}"
      "table{border-collapse:collapse;font-size:13px;margin:6px 0 20px}"
      "th,td{border-bottom:1px solid #ddd;padding:4px 10px;text-align:right}"
      "th:first-child,td:first-child{text-align:left}"
      "caption{text-align:left;font-weight:600;padding:4px 0;white-space:nowrap}"
      "td{white-space:nowrap}table.provenance td,table.provenance th{text-align:left}"
      ".wide{overflow-x:auto;max-width:100%}";
  // Records the laid-out size of the plotted marks, the number of panels and where the first x
  // axis's tick labels were laid out, for a headless-browser test.
  static constexpr absl::string_view kScript =
      "window.addEventListener('load',function(){"
      "var plot=document.getElementById('plot');"
      "var box=plot?plot.getBBox():{width:0,height:0};"
      "var d=document.body.dataset;"
      "d.chartWidth=String(Math.round(box.width*100)/100);"
      "d.chartHeight=String(Math.round(box.height*100)/100);"
      "d.points=String(plot?plot.querySelectorAll('.mark').length:0);"
      "d.panels=String(document.querySelectorAll('#chart .panel').length);"
      "var xa=document.querySelector('#chart .x-axis');"
      "d.xTicks=xa?Array.prototype.map.call(xa.querySelectorAll('.tick-label'),function(t){"
      "var b=t.getBBox();return t.textContent+'@'+Math.round((b.x+b.width/2)*100)/100;"
      "}).join(';'):'';});";
  std::string page = absl::StrCat(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\"><title>",
      HtmlEscape(title), "</title>\n<style>", kStyle, "</style></head>\n<body>\n<h1>",
      HtmlEscape(title), "</h1>\n<p class=\"meta\">");
  for (const auto& [label, value] : meta) {
    absl::StrAppend(&page, "<span>", HtmlEscape(label), ": <b>", HtmlEscape(value), "</b></span>");
  }
  absl::StrAppend(&page, "</p>\n");
  if (!provenance.empty()) {
    page += "<table class=\"provenance\"><caption>Provenance</caption>";
    for (const auto& [label, value] : provenance) {
      absl::StrAppend(&page, "<tr><th>", HtmlEscape(label), "</th><td>", HtmlEscape(value),
                      "</td></tr>");
    }
    page += "</table>\n";
  }
  absl::StrAppend(&page, "<figure>", svg, "\n<figcaption>", HtmlEscape(caption),
                  "</figcaption></figure>\n", body_html, "\n<script>", kScript,
                  "</script>\n</body></html>\n");
  return page;
}

std::string SvgOpen(double width, double height, absl::string_view label) {
  return absl::StrFormat(
      "<svg id=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
      "viewBox=\"0 0 %.0f %.0f\" role=\"img\" aria-label=\"%s\">",
      width, height, width, height, HtmlEscape(label));
}

std::string FormatNumber(double value, int significant) {
  if (!std::isfinite(value)) return "n/a";
  if (value == 0) return "0";  // also turns -0 into 0
  return absl::StrFormat("%.*g", significant, value);
}

std::string FormatRate(double value) {
  if (!std::isfinite(value)) return "n/a";
  if (value == 0) return "0.0000";  // also turns -0 into 0
  return absl::StrFormat("%.4f", value);
}

std::string FormatRateInterval(double estimate, double lo, double hi) {
  return absl::StrCat(FormatRate(estimate), " [", FormatRate(lo), ", ", FormatRate(hi), "]");
}

std::string FormatInterval(double estimate, double lo, double hi, int significant) {
  return absl::StrCat(FormatNumber(estimate, significant), " [", FormatNumber(lo, significant),
                      ", ", FormatNumber(hi, significant), "]");
}

void AppendMark(std::string& svg, double x, double y, const char* colour,
                absl::string_view tooltip, bool hollow) {
  if (hollow) {
    absl::StrAppendFormat(&svg,
                          "<circle class=\"mark hollow\" cx=\"%.2f\" cy=\"%.2f\" r=\"4\" "
                          "fill=\"#fff\" stroke=\"%s\" stroke-width=\"2\"><title>%s</title>"
                          "</circle>",
                          x, y, colour, HtmlEscape(tooltip));
    return;
  }
  absl::StrAppendFormat(&svg,
                        "<circle class=\"mark\" cx=\"%.2f\" cy=\"%.2f\" r=\"4.5\" fill=\"%s\" "
                        "stroke=\"#fff\" stroke-width=\"1\"><title>%s</title></circle>",
                        x, y, colour, HtmlEscape(tooltip));
}

void AppendHorizontalWhisker(std::string& svg, double x_lo, double x_hi, double y,
                             const char* colour) {
  if (!std::isfinite(x_lo) || !std::isfinite(x_hi) || !std::isfinite(y)) return;
  absl::StrAppendFormat(&svg,
                        "<path class=\"ci\" d=\"M%.2f %.2fV%.2fM%.2f %.2fH%.2fM%.2f %.2fV%.2f\" "
                        "stroke=\"%s\" stroke-width=\"1.5\" fill=\"none\"/>",
                        x_lo, y - 4, y + 4, x_lo, y, x_hi, x_hi, y - 4, y + 4, colour);
}

void AppendVerticalWhisker(std::string& svg, double x, double y_lo, double y_hi,
                           const char* colour) {
  if (!std::isfinite(x) || !std::isfinite(y_lo) || !std::isfinite(y_hi)) return;
  absl::StrAppendFormat(&svg,
                        "<path class=\"ci\" d=\"M%.2f %.2fH%.2fM%.2f %.2fV%.2fM%.2f %.2fH%.2f\" "
                        "stroke=\"%s\" stroke-width=\"1.5\" fill=\"none\"/>",
                        x - 4, y_lo, x + 4, x, y_lo, y_hi, x - 4, y_hi, x + 4, colour);
}

LinearScale LinearScale::Nice(double min, double max, double pixel_from, double pixel_to,
                              int target_ticks) {
  if (!std::isfinite(min) || !std::isfinite(max)) min = 0, max = 1;
  if (min > max) std::swap(min, max);
  // Beyond ±1e300 the span and the step overflow; such values are drawn at the edge.
  min = std::clamp(min, -1e300, 1e300);
  max = std::clamp(max, -1e300, 1e300);
  if (max - min <= 1e-12 * std::max(1.0, std::abs(max))) {
    const double pad = min == 0 ? 0.5 : std::abs(min) * 0.1;
    min -= pad;
    max += pad;
  }
  const double raw = (max - min) / std::max(1, target_ticks);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double r = raw / magnitude;
  const double step = (r <= 1 ? 1 : r <= 2 ? 2 : r <= 5 ? 5 : 10) * magnitude;

  LinearScale scale;
  // The 1e-9 slack keeps a bound that already is a tick from growing by one step.
  scale.lo_ = std::floor(min / step + 1e-9) * step;
  scale.hi_ = std::ceil(max / step - 1e-9) * step;
  scale.pixel_from_ = pixel_from;
  scale.pixel_to_ = pixel_to;
  scale.decimals_ = std::max(0, static_cast<int>(-std::floor(std::log10(step) + 1e-9)));
  const int count = static_cast<int>(std::round((scale.hi_ - scale.lo_) / step));
  for (int i = 0; i <= count; ++i) scale.ticks_.push_back(scale.lo_ + i * step);
  return scale;
}

double LinearScale::operator()(double value) const {
  return pixel_from_ + (value - lo_) / (hi_ - lo_) * (pixel_to_ - pixel_from_);
}

std::string LinearScale::TickLabel(double value) const {
  std::string label = absl::StrFormat("%.*f", decimals_, value);
  if (label.find_first_not_of("-0.") == std::string::npos) return "0";  // "-0.0" → "0"
  return label;
}

TimeScale TimeScale::Nice(double min_seconds, double max_seconds, double pixel_from,
                          double pixel_to, int target_ticks) {
  double min = min_seconds, max = max_seconds;
  if (!std::isfinite(min) || !std::isfinite(max)) min = 0, max = 60;
  if (min > max) std::swap(min, max);
  if (max - min < 1) min -= 60, max += 60;
  constexpr double kSteps[] = {1,    2,    5,     10,    15,    30,    60,     120,
                               300,  600,  900,   1800,  3600,  7200,  10800,  21600,
                               43200, 86400, 172800, 604800, 1209600, 2592000};
  const double raw = (max - min) / std::max(1, target_ticks);
  double step = kSteps[std::size(kSteps) - 1];
  for (double s : kSteps) {
    if (s >= raw) {
      step = s;
      break;
    }
  }
  TimeScale scale;
  scale.step_ = step;
  scale.lo_ = std::floor(min / step) * step;  // Unix time is UTC: steps align to UTC
  scale.hi_ = std::ceil(max / step) * step;
  scale.pixel_from_ = pixel_from;
  scale.pixel_to_ = pixel_to;
  const int count = static_cast<int>(std::round((scale.hi_ - scale.lo_) / step));
  for (int i = 0; i <= count; ++i) scale.ticks_.push_back(scale.lo_ + i * step);
  const bool one_day = std::floor(scale.lo_ / 86400) == std::floor((scale.hi_ - 1) / 86400);
  scale.format_ = step >= 86400 ? "%Y-%m-%d"
                  : !one_day    ? "%m-%d %H:%M"
                  : step < 60   ? "%H:%M:%S"
                                : "%H:%M";
  return scale;
}

double TimeScale::operator()(double value) const {
  return pixel_from_ + (value - lo_) / (hi_ - lo_) * (pixel_to_ - pixel_from_);
}

std::string TimeScale::TickLabel(double value) const {
  return absl::FormatTime(format_, absl::FromUnixSeconds(static_cast<int64_t>(std::llround(value))),
                          absl::UTCTimeZone());
}

LogScale LogScale::Nice(double min, double max, double pixel_from, double pixel_to,
                        int target_ticks) {
  if (!std::isfinite(min) || !std::isfinite(max) || !(min > 0) || !(max > 0)) min = 0.1, max = 1;
  if (min > max) std::swap(min, max);
  // Beyond 10^±250 the padded bounds and their decades overflow; drawn at the edge.
  min = std::clamp(min, 1e-250, 1e250);
  max = std::clamp(max, 1e-250, 1e250);
  if (max / min < 1 + 1e-9) {
    min /= 1.1;
    max *= 1.1;
  }
  const double pad = 0.03 * std::log10(max / min);
  const double lo = min / std::pow(10.0, pad), hi = max * std::pow(10.0, pad);
  const double decades = std::log10(hi / lo);

  LogScale scale;
  scale.pixel_from_ = pixel_from;
  scale.pixel_to_ = pixel_to;
  if (decades < 0.5) {
    // Too narrow for 1..9 × 10^k to give more than a tick or two: a linear scale's ticks.
    const LinearScale linear = LinearScale::Nice(lo, hi, 0, 1, target_ticks);
    scale.lo_ = linear.domain_lo() > 0 ? linear.domain_lo() : lo;
    scale.hi_ = linear.domain_hi();
    for (double tick : linear.ticks()) {
      if (tick >= scale.lo_ * (1 - 1e-9)) scale.ticks_.push_back(tick);
    }
    return scale;
  }
  const std::vector<double> mantissas = decades >= 2.5 ? std::vector<double>{1}
                                        : decades >= 1
                                            ? std::vector<double>{1, 2, 5}
                                            : std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8, 9};
  // Every candidate m × 10^k from the decade below lo to the decade above hi, ascending.
  std::vector<double> candidates;
  for (int k = static_cast<int>(std::floor(std::log10(lo))) - 1;
       k <= static_cast<int>(std::ceil(std::log10(hi))); ++k) {
    for (double m : mantissas) candidates.push_back(m * std::pow(10.0, k));
  }
  // Widen to the nearest candidates outside [lo, hi] (the 1e-9 keeps a bound that is a tick).
  scale.lo_ = lo;
  scale.hi_ = hi;
  for (double c : candidates) {
    if (c <= lo * (1 + 1e-9)) scale.lo_ = c;
  }
  for (auto it = candidates.rbegin(); it != candidates.rend(); ++it) {
    if (*it >= hi * (1 - 1e-9)) scale.hi_ = *it;
  }
  for (double c : candidates) {
    if (c >= scale.lo_ * (1 - 1e-9) && c <= scale.hi_ * (1 + 1e-9)) scale.ticks_.push_back(c);
  }
  return scale;
}

double LogScale::operator()(double value) const {
  return pixel_from_ + std::log(value / lo_) / std::log(hi_ / lo_) * (pixel_to_ - pixel_from_);
}

std::string LogScale::TickLabel(double value) const { return FormatNumber(value, 4); }

void AppendXAxis(std::string& svg, const Scale& x, const Rect& area, absl::string_view title) {
  absl::StrAppend(&svg, "<g class=\"axis x-axis\">");
  for (double tick : x.ticks()) {
    const double px = x(tick);
    absl::StrAppendFormat(&svg,
                          "<line class=\"grid\" x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>"
                          "<line class=\"tick\" x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>"
                          "<text class=\"tick-label\" x=\"%.2f\" y=\"%.2f\" "
                          "text-anchor=\"middle\">%s</text>",
                          px, area.top, px, area.bottom(), px, area.bottom(), px, area.bottom() + 5,
                          px, area.bottom() + 18, HtmlEscape(x.TickLabel(tick)));
  }
  absl::StrAppendFormat(&svg,
                        "<line class=\"axis-line\" x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" "
                        "y2=\"%.2f\"/><text class=\"axis-label\" x=\"%.2f\" y=\"%.2f\" "
                        "text-anchor=\"middle\">%s</text></g>",
                        area.left, area.bottom(), area.right(), area.bottom(),
                        area.left + area.width / 2, area.bottom() + 40, HtmlEscape(title));
}

void AppendYAxis(std::string& svg, const Scale& y, const Rect& area, absl::string_view title) {
  absl::StrAppend(&svg, "<g class=\"axis y-axis\">");
  for (double tick : y.ticks()) {
    const double py = y(tick);
    absl::StrAppendFormat(&svg,
                          "<line class=\"grid\" x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>"
                          "<line class=\"tick\" x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>"
                          "<text class=\"tick-label\" x=\"%.2f\" y=\"%.2f\" "
                          "text-anchor=\"end\">%s</text>",
                          area.left, py, area.right(), py, area.left - 5, py, area.left, py,
                          area.left - 8, py + 4, HtmlEscape(y.TickLabel(tick)));
  }
  const double cx = area.left - 55;
  const double cy = area.top + area.height / 2;
  absl::StrAppendFormat(&svg,
                        "<line class=\"axis-line\" x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" "
                        "y2=\"%.2f\"/><text class=\"axis-label\" x=\"%.2f\" y=\"%.2f\" "
                        "text-anchor=\"middle\" transform=\"rotate(-90 %.2f %.2f)\">%s</text></g>",
                        area.left, area.top, area.left, area.bottom(), cx, cy, cx, cy,
                        HtmlEscape(title));
}

const char* SeriesColour(size_t i) {
  static constexpr const char* kPalette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                             "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
  return kPalette[i % (sizeof(kPalette) / sizeof(kPalette[0]))];
}

void AppendLegend(std::string& svg, double x, double y,
                  const std::vector<std::pair<std::string, std::string>>& entries) {
  absl::StrAppend(&svg, "<g class=\"legend\">");
  for (size_t i = 0; i < entries.size(); ++i) {
    const std::string& label = entries[i].first;
    const std::string& shown = label;
    const double top = y + 20.0 * static_cast<double>(i);
    absl::StrAppendFormat(&svg,
                          "<g class=\"legend-entry\"><title>%s</title><rect x=\"%.2f\" "
                          "y=\"%.2f\" width=\"12\" height=\"12\" rx=\"2\" fill=\"%s\"/>"
                          "<text x=\"%.2f\" y=\"%.2f\">%s</text></g>",
                          HtmlEscape(label), x, top, HtmlEscape(entries[i].second), x + 18,
                          top + 10, HtmlEscape(shown));
  }
  absl::StrAppend(&svg, "</g>");
}

double LegendWidth(const std::vector<std::pair<std::string, std::string>>& entries) {
  size_t longest = 0;
  for (const auto& [label, colour] : entries) {
    size_t characters = 0;  // UTF-8: count the bytes that start a character
    for (unsigned char c : label) characters += (c & 0xC0) != 0x80;
    longest = std::max(longest, characters);
  }
  return 18 + 7.5 * static_cast<double>(longest) + 8;
}

}  // namespace fairvault::client::report
