// `fairvault report budgets`: the auditor's (or regulator's) page of every company's privacy
// spend, grants and caps, the ledger's verification and head hash, and the access log's volume,
// fetched from the auditor service and rendered by client/report/report_budgets_html.h.
#include <climits>
#include <iostream>
#include <map>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "client/cli/cli_common.h"
#include "client/lib/ledger_check.h"
#include "client/report/report_budgets_html.h"
#include "core/accounting/accountant.h"
#include "core/util/status_macros.h"

namespace fairvault::client::cli {
namespace {

// --since / --until: an RFC 3339 time ("2026-11-27T10:00:00Z") or a UTC date ("2026-11-27").
absl::StatusOr<int64_t> TimeFlag(const ParsedFlags& flags, const std::string& name,
                                 int64_t missing) {
  if (!flags.Has(name)) return missing;
  const std::string text = flags.Get(name);
  absl::Time t;
  std::string error;
  if (absl::ParseTime(absl::RFC3339_full, text, &t, &error) ||
      absl::ParseTime("%Y-%m-%d", text, absl::UTCTimeZone(), &t, &error)) {
    return absl::ToUnixMicros(t);
  }
  return UsageError(absl::StrCat("--", name, " must be a time like 2026-11-27T10:00:00Z or a ",
                                 "date like 2026-11-27 (got '", text, "')"));
}

absl::Status ReportBudgets(Context& ctx) {
  const ParsedFlags& flags = ctx.flags();
  const std::string out_path = flags.Get("out");
  // Filters, checked before any call: a company, a dataset, a period of charges.
  const std::string company = flags.Get("company"), dataset = flags.Get("dataset");
  ASSIGN_OR_RETURN(const int64_t since, TimeFlag(flags, "since", INT64_MIN));
  ASSIGN_OR_RETURN(const int64_t until, TimeFlag(flags, "until", INT64_MAX));
  if (since > until) return UsageError("--since is after --until");
  ASSIGN_OR_RETURN(Client * client, ctx.client());
  report::BudgetsReport report;
  report.server = client->target();
  report.generated_at = FormatUnixMicros(absl::ToUnixMicros(absl::Now()));
  if (flags.Has("title")) report.title = flags.Get("title");
  std::vector<std::string> filters;
  if (!company.empty()) filters.push_back(absl::StrCat("company ", company));
  if (!dataset.empty()) filters.push_back(absl::StrCat("dataset ", dataset));
  if (flags.Has("since")) filters.push_back(absl::StrCat("charges from ", flags.Get("since")));
  if (flags.Has("until")) filters.push_back(absl::StrCat("charges until ", flags.Get("until")));
  report.filters = absl::StrJoin(filters, ", ");

  // The vault's verification, then the checkpoint; with --log-key every row and the budgets are
  // checked here, and the page shows those very rows and budgets (filtered here), not another
  // listing that the vault could answer differently.
  ASSIGN_OR_RETURN(const v1::VerifyLedgerResponse verify, client->AuditorVerifyLedger());
  report.verification = {verify.ok(), verify.rows_checked(), verify.first_bad_seq(),
                         verify.message(), verify.head_hash()};
  CheckedLedger checked;
  ASSIGN_OR_RETURN(report.checkpoint, CheckLatestCheckpoint(flags, client, &verify, &checked));

  // Each charge's composed spend is recomputed from the rows' costs, in ledger order, as the
  // vault's accountant composes them: every earlier charge of the company on the dataset, at
  // the delta of its latest grant row (so a period's first charge counts what came before).
  // Grants and caps are kept whatever their time (they set the budget lines); charges only
  // within the period.
  std::map<std::pair<std::string, std::string>, core::accounting::Spend> spends;
  std::map<std::pair<std::string, std::string>, double> grant_delta;
  auto add_row = [&](const v1::LedgerEntry& e) {
    const std::pair<std::string, std::string> key{e.account(), e.dataset()};
    if (e.kind() == "grant") grant_delta[key] = e.delta();
    std::optional<double> composed;
    if (e.kind() == "charge" && (e.has_pure_epsilon_micro() || e.rdp_nano_size() > 0)) {
      core::accounting::Spend& spend = spends[key];
      spend.Add(RecordedCost(e));
      const int64_t micro = core::accounting::SpentEpsilonMicro(spend, grant_delta[key]);
      if (micro != INT64_MAX) composed = core::accounting::MicroToEpsilon(micro);
    }
    if (e.kind() == "charge" && (e.time_unix_micros() < since || e.time_unix_micros() > until)) {
      return;
    }
    report.ledger.push_back({e.seq(), e.time_unix_micros(), e.kind(), e.account(), e.dataset(),
                             e.request_kind(), e.epsilon(), e.delta(), e.mechanism(),
                             e.idempotency_key(), e.actor(), e.artifact_id(), e.job_id(),
                             composed});
  };
  // The filters as the vault applies them: the row's account and dataset names, exactly.
  auto wanted = [&](const v1::LedgerEntry& e) {
    return (company.empty() || e.account() == company) &&
           (dataset.empty() || e.dataset() == dataset);
  };
  v1::ListBudgetsResponse budgets;
  if (checked.complete) {
    for (const v1::LedgerEntry& e : checked.entries) {
      if (wanted(e)) add_row(e);
    }
    // ListBudgets' filters: caps only without a company.
    for (const v1::Budget& b : checked.budgets.budgets()) {
      if ((dataset.empty() || b.dataset() == dataset) &&
          (company.empty() || b.company() == company)) {
        *budgets.add_budgets() = b;
      }
    }
  } else {
    // Every ledger row (of the company and dataset asked for), page by page.
    v1::ListLedgerRequest ledger_req;
    ledger_req.set_limit(10000);
    ledger_req.set_company(company);
    ledger_req.set_dataset(dataset);
    while (true) {
      ASSIGN_OR_RETURN(const v1::ListLedgerResponse page, client->AuditorListLedger(ledger_req));
      if (page.entries().empty()) break;
      for (const v1::LedgerEntry& e : page.entries()) add_row(e);
      ledger_req.set_after_seq(page.entries(page.entries_size() - 1).seq());
    }
    v1::ListBudgetsRequest budgets_req;
    budgets_req.set_dataset(dataset);
    budgets_req.set_company(company);
    ASSIGN_OR_RETURN(budgets, client->AuditorListBudgets(budgets_req));
  }
  for (const v1::Budget& b : budgets.budgets()) {
    report.budgets.push_back({b.company(), b.dataset(), b.epsilon_granted(), b.delta(),
                              b.epsilon_spent(), b.epsilon_remaining(), b.releases()});
  }
  v1::ListAccessLogRequest access_req;
  access_req.set_limit(10000);
  access_req.set_company(company);
  while (true) {
    ASSIGN_OR_RETURN(const v1::ListAccessLogResponse page,
                     client->AuditorListAccessLog(access_req));
    if (page.entries().empty()) break;
    for (const v1::AccessLogEntry& e : page.entries()) {
      if (!dataset.empty() && e.dataset() != dataset) continue;
      report.access_log.push_back({e.time_unix_micros(), e.account(), e.dataset(), e.artifact_id(),
                                   e.rows(), e.new_decisions()});
    }
    access_req.set_after_seq(page.entries(page.entries_size() - 1).seq());
  }

  ASSIGN_OR_RETURN(const std::string html, report::RenderBudgetsHtml(report));
  RETURN_IF_ERROR(WriteStringToFile(out_path, html));
  if (flags.Has("csv")) {
    RETURN_IF_ERROR(WriteStringToFile(flags.Get("csv"), report::ChargesCsv(report)));
    std::cout << "wrote " << flags.Get("csv") << " (every charge shown, as CSV)\n";
  }
  int64_t charges = 0;
  for (const report::LedgerRow& row : report.ledger) charges += row.kind == "charge";
  std::cout << "wrote " << out_path << " (" << report.ledger.size() << " ledger rows, " << charges
            << " charges, " << report.budgets.size() << " grants and caps, "
            << report.access_log.size() << " Decide calls; ledger "
            << (verify.ok() ? "verified" : "FAILED verification") << ", head hash "
            << verify.head_hash() << ")\n";
  const report::CheckpointCheck& ckpt = report.checkpoint;
  std::cout << FormatCheckpointCheck(ckpt);
  if (!verify.ok()) {
    return absl::DataLossError(absl::StrCat("ledger verification failed at seq ",
                                            verify.first_bad_seq(), ": ", verify.message(),
                                            " (the page was written and says so)"));
  }
  if (!ckpt.ok) {
    return absl::DataLossError(
        "the latest checkpoint or the ledger's rows did NOT verify against it (the page was "
        "written and says what failed)");
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
       "resources): cumulative epsilon per company and dataset over time beside its grant and\n"
       "the dataset's cap (steps at each grant or cap row) and what the accountant composes\n"
       "now (SVG), the grants and caps, who set each (the grant and cap history), spend by\n"
       "request kind, every charge (seq, time, kind, epsilon, delta, mechanism, idempotency\n"
       "key, the artifact or job it created), the verification status with the head\n"
       "hash (compare it with `auditor verify`), the transparency log's latest signed\n"
       "checkpoint (with --log-key its signature checked, with --kept proved consistent with\n"
       "the checkpoint you kept, with --witness its cosignatures; with --log-key every ledger\n"
       "row is also checked here against it, as `auditor verify --log-key` does), and Decide\n"
       "calls and rows per company and artifact. Exit status 1 when a verification fails (the\n"
       "page is still written).",
       {{"out", "FILE.html", "where to write the page", true},
        {"title", "TEXT", "page title"},
        {"company", "NAME", "only this company's rows"},
        {"dataset", "NAME", "only this dataset's rows"},
        {"since", "TIME", "only charges at or after TIME (2026-11-27 or 2026-11-27T10:00:00Z)"},
        {"until", "TIME", "only charges at or before TIME"},
        {"csv", "FILE.csv", "also write every charge shown as CSV"},
        CheckpointCheckFlags()[0],
        CheckpointCheckFlags()[1],
        CheckpointCheckFlags()[2],
        CheckpointCheckFlags()[3]},
       true,
       ReportBudgets},
  };
}

}  // namespace fairvault::client::cli
