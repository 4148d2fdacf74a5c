// Browser test of the HTML reports: runs the real `fairvault report sweep` and `fairvault
// report audit` on small fixtures and on the sweep CSV of a real experiment run
// (experiments/tradeoff/tradeoff_adult --quick against a real vault), loads the pages in headless
// Chromium and checks that the chart was laid out (the page's script records on <body> the
// bounding box of the plotted marks, their number, the panels and where the x tick labels
// went), that nothing was written to the console (no script error), and that a screenshot has
// real content. `report budgets` runs against a real vault; its head hash must equal `auditor
// verify`'s.
//
// Needs /usr/bin/chromium (Debian's `chromium`). Without it the tests are skipped, or fail
// when FAIRVAULT_REQUIRE_CHROMIUM=1 (as deploy/test.sh sets).
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "core/testing/files.h"
#include "gtest/gtest.h"
#include "tests/vault_fixture.h"

#ifndef FAIRVAULT_CLI_BINARY
#error "FAIRVAULT_CLI_BINARY must name the fairvault binary"
#endif
#ifndef FAIRVAULT_TRADEOFF_BINARY
#error "FAIRVAULT_TRADEOFF_BINARY must name the tradeoff_adult experiment binary"
#endif

namespace {

using ::fairvault::testing::ReadFile;

constexpr char kChromium[] = "/usr/bin/chromium";

std::string Quote(const std::string& s) { return "'" + s + "'"; }

// Exit status of a shell command (-1 if it did not exit normally).
int RunShell(const std::string& command) {
  const int status = std::system(command.c_str());
  return status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

struct Layout {
  double width = 0;
  double height = 0;
  int points = -1;
  int legend_entries = 0;
  int panels = -1;
  // The first x axis's tick labels and the laid-out centre x of each (data-x-ticks).
  std::vector<std::pair<std::string, double>> x_ticks;
};

class ReportChromiumTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (access(kChromium, X_OK) != 0) {
      const char* require = std::getenv("FAIRVAULT_REQUIRE_CHROMIUM");
      if (require != nullptr && std::string(require) == "1") {
        FAIL() << kChromium << " is missing and FAIRVAULT_REQUIRE_CHROMIUM=1: install Debian's "
               << "`chromium` package (deploy/install-deps.sh chromium)";
      }
      GTEST_SKIP() << kChromium << " is missing: install Debian's `chromium` package to run "
                   << "the browser tests (set FAIRVAULT_REQUIRE_CHROMIUM=1 to fail instead)";
    }
    std::string pattern = (std::filesystem::temp_directory_path() / "fv-report-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }

  void TearDown() override {
    if (!dir_.empty() && !HasFailure()) std::filesystem::remove_all(dir_);
    if (HasFailure()) std::cerr << "kept the test files in " << dir_ << "\n";
  }

  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

  std::string Write(const std::string& name, const std::string& content) {
    std::ofstream(Path(name)) << content;
    return Path(name);
  }

  // Runs `fairvault <args>`; its output goes to cli.log.
  int Cli(const std::string& args) {
    return RunShell(std::string(FAIRVAULT_CLI_BINARY) + " " + args + " >>" +
                    Quote(Path("cli.log")) + " 2>&1");
  }

  // The Chromium command line with a fresh profile, ending in `extra` and the page's URL.
  std::string Chromium(const std::string& html, const std::string& extra) {
    const std::string profile = Path("profile-" + std::to_string(++launches_));
    return "timeout 180 " + std::string(kChromium) +
           " --headless --no-sandbox --disable-gpu --disable-quic --no-first-run"
           " --disable-background-networking --disable-component-update --disable-sync"
           " --user-data-dir=" +
           Quote(profile) + " --virtual-time-budget=5000 " + extra + " " + Quote("file://" + html);
  }

  // Loads the page, dumps the DOM after the load script ran and reads what it recorded.
  Layout Load(const std::string& html) {
    const std::string dom_path = html + ".dom";
    const std::string log = Path("chromium.log");
    const std::string page_log = html + ".log";
    const int rc = RunShell(Chromium(html, "--enable-logging=stderr --v=0 --dump-dom") + " >" +
                            Quote(dom_path) + " 2>" + Quote(page_log));
    RunShell("cat " + Quote(page_log) + " >>" + Quote(log));
    EXPECT_EQ(rc, 0) << "chromium --dump-dom failed; see " << log;
    // What the page wrote to the console (messages, uncaught errors), one line each.
    console_.clear();
    std::stringstream page_lines(ReadFile(page_log));
    for (std::string line; std::getline(page_lines, line);) {
      if (line.find(":CONSOLE") != std::string::npos) console_ += line + "\n";
    }
    EXPECT_EQ(console_, "") << html << " wrote to the console";
    const std::string dom = ReadFile(dom_path);
    Layout layout;
    std::smatch m;
    const std::regex body("<body([^>]*)>");
    if (!std::regex_search(dom, m, body)) {
      ADD_FAILURE() << "no <body> in the dumped DOM (" << dom.size() << " bytes)";
      return layout;
    }
    const std::string attributes = m[1];
    auto attribute = [&attributes](const std::string& name) -> std::string {
      std::smatch a;
      if (!std::regex_search(attributes, a, std::regex(name + "=\"([^\"]*)\""))) return "";
      return a[1];
    };
    EXPECT_NE(attribute("data-points"), "") << "the load script did not run: <body" << attributes;
    layout.width = std::atof(attribute("data-chart-width").c_str());
    layout.height = std::atof(attribute("data-chart-height").c_str());
    layout.points =
        attribute("data-points").empty() ? -1 : std::atoi(attribute("data-points").c_str());
    for (size_t at = dom.find("class=\"legend-entry\""); at != std::string::npos;
         at = dom.find("class=\"legend-entry\"", at + 1)) {
      ++layout.legend_entries;
    }
    layout.panels =
        attribute("data-panels").empty() ? -1 : std::atoi(attribute("data-panels").c_str());
    std::stringstream ticks(attribute("data-x-ticks"));
    for (std::string tick; std::getline(ticks, tick, ';');) {
      const size_t at = tick.rfind('@');
      if (at == std::string::npos) continue;
      layout.x_ticks.emplace_back(tick.substr(0, at), std::atof(tick.c_str() + at + 1));
    }
    dom_ = dom;
    return layout;
  }

  // Takes a 1000x700 screenshot and checks it is a PNG of that size with real content (a
  // blank page compresses to under 4 KB; these charts to tens of KB).
  void ExpectScreenshot(const std::string& html) {
    const std::string png = html + ".png";
    const int rc =
        RunShell(Chromium(html, "--screenshot=" + Quote(png) + " --window-size=1000,700") +
                 " >/dev/null 2>>" + Quote(Path("chromium.log")));
    EXPECT_EQ(rc, 0) << "chromium --screenshot failed";
    const std::string bytes = ReadFile(png);
    ASSERT_GT(bytes.size(), 16u * 1024) << png << " is missing or nearly blank";
    ASSERT_EQ(bytes.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
    auto be32 = [&bytes](size_t at) {
      return (static_cast<uint32_t>(static_cast<unsigned char>(bytes[at])) << 24) |
             (static_cast<uint32_t>(static_cast<unsigned char>(bytes[at + 1])) << 16) |
             (static_cast<uint32_t>(static_cast<unsigned char>(bytes[at + 2])) << 8) |
             static_cast<uint32_t>(static_cast<unsigned char>(bytes[at + 3]));
    };
    EXPECT_EQ(be32(16), 1000u);  // IHDR width
    EXPECT_EQ(be32(20), 700u);   // IHDR height
  }

  std::string dir_;
  std::string dom_;      // the last page's dumped DOM
  std::string console_;  // the last page's console lines (none expected)
  int launches_ = 0;
};

TEST_F(ReportChromiumTest, SweepChartIsLaidOutWithOneMarkPerPoint) {
  const std::string csv = Write("points.csv",
                                "series,epsilon,error,violation,error_lo,error_hi,violation_lo,"
                                "violation_hi\n"
                                "law,inf,0.0312,0.012,,,,\n"
                                "law,1,0.0318,0.028,0.0311,0.0325,0.02,0.036\n"
                                "law,0.5,0.0325,0.041,0.0316,0.0334,0.03,0.052\n"
                                "law,0.1,0.0371,0.094,0.035,0.0392,0.07,0.118\n"
                                "communities <&>,inf,0.0215,0.021,,,,\n"
                                "communities <&>,1,0.0229,0.052,,,,\n"
                                "communities <&>,0.5,0.0244,0.078,,,,\n"
                                "communities <&>,0.1,0.0301,0.151,,,,\n");
  const std::string html = Path("sweep.html");
  ASSERT_EQ(Cli("report sweep --csv " + Quote(csv) + " --out " + Quote(html)), 0)
      << ReadFile(Path("cli.log"));
  const Layout layout = Load(html);
  EXPECT_GT(layout.width, 0);
  EXPECT_GT(layout.height, 0);
  EXPECT_EQ(layout.points, 8);
  EXPECT_EQ(layout.legend_entries, 2);
  ExpectScreenshot(html);
}

// A real sweep: the quick run of experiments/tradeoff/tradeoff_adult (Adult through a real vault:
// DP-FERMI, PF-LD, the DP-oracle learner and the EO post-processor at two epsilons, plus the
// references) rendered with a log x axis and one panel per series.
TEST_F(ReportChromiumTest, TradeoffExperimentSweepWithLogXAndPanels) {
  const std::string out_dir = Path("tradeoff");
  std::filesystem::create_directories(out_dir);
  ASSERT_EQ(RunShell(std::string(FAIRVAULT_TRADEOFF_BINARY) + " --quick --out-dir " +
                     Quote(out_dir) + " >" + Quote(Path("tradeoff.log")) + " 2>&1"),
            0)
      << ReadFile(Path("tradeoff.log"));
  const std::string csv = out_dir + "/tradeoff_adult_sweep_dp.csv";
  // What the experiment wrote: one point per line after the header, the series in column 1.
  std::stringstream lines(ReadFile(csv));
  std::string line;
  ASSERT_TRUE(std::getline(lines, line));
  ASSERT_EQ(line.rfind("series,epsilon,error,violation", 0), 0u) << line;
  int points = 0;
  std::set<std::string> series;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    ++points;
    series.insert(line.substr(0, line.find(',')));
  }
  ASSERT_GE(points, 8);
  ASSERT_GE(series.size(), 5u);  // DP-FERMI (two λ), PF-LD, the learner, the post-processor, LR

  const std::string html = Path("tradeoff.html");
  ASSERT_EQ(Cli("report sweep --csv " + Quote(csv) + " --out " + Quote(html) +
                " --log-x --facet --y-label 'DP violation'"),
            0)
      << ReadFile(Path("cli.log"));
  const Layout layout = Load(html);
  EXPECT_GT(layout.width, 0);
  EXPECT_GT(layout.height, 0);
  EXPECT_EQ(layout.points, points);
  EXPECT_EQ(layout.legend_entries, static_cast<int>(series.size()));
  EXPECT_EQ(layout.panels, static_cast<int>(series.size()));
  for (const std::string& name : series) {
    EXPECT_NE(dom_.find(">" + name + "</text>"), std::string::npos) << name << " has no label";
  }
  EXPECT_NE(dom_.find(">error (log scale)</text>"), std::string::npos);
  EXPECT_NE(dom_.find(">DP violation</text>"), std::string::npos);
  // The x tick labels were laid out left to right at log-scaled positions: the distance from
  // the first label is proportional to the log of the ratio of the values.
  ASSERT_GE(layout.x_ticks.size(), 3u);
  const double v0 = std::atof(layout.x_ticks[0].first.c_str());
  const double x0 = layout.x_ticks[0].second;
  const double v_last = std::atof(layout.x_ticks.back().first.c_str());
  const double x_last = layout.x_ticks.back().second;
  ASSERT_GT(v0, 0) << layout.x_ticks[0].first;
  ASSERT_GT(v_last, v0);
  ASSERT_GT(x_last - x0, 100) << "the x tick labels were not spread out";
  const double pixels_per_log = (x_last - x0) / std::log(v_last / v0);
  for (size_t i = 1; i < layout.x_ticks.size(); ++i) {
    const auto& [label, x] = layout.x_ticks[i];
    const double value = std::atof(label.c_str());
    EXPECT_GT(x, layout.x_ticks[i - 1].second) << label;
    EXPECT_NEAR(x - x0, pixels_per_log * std::log(value / v0), 1.5) << "tick " << label;
  }
  ExpectScreenshot(html);

  // The same sweep as one chart: all points in one panel-free plot.
  const std::string single = Path("tradeoff-single.html");
  ASSERT_EQ(
      Cli("report sweep --csv " + Quote(csv) + " --out " + Quote(single) + " --log-x --no-facet"),
      0)
      << ReadFile(Path("cli.log"));
  const Layout one = Load(single);
  EXPECT_EQ(one.points, points);
  EXPECT_EQ(one.panels, 0);
  EXPECT_EQ(one.legend_entries, static_cast<int>(series.size()));
  EXPECT_GE(one.x_ticks.size(), 3u);
}

TEST_F(ReportChromiumTest, ClassifierAuditChartIsLaidOut) {
  const std::string interval = R"({"estimate": 0.2, "lo": 0.15, "hi": 0.25})";
  std::string groups;
  for (const char* name : {"Female", "Male"}) {
    if (!groups.empty()) groups += ",";
    groups += std::string(R"({"group": ")") + name + R"(", "selection_rate": )" + interval +
              R"(, "tpr": )" + interval + R"(, "fpr": )" + interval + R"(, "error": )" + interval +
              "}";
  }
  const std::string json =
      Write("audit.json", R"({"report": {"attributes": ["sex"], "groups": [)" + groups +
                              R"(], "demographic_parity_violation": )" + interval +
                              R"(, "equalized_odds_violation": )" + interval +
                              R"(, "confidence": 0.95, "m": 1000, "epsilon": 1},
                        "charge": {"budget_after": {"dataset": "adult"}}, "rows_dropped": 0})");
  const std::string html = Path("audit.html");
  ASSERT_EQ(Cli("report audit --audit " + Quote(json) + " --out " + Quote(html)), 0)
      << ReadFile(Path("cli.log"));
  const Layout layout = Load(html);
  EXPECT_GT(layout.width, 0);
  EXPECT_GT(layout.height, 0);
  EXPECT_EQ(layout.points, 2 * 4 + 2);  // 4 metrics per group, 2 violations
  ExpectScreenshot(html);
}

TEST_F(ReportChromiumTest, RegressorAuditChartIsLaidOut) {
  std::string groups;
  for (const char* name : {"a", "b", "c"}) {
    if (!groups.empty()) groups += ",";
    groups += std::string(R"({"group": ")") + name +
              R"(", "mean": {"estimate": 0.5, "lo": 0.4, "hi": 0.6},
                  "histogram": [0.1, 0.2, 0.4, 0.2, 0.1]})";
  }
  const std::string json =
      Write("regressor.json", R"({"report": {"attributes": ["race"], "groups": [)" + groups +
                                  R"(], "max_ks": {"estimate": 0.1, "lo": 0.05, "hi": 0.2},
                            "confidence": 0.9, "n": 500, "epsilon": 0.5, "lo": 0, "hi": 1,
                            "bins": 5}})");
  const std::string html = Path("regressor.html");
  ASSERT_EQ(Cli("report audit --audit " + Quote(json) + " --out " + Quote(html)), 0)
      << ReadFile(Path("cli.log"));
  const Layout layout = Load(html);
  EXPECT_GT(layout.width, 0);
  EXPECT_GT(layout.height, 0);
  EXPECT_EQ(layout.points, 3 * 2);  // a histogram line and a mean per group
  ExpectScreenshot(html);
}

// A running vault whose set-up is VaultFixture's (a dataset, acme with a grant, an auditor and
// acme's table), for the budgets page.
class RunningVault : public fairvault::testing::VaultFixture {
 public:
  void TestBody() override {}
  void Start(const fairvault::testing::Population& population) { StartVault(population, 10, 1e-6); }
  void Stop() { TearDown(); }
  const std::string& auditor_key() const { return auditor_key_; }
  std::string target() const { return server_->target(); }
  fairvault::client::Client& company() { return *company_; }
  const std::string& table() const { return table_handle_; }
};

// `fairvault report budgets` against a real vault with charges: the page loads without console
// errors, its SVG plots one mark per charge, and the head hash it shows is the one `auditor
// verify` prints.
TEST_F(ReportChromiumTest, BudgetsPageFromARealVaultShowsTheVerifiedHeadHash) {
  RunningVault vault;
  vault.Start(fairvault::testing::MakePopulation(500, 3));
  ASSERT_FALSE(HasFailure());
  for (const char* key : {"counts-1", "counts-2", "counts-3"}) {
    fairvault::v1::NoisyCountsRequest req;
    req.set_idempotency_key(key);
    req.set_table_handle(vault.table());
    req.add_attributes("sex");
    req.set_epsilon(0.5);
    // Gaussian (the grant has delta 1e-6): the accountant composes three at less than 1.5.
    req.set_noise(fairvault::v1::NOISE_KIND_DISCRETE_GAUSSIAN);
    ASSERT_TRUE(vault.company().NoisyCounts(req).ok());
  }
  const std::string connection =
      "--server " + vault.target() + " --key " + vault.auditor_key() + " ";
  const std::string html = Path("budgets.html");
  ASSERT_EQ(Cli(connection + "report budgets --out " + Quote(html)), 0)
      << ReadFile(Path("cli.log"));
  const std::string verify_json = Path("verify.json");
  ASSERT_EQ(RunShell(std::string(FAIRVAULT_CLI_BINARY) + " " + connection +
                     "auditor verify --json >" + Quote(verify_json) + " 2>&1"),
            0)
      << ReadFile(verify_json);
  std::smatch hash;
  const std::string verify = ReadFile(verify_json);
  ASSERT_TRUE(std::regex_search(verify, hash, std::regex("\"head_hash\": \"([0-9a-f]{64})\"")))
      << verify;
  vault.Stop();

  const Layout layout = Load(html);  // also: nothing on the console
  EXPECT_GT(layout.width, 0);
  EXPECT_GT(layout.height, 0);
  EXPECT_EQ(layout.points, 3);          // one mark per charge
  EXPECT_EQ(layout.legend_entries, 1);  // acme / pop
  std::smatch shown;
  ASSERT_TRUE(std::regex_search(dom_, shown, std::regex("<code id=\"head-hash\">([^<]*)</code>")));
  EXPECT_EQ(shown[1].str(), hash[1].str());
  EXPECT_NE(dom_.find("<b id=\"ledger-status\">verified</b>"), std::string::npos);
  EXPECT_NE(dom_.find(">acme / pop</text>"), std::string::npos);
  // The composed spend the page recomputes from the ledger rows' costs equals what the
  // vault's accountant says (ListBudgets' spent), and is below the plain sum of 1.5.
  std::smatch spend, budget;
  ASSERT_TRUE(std::regex_search(
      dom_, spend,
      std::regex("<td>acme</td><td>pop</td><td>3</td><td>([0-9.]+)</td><td>([0-9.]+)</td>")))
      << dom_;
  ASSERT_TRUE(std::regex_search(
      dom_, budget, std::regex("<td>acme</td><td>pop</td><td>10</td><td>1e-06</td><td>([0-9.]+)"
                               "</td>")))
      << dom_;
  EXPECT_EQ(spend[1].str(), "1.5");
  EXPECT_EQ(spend[2].str(), budget[1].str());
  EXPECT_LT(std::stod(spend[2].str()), 1.5);
  // The grant's ledger row names the regulator account that made it (bootstrapped as
  // "regulator"); the charges created no artifact or job.
  EXPECT_TRUE(std::regex_search(
      dom_, std::regex("<td>regulator</td><td>acme</td><td>pop</td><td>10</td><td>1e-06</td>")))
      << dom_;
  EXPECT_EQ(dom_.find("<i>not recorded</i>"), std::string::npos);
  // The transparency log's latest checkpoint: the grant, the company's and auditor's accounts
  // are not rows; the dataset cap is none: 1 grant + 3 charges.
  EXPECT_TRUE(std::regex_search(dom_, std::regex("<table id=\"checkpoint\">.*<th>tree size "
                                                 "\\(rows\\)</th><td>4</td>")))
      << dom_;
  ExpectScreenshot(html);
}

}  // namespace
