// Output formatting of the vault's responses for the CLI: charges, budgets, ledger rows,
// ledger verification and artifacts (declared in cli_common.h).
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/cli/cli_common.h"

namespace fairvault::client::cli {

std::string FormatCost(const v1::Cost& cost) {
  auto mechanism = [](const v1::Cost& c) {
    return absl::StrCat(c.mechanism().empty() ? "?" : c.mechanism(), ", noise scale ",
                        Num(c.noise_scale()), ", sensitivity ", Num(c.sensitivity()));
  };
  std::string out = absl::StrCat("epsilon ", Num(cost.epsilon()));
  if (cost.delta() > 0) absl::StrAppend(&out, ", delta ", Num(cost.delta()));
  if (cost.parts().empty()) {
    absl::StrAppend(&out, " (", mechanism(cost), ")\n");
  } else {
    // A composed release: the top-level noise fields describe only the first part.
    absl::StrAppend(&out, " in ", cost.parts_size(), " parts\n");
    for (const v1::Cost& part : cost.parts()) {
      absl::StrAppend(&out, "  ", part.name().empty() ? "part" : part.name(), ": epsilon ",
                      Num(part.epsilon()), " (", mechanism(part), ")\n");
    }
  }
  return out;
}

std::string FormatCharge(const v1::Charge& charge) {
  const v1::Budget& budget = charge.budget_after();
  std::string out = absl::StrCat("charged: ", FormatCost(charge.cost()));
  absl::StrAppend(&out, "budget:  spent ", Num(budget.epsilon_spent()), " of ",
                  Num(budget.epsilon_granted()), " on dataset '", budget.dataset(), "', remaining ",
                  Num(budget.epsilon_remaining()), " (releases: ", budget.releases(),
                  budget.delta() > 0 ? absl::StrCat(", delta ", Num(budget.delta())) : "", ")\n");
  absl::StrAppend(&out, "ledger seq: ", charge.ledger_seq(), "\n");
  return out;
}

std::string FormatBudgets(const google::protobuf::RepeatedPtrField<v1::Budget>& budgets) {
  if (budgets.empty()) return "(no budgets)\n";
  TextTable table({"DATASET", "COMPANY", "GRANTED", "DELTA", "SPENT", "REMAINING", "RELEASES"});
  for (const v1::Budget& b : budgets) {
    table.AddRow({b.dataset(), b.company().empty() ? "(cap)" : b.company(),
                  Num(b.epsilon_granted()), Num(b.delta()), Num(b.epsilon_spent()),
                  Num(b.epsilon_remaining()), absl::StrCat(b.releases())});
  }
  return table.Render();
}

std::string FormatLedger(const google::protobuf::RepeatedPtrField<v1::LedgerEntry>& entries) {
  if (entries.empty()) return "(no ledger rows)\n";
  TextTable table({"SEQ", "TIME", "KIND", "ACCOUNT", "DATASET", "REQUEST", "IDEMPOTENCY_KEY",
                   "EPSILON", "DELTA", "MECHANISM", "HASH"});
  for (const v1::LedgerEntry& e : entries) {
    table.AddRow({absl::StrCat(e.seq()), FormatUnixMicros(e.time_unix_micros()), e.kind(),
                  e.account(), e.dataset(), e.request_kind(), e.idempotency_key(), Num(e.epsilon()),
                  Num(e.delta()), e.mechanism(), e.hash().substr(0, 16)});
  }
  return table.Render();
}

std::string FormatVerify(const v1::VerifyLedgerResponse& r) {
  std::string out =
      absl::StrCat("ledger ok: ", r.ok() ? "yes" : "NO", "\nrows checked: ", r.rows_checked(),
                   "\nhead hash: ", r.head_hash(), "\n");
  if (!r.ok()) {
    absl::StrAppend(&out, "first bad seq: ", r.first_bad_seq(), "\nproblem: ", r.message(), "\n");
  } else if (!r.message().empty()) {
    absl::StrAppend(&out, "note: ", r.message(), "\n");
  }
  return out;
}

namespace {

std::string SolverName(v1::SpSolverKind solver) {
  switch (solver) {
    case v1::SP_SOLVER_LINEAR_PROGRAM:
      return "lp";
    case v1::SP_SOLVER_QUANTILE:
      return "quantile";
    default:
      return "auto";
  }
}

std::string FormatStatisticalParity(const v1::StatisticalParityPostProcessor& sp) {
  const double width = sp.bins() > 0 ? (sp.hi() - sp.lo()) / sp.bins() : 0;
  std::string out = absl::StrCat(
      "statistical-parity post-processor over [", absl::StrJoin(sp.attributes(), ", "),
      "]: n=", sp.n(), " epsilon=", Num(sp.epsilon()), " alpha=", Num(sp.alpha()),
      " solver=", SolverName(sp.solver()), "\nscore grid: [", Num(sp.lo()), ", ", Num(sp.hi()),
      "] in ", sp.bins(), " bins of width ", Num(width), "; scores clipped: ", sp.scores_clipped(),
      "\nobjective (noisy squared-error cost of the repair): ", Num(sp.objective()), "\n");
  // Means of a pmf over the bin centres: the group's scores before and after the repair.
  auto mean = [&](const google::protobuf::RepeatedField<double>& pmf) {
    double m = 0;
    for (int j = 0; j < pmf.size(); ++j) m += pmf[j] * (sp.lo() + (j + 0.5) * width);
    return m;
  };
  TextTable table({"GROUP", "WEIGHT", "NOISY_N", "MEAN_BEFORE", "MEAN_AFTER"});
  for (const v1::StatisticalParityGroup& g : sp.groups()) {
    int64_t noisy_n = 0;
    for (int64_t c : g.noisy_counts()) noisy_n += c;
    table.AddRow({g.group(), absl::StrFormat("%.4f", g.weight()), absl::StrCat(noisy_n),
                  Num(mean(g.pmf())), Num(mean(g.target()))});
  }
  out += table.Render();
  for (const std::string& w : sp.warnings()) absl::StrAppend(&out, "warning: ", w, "\n");
  absl::StrAppend(&out, "decision floor: ", Num(sp.decision_floor()),
                  "; decision log-ratio bound (what one Decide reveals): ",
                  Num(sp.decision_log_ratio_bound()), "\n");
  return out;
}

std::string FormatEqualizedOddsScores(const v1::EqualizedOddsScoresPostProcessor& eo) {
  std::string out = absl::StrCat(
      "equalized-odds post-processor on scores over [", absl::StrJoin(eo.attributes(), ", "),
      "]: m=", eo.m(), " epsilon=", Num(eo.epsilon()), " gamma=", Num(eo.gamma()), " reference=",
      eo.reference_group() < 0 ? std::string("all pairs")
                               : absl::StrCat("group ", eo.reference_group()),
      eo.monotone() ? " (randomized thresholds)" : " (not monotone)", "\nscore grid: [",
      Num(eo.lo()), ", ", Num(eo.hi()), "] in ", eo.bins(),
      " bins; scores clipped: ", eo.scores_clipped(),
      "\nnoisy error of the derived predictor: ", Num(eo.noisy_error()), "\n");
  auto f = [](double v) { return absl::StrFormat("%.4f", v); };
  TextTable table({"GROUP", "NOISY_N[Y0]", "NOISY_N[Y1]", "DERIVED_FPR", "DERIVED_TPR",
                   "P(1|BIN) lowest..highest"});
  for (const v1::EqualizedOddsScoresGroup& g : eo.groups()) {
    int64_t n0 = 0, n1 = 0;
    for (int64_t c : g.noisy_counts_label0()) n0 += c;
    for (int64_t c : g.noisy_counts_label1()) n1 += c;
    std::vector<std::string> p;
    for (double v : g.p_positive()) p.push_back(absl::StrFormat("%.2f", v));
    table.AddRow({g.group(), absl::StrCat(n0), absl::StrCat(n1), f(g.derived_fpr()),
                  f(g.derived_tpr()), absl::StrJoin(p, " ")});
  }
  out += table.Render();
  for (const std::string& w : eo.warnings()) absl::StrAppend(&out, "warning: ", w, "\n");
  absl::StrAppend(&out, "decision floor: ", Num(eo.decision_floor()),
                  "; decision log-ratio bound (what one Decide reveals): ",
                  Num(eo.decision_log_ratio_bound()), "\n");
  return out;
}

std::string FairnessNotionName(v1::FairnessNotion notion) {
  switch (notion) {
    case v1::FAIRNESS_NOTION_EQUALIZED_ODDS:
      return "equalized odds";
    case v1::FAIRNESS_NOTION_ACCURACY_PARITY:
      return "accuracy parity";
    case v1::FAIRNESS_NOTION_UNSPECIFIED:  // the proto's default means demographic parity
    case v1::FAIRNESS_NOTION_DEMOGRAPHIC_PARITY:
      return "demographic parity";
    default:
      return absl::StrCat("unknown (", static_cast<int>(notion), ")");
  }
}

// A network body: its shapes layer by layer (the weights themselves only with --json).
std::string FormatNetwork(const v1::NeuralModel& network) {
  const int layers = network.layers_size();
  const int logits = layers > 0 ? network.layers(layers - 1).outputs() : 0;
  std::string out =
      absl::StrCat("network: ", layers, " dense layer(s), ReLU after every layer but the last\n");
  if (logits == 1) {
    absl::StrAppend(&out, "output: 1 logit z, P(1) = sigmoid(z); decision 1 iff z > 0\n");
  } else {
    absl::StrAppend(&out, "output: ", logits, " logits, softmax over classes [",
                    absl::StrJoin(network.classes(), ", "),
                    "]; decision = the class of the largest logit (first on ties)\n");
  }
  TextTable table({"LAYER", "INPUTS", "OUTPUTS", "WEIGHTS", "BIAS", "MAX|W|", "THEN"});
  for (int l = 0; l < layers; ++l) {
    const v1::DenseLayer& layer = network.layers(l);
    double max_abs = 0;
    for (double w : layer.weights()) max_abs = std::max(max_abs, std::abs(w));
    table.AddRow({absl::StrCat(l), absl::StrCat(layer.inputs()), absl::StrCat(layer.outputs()),
                  absl::StrCat(layer.weights_size()),
                  layer.bias().empty() ? "none" : absl::StrCat(layer.bias_size()), Num(max_abs),
                  l + 1 < layers ? "relu" : "logits"});
  }
  out += table.Render();
  return out;
}

// The released group marginals p̂ of the stochastic learners: one line, or for equalized odds
// (stored label-major) one line per label when the count divides evenly.
std::string FormatReleasedMarginals(const v1::FairModel& model) {
  const auto& p = model.released_marginals();
  std::vector<int> labels(model.network().classes().begin(), model.network().classes().end());
  if (labels.empty()) labels = {0, 1};
  if (model.fairness() == v1::FAIRNESS_NOTION_EQUALIZED_ODDS &&
      p.size() % static_cast<int>(labels.size()) == 0) {
    const int groups = p.size() / static_cast<int>(labels.size());
    std::string out =
        absl::StrCat("released group marginals, per label (", groups, " group(s) each):\n");
    for (size_t y = 0; y < labels.size(); ++y) {
      std::vector<std::string> values;
      for (int g = 0; g < groups; ++g) values.push_back(Num(p[static_cast<int>(y) * groups + g]));
      absl::StrAppend(&out, "  label ", labels[y], ": ", absl::StrJoin(values, ", "), "\n");
    }
    return out;
  }
  std::vector<std::string> values;
  for (double v : p) values.push_back(Num(v));
  return absl::StrCat("released group marginals: ", absl::StrJoin(values, ", "), "\n");
}

// A fair model: what it was trained with, its preprocessing and its weights, network shapes
// or the chosen hypothesis column.
std::string FormatFairModel(const v1::FairModel& model) {
  std::string out = absl::StrCat(
      "fair model (", model.algorithm(), ") over [", absl::StrJoin(model.attributes(), ", "),
      "]: label=", model.label_column(), " epsilon=", Num(model.epsilon()),
      " delta=", Num(model.delta()), " gamma=", Num(model.gamma()), " rounds=", model.rounds(),
      "\nrows used: ", model.rows_used(), "  dropped: ", model.rows_dropped(), "\n");
  if (!model.hypothesis_column().empty()) {
    absl::StrAppend(&out, "decision: hypothesis column '", model.hypothesis_column(), "' (index ",
                    model.hypothesis_index(), "); released M ", Num(model.released_min_positives()),
                    ", utility sensitivity ", Num(model.utility_sensitivity()), "\n");
  } else {
    const v1::FeaturePreprocessing& f = model.features();
    absl::StrAppend(&out, "features: ", absl::StrJoin(f.feature_columns(), ", "),
                    f.intercept() ? " + intercept" : " (no intercept)",
                    "  clip_l1: ", f.clip_l1() > 0 ? Num(f.clip_l1()) : "none", "\n");
  }
  if (model.has_network()) {
    out += FormatNetwork(model.network());
  } else if (model.hypothesis_column().empty()) {
    const v1::FeaturePreprocessing& f = model.features();
    absl::StrAppend(&out, model.components_size(),
                    " linear classifier(s) (uniform mixture; 1 iff w.x > 0):\n");
    std::vector<std::string> header = {"#"};
    for (const std::string& c : f.feature_columns()) header.push_back(c);
    if (f.intercept()) header.push_back("(intercept)");
    TextTable table(header);
    for (int c = 0; c < model.components_size(); ++c) {
      // Long mixtures: the first 20 components; --json prints all.
      if (c == 20) {
        table.AddRow({absl::StrCat("... ", model.components_size() - 20, " more (--json)")});
        break;
      }
      std::vector<std::string> row = {absl::StrCat(c)};
      for (double w : model.components(c).weights()) row.push_back(Num(w));
      table.AddRow(std::move(row));
    }
    out += table.Render();
  }
  // Linear models from before the notion was recorded leave it unset: shown only for the
  // stochastic learners, which always record it.
  if (model.has_network() || !model.released_marginals().empty() ||
      model.fairness() != v1::FAIRNESS_NOTION_UNSPECIFIED) {
    absl::StrAppend(&out, "fairness: ", FairnessNotionName(model.fairness()), "\n");
  }
  if (!model.released_marginals().empty()) out += FormatReleasedMarginals(model);
  if (!model.lambda_average().empty()) {
    absl::StrAppend(&out, "average lambda: ", absl::StrJoin(model.lambda_average(), ", "), "\n");
  }
  if (!model.noisy_violations().empty()) {
    absl::StrAppend(&out, "noisy violations (last round): ",
                    absl::StrJoin(model.noisy_violations(), ", "), "\n");
  }
  for (const std::string& n : model.notes()) absl::StrAppend(&out, "note: ", n, "\n");
  return out;
}

}  // namespace

std::string FormatArtifact(const v1::Artifact& artifact) {
  std::string out = absl::StrCat("artifact: ", artifact.id(), "\ndataset: ", artifact.dataset(),
                                 "  company: ", artifact.company(),
                                 "  created: ", FormatUnixSeconds(artifact.created_unix()),
                                 "  ledger seq: ", artifact.ledger_seq(), "\n");
  if (artifact.has_statistical_parity()) {
    return out + FormatStatisticalParity(artifact.statistical_parity());
  }
  if (artifact.has_equalized_odds_scores()) {
    return out + FormatEqualizedOddsScores(artifact.equalized_odds_scores());
  }
  if (artifact.has_fair_model()) return out + FormatFairModel(artifact.fair_model());
  if (!artifact.has_equalized_odds()) return out + "(artifact has no known body)\n";
  const v1::EqualizedOddsPostProcessor& eo = artifact.equalized_odds();
  // -1: every pair is constrained, or (fewer than two resolvable groups) none is.
  std::string reference = eo.excluded_groups_size() + 1 >= eo.groups_size() ? "none" : "all pairs";
  if (eo.reference_group() >= 0 && eo.reference_group() < eo.groups_size()) {
    reference = eo.groups(eo.reference_group()).group();
  }
  absl::StrAppend(&out, "equalized-odds post-processor over [",
                  absl::StrJoin(eo.attributes(), ", "), "]: m=", eo.m(),
                  " epsilon=", Num(eo.epsilon()), " gamma=", Num(eo.gamma()),
                  " beta=", Num(eo.beta()), " reference=", reference,
                  " min_group_count=", Num(eo.min_group_count()),
                  "\nnoisy error of the derived predictor: ", Num(eo.noisy_error()), "\n");
  TextTable table({"GROUP", "P(1|PRED=0)", "P(1|PRED=1)", "NOISY_FPR", "NOISY_TPR", "DERIVED_FPR",
                   "DERIVED_TPR", "FPR_SLACK", "TPR_SLACK", "N[P0,Y0]", "N[P0,Y1]", "N[P1,Y0]",
                   "N[P1,Y1]"});
  for (const v1::EqualizedOddsGroup& g : eo.groups()) {
    auto f = [](double v) { return absl::StrFormat("%.4f", v); };
    table.AddRow({g.group(), f(g.p_flip_to_1_given_0()), f(g.p_keep_1_given_1()), f(g.noisy_fpr()),
                  f(g.noisy_tpr()), f(g.derived_fpr()), f(g.derived_tpr()), f(g.fpr_slack()),
                  f(g.tpr_slack()), absl::StrCat(g.noisy_pred0_label0()),
                  absl::StrCat(g.noisy_pred0_label1()), absl::StrCat(g.noisy_pred1_label0()),
                  absl::StrCat(g.noisy_pred1_label1())});
  }
  out += table.Render();
  if (eo.excluded_groups_size() > 0) {
    absl::StrAppend(&out, "excluded (predictions kept, not constrained): ",
                    absl::StrJoin(eo.excluded_groups(), ", "), "\n");
  }
  for (const std::string& w : eo.warnings()) absl::StrAppend(&out, "warning: ", w, "\n");
  absl::StrAppend(&out, "decision floor: ", Num(eo.decision_floor()),
                  "; decision log-ratio bound (what one Decide reveals): ",
                  Num(eo.decision_log_ratio_bound()), "\n");
  return out;
}

}  // namespace fairvault::client::cli
