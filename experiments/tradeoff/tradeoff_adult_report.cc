// tradeoff_adult's CSV and markdown writers (tradeoff_adult_report.h).
#include "experiments/tradeoff/tradeoff_adult_report.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace fairvault::experiments::tradeoff {
namespace {

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

// "3 seeds; grant δ = 1e-05": the tables' headings.
std::string SeedsAndGrant(const Flags& flags) {
  return absl::StrFormat("%d seed%s; grant δ = %g", flags.seeds, flags.seeds == 1 ? "" : "s",
                         kDelta);
}

}  // namespace

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
      "features + intercept; %s)\n\n",
      static_cast<int>(split.train.y.size()), static_cast<int>(split.eval.y.size()),
      static_cast<int>(split.train.x.cols()), SeedsAndGrant(flags));
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
      "%s; %s)\n\n",
      static_cast<int>(split.train.y.size()), static_cast<int>(split.eval.y.size()),
      split.eval_name, SeedsAndGrant(flags));
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

}  // namespace fairvault::experiments::tradeoff
