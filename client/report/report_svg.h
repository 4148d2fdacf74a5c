// Building blocks of the HTML reports: HTML escaping, the page scaffold, and for the inline
// SVG charts linear and logarithmic scales with "nice" ticks, axes with gridlines and labels, a
// colour palette and a legend.
#ifndef FAIRVAULT_CLIENT_REPORT_REPORT_SVG_H_
#define FAIRVAULT_CLIENT_REPORT_REPORT_SVG_H_

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace fairvault::client::report {

// Replaces & < > " ' by entities: safe as element text and inside quoted attribute values.
std::string HtmlEscape(absl::string_view text);

// (label, value) pairs.
using Pairs = std::vector<std::pair<std::string, std::string>>;

// A whole page: <h1>title</h1>, the `meta` (label, value) pairs on one line, the
// `provenance` pairs (where the numbers come from: who, when, which release) as a table when
// any, the chart with its caption, then `body_html`. Escapes title, meta, provenance and
// caption; `svg` and `body_html` are inserted as they are. Ends with the script that records
// the layout of #plot on <body> (data-chart-width, data-chart-height, data-points; see
// report_html.h).
std::string HtmlPage(absl::string_view title, const Pairs& meta, absl::string_view svg,
                     absl::string_view caption, absl::string_view body_html,
                     const Pairs& provenance = {});

// The opening <svg id="chart"> tag of a chart `width` x `height` pixels.
std::string SvgOpen(double width, double height, absl::string_view label);

// A number with up to `significant` significant digits, no exponent for ordinary magnitudes
// ("0.4123", "12.5", "1e-06"); "n/a" when not finite.
std::string FormatNumber(double value, int significant = 4);

// Maps data values onto a pixel interval (which may be reversed, as for a y axis growing
// upwards) and chooses the ticks of an axis.
class Scale {
 public:
  virtual ~Scale() = default;
  // Pixel position of `value` (not clamped).
  virtual double operator()(double value) const = 0;
  virtual double domain_lo() const = 0;
  virtual double domain_hi() const = 0;
  virtual const std::vector<double>& ticks() const = 0;
  virtual std::string TickLabel(double value) const = 0;
};

// A linear scale with ticks at multiples of 1, 2 or 5 × 10^k.
class LinearScale final : public Scale {
 public:
  // A scale whose domain is [min, max] widened outwards to the nearest ticks, with about
  // `target_ticks` ticks. A degenerate or non-finite interval is widened around its value
  // (or to [0, 1]).
  static LinearScale Nice(double min, double max, double pixel_from, double pixel_to,
                          int target_ticks = 5);

  double operator()(double value) const override;
  double domain_lo() const override { return lo_; }
  double domain_hi() const override { return hi_; }
  const std::vector<double>& ticks() const override { return ticks_; }
  // A tick's label with just enough decimals for the tick step.
  std::string TickLabel(double value) const override;

 private:
  double lo_ = 0, hi_ = 1, pixel_from_ = 0, pixel_to_ = 1;
  int decimals_ = 0;
  std::vector<double> ticks_;
};

// A log10 scale for positive values. Ticks by the width of the domain (after a 3% pad on the
// log axis): from 2.5 decades at the powers of ten, from 1 decade at 1, 2 and 5 × 10^k, from half
// a decade at 1..9 × 10^k, and below that at a linear scale's ticks (the axis stays logarithmic;
// its labels are then evenly spaced in value, not in pixels). The domain is widened outwards to
// the nearest ticks.
class LogScale final : public Scale {
 public:
  // `min` and `max` must be finite and > 0 (otherwise the domain is [0.1, 1]); a degenerate
  // interval is widened by 10% either way.
  static LogScale Nice(double min, double max, double pixel_from, double pixel_to,
                       int target_ticks = 5);

  double operator()(double value) const override;
  double domain_lo() const override { return lo_; }
  double domain_hi() const override { return hi_; }
  const std::vector<double>& ticks() const override { return ticks_; }
  // Up to 4 significant digits ("0.02", "0.15", "1e-05").
  std::string TickLabel(double value) const override;

 private:
  double lo_ = 0.1, hi_ = 1, pixel_from_ = 0, pixel_to_ = 1;
  std::vector<double> ticks_;
};

// A time axis over Unix seconds: ticks at a round step (1, 2, 5, 10, 15 or 30 seconds or
// minutes, 1, 2, 3, 6 or 12 hours, 1, 2 or 7 days) aligned to UTC, labelled "HH:MM:SS",
// "HH:MM", "MM-DD HH:MM" or "YYYY-MM-DD" as the step and the span need.
class TimeScale final : public Scale {
 public:
  // The domain [min, max] widened outwards to the nearest ticks; a degenerate interval is
  // widened by a minute either way.
  static TimeScale Nice(double min_seconds, double max_seconds, double pixel_from,
                        double pixel_to, int target_ticks = 6);

  double operator()(double value) const override;
  double domain_lo() const override { return lo_; }
  double domain_hi() const override { return hi_; }
  const std::vector<double>& ticks() const override { return ticks_; }
  std::string TickLabel(double value) const override;

 private:
  double lo_ = 0, hi_ = 60, pixel_from_ = 0, pixel_to_ = 1, step_ = 10;
  std::string format_;
  std::vector<double> ticks_;
};

// The plotting area of a chart, in SVG pixels.
struct Rect {
  double left = 0, top = 0, width = 0, height = 0;
  double right() const { return left + width; }
  double bottom() const { return top + height; }
};

// Vertical gridlines, the axis line along the bottom of `area`, tick labels under it and the
// axis title centred below them.
void AppendXAxis(std::string& svg, const Scale& x, const Rect& area, absl::string_view title);
// Horizontal gridlines, the axis line along the left of `area`, tick labels to its left and
// the axis title rotated along it.
void AppendYAxis(std::string& svg, const Scale& y, const Rect& area, absl::string_view title);

// "0.4123 [0.3981, 0.427]"; "n/a" parts for non-finite values.
std::string FormatInterval(double estimate, double lo, double hi, int significant = 4);
// A rate or a difference of rates in one format, four decimals: "0.0795", "0.1720"; "n/a" when
// not finite. With its interval: "0.0795 [0.0713, 0.0881]".
std::string FormatRate(double value);
std::string FormatRateInterval(double estimate, double lo, double hi);

// A plotted point: <circle class="mark"> with a tooltip. Callers put marks inside #plot.
// `hollow`: a ring (white fill, coloured outline, class "mark hollow"), e.g. for a small group.
void AppendMark(std::string& svg, double x, double y, const char* colour,
                absl::string_view tooltip, bool hollow = false);
// A confidence-interval whisker with end caps, horizontal (from x_lo to x_hi at y) or
// vertical (from y_lo to y_hi at x). Skipped when a coordinate is not finite.
void AppendHorizontalWhisker(std::string& svg, double x_lo, double x_hi, double y,
                             const char* colour);
void AppendVerticalWhisker(std::string& svg, double x, double y_lo, double y_hi,
                           const char* colour);

// The i-th colour of a 10-colour categorical palette (Tableau 10), cycling.
const char* SeriesColour(size_t i);

// Legend entries (label, colour) stacked downwards from (x, y): one
// <g class="legend-entry"> with a swatch and an escaped label each. Labels are shown whole;
// LegendWidth is the room they take, for the chart's width.
void AppendLegend(std::string& svg, double x, double y,
                  const std::vector<std::pair<std::string, std::string>>& entries);
// Pixels a legend of these entries takes from its swatches' left edge: the swatch, a gap and
// the longest label at an upper bound of 7.5 px per character of the 12 px font.
double LegendWidth(const std::vector<std::pair<std::string, std::string>>& entries);

}  // namespace fairvault::client::report

#endif  // FAIRVAULT_CLIENT_REPORT_REPORT_SVG_H_
