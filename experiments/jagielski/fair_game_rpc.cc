// The fair-ERM game (Jagielski et al. 2019, Alg. 3; ALGORITHMS.md §3) played by a company
// through the vault's RPCs only, as a data scientist without the protected attribute would:
//
//   1. upload its table (features, label) once;
//   2. release the group-label masses q̂ once: NoisyCounts over [label] (ε_q);
//   3. for t = 1..T:
//        λ_t = B·exp(θ)/(1 + Σ exp(θ))                          (the auditor, locally)
//        h_t = BestResponse(λ_t, masses_key, ε₀)                (one charged release)
//        predictions of h_t on its own rows                     (client/apply/model_apply, locally)
//        upload (key, pred, label); NoisyCounts over [pred, label] (ε₀)
//        r_t = noisy FP/TP gaps over q̂·n, θ += η·r_t          (locally)
//   4. output the uniform mixture of h_1..h_T and apply it locally.
//
// The same game is then submitted as one managed job (FitFairModel, dp_oracle_learner) with the
// same total ε, T, B and η, to show that the two paths agree. The regulator (who holds the test
// rows' sex) evaluates both on adult.test: expected error and equalized-odds violation.
//
// Usage: fair_game_rpc [--datasets DIR] [--rounds T] [--epsilon E] [--rows N] [--lambda-bound B]
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/util/status_macros.h"
#include "experiments/common/experiment_cli.h"
#include "experiments/common/datasets.h"
#include "experiments/common/metrics.h"
#include "experiments/common/vault_session.h"

namespace fairvault::experiments {
namespace {

struct Options {
  std::string datasets = FAIRVAULT_SOURCE_DIR "/../shared/datasets";
  int rounds = 10;
  double epsilon = 4;
  int rows = 0;  // 0: every train row
  double lambda_bound =
      1;  // B = 1: the experiments' choice (experiments/jagielski/results/jagielski_fig1.md)
  double learning_rate = 1;
  double gamma = 0.02;
  double masses_share = 0.1;
};

absl::Status Run(const Options& o) {
  ASSIGN_OR_RETURN(AdultData adult, LoadAdult(o.datasets));
  LabeledRows train = adult.train;
  if (o.rows > 0 && o.rows < train.x.rows()) {
    train.x.conservativeResize(o.rows, Eigen::NoChange);
    train.y.resize(o.rows);
    train.group.resize(o.rows);
  }
  const int64_t n = train.x.rows();
  std::vector<std::string> keys;
  for (int64_t i = 0; i < n; ++i) keys.push_back(absl::StrCat("person-", i));

  ASSIGN_OR_RETURN(VaultSession v, StartVault("fair_game_rpc", "acme"));
  RETURN_IF_ERROR(
      AddDataset(v, "adult", "sex", {"Female", "Male"}, keys, train.group, 2 * o.epsilon + 1));
  std::vector<std::vector<double>> columns;
  std::vector<std::string> names = adult.feature_names;
  for (Eigen::Index j = 0; j < train.x.cols(); ++j) {
    columns.emplace_back(train.x.col(j).data(), train.x.col(j).data() + n);
  }
  columns.emplace_back(train.y.begin(), train.y.end());
  names.push_back("label");
  ASSIGN_OR_RETURN(const std::string table, UploadNumeric(v, "adult", keys, names, columns));

  // The budget: q̂ once, then 2T releases of ε₀ (δ = 0 grant: basic composition).
  const double eps_q = o.masses_share * o.epsilon;
  const double eps_round = (o.epsilon - eps_q) / (2 * o.rounds);
  std::printf(
      "company-driven game: n = %lld, d = %zu, T = %d, epsilon = %g (q̂ %g, per release %g)\n",
      static_cast<long long>(n), adult.feature_names.size(), o.rounds, o.epsilon, eps_q, eps_round);

  // 2. The masses.
  v1::NoisyCountsRequest masses_req;
  masses_req.set_idempotency_key("masses");
  masses_req.set_table_handle(table);
  masses_req.add_columns("label");
  masses_req.set_epsilon(eps_q);
  ASSIGN_OR_RETURN(v1::NoisyCountsResponse masses_resp, v.company->NoisyCounts(masses_req));
  std::map<std::pair<std::string, std::string>, double> mass;  // (group, label) -> q̂·n
  for (const v1::CountCell& c : masses_resp.cells()) {
    mass[{c.group(), c.values(0)}] = std::max<double>(c.noisy_count(), 1);
  }

  // 3. The rounds.
  std::vector<double> theta(4, 0), lambda(4, 0);
  v1::FairModel mixture;
  for (int t = 0; t < o.rounds; ++t) {
    double denominator = 1;
    for (double th : theta) denominator += std::exp(th);
    for (int c = 0; c < 4; ++c) lambda[c] = o.lambda_bound * std::exp(theta[c]) / denominator;
    v1::BestResponseRequest br;
    br.set_idempotency_key(absl::StrCat("br-", t));
    br.set_table_handle(table);
    for (const auto& f : adult.feature_names) br.add_feature_columns(f);
    br.set_label_column("label");
    br.set_masses_key("masses");
    for (double l : lambda) br.add_lambda(l);
    br.set_lambda_bound(o.lambda_bound);
    br.set_gamma(o.gamma);
    br.set_oracle(v1::BEST_RESPONSE_ORACLE_LEAST_SQUARES);
    br.set_epsilon(eps_round);
    auto response = v.company->BestResponse(br);
    RETURN_IF_ERROR(response.status());
    const v1::FairModel& model = response->artifact().fair_model();
    if (t == 0) {
      mixture = model;
      mixture.clear_components();
      mixture.set_algorithm("company_game");
    }
    *mixture.add_components() = model.components(0);

    // The company applies h_t to its own rows and asks for the noisy (pred, label, group) table.
    ASSIGN_OR_RETURN(std::vector<double> p, PositiveProbabilities(model, train.x));
    ASSIGN_OR_RETURN(const std::string pred_table,
                     UploadNumeric(v, "adult", keys, {"pred", "label"},
                                   {p, std::vector<double>(train.y.begin(), train.y.end())}));
    v1::NoisyCountsRequest counts;
    counts.set_idempotency_key(absl::StrCat("violations-", t));
    counts.set_table_handle(pred_table);
    counts.add_columns("pred");
    counts.add_columns("label");
    counts.set_epsilon(eps_round);
    auto counted = v.company->NoisyCounts(counts);
    RETURN_IF_ERROR(counted.status());
    std::map<std::pair<std::string, std::string>, double> rate;  // (group, label) -> P(h=1)
    for (const v1::CountCell& c : counted->cells()) {
      if (c.values(0) != "1") continue;
      const auto key = std::make_pair(c.group(), c.values(1));
      rate[key] = std::clamp(c.noisy_count() / mass[key], 0.0, 1.0);
    }
    // Female is the reference group 0 of the vault's constraint order (its first category).
    const double fp_gap = rate[{"Male", "0"}] - rate[{"Female", "0"}];
    const double tp_gap = rate[{"Male", "1"}] - rate[{"Female", "1"}];
    const double r[4] = {fp_gap - o.gamma, -fp_gap - o.gamma, tp_gap - o.gamma, -tp_gap - o.gamma};
    for (int c = 0; c < 4; ++c) theta[c] += o.learning_rate * r[c];
    std::printf("  round %2d: lambda = (%.2f %.2f %.2f %.2f), noisy FP gap %+.3f, TP gap %+.3f\n",
                t + 1, lambda[0], lambda[1], lambda[2], lambda[3], fp_gap, tp_gap);
  }

  // 4. The managed learner with the same parameters, one job.
  v1::FitFairModelRequest fit;
  fit.set_idempotency_key("managed");
  fit.set_table_handle(table);
  fit.set_algorithm(v1::FAIR_MODEL_ALGORITHM_DP_ORACLE_LEARNER);
  for (const auto& f : adult.feature_names) fit.add_feature_columns(f);
  fit.set_label_column("label");
  fit.set_epsilon(o.epsilon);
  fit.set_gamma(o.gamma);
  fit.set_rounds(o.rounds);
  fit.set_lambda_bound(o.lambda_bound);
  fit.set_learning_rate(o.learning_rate);
  fit.set_masses_share(o.masses_share);
  ASSIGN_OR_RETURN(auto jobs, RunJobs(v, {fit}, 1));
  RETURN_IF_ERROR(jobs[0].status());

  std::printf("\non adult.test (%lld rows; the regulator evaluates with the test rows' sex):\n",
              static_cast<long long>(adult.test.x.rows()));
  for (const auto& [label, model] : std::vector<std::pair<std::string, v1::FairModel>>{
           {"company-driven game", mixture}, {"managed dp_oracle_learner", *jobs[0]}}) {
    ASSIGN_OR_RETURN(std::vector<double> p, PositiveProbabilities(model, adult.test.x));
    const Metrics m = ExpectedMetrics(p, adult.test.y, adult.test.group);
    std::printf("  %-26s error %.4f  EO violation %.4f  (%d components)\n", label.c_str(), m.error,
                m.violation, model.components_size());
  }
  auto budget = v.company->GetBudget([] {
    v1::GetBudgetRequest b;
    b.set_dataset("adult");
    return b;
  }());
  RETURN_IF_ERROR(budget.status());
  std::printf("budget spent: %.6f of %.6f (%lld releases)\n", budget->budgets(0).epsilon_spent(),
              budget->budgets(0).epsilon_granted(),
              static_cast<long long>(budget->budgets(0).releases()));
  return absl::OkStatus();
}

}  // namespace
}  // namespace fairvault::experiments

int main(int argc, char** argv) {
  constexpr char kUsage[] =
      "usage: fair_game_rpc [--datasets DIR] [--rounds T] [--epsilon E] [--rows N] "
      "[--lambda-bound B]\n"
      "The fair-ERM game (Jagielski et al. 2019, Alg. 3) played through the vault's RPCs, then\n"
      "as one managed job, against a real vault (fairvault-server on a temp SQLite file).\n";
  if (fairvault::experiments::HelpRequested(argc, argv)) {
    return fairvault::experiments::PrintUsage(kUsage);
  }
  fairvault::experiments::Options o;
  if (argc % 2 == 0) {  // every flag takes a value
    std::fprintf(stderr, "%s needs a value (see --help)\n", argv[argc - 1]);
    return 2;
  }
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    bool ok = true;
    if (flag == "--datasets") {
      o.datasets = value;
    } else if (flag == "--rounds") {
      ok = absl::SimpleAtoi(value, &o.rounds) && o.rounds > 0;
    } else if (flag == "--epsilon") {
      ok = absl::SimpleAtod(value, &o.epsilon) && o.epsilon > 0;
    } else if (flag == "--lambda-bound") {
      ok = absl::SimpleAtod(value, &o.lambda_bound) && o.lambda_bound > 0;
    } else if (flag == "--rows") {
      ok = absl::SimpleAtoi(value, &o.rows) && o.rows >= 0;
    } else {
      ok = false;
    }
    if (!ok) {
      std::fprintf(stderr, "bad flag or value: %s %s\n%s", flag.c_str(), value.c_str(), kUsage);
      return 2;
    }
  }
  const absl::Status status = fairvault::experiments::Run(o);
  if (!status.ok()) {
    std::fprintf(stderr, "fair_game_rpc: %s\n", std::string(status.message()).c_str());
    return 1;
  }
  return 0;
}
