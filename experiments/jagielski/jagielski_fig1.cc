// Jagielski et al. (2019), Fig. 1: the DP-oracle learner (in-processing, Alg. 3) against the DP
// equalized-odds post-processor (Alg. 1) on Communities & Crime, then the same comparison on
// Adult, against a real vault (fairvault-server on a temp SQLite file, through the client
// library). ALGORITHMS.md §1 and §3.
//
// Data, following the authors' released code (github.com/SaeedSharifiMa/FairDP, read, not
// copied):
// * Communities (`communities/communities.csv`, the GerryFair/FairDP file, label already
//   binarized at the 70th percentile of ViolentCrimesPerPop). FairDP's post-processing
//   experiment (dp_postproc_experiments.py → import_data.clean_communities(1)) takes as the
//   protected attribute the first column marked sensitive in communities_protected.csv,
//   racepctblack, binarized as 1{racepctblack > median over all rows}, drops it from X and keeps
//   the other 121 columns unscaled (they are already in [0, 1]; missing values were filled with 0,
//   there are none in our file). We do exactly that, for both algorithms. Their in-processing
//   script (marginal_fair.py) instead constrains 18 sensitive columns marginally (each binarized
//   at its mean, all 18 dropped from X); the vault's learner constrains one (joint) attribute,
//   so we use the post-processing script's single group for both algorithms, which is also the
//   only way to compare them on the same fairness notion.
//   Splits: FairDP evaluates in-sample; we draw `--seeds` random 70/30 train/test splits
//   (std::mt19937_64(seed) shuffle) and evaluate on the test rows.
// * Adult: adult.data to train, adult.test to test, group = sex, the eo_scores_adult encoding
//   (numeric standardised, categorical one-hot, no sex or race). The split is Adult's official
//   one; seeds are repetitions (fresh vault noise).
//
// Protocol per seed:
// * Post-processing: the company fits a non-private logistic regression (core/learn) on the
//   train features, uploads its 0/1 train predictions with the labels, and calls
//   FitEqualizedOddsPostProcessor (γ = 0, β = 0.05, min_group_count = 0: the paper's LP); the
//   regulator, who holds the test rows' groups, applies it. ε = ∞: the same LP on exact counts.
// * In-processing: FitFairModel(DP_ORACLE_LEARNER) on the train features (γ = 0, B, η, clip_l1
//   from the flags; masses share 0.1, δ = 0: pure composition), T ∈ `--rounds`; the company
//   applies the mixture to test rows with client/apply/model_apply. ε = ∞: core RunDpOracleLearner
//   with zero noise (the vault refuses ε = ∞).
// * Metrics on the test rows from each row's probability of a positive decision (no draws):
//   expected error and EO violation max_y |P(Ŷ=1 | A=0, y) − P(Ŷ=1 | A=1, y)|.
//
// Usage: jagielski_fig1 [--datasets DIR] [--seeds N] [--adult-seeds N] [--epsilons 0.5,1,...]
//   [--rounds 10,50,200] [--lambda-bound B] [--learning-rate ETA] [--clip-l1 C]
//   [--adult-clip-l1 C] [--only communities|adult] [--out-dir DIR] [--quick]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
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
#include "client/lib/csv.h"
#include "core/dp/integer_noise.h"
#include "core/learn/fair_game.h"
#include "core/learn/logistic_regression.h"
#include "core/util/status_macros.h"
#include "experiments/common/experiment_cli.h"
#include "experiments/common/datasets.h"
#include "experiments/common/metrics.h"
#include "experiments/common/vault_session.h"

#ifndef FAIRVAULT_SOURCE_DIR
#error "FAIRVAULT_SOURCE_DIR must be defined by the build"
#endif

namespace fairvault::experiments {
namespace {

namespace learn = ::fairvault::core::learn;

constexpr double kInf = std::numeric_limits<double>::infinity();

struct Flags {
  std::string datasets = std::string(FAIRVAULT_SOURCE_DIR) + "/../shared/datasets";
  std::string out_dir = ".";
  int seeds = 10;
  int adult_seeds = 3;
  std::vector<double> epsilons = {0.5, 1, 2, 5, 10, 100, 1000};
  std::vector<int> rounds = {10, 50, 200};
  double lambda_bound = 1;
  double learning_rate = 1;
  double clip_l1 = 0;
  double adult_clip_l1 = 10;
  std::string only;
  bool quick = false;
};

// One data set as the experiment sees it: features, labels and groups of every row, and the
// names of the group categories (group 0 is the constraints' reference).
struct Problem {
  std::string name, attribute;
  std::vector<std::string> categories;
  LabeledRows rows;        // communities: all rows; adult: train rows
  LabeledRows fixed_test;  // adult: the official test rows
  bool has_fixed_test = false;
  double clip_l1 = 0;
  std::string description;
};

absl::StatusOr<Problem> LoadCommunities(const std::string& dir) {
  const std::string path = dir + "/communities/communities.csv";
  ASSIGN_OR_RETURN(client::CsvTable t, client::ReadCsvFile(path));
  ASSIGN_OR_RETURN(size_t black, t.ColumnIndex("racepctblack"));
  ASSIGN_OR_RETURN(size_t label, t.ColumnIndex("ViolentCrimesPerPop"));
  std::vector<size_t> features;
  for (size_t c = 0; c < t.header.size(); ++c) {
    // The pandas row index (unnamed: the reader calls it @1) is not a feature.
    if (t.header[c].empty() || t.header[c][0] == '@' || c == black || c == label) continue;
    features.push_back(c);
  }
  Problem p;
  p.name = "communities";
  p.attribute = "racepctblack";
  p.categories = {"low", "high"};  // racepctblack <= median, > median
  const auto n = static_cast<Eigen::Index>(t.rows.size());
  p.rows.x.resize(n, static_cast<Eigen::Index>(features.size()));
  std::vector<double> b(t.rows.size());
  for (Eigen::Index r = 0; r < n; ++r) {
    const auto& row = t.rows[static_cast<size_t>(r)];
    for (size_t j = 0; j < features.size(); ++j) {
      double v = 0;
      if (!absl::SimpleAtod(row[features[j]], &v)) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": bad number in ", t.header[features[j]]));
      }
      p.rows.x(r, static_cast<Eigen::Index>(j)) = v;
    }
    double y = 0;
    if (!absl::SimpleAtod(row[black], &b[static_cast<size_t>(r)]) ||
        !absl::SimpleAtod(row[label], &y) || (y != 0 && y != 1)) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": bad group or label"));
    }
    p.rows.y.push_back(static_cast<int>(y));
  }
  std::vector<double> sorted = b;
  std::sort(sorted.begin(), sorted.end());
  const size_t m = sorted.size();
  const double median = m % 2 ? sorted[m / 2] : (sorted[m / 2 - 1] + sorted[m / 2]) / 2;
  for (double v : b) p.rows.group.push_back(v > median ? 1 : 0);
  p.description =
      absl::StrFormat("%zu rows, %zu features (racepctblack removed), group 1{racepctblack > %g}",
                      m, features.size(), median);
  return p;
}

absl::StatusOr<Problem> LoadAdultProblem(const std::string& dir, double clip_l1) {
  ASSIGN_OR_RETURN(AdultData adult, LoadAdult(dir));
  Problem p;
  p.name = "adult";
  p.attribute = "sex";
  p.categories = {"Female", "Male"};
  p.rows = std::move(adult.train);
  p.fixed_test = std::move(adult.test);
  p.has_fixed_test = true;
  p.clip_l1 = clip_l1;
  p.description = absl::StrFormat("%lld train rows, %lld test rows, %lld features, group = sex",
                                  static_cast<long long>(p.rows.x.rows()),
                                  static_cast<long long>(p.fixed_test.x.rows()),
                                  static_cast<long long>(p.rows.x.cols()));
  return p;
}

LabeledRows Take(const LabeledRows& all, const std::vector<int>& idx) {
  LabeledRows out;
  out.x.resize(static_cast<Eigen::Index>(idx.size()), all.x.cols());
  for (size_t i = 0; i < idx.size(); ++i) {
    out.x.row(static_cast<Eigen::Index>(i)) = all.x.row(idx[i]);
    out.y.push_back(all.y[static_cast<size_t>(idx[i])]);
    out.group.push_back(all.group[static_cast<size_t>(idx[i])]);
  }
  return out;
}

struct Row {
  std::string method;  // base_lr, postprocessor, dp_oracle_learner
  double epsilon;
  int rounds;
  int seed;
  Metrics m;
};

// ε = ∞ reference of the learner: the same game, no noise (core library).
absl::StatusOr<v1::FairModel> ExactLearner(const LabeledRows& train, const Flags& flags,
                                           double clip_l1, int rounds) {
  ASSIGN_OR_RETURN(learn::GameData data, learn::BuildGameData(train.x, train.y, train.group, 2,
                                                              clip_l1, /*intercept=*/true));
  learn::LearnerOptions options;
  options.rounds = rounds;
  options.lambda_bound = flags.lambda_bound;
  options.learning_rate = flags.learning_rate;
  options.gamma = 0;
  const learn::NoiseFactory zero =
      [](double) -> absl::StatusOr<std::unique_ptr<core::dp::IntegerNoise>> {
    return core::dp::MakeZeroNoise();
  };
  std::mt19937_64 gen(1);
  ASSIGN_OR_RETURN(
      learn::LearnerResult result,
      learn::RunDpOracleLearner(data, options, learn::LearnerPlan{1, 1}, zero, gen, nullptr));
  v1::FairModel model;
  v1::FeaturePreprocessing* f = model.mutable_features();
  for (const auto& name : FeatureNames(train.x.cols())) f->add_feature_columns(name);
  f->set_clip_l1(clip_l1);
  f->set_intercept(true);
  for (const Eigen::VectorXd& w : result.components) {
    v1::LinearClassifier* c = model.add_components();
    for (Eigen::Index j = 0; j < w.size(); ++j) c->add_weights(w(j));
  }
  return model;
}

absl::StatusOr<std::vector<Row>> RunProblem(VaultSession& vault, const Problem& problem,
                                            const Flags& flags) {
  const int seeds = problem.has_fixed_test ? flags.adult_seeds : flags.seeds;
  const auto n = static_cast<int>(problem.rows.y.size());
  std::vector<std::string> keys;
  for (int i = 0; i < n; ++i) keys.push_back(absl::StrCat(problem.name, "-", i));
  double grant = 1;
  for (double e : flags.epsilons) grant += e * (1 + static_cast<double>(flags.rounds.size()));
  grant *= seeds;
  RETURN_IF_ERROR(AddDataset(vault, problem.name, problem.attribute, problem.categories, keys,
                             problem.rows.group, grant));
  std::vector<Row> rows;
  const std::vector<std::string> features = FeatureNames(problem.rows.x.cols());
  std::string adult_handle;
  for (int seed = 0; seed < seeds; ++seed) {
    const auto start = std::chrono::steady_clock::now();
    // The split: train rows are the company's table; the test rows' groups stay local.
    std::vector<int> train_idx, test_idx;
    LabeledRows train, test;
    if (problem.has_fixed_test) {
      train_idx.resize(static_cast<size_t>(n));
      std::iota(train_idx.begin(), train_idx.end(), 0);
      train = problem.rows;
      test = problem.fixed_test;
    } else {
      std::vector<int> perm(static_cast<size_t>(n));
      std::iota(perm.begin(), perm.end(), 0);
      std::mt19937_64 shuffle(static_cast<uint64_t>(seed));
      std::shuffle(perm.begin(), perm.end(), shuffle);
      const auto n_test = static_cast<size_t>(std::ceil(0.3 * n));
      test_idx.assign(perm.begin(), perm.begin() + static_cast<long>(n_test));
      train_idx.assign(perm.begin() + static_cast<long>(n_test), perm.end());
      std::sort(train_idx.begin(), train_idx.end());
      train = Take(problem.rows, train_idx);
      test = Take(problem.rows, test_idx);
    }
    // The company's base model (non-private: its own data).
    ASSIGN_OR_RETURN(auto lr, learn::FitLogisticRegression(train.x, train.y,
                                                           learn::LogisticRegressionOptions()));
    const std::vector<int> train_pred = lr.Predict(train.x), test_pred = lr.Predict(test.x);
    {
      std::vector<double> p(test_pred.begin(), test_pred.end());
      rows.push_back({"base_lr", kInf, 0, seed, ExpectedMetrics(p, test.y, test.group)});
    }
    std::string handle = adult_handle;
    if (handle.empty()) {
      std::vector<std::string> table_keys, names = features;
      for (int i : train_idx) table_keys.push_back(keys[static_cast<size_t>(i)]);
      std::vector<std::vector<double>> columns(features.size() + 2);
      for (size_t j = 0; j < features.size(); ++j) {
        const Eigen::VectorXd col = train.x.col(static_cast<Eigen::Index>(j));
        columns[j].assign(col.data(), col.data() + col.size());
      }
      names.push_back("label");
      columns[features.size()].assign(train.y.begin(), train.y.end());
      names.push_back("prediction");
      columns[features.size() + 1].assign(train_pred.begin(), train_pred.end());
      ASSIGN_OR_RETURN(handle, UploadNumeric(vault, problem.name, table_keys, names, columns));
      if (problem.has_fixed_test) adult_handle = handle;
    }

    // Post-processor: ε = ∞ on exact counts, then one vault release per ε.
    {
      ASSIGN_OR_RETURN(EoMixing exact, ExactEoPostProcessor(train_pred, train));
      rows.push_back({"postprocessor", kInf, 0, seed,
                      ExpectedMetrics(PostProcessedProbabilities(exact, test_pred, test.group),
                                      test.y, test.group)});
    }
    for (double eps : flags.epsilons) {
      ASSIGN_OR_RETURN(
          EoMixing mixing,
          FitEoPostProcessor(vault, absl::StrCat(problem.name, "-post-", seed, "-", eps), handle,
                             "prediction", "label", eps, problem.categories));
      rows.push_back({"postprocessor", eps, 0, seed,
                      ExpectedMetrics(PostProcessedProbabilities(mixing, test_pred, test.group),
                                      test.y, test.group)});
    }

    // DP-oracle learner: ε = ∞ in the core, every finite ε × T as a vault job.
    for (int t : flags.rounds) {
      ASSIGN_OR_RETURN(v1::FairModel exact, ExactLearner(train, flags, problem.clip_l1, t));
      ASSIGN_OR_RETURN(std::vector<double> p, PositiveProbabilities(exact, test.x));
      rows.push_back({"dp_oracle_learner", kInf, t, seed, ExpectedMetrics(p, test.y, test.group)});
    }
    std::vector<v1::FitFairModelRequest> reqs;
    std::vector<std::pair<double, int>> settings;
    for (double eps : flags.epsilons) {
      for (int t : flags.rounds) {
        v1::FitFairModelRequest req;
        req.set_idempotency_key(absl::StrCat(problem.name, "-learner-", seed, "-", eps, "-", t));
        req.set_table_handle(handle);
        req.set_algorithm(v1::FAIR_MODEL_ALGORITHM_DP_ORACLE_LEARNER);
        for (const auto& f : features) req.add_feature_columns(f);
        req.set_label_column("label");
        req.set_epsilon(eps);
        req.set_gamma(0);
        req.set_rounds(t);
        req.set_lambda_bound(flags.lambda_bound);
        req.set_learning_rate(flags.learning_rate);
        req.set_clip_l1(problem.clip_l1);
        reqs.push_back(req);
        settings.emplace_back(eps, t);
      }
    }
    ASSIGN_OR_RETURN(auto models, RunJobs(vault, reqs));
    for (size_t i = 0; i < models.size(); ++i) {
      RETURN_IF_ERROR(models[i].status());
      ASSIGN_OR_RETURN(std::vector<double> p, PositiveProbabilities(*models[i], test.x));
      rows.push_back({"dp_oracle_learner", settings[i].first, settings[i].second, seed,
                      ExpectedMetrics(p, test.y, test.group)});
    }
    std::fprintf(stderr, "%s seed %d: %.1f s\n", problem.name.c_str(), seed,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return rows;
}

std::string Cell(const std::vector<Row>& rows, const std::string& method, double eps, int t) {
  std::vector<double> err, vio;
  for (const Row& r : rows) {
    if (r.method != method || r.epsilon != eps || r.rounds != t) continue;
    err.push_back(r.m.error);
    vio.push_back(r.m.violation);
  }
  if (err.empty()) return "";
  const MeanStd e = Summarize(err), v = Summarize(vio);
  return absl::StrFormat("%.3f ± %.3f / %.3f ± %.3f", e.mean, e.std, v.mean, v.std);
}

std::string Table(const Problem& problem, const std::vector<Row>& rows, const Flags& flags,
                  int seeds) {
  std::string md =
      absl::StrFormat("### %s (%s; %d seeds)\n\n", problem.name, problem.description, seeds);
  absl::StrAppend(&md, "Test error / EO violation, mean ± std over seeds. Base logistic ",
                  "regression (no fairness): ", Cell(rows, "base_lr", kInf, 0), ".\n\n");
  absl::StrAppend(&md, "| ε | post-processor (LR + Alg. 1, γ = 0) |");
  for (int t : flags.rounds) absl::StrAppend(&md, " DP-oracle learner, T = ", t, " |");
  absl::StrAppend(&md, "\n|---|---|");
  for (size_t i = 0; i < flags.rounds.size(); ++i) absl::StrAppend(&md, "---|");
  absl::StrAppend(&md, "\n");
  std::vector<double> order = flags.epsilons;
  order.push_back(kInf);
  for (double eps : order) {
    absl::StrAppend(&md, "| ", std::isinf(eps) ? "∞ (no noise)" : EpsilonText(eps), " | ",
                    Cell(rows, "postprocessor", eps, 0), " |");
    for (int t : flags.rounds)
      absl::StrAppend(&md, " ", Cell(rows, "dp_oracle_learner", eps, t), " |");
    absl::StrAppend(&md, "\n");
  }
  return md;
}

absl::StatusOr<std::vector<int>> ParseInts(const std::string& v) {
  std::vector<int> out;
  for (absl::string_view part : absl::StrSplit(v, ',')) {
    int x = 0;
    if (!absl::SimpleAtoi(part, &x) || x < 1) return absl::InvalidArgumentError("bad integer list");
    out.push_back(x);
  }
  return out;
}

// --help / -h: what the program does and its flags (the file comment above has the protocol).
constexpr char kUsage[] =
    "usage: jagielski_fig1 [--datasets DIR] [--seeds N] [--adult-seeds N] [--epsilons 0.5,1,...]\n"
    "                      [--rounds 10,50,200] [--lambda-bound B] [--learning-rate ETA]\n"
    "                      [--clip-l1 C] [--adult-clip-l1 C] [--only communities|adult]\n"
    "                      [--out-dir DIR] [--quick]\n"
    "Jagielski et al. (2019), Fig. 1: the DP-oracle learner against the DP equalized-odds\n"
    "post-processor on Communities & Crime, then Adult, against a real vault.\n";

absl::StatusOr<Flags> ParseFlags(int argc, char** argv) {
  auto one = [](FlagReader& reader, Flags& flags) -> absl::StatusOr<bool> {
    const std::string& arg = reader.arg();
    auto number = [&](double* out) -> absl::Status {
      ASSIGN_OR_RETURN(std::string v, reader.Value());
      if (!absl::SimpleAtod(v, out) || !std::isfinite(*out) || *out < 0) {
        return absl::InvalidArgumentError(absl::StrCat(arg, " must be a finite number >= 0"));
      }
      return absl::OkStatus();
    };
    if (arg == "--out-dir") {
      ASSIGN_OR_RETURN(flags.out_dir, reader.Value());
    } else if (arg == "--only") {
      ASSIGN_OR_RETURN(flags.only, reader.Value());
      if (flags.only != "communities" && flags.only != "adult") {
        return absl::InvalidArgumentError("--only communities|adult");
      }
    } else if (arg == "--seeds" || arg == "--adult-seeds") {
      RETURN_IF_ERROR(reader.PositiveInteger(arg == "--seeds" ? &flags.seeds : &flags.adult_seeds));
    } else if (arg == "--rounds") {
      ASSIGN_OR_RETURN(std::string v, reader.Value());
      ASSIGN_OR_RETURN(flags.rounds, ParseInts(v));
    } else if (arg == "--epsilons") {
      RETURN_IF_ERROR(reader.NumberList(&flags.epsilons, true));
    } else if (arg == "--lambda-bound") {
      RETURN_IF_ERROR(number(&flags.lambda_bound));
    } else if (arg == "--learning-rate") {
      RETURN_IF_ERROR(number(&flags.learning_rate));
    } else if (arg == "--clip-l1") {
      RETURN_IF_ERROR(number(&flags.clip_l1));
    } else if (arg == "--adult-clip-l1") {
      RETURN_IF_ERROR(number(&flags.adult_clip_l1));
    } else if (arg == "--quick") {
      flags.quick = true;
    } else {
      return false;
    }
    return true;
  };
  ASSIGN_OR_RETURN(Flags flags, ReadFlags<Flags>(argc, argv, one));
  if (flags.quick) {
    flags.seeds = 2;
    flags.adult_seeds = 1;
    flags.epsilons = {1, 1000};
    flags.rounds = {10};
  }
  return flags;
}

// The study, once its flags are read.
absl::Status Run(const Flags& flags) {
  const auto start = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(VaultSession vault, StartVault("jagielski_fig1", "fig1-lab"));
  std::vector<Problem> problems;
  if (flags.only != "adult") {
    ASSIGN_OR_RETURN(Problem p, LoadCommunities(flags.datasets));
    p.clip_l1 = flags.clip_l1;
    problems.push_back(std::move(p));
  }
  if (flags.only != "communities") {
    ASSIGN_OR_RETURN(Problem p, LoadAdultProblem(flags.datasets, flags.adult_clip_l1));
    problems.push_back(std::move(p));
  }
  std::string md = absl::StrFormat(
      "Learner parameters: B = %g, η = %g, γ = 0, masses share 0.1, δ = 0 (pure "
      "composition); clip_l1 = %g (communities), %g (adult); T ∈ {%s}.\n\n",
      flags.lambda_bound, flags.learning_rate, flags.clip_l1, flags.adult_clip_l1,
      absl::StrJoin(flags.rounds, ", "));
  for (const Problem& problem : problems) {
    const auto t0 = std::chrono::steady_clock::now();
    ASSIGN_OR_RETURN(std::vector<Row> rows, RunProblem(vault, problem, flags));
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::string csv = "dataset,method,epsilon,rounds,seed,error,violation\n";
    for (const Row& r : rows) {
      absl::StrAppend(&csv, problem.name, ",", r.method, ",", EpsilonText(r.epsilon), ",",
                      r.rounds, ",", r.seed, ",",
                      absl::StrFormat("%.6f,%.6f", r.m.error, r.m.violation), "\n");
    }
    const std::string path =
        absl::StrCat(flags.out_dir, "/jagielski_fig1_", problem.name, ".csv");
    RETURN_IF_ERROR(client::WriteStringToFile(path, csv));
    const std::string table =
        Table(problem, rows, flags, problem.has_fixed_test ? flags.adult_seeds : flags.seeds);
    absl::StrAppend(&md, table,
                    absl::StrFormat("\n(run time %.0f s; per seed in %s)\n\n", secs, path));
    std::printf("%s\n", table.c_str());
  }
  const std::string md_path = absl::StrCat(flags.out_dir, "/jagielski_fig1_tables.md");
  RETURN_IF_ERROR(client::WriteStringToFile(md_path, md));
  std::printf("wrote %s (total %.0f s)\n", md_path.c_str(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return absl::OkStatus();
}

int Main(int argc, char** argv) {
  return ExperimentMain("jagielski_fig1", kUsage, argc, argv, ParseFlags, Run);
}

}  // namespace
}  // namespace fairvault::experiments

int main(int argc, char** argv) { return fairvault::experiments::Main(argc, argv); }
