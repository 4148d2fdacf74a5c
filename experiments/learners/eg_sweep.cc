// The exponentiated-gradient learner's settings swept on a benchmark table (issue 22): the job's
// own plan and run (server/app/models/reductions_job.h: the accountant's noise, the releases, the
// final mixture) on the train rows, without the RPC and the store, and the returned artifact
// applied to the test rows by the client's applier. How the defaults were chosen; the end-to-end
// comparison with Fairlearn goes through the vault (compare_learners.py).
//
//   build/experiments/eg_sweep --dataset adult --seeds 3 --epsilons 0.5,1,2
#include <cstdio>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "client/apply/model_apply.h"
#include "core/accounting/accountant.h"
#include "core/learn/game_data.h"
#include "experiments/common/datasets.h"
#include "experiments/common/metrics.h"
#include "server/app/models/reductions_job.h"

namespace fairvault::experiments {
namespace {

struct Setting {
  std::string name;
  int rounds;
  double bound, lambda_bound, masses_share, sums_share, clip_l1;
  v1::FinalMixture mixture;
  v1::FairnessNotion fairness;
};

std::vector<double> ParseList(const std::string& text) {
  std::vector<double> out;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    double v = 0;
    if (absl::SimpleAtod(part, &v)) out.push_back(v);
  }
  return out;
}

int Main(int argc, char** argv) {
  std::string dataset = "adult", datasets_dir = std::string(FAIRVAULT_SOURCE_DIR) + "/../shared/datasets";
  int seeds = 3;
  std::vector<double> epsilons = {0.5, 1, 2};
  double delta = 1e-6;
  std::string only;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--dataset") dataset = value;
    if (flag == "--datasets") datasets_dir = value;
    if (flag == "--seeds") seeds = std::stoi(value);
    if (flag == "--epsilons") epsilons = ParseList(value);
    if (flag == "--delta") delta = std::stod(value);
    if (flag == "--only") only = value;
  }
  const auto eo = v1::FAIRNESS_NOTION_EQUALIZED_ODDS;
  const auto lp = v1::FINAL_MIXTURE_LINEAR_PROGRAM;
  const auto avg = v1::FINAL_MIXTURE_AVERAGE;
  const auto cand = v1::FINAL_MIXTURE_CANDIDATES;
  const std::vector<Setting> settings = {
      {"c5", 200, 0.01, 100, 0.05, 0.45, 5, lp, eo},
      {"c5cand", 200, 0.01, 100, 0.05, 0.45, 5, cand, eo},
      {"c5candT50", 50, 0.01, 100, 0.05, 0.45, 5, cand, eo},
      {"c5candT100", 100, 0.01, 100, 0.05, 0.45, 5, cand, eo},
      {"c5candB10", 200, 0.01, 10, 0.05, 0.45, 5, cand, eo},
      {"c5cand_b0.03", 200, 0.03, 100, 0.05, 0.45, 5, cand, eo},
      {"c5unc", 1, 0.01, 100, 0.05, 0.45, 5, lp, eo},
      {"default", 200, 0.01, 100, 0.05, 0.45, 0, lp, eo},
      {"unconstrained", 1, 0.01, 100, 0.05, 0.45, 0, lp, eo},  // λ = 0: plain least squares
      {"average", 200, 0.01, 100, 0.05, 0.45, 0, avg, eo},
      {"B10", 200, 0.01, 10, 0.05, 0.45, 0, lp, eo},
      {"T50", 50, 0.01, 100, 0.05, 0.45, 0, lp, eo},
      {"T500", 500, 0.01, 100, 0.05, 0.45, 0, lp, eo},
      {"sums0.7", 200, 0.01, 100, 0.05, 0.7, 0, lp, eo},
      {"sums0.2", 200, 0.01, 100, 0.05, 0.2, 0, lp, eo},
      {"bound0.03", 200, 0.03, 100, 0.05, 0.45, 0, lp, eo},
      {"clip5", 200, 0.01, 100, 0.05, 0.45, 5, lp, eo},
      {"dp", 200, 0.01, 100, 0.05, 0.45, 0, lp, v1::FAIRNESS_NOTION_DEMOGRAPHIC_PARITY},
  };
  std::printf("dataset\tsetting\tepsilon\tseed\terror\teo\tdp\tpositive_rate\tsupport\n");
  for (int seed = 0; seed < seeds; ++seed) {
    auto data = LoadFairDataset(dataset, datasets_dir, 1000 + seed);
    if (!data.ok()) {
      std::cerr << data.status() << "\n";
      return 1;
    }
    std::vector<std::string> names;
    for (int j = 0; j < data->train.x.cols(); ++j) names.push_back(absl::StrCat("f", j));
    for (const Setting& s : settings) {
      if (!only.empty() && s.name != only) continue;
      auto game = core::learn::BuildGameData(data->train.x, data->train.y, data->train.group, 2,
                                             s.clip_l1, true);
      if (!game.ok()) {
        std::cerr << game.status() << "\n";
        return 1;
      }
      for (double eps : epsilons) {
        v1::FitFairModelRequest req;
        req.set_algorithm(v1::FAIR_MODEL_ALGORITHM_EXPONENTIATED_GRADIENT);
        req.set_epsilon(eps);
        req.set_rounds(s.rounds);
        req.set_gamma(s.bound);
        req.set_lambda_bound(s.lambda_bound);
        req.set_masses_share(s.masses_share);
        req.set_sums_share(s.sums_share);
        req.set_clip_l1(s.clip_l1);
        req.set_mixture(s.mixture);
        req.set_fairness(s.fairness);
        for (const std::string& n : names) req.add_feature_columns(n);
        req.set_mixture(v1::FINAL_MIXTURE_UNSPECIFIED);
        if (auto st = server::FillReductionDefaults(100000, &req); !st.ok()) {
          std::cerr << st << "\n";
          return 1;
        }
        req.set_mixture(s.mixture);
        auto micro = core::accounting::EpsilonToMicro(eps);
        auto plan = server::PlanReductionsJob(req, game->n, game->d, 2, delta, *micro);
        if (!plan.ok()) {
          std::cerr << plan.status() << "\n";
          return 1;
        }
        std::mt19937_64 gen(seed * 7919 + static_cast<uint64_t>(eps * 1000));
        v1::FairModel model;
        for (const std::string& n : names) model.mutable_features()->add_feature_columns(n);
        model.mutable_features()->set_clip_l1(s.clip_l1);
        model.mutable_features()->set_intercept(true);
        if (auto st = server::RunReductionsJob(*game, req, plan->plan, nullptr, gen, nullptr, &model);
            !st.ok()) {
          std::cerr << st << "\n";
          return 1;
        }
        auto applier = client::FairModelApplier::Create(model);
        if (!applier.ok()) {
          std::cerr << applier.status() << "\n";
          return 1;
        }
        std::vector<double> p(data->test.y.size());
        for (size_t i = 0; i < p.size(); ++i) {
          std::vector<double> row(data->test.x.cols());
          for (int j = 0; j < data->test.x.cols(); ++j) row[j] = data->test.x(i, j);
          p[i] = applier->Predict(row, nullptr)->p_positive;
        }
        const Metrics m = ExpectedMetrics(p, data->test.y, data->test.group);
        double rate = 0;
        for (double v : p) rate += v / p.size();
        std::printf("%s\t%s\t%g\t%d\t%.4f\t%.4f\t%.4f\t%.3f\t%d\n", dataset.c_str(),
                    s.name.c_str(), eps, seed, m.error, m.violation, m.dp_violation, rate,
                    model.components_size());
        std::fflush(stdout);
      }
    }
  }
  return 0;
}

}  // namespace
}  // namespace fairvault::experiments

int main(int argc, char** argv) { return fairvault::experiments::Main(argc, argv); }
