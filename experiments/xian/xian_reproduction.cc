// Reproduction of Xian, Li, Kamath, Zhao (2024) "Differentially private post-processing for fair
// regression", Sec. 4 / ALGORITHMS.md §2, against a real vault.
//
// Protocol (the paper's Sec. 4 "Setup" and its public code, github.com/rxian/fair-regression,
// law.ipynb and communities.ipynb): the scores are the true targets (s = y: the paper "access[es]
// the ground-truth responses and directly appl[ies] Algorithm 1"; its notebooks build the
// feature matrix only to pass it to train_test_split and fit no regressor); the splits are
// sklearn's train_test_split(test_size=0.3, random_state=seed) for seeds 33..82, reproduced
// exactly (numpy's legacy RandomState permutation); the post-processor is fitted on the train
// rows with k bins on the public range (Law k = 36 on [1, 4], Communities k = 12 on [0, 1]) and
// alpha = 0, for eps in {inf, 10, 5, 1, 0.5, 0.1}; the test MSE is mean (f(s, a) - y)^2 over the
// test rows and the violation is the max over pairs of groups of the two-sample KS distance
// between the groups' test outputs. Mean and (population) standard deviation over the seeds.
//
// The program plays both sides. As the regulator it starts the real fairvault-server on a temp
// SQLite file, creates one dataset per benchmark and imports each row's group under the key
// "<dataset>-<row>", and grants the company a budget. As the company it uploads the train rows
// (key, score) as a table and calls FitStatisticalParityPostProcessor for each finite eps;
// the regulator, who holds the test rows' groups, applies the released artifact to them and
// evaluates (the paper's f(s, a) on test data, with a floor-0 artifact as in the paper).
//
// eps = infinity cannot go through the vault (it refuses a non-finite epsilon), so those rows
// call the core library directly on the same split: exact histogram, the same solver, and the
// same sampler with a seeded generator.
//
// Usage: xian_reproduction [--datasets DIR] [--seeds N] [--first-seed S] [--quick]
//                          [--only law|communities] [--law-file bar_pass|law_data]
//                          [--out per_seed.csv] [--sweep sweep.csv] [--drop-out-of-range]
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/lib/client.h"
#include "core/postprocess/statistical_parity.h"
#include "core/util/status_macros.h"
#include "experiments/common/vault_session.h"
#include "experiments/xian/benchmarks.h"
#include "experiments/xian/evaluation.h"
#include "experiments/xian/report.h"

#ifndef FAIRVAULT_SOURCE_DIR
#error "FAIRVAULT_SOURCE_DIR must be defined by the build"
#endif

namespace fairvault::experiments::xian {
namespace {

// The authors' notebooks use random_state = 33, ..., 82 (seeds = range(33, 83)).
constexpr int kFirstPaperSeed = 33;
constexpr char kCompany[] = "xian-lab";
constexpr char kScoreColumn[] = "score";

struct Flags {
  std::string datasets = std::string(FAIRVAULT_SOURCE_DIR) + "/../shared/datasets";
  int seeds = 50;
  int first_seed = kFirstPaperSeed;
  bool quick = false;
  std::string only;
  // "bar_pass": law/bar_pass_prediction.csv, the file of the authors' code (default);
  // "law_data": law/law_data.csv, Kusner et al.'s extract (no reference numbers).
  std::string law_file = "bar_pass";
  std::string out = "xian_per_seed.csv";
  std::string sweep = "xian_sweep.csv";
  // Sensitivity check: drop the rows whose target lies outside the public range.
  bool drop_out_of_range = false;
};

// ---- The vault ----------------------------------------------------------------------------

// Company: uploads the train rows (key, score) and returns the table handle.
absl::StatusOr<std::string> UploadTrain(VaultSession& v, const Benchmark& b, const Split& split,
                                        int seed) {
  v1::TableHeader header;
  header.set_dataset(b.name);
  header.set_label(absl::StrCat("xian ", b.name, " seed ", seed, " train"));
  v1::ColumnSpec* column = header.add_columns();
  column->set_name(kScoreColumn);
  column->set_type(v1::COLUMN_TYPE_NUMERIC);
  std::vector<std::string> keys;
  std::vector<v1::ColumnValues> columns(1);
  keys.reserve(split.train.size());
  columns[0].mutable_numeric()->Reserve(static_cast<int>(split.train.size()));
  for (size_t i : split.train) {
    keys.push_back(b.keys[i]);
    columns[0].add_numeric(b.y[i]);
  }
  ASSIGN_OR_RETURN(auto uploaded, v.company->UploadTable(header, keys, columns));
  if (uploaded.rows_in_vault() != static_cast<int64_t>(keys.size())) {
    return absl::InternalError(absl::StrCat("only ", uploaded.rows_in_vault(), " of ", keys.size(),
                                            " train keys are in the vault"));
  }
  return uploaded.table_handle();
}

// The test rows post-processed as the regulator does it (it holds their groups): one draw each
// from `transport` with a generator seeded by (seed, salt); sets r's MSEs, KS and decide time.
void ApplyToTest(const pp::SpSolution& transport, const Benchmark& b, const Split& split, int seed,
                 uint64_t salt, SeedResult& r) {
  std::seed_seq seq{static_cast<uint64_t>(seed), salt};
  std::mt19937_64 gen(seq);
  std::vector<double> outputs, y_test;
  std::vector<int> g_test;
  const auto start = std::chrono::steady_clock::now();
  for (size_t i : split.test) {
    outputs.push_back(pp::SampleFairScore(transport, b.grid, b.group[i], b.grid.Bin(b.y[i]), gen));
    y_test.push_back(b.y[i]);
    g_test.push_back(b.group[i]);
  }
  r.decide_ms = MillisSince(start);
  r.mse = Mse(outputs, y_test);
  r.mse_expected = ExpectedMse(transport, b.grid, y_test, g_test);
  r.ks = MaxPairwiseKs(outputs, g_test, static_cast<int>(b.categories.size()));
}

// Company: fit through the vault; the regulator applies the artifact to the test rows.
absl::StatusOr<SeedResult> FitInVaultAndApply(VaultSession& v, const Benchmark& b,
                                              const Split& split, const std::string& table,
                                              int seed, double eps) {
  SeedResult r;
  r.method = "fair";
  r.epsilon = eps;
  r.path = "vault";
  v1::FitStatisticalParityRequest fit;
  fit.set_idempotency_key(absl::StrCat("xian-", b.name, "-seed", seed, "-eps", eps));
  fit.set_table_handle(table);
  fit.set_score_column(kScoreColumn);
  fit.set_lo(b.grid.lo);
  fit.set_hi(b.grid.hi);
  fit.set_bins(b.grid.k);
  fit.set_alpha(0);
  fit.set_epsilon(eps);
  fit.set_solver(v1::SP_SOLVER_AUTO);
  fit.set_unmatched(v1::UNMATCHED_KEYS_REJECT);
  const auto start = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(v1::FitStatisticalParityResponse fitted,
                   v.company->FitStatisticalParityPostProcessor(fit));
  r.fit_ms = MillisSince(start);
  if (std::abs(fitted.charge().cost().epsilon() - eps) > 1e-9) {
    return absl::InternalError(
        absl::StrCat("charged epsilon ", fitted.charge().cost().epsilon(), " for a fit at ", eps));
  }
  r.objective = fitted.artifact().statistical_parity().objective();
  r.clipped = fitted.scores_clipped();

  // The regulator applies the released artifact to the test rows: it holds their groups.
  // (Decide, the vault's own decision path, refuses a post-processor fitted without a
  // decision floor: at floor 0 some decisions reveal a subject's group exactly.)
  pp::SpSolution transport;
  for (const auto& g : fitted.artifact().statistical_parity().groups()) {
    transport.transport.emplace_back(g.transport().begin(), g.transport().end());
  }
  ApplyToTest(transport, b, split, seed, 0xdec1de, r);
  return r;
}

// eps = infinity: the core library on the exact histogram of the same train rows, and the same
// sampler driven by a seeded generator.
// `solver` kAuto is what the vault uses (the quantile solver at alpha = 0); kLinearProgram is
// the §2 LP on GLPK, the paper's formulation, run as a cross-check of the solver choice.
absl::StatusOr<SeedResult> FitAndDecideExact(const Benchmark& b, const Split& split, int seed,
                                             pp::SpSolver solver) {
  SeedResult r;
  r.method = solver == pp::SpSolver::kLinearProgram ? "fair_lp" : "fair";
  r.epsilon = kInf;
  r.path = "core";
  const int num_groups = static_cast<int>(b.categories.size());
  std::vector<double> y_train;
  std::vector<int> g_train;
  for (size_t i : split.train) {
    y_train.push_back(b.y[i]);
    g_train.push_back(b.group[i]);
  }
  const auto start = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(std::vector<int64_t> counts,
                   pp::HistogramCounts(y_train, g_train, num_groups, b.grid, &r.clipped));
  std::vector<double> masses(counts.size());
  for (size_t i = 0; i < counts.size(); ++i) {
    masses[i] = static_cast<double>(counts[i]) / static_cast<double>(y_train.size());
  }
  pp::SpOptions options;
  options.alpha = 0;
  options.solver = solver;
  ASSIGN_OR_RETURN(pp::SpSolution solution,
                   pp::SolveStatisticalParity(masses, num_groups, b.grid, options));
  r.fit_ms = MillisSince(start);
  r.objective = solution.objective;

  ApplyToTest(solution, b, split, seed, 0x5eed1e55, r);
  return r;
}

// Baselines on the same test rows: the raw targets (no post-processing: MSE 0, the data's own
// KS), and the bin centres alone (the discretization error the fair rows cannot go below).
std::vector<SeedResult> Baselines(const Benchmark& b, const Split& split) {
  std::vector<double> y_test, centres;
  std::vector<int> g_test;
  for (size_t i : split.test) {
    y_test.push_back(b.y[i]);
    centres.push_back(b.grid.Center(b.grid.Bin(b.y[i])));
    g_test.push_back(b.group[i]);
  }
  const int num_groups = static_cast<int>(b.categories.size());
  SeedResult none;
  none.method = "none";
  none.path = "local";
  none.mse = 0;
  none.mse_expected = 0;
  none.ks = MaxPairwiseKs(y_test, g_test, num_groups);
  SeedResult binning;
  binning.method = "binning";
  binning.path = "local";
  binning.mse = Mse(centres, y_test);
  binning.mse_expected = binning.mse;
  binning.ks = MaxPairwiseKs(centres, g_test, num_groups);
  return {none, binning};
}

// ---- The run ------------------------------------------------------------------------------

absl::StatusOr<BenchmarkRun> Run(VaultSession& v, const Benchmark& b, int first_seed, int seeds) {
  BenchmarkRun run;
  run.benchmark = &b;
  const auto start = std::chrono::steady_clock::now();
  for (int seed = first_seed; seed < first_seed + seeds; ++seed) {
    const Split split = PaperSplit(b.y.size(), static_cast<uint32_t>(seed));
    run.n_train = split.train.size();
    run.n_test = split.test.size();
    run.seeds.push_back(seed);
    for (SeedResult& r : Baselines(b, split)) run.results[{r.method, r.epsilon}].push_back(r);
    ASSIGN_OR_RETURN(SeedResult exact, FitAndDecideExact(b, split, seed, pp::SpSolver::kAuto));
    run.results[{"fair", kInf}].push_back(exact);
    ASSIGN_OR_RETURN(SeedResult lp,
                     FitAndDecideExact(b, split, seed, pp::SpSolver::kLinearProgram));
    if (std::abs(lp.objective - exact.objective) > 1e-6) {
      return absl::InternalError(absl::StrCat("seed ", seed, ": the LP objective ", lp.objective,
                                              " differs from the quantile solver's ",
                                              exact.objective));
    }
    run.results[{"fair_lp", kInf}].push_back(lp);
    ASSIGN_OR_RETURN(std::string table, UploadTrain(v, b, split, seed));
    for (double eps : Epsilons()) {
      if (std::isinf(eps)) continue;
      ASSIGN_OR_RETURN(SeedResult r, FitInVaultAndApply(v, b, split, table, seed, eps));
      if (r.clipped != exact.clipped) {
        return absl::InternalError(absl::StrCat("the vault clipped ", r.clipped,
                                                " train scores, the core library ", exact.clipped));
      }
      run.results[{"fair", eps}].push_back(r);
    }
  }
  run.seconds = MillisSince(start) / 1000;
  std::fprintf(stderr, "%s: %d seeds done in %.1f s\n", b.name.c_str(), seeds, run.seconds);
  return run;
}

absl::StatusOr<Flags> ParseFlags(int argc, char** argv) {
  Flags flags;
  bool seeds_set = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    const size_t eq = arg.find('=');
    const bool has_inline = eq != std::string::npos;
    if (has_inline) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    }
    auto next = [&]() -> absl::StatusOr<std::string> {
      if (has_inline) return value;
      if (i + 1 >= argc) return absl::InvalidArgumentError(absl::StrCat(arg, " needs a value"));
      return std::string(argv[++i]);
    };
    if (arg == "--quick") {
      flags.quick = true;
    } else if (arg == "--drop-out-of-range") {
      flags.drop_out_of_range = true;
    } else if (arg == "--datasets") {
      ASSIGN_OR_RETURN(flags.datasets, next());
    } else if (arg == "--seeds") {
      ASSIGN_OR_RETURN(std::string text, next());
      if (!absl::SimpleAtoi(text, &flags.seeds) || flags.seeds < 1 || flags.seeds > 10000) {
        return absl::InvalidArgumentError(
            absl::StrCat("--seeds must be an integer in [1, 10000] (got '", text, "')"));
      }
      seeds_set = true;
    } else if (arg == "--first-seed") {
      ASSIGN_OR_RETURN(std::string text, next());
      if (!absl::SimpleAtoi(text, &flags.first_seed) || flags.first_seed < 0 ||
          flags.first_seed > 1000000) {
        return absl::InvalidArgumentError(
            absl::StrCat("--first-seed must be an integer in [0, 1000000] (got '", text, "')"));
      }
    } else if (arg == "--law-file") {
      ASSIGN_OR_RETURN(flags.law_file, next());
      if (flags.law_file != "bar_pass" && flags.law_file != "law_data") {
        return absl::InvalidArgumentError("--law-file must be 'bar_pass' or 'law_data'");
      }
    } else if (arg == "--only") {
      ASSIGN_OR_RETURN(flags.only, next());
      if (flags.only != "law" && flags.only != "communities") {
        return absl::InvalidArgumentError("--only must be 'law' or 'communities'");
      }
    } else if (arg == "--out") {
      ASSIGN_OR_RETURN(flags.out, next());
    } else if (arg == "--sweep") {
      ASSIGN_OR_RETURN(flags.sweep, next());
    } else if (arg == "--help" || arg == "-h") {
      return absl::CancelledError(
          "usage: xian_reproduction [--datasets DIR] [--seeds N] [--first-seed S] [--quick]\n"
          "         [--only law|communities] [--law-file bar_pass|law_data]\n"
          "         [--out per_seed.csv] [--sweep sweep.csv] [--drop-out-of-range]\n"
          "  --datasets    folder with law/ and communities/ (default: <repo>/../shared/datasets)\n"
          "  --seeds       splits (default 50; 3 with --quick), random_state S, S+1, ...\n"
          "  --first-seed  S (default 33: the authors' seeds are 33..82)\n"
          "  --law-file    bar_pass: law/bar_pass_prediction.csv, the authors' file (default);\n"
          "                law_data: law/law_data.csv, Kusner et al.'s extract (no reference)\n"
          "  --out         per-seed results CSV ('' to skip; default xian_per_seed.csv)\n"
          "  --sweep       sweep CSV for `fairvault report sweep` (default xian_sweep.csv)\n"
          "  --drop-out-of-range  drop rows whose target is outside the public range (a\n"
          "                sensitivity check; by default every row is kept, as in the paper)");
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag '", arg, "' (see --help)"));
    }
  }
  if (flags.quick && !seeds_set) flags.seeds = 3;
  return flags;
}

int Main(int argc, char** argv) {
  auto flags = ParseFlags(argc, argv);
  if (absl::IsCancelled(flags.status())) {
    std::printf("%s\n", std::string(flags.status().message()).c_str());
    return 0;
  }
  if (!flags.ok()) {
    std::fprintf(stderr, "xian_reproduction: %s\n", flags.status().ToString().c_str());
    return 2;
  }
  const auto start = std::chrono::steady_clock::now();
  std::vector<Benchmark> benchmarks;
  for (auto [name, load] :
       {std::make_pair("law", flags->law_file == "law_data" ? &LoadLawKusner : &LoadLawBarPass),
        std::make_pair("communities", &LoadCommunities)}) {
    if (!flags->only.empty() && flags->only != name) continue;
    auto b = load(flags->datasets);
    if (!b.ok()) {
      std::fprintf(stderr, "xian_reproduction: loading %s: %s\n", name,
                   b.status().ToString().c_str());
      return 1;
    }
    DescribeData(*b, flags->drop_out_of_range);
    benchmarks.push_back(*std::move(b));
  }

  auto vault = StartVault("xian", kCompany);
  if (!vault.ok()) {
    std::fprintf(stderr, "xian_reproduction: starting the vault: %s\n",
                 vault.status().ToString().c_str());
    return 1;
  }
  // Every fit of the run: seeds x (10 + 5 + 1 + 0.5 + 0.1), with room to spare.
  double per_seed = 0;
  for (double eps : Epsilons()) per_seed += std::isinf(eps) ? 0 : eps;
  const double grant = std::ceil(flags->seeds * per_seed) + 1;
  std::printf(
      "Xian et al. (2024) reproduction: %d seeds, eps in {inf, 10, 5, 1, 0.5, 0.1}, alpha = 0\n\n",
      flags->seeds);
  std::vector<BenchmarkRun> runs;
  for (const Benchmark& b : benchmarks) {
    if (auto s = AddDataset(*vault, b.name, b.attribute, b.categories, b.keys, b.group, grant);
        !s.ok()) {
      std::fprintf(stderr, "xian_reproduction: loading %s into the vault: %s\n", b.name.c_str(),
                   s.ToString().c_str());
      return 1;
    }
    auto run = Run(*vault, b, flags->first_seed, flags->seeds);
    if (!run.ok()) {
      std::fprintf(stderr, "xian_reproduction: %s: %s\n", b.name.c_str(),
                   run.status().ToString().c_str());
      return 1;
    }
    std::string table = FormatTable(*run);
    v1::GetBudgetRequest budget_req;
    budget_req.set_dataset(b.name);
    auto budget = vault->company->GetBudget(budget_req);
    if (!budget.ok() || budget->budgets_size() != 1) {
      std::fprintf(stderr, "xian_reproduction: reading the budget on %s: %s\n", b.name.c_str(),
                   budget.status().ToString().c_str());
      return 1;
    }
    absl::StrAppendFormat(&table, "  company budget on '%s': %g of %g spent over %d releases\n\n",
                          b.name, budget->budgets(0).epsilon_spent(),
                          budget->budgets(0).epsilon_granted(), budget->budgets(0).releases());
    std::printf("%s", table.c_str());
    std::fflush(stdout);
    runs.push_back(*std::move(run));
  }
  if (auto s = WriteCsvs(runs, flags->out, flags->sweep); !s.ok()) {
    std::fprintf(stderr, "xian_reproduction: %s\n", s.ToString().c_str());
    return 1;
  }
  std::printf("total wall time: %.1f s\n", MillisSince(start) / 1000);
  return 0;
}

}  // namespace
}  // namespace fairvault::experiments::xian

int main(int argc, char** argv) { return fairvault::experiments::xian::Main(argc, argv); }
