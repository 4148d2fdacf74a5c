// Auditor commands: ledger rows and budgets of every company, the access log of Decide
// calls, and ledger verification (through the auditor service, or the regulator service for
// `ledger verify`).
#include <iostream>

#include "absl/strings/str_cat.h"
#include "client/cli/cli_common.h"
#include "core/util/status_macros.h"

namespace fairvault::client::cli {
namespace {

// Prints the verification and turns a failed check into an error (exit status 1).
absl::Status ReportVerify(Context& ctx, const v1::VerifyLedgerResponse& resp) {
  if (ctx.json()) {
    PrintJson(resp);
  } else {
    std::cout << FormatVerify(resp);
  }
  if (!resp.ok()) {
    return absl::DataLossError(absl::StrCat("ledger verification failed at seq ",
                                            resp.first_bad_seq(), ": ", resp.message()));
  }
  return absl::OkStatus();
}

absl::Status AuditorLedger(Context& ctx) {
  ASSIGN_OR_RETURN(Client * client, ctx.client());
  v1::ListLedgerRequest req;
  req.set_company(ctx.flags().Get("company"));
  ASSIGN_OR_RETURN(v1::ListLedgerResponse resp,
                   FetchLedger(ctx.flags(), req, [client](const v1::ListLedgerRequest& r) {
                     return client->AuditorListLedger(r);
                   }));
  if (ctx.json()) {
    PrintJson(resp);
  } else {
    std::cout << FormatLedger(resp.entries());
  }
  return absl::OkStatus();
}

absl::Status AuditorBudgets(Context& ctx) {
  v1::ListBudgetsRequest req;
  req.set_dataset(ctx.flags().Get("dataset"));
  req.set_company(ctx.flags().Get("company"));
  ASSIGN_OR_RETURN(Client * client, ctx.client());
  ASSIGN_OR_RETURN(v1::ListBudgetsResponse resp, client->AuditorListBudgets(req));
  if (ctx.json()) {
    PrintJson(resp);
  } else {
    std::cout << FormatBudgets(resp.budgets());
  }
  return absl::OkStatus();
}

absl::Status AuditorAccessLog(Context& ctx) {
  const ParsedFlags& flags = ctx.flags();
  ASSIGN_OR_RETURN(const int64_t after, flags.GetInt("after", 0));
  ASSIGN_OR_RETURN(const int64_t limit, flags.GetInt("limit", 0));
  if (after < 0) return UsageError("--after must be >= 0");
  if (limit < 0 || limit > 10000) return UsageError("--limit must be in 1..10000");
  v1::ListAccessLogRequest req;
  req.set_company(flags.Get("company"));
  req.set_after_seq(after);
  req.set_limit(static_cast<int32_t>(limit));
  ASSIGN_OR_RETURN(Client * client, ctx.client());
  v1::ListAccessLogResponse resp;
  while (true) {
    ASSIGN_OR_RETURN(v1::ListAccessLogResponse page, client->AuditorListAccessLog(req));
    if (page.entries().empty()) break;
    req.set_after_seq(page.entries(page.entries_size() - 1).seq());
    for (v1::AccessLogEntry& e : *page.mutable_entries()) *resp.add_entries() = std::move(e);
    if (!flags.GetBool("all")) break;
  }
  if (ctx.json()) {
    PrintJson(resp);
    return absl::OkStatus();
  }
  if (resp.entries().empty()) {
    std::cout << "(no access-log rows)\n";
    return absl::OkStatus();
  }
  TextTable table({"SEQ", "TIME", "ACCOUNT", "DATASET", "ARTIFACT", "ROWS", "NEW"});
  for (const v1::AccessLogEntry& e : resp.entries()) {
    table.AddRow({absl::StrCat(e.seq()), FormatUnixMicros(e.time_unix_micros()), e.account(),
                  e.dataset(), e.artifact_id(), absl::StrCat(e.rows()),
                  e.new_decisions() < 0 ? "?" : absl::StrCat(e.new_decisions())});
  }
  std::cout << table.Render();
  return absl::OkStatus();
}

absl::Status AuditorVerify(Context& ctx) {
  ASSIGN_OR_RETURN(Client * client, ctx.client());
  ASSIGN_OR_RETURN(v1::VerifyLedgerResponse resp, client->AuditorVerifyLedger());
  return ReportVerify(ctx, resp);
}

absl::Status RegulatorVerify(Context& ctx) {
  ASSIGN_OR_RETURN(Client * client, ctx.client());
  ASSIGN_OR_RETURN(v1::VerifyLedgerResponse resp, client->VerifyLedger());
  return ReportVerify(ctx, resp);
}

}  // namespace

std::vector<Command> AuditorCommands() {
  std::vector<FlagSpec> ledger_flags = LedgerPagingFlags();
  ledger_flags.push_back({"company", "NAME", "only rows of this company"});
  return {
      {"auditor ledger", "list ledger rows of all companies (auditor, regulator)", "", ledger_flags,
       true, AuditorLedger},
      {"auditor budgets",
       "list all grants, then dataset caps (auditor, regulator)",
       "",
       {{"dataset", "NAME", "only this dataset"}, {"company", "NAME", "only this company"}},
       true,
       AuditorBudgets},
      {"auditor access-log",
       "list Decide calls: account, dataset, artifact, rows, time (auditor, regulator)",
       "",
       {{"company", "NAME", "only calls of this company"},
        {"after", "SEQ", "only rows with seq > SEQ (default 0)"},
        {"limit", "N", "rows per call, 1..10000 (default: server's 1000)"},
        {"all", "", "keep fetching pages until the end of the log"}},
       true,
       AuditorAccessLog},
      {"auditor verify",
       "verify the ledger's hash chain and spend totals (auditor, regulator)",
       "Exit status 1 if verification fails. Publish the head hash to detect truncation.",
       {},
       true,
       AuditorVerify},
      {"ledger verify",
       "verify the ledger through the regulator service (regulator)",
       "Exit status 1 if verification fails. Publish the head hash to detect truncation.",
       {},
       true,
       RegulatorVerify},
  };
}

}  // namespace fairvault::client::cli
