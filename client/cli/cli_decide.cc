// Attribute-aware post-processing in the vault (company): fitting the statistical-parity
// regression post-processor (`postprocess regression`) and asking the vault for decisions of
// such an artifact, or an equalized-odds one, for subjects it holds (`decide`).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/cli/cli_common.h"
#include "client/cli/cli_spend.h"
#include "core/util/status_macros.h"
#include "core/util/truncate.h"

namespace fairvault::client::cli {
namespace {

absl::StatusOr<v1::SpSolverKind> Solver(const ParsedFlags& flags) {
  const std::string solver = absl::AsciiStrToLower(flags.Get("solver", "auto"));
  if (solver == "auto") return v1::SP_SOLVER_AUTO;
  if (solver == "lp") return v1::SP_SOLVER_LINEAR_PROGRAM;
  if (solver == "quantile") return v1::SP_SOLVER_QUANTILE;
  return UsageError(absl::StrCat("--solver must be auto, lp or quantile (got '", solver, "')"));
}

absl::Status PostprocessRegression(Context& ctx) {
  const ParsedFlags& flags = ctx.flags();
  v1::FitStatisticalParityRequest req;
  RETURN_IF_ERROR(ReadScoreRequest(flags, &req));
  ASSIGN_OR_RETURN(const double alpha, flags.GetDouble("alpha", 0));
  if (alpha < 0 || alpha > 1) {
    return UsageError(absl::StrCat("--alpha must be in [0, 1] (got ", flags.Get("alpha"), ")"));
  }
  req.set_alpha(alpha);
  ASSIGN_OR_RETURN(const double floor, flags.GetDouble("decision-floor", 0));
  req.set_decision_floor(floor);
  ASSIGN_OR_RETURN(const double epsilon, RequiredEpsilon(flags));
  req.set_epsilon(epsilon);
  ASSIGN_OR_RETURN(const v1::SpSolverKind solver, Solver(flags));
  req.set_solver(solver);
  req.set_unmatched(Unmatched(flags));
  const std::string out_path = flags.Get("out");
  if (flags.GetBool("dry-run")) {
    v1::PreviewReleaseRequest preview;
    *preview.mutable_fit_statistical_parity() = req;
    return RunPreview(ctx, preview);
  }

  ASSIGN_OR_RETURN(Client * client, ctx.client());
  CallInfo info;
  ASSIGN_OR_RETURN(const v1::FitStatisticalParityResponse resp,
                   client->FitStatisticalParityPostProcessor(req, &info));
  return PrintScoreFit(ctx, resp, info, out_path, req.idempotency_key(),
                       resp.artifact().statistical_parity().decision_log_ratio_bound(),
                       /*applicable_locally=*/false);
}

// The shortest decimal text that reads back as exactly `value` ("1", "0.0138888888888889").
std::string ExactNumber(double value) {
  // Whole numbers (every equalized-odds decision is 0 or 1) without the search below.
  if (value == std::trunc(value) && std::abs(value) < 1e15) {
    return absl::StrCat(static_cast<int64_t>(value));
  }
  for (int digits = 6; digits <= 17; ++digits) {
    std::string text = absl::StrFormat("%.*g", digits, value);
    double back = 0;
    if (absl::SimpleAtod(text, &back) && back == value) return text;
  }
  return absl::StrFormat("%.17g", value);
}

std::string Seqs(const std::vector<int64_t>& seqs) {
  if (seqs.empty()) return "access-log seqs: none (no call)";
  if (seqs.size() == 1) return absl::StrCat("access-log seq: ", seqs.front());
  return absl::StrCat("access-log seqs: ", seqs.front(), "..", seqs.back(), " (", seqs.size(),
                      " calls)");
}

// The rows of a decide CSV in bounded memory: each row's fields, subject key and value, read
// from a CsvReader (the file is read twice: a check of every row, then the calls).
class DecideRows {
 public:
  static absl::StatusOr<DecideRows> Open(const std::string& path, const ParsedFlags& flags,
                                         const std::string& secret) {
    DecideRows rows;
    rows.path_ = path;
    ASSIGN_OR_RETURN(rows.reader_, CsvReader::Open(path));
    const std::string output_column = flags.Get("output-column", "decision");
    if (rows.reader_->ColumnIndex(output_column).ok()) {
      return UsageError(absl::StrCat("the CSV already has a column '", output_column,
                                     "'; choose another name with --output-column"));
    }
    // The same keys `table upload` sends for these rows (column or @row, HMAC pseudonyms).
    ASSIGN_OR_RETURN(KeyColumn keys, KeyColumn::Resolve(rows.reader_->header(), path,
                                                        flags.Get("key-column"), secret));
    rows.keys_ = std::make_unique<KeyColumn>(std::move(keys));
    absl::StatusOr<size_t> value_index = rows.reader_->ColumnIndex(flags.Get("value-column"));
    if (!value_index.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": ", value_index.status().message()));
    }
    rows.value_index_ = *value_index;
    rows.value_column_ = flags.Get("value-column");
    return rows;
  }

  const CsvReader& reader() const { return *reader_; }
  // Reads the next row; false at the end. With `pseudonymise` false the key is checked, not
  // computed (the checking pass).
  absl::StatusOr<bool> Next(bool pseudonymise) {
    int64_t line = 0;
    ASSIGN_OR_RETURN(const bool more, reader_->Next(&fields_, &line));
    if (!more) return false;
    ASSIGN_OR_RETURN(key_, keys_->Next(fields_, line, pseudonymise));
    ASSIGN_OR_RETURN(value_, ParseNumber(fields_[value_index_], path_, line, value_column_));
    if (predictions_ && value_ != 0 && value_ != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          path_, ":", line, ": column '", value_column_, "' must be 0 or 1 (got '",
          core::Truncated(fields_[value_index_]),
          "'): an equalized-odds artifact decides predictions"));
    }
    return true;
  }
  // Values must be 0/1 predictions (an equalized-odds artifact), not scores.
  void RequirePredictions() { predictions_ = true; }
  const std::vector<std::string>& fields() const { return fields_; }
  const std::string& key() const { return key_; }
  double value() const { return value_; }

 private:
  std::string path_, value_column_;
  std::unique_ptr<CsvReader> reader_;
  std::unique_ptr<KeyColumn> keys_;
  size_t value_index_ = 0;
  bool predictions_ = false;
  std::vector<std::string> fields_;
  std::string key_;
  double value_ = 0;
};

absl::Status Decide(Context& ctx) {
  const ParsedFlags& flags = ctx.flags();
  // Rows from a CSV (their keys sent) or the rows of an uploaded table (no key sent).
  const bool by_table = flags.Has("table");
  if (by_table == flags.Has("csv")) {
    return UsageError("give --csv FILE (with --key-column) or --table HANDLE, one of them");
  }
  if (by_table && (flags.Has("key-column") || flags.Has("hmac-secret-file"))) {
    return UsageError(
        "--key-column and --hmac-secret-file go with --csv; a table's keys were sent at upload");
  }
  if (!by_table && !flags.Has("key-column")) return UsageError("--csv needs --key-column");
  const std::string path = flags.Get("csv");
  const std::string handle = flags.Get("table");
  const int64_t default_chunk =
      static_cast<int64_t>(by_table ? kDecideTableChunkRows : kDecideChunkRows);
  ASSIGN_OR_RETURN(const int64_t chunk_rows, flags.GetInt("chunk-rows", default_chunk));
  if (chunk_rows <= 0 || (by_table && chunk_rows > default_chunk)) {
    return UsageError(absl::StrCat("--chunk-rows must be in 1..",
                                   by_table ? default_chunk : std::numeric_limits<int64_t>::max(),
                                   " (got ", chunk_rows, ")"));
  }
  const std::string output_column = flags.Get("output-column", "decision");
  ASSIGN_OR_RETURN(const std::string secret, OptionalSecret(flags));
  // Every row of a CSV is checked before anything is sent: a bad key or value is reported,
  // naming its line, with nothing decided or charged. (The vault checks a table's values.)
  int64_t total = 0;
  const std::string artifact_id = flags.Get("artifact-id");
  bool predictions = false;  // an equalized-odds artifact: 0/1 values
  if (!by_table) {
    ASSIGN_OR_RETURN(DecideRows rows, DecideRows::Open(path, flags, secret));
    ASSIGN_OR_RETURN(Client * client, ctx.client());
    v1::GetArtifactRequest get;
    get.set_artifact_id(artifact_id);
    ASSIGN_OR_RETURN(const v1::GetArtifactResponse artifact, client->GetArtifact(get));
    predictions = artifact.artifact().has_equalized_odds();
    if (predictions) rows.RequirePredictions();
    while (true) {
      ASSIGN_OR_RETURN(const bool more, rows.Next(/*pseudonymise=*/false));
      if (!more) break;
      ++total;
    }
    if (total == 0) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": no data rows to decide"));
    }
  } else if (output_column == "row") {
    return UsageError("--output-column cannot be 'row' (the table row index's column)");
  }

  std::optional<DecideRows> rows;
  if (!by_table) {
    ASSIGN_OR_RETURN(rows, DecideRows::Open(path, flags, secret));
    if (predictions) rows->RequirePredictions();
  }
  // Fills `req` with a CSV's next call's rows, keeping their fields for the output.
  std::vector<std::vector<std::string>> chunk_fields;
  auto next = [&](v1::DecideRequest* req) -> absl::StatusOr<bool> {
    chunk_fields.clear();
    while (req->subject_keys_size() < chunk_rows) {
      ASSIGN_OR_RETURN(const bool more, rows->Next(/*pseudonymise=*/true));
      if (!more) break;
      req->add_subject_keys(rows->key());
      req->add_values(rows->value());
      chunk_fields.push_back(rows->fields());
    }
    return req->subject_keys_size() > 0;
  };
  if (flags.GetBool("dry-run")) {
    // The first call's rows: only the first Decide with an artifact charges its licence.
    v1::PreviewReleaseRequest preview;
    v1::DecideRequest* req = preview.mutable_decide();
    req->set_artifact_id(artifact_id);
    if (by_table) {
      req->set_table_handle(handle);
      req->set_value_column(flags.Get("value-column"));
      req->set_row_count(chunk_rows);
    } else {
      RETURN_IF_ERROR(next(req).status());
    }
    const int64_t first = req->subject_keys_size();
    return RunPreview(ctx, preview,
                      !by_table && first < total
                          ? absl::StrCat("(priced on the first call's ", first, " of ", total,
                                         " rows: later calls never charge the licence)\n")
                          : "");
  }

  // The rows go out as their answers come back: to a temporary file beside --out, renamed
  // over it once every call succeeded (removed otherwise), or to stdout.
  const std::string out_path = flags.Get("out");
  const std::string partial_path = out_path.empty() ? "" : out_path + ".partial";
  std::ofstream file;
  if (!out_path.empty()) {
    RETURN_IF_ERROR(PrepareOutputFile(partial_path));
    file.open(partial_path, std::ios::binary | std::ios::trunc);
    if (!file) return absl::FailedPreconditionError(absl::StrCat("cannot write ", partial_path));
  }
  std::ostream& out = out_path.empty() ? std::cout : file;
  // A CSV's rows with the output added; a table's as (0-based table row, output).
  std::vector<std::string> header =
      by_table ? std::vector<std::string>{"row"} : rows->reader().header();
  header.push_back(output_column);
  out << FormatCsvRecord(header);
  int64_t sent = 0;  // rows answered and written
  auto take = [&](const v1::DecideResponse& resp) -> absl::Status {
    sent += static_cast<int64_t>(chunk_fields.size());
    for (size_t r = 0; r < chunk_fields.size(); ++r) {
      chunk_fields[r].push_back(ExactNumber(resp.outputs(static_cast<int>(r))));
      out << FormatCsvRecord(chunk_fields[r]);
    }
    if (!out) return absl::DataLossError("writing the decided rows failed");
    return absl::OkStatus();
  };
  auto take_table = [&](const v1::DecideResponse& resp, int64_t first_row) -> absl::Status {
    for (int r = 0; r < resp.outputs_size(); ++r) {
      out << (first_row + r) << ',' << ExactNumber(resp.outputs(r)) << '\n';
    }
    sent += resp.outputs_size();
    total = resp.table_rows();
    if (!out) return absl::DataLossError("writing the decided rows failed");
    return absl::OkStatus();
  };

  ASSIGN_OR_RETURN(Client * client, ctx.client());
  absl::StatusOr<DecideResult> decided =
      by_table ? client->DecideTableStream(artifact_id, handle, flags.Get("value-column"),
                                           static_cast<size_t>(chunk_rows), take_table)
               : client->DecideStream(artifact_id, next, take);
  if (decided.ok() && sent != total) {
    decided = absl::FailedPreconditionError(absl::StrCat(
        path, " changed while it was read: ", total, " rows when checked, ", sent,
        " when sent (the ", sent, " sent were decided; run decide again on the file as it is)"));
  }
  if (!out_path.empty()) {
    file.close();
    if (decided.ok() && !file) decided = absl::DataLossError(absl::StrCat("writing ", out_path, " failed"));
    if (decided.ok() && std::rename(partial_path.c_str(), out_path.c_str()) != 0) {
      decided = absl::DataLossError(absl::StrCat("cannot rename ", partial_path, " to ", out_path));
    }
    if (!decided.ok()) std::remove(partial_path.c_str());
  }
  if (!decided.ok() && secret.empty() && !by_table &&
      absl::StrContains(decided.status().message(), "is not in dataset")) {
    return WithMessage(decided.status(),
                       absl::StrCat(decided.status().message(),
                                    " (if the regulator imported pseudonyms, pass the same "
                                    "--hmac-secret-file)"));
  }
  ASSIGN_OR_RETURN(const DecideResult result, std::move(decided));

  const double bound = result.decision_log_ratio_bound;
  const std::string summary = absl::StrCat(
      "decided ", total, by_table ? absl::StrCat(" rows of table ", handle) : " rows",
      " with artifact ", artifact_id, " in ",
      result.access_log_seqs.size(), " call(s)\ndecision log-ratio bound: ",
      std::isinf(bound) ? "inf (some output is possible for one group and not for another: "
                          "such an output reveals the group)"
                        : absl::StrCat(Num(bound),
                                       " (worst-case |log P(output | group a) / P(output | group "
                                       "b)| for one input)"),
      "\n", Seqs(result.access_log_seqs),
      "\nrows already decided by this artifact (stored "
      "decision returned): ",
      result.rows_already_decided,
      "\ndecision licence (charged once per artifact, on its first Decide): ",
      result.licence_charged ? "charged now\n"
                             : "charged by an earlier decide; nothing charged now\n",
      FormatCharge(result.licence));
  if (out_path.empty()) {
    std::cerr << summary;
  } else {
    std::cout << summary << "wrote " << total << " rows to " << out_path << " (column '"
              << output_column << "')\n";
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<Command> DecideCommands() {
  std::vector<FlagSpec> regression = {
      {"table", "HANDLE", "table handle from `table upload`", true},
      {"score-column", "COL", "numeric column with your regressor's scores", true}};
  for (FlagSpec& f : ScoreGridFlags()) regression.push_back(std::move(f));
  for (const FlagSpec& f : std::vector<FlagSpec>{
           {"alpha", "A", "KS tolerance in [0,1]; 0 asks for statistical parity (default 0)"},
           {"decision-floor", "F",
            "in [0,1): mix each transport row with uniform so that `decide` can use the artifact "
            "(default 0: the paper's post-processor; decide refuses every artifact fitted with "
            "F < 1e-6)"},
           {"epsilon", "EPS", "privacy cost of this release (> 0)", true},
           {"solver", "auto|lp|quantile",
            "lp: the LP on GLPK (any alpha); quantile: monotone couplings (alpha = 0 only); "
            "auto (default): quantile when alpha = 0, else lp"},
           AttributesFlag(),
           DropUnmatchedFlag(),
           IdempotencyFlag(),
           {"out", "FILE.json", "write the artifact as JSON"},
           DryRunFlag()}) {
    regression.push_back(f);
  }
  return {
      {"postprocess regression",
       "fit a DP statistical-parity post-processor for a regressor (Xian et al. 2024) (company)",
       "Releases per-group noisy histograms of the scores on the public grid [lo, hi] with k\n"
       "bins and fits per-group transports onto a common barycenter (each group's output\n"
       "within alpha/2 in KS). Scores outside [lo, hi] are clipped and counted. The artifact\n"
       "needs the group, so decisions come from the vault: `fairvault decide`.",
       regression, true, PostprocessRegression},
      {"decide",
       "post-processed decisions from the vault for your rows (company)",
       "For an equalized-odds artifact the values are 0/1 predictions; for a statistical-parity\n"
       "one, scores. Keys are sent as `table upload` sends them (same --key-column and\n"
       "--hmac-secret-file). The artifact's first decide charges its decision licence (epsilon\n"
       "= its decision log-ratio bound) once; later calls cost nothing. Every call is written\n"
       "to the vault's access log. Artifacts fitted with --decision-floor below 1e-6 (the\n"
       "default 0) are refused. Every value is checked before the first call.\n"
       "Writes the input CSV plus the output column; prints the decision log-ratio bound.\n"
       "With --table instead of --csv, decides every row of a table you uploaded (`table\n"
       "upload`) against the artifact's dataset: no key is sent again (the vault joined them\n"
       "at upload), so deciding the same rows again is fast; writes row,OUTPUT lines in the\n"
       "table's row order.",
       {{"artifact-id", "ARTIFACT_ID", "an attribute-aware artifact of yours", true},
        {"csv", "FILE", "CSV with a header row (or --table)"},
        {"table", "HANDLE", "an uploaded table's handle (instead of --csv and --key-column)"},
        {"key-column", "COLUMN|@row",
         "with --csv: column holding subject keys; @row uses row-<0-based data row index>"},
        {"value-column", "COL",
         "0/1 predictions (EO artifact) or scores (SP artifact); with --table a numeric column "
         "of the table",
         true},
        {"hmac-secret-file", "FILE",
         "pseudonymise keys as hex HMAC-SHA256 with the secret in FILE (>= 16 bytes)"},
        {"output-column", "NAME", "name of the added column (default decision)"},
        {"out", "FILE", "output CSV (default: stdout, summary on stderr)"},
        {"chunk-rows", "N",
         absl::StrCat("rows per Decide call (default ", kDecideChunkRows, "; with --table ",
                      kDecideTableChunkRows, ", the most)")},
        DryRunFlag()},
       true,
       Decide},
  };
}

}  // namespace fairvault::client::cli
