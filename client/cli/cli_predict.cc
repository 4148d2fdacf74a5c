// `fairvault predict`: a fair-model artifact (issue 9) applied to the company's own rows,
// locally and without the protected attribute; the model comes from one GetArtifact call or
// from a file `artifact get --out` wrote.
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <iostream>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/cli/cli_models.h"
#include "client/apply/artifact_files.h"
#include "client/apply/model_apply.h"
#include "client/apply/model_quality.h"
#include "core/random/secure_bitgen.h"
#include "core/util/status_macros.h"
#include "core/util/decimal.h"

namespace fairvault::client::cli {

std::string PredictHint(const std::string& artifact_id) {
  return absl::StrCat("apply with: fairvault predict --artifact-id ", artifact_id,
                      " --csv FILE --key-column COL  (or fetch it once with `fairvault artifact "
                      "get --id ",
                      artifact_id, " --out model.json` and pass --artifact-file model.json)\n");
}

namespace {

// Reads what `artifact get --out`, `best-response --out` or `--json` wrote.
absl::StatusOr<v1::FairModel> LoadFairModelFile(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string content, ReadFileToString(path));
  return ParseFairModelArtifact(content, path);
}

absl::StatusOr<v1::FairModel> LoadFairModel(Context& ctx) {
  const ParsedFlags& flags = ctx.flags();
  if (flags.Has("artifact-id") == flags.Has("artifact-file")) {
    return UsageError(
        "pass exactly one of --artifact-id (fetched once from the vault) and --artifact-file "
        "(written by `fairvault artifact get --out`; no vault call)");
  }
  if (flags.Has("artifact-file")) return LoadFairModelFile(flags.Get("artifact-file"));
  v1::GetArtifactRequest req;
  req.set_artifact_id(flags.Get("artifact-id"));
  ASSIGN_OR_RETURN(Client * client, ctx.client());
  ASSIGN_OR_RETURN(const v1::GetArtifactResponse resp, client->GetArtifact(req));
  return FairModelOf(resp.artifact(), req.artifact_id());
}

// The shortest decimal text that reads back as exactly `value` (p_positive = k/m, or a
// network's probability), written into `text` (its capacity reused from row to row).
void ExactNumber(double value, std::string& text) {
  char buffer[64];
  const std::to_chars_result r = std::to_chars(buffer, buffer + sizeof(buffer), value);
  text.assign(buffer, r.ptr);
}

// "3 -> 16 -> 1" for a network's layer shapes.
std::string ShapeText(const FairModelApplier& applier) {
  std::string text;
  for (const auto& [inputs, outputs] : applier.layer_shapes()) {
    if (text.empty()) absl::StrAppend(&text, inputs);
    absl::StrAppend(&text, " -> ", outputs);
  }
  return text;
}

absl::Status Predict(Context& ctx) {
  const ParsedFlags& flags = ctx.flags();
  const std::string path = flags.Get("csv");
  const bool proba_only = flags.GetBool("proba-only");
  uint64_t seed = 0;
  if (flags.Has("seed")) {
    if (proba_only) return UsageError("--seed has no use with --proba-only (no draws are made)");
    if (!absl::SimpleAtoi(flags.Get("seed"), &seed)) {
      return UsageError(
          absl::StrCat("--seed must be an integer in 0..2^64-1 (got '", flags.Get("seed"), "')"));
    }
  } else {
    core::SecureBitGen secure;
    seed = secure();
  }
  ASSIGN_OR_RETURN(const v1::FairModel model, LoadFairModel(ctx));
  ASSIGN_OR_RETURN(const FairModelApplier applier, FairModelApplier::Create(model));
  ASSIGN_OR_RETURN(std::unique_ptr<CsvReader> reader, CsvReader::Open(path));
  if (!reader->header_note().empty()) std::cerr << "note: " << reader->header_note() << "\n";
  const std::string key_column = flags.Get("key-column");
  ASSIGN_OR_RETURN(KeyColumn keys, KeyColumn::Resolve(reader->header(), path, key_column, ""));
  ASSIGN_OR_RETURN(FairModelRowReader rows,
                   FairModelRowReader::Bind(applier, reader->header(), path));
  // The company's own labels, to compare the decisions with (and with the constant classifier).
  int64_t label_index = -1;
  if (flags.Has("label-column")) {
    if (proba_only) {
      return UsageError("--label-column needs decisions: drop --proba-only");
    }
    const std::string name = flags.Get("label-column");
    const auto it = std::find(reader->header().begin(), reader->header().end(), name);
    if (it == reader->header().end()) {
      return UsageError(absl::StrCat("--label-column: ", path, " has no column '", name, "'"));
    }
    label_index = it - reader->header().begin();
  }
  DecisionTally tally;

  // Rows stream from the input to the output; the output file appears only when complete.
  const std::string out_path = flags.Get("out");
  const std::string tmp_path = out_path.empty() ? "" : out_path + ".tmp";
  std::ofstream file;
  if (!out_path.empty()) {
    RETURN_IF_ERROR(PrepareOutputFile(tmp_path));  // mode 0600, kept by the rename
    file.open(tmp_path, std::ios::binary | std::ios::trunc);
    if (!file) {
      return absl::FailedPreconditionError(absl::StrCat("cannot write ", tmp_path));
    }
  }
  std::ostream& out = out_path.empty() ? std::cout : file;
  auto fail = [&](absl::Status status) {
    if (!out_path.empty()) {
      file.close();
      std::remove(tmp_path.c_str());
    }
    return status;
  };
  // Binary models: p_positive; a network with several logits: p_<class> per class, in the
  // artifact's `classes` order.
  const bool multiclass = applier.is_multiclass();
  const size_t num_p = multiclass ? applier.classes().size() : 1;
  std::vector<std::string> header = {key_column == "@row" ? "row" : key_column};
  if (multiclass) {
    for (int c : applier.classes()) header.push_back(absl::StrCat("p_", c));
  } else {
    header.push_back("p_positive");
  }
  if (!proba_only) header.push_back("decision");
  // Input columns copied through (e.g. the label, or a group the regulator holds for its view).
  std::vector<size_t> keep_index;
  for (const std::string& name : flags.GetList("keep-columns")) {
    const auto it = std::find(reader->header().begin(), reader->header().end(), name);
    if (it == reader->header().end()) {
      return UsageError(absl::StrCat("--keep-columns: ", path, " has no column '", name, "'"));
    }
    keep_index.push_back(static_cast<size_t>(it - reader->header().begin()));
    header.push_back(name);
  }
  const size_t first_kept = 1 + num_p + (proba_only ? 0 : 1);
  out << FormatCsvRecord(header);

  ModelRng gen(seed);
  // A mixture's p_positive takes at most m + 1 values (k/m): format each once. A network's
  // take any value: formatted each time (a cache would grow with the file).
  const bool cache_p = applier.kind() == FairModelApplier::Kind::kMixture;
  absl::flat_hash_map<double, std::string> p_text;
  std::vector<std::string> fields, record(header.size());
  int64_t line = 0, n = 0, positives = 0;
  double p_sum = 0;
  // A multi-class network: the sum of each class's probability and its decisions.
  std::vector<double> class_p_sum(multiclass ? num_p : 0);
  std::vector<int64_t> class_decisions(multiclass ? num_p : 0);
  while (true) {
    absl::StatusOr<bool> more = reader->Next(&fields, &line);
    if (!more.ok()) return fail(more.status());
    if (!*more) break;
    absl::StatusOr<std::string> key = keys.Next(fields, line, /*pseudonymise=*/false);
    if (!key.ok()) return fail(key.status());
    absl::StatusOr<const ModelPrediction*> predicted =
        rows.Predict(fields, line, proba_only ? nullptr : &gen);
    if (!predicted.ok()) return fail(predicted.status());
    const ModelPrediction& p = **predicted;
    record[0] = *std::move(key);
    if (multiclass) {
      for (size_t k = 0; k < num_p; ++k) {
        ExactNumber(p.class_probabilities[k], record[1 + k]);
        class_p_sum[k] += p.class_probabilities[k];
        if (p.decision == applier.classes()[k]) ++class_decisions[k];
      }
    } else if (cache_p) {
      auto [text, inserted] = p_text.try_emplace(p.p_positive);
      if (inserted) ExactNumber(p.p_positive, text->second);
      record[1] = text->second;
    } else {
      ExactNumber(p.p_positive, record[1]);
    }
    if (!proba_only) {
      record[1 + num_p] = absl::StrCat(p.decision);
      if (label_index < 0) {
        tally.Add(p.decision);
      } else {
        const std::string& text = fields[label_index];
        double label = 0;
        if (!core::ParseDecimal(text, &label) || label != static_cast<int64_t>(label)) {
          return fail(absl::InvalidArgumentError(absl::StrCat(
              path, ":", line, ": --label-column '", flags.Get("label-column"),
              "' must hold integer class labels (0/1 for a binary model; got '", text, "')")));
        }
        tally.Add(p.decision, static_cast<int64_t>(label));
      }
    }
    for (size_t k = 0; k < keep_index.size(); ++k) record[first_kept + k] = fields[keep_index[k]];
    out << FormatCsvRecord(record);
    ++n;
    p_sum += p.p_positive;
    positives += p.decision == 1 ? 1 : 0;
  }
  out.flush();
  if (!out) return fail(absl::DataLossError(absl::StrCat("writing ", out_path, " failed")));
  if (!out_path.empty()) {
    file.close();
    if (std::rename(tmp_path.c_str(), out_path.c_str()) != 0) {
      return fail(absl::FailedPreconditionError(
          absl::StrCat("cannot rename ", tmp_path, " to ", out_path)));
    }
  }
  std::string what;
  switch (applier.kind()) {
    case FairModelApplier::Kind::kHypothesis:
      what = absl::StrCat("hypothesis column '", model.hypothesis_column(), "'");
      break;
    case FairModelApplier::Kind::kMixture:
      what = absl::StrCat(applier.num_components(), " component(s)");
      break;
    case FairModelApplier::Kind::kNetwork:
      what = absl::StrCat("network ", ShapeText(applier), ", ",
                          multiclass ? absl::StrCat(num_p, " classes, softmax")
                                     : std::string("one logit, sigmoid"));
      break;
  }
  auto mean = [n](double sum) { return n > 0 ? Num(sum / static_cast<double>(n)) : "-"; };
  std::string summary =
      absl::StrCat("predicted ", n, " rows with ",
                   absl::StrContains("aeiou", model.algorithm().substr(0, 1)) &&
                           !model.algorithm().empty()
                       ? "an "
                       : "a ",
                   model.algorithm(), " model (", what, ")\n");
  if (multiclass) {
    for (size_t k = 0; k < num_p; ++k) {
      absl::StrAppend(&summary, "class ", applier.classes()[k], ": mean p ", mean(class_p_sum[k]),
                      proba_only ? "" : absl::StrCat(", decisions ", class_decisions[k]), "\n");
    }
  } else {
    absl::StrAppend(&summary, "mean p_positive: ", mean(p_sum), "\n");
  }
  if (!proba_only) {
    if (!multiclass) absl::StrAppend(&summary, "positive decisions: ", positives, "\n");
    // Only a mixture of two or more components draws; other models decide deterministically.
    if (applier.num_components() >= 2) {
      absl::StrAppend(&summary, "seed: ", seed, " (std::mt19937_64; pass --seed ", seed,
                      " to draw the same decisions again)\n");
    } else {
      absl::StrAppend(&summary, "decisions are deterministic for this model (no draws)\n");
    }
  }
  if (!proba_only) {
    absl::StrAppend(&summary, DescribeErrors(tally), TrivialModelWarning(tally));
  }
  if (out_path.empty()) {
    std::cerr << summary;
  } else {
    std::cout << summary << "wrote " << n << " rows to " << out_path << "\n";
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<Command> PredictCommands() {
  return {
      {"predict",
       "apply a fair-model artifact to your rows, locally (company)",
       "Needs no protected attribute. Each row's features are preprocessed as the artifact says\n"
       "(docs/api.md, \"Model artifact format\").\n"
       "- A mixture of linear classifiers: p_positive is the fraction of its components\n"
       "  deciding 1, and the decision draws one component uniformly with std::mt19937_64\n"
       "  seeded by --seed (printed when drawn at random, so that the same decisions can be\n"
       "  drawn again).\n"
       "- A network with one logit z: p_positive = sigmoid(z), decision 1 iff z > 0.\n"
       "- A network with several logits: one column p_<class> per class (softmax, in the\n"
       "  artifact's class order), decision = the class of the largest logit (first on ties).\n"
       "- A hypothesis column: p_positive and decision are that column's 0/1 value.\n"
       "Network and hypothesis decisions are deterministic (no draw; --seed is not needed).\n"
       "Writes the key column, p_positive (or the p_<class> columns), decision (not with\n"
       "--proba-only) and --keep-columns. The CSV is streamed: any size in constant memory.\n"
       "--artifact-id fetches the artifact once; --artifact-file makes no vault call.\n"
       "It warns when the model decides one class for 99% or more of the rows, or (with\n"
       "--label-column) errs more often than the constant classifier: a trivial model.",
       {{"artifact-id", "ARTIFACT_ID", "a fair-model artifact of yours (one GetArtifact call)"},
        {"artifact-file", "FILE",
         "the artifact as written by `artifact get --out` or `best-response --out` (JSON or "
         "binary protobuf)"},
        {"csv", "FILE", "CSV with a header row holding the model's columns", true},
        {"key-column", "COLUMN|@row",
         "column copied to the output to identify rows; @row writes row-<0-based data row index>",
         true},
        {"out", "FILE", "output CSV (default: stdout, summary on stderr)"},
        {"seed", "S", "seed of a mixture's decision draws, 0..2^64-1 (default: from the OS)"},
        {"proba-only", "", "write the probabilities only (p_positive or p_<class>): no decision"},
        {"keep-columns", "COL,...", "copy these input columns into the output too", false, true},
        {"label-column", "COL",
         "your labels: print the decisions' error beside the constant classifier's"}},
       true,
       Predict},
  };
}

}  // namespace fairvault::client::cli
