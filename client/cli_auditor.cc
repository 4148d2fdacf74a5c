// Audit commands: ledger rows and budgets of every company, and ledger verification (through
// the auditor service, or the regulator service for `ledger verify`).
#include <iostream>

#include "absl/strings/str_cat.h"
#include "client/cli_common.h"
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
