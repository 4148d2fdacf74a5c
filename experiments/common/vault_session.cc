// A study's vault; see vault_session.h.
#include "experiments/common/vault_session.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "client/apply/model_apply.h"
#include "core/postprocess/equalized_odds.h"
#include "core/util/status_macros.h"

namespace fairvault::experiments {

std::vector<std::string> FeatureNames(Eigen::Index d) {
  std::vector<std::string> names;
  for (Eigen::Index j = 0; j < d; ++j) names.push_back(absl::StrCat("f", j));
  return names;
}

absl::StatusOr<VaultSession> StartVault(const std::string& stem, const std::string& company) {
  VaultSession v;
  v.company_name = company;
  v.server = std::make_unique<testing::ServerProcess>(testing::TempDatabasePath(stem));
  ASSIGN_OR_RETURN(std::string regulator_key, v.server->Bootstrap("regulator"));
  RETURN_IF_ERROR(v.server->Start());
  v.regulator = v.server->Connect(regulator_key);
  if (v.regulator == nullptr) return absl::InternalError("cannot connect as the regulator");
  v1::CreateAccountRequest account;
  account.set_name(company);
  account.set_role(v1::ROLE_COMPANY);
  ASSIGN_OR_RETURN(auto created, v.regulator->CreateAccount(account));
  v.company = v.server->Connect(created.api_key());
  if (v.company == nullptr) return absl::InternalError("cannot connect as the company");
  return v;
}

absl::Status AddDataset(VaultSession& v, const std::string& dataset, const std::string& attribute,
                        const std::vector<std::string>& categories,
                        const std::vector<std::string>& keys, const std::vector<int>& groups,
                        double grant, double delta) {
  v1::CreateDatasetRequest create;
  create.set_name(dataset);
  v1::Attribute* a = create.add_attributes();
  a->set_name(attribute);
  for (const auto& c : categories) a->add_categories(c);
  RETURN_IF_ERROR(v.regulator->CreateDataset(create).status());
  v1::ImportHeader header;
  header.set_dataset(dataset);
  header.set_batch_id("all");
  header.add_attributes(attribute);
  std::vector<std::string> values;
  values.reserve(groups.size());
  for (int g : groups) values.push_back(categories[g]);
  ASSIGN_OR_RETURN(auto imported, v.regulator->ImportAttributes(header, keys, values));
  if (imported.subject_count() != static_cast<int64_t>(keys.size())) {
    return absl::InternalError(absl::StrCat("imported ", imported.subject_count(),
                                            " subjects, expected ", keys.size()));
  }
  v1::GrantBudgetRequest budget;
  budget.set_company(v.company_name);
  budget.set_dataset(dataset);
  budget.set_epsilon(grant);
  budget.set_delta(delta);
  return v.regulator->GrantBudget(budget).status();
}

absl::StatusOr<std::string> UploadNumeric(VaultSession& v, const std::string& dataset,
                                          const std::vector<std::string>& keys,
                                          const std::vector<std::string>& names,
                                          const std::vector<std::vector<double>>& columns,
                                          size_t chunk_rows) {
  v1::TableHeader header;
  header.set_dataset(dataset);
  header.set_label("experiment table");
  std::vector<v1::ColumnValues> values(names.size());
  for (size_t j = 0; j < names.size(); ++j) {
    v1::ColumnSpec* c = header.add_columns();
    c->set_name(names[j]);
    c->set_type(v1::COLUMN_TYPE_NUMERIC);
    values[j].mutable_numeric()->Reserve(static_cast<int>(columns[j].size()));
    for (double x : columns[j]) values[j].add_numeric(x);
  }
  ASSIGN_OR_RETURN(auto uploaded, v.company->UploadTable(header, keys, values, chunk_rows));
  return uploaded.table_handle();
}

absl::StatusOr<std::vector<absl::StatusOr<v1::FairModel>>> RunJobs(
    VaultSession& v, const std::vector<v1::FitFairModelRequest>& reqs, int parallel,
    std::vector<JobRun>* runs) {
  std::vector<absl::StatusOr<v1::FairModel>> models(reqs.size(), absl::UnknownError("not run"));
  if (runs != nullptr) runs->assign(reqs.size(), JobRun());
  for (size_t start = 0; start < reqs.size(); start += static_cast<size_t>(parallel)) {
    const size_t end = std::min(reqs.size(), start + static_cast<size_t>(parallel));
    std::vector<std::string> ids;
    for (size_t i = start; i < end; ++i) {
      ASSIGN_OR_RETURN(auto submitted, v.company->FitFairModel(reqs[i]));
      ids.push_back(submitted.job().id());
      if (runs != nullptr) (*runs)[i].submitted = submitted;
    }
    for (size_t i = start; i < end; ++i) {
      v1::GetJobRequest get;
      get.set_job_id(ids[i - start]);
      while (true) {
        ASSIGN_OR_RETURN(auto job, v.company->GetJob(get));
        const v1::JobState state = job.job().state();
        if (runs != nullptr) (*runs)[i].finished = job.job();
        if (state == v1::JOB_STATE_SUCCEEDED) {
          v1::GetArtifactRequest art;
          art.set_artifact_id(job.job().artifact_id());
          ASSIGN_OR_RETURN(auto artifact, v.company->GetArtifact(art));
          models[i] = artifact.artifact().fair_model();
          break;
        }
        if (state != v1::JOB_STATE_QUEUED && state != v1::JOB_STATE_RUNNING) {
          models[i] = absl::FailedPreconditionError(absl::StrCat("job ", job.job().id(), " (",
                                                                 reqs[i].idempotency_key(),
                                                                 ") ended: ", job.job().error()));
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    }
  }
  return models;
}

absl::StatusOr<std::vector<double>> PositiveProbabilities(const v1::FairModel& model,
                                                          const Eigen::MatrixXd& x) {
  ASSIGN_OR_RETURN(client::FairModelApplier applier, client::FairModelApplier::Create(model));
  if (applier.is_multiclass()) {
    return absl::InvalidArgumentError("a multi-class network has no positive decision");
  }
  std::vector<double> out(static_cast<size_t>(x.rows()));
  std::vector<double> row(static_cast<size_t>(x.cols()));
  for (Eigen::Index r = 0; r < x.rows(); ++r) {
    for (Eigen::Index j = 0; j < x.cols(); ++j) row[static_cast<size_t>(j)] = x(r, j);
    ASSIGN_OR_RETURN(client::ModelPrediction pred, applier.Predict(row, nullptr));
    out[static_cast<size_t>(r)] = applier.is_network() ? pred.decision : pred.p_positive;
  }
  return out;
}

absl::StatusOr<EoMixing> FitEoPostProcessor(VaultSession& v, const std::string& key,
                                            const std::string& handle,
                                            const std::string& prediction_column,
                                            const std::string& label_column, double epsilon,
                                            const std::vector<std::string>& categories) {
  v1::FitEqualizedOddsRequest req;
  req.set_idempotency_key(key);
  req.set_table_handle(handle);
  req.set_prediction_column(prediction_column);
  req.set_label_column(label_column);
  req.set_epsilon(epsilon);
  req.set_gamma(0);
  req.set_min_group_count(0);
  ASSIGN_OR_RETURN(auto resp, v.company->FitEqualizedOddsPostProcessor(req));
  EoMixing mixing(categories.size());
  std::vector<bool> seen(categories.size(), false);
  for (const auto& g : resp.artifact().equalized_odds().groups()) {
    const auto it = std::find(categories.begin(), categories.end(), g.group());
    if (it == categories.end()) {
      return absl::InternalError(absl::StrCat("unknown group label '", g.group(), "'"));
    }
    const auto index = static_cast<size_t>(it - categories.begin());
    mixing[index] = {g.p_flip_to_1_given_0(), g.p_keep_1_given_1()};
    seen[index] = true;
  }
  for (size_t a = 0; a < seen.size(); ++a) {
    if (!seen[a]) return absl::InternalError(absl::StrCat("no mixing for ", categories[a]));
  }
  return mixing;
}

absl::StatusOr<EoMixing> ExactEoPostProcessor(const std::vector<int>& prediction,
                                              const LabeledRows& rows) {
  namespace pp = ::fairvault::core::postprocess;
  ASSIGN_OR_RETURN(auto counts, pp::CountEo(prediction, rows.y, rows.group, 2));
  pp::EoOptions options;
  options.gamma = 0;
  options.epsilon = std::numeric_limits<double>::infinity();
  options.m = static_cast<int64_t>(rows.y.size());
  ASSIGN_OR_RETURN(auto solution, pp::SolveEqualizedOddsLp(counts, options));
  EoMixing mixing;
  for (int a = 0; a < 2; ++a) mixing.emplace_back(solution.groups[a].p0, solution.groups[a].p1);
  return mixing;
}

std::vector<double> PostProcessedProbabilities(const EoMixing& mixing,
                                               const std::vector<int>& prediction,
                                               const std::vector<int>& group) {
  std::vector<double> out(prediction.size());
  for (size_t i = 0; i < prediction.size(); ++i) {
    const auto& g = mixing[static_cast<size_t>(group[i])];
    out[i] = prediction[i] == 1 ? g.second : g.first;
  }
  return out;
}

}  // namespace fairvault::experiments
