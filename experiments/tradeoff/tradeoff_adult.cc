// The privacy / fairness trade-off of the vault's fair learners on Adult (issue 10): DP-FERMI
// (ALGORITHMS.md §5), PF-LD (§6), the DP-oracle learner (§3) and the DP equalized-odds
// post-processor (§1), all through a real vault (fairvault-server on a temp SQLite file, driven
// through the client library), on the same split, the same features and the same ε.
//
// Data: adult.data to train, adult.test to test, group = sex, the shared encoding
// (common/datasets: numeric standardised, categorical one-hot, no sex or race). The split is
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
// each one charged release of ε. The models are applied to adult.test with client/apply/model_apply
// (no group needed); the post-processor needs each test row's group, which the regulator holds.
// Metrics on adult.test from each row's probability of a positive decision: expected error,
// demographic-parity violation |P(ŷ=1 | Female) − P(ŷ=1 | Male)| and equalized-odds violation
// max_y of the same gap among rows with label y. References: the logistic regression itself and
// the post-processor's LP on exact counts (ε = ∞).
//
// DP-FERMI / PF-LD schedule: the vault's accountant gives no subsampling amplification at small
// ε with batch 1024 (noise multiplier ≈ 500 at ε = 1, ../stochastic/results/dp_fermi_adult.md),
// so every step here uses all rows (full batch: z ≈ 100 at ε = 1 over 300 steps) with learning
// rates large enough for 300 full-batch steps: η_θ = 1, W radius 5, DP-FERMI clips 1. Chosen on
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
#include <string>
#include <vector>

#include "Eigen/Dense"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/lib/csv.h"
#include "core/learn/logistic_regression.h"
#include "core/util/status_macros.h"
#include "experiments/common/experiment_cli.h"
#include "experiments/common/datasets.h"
#include "experiments/common/metrics.h"
#include "experiments/common/vault_session.h"
#include "experiments/tradeoff/tradeoff_adult_arms.h"
#include "experiments/tradeoff/tradeoff_adult_report.h"

#ifndef FAIRVAULT_SOURCE_DIR
#error "FAIRVAULT_SOURCE_DIR must be defined by the build"
#endif

namespace fairvault::experiments::tradeoff {
namespace {

namespace learn = ::fairvault::core::learn;

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

// --help / -h: what the program does and its flags (the file comment above has the protocol).
constexpr char kUsage[] =
    "usage: tradeoff_adult [--datasets DIR] [--out-dir DIR] [--seeds 5] [--epsilons 0.5,1,3,9]\n"
    "                      [--lambdas 0,1,2.5,5] [--epochs 300] [--batch B (0: all rows)]\n"
    "                      [--lr-theta 1] [--lr-w 0.1] [--w-radius 5] [--clip 1] [--pfld-clip 5]\n"
    "                      [--dual-lr 0.1] [--oracle-rounds T (0: the vault's default)]\n"
    "                      [--validate [--variations id,id,...]] [--quick]\n"
    "The privacy / fairness trade-off of DP-FERMI, PF-LD, the DP-oracle learner and the DP\n"
    "equalized-odds post-processor on Adult, through a real vault (fairvault-server on a temp\n"
    "SQLite file); writes the CSVs and `fairvault report sweep` inputs into --out-dir.\n";

absl::StatusOr<Flags> ParseFlags(int argc, char** argv) {
  auto one = [](FlagReader& reader, Flags& flags) -> absl::StatusOr<bool> {
    const std::string& arg = reader.arg();
    Schedule& s = flags.schedule;
    if (arg == "--out-dir") {
      ASSIGN_OR_RETURN(flags.out_dir, reader.Value());
    } else if (arg == "--seeds") {
      RETURN_IF_ERROR(reader.Integer(&flags.seeds, 1));
      flags.seeds_given = true;
    } else if (arg == "--epsilons") {
      RETURN_IF_ERROR(reader.NumberList(&flags.epsilons, true));
      flags.epsilons_given = true;
    } else if (arg == "--lambdas") {
      RETURN_IF_ERROR(reader.NumberList(&flags.lambdas, false));
      flags.lambdas_given = true;
    } else if (arg == "--epochs") {
      RETURN_IF_ERROR(reader.Integer(&s.epochs, 1));
    } else if (arg == "--batch") {
      RETURN_IF_ERROR(reader.Integer(&s.batch, 0));
    } else if (arg == "--lr-theta") {
      RETURN_IF_ERROR(reader.Number(&s.lr_theta, true));
    } else if (arg == "--lr-w") {
      RETURN_IF_ERROR(reader.Number(&s.lr_w, true));
    } else if (arg == "--w-radius") {
      RETURN_IF_ERROR(reader.Number(&s.w_radius, true));
    } else if (arg == "--clip") {
      RETURN_IF_ERROR(reader.Number(&s.clip, true));
    } else if (arg == "--pfld-clip") {
      RETURN_IF_ERROR(reader.Number(&s.pfld_clip, true));
    } else if (arg == "--variations") {
      ASSIGN_OR_RETURN(std::string v, reader.Value());
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
      RETURN_IF_ERROR(reader.Number(&s.dual_lr, true));
    } else if (arg == "--oracle-rounds") {
      RETURN_IF_ERROR(reader.Integer(&flags.oracle_rounds, 0));
    } else if (arg == "--validate") {
      flags.validate = true;
    } else if (arg == "--quick") {
      flags.quick = true;
    } else {
      return false;
    }
    return true;
  };
  ASSIGN_OR_RETURN(Flags flags, ReadFlags<Flags>(argc, argv, one));
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
  return ExperimentMain("tradeoff_adult", kUsage, argc, argv, ParseFlags, Run);
}

}  // namespace
}  // namespace fairvault::experiments::tradeoff

int main(int argc, char** argv) { return fairvault::experiments::tradeoff::Main(argc, argv); }
