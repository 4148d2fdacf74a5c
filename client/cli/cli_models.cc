// Fair models the company runs itself, without the protected attribute (issue 9): one private
// best response (`best-response`) and managed learners (`model fit`). Their jobs are
// cli_jobs.cc; applying a model, cli_predict.cc.
#include "client/cli/cli_models.h"

#include <algorithm>
#include <cmath>
#include <iostream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/cli/cli_spend.h"
#include "core/util/status_macros.h"
#include "core/util/decimal.h"

namespace fairvault::client::cli {
namespace {

absl::StatusOr<double> OptionalNonNegative(const ParsedFlags& flags, absl::string_view name) {
  ASSIGN_OR_RETURN(const double value, flags.GetDouble(name, 0));
  if (value < 0) {
    return UsageError(absl::StrCat("--", name, " must be >= 0 (got ", flags.Get(name), ")"));
  }
  return value;
}

// The flags every least-squares game request shares onto it: features, label, attributes,
// epsilon, clip, intercept, unmatched keys, idempotency key (`cell-sums` reads only these).
// Without `with_epsilon` the caller sets the epsilon (`sweep model`, one per point).
template <typename Request>
absl::Status ReadGameFlags(const ParsedFlags& flags, Request* req, bool with_epsilon = true) {
  req->set_idempotency_key(IdempotencyKey(flags));
  req->set_table_handle(flags.Get("table"));
  for (const std::string& f : flags.GetList("features")) req->add_feature_columns(f);
  req->set_label_column(flags.Get("label"));
  for (const std::string& a : flags.GetList("attributes")) req->add_attributes(a);
  if (with_epsilon) {
    ASSIGN_OR_RETURN(const double epsilon, RequiredEpsilon(flags));
    req->set_epsilon(epsilon);
  }
  ASSIGN_OR_RETURN(const double clip, OptionalNonNegative(flags, "clip-l1"));
  req->set_clip_l1(clip);
  req->set_no_intercept(flags.GetBool("no-intercept"));
  req->set_unmatched(Unmatched(flags));
  return absl::OkStatus();
}

// The learner's shared flags: the game's, then gamma and the mass floor.
template <typename Request>
absl::Status ReadLearnerFlags(const ParsedFlags& flags, Request* req, bool with_epsilon = true) {
  RETURN_IF_ERROR(ReadGameFlags(flags, req, with_epsilon));
  ASSIGN_OR_RETURN(const double gamma, OptionalNonNegative(flags, "gamma"));
  req->set_gamma(gamma);
  ASSIGN_OR_RETURN(const double mass_floor, OptionalNonNegative(flags, "mass-floor"));
  req->set_mass_floor(mass_floor);
  return absl::OkStatus();
}

absl::StatusOr<v1::BestResponseOracle> Oracle(const ParsedFlags& flags) {
  const std::string oracle = absl::AsciiStrToLower(flags.Get("oracle"));
  if (oracle == "least_squares") return v1::BEST_RESPONSE_ORACLE_LEAST_SQUARES;
  if (oracle == "ftpl") return v1::BEST_RESPONSE_ORACLE_FTPL;
  return UsageError(
      absl::StrCat("--oracle must be least_squares or ftpl (got '", flags.Get("oracle"), "')"));
}

absl::Status BestResponse(Context& ctx) {
  const ParsedFlags& flags = ctx.flags();
  v1::BestResponseRequest req;
  // With --sums-key the response is post-processing of that release: no epsilon, no masses.
  const bool from_sums = flags.Has("sums-key");
  if (from_sums && (flags.Has("epsilon") || flags.Has("masses-key"))) {
    return UsageError(
        "--sums-key makes the response post-processing of that release (charged nothing): "
        "drop --epsilon and --masses-key");
  }
  if (!from_sums && !flags.Has("masses-key")) {
    return UsageError("pass --masses-key KEY (a `counts` release), or --sums-key KEY (a "
                      "`cell-sums` release, after which every best response is free)");
  }
  RETURN_IF_ERROR(ReadLearnerFlags(flags, &req, /*with_epsilon=*/!from_sums));
  if (req.feature_columns().empty()) return UsageError("pass --features a,b,...");
  req.set_masses_key(flags.Get("masses-key"));
  req.set_sums_key(flags.Get("sums-key"));
  if (from_sums) req.clear_idempotency_key();  // nothing is stored under a key
  for (const std::string& item : flags.GetList("lambda")) {
    double value = 0;
    if (!core::ParseDecimal(item, &value) || !std::isfinite(value) || value < 0) {
      return UsageError(
          absl::StrCat("--lambda entries must be finite numbers >= 0 (got '", item, "')"));
    }
    req.add_lambda(value);
  }
  ASSIGN_OR_RETURN(const double bound, flags.GetDouble("lambda-bound", 0));
  if (bound <= 0) {
    return UsageError(
        absl::StrCat("--lambda-bound must be > 0 (got ", flags.Get("lambda-bound"), ")"));
  }
  req.set_lambda_bound(bound);
  ASSIGN_OR_RETURN(const v1::BestResponseOracle oracle, Oracle(flags));
  req.set_oracle(oracle);

  if (flags.GetBool("dry-run")) {
    v1::PreviewReleaseRequest preview;
    *preview.mutable_best_response() = req;
    return RunPreview(ctx, preview);
  }

  ASSIGN_OR_RETURN(Client * client, ctx.client());
  CallInfo info;
  ASSIGN_OR_RETURN(const v1::BestResponseResponse resp, client->BestResponse(req, &info));
  const std::string out_path = flags.Get("out");
  if (!out_path.empty()) {
    RETURN_IF_ERROR(
        WriteSpendingOutput(out_path, ToJson(resp.artifact()), req.idempotency_key()));
  }
  if (from_sums) {
    std::string text = absl::StrCat(
        "best response from the cell sums of ledger seq ", resp.charge().ledger_seq(),
        ": charged nothing (post-processing), not stored\nrows used: ", resp.rows_used(),
        "  rows dropped as unmatched: ", resp.rows_dropped(), "\n");
    if (out_path.empty()) {
      absl::StrAppend(&text, "pass --out FILE to keep the model (predict --artifact-file FILE)\n");
    } else {
      absl::StrAppend(&text, "wrote ", out_path, "\n");
    }
    PrintSpending(ctx, resp, resp.charge(), info, text);
    return absl::OkStatus();
  }
  std::string text = absl::StrCat(
      "artifact: ", resp.artifact().id(), "\nrows used: ", resp.rows_used(),
      "  rows dropped as unmatched: ", resp.rows_dropped(),
      "\nsensitivity (L1, of the noised vector): ", Num(resp.sensitivity()),
      "  (largest change of one row's cost: ", Num(resp.cost_change_bound()),
      ", largest row L1 norm: ", Num(resp.max_row_l1()), ")\n", FormatCharge(resp.charge()),
      ReplayHint(req.idempotency_key()), PredictHint(resp.artifact().id()));
  if (!out_path.empty()) absl::StrAppend(&text, "wrote ", out_path, "\n");
  PrintSpending(ctx, resp, resp.charge(), info, text);
  return absl::OkStatus();
}

absl::Status CellSums(Context& ctx) {
  const ParsedFlags& flags = ctx.flags();
  v1::CellSumsRequest req;
  RETURN_IF_ERROR(ReadGameFlags(flags, &req));
  if (req.feature_columns().empty()) return UsageError("pass --features a,b,...");
  ASSIGN_OR_RETURN(const double share, OptionalNonNegative(flags, "counts-share"));
  req.set_counts_share(share);
  if (flags.GetBool("dry-run")) {
    v1::PreviewReleaseRequest preview;
    *preview.mutable_cell_sums() = req;
    return RunPreview(ctx, preview);
  }
  ASSIGN_OR_RETURN(Client * client, ctx.client());
  CallInfo info;
  ASSIGN_OR_RETURN(const v1::CellSumsResponse resp, client->ReleaseCellSums(req, &info));
  const std::string out_path = flags.Get("out");
  if (!out_path.empty()) {
    RETURN_IF_ERROR(WriteSpendingOutput(out_path, ToJson(resp), req.idempotency_key()));
  }
  std::string text =
      absl::StrCat("released ", resp.cells_size(), " cells x ", resp.feature_names_size(),
                   " feature sums over ", resp.rows_used(), " rows (dropped as unmatched: ",
                   resp.rows_dropped(), ")\n");
  for (const v1::CellSum& cell : resp.cells()) {
    absl::StrAppend(&text, "  group ", cell.group(), ", label ", cell.label(), ": noisy count ",
                    Num(cell.noisy_count()), "\n");
  }
  absl::StrAppend(&text, FormatCharge(resp.charge()), ReplayHint(req.idempotency_key()),
                  "best responses from it are free: fairvault best-response --sums-key ",
                  req.idempotency_key(), " ...\n");
  if (!out_path.empty()) absl::StrAppend(&text, "wrote ", out_path, "\n");
  PrintSpending(ctx, resp, resp.charge(), info, text);
  return absl::OkStatus();
}

absl::StatusOr<v1::FairModelAlgorithm> Algorithm(const ParsedFlags& flags) {
  const std::string name = absl::AsciiStrToLower(flags.Get("algorithm"));
  if (name == "dp_oracle_learner") return v1::FAIR_MODEL_ALGORITHM_DP_ORACLE_LEARNER;
  if (name == "exponential_mechanism") return v1::FAIR_MODEL_ALGORITHM_EXPONENTIAL_MECHANISM;
  if (name == "private_fair_nr") return v1::FAIR_MODEL_ALGORITHM_PRIVATE_FAIR_NR;
  if (name == "dp_fermi") return v1::FAIR_MODEL_ALGORITHM_DP_FERMI;
  if (name == "pf_ld") return v1::FAIR_MODEL_ALGORITHM_PF_LD;
  if (name == "exponentiated_gradient") return v1::FAIR_MODEL_ALGORITHM_EXPONENTIATED_GRADIENT;
  return UsageError(absl::StrCat(
      "--algorithm must be dp_oracle_learner, exponential_mechanism, private_fair_nr, dp_fermi, "
      "pf_ld or exponentiated_gradient (got '",
      flags.Get("algorithm"), "')"));
}

// The stochastic learners' --model, --fairness and --hidden-units (empty: the server's
// defaults).
absl::Status ReadStochasticModelFlags(const ParsedFlags& flags, v1::FitFairModelRequest* req) {
  if (flags.Has("model")) {
    const std::string model = absl::AsciiStrToLower(flags.Get("model"));
    if (model == "logistic") {
      req->set_model(v1::MODEL_FAMILY_LOGISTIC_REGRESSION);
    } else if (model == "softmax") {
      req->set_model(v1::MODEL_FAMILY_SOFTMAX_REGRESSION);
    } else if (model == "mlp") {
      req->set_model(v1::MODEL_FAMILY_MLP);
    } else {
      return UsageError(absl::StrCat("--model must be logistic, softmax or mlp (got '",
                                     flags.Get("model"), "')"));
    }
  }
  if (flags.Has("fairness")) {
    const std::string notion = absl::AsciiStrToLower(flags.Get("fairness"));
    if (notion == "demographic_parity" || notion == "dp") {
      req->set_fairness(v1::FAIRNESS_NOTION_DEMOGRAPHIC_PARITY);
    } else if (notion == "equalized_odds" || notion == "eo") {
      req->set_fairness(v1::FAIRNESS_NOTION_EQUALIZED_ODDS);
    } else if (notion == "accuracy_parity" || notion == "ap") {
      req->set_fairness(v1::FAIRNESS_NOTION_ACCURACY_PARITY);
    } else {
      return UsageError(absl::StrCat(
          "--fairness must be demographic_parity, equalized_odds or accuracy_parity (got '",
          flags.Get("fairness"), "')"));
    }
  }
  for (const std::string& width : flags.GetList("hidden-units")) {
    int units = 0;
    if (!absl::SimpleAtoi(width, &units) || units < 1) {
      return UsageError(absl::StrCat(
          "--hidden-units takes 1 or 2 positive widths, e.g. 32 or 64,16 (got '", width, "')"));
    }
    req->add_hidden_units(units);
  }
  return absl::OkStatus();
}

// --hypotheses lists and --hypotheses-file (names separated by newlines or commas; blank lines
// and lines starting with '#' skipped), in that order.
absl::StatusOr<std::vector<std::string>> HypothesisColumns(const ParsedFlags& flags) {
  std::vector<std::string> names = flags.GetList("hypotheses");
  if (flags.Has("hypotheses-file")) {
    ASSIGN_OR_RETURN(const std::string content, ReadFileToString(flags.Get("hypotheses-file")));
    for (absl::string_view line : absl::StrSplit(content, '\n')) {
      line = absl::StripAsciiWhitespace(line);
      if (line.empty() || absl::StartsWith(line, "#")) continue;
      for (absl::string_view name : absl::StrSplit(line, ',')) {
        name = absl::StripAsciiWhitespace(name);
        if (!name.empty()) names.emplace_back(name);
      }
    }
  }
  return names;
}

}  // namespace

absl::StatusOr<v1::FitFairModelRequest> ReadModelFitRequest(const ParsedFlags& flags,
                                                            bool with_epsilon) {
  v1::FitFairModelRequest req;
  ASSIGN_OR_RETURN(const v1::FairModelAlgorithm algorithm, Algorithm(flags));
  req.set_algorithm(algorithm);
  RETURN_IF_ERROR(ReadLearnerFlags(flags, &req, with_epsilon));
  ASSIGN_OR_RETURN(const std::vector<std::string> hypotheses, HypothesisColumns(flags));
  const bool em = algorithm == v1::FAIR_MODEL_ALGORITHM_EXPONENTIAL_MECHANISM;
  if (em) {
    if (hypotheses.empty()) {
      return UsageError(
          "exponential_mechanism chooses among your hypothesis columns: pass --hypotheses "
          "c1,c2,... or --hypotheses-file FILE");
    }
    for (const std::string& h : hypotheses) req.add_hypothesis_columns(h);
    ASSIGN_OR_RETURN(const double em_delta, OptionalNonNegative(flags, "em-delta"));
    req.set_em_delta(em_delta);
  } else {
    if (!hypotheses.empty() || flags.Has("em-delta")) {
      return UsageError(
          "--hypotheses, --hypotheses-file and --em-delta are for "
          "--algorithm exponential_mechanism only");
    }
    if (req.feature_columns().empty()) {
      return UsageError(absl::StrCat("--algorithm ", flags.Get("algorithm"),
                                     " learns linear classifiers: pass --features a,b,..."));
    }
  }
  ASSIGN_OR_RETURN(const int64_t rounds, flags.GetInt("rounds", 0));
  if (rounds < 0 || rounds > 100000) {
    return UsageError(absl::StrCat("--rounds must be in 1..100000 (got ", rounds, ")"));
  }
  req.set_rounds(static_cast<int32_t>(rounds));
  ASSIGN_OR_RETURN(const double bound, OptionalNonNegative(flags, "lambda-bound"));
  req.set_lambda_bound(bound);
  ASSIGN_OR_RETURN(const double eta, OptionalNonNegative(flags, "learning-rate"));
  req.set_learning_rate(eta);
  ASSIGN_OR_RETURN(const double share, OptionalNonNegative(flags, "masses-share"));
  if (share >= 1) {
    return UsageError(
        absl::StrCat("--masses-share must be in (0, 1) (got ", flags.Get("masses-share"), ")"));
  }
  req.set_masses_share(share);
  // The stochastic learners' parameters (0: the server's defaults, the papers').
  const bool fermi = req.algorithm() == v1::FAIR_MODEL_ALGORITHM_DP_FERMI;
  const bool pfld = req.algorithm() == v1::FAIR_MODEL_ALGORITHM_PF_LD;
  const bool eg = req.algorithm() == v1::FAIR_MODEL_ALGORITHM_EXPONENTIATED_GRADIENT;
  for (const char* name : {"epochs", "batch-size", "lr-theta", "clip-theta", "marginals-share",
                           "model", "hidden-units"}) {
    if (!fermi && !pfld && flags.Has(name)) {
      return UsageError(absl::StrCat("--", name, " is for --algorithm dp_fermi or pf_ld only"));
    }
  }
  if (!fermi && !pfld && !eg && flags.Has("fairness")) {
    return UsageError("--fairness is for --algorithm dp_fermi, pf_ld or exponentiated_gradient");
  }
  for (const char* name : {"sums-share", "mixture", "validation-table", "selection-target",
                           "selection-penalty", "selection-share", "selection-candidates"}) {
    if (!eg && flags.Has(name)) {
      return UsageError(absl::StrCat("--", name, " is for --algorithm exponentiated_gradient only"));
    }
  }
  ASSIGN_OR_RETURN(const double sums_share, OptionalNonNegative(flags, "sums-share"));
  if (sums_share >= 1) {
    return UsageError(
        absl::StrCat("--sums-share must be in (0, 1) (got ", flags.Get("sums-share"), ")"));
  }
  req.set_sums_share(sums_share);
  if (flags.Has("mixture")) {
    const std::string mixture = absl::AsciiStrToLower(flags.Get("mixture"));
    if (mixture == "candidates") {
      req.set_mixture(v1::FINAL_MIXTURE_CANDIDATES);
    } else if (mixture == "linear_program") {
      req.set_mixture(v1::FINAL_MIXTURE_LINEAR_PROGRAM);
    } else if (mixture == "average") {
      req.set_mixture(v1::FINAL_MIXTURE_AVERAGE);
    } else if (mixture == "selected") {
      req.set_mixture(v1::FINAL_MIXTURE_SELECTED);
    } else {
      return UsageError(absl::StrCat(
          "--mixture must be candidates, linear_program, average or selected (got '",
          flags.Get("mixture"), "')"));
    }
  }
  // The managed selection (issue 22 §3): the server checks the values and their combination.
  req.set_validation_table_handle(flags.Get("validation-table"));
  ASSIGN_OR_RETURN(const double target, OptionalNonNegative(flags, "selection-target"));
  req.set_selection_target(target);
  ASSIGN_OR_RETURN(const double penalty, OptionalNonNegative(flags, "selection-penalty"));
  req.set_selection_penalty(penalty);
  ASSIGN_OR_RETURN(const double selection_share, OptionalNonNegative(flags, "selection-share"));
  req.set_selection_share(selection_share);
  ASSIGN_OR_RETURN(const double candidates, OptionalNonNegative(flags, "selection-candidates"));
  if (candidates != std::floor(candidates) || candidates > 100) {
    return UsageError(absl::StrCat("--selection-candidates must be a whole number in 2..100 (got ",
                                   flags.Get("selection-candidates"), ")"));
  }
  req.set_selection_candidates(static_cast<int>(candidates));
  for (const char* name : {"lr-w", "w-radius", "clip-w", "fairness-lambda"}) {
    if (!fermi && flags.Has(name)) {
      return UsageError(absl::StrCat("--", name, " is for --algorithm dp_fermi only"));
    }
  }
  if (!pfld && flags.Has("dual-lr")) {
    return UsageError("--dual-lr is for --algorithm pf_ld only");
  }
  RETURN_IF_ERROR(ReadStochasticModelFlags(flags, &req));
  ASSIGN_OR_RETURN(const double dual_lr, OptionalNonNegative(flags, "dual-lr"));
  req.set_dual_lr(dual_lr);
  ASSIGN_OR_RETURN(const int64_t epochs, flags.GetInt("epochs", 0));
  ASSIGN_OR_RETURN(const int64_t batch, flags.GetInt("batch-size", 0));
  if (epochs < 0 || epochs > 10000 || batch < 0 || batch > 1'000'000'000) {
    return UsageError("--epochs must be in 1..10000 and --batch-size >= 1");
  }
  req.set_epochs(static_cast<int32_t>(epochs));
  req.set_batch_size(static_cast<int32_t>(batch));
  ASSIGN_OR_RETURN(const double lr_theta, OptionalNonNegative(flags, "lr-theta"));
  req.set_lr_theta(lr_theta);
  ASSIGN_OR_RETURN(const double lr_w, OptionalNonNegative(flags, "lr-w"));
  req.set_lr_w(lr_w);
  ASSIGN_OR_RETURN(const double radius, OptionalNonNegative(flags, "w-radius"));
  req.set_w_radius(radius);
  ASSIGN_OR_RETURN(const double clip_theta, OptionalNonNegative(flags, "clip-theta"));
  req.set_clip_theta(clip_theta);
  ASSIGN_OR_RETURN(const double clip_w, OptionalNonNegative(flags, "clip-w"));
  req.set_clip_w(clip_w);
  ASSIGN_OR_RETURN(const double fairness, OptionalNonNegative(flags, "fairness-lambda"));
  req.set_fairness_lambda(fairness);
  ASSIGN_OR_RETURN(const double marginals, OptionalNonNegative(flags, "marginals-share"));
  req.set_marginals_share(marginals);
  return req;
}

namespace {

absl::Status ModelFit(Context& ctx) {
  const ParsedFlags& flags = ctx.flags();
  ASSIGN_OR_RETURN(const v1::FitFairModelRequest req, ReadModelFitRequest(flags, true));
  WaitOptions wait;
  if (flags.GetBool("wait")) {
    ASSIGN_OR_RETURN(wait, ReadWaitOptions(flags));
  } else if (flags.Has("timeout") || flags.Has("interval")) {
    return UsageError("--timeout and --interval go with --wait");
  }

  if (flags.GetBool("dry-run")) {
    if (flags.GetBool("wait")) return UsageError("--dry-run submits no job to --wait for");
    v1::PreviewReleaseRequest preview;
    *preview.mutable_fit_fair_model() = req;
    return RunPreview(ctx, preview);
  }

  ASSIGN_OR_RETURN(Client * client, ctx.client());
  CallInfo info;
  ASSIGN_OR_RETURN(const v1::FitFairModelResponse resp, client->FitFairModel(req, &info));
  std::string text = absl::StrCat("job: ", resp.job().id(), " (", StateName(resp.job().state()),
                                  ", ", AlgorithmName(resp.job().algorithm()), ")\n",
                                  FormatCharge(resp.charge()), ReplayHint(req.idempotency_key()));
  for (const std::string& note : resp.notes()) absl::StrAppend(&text, "note: ", note, "\n");
  if (!flags.GetBool("wait")) {
    absl::StrAppend(&text, "follow it with: fairvault job wait ", resp.job().id(), "\n");
  }
  PrintSpending(ctx, resp, resp.charge(), info, text);
  if (!flags.GetBool("wait")) return absl::OkStatus();
  std::cout.flush();
  return WaitForJob(ctx, client, resp.job().id(), /*auditor=*/false, wait);
}

std::vector<FlagSpec> LearnerFlags() {
  return {
      {"table", "HANDLE", "table handle from `table upload`", true},
      {"features", "COL,...", "numeric feature columns of the table, in model order", false, true},
      {"label", "COL", "numeric 0/1 label column (softmax and mlp: classes 0..l-1)", true},
      AttributesFlag(),
      {"epsilon", "EPS", "privacy cost of this release (> 0)", true},
      {"clip-l1", "L", "public L1 bound each row's features are scaled to (default 0: none)"},
      {"no-intercept", "", "do not append the constant-1 feature"},
      {"mass-floor", "F", "public floor on each noisy count behind the masses (default 1)"},
      DropUnmatchedFlag(),
      IdempotencyFlag()};
}

}  // namespace

std::vector<Command> ModelCommands() {
  std::vector<Command> commands = PredictCommands();
  std::vector<FlagSpec> best_response = LearnerFlags();
  for (FlagSpec& f : best_response) {
    if (f.name != "epsilon") continue;
    f.required = false;  // not with --sums-key; RequiredEpsilon asks for it otherwise
    f.help = "privacy cost of this release (> 0; not with --sums-key)";
  }
  for (FlagSpec& f : std::vector<FlagSpec>{
           {"masses-key", "KEY",
            "idempotency key of your `counts --columns LABEL` release over the same table and "
            "attributes (the noisy group-label masses, reused); or --sums-key"},
           {"sums-key", "KEY",
            "idempotency key of your `cell-sums` release on the same table, columns and "
            "preprocessing: the response is then post-processing of it, charged nothing "
            "(no --epsilon, no --masses-key)"},
           {"lambda", "L1,L2,...",
            "the auditor's dual weights, 4 per non-reference group (finite, >= 0)", true, true},
           {"lambda-bound", "B", "bound B on the L1 norm of lambda (> 0)", true},
           {"gamma", "G", "equalized-odds slack (>= 0; recorded in the artifact)", true},
           {"oracle", "least_squares|ftpl",
            "least_squares: noise on the group-dependent part (Jagielski et al.); ftpl: noise "
            "on every row's cost (Cummings et al.)",
            true},
           {"out", "FILE", "also write the artifact as JSON (input of predict --artifact-file)"},
           DryRunFlag()}) {
    best_response.push_back(std::move(f));
  }
  std::vector<FlagSpec> fit = ModelFitFlags();
  for (FlagSpec& f : std::vector<FlagSpec>{
           {"wait", "", "then wait for the job like `job wait` (exit status as there)"},
           DryRunFlag()}) {
    fit.push_back(std::move(f));
  }
  for (FlagSpec& f : WaitFlags()) fit.push_back(std::move(f));
  commands.push_back(
      {"best-response",
       "one private best response to the auditor's lambda: a linear-classifier artifact (company)",
       "One charged release (ALGORITHMS.md section 3). Prints the artifact id, the rows used,\n"
       "the sensitivity the noise was calibrated to, and the charge.",
       best_response, true, BestResponse});
  commands.push_back(
      {"model fit", "submit a managed fair learner; the model arrives as an artifact (company)",
       "Charged once at submission, whatever the outcome. Prints the job id and the charge;\n"
       "follow the job with `job wait`, or pass --wait. The CLI cannot see a table's columns,\n"
       "so exponential_mechanism's candidates are named explicitly (--hypotheses or\n"
       "--hypotheses-file).",
       fit, true, ModelFit});
  std::vector<FlagSpec> cell_sums = LearnerFlags();
  cell_sums.erase(std::remove_if(cell_sums.begin(), cell_sums.end(),
                                 [](const FlagSpec& f) { return f.name == "mass-floor"; }),
                  cell_sums.end());
  for (FlagSpec& f : std::vector<FlagSpec>{
           {"counts-share", "S", "share of epsilon for the counts, in (0, 1) (default 0.1)"},
           {"out", "FILE", "also write the release as JSON (for a game run locally)"},
           DryRunFlag()}) {
    cell_sums.push_back(std::move(f));
  }
  commands.push_back(
      {"cell-sums",
       "release a least-squares game's per-cell feature sums once; best responses are then free "
       "(company)",
       "One charged release (issue 22): per (group, label) cell, the noisy count and the noisy\n"
       "sums of the preprocessed features. Every later `best-response --sums-key KEY` on the\n"
       "same table, columns and preprocessing is post-processing of it and charged nothing;\n"
       "with --out, the company can play the whole game on its own machine.",
       cell_sums, true, CellSums});
  for (Command& c : JobCommands()) commands.push_back(std::move(c));
  return commands;
}

std::vector<FlagSpec> ModelFitFlags() {
  std::vector<FlagSpec> fit = LearnerFlags();
  for (FlagSpec& f : std::vector<FlagSpec>{
           {"algorithm", "NAME",
            "exponentiated_gradient (the reductions learner; needs --features), "
            "dp_oracle_learner or private_fair_nr (the game; needs --features), "
            "exponential_mechanism (needs --hypotheses), or the stochastic learners dp_fermi "
            "and pf_ld (need --features and a grant with delta > 0)",
            true},
           {"gamma", "G",
            "equalized-odds slack (>= 0; default 0); exponentiated_gradient: the constraints' "
            "bound (default 0.01)"},
           {"rounds", "T",
            "rounds of the game, 1..100000 (default: server's 100)"},
           {"lambda-bound", "B",
            "bound on the auditor's L1 norm of lambda (default: server's 1; "
            "exponentiated_gradient 100)"},
           {"learning-rate", "ETA",
            "the auditor's step (default: server's 1; exponentiated_gradient 2/B)"},
           {"masses-share", "S",
            "share of epsilon spent on the group-label masses, in (0,1) (default: server's 0.1; "
            "exponentiated_gradient 0.05)"},
           {"sums-share", "S",
            "exponentiated_gradient: share of epsilon spent on the per-cell feature sums, in "
            "(0,1) (default 0.45)"},
           {"mixture", "candidates|linear_program|average|selected",
            "exponentiated_gradient: the final mixture (default candidates: the linear program "
            "over 8 audited best responses along the average lambda; selected with "
            "--validation-table)"},
           {"validation-table", "HANDLE",
            "exponentiated_gradient: your validation rows (same dataset and columns); the job "
            "then ends with the managed selection: one private choice among candidates along "
            "the average lambda, by error + penalty x max(0, gap - target)"},
           {"selection-target", "T", "the selection's target gap in [0, 1] (default 0)"},
           {"selection-penalty", "P", "the selection's penalty per unit of gap above the target "
                                      "(default 2)"},
           {"selection-share", "S", "share of epsilon spent on the selection (default 0.3)"},
           {"selection-candidates", "J", "candidates along the average lambda, 2..100 "
                                         "(default 8)"},
           {"hypotheses", "C1,C2,...",
            "exponential_mechanism: your candidate classifiers' 0/1 columns in the table", false,
            true},
           {"hypotheses-file", "FILE",
            "exponential_mechanism: candidate column names, one per line or comma-separated "
            "('#' comments)"},
           {"em-delta", "D",
            "exponential_mechanism: delta of the released shift (default exp(-sqrt n))"},
           {"model", "logistic|softmax|mlp",
            "dp_fermi, pf_ld: the model (default logistic; softmax and mlp take labels "
            "0..l-1)"},
           {"fairness", "demographic_parity|equalized_odds|accuracy_parity",
            "dp_fermi, pf_ld, exponentiated_gradient: the notion (default demographic_parity; "
            "exponentiated_gradient: equalized_odds, and no accuracy_parity, which is pf_ld's "
            "only)"},
           {"hidden-units", "N[,M]", "mlp: one or two hidden layer widths, 1..512 (default 32)",
            false, true},
           {"epochs", "N", "dp_fermi, pf_ld: epochs (default: server's 300)"},
           {"batch-size", "B",
            "dp_fermi, pf_ld: rows per step, drawn without replacement (default: every row)"},
           {"lr-theta", "ETA", "dp_fermi, pf_ld: the model's step on the batch-mean gradient (default 1)"},
           {"dual-lr", "S", "pf_ld: the multipliers' step (default 0.1)"},
           {"lr-w", "ETA", "dp_fermi: W's step (default 0.1)"},
           {"w-radius", "D", "dp_fermi: radius of W's ball (default 5)"},
           {"clip-theta", "C",
            "dp_fermi, pf_ld: clip of the group-dependent model gradient (default 1; pf_ld's "
            "C_p 5)"},
           {"clip-w", "C", "dp_fermi: clip of the group-dependent W gradient (default 1)"},
           {"fairness-lambda", "L", "dp_fermi: weight of the ERMI term (>= 0; default 0)"},
           {"marginals-share", "S",
            "dp_fermi, pf_ld: share of epsilon spent on the group marginals (default 0.1)"}}) {
    fit.push_back(std::move(f));
  }
  return fit;
}

}  // namespace fairvault::client::cli
