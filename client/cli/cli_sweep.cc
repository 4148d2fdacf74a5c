// `fairvault sweep eo|model`: a privacy/fairness trade-off sweep run against the vault. For each
// ε (and, for DP-FERMI, each λ) one charged fit, applied locally on a held-out split the company
// holds, and measured: the error locally (the company has the labels), the fairness violation
// either locally with evaluation groups the analyst holds, or by a charged private audit. Writes
// the CSV `report sweep` draws. Idempotency keys come from --run-id, so a re-run replays.
// Over 500 lines as one file: one command, whose eo and model sweeps share the same plan, holdout,
// charged fits and measurements.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/cli/cli_common.h"
#include "client/cli/cli_models.h"
#include "client/apply/eo_apply.h"
#include "client/apply/model_apply.h"
#include "client/lib/pseudonymise.h"
#include "core/fairness/metrics.h"
#include "core/util/status_macros.h"
#include "core/util/decimal.h"

namespace fairvault::client::cli {
namespace {

enum class Method { kEo, kModel };

// One point of the sweep: what it fits, its keys, and what was measured.
struct Point {
  double epsilon = 0;
  std::optional<double> lambda;  // DP-FERMI's fairness weight, when swept
  std::string series;
  std::string fit_key, audit_key;
  // Filled as the sweep runs.
  std::string artifact_id;
  std::vector<int> decisions;  // one per held-out row
  bool measured = false;
  double error = 0, violation = 0;
  std::optional<std::pair<double, double>> violation_ci;  // from a private audit
};

// What `--run-id` may be: the keys are "<run-id>/<part>", at most 128 printable characters.
absl::Status ValidateRunId(const std::string& run_id) {
  if (run_id.empty() || run_id.size() > 64 ||
      !std::all_of(run_id.begin(), run_id.end(), [](char c) { return c > ' ' && c <= '~'; })) {
    return UsageError(absl::StrCat(
        "--run-id must be 1..64 printable ASCII characters without spaces (got '", run_id, "')"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<double>> PositiveList(const ParsedFlags& flags, absl::string_view name,
                                                 bool zero_allowed) {
  std::vector<double> values;
  for (const std::string& item : flags.GetList(name)) {
    double v = 0;
    if (!core::ParseDecimal(item, &v) || !std::isfinite(v) || v < 0 || (!zero_allowed && v == 0)) {
      return UsageError(absl::StrCat("--", name, " entries must be finite numbers ",
                                     zero_allowed ? ">= 0" : "> 0", " (got '", item, "')"));
    }
    if (std::find(values.begin(), values.end(), v) != values.end()) {
      return UsageError(absl::StrCat("--", name, " lists ", item, " twice"));
    }
    values.push_back(v);
  }
  return values;
}

// FNV-1a: a seed for the local draws from the point's key, the same on every platform, so that
// a re-run draws the same decisions (and writes the same CSV).
uint64_t Fnv1a(absl::string_view text) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return h;
}

// The measurement: evaluation groups in the held-out CSV, or a private audit per point.
struct Measure {
  std::vector<std::string> group_columns;  // local
  double audit_epsilon = 0;                // > 0: private audit
  bool equalized_odds = true;              // else demographic parity
  bool audit() const { return audit_epsilon > 0; }
};

// The held-out split as the sweep reads it.
struct Holdout {
  std::string path;
  CsvTable table;
  std::vector<int> labels;
  std::vector<std::string> groups;  // local measurement only
  std::vector<std::string> keys;    // audit only (pseudonymised when a secret is given)
};

double ViolationOf(const std::vector<core::fairness::GroupRates>& rates, bool equalized_odds) {
  return equalized_odds ? core::fairness::EqualizedOddsViolation(rates)
                        : core::fairness::DemographicParityViolation(rates);
}

// Error and violation of `decisions` on the held-out rows with the analyst's groups.
absl::Status MeasureLocally(const Holdout& holdout, const Measure& measure, Point& point) {
  std::map<std::string, int> index;
  for (const std::string& g : holdout.groups) index.emplace(g, 0);
  int k = 0;
  for (auto& [name, i] : index) i = k++;
  std::vector<int> group;
  group.reserve(holdout.groups.size());
  for (const std::string& g : holdout.groups) group.push_back(index[g]);
  ASSIGN_OR_RETURN(const std::vector<core::fairness::GroupRates> rates,
                   core::fairness::ComputeGroupRates(point.decisions, holdout.labels, group, k));
  point.violation = ViolationOf(rates, measure.equalized_odds);
  return absl::OkStatus();
}

// A reference point without privacy cost, measured on the held-out rows.
struct Baseline {
  std::string name;
  double error = 0, violation = 0;
};

// What the sweep is, for the page's provenance (the same on every row of the CSV).
struct SweepInfo {
  std::string dataset, company, run_id, measure, holdout, group_column;
};

// The CSV `report sweep` reads: series, epsilon, error, violation (and the audit's interval),
// lambda, cost_epsilon (the fit's and the audit's), artifact, then kind ("point" or "baseline":
// references at epsilon inf, cost 0) and the provenance columns.
std::string SweepCsv(const std::vector<Point>& points, const Measure& measure,
                     const std::vector<Baseline>& baselines, const SweepInfo& info) {
  std::vector<std::string> header = {"series", "epsilon", "error", "violation"};
  if (measure.audit()) {
    header.insert(header.end(), {"violation_lo", "violation_hi"});
  }
  header.insert(header.end(), {"lambda", "cost_epsilon", "artifact", "kind", "dataset", "company",
                               "run_id", "measure", "holdout", "group_column"});
  const std::vector<std::string> about = {info.dataset, info.company, info.run_id,
                                          info.measure, info.holdout, info.group_column};
  std::vector<std::vector<std::string>> rows;
  for (const Point& p : points) {
    if (!p.measured) continue;
    std::vector<std::string> row = {p.series, Num(p.epsilon), absl::StrFormat("%.6f", p.error),
                                    absl::StrFormat("%.6f", p.violation)};
    if (measure.audit()) {
      row.push_back(p.violation_ci ? absl::StrFormat("%.6f", p.violation_ci->first) : "");
      row.push_back(p.violation_ci ? absl::StrFormat("%.6f", p.violation_ci->second) : "");
    }
    row.push_back(p.lambda ? Num(*p.lambda) : "");
    row.push_back(Num(p.epsilon + measure.audit_epsilon));
    row.push_back(p.artifact_id);
    row.push_back("point");
    row.insert(row.end(), about.begin(), about.end());
    rows.push_back(std::move(row));
  }
  for (const Baseline& b : baselines) {
    std::vector<std::string> row = {b.name, "inf", absl::StrFormat("%.6f", b.error),
                                    absl::StrFormat("%.6f", b.violation)};
    if (measure.audit()) row.insert(row.end(), {"", ""});
    row.insert(row.end(), {"", "0", "", "baseline"});
    row.insert(row.end(), about.begin(), about.end());
    rows.push_back(std::move(row));
  }
  return FormatCsv(header, rows);
}

// The flags both sweeps share.
std::vector<FlagSpec> SweepFlags() {
  return {
      {"dataset", "NAME", "dataset of --table (its budget is checked before anything runs)", true},
      {"epsilons", "E1,E2,...", "the privacy budgets to sweep, one fit each (> 0)", true, true},
      {"run-id", "ID",
       "names the run: idempotency keys are <ID>/fit/... and <ID>/audit/..., so re-running with "
       "the same ID replays what was already charged (1..64 printable characters)",
       true},
      {"holdout", "FILE",
       "held-out CSV you hold: the label column and the model's inputs (eo: the prediction "
       "column; model: the feature columns)",
       true},
      {"group-column", "COL[,COL...]",
       "measure the violation locally with these evaluation groups in --holdout (groups you "
       "hold, e.g. a public benchmark's; no charge)",
       false, true},
      {"audit-epsilon", "E",
       "measure the violation by a private audit (`audit classifier`) of each point's decisions "
       "on --holdout instead: charged E per point; needs --key-column",
       false},
      {"key-column", "COLUMN|@row", "--holdout's subject keys (audit measurement)"},
      {"hmac-secret-file", "FILE", "pseudonymise --key-column as `table upload` does"},
      {"violation", "eo|dp",
       "equalized odds (max |dTPR|, |dFPR|) or demographic parity (max |dSelection|) (default "
       "eo)"},
      {"series", "NAME", "series name in the CSV (default: the method)"},
      {"out", "FILE.csv", "the sweep CSV (input of `report sweep`), rewritten after each point",
       true},
      {"yes", "", "run even when the budget left is smaller than the sweep's cost"},
      {"dry-run", "",
       "print the plan and its privacy cost, charge nothing (exit 3 when the budget left is "
       "smaller, as the run would be refused)"},
  };
}

class Sweep {
 public:
  Sweep(Context& ctx, Method method) : ctx_(ctx), flags_(ctx.flags()), method_(method) {}

  absl::Status Run() {
    RETURN_IF_ERROR(ReadCommonFlags());
    RETURN_IF_ERROR(ReadHoldout());
    RETURN_IF_ERROR(method_ == Method::kEo ? PlanEo() : PlanModel());
    RETURN_IF_ERROR(Describe());
    ASSIGN_OR_RETURN(client_, ctx_.client());
    ASSIGN_OR_RETURN(const double before, Remaining());
    RETURN_IF_ERROR(CheckCost(before));
    if (flags_.GetBool("dry-run")) return absl::OkStatus();

    for (Point& p : points_) {
      RETURN_IF_ERROR(method_ == Method::kEo ? FitAndApplyEo(p) : FitAndApplyModel(p));
      p.error = core::fairness::ErrorRate(p.decisions, holdout_.labels);
      if (!measure_.audit()) {
        RETURN_IF_ERROR(MeasureLocally(holdout_, measure_, p));
        p.measured = true;
        RETURN_IF_ERROR(WriteStringToFile(out_path_, Csv()));
      }
      std::cerr << "sweep: " << p.series << " epsilon " << Num(p.epsilon) << ": error "
                << absl::StrFormat("%.4f", p.error)
                << (measure_.audit() ? "" : absl::StrFormat(", violation %.4f", p.violation))
                << "\n";
    }
    if (measure_.audit()) RETURN_IF_ERROR(Audit());
    ASSIGN_OR_RETURN(const double after, Remaining());
    TextTable table({"SERIES", "EPSILON", "ERROR", "VIOLATION", "ARTIFACT"});
    for (const Point& p : points_) {
      table.AddRow({p.series, Num(p.epsilon), absl::StrFormat("%.4f", p.error),
                    p.violation_ci ? FormatCi(p) : absl::StrFormat("%.4f", p.violation),
                    p.artifact_id});
    }
    std::cout << table.Render() << "wrote " << points_.size() << " points to " << out_path_
              << " (render it with `fairvault report sweep --csv " << out_path_
              << " --out sweep.html`)\n"
              << "budget left on '" << dataset_ << "': " << Num(before) << " before, " << Num(after)
              << " after (this run spent " << Num(std::max(0.0, before - after)) << ")\n";
    return absl::OkStatus();
  }

 private:
  static std::string FormatCi(const Point& p) {
    return absl::StrFormat("%.4f [%.4f, %.4f]", p.violation, p.violation_ci->first,
                           p.violation_ci->second);
  }

  absl::Status ReadCommonFlags() {
    dataset_ = flags_.Get("dataset");
    run_id_ = flags_.Get("run-id");
    RETURN_IF_ERROR(ValidateRunId(run_id_));
    ASSIGN_OR_RETURN(epsilons_, PositiveList(flags_, "epsilons", false));
    if (epsilons_.empty()) return UsageError("--epsilons needs at least one value");
    out_path_ = flags_.Get("out");
    measure_.group_columns = flags_.GetList("group-column");
    if (flags_.Has("audit-epsilon")) {
      ASSIGN_OR_RETURN(measure_.audit_epsilon, flags_.GetDouble("audit-epsilon", 0));
      if (!(measure_.audit_epsilon > 0)) {
        return UsageError(
            absl::StrCat("--audit-epsilon must be > 0 (got ", flags_.Get("audit-epsilon"), ")"));
      }
    }
    if (measure_.group_columns.empty() == !measure_.audit()) {
      return UsageError(
          "measure the violation one way: --group-column COL (evaluation groups you hold in "
          "--holdout; free) or --audit-epsilon E (a private audit per point; charged)");
    }
    if (measure_.audit() && !flags_.Has("key-column")) {
      return UsageError("--audit-epsilon uploads --holdout's decisions: pass --key-column");
    }
    const std::string violation = absl::AsciiStrToLower(flags_.Get("violation", "eo"));
    if (violation != "eo" && violation != "dp") {
      return UsageError(absl::StrCat("--violation must be eo or dp (got '", violation, "')"));
    }
    measure_.equalized_odds = violation == "eo";
    return absl::OkStatus();
  }

  const std::string& LabelColumn() const { return label_column_; }

  std::string Csv() const { return SweepCsv(points_, measure_, baselines_, info_); }

  // What the sweep is, and its references measured on the held-out rows (no charge): the
  // constant classifier deciding the majority label (violation 0), and for `sweep eo` the
  // model's own predictions before post-processing.
  absl::Status Describe() {
    info_.dataset = dataset_;
    info_.run_id = run_id_;
    info_.holdout = holdout_.path;
    info_.group_column = absl::StrJoin(measure_.group_columns, "|");  // as joint groups
    const char* which = measure_.equalized_odds ? "equalized odds" : "demographic parity";
    info_.measure = measure_.audit()
                        ? absl::StrCat(which, " (a private audit per point at epsilon ",
                                       Num(measure_.audit_epsilon), ")")
                        : absl::StrCat(which, " (measured with the hold-out's groups)");
    size_t positives = 0;
    for (int y : holdout_.labels) positives += y == 1;
    const double share = static_cast<double>(positives) / holdout_.labels.size();
    baselines_.push_back({absl::StrCat("constant classifier (", share > 0.5 ? 1 : 0, ")"),
                          std::min(share, 1 - share), 0});
    if (method_ == Method::kEo && !measure_.audit()) {
      Point raw;
      for (size_t r = 0; r < holdout_.table.rows.size(); ++r) {
        ASSIGN_OR_RETURN(const int prediction,
                         ParseBinaryCell(holdout_.table, holdout_.path, r, prediction_index_));
        raw.decisions.push_back(prediction);
      }
      RETURN_IF_ERROR(MeasureLocally(holdout_, measure_, raw));
      baselines_.push_back({"model before post-processing",
                            core::fairness::ErrorRate(raw.decisions, holdout_.labels),
                            raw.violation});
    }
    return absl::OkStatus();
  }

  absl::Status ReadHoldout() {
    label_column_ = flags_.Get(method_ == Method::kEo ? "label-column" : "label");
    holdout_.path = flags_.Get("holdout");
    ASSIGN_OR_RETURN(holdout_.table, ReadCsvFile(holdout_.path));
    {
      Sha256Hasher cells;
      for (const std::vector<std::string>& row : holdout_.table.rows) {
        cells.Update(FormatCsvRecord(row));
      }
      holdout_digest_ = cells.HexDigest();
    }
    if (holdout_.table.rows.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(holdout_.path, ": no rows"));
    }
    absl::StatusOr<size_t> label = holdout_.table.ColumnIndex(label_column_);
    if (!label.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(holdout_.path, ": ", label.status().message(),
                                                     " (the label column of --holdout has the "
                                                     "table's name)"));
    }
    for (size_t r = 0; r < holdout_.table.rows.size(); ++r) {
      ASSIGN_OR_RETURN(const int y, ParseBinaryCell(holdout_.table, holdout_.path, r, *label));
      holdout_.labels.push_back(y);
    }
    if (!measure_.audit()) {
      ASSIGN_OR_RETURN(holdout_.groups, GroupLabels(holdout_.table, measure_.group_columns));
    } else {
      ASSIGN_OR_RETURN(const std::string secret, OptionalSecret(flags_));
      ASSIGN_OR_RETURN(holdout_.keys, SubjectKeys(holdout_.table, holdout_.path,
                                                  flags_.Get("key-column"), secret));
    }
    return absl::OkStatus();
  }

  // A point's keys follow its content: "<run-id>/fit/<tag>/<d>" with d the first 12 hex
  // digits of SHA-256 over the fit request (key cleared), and the audit's over that, the audit
  // parameters and --holdout's keys and labels. A re-run with the same run id and the same
  // parameters replays; a changed parameter (--gamma, a learner flag, the table, the
  // held-out rows) is a new request under a new key, charged as such.
  void AddPoint(double epsilon, std::optional<double> lambda, const std::string& series) {
    Point p;
    p.epsilon = epsilon;
    p.lambda = lambda;
    p.series = series;
    const std::string tag =
        absl::StrCat(method_ == Method::kEo ? "eo" : "model", "/e", Num(epsilon),
                     lambda ? absl::StrCat("/l", Num(*lambda)) : "");
    std::string fit;
    if (method_ == Method::kEo) {
      EoFitRequest(p).SerializeToString(&fit);
    } else {
      ModelFitRequest(p).SerializeToString(&fit);
    }
    const std::string fit_digest = Sha256Hex(fit);
    Sha256Hasher audit;
    audit.Update(fit_digest);
    audit.Update(absl::StrCat("\naudit ", Num(measure_.audit_epsilon), " ",
                              absl::StrJoin(flags_.GetList("attributes"), ","), " ",
                              Unmatched(flags_), " ", measure_.equalized_odds ? "eo" : "dp"));
    for (const std::string& k : holdout_.keys) audit.Update(absl::StrCat("\n", k));
    audit.Update(absl::StrCat("\n", absl::StrJoin(holdout_.labels, "")));
    // The hold-out's every cell: its feature values decide the uploaded decisions.
    audit.Update(holdout_digest_);
    p.fit_key = absl::StrCat(run_id_, "/fit/", tag, "/", fit_digest.substr(0, 12));
    p.audit_key = absl::StrCat(run_id_, "/audit/", tag, "/", audit.HexDigest().substr(0, 12));
    points_.push_back(std::move(p));
  }

  // The fit requests, without their idempotency keys.
  v1::FitEqualizedOddsRequest EoFitRequest(const Point& p) const {
    v1::FitEqualizedOddsRequest req;
    req.set_table_handle(flags_.Get("table"));
    req.set_prediction_column(flags_.Get("prediction-column"));
    req.set_label_column(flags_.Get("label-column"));
    for (const std::string& a : flags_.GetList("attributes")) req.add_attributes(a);
    req.set_epsilon(p.epsilon);
    req.set_gamma(eo_.gamma);
    req.set_beta(eo_.beta);
    req.set_decision_floor(eo_.floor);
    req.set_unmatched(Unmatched(flags_));
    return req;
  }

  v1::FitFairModelRequest ModelFitRequest(const Point& p) const {
    v1::FitFairModelRequest req = model_request_;
    req.clear_idempotency_key();  // ReadModelFitRequest draws one; the point's key replaces it
    req.set_epsilon(p.epsilon);
    if (p.lambda) req.set_fairness_lambda(*p.lambda);
    return req;
  }

  absl::Status PlanEo() {
    if (measure_.audit()) {
      return UsageError(
          "an equalized-odds post-processor is applied with each row's group, which the company "
          "does not hold: `sweep eo` needs evaluation groups in --holdout (--group-column). "
          "Without them use `sweep model` (its models need no attribute), or fit with "
          "`postprocess eo --decision-floor F` and let the vault decide (`decide`, charged)");
    }
    ASSIGN_OR_RETURN(eo_.gamma, flags_.GetDouble("gamma", 0));
    if (eo_.gamma < 0) return UsageError("--gamma must be >= 0");
    ASSIGN_OR_RETURN(eo_.beta, flags_.GetDouble("beta", 0));
    ASSIGN_OR_RETURN(eo_.floor, flags_.GetDouble("decision-floor", 0));
    ASSIGN_OR_RETURN(prediction_index_,
                     holdout_.table.ColumnIndex(flags_.Get("prediction-column")));
    const std::string series =
        flags_.Get("series", absl::StrCat("eo post-processor gamma=", Num(eo_.gamma)));
    for (double e : epsilons_) AddPoint(e, std::nullopt, series);
    return absl::OkStatus();
  }

  absl::Status PlanModel() {
    ASSIGN_OR_RETURN(model_request_, ReadModelFitRequest(flags_, /*with_epsilon=*/false));
    ASSIGN_OR_RETURN(const std::vector<double> lambdas, PositiveList(flags_, "lambdas", true));
    const std::string name = AlgorithmName(model_request_.algorithm());
    if (!lambdas.empty()) {
      if (model_request_.algorithm() != v1::FAIR_MODEL_ALGORITHM_DP_FERMI) {
        return UsageError("--lambdas sweeps DP-FERMI's fairness weight: --algorithm dp_fermi");
      }
      if (flags_.Has("fairness-lambda")) {
        return UsageError("give --lambdas (a sweep) or --fairness-lambda (one), not both");
      }
      for (double l : lambdas) {
        for (double e : epsilons_) {
          AddPoint(e, l, absl::StrCat(flags_.Get("series", name), " lambda=", Num(l)));
        }
      }
    } else {
      for (double e : epsilons_) AddPoint(e, std::nullopt, flags_.Get("series", name));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<double> Remaining() {
    v1::GetBudgetRequest req;
    req.set_dataset(dataset_);
    ASSIGN_OR_RETURN(const v1::GetBudgetResponse resp, client_->GetBudget(req));
    for (const v1::Budget& b : resp.budgets()) {
      if (b.dataset() == dataset_) {
        info_.company = b.company();
        return b.epsilon_remaining();
      }
    }
    return absl::NotFoundError(
        absl::StrCat("you have no grant on dataset '", dataset_, "' (see `fairvault budget`)"));
  }

  // Prints the plan and what it costs; refuses (unless --yes) when the budget left is smaller
  // than what the run has not charged yet.
  absl::Status CheckCost(double remaining) {
    // The run's releases already in the ledger (an earlier, interrupted run): replayed, free.
    std::set<std::string> charged;
    v1::ListLedgerRequest req;
    req.set_dataset(dataset_);
    req.set_limit(10000);
    while (true) {
      ASSIGN_OR_RETURN(const v1::ListLedgerResponse page, client_->ListLedger(req));
      if (page.entries().empty()) break;
      for (const v1::LedgerEntry& e : page.entries()) {
        if (e.kind() == "charge") charged.insert(e.idempotency_key());
      }
      req.set_after_seq(page.entries(page.entries_size() - 1).seq());
    }
    double total = 0, already = 0;
    TextTable plan({"SERIES", "EPSILON", "FIT", "AUDIT", "STATE"});
    for (const Point& p : points_) {
      const bool fit_done = charged.count(p.fit_key) > 0;
      const bool audit_done = charged.count(p.audit_key) > 0;
      total += p.epsilon + measure_.audit_epsilon;
      already += (fit_done ? p.epsilon : 0) + (audit_done ? measure_.audit_epsilon : 0);
      plan.AddRow({p.series, Num(p.epsilon), Num(p.epsilon),
                   measure_.audit() ? Num(measure_.audit_epsilon) : "-",
                   fit_done && (audit_done || !measure_.audit()) ? "charged (replayed)"
                   : fit_done                                    ? "fit charged"
                                                                 : "new"});
    }
    const double to_charge = std::max(0.0, total - already);
    std::cout << "sweep '" << run_id_ << "' on dataset '" << dataset_ << "': " << points_.size()
              << " points, the violation measured "
              << (measure_.audit() ? absl::StrCat("by a private audit per point (epsilon ",
                                                  Num(measure_.audit_epsilon), " each, charged)")
                                   : absl::StrCat("locally with the evaluation groups ",
                                                  absl::StrJoin(measure_.group_columns, ","),
                                                  " of ", holdout_.path, " (no charge)"))
              << "\n"
              << plan.Render() << "privacy cost: epsilon " << Num(total)
              << " in all (the sum of the releases' epsilons, an upper bound on what the "
                 "ledger composes)";
    if (already > 0) {
      std::cout << "; " << Num(already) << " of it already charged under run id '" << run_id_
                << "' and replayed free; " << Num(to_charge) << " to charge now";
    }
    std::cout << "\nbudget left on '" << dataset_ << "': epsilon " << Num(remaining) << "\n";
    if (to_charge > remaining + 1e-9 && !flags_.GetBool("yes")) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the sweep would charge epsilon ", Num(to_charge), " but only ", Num(remaining),
          " is left on '", dataset_,
          "': sweep fewer or smaller --epsilons, or pass --yes to run until the vault refuses"));
    }
    std::cout.flush();
    return absl::OkStatus();
  }

  absl::Status FitAndApplyEo(Point& p) {
    v1::FitEqualizedOddsRequest req = EoFitRequest(p);
    req.set_idempotency_key(p.fit_key);
    ASSIGN_OR_RETURN(const v1::FitEqualizedOddsResponse resp,
                     client_->FitEqualizedOddsPostProcessor(req));
    p.artifact_id = resp.artifact().id();
    ASSIGN_OR_RETURN(const EqualizedOddsApplier applier,
                     EqualizedOddsApplier::Create(resp.artifact().equalized_odds()));
    std::mt19937_64 gen(Fnv1a(p.fit_key));
    p.decisions.clear();
    for (size_t r = 0; r < holdout_.table.rows.size(); ++r) {
      ASSIGN_OR_RETURN(const int prediction,
                       ParseBinaryCell(holdout_.table, holdout_.path, r, prediction_index_));
      absl::StatusOr<int> decision = applier.Decide(prediction, holdout_.groups[r], gen);
      if (!decision.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(
            holdout_.path, ":", holdout_.table.row_lines[r], ": ", decision.status().message()));
      }
      p.decisions.push_back(*decision);
    }
    return absl::OkStatus();
  }

  absl::Status FitAndApplyModel(Point& p) {
    v1::FitFairModelRequest req = ModelFitRequest(p);
    req.set_idempotency_key(p.fit_key);
    ASSIGN_OR_RETURN(const v1::FitFairModelResponse fit, client_->FitFairModel(req));
    WaitOptions wait;
    wait.interval_seconds = 0.5;
    wait.print_result = false;  // the sweep prints its own lines
    RETURN_IF_ERROR(WaitForJob(ctx_, client_, fit.job().id(), /*auditor=*/false, wait));
    v1::GetJobRequest job_req;
    job_req.set_job_id(fit.job().id());
    ASSIGN_OR_RETURN(const v1::GetJobResponse job, client_->GetJob(job_req));
    p.artifact_id = job.job().artifact_id();
    v1::GetArtifactRequest art_req;
    art_req.set_artifact_id(p.artifact_id);
    ASSIGN_OR_RETURN(const v1::GetArtifactResponse artifact, client_->GetArtifact(art_req));
    if (!artifact.artifact().has_fair_model()) {
      return absl::InternalError(absl::StrCat("job ", fit.job().id(), " made artifact ",
                                              p.artifact_id, ", which is not a fair model"));
    }
    ASSIGN_OR_RETURN(const FairModelApplier applier,
                     FairModelApplier::Create(artifact.artifact().fair_model()));
    if (applier.is_multiclass()) {
      return absl::InvalidArgumentError(
          "the sweep measures binary classifiers; this model has several classes");
    }
    ASSIGN_OR_RETURN(FairModelRowReader rows,
                     FairModelRowReader::Bind(applier, holdout_.table.header, holdout_.path));
    // The same seeded generator as `predict --seed`, seeded from the point's key.
    ModelRng gen(Fnv1a(p.fit_key));
    p.decisions.clear();
    for (size_t r = 0; r < holdout_.table.rows.size(); ++r) {
      ASSIGN_OR_RETURN(const ModelPrediction* predicted,
                       rows.Predict(holdout_.table.rows[r], holdout_.table.row_lines[r], &gen));
      p.decisions.push_back(predicted->decision);
    }
    return absl::OkStatus();
  }

  // Uploads the held-out decisions (one column per point) once, or reuses the table of an
  // earlier run with the same decisions (recorded in <out>.state), so that the audits' requests
  // are the same and replay; then one private audit per point.
  absl::Status Audit() {
    std::string fingerprint_text = absl::StrJoin(holdout_.keys, ",");
    for (const Point& p : points_)
      absl::StrAppend(&fingerprint_text, ";", absl::StrJoin(p.decisions, ""));
    absl::StrAppend(&fingerprint_text, ";", absl::StrJoin(holdout_.labels, ""));
    const std::string fingerprint = absl::StrFormat("%016x", Fnv1a(fingerprint_text));
    const std::string state_path = out_path_ + ".state";
    std::string handle;
    if (absl::StatusOr<std::string> state = ReadFileToString(state_path); state.ok()) {
      const std::vector<std::string> fields =
          absl::StrSplit(absl::StripAsciiWhitespace(*state), '\t');
      if (fields.size() == 3 && fields[0] == run_id_ && fields[2] == fingerprint) {
        handle = fields[1];
      }
    }
    if (handle.empty()) {
      v1::TableHeader header;
      header.set_dataset(dataset_);
      header.set_ttl_seconds(604800);  // a week: re-runs within it replay the audits
      header.set_label(absl::StrCat("sweep ", run_id_, " held-out decisions"));
      std::vector<v1::ColumnValues> columns(points_.size() + 1);
      auto add = [&header](const std::string& name) {
        v1::ColumnSpec* spec = header.add_columns();
        spec->set_name(name);
        spec->set_type(v1::COLUMN_TYPE_NUMERIC);
      };
      add("label");
      for (int y : holdout_.labels) columns[0].add_numeric(y);
      for (size_t i = 0; i < points_.size(); ++i) {
        add(absl::StrCat("decision_", i + 1));
        for (int d : points_[i].decisions) columns[i + 1].add_numeric(d);
      }
      ASSIGN_OR_RETURN(const v1::UploadTableResponse uploaded,
                       client_->UploadTable(header, holdout_.keys, columns));
      handle = uploaded.table_handle();
      RETURN_IF_ERROR(WriteStringToFile(
          state_path, absl::StrCat(run_id_, "\t", handle, "\t", fingerprint, "\n")));
      std::cerr << "sweep: uploaded the held-out decisions (" << uploaded.row_count() << " rows, "
                << uploaded.rows_in_vault() << " in the vault) as " << handle << "\n";
    }
    for (size_t i = 0; i < points_.size(); ++i) {
      Point& p = points_[i];
      v1::AuditClassifierRequest req;
      req.set_idempotency_key(p.audit_key);
      req.set_table_handle(handle);
      req.set_prediction_column(absl::StrCat("decision_", i + 1));
      req.set_label_column("label");
      for (const std::string& a : flags_.GetList("attributes")) req.add_attributes(a);
      req.set_epsilon(measure_.audit_epsilon);
      req.set_confidence(0.95);
      req.set_unmatched(Unmatched(flags_));
      ASSIGN_OR_RETURN(const v1::AuditClassifierResponse resp, client_->AuditClassifier(req));
      const v1::Interval& v = measure_.equalized_odds
                                  ? resp.report().equalized_odds_violation()
                                  : resp.report().demographic_parity_violation();
      p.violation = v.estimate();
      p.violation_ci = std::make_pair(v.lo(), v.hi());
      p.measured = true;
      RETURN_IF_ERROR(WriteStringToFile(out_path_, Csv()));
    }
    return absl::OkStatus();
  }

  Context& ctx_;
  const ParsedFlags& flags_;
  const Method method_;
  Client* client_ = nullptr;
  std::string dataset_, run_id_, out_path_, label_column_;
  SweepInfo info_;
  std::vector<Baseline> baselines_;
  std::string holdout_digest_;  // SHA-256 of --holdout's rows, for the audits' keys
  std::vector<double> epsilons_;
  Measure measure_;
  Holdout holdout_;
  std::vector<Point> points_;
  struct {
    double gamma = 0, beta = 0, floor = 0;
  } eo_;
  size_t prediction_index_ = 0;
  v1::FitFairModelRequest model_request_;
};

constexpr char kSweepDetails[] =
    "For each epsilon: one charged fit (keys <run-id>/fit/...), applied locally on --holdout\n"
    "(decisions drawn from a generator seeded by the point's key, so a re-run draws the same),\n"
    "and measured. The error is always measured locally: you hold the held-out labels. The\n"
    "fairness violation needs the protected attribute, which you do not hold, so it is either\n"
    "  --group-column: evaluation groups you do hold in --holdout (a public benchmark, or\n"
    "                  consented labels); exact, no charge; or\n"
    "  --audit-epsilon E: a private audit (`audit classifier`) of each point's decisions on\n"
    "                  --holdout (uploaded once, keyed by --key-column): charged E per point,\n"
    "                  the violation with its 95% interval (violation_lo, violation_hi).\n"
    "Before anything is charged the plan and its total privacy cost (the sum of the releases'\n"
    "epsilons) are printed and compared with your budget left on --dataset (GetBudget); the\n"
    "sweep refuses when the budget is smaller, unless --yes. Releases this run id already\n"
    "charged (an interrupted run) are found in your ledger and replay free; the audits' table\n"
    "handle is kept in <out>.state for that. CSV: series,epsilon,error,violation\n"
    "[,violation_lo,violation_hi],lambda,cost_epsilon,artifact,kind,dataset,company,run_id,\n"
    "measure,holdout,group_column (`report sweep --csv`): kind 'baseline' rows are references\n"
    "measured on --holdout without a charge (the constant classifier; for `sweep eo` with\n"
    "--group-column also the model before post-processing), and the last six columns say what\n"
    "the sweep is (the page's provenance).";

}  // namespace

std::vector<Command> SweepCommands() {
  std::vector<FlagSpec> eo = {
      {"table", "HANDLE", "training table from `table upload` (prediction and label columns)",
       true},
      {"prediction-column", "COL",
       "numeric 0/1 predictions, in the table and in --holdout (same name)", true},
      {"label-column", "COL", "numeric 0/1 labels, in the table and in --holdout (same name)",
       true},
      AttributesFlag(),
      {"gamma", "G", "fairness tolerance of every fit (>= 0)", true},
      {"beta", "B", "failure probability of the slack bound (default 0.05)"},
      {"decision-floor", "F", "as `postprocess eo --decision-floor` (default 0)"},
      DropUnmatchedFlag()};
  for (FlagSpec& f : SweepFlags()) eo.push_back(std::move(f));

  std::vector<FlagSpec> model;
  for (FlagSpec& f : ModelFitFlags()) {
    if (f.name == "epsilon" || f.name == "idempotency-key" || f.name == "dry-run") continue;
    if (f.name == "label") f.help += "; --holdout's label column has the same name";
    if (f.name == "features") f.help += "; --holdout has them too";
    model.push_back(std::move(f));
  }
  model.push_back({"lambdas", "L1,L2,...",
                   "dp_fermi: also sweep the fairness weight (one series per lambda; every "
                   "lambda is fitted at every epsilon and charged)",
                   false, true});
  for (FlagSpec& f : SweepFlags()) model.push_back(std::move(f));
  return {
      {"sweep eo",
       "epsilon sweep of the DP equalized-odds post-processor, measured on a held-out split "
       "(company)",
       absl::StrCat("Fits `postprocess eo` at each epsilon and applies it locally to --holdout's\n"
                    "predictions with the evaluation groups of --group-column (an equalized-odds\n"
                    "post-processor is applied with each row's group, so this sweep needs them).\n",
                    kSweepDetails),
       eo, true, [](Context& ctx) { return Sweep(ctx, Method::kEo).Run(); }},
      {"sweep model",
       "epsilon (and lambda) sweep of a managed fair learner, measured on a held-out split "
       "(company)",
       absl::StrCat(
           "Runs `model fit` at each epsilon (waiting for each job) and applies the model\n"
           "locally to --holdout's feature columns, as `predict` does.\n",
           kSweepDetails),
       model, true, [](Context& ctx) { return Sweep(ctx, Method::kModel).Run(); }},
  };
}

}  // namespace fairvault::client::cli
