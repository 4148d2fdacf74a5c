// A run's results; see report.h.
#include "experiments/xian/report.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/lib/csv.h"
#include "core/util/status_macros.h"
#include "experiments/common/metrics.h"

namespace fairvault::experiments::xian {

namespace {

const RefRow* FindRef(const Benchmark& b, const std::string& method, double eps) {
  for (const RefRow& r : b.refs) {
    if (r.method == method && r.epsilon == eps) return &r;
  }
  return nullptr;
}

}  // namespace

std::string FormatTable(const BenchmarkRun& run) {
  const Benchmark& b = *run.benchmark;
  const bool with_refs = !b.refs.empty();
  std::string out = absl::StrCat("== ", b.title, " ==\n");
  for (const auto& note : b.notes) absl::StrAppend(&out, "  ", note, "\n");
  const double width = (b.grid.hi - b.grid.lo) / b.grid.k;
  absl::StrAppendFormat(&out,
                        "  k = %d bins on [%g, %g] (w = %.6g, w^2/12 = %.6g), alpha = 0, scores = "
                        "true targets (s = y)\n",
                        b.grid.k, b.grid.lo, b.grid.hi, width, width * width / 12);
  absl::StrAppendFormat(&out,
                        "  %d seeds: sklearn train_test_split(test_size=0.3, random_state=%d..%d) "
                        "reproduced exactly: %d train / %d test rows\n",
                        run.seeds.size(), run.seeds.front(), run.seeds.back(), run.n_train,
                        run.n_test);
  absl::StrAppend(
      &out,
      "  mean ± std over seeds (std: population, seed-to-seed spread); eps = inf "
      "via the core library, the others fitted through the vault and applied by the regulator\n");
  if (with_refs) {
    absl::StrAppend(&out, "  authors' = the output stored in ", b.ref_source,
                    " of github.com/rxian/fair-regression (commit 1b51ad7), cell \"Results and "
                    "baselines for alpha = 0\": same file, rows, splits (random_state 33..82), k, "
                    "alpha and eps; the paper shows these runs only as the alpha = 0 ends of the "
                    "curves of its Fig. 2\n");
  }
  absl::StrAppend(&out, "\n");
  auto header = [&](const char* first) {
    absl::StrAppendFormat(&out, "  %-8s | %-19s | %-15s", first, "test MSE", "max pairwise KS");
    if (with_refs) absl::StrAppendFormat(&out, " | %-19s | %-13s", "authors' MSE", "authors' KS");
    absl::StrAppend(&out, "\n  ", std::string(8, '-'), "-+-", std::string(19, '-'), "-+-",
                    std::string(15, '-'));
    if (with_refs) {
      absl::StrAppend(&out, "-+-", std::string(19, '-'), "-+-", std::string(13, '-'));
    }
    absl::StrAppend(&out, "\n");
  };
  auto row = [&](const std::string& label, const std::string& method, double eps) {
    auto it = run.results.find({method, eps});
    if (it == run.results.end()) return;
    std::vector<double> mse, ks;
    for (const auto& r : it->second) {
      mse.push_back(r.mse);
      ks.push_back(r.ks);
    }
    const MeanStd m = Summarize(mse), k = Summarize(ks);
    absl::StrAppendFormat(&out, "  %-8s | %.5f ± %.5f   | %.3f ± %.3f  ", label, m.mean, m.std,
                          k.mean, k.std);
    if (const RefRow* ref = with_refs ? FindRef(b, method, eps) : nullptr; ref != nullptr) {
      absl::StrAppendFormat(&out, " | %.5f ± %.5f   | %.3f ± %.3f", ref->mse, ref->mse_std,
                            ref->ks, ref->ks_std);
    } else if (with_refs) {
      absl::StrAppend(&out, " | ", std::string(19, ' '), " |");
    }
    absl::StrAppend(&out, "\n");
  };
  header("eps");
  for (double eps : Epsilons()) row(EpsilonText(eps), "fair", eps);
  // The sampler-free MSE: what the sampled MSE above averages to over the sampler's draws,
  // given each seed's fitted transport. At eps = inf it is a deterministic function of the
  // split (comparable digit for digit with any implementation of the same algorithm).
  absl::StrAppend(&out, "\n  test MSE averaged over the sampler (E over the transport rows of "
                        "(v_L - y)^2), mean ± std over seeds:");
  for (double eps : Epsilons()) {
    auto it = run.results.find({"fair", eps});
    if (it == run.results.end()) continue;
    std::vector<double> e;
    for (const auto& r : it->second) e.push_back(r.mse_expected);
    const MeanStd m = Summarize(e);
    absl::StrAppendFormat(&out, "\n    eps=%-4s %.6f ± %.5f", EpsilonText(eps), m.mean, m.std);
  }
  absl::StrAppend(&out, "\n");
  absl::StrAppend(&out,
                  "\n  checks on the same test rows: eps = inf with the GLPK LP instead of the "
                  "quantile solver (same objective to 1e-6, same sampler seed); no "
                  "post-processing; bin centres only (the authors' \"binning\": alpha = 1):\n");
  header("check");
  row("inf, LP", "fair_lp", kInf);
  row("none", "none", kInf);
  row("binning", "binning", kInf);
  // Where the time goes, per call (fit and decide include the RPC for the vault rows).
  absl::StrAppend(&out, "\n  mean time per seed:");
  for (double eps : Epsilons()) {
    auto it = run.results.find({"fair", eps});
    if (it == run.results.end()) continue;
    double fit = 0, decide = 0;
    for (const auto& r : it->second) {
      fit += r.fit_ms;
      decide += r.decide_ms;
    }
    absl::StrAppendFormat(&out, " eps=%s fit %.1f ms + decide %.1f ms;", EpsilonText(eps),
                          fit / it->second.size(), decide / it->second.size());
  }
  absl::StrAppendFormat(&out, "\n  wall time for this dataset: %.1f s\n", run.seconds);
  return out;
}

absl::Status WriteCsvs(const std::vector<BenchmarkRun>& runs, const std::string& out,
                       const std::string& sweep) {
  if (!out.empty()) {
    std::vector<std::vector<std::string>> rows;
    for (const BenchmarkRun& run : runs) {
      for (const auto& [config, results] : run.results) {
        for (size_t i = 0; i < results.size(); ++i) {
          const SeedResult& r = results[i];
          rows.push_back({run.benchmark->name, absl::StrCat(run.seeds[i]), r.method,
                          EpsilonText(r.epsilon), r.path, absl::StrFormat("%.9g", r.mse),
                          absl::StrFormat("%.9g", r.ks), absl::StrFormat("%.9g", r.mse_expected),
                          absl::StrFormat("%.9g", r.objective), absl::StrCat(r.clipped),
                          absl::StrFormat("%.3f", r.fit_ms), absl::StrFormat("%.3f", r.decide_ms)});
        }
      }
    }
    RETURN_IF_ERROR(client::WriteStringToFile(
        out, client::FormatCsv({"dataset", "seed", "method", "epsilon", "path", "mse", "ks",
                                "mse_expected", "objective", "clipped", "fit_ms", "decide_ms"},
                               rows)));
  }
  if (!sweep.empty()) {
    // The trade-off sweep for `fairvault report sweep`: one point per (dataset, epsilon), the
    // means over the seeds, with a normal-approximation 95% confidence interval of each mean
    // (mean ± 1.96 std / sqrt(seeds)) in the optional interval columns.
    std::vector<std::vector<std::string>> rows;
    auto interval = [](const std::vector<double>& v) {
      const MeanStd m = Summarize(v);
      const double half = 1.96 * m.std / std::sqrt(static_cast<double>(v.size()));
      return std::vector<std::string>{absl::StrFormat("%.9g", m.mean - half),
                                      absl::StrFormat("%.9g", m.mean + half)};
    };
    for (const BenchmarkRun& run : runs) {
      for (double eps : Epsilons()) {
        auto it = run.results.find({"fair", eps});
        if (it == run.results.end()) continue;
        std::vector<double> mse, ks;
        for (const auto& r : it->second) {
          mse.push_back(r.mse);
          ks.push_back(r.ks);
        }
        const auto mse_ci = interval(mse), ks_ci = interval(ks);
        rows.push_back({EpsilonText(eps), absl::StrFormat("%.9g", Summarize(mse).mean),
                        absl::StrFormat("%.9g", Summarize(ks).mean), run.benchmark->name, mse_ci[0],
                        mse_ci[1], ks_ci[0], ks_ci[1]});
      }
    }
    RETURN_IF_ERROR(client::WriteStringToFile(
        sweep, client::FormatCsv({"epsilon", "error", "violation", "series", "error_lo",
                                        "error_hi", "violation_lo", "violation_hi"},
                                       rows)));
  }
  return absl::OkStatus();
}

}  // namespace fairvault::experiments::xian
