// What every spending command (counts, postprocess eo|eo-scores|regression, audit
// classifier|regressor, decide, best-response, model fit) shares beyond its request:
// --dry-run through CompanyService.PreviewRelease, and saying so when a response is a replay.
#ifndef FAIRVAULT_CLIENT_CLI_CLI_SPEND_H_
#define FAIRVAULT_CLIENT_CLI_CLI_SPEND_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "client/cli/cli_common.h"
#include "client/lib/client.h"
#include "google/protobuf/message.h"

namespace fairvault::client::cli {

// --dry-run as every spending command spells it.
FlagSpec DryRunFlag();

// The preview as text: what it would charge, the noise and its 95% half-widths (also relative
// to an average group), rows and groups, the budget now and after, and whether it would be
// admitted or is a replay.
std::string FormatPreview(const v1::PreviewReleaseResponse& preview);

// --dry-run: sends `req` to PreviewRelease and prints the preview (its JSON with --json), with
// `note` (if any) after it in text mode. OK when it would be admitted or is a replay; when the
// vault would refuse it, the refusal's status (RESOURCE_EXHAUSTED for budget: exit 3), the
// preview having been printed.
absl::Status RunPreview(Context& ctx, const v1::PreviewReleaseRequest& req,
                        absl::string_view note = "");

// "stored release from ledger seq N, not charged again; balance shown is as of then", and
// the budget now when `now` is known.
std::string ReplayNote(int64_t seq, const std::optional<v1::Budget>& now);

// PrintSpending (declared in cli_common.h for PrintScoreFit) prints a spending call's
// response. With --json: its JSON (protobuf field names) with "replayed" and
// "replayed_ledger_seq" added first, and "budget_now" (fetched) on a replay. Else `text` on
// stdout and, on a replay, ReplayNote on stderr (so stdout formats stay as they are).

// Inserts `fields` (`"name": value` members, comma-separated) as the first members of the
// JSON object `json`.
std::string WithLeadingJsonFields(const std::string& json, const std::string& fields);

}  // namespace fairvault::client::cli

#endif  // FAIRVAULT_CLIENT_CLI_CLI_SPEND_H_
