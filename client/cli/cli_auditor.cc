// Auditor commands: ledger rows and budgets of every company, the access log of Decide
// calls, and ledger verification (through the auditor service, or the regulator service for
// `ledger verify`).
#include <iostream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/cli/cli_common.h"
#include "client/report/report_budgets_html.h"
#include "core/util/status_macros.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"

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

// The vault's own verification; then, with --log-key, the vault's latest signed checkpoint
// (with --kept, --witness as `report budgets` checks it) and every row it lists, checked here.
absl::Status AuditorVerify(Context& ctx) {
  ASSIGN_OR_RETURN(Client * client, ctx.client());
  ASSIGN_OR_RETURN(v1::VerifyLedgerResponse resp, client->AuditorVerifyLedger());
  if (!ctx.flags().Has("log-key") && !ctx.flags().Has("kept") && !ctx.flags().Has("witness")) {
    return ReportVerify(ctx, resp);
  }
  ASSIGN_OR_RETURN(const report::CheckpointCheck check, CheckLatestCheckpoint(ctx.flags(), client, &resp));
  if (ctx.json()) {
    google::protobuf::Struct out;
    if (!google::protobuf::util::JsonStringToMessage(
             ToJson(resp), (*out.mutable_fields())["vault"].mutable_struct_value())
             .ok()) {
      return absl::InternalError("could not print the verification as JSON");
    }
    auto& fields = *(*out.mutable_fields())["checkpoint"].mutable_struct_value()->mutable_fields();
    fields["ok"].set_bool_value(check.ok);
    fields["size"].set_number_value(static_cast<double>(check.size));
    fields["root_hash"].set_string_value(check.root_hex);
    fields["signature"].set_string_value(check.signature);
    fields["witnesses"].set_string_value(check.witnesses);
    fields["consistency"].set_string_value(check.consistency);
    fields["ledger"].set_string_value(check.ledger);
    PrintJson(out);
  } else {
    std::cout << FormatVerify(resp) << FormatCheckpointCheck(check);
  }
  if (!resp.ok()) {
    return absl::DataLossError(absl::StrCat("ledger verification failed at seq ",
                                            resp.first_bad_seq(), ": ", resp.message()));
  }
  if (!check.ok) {
    std::string what = check.signature;
    for (const std::string* part :
         {&check.signature, &check.witnesses, &check.consistency, &check.ledger}) {
      if (absl::StrContains(*part, "NOT ") || absl::StrContains(*part, "INCONCLUSIVE")) {
        what = *part;
        break;
      }
    }
    return absl::DataLossError(
        absl::StrCat("the vault's signed checkpoint or its ledger did not verify: ", what));
  }
  return absl::OkStatus();
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
       "verify the ledger's hash chain and spend totals (auditor, regulator); with --log-key, "
       "check every row here against the vault's signed checkpoint",
       "Without --log-key the vault verifies its own database (VerifyLedger). With --log-key\n"
       "the client also checks, from what the vault lists and the key: the latest signed\n"
       "checkpoint's signature (with --kept: that it extends the checkpoint you kept; with\n"
       "--witness: its cosignatures), then every ledger row with its canonical encoding: each\n"
       "hashes to its hash and says what its encoding says, the rows chain from the genesis\n"
       "hash with no gap and hold VerifyLedger's head, the first N rows are the tree the\n"
       "checkpoint signed, the encodings' ids agree with the names, no charge took a company\n"
       "past the grant in force or a dataset past its cap (the rows' recorded costs composed\n"
       "as the vault's accountant does), and the vault's budgets are the rows' composition\n"
       "(read when the ledger held exactly the rows listed). Exit status 1 if anything fails.\n"
       "Publish the head hash to detect truncation. Limits: docs/operations.md, \"Checking\n"
       "the whole ledger yourself\".",
       CheckpointCheckFlags(),
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
