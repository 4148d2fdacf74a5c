// Tests of the auditor's budgets page: one mark per charge on cumulative step lines per
// (company, dataset), the tables (verification and head hash, grants and caps, access-log
// volume), escaping of every server string, and an empty vault.
#include "client/report/report_budgets_html.h"

#include <limits>
#include <string>

#include "core/testing/status_matchers.h"
#include "core/testing/strings.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fairvault::client::report {
namespace {

using ::fairvault::testing::Count;
using ::fairvault::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::Not;

std::string Plot(const std::string& html) {
  const size_t begin = html.find("<g id=\"plot\">");
  const size_t end = html.find("</svg>", begin);
  return begin == std::string::npos ? "" : html.substr(begin, end - begin);
}

LedgerRow Charge(int64_t seq, std::string company, std::string dataset, double epsilon) {
  LedgerRow row;
  row.seq = seq;
  row.time_unix_micros = 1'700'000'000'000'000 + seq * 1'000'000;
  row.kind = "charge";
  row.account = std::move(company);
  row.dataset = std::move(dataset);
  row.request_kind = "NoisyCounts";
  row.epsilon = epsilon;
  row.mechanism = "discrete_laplace";
  return row;
}

BudgetsReport TwoCompanies() {
  BudgetsReport report;
  report.server = "127.0.0.1:50051";
  LedgerRow grant;
  grant.seq = 1;
  grant.kind = "grant";
  grant.account = "acme";
  grant.dataset = "adult";
  grant.epsilon = 7;
  grant.time_unix_micros = 1'700'000'001'000'000;
  grant.actor = "regulator";
  LedgerRow cap = grant;
  cap.seq = 2;
  cap.time_unix_micros = 1'700'000'002'000'000;
  cap.kind = "cap";
  cap.account = "";
  cap.epsilon = 12;
  cap.actor = "";  // written before the vault recorded who set it
  report.ledger = {grant,
                   cap,
                   Charge(3, "acme", "adult", 0.5),
                   Charge(4, "beta", "adult", 0.25),
                   Charge(5, "acme", "adult", 1),
                   Charge(6, "acme", "adult", 0.125)};
  report.budgets = {{"acme", "adult", 7, 1e-6, 1.625, 5.375, 3},
                    {"beta", "adult", 2, 0, 0.25, 1.75, 1},
                    {"", "adult", 12, 1e-6, 1.875, 10.125, 4}};
  report.verification = {true, 6, 0, "", "9f86d081884c7d659a2feaa0c55ad015"};
  report.access_log = {{1'700'000'010'000'000, "acme", "adult", "art_1", 100, 100},
                       {1'700'000'011'000'000, "acme", "adult", "art_1", 50, 10},
                       {1'700'000'012'000'000, "beta", "adult", "art_2", 7, -1}};
  return report;
}

TEST(BudgetsReportTest, OneMarkPerChargeAndOneLinePerCompanyAndDataset) {
  ASSERT_OK_AND_ASSIGN(const std::string html, RenderBudgetsHtml(TwoCompanies()));
  const std::string plot = Plot(html);
  EXPECT_EQ(Count(plot, "class=\"mark\""), 4);
  EXPECT_EQ(Count(plot, "class=\"line\""), 2);
  EXPECT_EQ(Count(html, "class=\"legend-entry\""), 2);
  EXPECT_THAT(html, HasSubstr(">acme / adult</text>"));
  EXPECT_THAT(html, HasSubstr(">beta / adult</text>"));
  // acme's running total 0.5, 1.5, 1.625 in the tooltips and in the table.
  EXPECT_THAT(plot, HasSubstr("(total 0.5)"));
  EXPECT_THAT(plot, HasSubstr("(total 1.5)"));
  EXPECT_THAT(plot, HasSubstr("(total 1.625)"));
  EXPECT_THAT(html, HasSubstr("<td>acme</td><td>adult</td><td>3</td><td>1.625</td>"));
  // The step line rises at each charge: three vertical moves for acme.
  const size_t acme_line = plot.find("class=\"line\" d=\"");
  ASSERT_NE(acme_line, std::string::npos);
  const std::string d = plot.substr(acme_line, plot.find('"', acme_line + 16) - acme_line);
  EXPECT_EQ(Count(d, "V"), 3) << d;
}

TEST(BudgetsReportTest, TablesShowVerificationHeadHashGrantsCapsAndAccessVolume) {
  ASSERT_OK_AND_ASSIGN(const std::string html, RenderBudgetsHtml(TwoCompanies()));
  EXPECT_THAT(html, HasSubstr("<b id=\"ledger-status\">verified</b>"));
  EXPECT_THAT(html, HasSubstr("<code id=\"head-hash\">9f86d081884c7d659a2feaa0c55ad015</code>"));
  EXPECT_THAT(html, HasSubstr("<td>acme</td><td>adult</td><td>7</td><td>1e-06</td><td>1.625</td>"
                              "<td>5.375</td><td>3</td>"));
  EXPECT_THAT(html, HasSubstr("<td><i>cap (all companies)</i></td><td>adult</td><td>12</td>"));
  EXPECT_THAT(html, HasSubstr("3 Decide calls, 157 rows"));
  EXPECT_THAT(html, HasSubstr("<td><code>art_1</code></td><td>2</td><td>150</td><td>110</td>"));
  // A call logged before new decisions were counted: unknown, not a number.
  EXPECT_THAT(html, HasSubstr("<td><code>art_2</code></td><td>1</td><td>7</td><td>?</td>"));
  EXPECT_THAT(html, HasSubstr("<span>ledger rows: <b>6</b></span>"));
  EXPECT_THAT(html, HasSubstr("<span>charges: <b>4</b></span>"));
  // The grant history: who set each budget, in ledger order.
  EXPECT_THAT(html, HasSubstr("<td>1</td><td>2023-11-14 22:13:21Z</td><td>regulator</td>"
                              "<td>acme</td><td>adult</td><td>7</td><td>0</td>"));
  EXPECT_THAT(html, HasSubstr("<td>2</td><td>2023-11-14 22:13:22Z</td><td><i>not recorded</i>"
                              "</td><td><i>cap (all companies)</i></td><td>adult</td><td>12</td>"));
}

TEST(BudgetsReportTest, TimeAxisBudgetLinesComposedSpendAndEveryChargeWithItsKey) {
  BudgetsReport report = TwoCompanies();
  report.ledger[4].idempotency_key = "acme-<2>";
  report.ledger[4].request_kind = "AuditClassifier";
  report.ledger[4].artifact_id = "art_9";
  report.ledger[5].job_id = "job_<7>";
  ASSERT_OK_AND_ASSIGN(const std::string html, RenderBudgetsHtml(report));
  // x is time: 1700000001..1700000006 s are 22:13:21..22:13:26 UTC on 2023-11-14.
  EXPECT_THAT(html, HasSubstr(">time (UTC)</text>"));
  EXPECT_THAT(html, HasSubstr(">22:13:21</text>"));
  EXPECT_THAT(html, HasSubstr(">22:13:26</text>"));
  // acme's grant (dashed, its colour) and adult's cap (dotted grey): budget lines, not marks.
  EXPECT_THAT(html, HasSubstr("<title>grant to acme on adult</title>"));
  EXPECT_THAT(html, HasSubstr("<title>dataset-wide cap on adult</title>"));
  EXPECT_EQ(Count(html, "class=\"budget-line\""), 2);  // beta's grant row is not in the ledger
  // What the accountant composes now: a diamond per series with ListBudgets' spent.
  EXPECT_THAT(Plot(html), HasSubstr("acme / adult: composed spend now 1.625"));
  EXPECT_EQ(Count(Plot(html), "class=\"mark\""), 4);  // the diamonds are not marks
  // Spend by request kind, and every charge with its key (escaped).
  EXPECT_THAT(html, HasSubstr("<td>acme</td><td>adult</td><td>AuditClassifier</td><td>1</td>"
                              "<td>1</td>"));
  EXPECT_THAT(html, HasSubstr("<td>acme</td><td>adult</td><td>NoisyCounts</td><td>2</td>"
                              "<td>0.625</td>"));
  EXPECT_THAT(html, HasSubstr("<td><code>acme-&lt;2&gt;</code></td><td><code>artifact art_9"
                              "</code></td>"));
  EXPECT_THAT(html, HasSubstr("<td><code>job job_&lt;7&gt;</code></td></tr>"));
  // The same charges as CSV, in ledger order.
  const std::string csv = ChargesCsv(report);
  EXPECT_THAT(csv, ::testing::StartsWith(
                       "seq,time,company,dataset,request,epsilon,delta,mechanism,"
                       "idempotency_key,artifact_id,job_id\n"
                       "3,2023-11-14 22:13:23Z,acme,adult,NoisyCounts,0.5,0,"));
  EXPECT_THAT(csv, HasSubstr(",acme-<2>,art_9,\n"));
  EXPECT_THAT(csv, HasSubstr(",job_<7>\n"));
  // A key a spreadsheet would run as a formula is written as text.
  report.ledger[5].idempotency_key = "=HYPERLINK(\"https://x/\")";
  EXPECT_THAT(ChargesCsv(report), HasSubstr(",\"'=HYPERLINK(\"\"https://x/\"\")\",,job_<7>\n"));
  EXPECT_EQ(Count(csv, "\n"), 1 + 4);
}

TEST(BudgetsReportTest, TheComposedSpendIsPlottedWithThePlainSumFaintAboveIt) {
  BudgetsReport report = TwoCompanies();
  // acme's three charges compose to less than their sum (0.5, 1.5, 1.625).
  report.ledger[2].composed_after = 0.5;
  report.ledger[4].composed_after = 1.2;
  report.ledger[5].composed_after = 1.25;
  report.ledger[3].composed_after = 0.25;  // beta
  ASSERT_OK_AND_ASSIGN(const std::string html, RenderBudgetsHtml(report));
  EXPECT_THAT(Plot(html), HasSubstr("(composed 1.2, sum 1.5)"));
  EXPECT_EQ(Count(html, "class=\"sum-line\""), 2);
  EXPECT_THAT(html, HasSubstr("<td>acme</td><td>adult</td><td>3</td><td>1.625</td><td>1.25</td>"));
  EXPECT_THAT(html, HasSubstr(">\u03b5: composed spend, grant, cap</text>"));
  // Without the costs of every charge: the sum, as before.
  report.ledger[3].composed_after.reset();
  ASSERT_OK_AND_ASSIGN(const std::string summed, RenderBudgetsHtml(report));
  EXPECT_EQ(Count(summed, "class=\"sum-line\""), 0);
  EXPECT_THAT(Plot(summed), HasSubstr("(total 1.5)"));
}

TEST(BudgetsReportTest, FailedVerificationIsShownWithTheBadRow) {
  BudgetsReport report = TwoCompanies();
  report.verification = {false, 4, 5, "hash mismatch <at> row 5", "abc"};
  ASSERT_OK_AND_ASSIGN(const std::string html, RenderBudgetsHtml(report));
  EXPECT_THAT(html, HasSubstr("<b id=\"ledger-status\">FAILED</b>"));
  EXPECT_THAT(html, HasSubstr("<th>first bad seq</th><td>5</td>"));
  EXPECT_THAT(html, HasSubstr("hash mismatch &lt;at&gt; row 5"));
  EXPECT_THAT(html, HasSubstr("FAILED verification"));
}

TEST(BudgetsReportTest, EscapesEveryStringFromTheServer) {
  BudgetsReport report = TwoCompanies();
  const std::string evil = "<script>alert('x')</script>&\"";
  for (LedgerRow& row : report.ledger) {
    if (row.kind == "charge" && row.account == "beta") {
      row.account = evil;
      row.dataset = evil;
      row.request_kind = evil;
      row.mechanism = evil;
    }
  }
  report.budgets[1].company = evil;
  report.budgets[1].dataset = evil;
  report.access_log[2].account = evil;
  report.access_log[2].dataset = evil;
  report.access_log[2].artifact_id = evil;
  report.verification.head_hash = evil;
  report.server = evil;
  report.title = evil;
  ASSERT_OK_AND_ASSIGN(const std::string html, RenderBudgetsHtml(report));
  EXPECT_THAT(html, Not(HasSubstr("<script>alert")));
  EXPECT_THAT(html, Not(HasSubstr("'x'")));
  EXPECT_THAT(html, HasSubstr("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;&quot;"));
  // The page's own script is the only one.
  EXPECT_EQ(Count(html, "<script>"), 1);
}

TEST(BudgetsReportTest, EmptyVaultGivesAnEmptyChartAndNotes) {
  BudgetsReport report;
  report.verification = {true, 0, 0, "", ""};
  ASSERT_OK_AND_ASSIGN(const std::string html, RenderBudgetsHtml(report));
  EXPECT_EQ(Count(Plot(html), "class=\"mark\""), 0);
  EXPECT_THAT(html, HasSubstr("<g id=\"plot\">"));
  EXPECT_THAT(html, HasSubstr(">no charges yet</text>"));
  EXPECT_THAT(html, HasSubstr("no grants or caps"));
  EXPECT_THAT(html, HasSubstr("no Decide calls"));
}

TEST(BudgetsReportTest, RefusesANonFiniteEpsilon) {
  BudgetsReport report = TwoCompanies();
  report.ledger[3].epsilon = std::numeric_limits<double>::infinity();
  EXPECT_THAT(RenderBudgetsHtml(report), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace fairvault::client::report
