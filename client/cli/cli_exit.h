// How a `fairvault` command ends when it fails: one exit status per class of failure (the
// table in README.md and `fairvault --help`), and the error as text or, with --json, as one
// JSON object on stderr.
#ifndef FAIRVAULT_CLIENT_CLI_CLI_EXIT_H_
#define FAIRVAULT_CLIENT_CLI_CLI_EXIT_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace fairvault::client::cli {

// Exit statuses by class. Scripts may rely on them; `health` keeps 0/1 (see kExitError).
enum ExitCode : int {
  kExitOk = 0,
  // Anything not below: the vault's INVALID_ARGUMENT, FAILED_PRECONDITION, ALREADY_EXISTS,
  // INTERNAL, DATA_LOSS; a failed or cancelled training job (ABORTED); a ledger that does not
  // verify.
  kExitError = 1,
  // A command-line mistake (unknown flag, missing or bad value, no API key) or a local input
  // the CLI refused before calling the vault (a missing or malformed CSV, JSON or secret file).
  kExitUsage = 2,
  // RESOURCE_EXHAUSTED: refused for budget (the grant, the dataset-wide cap, a decision
  // licence) or a full job queue; also a --dry-run that would be refused for budget.
  kExitBudget = 3,
  // PERMISSION_DENIED or UNAUTHENTICATED: the key, its role, or no grant on the dataset.
  kExitPermission = 4,
  // NOT_FOUND from the vault: an unknown dataset, table handle, artifact, job, or grant.
  kExitNotFound = 5,
  // UNAVAILABLE or DEADLINE_EXCEEDED: the vault cannot be reached or did not answer in time
  // (also `job wait --timeout`); worth retrying later.
  kExitUnavailable = 6,
};

// The exit status of a failed command (never kExitOk). The vault's codes map by class; a
// status the CLI made itself (not IsFromVault) for bad local input is kExitUsage.
int ExitCodeFor(const absl::Status& status);
// "usage", "budget", "permission", "not_found", "unavailable" or "error".
std::string ExitClassName(int exit_code);
// The `--help` and README table of exit statuses, one line each.
std::string ExitStatusHelp();

// The request field or flag a message names, or "": the vault's refusal of a request
// (INVALID_ARGUMENT, FAILED_PRECONDITION, OUT_OF_RANGE, ALREADY_EXISTS) starting "<field>: "
// or "<field> must " (proto field names, e.g. "masses_key", "header.ttl_seconds"), a CLI usage
// error starting "--<flag>", or a budget refusal ("request costs epsilon=...": "epsilon").
std::string FieldOf(const absl::Status& status);

// `status` with the idempotency key `key` attached when a spending call sent a key the user
// never saw (drawn at random) and failed with a code after which the vault may have charged it
// (UNAVAILABLE, DEADLINE_EXCEEDED, CANCELLED, UNKNOWN, INTERNAL, ABORTED, DATA_LOSS): repeating
// the command with --idempotency-key KEY returns the charged call's outcome (finishing it if
// it was left unfinished) instead of charging a new one. A refusal (INVALID_ARGUMENT,
// RESOURCE_EXHAUSTED, PERMISSION_DENIED, ...) charges nothing, and a replayed stored failure
// is the same again: `status` unchanged.
absl::Status WithDrawnIdempotencyKey(absl::Status status, const std::string& key);

// A JSON string literal ("..." with escapes); invalid UTF-8 bytes become U+FFFD.
std::string JsonString(absl::string_view text);

// The error as one line of JSON (newline-terminated):
// {"error":{"code":"RESOURCE_EXHAUSTED","exit_code":3,"class":"budget","message":"...",
//  "from_vault":true[,"field":"epsilon"][,"replayed":true,"replayed_ledger_seq":N]
//  [,"idempotency_key":"..."][,"hint":"..."]}}
std::string ErrorJson(const absl::Status& status, int exit_code);
// The error as text: "error: <CODE>: <message>" ("error: usage: ..." for a usage error), then
// the replay note for a replayed stored failure, the idempotency key to repeat the call with
// (WithDrawnIdempotencyKey) and a hint line where one helps.
std::string ErrorText(const absl::Status& status);

}  // namespace fairvault::client::cli

#endif  // FAIRVAULT_CLIENT_CLI_CLI_EXIT_H_
