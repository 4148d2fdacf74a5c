// Company commands: table upload, noisy counts, equalized-odds fitting, artifacts, budget
// and the company's own ledger rows.
#include <iostream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/cli/cli_common.h"
#include "client/cli/cli_spend.h"
#include "core/util/status_macros.h"

namespace fairvault::client::cli {
namespace {

absl::Status TableUpload(Context& ctx) {
  const ParsedFlags& flags = ctx.flags();
  const std::string path = flags.Get("csv");
  ASSIGN_OR_RETURN(const int64_t chunk_rows, flags.GetInt("chunk-rows", 20000));
  if (chunk_rows <= 0) return UsageError("--chunk-rows must be > 0");
  ASSIGN_OR_RETURN(const int64_t ttl, flags.GetInt("ttl", 0));
  const std::vector<std::string> numeric = flags.GetList("numeric");
  const std::vector<std::string> categorical = flags.GetList("categorical");
  if (numeric.empty() && categorical.empty()) {
    return UsageError("name the columns to upload with --numeric and/or --categorical");
  }
  ASSIGN_OR_RETURN(const std::string secret, OptionalSecret(flags));

  v1::TableHeader header;
  header.set_dataset(flags.Get("dataset"));
  header.set_ttl_seconds(ttl);
  header.set_label(flags.Get("label"));
  for (const std::string& name : numeric) {
    v1::ColumnSpec* spec = header.add_columns();
    spec->set_name(name);
    spec->set_type(v1::COLUMN_TYPE_NUMERIC);
  }
  for (const std::string& name : categorical) {
    v1::ColumnSpec* spec = header.add_columns();
    spec->set_name(name);
    spec->set_type(v1::COLUMN_TYPE_CATEGORICAL);
  }
  // The file is read twice in bounded memory: once to check every row, so that a bad field
  // is reported before anything is sent, then again to send it.
  auto rows = [&](bool send) -> absl::StatusOr<ChunkProducer<v1::TableChunk>> {
    ASSIGN_OR_RETURN(std::shared_ptr<CsvReader> reader, CsvReader::Open(path));
    if (!send && !reader->header_note().empty()) {
      std::cerr << "note: " << reader->header_note() << "\n";
    }
    std::vector<size_t> columns;
    for (const v1::ColumnSpec& spec : header.columns()) {
      absl::StatusOr<size_t> index = reader->ColumnIndex(spec.name());
      if (!index.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(path, ": ", index.status().message()));
      }
      columns.push_back(*index);
    }
    ASSIGN_OR_RETURN(KeyColumn keys,
                     KeyColumn::Resolve(reader->header(), path, flags.Get("key-column"), secret));
    return CsvChunks<v1::TableChunk>(
        reader, static_cast<size_t>(chunk_rows),
        [=](const std::vector<std::string>& fields, int64_t line,
            v1::TableChunk* chunk) mutable -> absl::Status {
          if (chunk->columns_size() == 0) {
            for (size_t c = 0; c < columns.size(); ++c) chunk->add_columns();
          }
          ASSIGN_OR_RETURN(*chunk->add_subject_keys(), keys.Next(fields, line, send));
          for (size_t c = 0; c < columns.size(); ++c) {
            v1::ColumnValues* values = chunk->mutable_columns(static_cast<int>(c));
            const std::string& field = fields[columns[c]];
            if (header.columns(static_cast<int>(c)).type() == v1::COLUMN_TYPE_NUMERIC) {
              ASSIGN_OR_RETURN(
                  const double v,
                  ParseNumber(field, path, line, header.columns(static_cast<int>(c)).name()));
              values->add_numeric(v);
            } else {
              values->add_categorical(field);
            }
          }
          return absl::OkStatus();
        });
  };
  ASSIGN_OR_RETURN(const ChunkProducer<v1::TableChunk> check, rows(false));
  RETURN_IF_ERROR(DrainRows(check).status());

  ASSIGN_OR_RETURN(Client * client, ctx.client());
  ASSIGN_OR_RETURN(const ChunkProducer<v1::TableChunk> send, rows(true));
  ASSIGN_OR_RETURN(v1::UploadTableResponse resp, client->UploadTableStream(header, send));
  if (flags.Has("handle-out")) {
    RETURN_IF_ERROR(WriteStringToFile(flags.Get("handle-out"), resp.table_handle() + "\n"));
  }
  if (ctx.json()) {
    PrintJson(resp);
    return absl::OkStatus();
  }
  // The handle alone on stdout, so that H=$(fairvault table upload ...) works.
  std::cout << resp.table_handle() << "\n";
  std::cerr << "uploaded " << resp.row_count() << " rows (" << resp.rows_in_vault()
            << " of them subjects in the vault) to dataset '" << header.dataset()
            << "'; handle expires " << FormatUnixSeconds(resp.expires_unix()) << "\n";
  if (resp.rows_in_vault() == 0) {
    std::cerr << "warning: no row's subject key is in the vault, so every release on this table "
                 "will be refused; "
              << (secret.empty() ? "if the regulator imported pseudonyms, pass the same "
                                   "--hmac-secret-file"
                                 : "check --key-column and that the secret is the regulator's")
              << "\n";
  }
  return absl::OkStatus();
}

absl::Status Counts(Context& ctx) {
  const ParsedFlags& flags = ctx.flags();
  v1::NoisyCountsRequest req;
  req.set_idempotency_key(IdempotencyKey(flags));
  req.set_table_handle(flags.Get("table"));
  for (const std::string& c : flags.GetList("columns")) req.add_columns(c);
  for (const std::string& a : flags.GetList("attributes")) req.add_attributes(a);
  const std::string noise = absl::AsciiStrToLower(flags.Get("noise", "laplace"));
  if (noise == "laplace") {
    req.set_noise(v1::NOISE_KIND_DISCRETE_LAPLACE);
  } else if (noise == "gaussian") {
    req.set_noise(v1::NOISE_KIND_DISCRETE_GAUSSIAN);
  } else {
    return UsageError(absl::StrCat("--noise must be laplace or gaussian (got '", noise, "')"));
  }
  ASSIGN_OR_RETURN(const double epsilon, RequiredEpsilon(flags));
  req.set_epsilon(epsilon);
  req.set_unmatched(Unmatched(flags));
  const std::string out_path = flags.Get("out");
  if (flags.GetBool("dry-run")) {
    v1::PreviewReleaseRequest preview;
    *preview.mutable_noisy_counts() = req;
    return RunPreview(ctx, preview);
  }

  ASSIGN_OR_RETURN(Client * client, ctx.client());
  CallInfo info;
  ASSIGN_OR_RETURN(v1::NoisyCountsResponse resp, client->NoisyCounts(req, &info));

  // Each cell with its confidence interval from the noise alone (level resp.confidence()).
  std::vector<std::string> csv_header(resp.columns().begin(), resp.columns().end());
  for (const char* name : {"group", "noisy_count", "ci_low", "ci_high"}) csv_header.push_back(name);
  std::vector<std::vector<std::string>> rows;
  for (const v1::CountCell& cell : resp.cells()) {
    std::vector<std::string> row(cell.values().begin(), cell.values().end());
    row.push_back(cell.group());
    row.push_back(absl::StrCat(cell.noisy_count()));
    row.push_back(absl::StrCat(cell.ci_low()));
    row.push_back(absl::StrCat(cell.ci_high()));
    rows.push_back(std::move(row));
  }
  if (!out_path.empty()) {
    RETURN_IF_ERROR(WriteSpendingOutput(
        out_path, IsJsonPath(out_path) ? ToJson(resp) : FormatCsv(csv_header, rows),
        req.idempotency_key()));
  }
  std::vector<std::string> upper;
  for (const std::string& h : csv_header) upper.push_back(absl::AsciiStrToUpper(h));
  TextTable table(upper);
  for (auto& row : rows) table.AddRow(std::move(row));
  std::string text =
      absl::StrCat("groups over [", absl::StrJoin(resp.attributes(), ", "), "]\n", table.Render(),
                   "[CI_LOW, CI_HIGH]: ", Num(100 * resp.confidence()),
                   "% confidence interval of each true count from the noise alone (noisy count ± ",
                   resp.noise_half_width(), ", never below 0)\nrows used: ", resp.rows_used(),
                   ", rows dropped as unmatched: ", resp.rows_dropped(), "\n",
                   FormatCharge(resp.charge()), ReplayHint(req.idempotency_key()));
  if (!out_path.empty()) absl::StrAppend(&text, "wrote ", out_path, "\n");
  PrintSpending(ctx, resp, resp.charge(), info, text);
  return absl::OkStatus();
}

absl::Status PostprocessEo(Context& ctx) {
  const ParsedFlags& flags = ctx.flags();
  v1::FitEqualizedOddsRequest req;
  RETURN_IF_ERROR(ReadOutcomeRequest(flags, &req));
  ASSIGN_OR_RETURN(const double gamma, flags.GetDouble("gamma", 0));
  if (gamma < 0) return UsageError(absl::StrCat("--gamma must be >= 0 (got ", gamma, ")"));
  req.set_gamma(gamma);
  ASSIGN_OR_RETURN(const double beta, flags.GetDouble("beta", 0));
  req.set_beta(beta);
  req.set_all_pairs(flags.GetBool("all-pairs"));
  ASSIGN_OR_RETURN(const double floor, flags.GetDouble("decision-floor", 0));
  req.set_decision_floor(floor);
  if (flags.Has("min-group-count")) {
    ASSIGN_OR_RETURN(const double min_count, flags.GetDouble("min-group-count", 0));
    req.set_min_group_count(min_count);
  }
  req.set_unmatched(Unmatched(flags));
  const std::string out_path = flags.Get("out");
  if (flags.GetBool("dry-run")) {
    v1::PreviewReleaseRequest preview;
    *preview.mutable_fit_equalized_odds() = req;
    return RunPreview(ctx, preview);
  }

  ASSIGN_OR_RETURN(Client * client, ctx.client());
  CallInfo info;
  ASSIGN_OR_RETURN(v1::FitEqualizedOddsResponse resp,
                   client->FitEqualizedOddsPostProcessor(req, &info));
  if (!out_path.empty()) {
    // The artifact alone: `fairvault apply-eo --artifact` reads it back.
    RETURN_IF_ERROR(
        WriteSpendingOutput(out_path, ToJson(resp.artifact()), req.idempotency_key()));
  }
  std::string text = absl::StrCat(
      FormatArtifact(resp.artifact()), "rows dropped as unmatched: ", resp.rows_dropped(), "\n",
      FormatCharge(resp.charge()), ReplayHint(req.idempotency_key()),
      DecideHint(resp.artifact().id(), resp.artifact().equalized_odds().decision_log_ratio_bound(),
                 "PRED", /*applicable_locally=*/true));
  if (!out_path.empty()) absl::StrAppend(&text, "wrote ", out_path, "\n");
  PrintSpending(ctx, resp, resp.charge(), info, text);
  return absl::OkStatus();
}

absl::Status ArtifactGet(Context& ctx) {
  v1::GetArtifactRequest req;
  req.set_artifact_id(ctx.flags().Get("id"));
  ASSIGN_OR_RETURN(Client * client, ctx.client());
  ASSIGN_OR_RETURN(v1::GetArtifactResponse resp, client->GetArtifact(req));
  const std::string out_path = ctx.flags().Get("out");
  if (!out_path.empty()) RETURN_IF_ERROR(WriteStringToFile(out_path, ToJson(resp.artifact())));
  if (ctx.json()) {
    PrintJson(resp);
    return absl::OkStatus();
  }
  std::cout << FormatArtifact(resp.artifact());
  if (!out_path.empty()) std::cout << "wrote " << out_path << "\n";
  return absl::OkStatus();
}

absl::Status Budget(Context& ctx) {
  v1::GetBudgetRequest req;
  req.set_dataset(ctx.flags().Get("dataset"));
  ASSIGN_OR_RETURN(Client * client, ctx.client());
  ASSIGN_OR_RETURN(v1::GetBudgetResponse resp, client->GetBudget(req));
  if (ctx.json()) {
    PrintJson(resp);
  } else {
    std::cout << FormatBudgets(resp.budgets());
  }
  return absl::OkStatus();
}

}  // namespace

// Shared with cli_auditor.cc: pages through ListLedger with --after/--limit/--all.
absl::StatusOr<v1::ListLedgerResponse> FetchLedger(
    const ParsedFlags& flags, v1::ListLedgerRequest req,
    const std::function<absl::StatusOr<v1::ListLedgerResponse>(const v1::ListLedgerRequest&)>&
        call) {
  ASSIGN_OR_RETURN(const int64_t after, flags.GetInt("after", 0));
  ASSIGN_OR_RETURN(const int64_t limit, flags.GetInt("limit", 0));
  if (after < 0) return UsageError("--after must be >= 0");
  if (limit < 0 || limit > 10000) return UsageError("--limit must be in 1..10000");
  req.set_dataset(flags.Get("dataset"));
  req.set_after_seq(after);
  req.set_limit(static_cast<int32_t>(limit));
  if (!flags.GetBool("all")) return call(req);
  v1::ListLedgerResponse all;
  while (true) {
    ASSIGN_OR_RETURN(v1::ListLedgerResponse page, call(req));
    if (page.entries().empty()) break;
    req.set_after_seq(page.entries(page.entries_size() - 1).seq());
    for (v1::LedgerEntry& e : *page.mutable_entries()) *all.add_entries() = std::move(e);
  }
  return all;
}

namespace {

absl::Status LedgerList(Context& ctx) {
  ASSIGN_OR_RETURN(Client * client, ctx.client());
  ASSIGN_OR_RETURN(v1::ListLedgerResponse resp,
                   FetchLedger(ctx.flags(), {}, [client](const v1::ListLedgerRequest& r) {
                     return client->ListLedger(r);
                   }));
  if (ctx.json()) {
    PrintJson(resp);
  } else {
    std::cout << FormatLedger(resp.entries());
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<FlagSpec> LedgerPagingFlags() {
  return {{"dataset", "NAME", "only rows of this dataset"},
          {"after", "SEQ", "only rows with seq > SEQ (default 0)"},
          {"limit", "N", "rows per call, 1..10000 (default: server's 1000)"},
          {"all", "", "keep fetching pages until the end of the ledger"}};
}

std::vector<Command> CompanyCommands() {
  return {
      {"table upload",
       "upload a table of the company's columns for later releases (company)",
       "Prints the table handle alone on stdout (details on stderr).",
       {{"dataset", "NAME", "dataset the table joins with (needs a grant)", true},
        {"csv", "FILE", "CSV with a header row", true},
        {"key-column", "COLUMN|@row",
         "column holding subject keys; @row uses row-<0-based data row index>", true},
        {"numeric", "COL,...", "numeric columns to upload", false, true},
        {"categorical", "COL,...", "categorical columns to upload", false, true},
        {"ttl", "SECONDS", "handle lifetime, 1..604800 (default: server's 86400)"},
        {"label", "TEXT", "free label for your own bookkeeping"},
        {"hmac-secret-file", "FILE",
         "pseudonymise keys as hex HMAC-SHA256 with the secret in FILE (>= 16 bytes)"},
        {"handle-out", "FILE", "also write the handle to FILE"},
        {"chunk-rows", "N", "rows per stream message (default 20000)"}},
       true,
       TableUpload},
      {"counts",
       "noisy contingency counts of table columns x protected groups (company)",
       "Spends --epsilon of your grant (discrete Laplace, or discrete Gaussian at the grant's "
       "delta).\nEach cell comes with a 95% confidence interval [CI_LOW, CI_HIGH] for its true "
       "count,\nfrom the noise alone (its half-width depends only on the noise scale).",
       {{"table", "HANDLE", "table handle from `table upload`", true},
        {"columns", "COL,...", "categorical table columns to cross with the groups (0..4)", false,
         true},
        AttributesFlag(),
        {"epsilon", "EPS", "privacy cost of this release (> 0)", true},
        {"noise", "laplace|gaussian", "noise distribution (default laplace)"},
        DropUnmatchedFlag(),
        IdempotencyFlag(),
        {"out", "FILE",
         "also write the cells (with ci_low, ci_high) as CSV, or the response as JSON if "
         "FILE.json"},
        DryRunFlag()},
       true,
       Counts},
      {"postprocess eo",
       "fit a DP equalized-odds post-processor (Jagielski et al. 2019, Alg. 1) (company)",
       "The prediction and label columns must have been uploaded as numeric 0/1 columns.",
       {{"table", "HANDLE", "table handle from `table upload`", true},
        {"prediction-column", "COL", "numeric 0/1 column with your model's predictions", true},
        {"label-column", "COL", "numeric 0/1 column with the true labels", true},
        AttributesFlag(),
        {"epsilon", "EPS", "privacy cost of this release (> 0)", true},
        {"gamma", "G", "fairness tolerance on |FPR_a-FPR_b| and |TPR_a-TPR_b| (>= 0)", true},
        {"beta", "B", "failure probability of the slack bound, in (0,1) (default 0.05)"},
        {"all-pairs", "", "constrain every pair of groups, not each against the reference"},
        {"decision-floor", "F",
         "in [0,0.5): keep every mixing probability in [F, 1-F] so that `decide` can use the "
         "artifact (default 0: the paper's LP; decide refuses every artifact fitted with "
         "F < 1e-6)"},
        {"min-group-count", "N",
         "groups with fewer noisy subjects than N with either label keep their predictions and "
         "are left out of the constraints (default 8 ln(4K/beta)/epsilon; 0 excludes none)"},
        DropUnmatchedFlag(),
        IdempotencyFlag(),
        {"out", "FILE", "write the artifact as JSON (input of apply-eo)"},
        DryRunFlag()},
       true,
       PostprocessEo},
      {"artifact get",
       "fetch an artifact (company)",
       "",
       {{"id", "ARTIFACT_ID", "artifact id, e.g. art_3f2c...", true},
        {"out", "FILE", "write the artifact as JSON (input of apply-eo)"}},
       true,
       ArtifactGet},
      {"budget",
       "show your budgets: granted, spent, remaining (company)",
       "",
       {{"dataset", "NAME", "one dataset (default: all)"}},
       true,
       Budget},
      {"ledger list", "list your own ledger rows (company)", "", LedgerPagingFlags(), true,
       LedgerList},
  };
}

}  // namespace fairvault::client::cli
