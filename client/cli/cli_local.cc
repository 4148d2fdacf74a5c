// Local commands (no server): applying an equalized-odds artifact to the company's rows, and
// fairness metrics of predictions against labels by group.
#include <iostream>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/cli/cli_common.h"
#include "client/apply/artifact_files.h"
#include "client/apply/eo_apply.h"
#include "core/fairness/metrics.h"
#include "core/random/secure_bitgen.h"
#include "core/util/status_macros.h"

namespace fairvault::client::cli {
namespace {

// What `postprocess eo --out`, `postprocess eo-scores --out`, `artifact get --out` or `--json`
// wrote, as an applier of either kind (binary predictions, or scores).
absl::StatusOr<EqualizedOddsApplier> LoadEqualizedOdds(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string json, ReadFileToString(path));
  return ParseEqualizedOddsArtifact(json, path);
}

absl::Status ApplyEo(Context& ctx) {
  const ParsedFlags& flags = ctx.flags();
  const std::string path = flags.Get("csv");
  ASSIGN_OR_RETURN(const EqualizedOddsApplier applier, LoadEqualizedOdds(flags.Get("artifact")));
  // A binary artifact decides --prediction-column, one fitted on scores --score-column.
  const bool scores = applier.takes_scores();
  const char* input_flag = scores ? "score-column" : "prediction-column";
  if (!flags.Has(input_flag) || flags.Has(scores ? "prediction-column" : "score-column")) {
    return UsageError(absl::StrCat(
        "this artifact was fitted on ", scores ? "scores" : "binary predictions", ": pass --",
        input_flag, " (and not --", scores ? "prediction-column" : "score-column", ")"));
  }
  ASSIGN_OR_RETURN(CsvTable table, ReadCsvFile(path));
  ASSIGN_OR_RETURN(const size_t prediction_index, table.ColumnIndex(flags.Get(input_flag)));
  ASSIGN_OR_RETURN(const std::vector<std::string> groups,
                   GroupLabels(table, flags.GetList("group-column")));
  const std::string output_column = flags.Get("output-column", "fair_prediction");
  if (table.ColumnIndex(output_column).ok()) {
    return UsageError(absl::StrCat("the CSV already has a column '", output_column,
                                   "'; choose another name with --output-column"));
  }

  core::SecureBitGen gen;
  struct Tally {
    int64_t rows = 0, before = 0, after = 0;
  };
  std::map<std::string, Tally> tallies;
  for (size_t r = 0; r < table.rows.size(); ++r) {
    int prediction = 0;  // binary artifacts only
    absl::StatusOr<int> decision;
    if (scores) {
      ASSIGN_OR_RETURN(const double score, ParseCell(table, path, r, prediction_index));
      decision = applier.DecideScore(score, groups[r], gen);
    } else {
      ASSIGN_OR_RETURN(prediction, ParseBinaryCell(table, path, r, prediction_index));
      decision = applier.Decide(prediction, groups[r], gen);
    }
    if (!decision.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", table.row_lines[r], ": ", decision.status().message()));
    }
    Tally& t = tallies[groups[r]];
    ++t.rows;
    t.before += prediction;
    t.after += *decision;
    table.rows[r].push_back(absl::StrCat(*decision));
  }
  table.header.push_back(output_column);
  const std::string csv = FormatCsv(table.header, table.rows);

  TextTable summary({"GROUP", "ROWS", "POSITIVE_BEFORE", "POSITIVE_AFTER"});
  for (const auto& [group, t] : tallies) {
    summary.AddRow({group, absl::StrCat(t.rows), scores ? "-" : absl::StrCat(t.before),
                    absl::StrCat(t.after)});
  }
  const std::string out_path = flags.Get("out");
  if (out_path.empty()) {
    std::cout << csv;
    std::cerr << summary.Render();
  } else {
    RETURN_IF_ERROR(WriteStringToFile(out_path, csv));
    std::cout << summary.Render() << "wrote " << table.rows.size() << " rows to " << out_path
              << " (column '" << output_column << "')\n";
  }
  return absl::OkStatus();
}

absl::Status Metrics(Context& ctx) {
  const ParsedFlags& flags = ctx.flags();
  const std::string path = flags.Get("csv");
  ASSIGN_OR_RETURN(const CsvTable table, ReadCsvFile(path));
  ASSIGN_OR_RETURN(const size_t prediction_index,
                   table.ColumnIndex(flags.Get("prediction-column")));
  ASSIGN_OR_RETURN(const size_t label_index, table.ColumnIndex(flags.Get("label-column")));
  ASSIGN_OR_RETURN(const std::vector<std::string> labels,
                   GroupLabels(table, flags.GetList("group-column")));
  const std::vector<std::string> positive = flags.GetList("positive-label");

  std::map<std::string, int> group_index;  // sorted labels → 0..K-1
  for (const std::string& g : labels) group_index.emplace(g, 0);
  std::vector<std::string> names;
  for (auto& [name, index] : group_index) {
    index = static_cast<int>(names.size());
    names.push_back(name);
  }
  std::vector<int> prediction, label, group;
  for (size_t r = 0; r < table.rows.size(); ++r) {
    ASSIGN_OR_RETURN(const int p, ParseBinaryCell(table, path, r, prediction_index));
    prediction.push_back(p);
    if (positive.empty()) {
      ASSIGN_OR_RETURN(const int y, ParseBinaryCell(table, path, r, label_index));
      label.push_back(y);
    } else {
      const std::string& v = table.rows[r][label_index];
      label.push_back(std::find(positive.begin(), positive.end(), v) != positive.end() ? 1 : 0);
    }
    group.push_back(group_index[labels[r]]);
  }
  ASSIGN_OR_RETURN(
      const std::vector<core::fairness::GroupRates> rates,
      core::fairness::ComputeGroupRates(prediction, label, group, static_cast<int>(names.size())));
  TextTable out({"GROUP", "N", "POSITIVES", "PRED_POSITIVE", "SELECTION", "TPR", "FPR", "ERROR"});
  auto f = [](double v) { return absl::StrFormat("%.4f", v); };
  for (size_t k = 0; k < rates.size(); ++k) {
    const core::fairness::GroupRates& g = rates[k];
    out.AddRow({names[k], absl::StrCat(g.n), absl::StrCat(g.positives),
                absl::StrCat(g.predicted_positive), f(g.selection_rate), f(g.tpr), f(g.fpr),
                f(g.error)});
  }
  std::cout << out.Render() << "rows: " << prediction.size()
            << "\nerror: " << f(core::fairness::ErrorRate(prediction, label))
            << "\nequalized-odds violation (max |dTPR|, |dFPR|): "
            << f(core::fairness::EqualizedOddsViolation(rates))
            << "\ndemographic-parity violation (max |dSelection|): "
            << f(core::fairness::DemographicParityViolation(rates)) << "\n";
  return absl::OkStatus();
}

}  // namespace

std::vector<Command> LocalCommands() {
  return {
      {"apply-eo",
       "apply an equalized-odds artifact to your rows, locally",
       "Each row's decision is a fresh coin from the OS CSPRNG with the artifact's probability\n"
       "for (prediction, group), or (score bin, group) for an artifact fitted on scores\n"
       "(`postprocess eo-scores`). Writes the input CSV plus the decision column.",
       {{"artifact", "FILE.json",
         "artifact JSON from `postprocess eo --out`, `postprocess eo-scores --out` or "
         "`artifact get`",
         true},
        {"csv", "FILE", "CSV with a header row", true},
        {"prediction-column", "COL", "0/1 predictions of your model (binary artifacts)"},
        {"score-column", "COL", "your model's scores (artifacts fitted on scores)"},
        {"group-column", "COL[,COL...]",
         "group label column(s); several are joined with '|' as in the artifact (Female|White)",
         true, true},
        {"output-column", "NAME", "name of the added column (default fair_prediction)"},
        {"out", "FILE", "output CSV (default: stdout, summary on stderr)"}},
       false,
       ApplyEo},
      {"metrics",
       "per-group error, TPR, FPR and the EO / DP violations, locally",
       "",
       {{"csv", "FILE", "CSV with a header row", true},
        {"prediction-column", "COL", "0/1 predictions", true},
        {"label-column", "COL", "true labels: 0/1, or see --positive-label", true},
        {"group-column", "COL[,COL...]", "group label column(s), joined with '|'", true, true},
        {"positive-label", "V[,V...]", "label values counted as 1 (default: labels are 0/1)", false,
         true}},
       false,
       Metrics},
  };
}

}  // namespace fairvault::client::cli
