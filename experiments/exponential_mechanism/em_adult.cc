// The exponential-mechanism fair learner (Cummings et al. 2019, Alg. 1; ALGORITHMS.md §4) on
// Adult (group = sex) against a real vault, over a family of classifiers the company builds
// itself.
//
// The family (the company's, built without the group): `--subsets` logistic regressions
// (core/learn), each on a random subset of Adult's 11 raw attributes (the eo_scores_adult
// encoding: numeric standardised, categorical one-hot; no sex or race; each attribute kept with
// probability 1/2, at least one; the subsets drawn from std::mt19937_64(--family-seed)), each
// thresholded at every cut-off of `--thresholds`: subsets × thresholds hypotheses, 1,000 by
// default, uploaded as 0/1 columns of the train table with the label.
//
// The whole family is one table upload (the label and one column per candidate; a table holds
// up to 8,192 columns, FitFairModel takes up to 5,000 hypothesis columns). For each ε and seed (a
// repetition: the vault draws fresh randomness for every job) the company calls
// FitFairModel(EXPONENTIAL_MECHANISM) over all of them (ε/2 for the released M, ε/2 for the
// selection; δ of the shift exp(−√n) as in the paper unless --em-delta).
// Each chosen candidate is evaluated on adult.test: error, TPR gap |TPR_Female − TPR_Male| (the
// utility's fairness term) and the EO violation. A run refused because the released M <= 1 (the
// shift ln(1/δ)/(ε/2) exceeds the smaller group's positives) is counted, not evaluated.
// Reference (ε → ∞): the candidate minimising the non-private train utility err + TPR gap.
//
// Usage: em_adult [--datasets DIR] [--seeds N] [--epsilons 0.25,0.5,...] [--subsets S]
//   [--thresholds 0.1,0.2,...] [--family-seed F] [--em-delta D] [--out FILE] [--md FILE]
//   [--quick]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <random>
#include <set>
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
#include "core/learn/exponential_mechanism.h"
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

struct Flags {
  std::string datasets = std::string(FAIRVAULT_SOURCE_DIR) + "/../shared/datasets";
  std::string out = "em_adult.csv";
  std::string md = "em_adult_table.md";
  int seeds = 10;
  int subsets = 100;
  uint64_t family_seed = 7;
  double em_delta = 0;
  std::vector<double> thresholds = {0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5, 0.6, 0.7, 0.8};
  std::vector<double> epsilons = {0.25, 0.5, 1, 2, 5, 10};
};

// A candidate's 0/1 decisions on the train and test rows.
struct Family {
  std::vector<std::vector<uint8_t>> train, test;
  std::vector<std::string> description;
};

absl::StatusOr<Family> BuildFamily(const AdultData& adult, const Flags& flags) {
  // Columns of each raw attribute ("workclass=Private" belongs to "workclass").
  std::map<std::string, std::vector<Eigen::Index>> by_attribute;
  std::vector<std::string> attributes;
  for (size_t j = 0; j < adult.feature_names.size(); ++j) {
    const std::string name = adult.feature_names[j].substr(0, adult.feature_names[j].find('='));
    if (!by_attribute.count(name)) attributes.push_back(name);
    by_attribute[name].push_back(static_cast<Eigen::Index>(j));
  }
  std::mt19937_64 gen(flags.family_seed);
  std::set<std::vector<int>> seen;
  Family family;
  while (static_cast<int>(seen.size()) < flags.subsets) {
    std::vector<int> subset;
    for (size_t a = 0; a < attributes.size(); ++a) {
      if (gen() >> 63) subset.push_back(static_cast<int>(a));
    }
    if (subset.empty() || !seen.insert(subset).second) continue;
    std::vector<Eigen::Index> cols;
    std::vector<std::string> names;
    for (int a : subset) {
      const auto& c = by_attribute[attributes[static_cast<size_t>(a)]];
      cols.insert(cols.end(), c.begin(), c.end());
      names.push_back(attributes[static_cast<size_t>(a)]);
    }
    Eigen::MatrixXd x_train(adult.train.x.rows(), static_cast<Eigen::Index>(cols.size()));
    Eigen::MatrixXd x_test(adult.test.x.rows(), static_cast<Eigen::Index>(cols.size()));
    for (size_t j = 0; j < cols.size(); ++j) {
      x_train.col(static_cast<Eigen::Index>(j)) = adult.train.x.col(cols[j]);
      x_test.col(static_cast<Eigen::Index>(j)) = adult.test.x.col(cols[j]);
    }
    ASSIGN_OR_RETURN(auto model, learn::FitLogisticRegression(x_train, adult.train.y,
                                                              learn::LogisticRegressionOptions()));
    const Eigen::VectorXd p_train = model.PredictProbability(x_train);
    const Eigen::VectorXd p_test = model.PredictProbability(x_test);
    for (double t : flags.thresholds) {
      std::vector<uint8_t> h_train(static_cast<size_t>(p_train.size())),
          h_test(static_cast<size_t>(p_test.size()));
      for (Eigen::Index i = 0; i < p_train.size(); ++i) h_train[i] = p_train(i) >= t ? 1 : 0;
      for (Eigen::Index i = 0; i < p_test.size(); ++i) h_test[i] = p_test(i) >= t ? 1 : 0;
      family.train.push_back(std::move(h_train));
      family.test.push_back(std::move(h_test));
      family.description.push_back(absl::StrCat("{", absl::StrJoin(names, ","), "} >= ", t));
    }
  }
  return family;
}

struct Eval {
  double error = 0, tpr_gap = 0, eo_violation = 0;
};
Eval Evaluate(const std::vector<uint8_t>& h, const LabeledRows& rows) {
  const std::vector<double> p(h.begin(), h.end());
  const Metrics m = ExpectedMetrics(p, rows.y, rows.group);
  double hits[2] = {0, 0}, pos[2] = {0, 0};
  for (size_t i = 0; i < h.size(); ++i) {
    if (rows.y[i] != 1) continue;
    pos[rows.group[i]] += 1;
    hits[rows.group[i]] += h[i];
  }
  return {m.error, std::abs(hits[0] / pos[0] - hits[1] / pos[1]), m.violation};
}

struct Row {
  double epsilon;
  int seed;
  int chosen;  // -1: refused
  double train_utility;
  Eval test;
  double released_m;
};

// --help / -h: what the program does and its flags (the file comment above has the protocol).
constexpr char kUsage[] =
    "usage: em_adult [--datasets DIR] [--seeds N] [--epsilons 0.25,0.5,...] [--subsets S]\n"
    "                [--thresholds 0.1,0.2,...] [--family-seed F] [--em-delta D] [--out FILE]\n"
    "                [--md FILE] [--quick]\n"
    "The exponential-mechanism fair learner (Cummings et al. 2019) on Adult against a real vault\n"
    "(fairvault-server on a temp SQLite file), over a family of classifiers the company builds.\n";

absl::StatusOr<Flags> ParseFlags(int argc, char** argv) {
  auto one = [](FlagReader& reader, Flags& flags) -> absl::StatusOr<bool> {
    const std::string& arg = reader.arg();
    if (arg == "--out") {
      ASSIGN_OR_RETURN(flags.out, reader.Value());
    } else if (arg == "--md") {
      ASSIGN_OR_RETURN(flags.md, reader.Value());
    } else if (arg == "--seeds" || arg == "--subsets") {
      RETURN_IF_ERROR(reader.PositiveInteger(arg == "--seeds" ? &flags.seeds : &flags.subsets));
    } else if (arg == "--family-seed") {
      ASSIGN_OR_RETURN(std::string v, reader.Value());
      if (!absl::SimpleAtoi(v, &flags.family_seed)) {
        return absl::InvalidArgumentError("--family-seed must be an integer >= 0");
      }
    } else if (arg == "--em-delta") {
      ASSIGN_OR_RETURN(std::string v, reader.Value());
      if (!absl::SimpleAtod(v, &flags.em_delta) || !(flags.em_delta > 0 && flags.em_delta < 1)) {
        return absl::InvalidArgumentError("--em-delta must be in (0, 1)");
      }
    } else if (arg == "--thresholds") {
      RETURN_IF_ERROR(reader.NumberList(&flags.thresholds, true));
    } else if (arg == "--epsilons") {
      RETURN_IF_ERROR(reader.NumberList(&flags.epsilons, true));
    } else if (arg == "--quick") {
      flags.seeds = 2;
      flags.subsets = 20;
      flags.epsilons = {0.25, 2};
    } else {
      return false;
    }
    return true;
  };
  return ReadFlags<Flags>(argc, argv, one);
}

// The study, once its flags are read.
absl::Status Run(const Flags& flags) {
  const auto start = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(const AdultData adult, LoadAdult(flags.datasets));
  ASSIGN_OR_RETURN(const Family family, BuildFamily(adult, flags));
  const size_t h = family.train.size();
  const double family_secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  // The company's own view of its candidates is non-private (it has no groups); the
  // reference uses the train groups, which only the ε → ∞ limit may.
  learn::EmLearnerInput input;
  input.y = adult.train.y;
  input.group = adult.train.group;
  input.k = 2;
  input.predictions = family.train;
  const std::vector<double> utility = learn::EmUtilities(input, 0);
  const int best =
      static_cast<int>(std::min_element(utility.begin(), utility.end()) - utility.begin());
  std::vector<double> sorted = utility;
  std::sort(sorted.begin(), sorted.end());

  ASSIGN_OR_RETURN(VaultSession vault, StartVault("em_adult", "em-lab"));
  std::vector<std::string> keys;
  for (size_t i = 0; i < adult.train.y.size(); ++i) keys.push_back(absl::StrCat("adult-", i));
  double grant = 1;
  for (double e : flags.epsilons) grant += e * flags.seeds;
  RETURN_IF_ERROR(
      AddDataset(vault, "adult", "sex", {"Female", "Male"}, keys, adult.train.group, grant));
  std::vector<std::string> names = {"label"};
  std::vector<std::vector<double>> columns = {
      std::vector<double>(adult.train.y.begin(), adult.train.y.end())};
  for (size_t j = 0; j < h; ++j) {
    names.push_back(absl::StrCat("h", j));
    columns.emplace_back(family.train[j].begin(), family.train[j].end());
  }
  // Chunks of 2,000 rows, fewer if they would pass 16 MB of doubles (at 1,001 columns they stay
  // at 2,000, 16 MB): well under the server's 64 MB message limit.
  const size_t chunk_rows =
      std::clamp<size_t>((size_t{16} << 20) / (8 * names.size()), 1, 2000);
  ASSIGN_OR_RETURN(const std::string handle,
                   UploadNumeric(vault, "adult", keys, names, columns, chunk_rows));
  columns.clear();
  const double setup_secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  std::vector<v1::FitFairModelRequest> reqs;
  std::vector<std::pair<double, int>> settings;
  for (double eps : flags.epsilons) {
    for (int seed = 0; seed < flags.seeds; ++seed) {
      v1::FitFairModelRequest req;
      req.set_idempotency_key(absl::StrCat("em-", eps, "-", seed));
      req.set_table_handle(handle);
      req.set_algorithm(v1::FAIR_MODEL_ALGORITHM_EXPONENTIAL_MECHANISM);
      req.set_label_column("label");
      for (size_t j = 1; j < names.size(); ++j) req.add_hypothesis_columns(names[j]);
      req.set_epsilon(eps);
      req.set_em_delta(flags.em_delta);
      reqs.push_back(std::move(req));
      settings.emplace_back(eps, seed);
    }
  }
  ASSIGN_OR_RETURN(auto models, RunJobs(vault, reqs, 4));
  std::vector<Row> rows;
  for (size_t i = 0; i < models.size(); ++i) {
    Row r{settings[i].first, settings[i].second, -1, 0, {}, 0};
    if (models[i].ok()) {
      r.chosen = models[i]->hypothesis_index();
      r.released_m = models[i]->released_min_positives();
      r.train_utility = utility[static_cast<size_t>(r.chosen)];
      r.test = Evaluate(family.test[static_cast<size_t>(r.chosen)], adult.test);
    } else if (models[i].status().message().find("is <= 1") == std::string::npos) {
      return models[i].status();
    }
    rows.push_back(r);
  }
  const double total_secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  std::string csv =
      "epsilon,seed,chosen,released_m,train_utility,error,tpr_gap,eo_violation\n";
  for (const Row& r : rows) {
    if (r.chosen < 0) {
      absl::StrAppend(&csv, EpsilonText(r.epsilon), ",", r.seed, ",refused,,,,,\n");
      continue;
    }
    absl::StrAppend(&csv, EpsilonText(r.epsilon), ",", r.seed, ",", r.chosen, ",",
                    r.released_m, ",",
                    absl::StrFormat("%.6f,%.6f,%.6f,%.6f", r.train_utility, r.test.error,
                                    r.test.tpr_gap, r.test.eo_violation),
                    "\n");
  }
  const Eval reference = Evaluate(family.test[static_cast<size_t>(best)], adult.test);
  std::string md = absl::StrFormat(
      "Family: %d attribute subsets × %zu thresholds = %zu candidates (train utility err + "
      "TPR gap over all: best %.4f, median %.4f, worst %.4f), all in one table and every "
      "FitFairModel job; %d seeds per ε; δ of the shift %s.\n\n",
      flags.subsets, flags.thresholds.size(), h, sorted.front(), sorted[sorted.size() / 2],
      sorted.back(), flags.seeds,
      flags.em_delta > 0 ? absl::StrCat(flags.em_delta) : "exp(−√n) (the paper's)");
  absl::StrAppend(&md,
                  "| ε | refused (M ≤ 1) | released M | train utility of the choice | test "
                  "error | test TPR gap | test EO violation |\n|---|---|---|---|---|---|---|\n");
  for (double eps : flags.epsilons) {
    std::vector<double> m, u, err, gap, eo;
    int refused = 0;
    for (const Row& r : rows) {
      if (r.epsilon != eps) continue;
      if (r.chosen < 0) {
        ++refused;
        continue;
      }
      m.push_back(r.released_m);
      u.push_back(r.train_utility);
      err.push_back(r.test.error);
      gap.push_back(r.test.tpr_gap);
      eo.push_back(r.test.eo_violation);
    }
    auto cell = [](const std::vector<double>& v, const char* fmt) {
      if (v.empty()) return std::string("—");
      const MeanStd s = Summarize(v);
      return absl::StrCat(absl::StrFormat(fmt, s.mean), " ± ", absl::StrFormat(fmt, s.std));
    };
    absl::StrAppend(&md, "| ", EpsilonText(eps), " | ", refused, "/", refused + err.size(),
                    " | ", cell(m, "%.0f"), " | ", cell(u, "%.4f"), " | ", cell(err, "%.4f"),
                    " | ", cell(gap, "%.4f"), " | ", cell(eo, "%.4f"), " |\n");
  }
  absl::StrAppend(
      &md, absl::StrFormat(
               "| ∞ (best train utility: h%d = %s) | — | — | %.4f | %.4f | %.4f | %.4f |\n",
               best, family.description[static_cast<size_t>(best)],
               utility[static_cast<size_t>(best)], reference.error, reference.tpr_gap,
               reference.eo_violation));
  absl::StrAppend(&csv, "inf,0,", best, ",0,",
                  absl::StrFormat("%.6f,%.6f,%.6f,%.6f", utility[static_cast<size_t>(best)],
                                  reference.error, reference.tpr_gap, reference.eo_violation),
                  "\n");
  absl::StrAppend(
      &md, absl::StrFormat("\n(run time %.0f s: family %.0f s, vault set-up and upload of the "
                           "%zu columns %.0f s, %zu vault jobs %.0f s)\n",
                           total_secs, family_secs, h + 1, setup_secs - family_secs,
                           reqs.size(), total_secs - setup_secs));
  RETURN_IF_ERROR(client::WriteStringToFile(flags.out, csv));
  RETURN_IF_ERROR(client::WriteStringToFile(flags.md, md));
  std::printf("%s\nwrote %s and %s\n", md.c_str(), flags.out.c_str(), flags.md.c_str());
  return absl::OkStatus();
}

int Main(int argc, char** argv) {
  return ExperimentMain("em_adult", kUsage, argc, argv, ParseFlags, Run);
}

}  // namespace
}  // namespace fairvault::experiments

int main(int argc, char** argv) { return fairvault::experiments::Main(argc, argv); }
