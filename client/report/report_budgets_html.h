// The auditor's budgets report: a self-contained HTML page (report_svg.h machinery, the same
// layout contract as report_html.h: one <svg id="chart">, marks in <g id="plot">, the load
// script's data-* attributes on <body>) with the privacy spend over the ledger per (company,
// dataset), the grants and caps, the ledger's verification and head hash, and the volume of
// the access log. A pure function of already-fetched rows: `fairvault report budgets` converts
// the auditor service's responses into these structs. Every string is escaped.
#ifndef FAIRVAULT_CLIENT_REPORT_REPORT_BUDGETS_HTML_H_
#define FAIRVAULT_CLIENT_REPORT_REPORT_BUDGETS_HTML_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace fairvault::client::report {

// One ledger row (charges are plotted; grants and caps are counted).
struct LedgerRow {
  int64_t seq = 0;
  int64_t time_unix_micros = 0;
  std::string kind;     // "grant", "cap" or "charge"
  std::string account;  // the company (empty for caps)
  std::string dataset;
  std::string request_kind;
  double epsilon = 0;  // a charge's own ε; a grant's or cap's new budget
  double delta = 0;
  std::string mechanism;
  std::string idempotency_key;  // a charge's
  std::string actor;            // a grant's or cap's regulator account (empty: not recorded)
  std::string artifact_id;      // a charge's artifact, if it created one
  std::string job_id;           // a charge's training job, if it created one
  // A charge's company's composed spend on the dataset after it, as the accountant composes
  // it at the grant's δ (recomputed from the ledger's costs; see `report budgets`).
  std::optional<double> composed_after;
};

// A grant (company set) or a dataset cap (company empty), as ListBudgets returns it.
struct BudgetRow {
  std::string company;
  std::string dataset;
  double epsilon_granted = 0;
  double delta = 0;
  double epsilon_spent = 0;
  double epsilon_remaining = 0;
  int64_t releases = 0;
};

struct LedgerVerification {
  bool ok = false;
  int64_t rows_checked = 0;
  int64_t first_bad_seq = 0;
  std::string message;
  std::string head_hash;
};

// The transparency log's latest checkpoint as `report budgets` checked it (issue 25).
struct CheckpointCheck {
  // false: not asked for, or the vault signs no checkpoints (then `ok` is false when a check
  // was asked for, and `signature` says so)
  bool present = false;
  int64_t size = 0;
  std::string root_hex;
  std::string origin;
  // With the verifier key: whether the vault's signature verified ("" when no key was given).
  std::string signature;
  int cosignatures = 0;
  // With witness keys: which cosigned, against the quorum ("" when none were given).
  std::string witnesses;
  // With a kept checkpoint: "consistent with the kept checkpoint of N rows" or what failed.
  std::string consistency;
  // With the verifier key: the whole ledger as listed, checked against this checkpoint by the
  // client ("checked here: ..." or "NOT verified: ..."; "" when not checked).
  std::string ledger;
  bool ok = true;  // false when any check above failed
  std::string note;  // the signed note, shown whole
};

// One access-log row (a Decide call).
struct AccessRow {
  int64_t time_unix_micros = 0;
  std::string account;
  std::string dataset;
  std::string artifact_id;
  int64_t rows = 0;
  int64_t new_decisions = -1;  // -1: not recorded
};

struct BudgetsReport {
  std::string title = "Privacy budgets and ledger";
  std::string server;        // shown in the header line (optional)
  std::string generated_at;  // e.g. "2026-11-23 14:00:00Z" (optional)
  std::vector<LedgerRow> ledger;
  std::vector<BudgetRow> budgets;
  LedgerVerification verification;
  CheckpointCheck checkpoint;
  std::vector<AccessRow> access_log;
  // What the rows were filtered to (shown in the header; empty: everything).
  std::string filters;
};

// The per-release table as CSV (seq, time, company, dataset, request, epsilon, delta,
// mechanism, idempotency key, artifact id, job id), one row per charge in ledger order: `report budgets --csv`.
// Text that a spreadsheet would run as a formula (starting with =, +, -, @, tab or CR) is
// prefixed with an apostrophe.
std::string ChargesCsv(const BudgetsReport& report);

// The page. The chart plots, for each (company, dataset) with charges, its spend against time:
// the composed spend after each charge when every charge has one (composed_after), else the
// cumulative sum of its charges' ε, as a step line with one mark per charge (data-points = the
// number of charge rows); with the composed spend the plain sum is a faint line above it, its grant as a dashed step line (and the dataset's cap, dotted),
// both over time from the ledger's grant and cap rows, and a diamond at the right edge for
// what the accountant composes now (ListBudgets' spent: at most the sum); series are ordered
// by company, then dataset. Tables: the verification (head hash in <code id="head-hash">,
// status in <b id="ledger-status">, "verified" or "FAILED"), grants and caps, spend by request
// kind, every charge (seq, time, kind, ε, δ, mechanism, idempotency key) and the access log.
// A vault without charges gives an empty chart and a note. Never fails on content; StatusOr
// for symmetry with the other reports (InvalidArgument on a non-finite ε).
absl::StatusOr<std::string> RenderBudgetsHtml(const BudgetsReport& report);

}  // namespace fairvault::client::report

#endif  // FAIRVAULT_CLIENT_REPORT_REPORT_BUDGETS_HTML_H_
