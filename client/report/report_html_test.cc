// Tests of the HTML reports: escaping, one mark per point or estimate, axes and legend, the
// sweep CSV reader, and validation.
#include "client/report/report_html.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/report/report_svg.h"
#include "core/testing/status_matchers.h"
#include "core/testing/strings.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fairvault::client::report {
namespace {

using ::fairvault::testing::Count;
using ::fairvault::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::Pair;
using ::testing::Pointwise;

// The inside of <g id="plot">...</g> (marks never nest groups).
std::string Plot(const std::string& html) {
  const size_t begin = html.find("<g id=\"plot\">");
  const size_t end = html.find("</g>", begin);
  return begin == std::string::npos ? "" : html.substr(begin, end - begin);
}

SweepPoint Point(std::string series, double epsilon, double error, double violation) {
  SweepPoint p;
  p.series = std::move(series);
  p.epsilon = epsilon;
  p.error = error;
  p.violation = violation;
  return p;
}

ClassifierAudit TwoGroupAudit() {
  ClassifierAudit audit;
  audit.attributes = {"sex"};
  audit.groups = {
      {"Female", {0.1, 0.09, 0.11}, {0.4, 0.35, 0.45}, {0.02, 0.01, 0.03}, {0.08, 0.07, 0.09}},
      {"Male", {0.25, 0.24, 0.26}, {0.6, 0.57, 0.63}, {0.08, 0.07, 0.09}, {0.17, 0.16, 0.18}}};
  audit.demographic_parity_violation = {0.15, 0.13, 0.17};
  audit.equalized_odds_violation = {0.2, 0.12, 0.28};
  audit.epsilon = 1;
  audit.m = 1000;
  return audit;
}

TEST(HtmlEscapeTest, EscapesTheFiveSpecialCharacters) {
  EXPECT_EQ(HtmlEscape("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&#39;");
  EXPECT_EQ(HtmlEscape("plain ε=0.5"), "plain ε=0.5");
}

TEST(LinearScaleTest, WidensToNiceTicks) {
  const LinearScale x = LinearScale::Nice(0.0215, 0.0371, 0, 100, 5);
  EXPECT_DOUBLE_EQ(x.domain_lo(), 0.02);
  EXPECT_DOUBLE_EQ(x.domain_hi(), 0.04);
  ASSERT_EQ(x.ticks().size(), 5u);
  EXPECT_EQ(x.TickLabel(x.ticks()[1]), "0.025");
  EXPECT_DOUBLE_EQ(x(0.03), 50);
  // A degenerate range still gets an axis.
  const LinearScale y = LinearScale::Nice(0, 0, 100, 0);
  EXPECT_LT(y.domain_lo(), y.domain_hi());
  EXPECT_EQ(y.TickLabel(0), "0");
}

TEST(LogScaleTest, TicksFollowTheWidthOfTheDomain) {
  // Three decades and more: powers of ten, the domain widened to them.
  const LogScale wide = LogScale::Nice(0.002, 3, 0, 300);
  const auto near = ::testing::DoubleNear(1e-12);
  EXPECT_THAT(wide.ticks(), Pointwise(near, std::vector<double>{0.001, 0.01, 0.1, 1, 10}));
  EXPECT_DOUBLE_EQ(wide.domain_lo(), 0.001);
  EXPECT_DOUBLE_EQ(wide.domain_hi(), 10);
  EXPECT_NEAR(wide(0.01), 75, 1e-9);  // one decade of four
  EXPECT_NEAR(wide(1), 225, 1e-9);
  EXPECT_EQ(wide.TickLabel(0.001), "0.001");
  // One to 2.5 decades: 1, 2, 5.
  const LogScale mid = LogScale::Nice(0.012, 0.3, 0, 100);
  EXPECT_THAT(mid.ticks(), Pointwise(near, std::vector<double>{0.01, 0.02, 0.05, 0.1, 0.2, 0.5}));
  // Half a decade to one: 1..9.
  const LogScale narrow = LogScale::Nice(0.11, 0.38, 0, 100);
  EXPECT_THAT(narrow.ticks(), Pointwise(near, std::vector<double>{0.1, 0.2, 0.3, 0.4}));
  EXPECT_EQ(narrow.TickLabel(narrow.ticks()[1]), "0.2");
  // Narrower (Adult's test errors): a linear scale's ticks, still placed logarithmically.
  const LogScale tight = LogScale::Nice(0.148, 0.236, 0, 100, 6);
  ASSERT_GE(tight.ticks().size(), 4u);
  EXPECT_LE(tight.domain_lo(), 0.148);
  EXPECT_GE(tight.domain_hi(), 0.236);
  EXPECT_EQ(tight.TickLabel(0.15), "0.15");
  const double lo = tight.domain_lo(), hi = tight.domain_hi();
  EXPECT_NEAR(tight(std::sqrt(lo * hi)), 50, 1e-9);  // the geometric mean in the middle
  // Nothing positive to show: a default decade rather than a crash.
  const LogScale bad = LogScale::Nice(0, -1, 0, 100);
  EXPECT_GT(bad.domain_lo(), 0);
  EXPECT_FALSE(bad.ticks().empty());
}

TEST(RenderSweepTest, LogXPlacesPointsByTheRatioOfTheirErrors) {
  Sweep sweep;
  sweep.log_x = true;
  sweep.points = {Point("a", 1, 0.01, 0.2), Point("a", 2, 0.1, 0.1), Point("a", 4, 1, 0.05)};
  absl::StatusOr<std::string> html = RenderSweepHtml(sweep);
  ASSERT_OK(html);
  EXPECT_THAT(*html, HasSubstr(">error (log scale)</text>"));
  for (const char* label : {">0.01</text>", ">0.1</text>", ">1</text>"}) {
    EXPECT_THAT(*html, HasSubstr(label));
  }
  // The three marks are equally spaced: each error is ten times the one before.
  std::vector<double> cx;
  const std::string plot = Plot(*html);
  const std::string open = "<circle class=\"mark\" cx=\"";
  for (size_t at = plot.find(open); at != std::string::npos; at = plot.find(open, at + 1)) {
    cx.push_back(std::atof(plot.c_str() + at + open.size()));
  }
  ASSERT_EQ(cx.size(), 3u);
  EXPECT_NEAR(cx[1] - cx[0], cx[2] - cx[1], 0.02);
  EXPECT_GT(cx[1] - cx[0], 50);
}

TEST(RenderSweepTest, LogXRejectsAnErrorOrIntervalEndThatIsNotPositive) {
  Sweep sweep;
  sweep.log_x = true;
  sweep.points = {Point("a", 1, 0.1, 0.2), Point("b", 0.5, 0, 0.1)};
  EXPECT_THAT(RenderSweepHtml(sweep),
              StatusIs(absl::StatusCode::kInvalidArgument, "series 'b' at ε=0.5"));
  sweep.points[1].error = 0.2;
  sweep.points[1].error_ci = Range{0, 0.3};
  EXPECT_THAT(RenderSweepHtml(sweep),
              StatusIs(absl::StatusCode::kInvalidArgument, "error 0.2 [0, 0.3]"));
  sweep.log_x = false;  // a linear axis takes them
  EXPECT_OK(RenderSweepHtml(sweep));
}

TEST(SweepFacetsTest, AutoWhenTheViolationScalesDifferMoreThanTenTimes) {
  Sweep sweep;
  sweep.points = {Point("small", 1, 0.2, 0.006), Point("small", 2, 0.19, 0.002),
                  Point("large", 1, 0.15, 0.05), Point("large", 2, 0.14, 0.03)};
  EXPECT_FALSE(SweepUsesFacets(sweep));  // 0.05 / 0.006 = 8.3
  sweep.points[0].violation = 0.004;
  EXPECT_TRUE(SweepUsesFacets(sweep));  // 0.05 / 0.004 = 12.5
  // Interval ends count towards a series' scale.
  sweep.points[0].violation_ci = Range{0.001, 0.006};
  EXPECT_FALSE(SweepUsesFacets(sweep));
  // A series with no violation at all fits any axis and does not force panels.
  sweep.points.push_back(Point("zero", 1, 0.3, 0));
  EXPECT_FALSE(SweepUsesFacets(sweep));
  sweep.facets = SweepFacets::kAlways;
  EXPECT_TRUE(SweepUsesFacets(sweep));
  sweep.points[0].violation_ci.reset();
  sweep.facets = SweepFacets::kNever;
  EXPECT_FALSE(SweepUsesFacets(sweep));
  // One series is one chart, whatever is asked.
  Sweep single;
  single.facets = SweepFacets::kAlways;
  single.points = {Point("", 1, 0.1, 0.2), Point("", 2, 0.1, 0.002)};
  EXPECT_FALSE(SweepUsesFacets(single));
}

// The y coordinates of the marks drawn in `colour`.
std::vector<double> MarkYs(const std::string& plot, const std::string& colour) {
  std::vector<double> ys;
  const std::string open = "<circle class=\"mark\" cx=\"";
  for (size_t at = plot.find(open); at != std::string::npos; at = plot.find(open, at + 1)) {
    double cx = 0, cy = 0;
    char fill[16] = {0};
    if (std::sscanf(plot.c_str() + at + open.size(), "%lf\" cy=\"%lf\" r=\"4.5\" fill=\"%15[^\"]",
                    &cx, &cy, fill) == 3 &&
        colour == fill) {
      ys.push_back(cy);
    }
  }
  return ys;
}

TEST(RenderSweepTest, FacetsGiveEachSeriesAPanelWithItsOwnYScale) {
  Sweep sweep;
  for (double eps : {0.5, 1.0, 3.0, 9.0}) {
    sweep.points.push_back(Point("tiny", eps, 0.2 + 0.01 / eps, 0.001 + 0.004 / eps));
    sweep.points.push_back(Point("big", eps, 0.15 + 0.01 / eps, 0.1 + 0.4 / eps));
  }
  sweep.points.push_back(Point("reference", std::numeric_limits<double>::infinity(), 0.148, 0.17));
  ASSERT_TRUE(SweepUsesFacets(sweep));
  absl::StatusOr<std::string> html = RenderSweepHtml(sweep);
  ASSERT_OK(html);
  EXPECT_EQ(Count(*html, "<g class=\"panel\">"), 3);
  EXPECT_EQ(Count(*html, "class=\"axis x-axis\""), 3);
  EXPECT_EQ(Count(*html, "class=\"axis y-axis\""), 3);
  EXPECT_EQ(Count(*html, "class=\"legend-entry\""), 3);
  EXPECT_THAT(*html, HasSubstr("fill=\"#4e79a7\">tiny</text>"));  // the panel titles
  EXPECT_THAT(*html, HasSubstr("fill=\"#f28e2b\">big</text>"));
  EXPECT_THAT(*html, HasSubstr("<span>panels: <b>3</b></span>"));
  const std::string plot = Plot(*html);
  EXPECT_EQ(Count(plot, "class=\"mark\""), 9);
  EXPECT_EQ(Count(plot, "<polyline"), 3);
  // On a shared axis "tiny" (0.0014 .. 0.009) would be squeezed into 2% of "big"'s range; in
  // its own panel its marks span most of the plot height (260 px panels, 164 px plots).
  const std::vector<double> tiny = MarkYs(plot, "#4e79a7");
  const std::vector<double> big = MarkYs(plot, "#f28e2b");
  ASSERT_EQ(tiny.size(), 4u);
  ASSERT_EQ(big.size(), 4u);
  const auto [tiny_lo, tiny_hi] = std::minmax_element(tiny.begin(), tiny.end());
  const auto [big_lo, big_hi] = std::minmax_element(big.begin(), big.end());
  EXPECT_GT(*tiny_hi - *tiny_lo, 100);
  EXPECT_GT(*big_hi - *big_lo, 100);
  // The y ticks of the panels differ (their own scales); the x ticks are the same in each.
  EXPECT_THAT(*html, HasSubstr("text-anchor=\"end\">0.010</text>"));
  EXPECT_THAT(*html, HasSubstr("text-anchor=\"end\">1.0</text>"));
  EXPECT_EQ(Count(*html, "text-anchor=\"middle\">0.20</text>"), 3);
  // --no-facet: one chart.
  sweep.facets = SweepFacets::kNever;
  html = RenderSweepHtml(sweep);
  ASSERT_OK(html);
  EXPECT_EQ(Count(*html, "<g class=\"panel\">"), 0);
  EXPECT_EQ(Count(*html, "class=\"axis x-axis\""), 1);
  EXPECT_EQ(Count(Plot(*html), "class=\"mark\""), 9);
}

TEST(RenderSweepTest, OneMarkPerPointAndOneLegendEntryPerSeries) {
  Sweep sweep;
  for (double eps : {1.0, 0.5, 0.1}) sweep.points.push_back(Point("law", eps, 0.03 / eps, eps));
  sweep.points.push_back(Point("communities", std::numeric_limits<double>::infinity(), 0.02, 0.01));
  sweep.points.push_back(Point("communities", 1, 0.025, 0.05));
  absl::StatusOr<std::string> html = RenderSweepHtml(sweep);
  ASSERT_OK(html);
  EXPECT_EQ(Count(Plot(*html), "class=\"mark\""), 5);
  EXPECT_EQ(Count(*html, "class=\"legend-entry\""), 2);
  EXPECT_EQ(Count(Plot(*html), "<polyline"), 2);
  EXPECT_THAT(*html, HasSubstr(">ε=∞</text>"));
  EXPECT_THAT(*html, HasSubstr(">ε=0.1</text>"));
}

// A crowded sweep: 12 points on top of each other. The labels that are drawn must not overlap
// (boxes estimated as the renderer does: 6.5px per character, 11px high), at least one per
// free spot is drawn, and every point keeps its mark and its table row.
TEST(RenderSweepTest, LabelsOfCrowdedPointsDoNotOverlap) {
  Sweep sweep;
  for (int i = 0; i < 12; ++i) {
    sweep.points.push_back(Point("s", 0.1 * (i + 1), 0.1 + 1e-4 * i, 0.2 + 1e-4 * i));
  }
  sweep.points.push_back(Point("s", 100, 0.3, 0.05));  // far away: always labelled
  absl::StatusOr<std::string> html = RenderSweepHtml(sweep);
  ASSERT_OK(html);
  const std::string plot = Plot(*html);
  EXPECT_EQ(Count(plot, "class=\"mark\""), 13);
  EXPECT_EQ(Count(*html, "<tr><td>s</td>"), 13);
  struct Box {
    double x0, y0, x1, y1;
  };
  std::vector<Box> boxes;
  const std::string open = "<text class=\"pt-label\" x=\"";
  for (size_t at = plot.find(open); at != std::string::npos; at = plot.find(open, at + 1)) {
    double x = 0, y = 0;
    char anchor[8] = {0};
    ASSERT_EQ(std::sscanf(plot.c_str() + at + open.size(), "%lf\" y=\"%lf\" text-anchor=\"%7[a-z]",
                          &x, &y, anchor),
              3);
    const size_t text_begin = plot.find('>', at) + 1;
    const std::string text = plot.substr(text_begin, plot.find('<', text_begin) - text_begin);
    size_t code_points = 0;
    for (unsigned char c : text) code_points += (c & 0xC0) != 0x80;
    const double width = 6.5 * static_cast<double>(code_points);
    const bool end = std::string(anchor) == "end";
    boxes.push_back({end ? x - width : x, y - 11, end ? x : x + width, y + 2});
  }
  EXPECT_GE(boxes.size(), 4u);   // the four spots around the pile, at least
  EXPECT_LT(boxes.size(), 13u);  // not all: they cannot all fit
  for (size_t i = 0; i < boxes.size(); ++i) {
    for (size_t j = i + 1; j < boxes.size(); ++j) {
      const Box& a = boxes[i];
      const Box& b = boxes[j];
      EXPECT_FALSE(a.x0 < b.x1 && b.x0 < a.x1 && a.y0 < b.y1 && b.y0 < a.y1)
          << "labels " << i << " and " << j << " overlap";
    }
  }
  EXPECT_THAT(plot, HasSubstr(">ε=100</text>"));
}

TEST(RenderSweepTest, HasAxisTitlesTicksAndTheLayoutScript) {
  Sweep sweep;
  sweep.points = {Point("", 1, 0.1, 0.2), Point("", 2, 0.12, 0.1)};
  sweep.x_label = "test MSE";
  sweep.y_label = "max KS";
  absl::StatusOr<std::string> html = RenderSweepHtml(sweep);
  ASSERT_OK(html);
  EXPECT_THAT(*html, HasSubstr("class=\"axis-label\" x="));
  EXPECT_THAT(*html, HasSubstr(">test MSE</text>"));
  EXPECT_THAT(*html, HasSubstr(">max KS</text>"));
  EXPECT_GE(Count(*html, "class=\"tick-label\""), 4);
  EXPECT_EQ(Count(*html, "class=\"legend-entry\""), 1);
  EXPECT_THAT(*html, HasSubstr("getBBox()"));
  EXPECT_THAT(*html, HasSubstr("d.chartWidth="));
  EXPECT_THAT(*html, HasSubstr("d.points="));
}

TEST(RenderSweepTest, EscapesUserTextAndLoadsNothingExternal) {
  Sweep sweep;
  sweep.title = "<script>alert(1)</script>";
  sweep.x_label = "a & b";
  sweep.points = {Point("<b>x\"", 1, 0.1, 0.2)};
  absl::StatusOr<std::string> html = RenderSweepHtml(sweep);
  ASSERT_OK(html);
  EXPECT_THAT(*html, Not(HasSubstr("<script>alert")));
  EXPECT_THAT(*html, HasSubstr("&lt;script&gt;alert(1)&lt;/script&gt;"));
  EXPECT_THAT(*html, Not(HasSubstr("<b>x")));
  EXPECT_THAT(*html, HasSubstr("&lt;b&gt;x&quot;"));
  EXPECT_THAT(*html, HasSubstr(">a &amp; b</text>"));
  EXPECT_EQ(Count(*html, "<script>"), 1);  // the layout script only
  EXPECT_THAT(*html, Not(HasSubstr("src=")));
  EXPECT_THAT(*html, Not(HasSubstr("href=")));
  EXPECT_THAT(*html, Not(HasSubstr("@import")));
}

TEST(RenderSweepTest, RejectsAnEmptySweep) {
  EXPECT_THAT(RenderSweepHtml(Sweep()), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(RenderSweepTest, ReferencesProvenanceAndCostFromTheSweepsCsv) {
  absl::StatusOr<CsvTable> csv = ParseCsv(
      "series,epsilon,error,violation,cost_epsilon,kind,dataset,company,run_id,measure\n"
      "eo post-processor with a very long series name indeed,0.5,0.2,0.05,0.5,point,adult,acme,"
      "r1,equalized odds\n"
      "eo post-processor with a very long series name indeed,1,0.18,0.04,1,point,,,,\n"
      "constant classifier (0),inf,0.24,0,0,baseline,,,,\n",
      "sweep.csv");
  ASSERT_OK(csv);
  absl::StatusOr<Sweep> sweep = SweepFromCsv(*csv, "sweep.csv");
  ASSERT_OK(sweep);
  ASSERT_EQ(sweep->points.size(), 2u);
  ASSERT_EQ(sweep->baselines.size(), 1u);
  EXPECT_EQ(sweep->baselines[0].series, "constant classifier (0)");
  ASSERT_TRUE(sweep->points[1].cost_epsilon.has_value());
  EXPECT_EQ(*sweep->points[1].cost_epsilon, 1);
  EXPECT_THAT(sweep->provenance,
              ElementsAre(Pair("dataset", "adult"), Pair("company", "acme"), Pair("run id", "r1"),
                          Pair("violation", "equalized odds")));
  absl::StatusOr<std::string> html = RenderSweepHtml(*sweep);
  ASSERT_OK(html);
  EXPECT_EQ(Count(Plot(*html), "class=\"mark\""), 2);  // the reference is not a point
  EXPECT_EQ(Count(*html, "class=\"baseline\""), 1);
  EXPECT_THAT(*html, HasSubstr("total cost \u03b5: <b>1.5</b>"));
  EXPECT_THAT(*html, HasSubstr("<th>run id</th><td>r1</td>"));
  // The long series name is shown whole in the legend, the chart widened for it.
  EXPECT_THAT(*html, HasSubstr(">eo post-processor with a very long series name indeed</text>"));
}

TEST(RenderClassifierAuditTest, FourMarksPerGroupPlusTwoViolations) {
  ClassifierAudit audit = TwoGroupAudit();
  audit.groups.push_back(
      {"Other", {0.2, 0.1, 0.3}, {0.5, 0.4, 0.6}, {0.1, 0.0, 0.2}, {0.1, 0, 0.2}});
  absl::StatusOr<std::string> html = RenderClassifierAuditHtml(audit);
  ASSERT_OK(html);
  EXPECT_EQ(Count(Plot(*html), "class=\"mark\""), 3 * 4 + 2);
  EXPECT_EQ(Count(Plot(*html), "class=\"ci\""), 3 * 4 + 2);
  EXPECT_EQ(Count(*html, "class=\"legend-entry\""), 3 + 1);
  EXPECT_THAT(*html, HasSubstr("estimate with 95% confidence interval</text>"));
  for (const char* label :
       {">selection rate<", ">TPR<", ">FPR<", ">error<", ">DP violation<", ">EO violation<"}) {
    EXPECT_THAT(*html, HasSubstr(label));
  }
  EXPECT_THAT(*html, HasSubstr("0.1500 [0.1300, 0.1700]"));  // one format: four decimals
}

TEST(RenderClassifierAuditTest, NamesThePairsBehindEachViolationAndItsProvenance) {
  ClassifierAudit audit = TwoGroupAudit();
  audit.groups.push_back({"Female|Asian-Pac-Islander|over-sixty-five",
                          {0.05, 0.01, 0.09}, {0.3, 0.2, 0.4}, {0.05, 0.0, 0.1}, {0.1, 0, 0.2}});
  audit.tpr_difference = Estimate{0.3, 0.2, 0.4};
  audit.fpr_difference = Estimate{0.06, 0.01, 0.1};
  audit.provenance = {{"company", "acme"}, {"ledger seq", "12"}, {"idempotency key", "k<1>"}};
  absl::StatusOr<std::string> html = RenderClassifierAuditHtml(audit);
  ASSERT_OK(html);
  // Selection rates 0.1, 0.25, 0.05: Male against the long-named group; TPR 0.4, 0.6, 0.3.
  EXPECT_THAT(*html, HasSubstr("<td>Male vs Female|Asian-Pac-Islander|over-sixty-five</td>"));
  EXPECT_THAT(*html, HasSubstr("0.3000 [0.2000, 0.4000]</td><td>Male vs "
                               "Female|Asian-Pac-Islander|over-sixty-five</td>"));
  EXPECT_THAT(*html, HasSubstr("of which max |\u0394FPR|</td><td>0.0600 [0.0100, 0.1000]"));
  EXPECT_THAT(*html, HasSubstr("(TPR)</td>"));  // EO's pair is the TPR gap's, the larger
  // The long name is shown whole in the legend (no ellipsis), the chart widened for it.
  EXPECT_THAT(*html, HasSubstr(">Female|Asian-Pac-Islander|over-sixty-five</text>"));
  EXPECT_THAT(*html, Not(HasSubstr("\u2026")));
  // The provenance table, escaped.
  EXPECT_THAT(*html, HasSubstr("<caption>Provenance</caption><tr><th>company</th><td>acme"));
  EXPECT_THAT(*html, HasSubstr("<td>k&lt;1&gt;</td>"));
}

TEST(RenderClassifierAuditTest, SkipsNonFiniteEstimatesAndEscapesGroupNames) {
  ClassifierAudit audit = TwoGroupAudit();
  audit.groups[0].name = "F<&>";
  audit.groups[0].tpr.estimate = std::nan("");
  absl::StatusOr<std::string> html = RenderClassifierAuditHtml(audit);
  ASSERT_OK(html);
  EXPECT_EQ(Count(Plot(*html), "class=\"mark\""), 2 * 4 + 2 - 1);
  EXPECT_THAT(*html, HasSubstr("F&lt;&amp;&gt;"));
  EXPECT_THAT(*html, Not(HasSubstr("F<&>")));
  EXPECT_THAT(*html, HasSubstr("n/a [0.3500, 0.4500]"));
}

TEST(RenderClassifierAuditTest, ShowsNoisySizesAndFlagsSmallGroups) {
  ClassifierAudit audit = TwoGroupAudit();
  audit.groups[0].noisy_rows = 7;
  audit.groups[0].small_group = true;
  audit.groups[1].noisy_rows = 993;
  audit.small_group_threshold = 56.1;
  absl::StatusOr<std::string> html = RenderClassifierAuditHtml(audit);
  ASSERT_OK(html);
  EXPECT_THAT(*html, HasSubstr("<th>noisy size</th><th>small group</th>"));
  EXPECT_THAT(*html, HasSubstr("<td>7</td><td><strong class=\"small-group\">small</strong>"));
  EXPECT_THAT(*html, HasSubstr("<td>993</td><td>\u2013</td>"));
  EXPECT_THAT(*html, HasSubstr("Female (small)"));  // the legend
  // On the chart a small group's four points are rings.
  EXPECT_EQ(Count(Plot(*html), "class=\"mark hollow\""), 4);
  EXPECT_EQ(Count(Plot(*html), "class=\"mark\""), 4 + 2);
  EXPECT_THAT(*html, HasSubstr("noisy size is below 56.1"));
  audit.groups[0].small_group = false;
  html = RenderClassifierAuditHtml(audit);
  ASSERT_OK(html);
  EXPECT_THAT(*html, Not(HasSubstr("small-group-note")));
}

TEST(RenderClassifierAuditTest, RejectsAnAuditWithoutGroups) {
  EXPECT_THAT(RenderClassifierAuditHtml(ClassifierAudit()),
              StatusIs(absl::StatusCode::kInvalidArgument, "no groups"));
}

TEST(RenderRegressorAuditTest, AHistogramLineAndAMeanPerGroup) {
  RegressorAudit audit;
  audit.attributes = {"race"};
  audit.lo = 0;
  audit.hi = 10;
  audit.bins = 4;
  audit.groups = {{"a", {4, 3.5, 4.5}, {0.1, 0.4, 0.4, 0.1}},
                  {"b", {6, 5.5, 6.5}, {0.0, 0.2, 0.3, 0.5}}};
  audit.max_ks = {0.3, 0.2, 0.4};
  absl::StatusOr<std::string> html = RenderRegressorAuditHtml(audit);
  ASSERT_OK(html);
  EXPECT_EQ(Count(Plot(*html), "class=\"mark hist\""), 2);
  EXPECT_EQ(Count(Plot(*html), "class=\"mark"), 4);
  EXPECT_EQ(Count(*html, "class=\"legend-entry\""), 2);
  EXPECT_THAT(*html, HasSubstr(">score</text>"));
  EXPECT_THAT(*html, HasSubstr(">mean score</text>"));
  EXPECT_THAT(*html, HasSubstr(">share of the group</text>"));
  EXPECT_THAT(*html, HasSubstr("<td>[7.5, 10]</td>"));  // the last bin is closed
}

TEST(RenderRegressorAuditTest, RejectsABadGridOrHistogramLength) {
  RegressorAudit audit;
  audit.bins = 3;
  audit.groups = {{"a", {0.5, 0.4, 0.6}, {0.5, 0.5}}};
  EXPECT_THAT(RenderRegressorAuditHtml(audit),
              StatusIs(absl::StatusCode::kInvalidArgument, "has 2 histogram bins"));
  audit.lo = 1;
  audit.hi = 1;
  EXPECT_THAT(RenderRegressorAuditHtml(audit),
              StatusIs(absl::StatusCode::kInvalidArgument, "lo < hi"));
}

TEST(SweepFromCsvTest, ReadsSeriesInfinityAndIntervals) {
  absl::StatusOr<CsvTable> table = ParseCsv(
      "series,epsilon,error,violation,error_lo,error_hi,violation_lo,violation_hi\n"
      "law,inf,0.03,0.01,,,,\n"
      "law,0.5,0.04,0.05,0.035,0.045,0.03,0.07\n");
  ASSERT_OK(table);
  absl::StatusOr<Sweep> sweep = SweepFromCsv(*table, "points.csv");
  ASSERT_OK(sweep);
  ASSERT_EQ(sweep->points.size(), 2u);
  EXPECT_TRUE(std::isinf(sweep->points[0].epsilon));
  EXPECT_FALSE(sweep->points[0].error_ci.has_value());
  EXPECT_EQ(sweep->points[1].series, "law");
  ASSERT_TRUE(sweep->points[1].violation_ci.has_value());
  EXPECT_DOUBLE_EQ(sweep->points[1].violation_ci->hi, 0.07);
  EXPECT_DOUBLE_EQ(sweep->points[1].error_ci->lo, 0.035);
}

TEST(SweepFromCsvTest, RejectsBadInputNamingTheLine) {
  auto parse = [](const std::string& text) {
    absl::StatusOr<CsvTable> table = ParseCsv(text, "p.csv");
    EXPECT_OK(table);
    return SweepFromCsv(*table, "p.csv");
  };
  EXPECT_THAT(parse("epsilon,error\n1,0.1\n"),
              StatusIs(absl::StatusCode::kInvalidArgument, "violation"));
  EXPECT_THAT(parse("epsilon,error,violation\n0,0.1,0.2\n"),
              StatusIs(absl::StatusCode::kInvalidArgument, "p.csv:2: column 'epsilon'"));
  EXPECT_THAT(parse("epsilon,error,violation\n1,nan,0.2\n"),
              StatusIs(absl::StatusCode::kInvalidArgument, "p.csv:2: column 'error'"));
  EXPECT_THAT(parse("epsilon,error,violation,error_lo\n1,0.1,0.2,0.05\n"),
              StatusIs(absl::StatusCode::kInvalidArgument, "error_lo and error_hi"));
  EXPECT_THAT(parse("epsilon,error,violation,error_lo,error_hi\n1,0.1,0.2,0.05,\n"),
              StatusIs(absl::StatusCode::kInvalidArgument, "p.csv:2: give both"));
  EXPECT_THAT(parse("epsilon,error,violation,error_lo,error_hi\n1,0.1,0.2,0.3,0.2\n"),
              StatusIs(absl::StatusCode::kInvalidArgument, "p.csv:2: column 'error_lo'"));
  EXPECT_THAT(parse("epsilon,error,violation\n"),
              StatusIs(absl::StatusCode::kInvalidArgument, "no points"));
}

}  // namespace
}  // namespace fairvault::client::report
