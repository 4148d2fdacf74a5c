// `fairvault report budgets`: the auditor's (or regulator's) page of every company's privacy
// spend, grants and caps, the ledger's verification and head hash, and the access log's volume,
// fetched from the auditor service and rendered by client/report/report_budgets_html.h.
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/cli/cli_common.h"
#include "client/report/report_budgets_html.h"
#include "core/util/status_macros.h"

namespace fairvault::client::cli {
namespace {

absl::Status ReportBudgets(Context& ctx) {
  const std::string out_path = ctx.flags().Get("out");
  ASSIGN_OR_RETURN(Client * client, ctx.client());
  report::BudgetsReport report;
  report.server = client->target();
  report.generated_at = FormatUnixMicros(absl::ToUnixMicros(absl::Now()));
  if (ctx.flags().Has("title")) report.title = ctx.flags().Get("title");

  // Every ledger row, page by page.
  v1::ListLedgerRequest ledger_req;
  ledger_req.set_limit(10000);
  while (true) {
    ASSIGN_OR_RETURN(const v1::ListLedgerResponse page, client->AuditorListLedger(ledger_req));
    if (page.entries().empty()) break;
    for (const v1::LedgerEntry& e : page.entries()) {
      report.ledger.push_back({e.seq(), e.time_unix_micros(), e.kind(), e.account(), e.dataset(),
                               e.request_kind(), e.epsilon(), e.delta(), e.mechanism()});
    }
    ledger_req.set_after_seq(page.entries(page.entries_size() - 1).seq());
  }
  ASSIGN_OR_RETURN(const v1::ListBudgetsResponse budgets, client->AuditorListBudgets());
  for (const v1::Budget& b : budgets.budgets()) {
    report.budgets.push_back({b.company(), b.dataset(), b.epsilon_granted(), b.delta(),
                              b.epsilon_spent(), b.epsilon_remaining(), b.releases()});
  }
  ASSIGN_OR_RETURN(const v1::VerifyLedgerResponse verify, client->AuditorVerifyLedger());
  report.verification = {verify.ok(), verify.rows_checked(), verify.first_bad_seq(),
                         verify.message(), verify.head_hash()};
  v1::ListAccessLogRequest access_req;
  access_req.set_limit(10000);
  while (true) {
    ASSIGN_OR_RETURN(const v1::ListAccessLogResponse page,
                     client->AuditorListAccessLog(access_req));
    if (page.entries().empty()) break;
    for (const v1::AccessLogEntry& e : page.entries()) {
      report.access_log.push_back({e.time_unix_micros(), e.account(), e.dataset(), e.artifact_id(),
                                   e.rows(), e.new_decisions()});
    }
    access_req.set_after_seq(page.entries(page.entries_size() - 1).seq());
  }

  ASSIGN_OR_RETURN(const std::string html, report::RenderBudgetsHtml(report));
  RETURN_IF_ERROR(WriteStringToFile(out_path, html));
  int64_t charges = 0;
  for (const report::LedgerRow& row : report.ledger) charges += row.kind == "charge";
  std::cout << "wrote " << out_path << " (" << report.ledger.size() << " ledger rows, " << charges
            << " charges, " << report.budgets.size() << " grants and caps, "
            << report.access_log.size() << " Decide calls; ledger "
            << (verify.ok() ? "verified" : "FAILED verification") << ", head hash "
            << verify.head_hash() << ")\n";
  if (!verify.ok()) {
    return absl::DataLossError(absl::StrCat("ledger verification failed at seq ",
                                            verify.first_bad_seq(), ": ", verify.message(),
                                            " (the page was written and says so)"));
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<Command> ReportBudgetsCommands() {
  return {
      {"report budgets",
       "HTML page of every company's privacy spend, grants and caps, ledger verification and "
       "access-log volume (auditor, regulator)",
       "Reads the whole ledger, the budgets, the ledger's verification and the access log\n"
       "through the auditor service and writes one self-contained page (no external\n"
       "resources): cumulative epsilon per company and dataset against the ledger sequence\n"
       "(SVG), the grants and caps, the verification status with the head hash (compare it\n"
       "with `auditor verify`), and Decide calls and rows per company and artifact. Exit status\n"
       "1 when verification fails (the page is still written).",
       {{"out", "FILE.html", "where to write the page", true}, {"title", "TEXT", "page title"}},
       true,
       ReportBudgets},
  };
}

}  // namespace fairvault::client::cli
