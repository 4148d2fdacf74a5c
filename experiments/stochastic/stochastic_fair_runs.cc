// stochastic_fair_repro's uploads, jobs and summaries (stochastic_fair_runs.h).
#include "experiments/stochastic/stochastic_fair_runs.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/apply/model_apply.h"
#include "core/util/status_macros.h"

namespace fairvault::experiments::stochastic_fair {
namespace {

// Each row's decision and sigmoid under a one-logit network artifact.
absl::Status Apply(const v1::FairModel& model, const Eigen::MatrixXd& x, std::vector<int>* pred,
                   std::vector<double>* p) {
  ASSIGN_OR_RETURN(client::FairModelApplier applier, client::FairModelApplier::Create(model));
  if (!applier.is_network()) {
    return absl::InternalError("a stochastic learner's artifact is a network");
  }
  pred->assign(static_cast<size_t>(x.rows()), 0);
  p->assign(static_cast<size_t>(x.rows()), 0);
  std::vector<double> row(static_cast<size_t>(x.cols()));
  for (Eigen::Index r = 0; r < x.rows(); ++r) {
    for (Eigen::Index j = 0; j < x.cols(); ++j) row[static_cast<size_t>(j)] = x(r, j);
    ASSIGN_OR_RETURN(client::ModelPrediction out, applier.Predict(row, nullptr));
    (*pred)[static_cast<size_t>(r)] = out.decision;
    (*p)[static_cast<size_t>(r)] = out.p_positive;
  }
  return absl::OkStatus();
}

v1::FitFairModelRequest MakeRequest(const Row& r, const Uploaded& u) {
  v1::FitFairModelRequest req;
  req.set_idempotency_key(absl::StrCat(r.setting.Key(), "-", r.config.name, "-", r.epsilon, "-",
                                       r.lambda, "-", r.seed));
  req.set_table_handle(u.handle);
  req.set_algorithm(r.setting.pfld ? v1::FAIR_MODEL_ALGORITHM_PF_LD
                                   : v1::FAIR_MODEL_ALGORITHM_DP_FERMI);
  for (const auto& f : u.features) req.add_feature_columns(f);
  req.set_label_column("label");
  req.set_epsilon(r.epsilon);
  req.set_model(v1::MODEL_FAMILY_LOGISTIC_REGRESSION);
  req.set_fairness(r.setting.eo ? v1::FAIRNESS_NOTION_EQUALIZED_ODDS
                                : v1::FAIRNESS_NOTION_DEMOGRAPHIC_PARITY);
  const Config& c = r.config;
  req.set_epochs(c.epochs);
  req.set_batch_size(c.batch == 0 ? static_cast<int>(u.fit.y.size()) : c.batch);
  req.set_lr_theta(c.lr_theta);
  if (r.setting.pfld) {
    req.set_clip_theta(c.pfld_clip);
    req.set_dual_lr(c.dual_lr);
  } else {
    req.set_lr_w(c.lr_w);
    req.set_w_radius(c.w_radius);
    req.set_clip_theta(c.clip);
    req.set_clip_w(c.clip);
    req.set_fairness_lambda(r.lambda);
  }
  return req;
}

}  // namespace

absl::StatusOr<std::map<std::string, Uploaded>> LoadAll(const std::set<std::string>& names,
                                                        const std::string& datasets_dir,
                                                        uint64_t split_seed, bool tune) {
  std::map<std::string, Uploaded> out;
  for (const std::string& name : names) {
    Uploaded u;
    ASSIGN_OR_RETURN(u.data, LoadFairDataset(name, datasets_dir, split_seed));
    if (tune) {
      const auto [fit, validation] =
          SplitIndices(static_cast<int>(u.data.train.y.size()), kValidationFraction, split_seed);
      u.fit = TakeRows(u.data.train, fit);
      u.eval = TakeRows(u.data.train, validation);
    } else {
      u.fit = u.data.train;
      u.eval = u.data.test;
    }
    out.emplace(name, std::move(u));
  }
  return out;
}

double GrantFor(const std::vector<Row>& rows, const std::string& dataset) {
  double grant = 1;
  for (const Row& r : rows) {
    if (r.setting.dataset == dataset) grant += 2 * r.epsilon;
  }
  return grant;
}

absl::Status Upload(VaultSession& vault, double grant, Uploaded* u) {
  const auto n = static_cast<int>(u->fit.y.size());
  std::vector<std::string> keys;
  for (int i = 0; i < n; ++i) keys.push_back(absl::StrCat(u->data.name, "-", i));
  RETURN_IF_ERROR(AddDataset(vault, u->data.name, u->data.attribute, u->data.categories, keys,
                             u->fit.group, grant, kDelta));
  std::vector<std::string> names;
  std::vector<std::vector<double>> columns;
  for (Eigen::Index j = 0; j < u->fit.x.cols(); ++j) {
    names.push_back(absl::StrCat("f", j));
    const Eigen::VectorXd col = u->fit.x.col(j);
    columns.emplace_back(col.data(), col.data() + col.size());
  }
  u->features = names;
  names.push_back("label");
  columns.emplace_back(u->fit.y.begin(), u->fit.y.end());
  ASSIGN_OR_RETURN(u->handle, UploadNumeric(vault, u->data.name, keys, names, columns));
  return absl::OkStatus();
}

// Runs the rows' jobs (in groups, printing progress) and scores each model on its data set's
// evaluation rows.
absl::Status RunRows(VaultSession& vault, std::map<std::string, Uploaded>& data, bool objective,
                     std::vector<Row>& rows) {
  const auto start = std::chrono::steady_clock::now();
  constexpr size_t kGroup = 6;
  for (size_t first = 0; first < rows.size(); first += kGroup) {
    const size_t last = std::min(rows.size(), first + kGroup);
    std::vector<v1::FitFairModelRequest> reqs;
    for (size_t i = first; i < last; ++i) {
      reqs.push_back(MakeRequest(rows[i], data.at(rows[i].setting.dataset)));
    }
    std::vector<JobRun> runs;
    // One at a time: the server has one job worker, and each job's time is then its own.
    ASSIGN_OR_RETURN(auto models, RunJobs(vault, reqs, 1, &runs));
    for (size_t i = first; i < last; ++i) {
      const absl::StatusOr<v1::FairModel>& model = models[i - first];
      RETURN_IF_ERROR(model.status());
      Row& r = rows[i];
      const Uploaded& u = data.at(r.setting.dataset);
      std::vector<int> pred;
      std::vector<double> p;
      RETURN_IF_ERROR(Apply(*model, u.eval.x, &pred, &p));
      r.m = ScoreDecisions(pred, u.eval.y, u.eval.group);
      if (objective) r.objective = FermiObjective(p, u.eval, r.lambda, r.setting.eo);
      const v1::Cost& cost = runs[i - first].submitted.charge().cost();
      r.z = cost.parts_size() > 1 ? cost.parts(1).noise_scale() : 0;
      r.elapsed = runs[i - first].finished.elapsed_seconds();
      r.note = model->notes_size() > 0 ? model->notes(0) : "";
    }
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const Row& r = rows[last - 1];
    std::fprintf(stderr,
                 "[%4.0f s] %zu/%zu jobs; last: %s, %s, eps %g, lambda %g, seed %d: error %.4f "
                 "violation %.4f z %.4g (%.1f s)\n",
                 secs, last, rows.size(), r.setting.Name().c_str(), r.config.name.c_str(),
                 r.epsilon, r.lambda, r.seed, r.m.error, r.violation(), r.z, r.elapsed);
  }
  return absl::OkStatus();
}

std::string Cell(const std::vector<const Row*>& rows) {
  if (rows.empty()) return "";
  std::vector<double> err, vio;
  for (const Row* r : rows) {
    err.push_back(r->m.error);
    vio.push_back(r->violation());
  }
  const MeanStd e = Summarize(err), v = Summarize(vio);
  if (rows.size() == 1) return absl::StrFormat("%.3f / %.3f", e.mean, v.mean);
  return absl::StrFormat("%.3f ± %.3f / %.3f ± %.3f", e.mean, e.std, v.mean, v.std);
}

std::vector<const Row*> Select(const std::vector<Row>& rows, const Setting& s,
                               const std::string& config, double eps, double lambda) {
  std::vector<const Row*> out;
  for (const Row& r : rows) {
    if (r.setting.Key() == s.Key() && r.config.name == config && r.epsilon == eps &&
        r.lambda == lambda) {
      out.push_back(&r);
    }
  }
  return out;
}

std::string CsvOf(const std::vector<Row>& rows, bool objective) {
  std::string csv = absl::StrCat(
      "dataset,fairness,algorithm,config,epsilon,lambda,seed,error,dp_violation,eo_violation,"
      "positive_rate,",
      objective ? "objective," : "", "noise_multiplier,job_seconds,config_detail\n");
  for (const Row& r : rows) {
    absl::StrAppend(
        &csv,
        absl::StrFormat("%s,%s,%s,%s,%g,%g,%d,%.6f,%.6f,%.6f,%.6f,", r.setting.dataset,
                        r.setting.eo ? "eo" : "dp", r.setting.pfld ? "pf_ld" : "dp_fermi",
                        r.config.name, r.epsilon, r.lambda, r.seed, r.m.error, r.m.dp_violation,
                        r.m.eo_violation, r.m.positive_rate),
        objective ? absl::StrFormat("%.6f,", r.objective) : "",
        absl::StrFormat("%.6g,%.3f,\"%s\"\n", r.z, r.elapsed, Describe(r.config, r.setting.pfld)));
  }
  return csv;
}

}  // namespace fairvault::experiments::stochastic_fair
