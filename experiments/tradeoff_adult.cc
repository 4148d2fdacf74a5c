// The privacy / fairness trade-off of the vault's fair learners on Adult (issue 10): DP-FERMI
// (ALGORITHMS.md §5), PF-LD (§6), the DP-oracle learner (§3) and the DP equalized-odds
// post-processor (§1), all through a real vault (fairvault-server on a temp SQLite file, driven
// through the client library), on the same split, the same features and the same ε.
//
// Data: adult.data to train, adult.test to test, group = sex, the shared encoding
// (fair_learning_common: numeric standardised, categorical one-hot, no sex or race). The split is
// Adult's official one, so seeds are repetitions of the vault's noise (and of DP-FERMI's
// initialisation).
//
// Protocol: the regulator imports the train rows' sex and grants the company with δ = 1e-5
// (DP-FERMI and PF-LD add Gaussian noise; the DP-oracle learner and the post-processor use the
// grant's δ in their accounting too). The company uploads its features, labels and the 0/1
// predictions of its own non-private logistic regression (core/learn, Newton) once. Per ε and
// seed it then asks for
//   * DP-FERMI (logistic regression, demographic parity) for each λ in --lambdas,
//   * PF-LD (logistic regression, demographic parity),
//   * the DP-oracle learner (FAIR_MODEL_ALGORITHM_DP_ORACLE_LEARNER with the vault's defaults:
//     T = 100, B = 1, η = 1, γ = 0, no clipping, masses share 0.1; it constrains equalized odds),
//   * the equalized-odds post-processor of the logistic regression's 0/1 predictions
//     (FitEqualizedOddsPostProcessor, γ = 0, min_group_count 0, as jagielski_fig1 runs it),
// each one charged release of ε. The models are applied to adult.test with client/model_apply
// (no group needed); the post-processor needs each test row's group, which the regulator holds.
// Metrics on adult.test from each row's probability of a positive decision: expected error,
// demographic-parity violation |P(ŷ=1 | Female) − P(ŷ=1 | Male)| and equalized-odds violation
// max_y of the same gap among rows with label y. References: the logistic regression itself and
// the post-processor's LP on exact counts (ε = ∞).
//
// DP-FERMI / PF-LD schedule: the vault's accountant gives no subsampling amplification at small
// ε with batch 1024 (noise multiplier ≈ 500 at ε = 1, experiments/results/dp_fermi_adult.md), so
// every step here uses all rows (full batch: z ≈ 100 at ε = 1 over 300 steps) with learning rates
// large enough for 300 full-batch steps: η_θ = 1, W radius 5, DP-FERMI clips 1. Chosen on
// validation rows carved from adult.data (--validate; never adult.test; README and
// results/tradeoff_adult_validation*.md): η_w = 0.1, not 1 (with η_w = 1 every λ >= 1.5 collapses
// to the constant classifier, so the λ grid has no point between violation 0.12 and 0), PF-LD's
// C_p = 5, not 1 (lower error and violation in every paired run), and λ ∈ {0, 1, 2.5, 5}.

// Outputs in --out-dir: tradeoff_adult.csv (one row per method × ε × seed),
// tradeoff_adult_sweep_dp.csv and tradeoff_adult_sweep_eo.csv (`fairvault report sweep` input:
// mean over seeds with a 95% t-interval of the mean, violation = DP resp. EO), tradeoff_adult.md.
// With --validate: tradeoff_adult_validation.csv and .md instead.
//
// Usage: tradeoff_adult [--datasets DIR] [--out-dir DIR] [--seeds 5] [--epsilons 0.5,1,3,9]
//   [--lambdas 0,1,2.5,5] [--epochs 300] [--batch B (0: all rows)] [--lr-theta 1] [--lr-w 0.1]
//   [--w-radius 5] [--clip 1] [--pfld-clip 5] [--dual-lr 0.1]
//   [--oracle-rounds T (0: the vault's default)] [--validate [--variations id,id,...]] [--quick]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "Eigen/Dense"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/csv.h"
#include "core/learn/logistic_regression.h"
#include "core/util/status_macros.h"
#include "experiments/fair_learning_common.h"

#ifndef FAIRVAULT_SOURCE_DIR
#error "FAIRVAULT_SOURCE_DIR must be defined by the build"
#endif

namespace fairvault::experiments {
namespace {

namespace learn = ::fairvault::core::learn;

constexpr double kDelta = 1e-5;
constexpr double kInf = std::numeric_limits<double>::infinity();
// The validation split: a fixed shuffle of adult.data, the last share of it held out.
constexpr uint64_t kValidationShuffleSeed = 20231123;

// DP-FERMI's and PF-LD's schedule and steps (FitFairModelRequest fields 19-31).
struct Schedule {
  int epochs = 300;
  int batch = 0;  // 0: all rows (full batch)
  double lr_theta = 1, lr_w = 0.1, w_radius = 5;
  double clip = 1;       // DP-FERMI: clip_theta = clip_w
  double pfld_clip = 5;  // PF-LD: C_p (clip_theta)
  double dual_lr = 0.1;

  std::string Describe(bool pfld) const {
    const std::string batch_text = batch == 0 ? "full batch" : absl::StrCat("batch ", batch);
    if (pfld) {
      return absl::StrFormat("%d epochs, %s, η_θ %g, C_p %g, dual step %g", epochs, batch_text,
                             lr_theta, pfld_clip, dual_lr);
    }
    return absl::StrFormat("%d epochs, %s, η_θ %g, η_w %g, W radius %g, clips %g", epochs,
                           batch_text, lr_theta, lr_w, w_radius, clip);
  }
};

struct Flags {
  std::string datasets = std::string(FAIRVAULT_SOURCE_DIR) + "/../shared/datasets";
  std::string out_dir = ".";
  int seeds = 5;
  std::vector<double> epsilons = {0.5, 1, 3, 9};
  std::vector<double> lambdas = {0, 1, 2.5, 5};
  Schedule schedule;
  int oracle_rounds = 0;  // 0: the vault's default (100)
  bool validate = false;
  double validation_share = 0.2;
  std::vector<std::string> variations;  // --validate: the variations to run (empty: all)
  bool quick = false;
  // Which flags were given (--validate keeps them and varies the rest).
  bool epsilons_given = false, lambdas_given = false, seeds_given = false;
};

enum class Method { kFermi, kPfld, kOracle, kPost, kBase };

// One learner configuration: a series of the sweep.
struct Arm {
  Method method;
  double lambda = 0;  // DP-FERMI's fairness weight
  Schedule schedule;
  std::string config;  // --validate: the variation's name
  std::string Series(int oracle_rounds) const {
    switch (method) {
      case Method::kFermi:
        return absl::StrCat("DP-FERMI λ=", lambda);
      case Method::kPfld:
        return "PF-LD";
      case Method::kOracle:
        return absl::StrCat("DP-oracle learner T=", oracle_rounds == 0 ? 100 : oracle_rounds);
      case Method::kPost:
        return "EO post-processor";
      case Method::kBase:
        break;
    }
    return "logistic regression (non-private)";
  }
  const char* Name() const {
    switch (method) {
      case Method::kFermi:
        return "dp_fermi";
      case Method::kPfld:
        return "pf_ld";
      case Method::kOracle:
        return "dp_oracle_learner";
      case Method::kPost:
        return "eo_postprocessor";
      case Method::kBase:
        break;
    }
    return "logistic_regression";
  }
};

struct Row {
  size_t arm = 0;
  double epsilon = 0;
  int seed = 0;
  Metrics m;
  double z = 0;        // DP-FERMI / PF-LD: the steps' noise multiplier from the charge
  double elapsed = 0;  // the job's own elapsed_seconds
};

// Two-sided 95% quantile of Student's t with df degrees of freedom (df >= 1).
double TQuantile95(int df) {
  static constexpr double kTable[] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365,
                                      2.306,  2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
                                      2.131,  2.120, 2.110, 2.101, 2.093, 2.086};
  if (df <= 20) return kTable[std::max(df, 1) - 1];
  return 1.96 + 2.4 / df;  // within 0.003 of the exact quantile for df > 20
}

// Mean and the half width of its 95% t-interval (0 for fewer than two values).
std::pair<double, double> MeanAndHalfWidth(const std::vector<double>& v) {
  const MeanStd s = Summarize(v);
  if (v.size() < 2) return {s.mean, 0};
  const double n = static_cast<double>(v.size());
  const double sample_sd = s.std * std::sqrt(n / (n - 1));
  return {s.mean, TQuantile95(static_cast<int>(v.size()) - 1) * sample_sd / std::sqrt(n)};
}

// The evaluation: a company table on `train`, metrics on `eval` (adult.test, or the validation
// rows under --validate).
struct Split {
  LabeledRows train, eval;
  std::vector<std::string> train_keys;
  std::string eval_name;
};

absl::StatusOr<Split> MakeSplit(const AdultData& adult, const Flags& flags) {
  Split split;
  const auto n = static_cast<int>(adult.train.y.size());
  std::vector<int> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  if (!flags.validate) {
    split.train = adult.train;
    split.eval = adult.test;
    split.eval_name = "adult.test";
  } else {
    std::mt19937_64 shuffle(kValidationShuffleSeed);
    std::shuffle(order.begin(), order.end(), shuffle);
    const auto held = static_cast<size_t>(std::round(flags.validation_share * n));
    std::vector<int> train_idx(order.begin(), order.end() - static_cast<long>(held));
    std::vector<int> eval_idx(order.end() - static_cast<long>(held), order.end());
    std::sort(train_idx.begin(), train_idx.end());
    std::sort(eval_idx.begin(), eval_idx.end());
    auto take = [&adult](const std::vector<int>& idx) {
      LabeledRows out;
      out.x.resize(static_cast<Eigen::Index>(idx.size()), adult.train.x.cols());
      for (size_t i = 0; i < idx.size(); ++i) {
        out.x.row(static_cast<Eigen::Index>(i)) = adult.train.x.row(idx[i]);
        out.y.push_back(adult.train.y[static_cast<size_t>(idx[i])]);
        out.group.push_back(adult.train.group[static_cast<size_t>(idx[i])]);
      }
      return out;
    };
    split.train = take(train_idx);
    split.eval = take(eval_idx);
    order = train_idx;
    split.eval_name =
        absl::StrFormat("validation rows (%.0f%% of adult.data)", 100 * flags.validation_share);
  }
  for (size_t i = 0; i < split.train.y.size(); ++i) {
    split.train_keys.push_back(absl::StrCat("adult-", order[i]));
  }
  return split;
}

// The --validate variations: one change each from the flags' schedule, for DP-FERMI (at each
// λ), PF-LD or both.
struct Variation {
  std::string id, name;
  std::function<void(Schedule&)> change;
  bool fermi, pfld;
};

const std::vector<Variation>& Variations() {
  static const std::vector<Variation>* const kVariations = new std::vector<Variation>{
      {"chosen", "chosen", [](Schedule&) {}, true, true},
      {"lr_theta_div3", "η_θ ÷ 3", [](Schedule& s) { s.lr_theta /= 3; }, true, true},
      {"lr_theta_x3", "η_θ × 3", [](Schedule& s) { s.lr_theta *= 3; }, true, true},
      {"lr_w_div10", "η_w ÷ 10", [](Schedule& s) { s.lr_w /= 10; }, true, false},
      {"w_radius_1", "W radius 1", [](Schedule& s) { s.w_radius = 1; }, true, false},
      {"clips_x5", "clips × 5",
       [](Schedule& s) {
         s.clip *= 5;
         s.pfld_clip *= 5;
       },
       true, true},
      {"epochs_div3", "epochs ÷ 3", [](Schedule& s) { s.epochs = std::max(1, s.epochs / 3); }, true,
       true},
      {"batch_4096", "batch 4096", [](Schedule& s) { s.batch = 4096; }, true, true},
      {"dual_div10", "dual step ÷ 10", [](Schedule& s) { s.dual_lr /= 10; }, false, true},
      {"dual_x10", "dual step × 10", [](Schedule& s) { s.dual_lr *= 10; }, false, true},
      {"pfld_paper", "PF-LD paper C_p 10, η_θ 0.005, batch 1024",
       [](Schedule& s) {
         s.pfld_clip = 10;
         s.lr_theta = 0.005;
         s.batch = 1024;
       },
       false, true},
  };
  return *kVariations;
}

// The arms: the learners of the trade-off, or under --validate the variations of the schedule
// (one change at a time from --epochs ... --dual-lr) for DP-FERMI at each λ and PF-LD.
std::vector<Arm> MakeArms(const Flags& flags) {
  std::vector<Arm> arms;
  const Schedule& base = flags.schedule;
  auto add_stochastic = [&](const Schedule& s, const std::string& config, bool fermi, bool pfld) {
    if (fermi) {
      for (double lambda : flags.lambdas) arms.push_back({Method::kFermi, lambda, s, config});
    }
    if (pfld) arms.push_back({Method::kPfld, 0, s, config});
  };
  if (!flags.validate) {
    add_stochastic(base, "", true, true);
    arms.push_back({Method::kOracle, 0, base, ""});
    arms.push_back({Method::kPost, 0, base, ""});
    return arms;
  }
  for (const Variation& v : Variations()) {
    if (!flags.variations.empty() && std::find(flags.variations.begin(), flags.variations.end(),
                                               v.id) == flags.variations.end()) {
      continue;
    }
    Schedule s = base;
    v.change(s);
    add_stochastic(s, v.name, v.fermi, v.pfld);
  }
  return arms;
}

v1::FitFairModelRequest JobRequest(const Arm& arm, const Flags& flags, const std::string& handle,
                                   const std::vector<std::string>& features, int64_t rows,
                                   double eps, int seed, size_t arm_index) {
  v1::FitFairModelRequest req;
  req.set_idempotency_key(absl::StrCat(arm.Name(), "-", arm_index, "-", eps, "-", seed));
  req.set_table_handle(handle);
  for (const auto& f : features) req.add_feature_columns(f);
  req.set_label_column("label");
  req.set_epsilon(eps);
  if (arm.method == Method::kOracle) {
    req.set_algorithm(v1::FAIR_MODEL_ALGORITHM_DP_ORACLE_LEARNER);
    req.set_rounds(flags.oracle_rounds);  // 0: the vault's default; everything else too
    return req;
  }
  const Schedule& s = arm.schedule;
  req.set_algorithm(arm.method == Method::kFermi ? v1::FAIR_MODEL_ALGORITHM_DP_FERMI
                                                 : v1::FAIR_MODEL_ALGORITHM_PF_LD);
  req.set_model(v1::MODEL_FAMILY_LOGISTIC_REGRESSION);
  req.set_fairness(v1::FAIRNESS_NOTION_DEMOGRAPHIC_PARITY);
  req.set_epochs(s.epochs);
  req.set_batch_size(static_cast<int32_t>(s.batch == 0 ? rows : s.batch));
  req.set_lr_theta(s.lr_theta);
  req.set_clip_theta(arm.method == Method::kFermi ? s.clip : s.pfld_clip);
  if (arm.method == Method::kFermi) {
    req.set_lr_w(s.lr_w);
    req.set_w_radius(s.w_radius);
    req.set_clip_w(s.clip);
    req.set_fairness_lambda(arm.lambda);
  } else {
    req.set_dual_lr(s.dual_lr);
  }
  return req;
}

struct Results {
  std::vector<Arm> arms;  // the flags' arms, then the references
  std::vector<Row> rows;
  size_t base_arm = 0, post_arm = 0;
  bool has_post = false;
};

absl::StatusOr<Results> RunArms(VaultSession& vault, const Split& split, const Flags& flags) {
  Results out;
  out.arms = MakeArms(flags);
  const LabeledRows& train = split.train;
  const LabeledRows& eval = split.eval;
  const std::vector<std::string> categories = {"Female", "Male"};

  // The company's own model (non-private, on its own data) and its table.
  ASSIGN_OR_RETURN(
      auto lr, learn::FitLogisticRegression(train.x, train.y, learn::LogisticRegressionOptions()));
  const std::vector<int> train_pred = lr.Predict(train.x), eval_pred = lr.Predict(eval.x);
  std::vector<std::string> names = FeatureNames(train.x.cols());
  const std::vector<std::string> features = names;
  std::vector<std::vector<double>> columns;
  for (Eigen::Index j = 0; j < train.x.cols(); ++j) {
    const Eigen::VectorXd col = train.x.col(j);
    columns.emplace_back(col.data(), col.data() + col.size());
  }
  names.push_back("label");
  columns.emplace_back(train.y.begin(), train.y.end());
  names.push_back("prediction");
  columns.emplace_back(train_pred.begin(), train_pred.end());
  ASSIGN_OR_RETURN(const std::string handle,
                   UploadNumeric(vault, "adult", split.train_keys, names, columns));

  std::vector<v1::FitFairModelRequest> reqs;
  std::vector<Row> job_rows;
  for (double eps : flags.epsilons) {
    for (int seed = 0; seed < flags.seeds; ++seed) {
      for (size_t a = 0; a < out.arms.size(); ++a) {
        const Arm& arm = out.arms[a];
        if (arm.method == Method::kPost) {
          ASSIGN_OR_RETURN(EoMixing mixing,
                           FitEoPostProcessor(vault, absl::StrCat("post-", eps, "-", seed), handle,
                                              "prediction", "label", eps, categories));
          Row row;
          row.arm = a;
          row.epsilon = eps;
          row.seed = seed;
          row.m = ExpectedMetrics(PostProcessedProbabilities(mixing, eval_pred, eval.group), eval.y,
                                  eval.group);
          out.rows.push_back(row);
          continue;
        }
        reqs.push_back(JobRequest(arm, flags, handle, features,
                                  static_cast<int64_t>(train.y.size()), eps, seed, a));
        Row row;
        row.arm = a;
        row.epsilon = eps;
        row.seed = seed;
        job_rows.push_back(row);
      }
    }
  }
  std::vector<JobRun> runs;
  // The server runs one job at a time; 4 in flight keep its queue non-empty while we poll.
  ASSIGN_OR_RETURN(auto models, RunJobs(vault, reqs, 4, &runs));
  for (size_t i = 0; i < models.size(); ++i) {
    RETURN_IF_ERROR(models[i].status());
    ASSIGN_OR_RETURN(std::vector<double> p, PositiveProbabilities(*models[i], eval.x));
    Row& r = job_rows[i];
    r.m = ExpectedMetrics(p, eval.y, eval.group);
    const v1::Cost& cost = runs[i].submitted.charge().cost();
    const Arm& arm = out.arms[r.arm];
    if (arm.method == Method::kFermi || arm.method == Method::kPfld) {
      r.z = cost.parts_size() > 1 ? cost.parts(1).noise_scale() : 0;
    }
    r.elapsed = runs[i].finished.elapsed_seconds();
    std::fprintf(stderr, "%s %s eps %g seed %d: error %.4f DP %.4f EO %.4f z %.4g (%.1f s)\n",
                 arm.Series(flags.oracle_rounds).c_str(), arm.config.c_str(), r.epsilon, r.seed,
                 r.m.error, r.m.dp_violation, r.m.violation, r.z, r.elapsed);
    out.rows.push_back(r);
  }

  // References: the logistic regression itself and the post-processor's LP on exact counts.
  out.base_arm = out.arms.size();
  out.arms.push_back({Method::kBase, 0, flags.schedule, ""});
  {
    std::vector<double> p(eval_pred.begin(), eval_pred.end());
    out.rows.push_back({out.base_arm, kInf, 0, ExpectedMetrics(p, eval.y, eval.group)});
  }
  for (size_t a = 0; a < out.base_arm; ++a) {
    if (out.arms[a].method != Method::kPost) continue;
    ASSIGN_OR_RETURN(EoMixing exact, ExactEoPostProcessor(train_pred, train));
    out.rows.push_back({a, kInf, 0,
                        ExpectedMetrics(PostProcessedProbabilities(exact, eval_pred, eval.group),
                                        eval.y, eval.group)});
    out.post_arm = a;
    out.has_post = true;
  }
  return out;
}

std::vector<const Row*> RowsOf(const Results& res, size_t arm, double eps) {
  std::vector<const Row*> rows;
  for (const Row& r : res.rows) {
    if (r.arm == arm && (r.epsilon == eps || (std::isinf(r.epsilon) && std::isinf(eps)))) {
      rows.push_back(&r);
    }
  }
  return rows;
}

std::string MeanStdText(const std::vector<const Row*>& rows,
                        const std::function<double(const Row&)>& get) {
  std::vector<double> v;
  for (const Row* r : rows) v.push_back(get(*r));
  const MeanStd s = Summarize(v);
  return v.size() > 1 ? absl::StrFormat("%.3f ± %.3f", s.mean, s.std)
                      : absl::StrFormat("%.3f", s.mean);
}

std::string PerSeedCsv(const Results& res, const Flags& flags) {
  std::string csv =
      "method,series,config,epsilon,seed,error,dp_violation,eo_violation,noise_multiplier,"
      "job_seconds\n";
  for (const Row& r : res.rows) {
    const Arm& arm = res.arms[r.arm];
    absl::StrAppend(&csv, arm.Name(), ",", arm.Series(flags.oracle_rounds), ",\"", arm.config,
                    "\",", EpsilonText(r.epsilon), ",", r.seed, ",",
                    absl::StrFormat("%.6f,%.6f,%.6f,%.6g,%.3f\n", r.m.error, r.m.dp_violation,
                                    r.m.violation, r.z, r.elapsed));
  }
  return csv;
}

// The `fairvault report sweep` input: per series and ε the mean over seeds, with the 95%
// t-interval of the mean where there are several seeds; violation = DP (dp) or EO (!dp).
std::string SweepCsv(const Results& res, const Flags& flags, bool dp) {
  std::string csv = "series,epsilon,error,violation,error_lo,error_hi,violation_lo,violation_hi\n";
  std::vector<double> order = flags.epsilons;
  order.push_back(kInf);
  for (size_t a = 0; a < res.arms.size(); ++a) {
    for (double eps : order) {
      const std::vector<const Row*> rows = RowsOf(res, a, eps);
      if (rows.empty()) continue;
      std::vector<double> err, vio;
      for (const Row* r : rows) {
        err.push_back(r->m.error);
        vio.push_back(dp ? r->m.dp_violation : r->m.violation);
      }
      const auto [e, e_half] = MeanAndHalfWidth(err);
      const auto [v, v_half] = MeanAndHalfWidth(vio);
      absl::StrAppend(&csv, res.arms[a].Series(flags.oracle_rounds), ",", EpsilonText(eps), ",",
                      absl::StrFormat("%.6f,%.6f", e, v));
      if (rows.size() > 1) {
        absl::StrAppend(&csv, absl::StrFormat(",%.6f,%.6f,%.6f,%.6f\n", e - e_half, e + e_half,
                                              std::max(0.0, v - v_half), v + v_half));
      } else {
        absl::StrAppend(&csv, ",,,,\n");
      }
    }
  }
  return csv;
}

std::string TradeoffMarkdown(const Split& split, const Flags& flags, const Results& res,
                             double seconds) {
  std::string md = absl::StrFormat(
      "### Privacy / fairness trade-off on Adult (sex) (%d train rows, %d test rows, %d "
      "features + intercept; %d seed%s; grant δ = %g)\n\n",
      static_cast<int>(split.train.y.size()), static_cast<int>(split.eval.y.size()),
      static_cast<int>(split.train.x.cols()), flags.seeds, flags.seeds == 1 ? "" : "s", kDelta);
  absl::StrAppend(
      &md, "DP-FERMI and PF-LD: logistic regression, demographic parity, ",
      flags.schedule.Describe(false), " (PF-LD: ", flags.schedule.Describe(true),
      "), marginals share 0.1. DP-oracle learner: the vault's defaults",
      flags.oracle_rounds == 0 ? "" : absl::StrCat(" but T = ", flags.oracle_rounds),
      " (T = 100, B = 1, η = 1, γ = 0, no clipping, masses share 0.1; equalized odds). EO "
      "post-processor: the logistic regression's 0/1 predictions, γ = 0, min_group_count 0. "
      "Each is one release of ε. Test error, demographic-parity (DP) and equalized-odds (EO) "
      "violation on adult.test, mean ± population std over seeds; z = DP-FERMI's / PF-LD's noise "
      "multiplier; job time = the job's elapsed_seconds (mean).\n\n",
      "| method | ε | error | DP violation | EO violation | z | job time (s) |\n",
      "|---|---|---|---|---|---|---|\n");
  std::vector<double> order = flags.epsilons;
  order.push_back(kInf);
  for (size_t a = 0; a < res.arms.size(); ++a) {
    for (double eps : order) {
      const std::vector<const Row*> rows = RowsOf(res, a, eps);
      if (rows.empty()) continue;
      const bool stochastic =
          res.arms[a].method == Method::kFermi || res.arms[a].method == Method::kPfld;
      const bool job = stochastic || res.arms[a].method == Method::kOracle;
      std::vector<double> secs;
      for (const Row* r : rows) secs.push_back(r->elapsed);
      absl::StrAppend(&md, "| ", res.arms[a].Series(flags.oracle_rounds), " | ",
                      std::isinf(eps) ? "∞ (no noise)" : EpsilonText(eps), " | ",
                      MeanStdText(rows, [](const Row& r) { return r.m.error; }), " | ",
                      MeanStdText(rows, [](const Row& r) { return r.m.dp_violation; }), " | ",
                      MeanStdText(rows, [](const Row& r) { return r.m.violation; }), " | ",
                      stochastic ? absl::StrFormat("%.4g", rows[0]->z) : "", " | ",
                      job ? absl::StrFormat("%.1f", Summarize(secs).mean) : "", " |\n");
    }
  }
  absl::StrAppend(&md, absl::StrFormat("\n(total run time %.0f s)\n", seconds));
  return md;
}

std::string ValidationMarkdown(const Split& split, const Flags& flags, const Results& res,
                               double seconds) {
  std::string md = absl::StrFormat(
      "### DP-FERMI / PF-LD schedules on a validation split of adult.data (%d train rows, %d "
      "%s; %d seed%s; grant δ = %g)\n\n",
      static_cast<int>(split.train.y.size()), static_cast<int>(split.eval.y.size()),
      split.eval_name, flags.seeds, flags.seeds == 1 ? "" : "s", kDelta);
  absl::StrAppend(&md, "chosen: DP-FERMI ", flags.schedule.Describe(false), "; PF-LD ",
                  flags.schedule.Describe(true),
                  ". Each other row changes one thing. Validation error / DP violation, mean over "
                  "seeds.\n\n| configuration | method | ");
  for (double eps : flags.epsilons) absl::StrAppend(&md, "ε = ", EpsilonText(eps), " | ");
  absl::StrAppend(&md, "job time (s) |\n|---|---|");
  for (size_t i = 0; i <= flags.epsilons.size(); ++i) absl::StrAppend(&md, "---|");
  absl::StrAppend(&md, "\n");
  for (size_t a = 0; a < res.arms.size(); ++a) {
    const Arm& arm = res.arms[a];
    if (arm.method != Method::kFermi && arm.method != Method::kPfld) continue;
    absl::StrAppend(&md, "| ", arm.config, " | ", arm.Series(flags.oracle_rounds), " | ");
    std::vector<double> secs;
    for (double eps : flags.epsilons) {
      const std::vector<const Row*> rows = RowsOf(res, a, eps);
      std::vector<double> err, vio;
      for (const Row* r : rows) {
        err.push_back(r->m.error);
        vio.push_back(r->m.dp_violation);
        secs.push_back(r->elapsed);
      }
      absl::StrAppend(&md,
                      absl::StrFormat("%.3f / %.3f | ", Summarize(err).mean, Summarize(vio).mean));
    }
    absl::StrAppend(&md, absl::StrFormat("%.1f |\n", Summarize(secs).mean));
  }
  const std::vector<const Row*> base = RowsOf(res, res.base_arm, kInf);
  absl::StrAppend(&md,
                  absl::StrFormat("\nNon-private logistic regression on the same split: %.3f / "
                                  "%.3f.\n\n(total run time %.0f s)\n",
                                  base[0]->m.error, base[0]->m.dp_violation, seconds));
  return md;
}

absl::Status Run(const Flags& flags) {
  const auto start = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(AdultData adult, LoadAdult(flags.datasets));
  ASSIGN_OR_RETURN(Split split, MakeSplit(adult, flags));
  ASSIGN_OR_RETURN(VaultSession vault, StartVault("tradeoff_adult", "tradeoff-lab"));
  std::vector<std::string> keys;
  for (size_t i = 0; i < adult.train.y.size(); ++i) keys.push_back(absl::StrCat("adult-", i));
  // Twice the sum of the stated costs: enough whatever the ledger's composition gives.
  const double arms = static_cast<double>(MakeArms(flags).size());
  double grant = 1;
  for (double e : flags.epsilons) grant += 2 * e * arms * flags.seeds;
  RETURN_IF_ERROR(AddDataset(vault, "adult", "sex", {"Female", "Male"}, keys, adult.train.group,
                             grant, kDelta));
  ASSIGN_OR_RETURN(Results res, RunArms(vault, split, flags));
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  const std::string stem =
      absl::StrCat(flags.out_dir, "/tradeoff_adult", flags.validate ? "_validation" : "");
  RETURN_IF_ERROR(client::WriteStringToFile(stem + ".csv", PerSeedCsv(res, flags)));
  std::vector<std::string> written = {stem + ".csv"};
  std::string md;
  if (flags.validate) {
    md = ValidationMarkdown(split, flags, res, secs);
  } else {
    for (bool dp : {true, false}) {
      const std::string path = absl::StrCat(stem, "_sweep_", dp ? "dp" : "eo", ".csv");
      RETURN_IF_ERROR(client::WriteStringToFile(path, SweepCsv(res, flags, dp)));
      written.push_back(path);
    }
    md = TradeoffMarkdown(split, flags, res, secs);
  }
  RETURN_IF_ERROR(client::WriteStringToFile(stem + ".md", md));
  written.push_back(stem + ".md");
  std::printf("%s\nwrote %s\n", md.c_str(), absl::StrJoin(written, ", ").c_str());
  return absl::OkStatus();
}

absl::StatusOr<std::vector<double>> ParseList(const std::string& flag, const std::string& value,
                                              bool positive) {
  std::vector<double> out;
  for (absl::string_view part : absl::StrSplit(value, ',')) {
    double x = 0;
    if (!absl::SimpleAtod(part, &x) || !std::isfinite(x) || x < 0 || (positive && x == 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, ": comma-separated finite numbers", positive ? " > 0" : " >= 0"));
    }
    out.push_back(x);
  }
  return out;
}

absl::StatusOr<Flags> ParseFlags(int argc, char** argv) {
  Flags flags;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> absl::StatusOr<std::string> {
      if (i + 1 >= argc) return absl::InvalidArgumentError(absl::StrCat(arg, " needs a value"));
      return std::string(argv[++i]);
    };
    auto integer = [&](int* out, int min) -> absl::Status {
      ASSIGN_OR_RETURN(std::string v, value());
      if (!absl::SimpleAtoi(v, out) || *out < min) {
        return absl::InvalidArgumentError(absl::StrCat(arg, " must be an integer >= ", min));
      }
      return absl::OkStatus();
    };
    auto number = [&](double* out) -> absl::Status {
      ASSIGN_OR_RETURN(std::string v, value());
      ASSIGN_OR_RETURN(std::vector<double> x, ParseList(arg, v, true));
      if (x.size() != 1) return absl::InvalidArgumentError(absl::StrCat(arg, ": one number"));
      *out = x[0];
      return absl::OkStatus();
    };
    Schedule& s = flags.schedule;
    if (arg == "--datasets") {
      ASSIGN_OR_RETURN(flags.datasets, value());
    } else if (arg == "--out-dir") {
      ASSIGN_OR_RETURN(flags.out_dir, value());
    } else if (arg == "--seeds") {
      RETURN_IF_ERROR(integer(&flags.seeds, 1));
      flags.seeds_given = true;
    } else if (arg == "--epsilons") {
      ASSIGN_OR_RETURN(std::string v, value());
      ASSIGN_OR_RETURN(flags.epsilons, ParseList(arg, v, true));
      flags.epsilons_given = true;
    } else if (arg == "--lambdas") {
      ASSIGN_OR_RETURN(std::string v, value());
      ASSIGN_OR_RETURN(flags.lambdas, ParseList(arg, v, false));
      flags.lambdas_given = true;
    } else if (arg == "--epochs") {
      RETURN_IF_ERROR(integer(&s.epochs, 1));
    } else if (arg == "--batch") {
      RETURN_IF_ERROR(integer(&s.batch, 0));
    } else if (arg == "--lr-theta") {
      RETURN_IF_ERROR(number(&s.lr_theta));
    } else if (arg == "--lr-w") {
      RETURN_IF_ERROR(number(&s.lr_w));
    } else if (arg == "--w-radius") {
      RETURN_IF_ERROR(number(&s.w_radius));
    } else if (arg == "--clip") {
      RETURN_IF_ERROR(number(&s.clip));
    } else if (arg == "--pfld-clip") {
      RETURN_IF_ERROR(number(&s.pfld_clip));
    } else if (arg == "--variations") {
      ASSIGN_OR_RETURN(std::string v, value());
      flags.variations = absl::StrSplit(v, ',');
      for (const std::string& id : flags.variations) {
        if (std::none_of(Variations().begin(), Variations().end(),
                         [&id](const Variation& known) { return known.id == id; })) {
          std::vector<std::string> ids;
          for (const Variation& known : Variations()) ids.push_back(known.id);
          return absl::InvalidArgumentError(absl::StrCat(
              "--variations: unknown '", id, "' (known: ", absl::StrJoin(ids, ", "), ")"));
        }
      }
    } else if (arg == "--dual-lr") {
      RETURN_IF_ERROR(number(&s.dual_lr));
    } else if (arg == "--oracle-rounds") {
      RETURN_IF_ERROR(integer(&flags.oracle_rounds, 0));
    } else if (arg == "--validate") {
      flags.validate = true;
    } else if (arg == "--quick") {
      flags.quick = true;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag ", arg));
    }
  }
  if (flags.quick) {
    flags.seeds = 1;
    flags.epsilons = {1, 9};
    flags.lambdas = {0, 2.5};
    flags.schedule.epochs = 10;
    flags.oracle_rounds = 5;
  }
  if (flags.validate) {
    // Where the choice matters most: small ε, the fairness-seeking λ.
    if (!flags.epsilons_given && !flags.quick) flags.epsilons = {1, 3};
    if (!flags.lambdas_given && !flags.quick) flags.lambdas = {1, 2.5};
    if (!flags.seeds_given && !flags.quick) flags.seeds = 2;
  }
  return flags;
}

int Main(int argc, char** argv) {
  auto flags = ParseFlags(argc, argv);
  if (!flags.ok()) {
    std::fprintf(stderr, "%s\n", std::string(flags.status().message()).c_str());
    return 2;
  }
  absl::Status status = Run(*flags);
  if (!status.ok()) {
    std::fprintf(stderr, "tradeoff_adult: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace fairvault::experiments

int main(int argc, char** argv) { return fairvault::experiments::Main(argc, argv); }
