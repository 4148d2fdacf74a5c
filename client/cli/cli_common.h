// Shared pieces of the `fairvault` CLI: the command table entry, the per-run context
// (global flags, lazily created client), and output formatting.
#ifndef FAIRVAULT_CLIENT_CLI_CLI_COMMON_H_
#define FAIRVAULT_CLIENT_CLI_CLI_COMMON_H_

#include <cstdint>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/apply/artifact_files.h"  // FromJson
#include "client/cli/cli_flags.h"
#include "client/lib/client.h"
#include "client/lib/csv.h"
#include "google/protobuf/message.h"
#include "google/protobuf/repeated_ptr_field.h"

namespace fairvault::client::cli {

class Context;

// One subcommand, e.g. path "dataset create".
struct Command {
  std::string path;
  std::string summary;          // one line for the command list
  std::string details;          // extra paragraphs for --help (may be empty)
  std::vector<FlagSpec> flags;  // the command's own flags
  bool remote = true;           // talks to the vault (accepts the connection flags)
  std::function<absl::Status(Context&)> run;
  // Exit 1 on every failure but a command-line mistake (2), instead of the status classes of
  // cli_exit.h: `health`, whose 0/1 is what container health checks read (Docker reserves 2).
  bool binary_exit = false;
};

// Flags every remote command accepts (before or after the command words):
// --server, --key, --key-file, --tls-ca, --tls-server-name, --deadline, --json.
const std::vector<FlagSpec>& ConnectionFlags();

// The command tables, one per file.
std::vector<Command> RegulatorCommands();  // cli_regulator.cc
std::vector<Command> CompanyCommands();    // cli_company.cc
std::vector<Command> AuditorCommands();    // cli_auditor.cc
std::vector<Command> LocalCommands();      // cli_local.cc: apply-eo, metrics
std::vector<Command> TrainCommands();      // cli_train.cc: train-logreg
std::vector<Command> AuditCommands();      // cli_audit.cc: audit classifier|regressor
std::vector<Command> DecideCommands();     // cli_decide.cc: postprocess regression, decide
std::vector<Command> EoScoresCommands();   // cli_eo_scores.cc: postprocess eo-scores
std::vector<Command> ReportCommands();     // cli_report.cc: report audit|sweep (local)
std::vector<Command> HealthCommands();     // cli_health.cc: health
std::vector<Command> SweepCommands();      // cli_sweep.cc: sweep eo|model
// cli_report_budgets.cc: report budgets (auditor, regulator)
std::vector<Command> ReportBudgetsCommands();
// cli_models.cc: predict, best-response, model fit, job status|wait|list|cancel
std::vector<Command> ModelCommands();
// cli_transparency.cc: log checkpoint, receipt get|verify, auditor consistency, witness
std::vector<Command> TransparencyCommands();
// cli_transparency.cc, for report budgets: --log-key, --kept, --witness and --quorum, and the
// vault's latest checkpoint checked as far as they allow (the kept checkpoint is replaced by
// the latest once it is proved consistent). `present` is false if the vault signs none.
std::vector<FlagSpec> CheckpointCheckFlags();
}  // namespace fairvault::client::cli
namespace fairvault::client::report {
struct CheckpointCheck;
}  // namespace fairvault::client::report
namespace fairvault::client::cli {
// The ledger rows and budgets that CheckLatestCheckpoint checked (`complete` once all passed).
struct CheckedLedger {
  std::vector<v1::LedgerEntry> entries;
  v1::ListBudgetsResponse budgets;
  bool complete = false;
};
// With --log-key, the whole ledger as the vault lists it is then checked against that
// checkpoint here (client/lib/ledger_check.h): a finding makes the check fail. `verified`: the
// vault's VerifyLedger answer, read before, which the rows must agree with. `checked`: the rows
// and budgets checked, for a caller that shows them.
absl::StatusOr<report::CheckpointCheck> CheckLatestCheckpoint(
    const ParsedFlags& flags, Client* client, const v1::VerifyLedgerResponse* verified = nullptr,
    CheckedLedger* checked = nullptr);
// The check's lines for a terminal ("checkpoint: ...", and "ledger: ..." when checked).
std::string FormatCheckpointCheck(const report::CheckpointCheck& check);

// What a command runs with: its parsed flags and, for remote commands, a client created on
// first use from the connection flags and the FAIRVAULT_SERVER / FAIRVAULT_API_KEY
// environment variables.
class Context {
 public:
  explicit Context(ParsedFlags flags) : flags_(std::move(flags)) {}
  const ParsedFlags& flags() const { return flags_; }
  absl::StatusOr<Client*> client();
  // For calls the server answers without a key (`health`): no API key is read or sent, and
  // `default_deadline_seconds` applies when --deadline is absent.
  absl::StatusOr<Client*> keyless_client(double default_deadline_seconds);
  // --json: print protobuf responses as JSON instead of tables.
  bool json() const { return flags_.GetBool("json"); }

 private:
  // Creates client_ from the connection flags (once per run).
  absl::StatusOr<Client*> Connect(bool with_key, double default_deadline_seconds);

  ParsedFlags flags_;
  std::unique_ptr<Client> client_;
};

// Ledger paging shared by `ledger list` and `auditor ledger` (cli_company.cc): --dataset,
// --after, --limit and --all (fetch pages until an empty one).
std::vector<FlagSpec> LedgerPagingFlags();
absl::StatusOr<v1::ListLedgerResponse> FetchLedger(
    const ParsedFlags& flags, v1::ListLedgerRequest req,
    const std::function<absl::StatusOr<v1::ListLedgerResponse>(const v1::ListLedgerRequest&)>&
        call);

// ---- Spending calls (shared by cli_company.cc, cli_audit.cc, cli_decide.cc) ----

// --idempotency-key, --drop-unmatched and --attributes as every spending command spells them.
FlagSpec IdempotencyFlag();
FlagSpec DropUnmatchedFlag();
FlagSpec AttributesFlag();
// --drop-unmatched as the request enum.
v1::UnmatchedKeys Unmatched(const ParsedFlags& flags);
// Whether an API key is configured (--key, --key-file or FAIRVAULT_API_KEY), for a command
// that calls the vault only when it has one.
bool HasApiKey(const ParsedFlags& flags);
// --idempotency-key, or a fresh random key (which a failed call's error names: main.cc,
// WithDrawnIdempotencyKey).
std::string IdempotencyKey(const ParsedFlags& flags);
// One line saying what the idempotency key does (whether this call was a replay is said
// separately, from the response's trailing metadata: PrintSpending).
std::string ReplayHint(const std::string& key);
// How to use a fitted attribute-aware artifact with `fairvault decide`, or why it cannot be
// (a non-finite decision log-ratio bound) and what else can be done with it; `value_name`
// names the value column; `applicable_locally`: `fairvault apply-eo` can apply it.
std::string DecideHint(const std::string& artifact_id, double decision_log_ratio_bound,
                       const std::string& value_name, bool applicable_locally);

// The public score grid of the regression commands (`audit regressor`, `postprocess
// regression`): --lo and --hi (finite, lo < hi) and --bins (>= 1; the vault enforces its
// documented maximum).
struct ScoreGrid {
  double lo = 0;
  double hi = 0;
  int32_t bins = 0;
};
std::vector<FlagSpec> ScoreGridFlags();
absl::StatusOr<ScoreGrid> ReadScoreGrid(const ParsedFlags& flags);

// ---- Output ----

// Columns aligned with two spaces; numbers are whatever text the caller passes.
class TextTable {
 public:
  explicit TextTable(std::vector<std::string> header) : header_(std::move(header)) {}
  void AddRow(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  std::string Render() const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

// Pretty JSON with proto field names and default values included.
std::string ToJson(const google::protobuf::Message& message);
// Prints JSON on stdout.
void PrintJson(const google::protobuf::Message& message);
// True when `path` ends in ".json" (case-insensitive).
bool IsJsonPath(absl::string_view path);

// Up to 6 significant digits ("0.5", "1e-06").
std::string Num(double value);
// "2024-05-01 12:00:00Z" (UTC).
std::string FormatUnixSeconds(int64_t seconds);
std::string FormatUnixMicros(int64_t micros);
std::string RoleName(v1::Role role);

// Response formatting (cli_format.cc).
// Multi-line summary of what a spending call cost (each part of a composed release) and
// what is left.
std::string FormatCharge(const v1::Charge& charge);
// "epsilon E[, delta d] (mechanism, noise scale s, sensitivity S)" and a line per part of a
// composed release.
std::string FormatCost(const v1::Cost& cost);
std::string FormatBudgets(const google::protobuf::RepeatedPtrField<v1::Budget>& budgets);
std::string FormatLedger(const google::protobuf::RepeatedPtrField<v1::LedgerEntry>& entries);
std::string FormatVerify(const v1::VerifyLedgerResponse& response);
// Artifact header and body: for an equalized-odds post-processor the per-group
// probabilities and noisy rates; for a statistical-parity one the grid, solver, objective
// and per-group weights and means before and after; for a fair model its preprocessing and
// weights (or hypothesis column); warnings.
std::string FormatArtifact(const v1::Artifact& artifact);

// ---- Inputs ----

// Subject keys read row by row: the column `key_column`, or "row-<i>" (0-based data row index)
// when key_column is "@row"; HMAC-pseudonymised when `secret` is non-empty.
class KeyColumn {
 public:
  // InvalidArgument naming `source` when the column is not in `header`.
  static absl::StatusOr<KeyColumn> Resolve(const std::vector<std::string>& header,
                                           absl::string_view source, absl::string_view key_column,
                                           absl::string_view secret);
  // The key of the next data row (rows in file order). InvalidArgument naming file and line for
  // an empty or over-long (> 128 bytes) key. With `pseudonymise` false the HMAC is skipped
  // (a validation pass: the result is then not the key sent).
  absl::StatusOr<std::string> Next(const std::vector<std::string>& fields, int64_t line,
                                   bool pseudonymise = true);

 private:
  KeyColumn() = default;
  std::string source_, name_, secret_;
  size_t index_ = 0;
  bool by_row_ = false;
  int64_t row_ = 0;
};

// A CSV file as upload chunks of at most `chunk_rows` rows, in bounded memory: each call reads
// the next rows and hands each to `add_row(fields, line, chunk)`, which may refuse it.
template <typename Chunk>
ChunkProducer<Chunk> CsvChunks(
    std::shared_ptr<CsvReader> reader, size_t chunk_rows,
    std::function<absl::Status(const std::vector<std::string>&, int64_t, Chunk*)> add_row) {
  auto fields = std::make_shared<std::vector<std::string>>();
  return [=](Chunk* chunk) -> absl::StatusOr<bool> {
    size_t rows = 0;
    int64_t line = 0;
    while (rows < chunk_rows) {
      absl::StatusOr<bool> more = reader->Next(fields.get(), &line);
      if (!more.ok()) return more.status();
      if (!*more) break;
      absl::Status added = add_row(*fields, line, chunk);
      if (!added.ok()) return added;
      ++rows;
    }
    return rows > 0;
  };
}

// Runs a producer to its end without sending anything (the validation pass of a streamed
// upload) and returns the number of rows; the first refused row's error otherwise.
template <typename Chunk>
absl::StatusOr<int64_t> DrainRows(const ChunkProducer<Chunk>& next) {
  int64_t rows = 0;
  Chunk chunk;
  while (true) {
    chunk.Clear();
    absl::StatusOr<bool> more = next(&chunk);
    if (!more.ok()) return more.status();
    if (!*more) return rows;
    rows += chunk.subject_keys_size();
  }
}

// A finite number from one CSV field; InvalidArgument "<source>:<line>: column 'c': ...".
absl::StatusOr<double> ParseNumber(absl::string_view text, absl::string_view source, int64_t line,
                                   absl::string_view column);

// Subject keys for the rows of `table` (KeyColumn for each row): the column `key_column`, or
// "row-<i>" (0-based data row index) when key_column is "@row"; HMAC-pseudonymised when `secret` is
// non-empty. InvalidArgument naming file and line for an empty or over-long (> 128 bytes) key, or a
// repeated key unless `allow_repeats` (decide rows may ask about a subject twice).
absl::StatusOr<std::vector<std::string>> SubjectKeys(const CsvTable& table,
                                                     absl::string_view source,
                                                     absl::string_view key_column,
                                                     absl::string_view secret,
                                                     bool allow_repeats = false);
// The secret from --hmac-secret-file, or empty when the flag is absent.
absl::StatusOr<std::string> OptionalSecret(const ParsedFlags& flags);
// A finite number from a CSV cell; InvalidArgument "<source>:<line>: column 'c': ...".
absl::StatusOr<double> ParseCell(const CsvTable& table, absl::string_view source, size_t row,
                                 size_t column);
// A 0/1 cell (also accepts "0.0", "1.0").
absl::StatusOr<int> ParseBinaryCell(const CsvTable& table, absl::string_view source, size_t row,
                                    size_t column);
// Column indices for `names` joined into one group label per row with "|" (the vault's
// joint-group spelling), e.g. "Female|White".
absl::StatusOr<std::vector<std::string>> GroupLabels(const CsvTable& table,
                                                     const std::vector<std::string>& names);
// "cli-" + 32 hex characters from the OS CSPRNG.
std::string RandomIdempotencyKey();
// Validates a positive epsilon from the flags (a usage error otherwise).
absl::StatusOr<double> RequiredEpsilon(const ParsedFlags& flags);

// Prints a spending call's response (cli_spend.cc). With --json: its JSON with "replayed" and
// "replayed_ledger_seq" first, and "budget_now" (fetched) on a replay. Else `text` on stdout
// and, on a replay, "stored release from ledger seq N, not charged again; ..." on stderr.
void PrintSpending(Context& ctx, const google::protobuf::Message& resp, const v1::Charge& charge,
                   const CallInfo& info, const std::string& text);

// Writes a spending call's --out file, after the call: a failure says that the call itself
// succeeded and names `key`, its idempotency key (which the user may never have seen), to get
// the stored outcome again without a second charge ("" for a call that charged nothing:
// the failure as it is) (cli_spend.cc).
absl::Status WriteSpendingOutput(const std::string& path, absl::string_view content,
                                 const std::string& key);

// Prints the response of a score post-processor fit (`postprocess regression`,
// `postprocess eo-scores`): JSON with --json, else the artifact, rows dropped and scores
// clipped, the charge and the hints (and whether it was a replay, from `info`); the artifact
// alone to `out_path` when set.
template <typename Response>
absl::Status PrintScoreFit(Context& ctx, const Response& resp, const CallInfo& info,
                           const std::string& out_path, const std::string& idempotency_key,
                           double decision_log_ratio_bound, bool applicable_locally) {
  // The artifact alone: `fairvault apply-eo --artifact` reads it back.
  if (!out_path.empty()) {
    absl::Status written = WriteSpendingOutput(out_path, ToJson(resp.artifact()), idempotency_key);
    if (!written.ok()) return written;
  }
  std::string text =
      FormatArtifact(resp.artifact()) +
      "rows dropped as unmatched: " + std::to_string(resp.rows_dropped()) +
      "\nscores clipped into [lo, hi]: " + std::to_string(resp.scores_clipped()) + "\n" +
      FormatCharge(resp.charge()) + ReplayHint(idempotency_key) +
      DecideHint(resp.artifact().id(), decision_log_ratio_bound, "SCORE", applicable_locally);
  if (!out_path.empty()) text += "wrote " + out_path + "\n";
  PrintSpending(ctx, resp, resp.charge(), info, text);
  return absl::OkStatus();
}

// The fields every request on a classifier's outputs shares (`audit classifier`, `postprocess
// eo`): --idempotency-key, --table, --prediction-column, --label-column, --attributes and
// --epsilon.
template <typename Request>
absl::Status ReadOutcomeRequest(const ParsedFlags& flags, Request* req) {
  req->set_idempotency_key(IdempotencyKey(flags));
  req->set_table_handle(flags.Get("table"));
  req->set_prediction_column(flags.Get("prediction-column"));
  req->set_label_column(flags.Get("label-column"));
  for (const std::string& a : flags.GetList("attributes")) req->add_attributes(a);
  absl::StatusOr<double> epsilon = RequiredEpsilon(flags);
  if (!epsilon.ok()) return epsilon.status();
  req->set_epsilon(*epsilon);
  return absl::OkStatus();
}

// The fields every score request shares (`audit regressor`, `postprocess regression`,
// `postprocess eo-scores`): --idempotency-key, --table, --score-column, --attributes and the
// score grid (--lo, --hi, --bins).
template <typename Request>
absl::Status ReadScoreRequest(const ParsedFlags& flags, Request* req) {
  req->set_idempotency_key(IdempotencyKey(flags));
  req->set_table_handle(flags.Get("table"));
  req->set_score_column(flags.Get("score-column"));
  for (const std::string& a : flags.GetList("attributes")) req->add_attributes(a);
  absl::StatusOr<ScoreGrid> grid = ReadScoreGrid(flags);
  if (!grid.ok()) return grid.status();
  req->set_lo(grid->lo);
  req->set_hi(grid->hi);
  req->set_bins(grid->bins);
  return absl::OkStatus();
}

}  // namespace fairvault::client::cli

#endif  // FAIRVAULT_CLIENT_CLI_CLI_COMMON_H_
