// Shared pieces of the fair-learning experiments; see fair_learning_common.h.
#include "experiments/fair_learning_common.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <thread>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/csv.h"
#include "client/model_apply.h"
#include "core/postprocess/equalized_odds.h"
#include "core/util/status_macros.h"

namespace fairvault::experiments {
namespace {

const std::vector<std::string> kNumeric = {"age", "education-num", "capital-gain", "capital-loss",
                                           "hours-per-week"};
const std::vector<std::string> kCategorical = {"workclass",  "education",    "marital-status",
                                               "occupation", "relationship", "native-country"};

struct Encoding {
  std::vector<std::pair<double, double>> moments;   // mean, sd per numeric column
  std::vector<std::map<std::string, int>> offsets;  // column of each category value
  std::vector<std::string> names;
};

absl::StatusOr<Encoding> LearnEncoding(const client::CsvTable& train) {
  Encoding e;
  for (const std::string& name : kNumeric) {
    ASSIGN_OR_RETURN(size_t c, train.ColumnIndex(name));
    double sum = 0, sum_sq = 0;
    for (const auto& row : train.rows) {
      double v = 0;
      if (!absl::SimpleAtod(row[c], &v)) return absl::InvalidArgumentError("bad number");
      sum += v;
      sum_sq += v * v;
    }
    const double n = static_cast<double>(train.rows.size());
    const double mean = sum / n, sd = std::sqrt(std::max(0.0, sum_sq / n - mean * mean));
    e.moments.emplace_back(mean, sd > 1e-12 ? sd : 1.0);
    e.names.push_back(name);
  }
  int width = static_cast<int>(kNumeric.size());
  for (const std::string& name : kCategorical) {
    ASSIGN_OR_RETURN(size_t c, train.ColumnIndex(name));
    std::map<std::string, int> offsets;
    for (const auto& row : train.rows) offsets.emplace(row[c], 0);
    for (auto& [value, offset] : offsets) {
      offset = width++;
      e.names.push_back(absl::StrCat(name, "=", value));
    }
    e.offsets.push_back(std::move(offsets));
  }
  return e;
}

absl::StatusOr<LabeledRows> Apply(const Encoding& e, const client::CsvTable& table,
                                  const std::string& path) {
  LabeledRows out;
  const auto n = static_cast<Eigen::Index>(table.rows.size());
  out.x = Eigen::MatrixXd::Zero(n, static_cast<Eigen::Index>(e.names.size()));
  for (size_t k = 0; k < kNumeric.size(); ++k) {
    ASSIGN_OR_RETURN(size_t c, table.ColumnIndex(kNumeric[k]));
    for (Eigen::Index r = 0; r < n; ++r) {
      double v = 0;
      if (!absl::SimpleAtod(table.rows[r][c], &v)) {
        return absl::InvalidArgumentError(absl::StrCat(path, ": bad number in ", kNumeric[k]));
      }
      out.x(r, static_cast<Eigen::Index>(k)) = (v - e.moments[k].first) / e.moments[k].second;
    }
  }
  for (size_t k = 0; k < kCategorical.size(); ++k) {
    ASSIGN_OR_RETURN(size_t c, table.ColumnIndex(kCategorical[k]));
    for (Eigen::Index r = 0; r < n; ++r) {
      auto it = e.offsets[k].find(table.rows[r][c]);
      if (it != e.offsets[k].end()) out.x(r, it->second) = 1;
    }
  }
  ASSIGN_OR_RETURN(size_t y_col, table.ColumnIndex("Y"));
  ASSIGN_OR_RETURN(size_t sex_col, table.ColumnIndex("sex"));
  for (const auto& row : table.rows) {
    const std::string& sex = row[sex_col];
    if (sex != "Female" && sex != "Male") {
      return absl::InvalidArgumentError(absl::StrCat(path, ": unknown sex '", sex, "'"));
    }
    out.y.push_back(row[y_col] == ">50K" || row[y_col] == ">50K." ? 1 : 0);
    out.group.push_back(sex == "Male" ? 1 : 0);
  }
  return out;
}

}  // namespace

absl::StatusOr<AdultData> LoadAdult(const std::string& datasets_dir) {
  const std::string train_path = datasets_dir + "/adult/adult.data";
  const std::string test_path = datasets_dir + "/adult/adult.test";
  ASSIGN_OR_RETURN(client::CsvTable train, client::ReadCsvFile(train_path));
  ASSIGN_OR_RETURN(client::CsvTable test, client::ReadCsvFile(test_path));
  ASSIGN_OR_RETURN(Encoding e, LearnEncoding(train));
  AdultData data;
  ASSIGN_OR_RETURN(data.train, Apply(e, train, train_path));
  ASSIGN_OR_RETURN(data.test, Apply(e, test, test_path));
  data.feature_names = e.names;
  return data;
}

Metrics ExpectedMetrics(const std::vector<double>& p, const std::vector<int>& y,
                        const std::vector<int>& group) {
  Metrics m;
  double sum[2][2] = {{0, 0}, {0, 0}}, count[2][2] = {{0, 0}, {0, 0}};
  for (size_t i = 0; i < p.size(); ++i) {
    m.error += std::abs(p[i] - y[i]);
    sum[group[i]][y[i]] += p[i];
    count[group[i]][y[i]] += 1;
  }
  m.error /= static_cast<double>(p.size());
  const double rows0 = count[0][0] + count[0][1], rows1 = count[1][0] + count[1][1];
  if (rows0 > 0 && rows1 > 0) {
    m.dp_violation = std::abs((sum[0][0] + sum[0][1]) / rows0 - (sum[1][0] + sum[1][1]) / rows1);
  }
  for (int label = 0; label < 2; ++label) {
    if (count[0][label] == 0 || count[1][label] == 0) continue;
    m.violation = std::max(
        m.violation, std::abs(sum[0][label] / count[0][label] - sum[1][label] / count[1][label]));
  }
  return m;
}

MeanStd Summarize(const std::vector<double>& v) {
  MeanStd s;
  if (v.empty()) return {std::numeric_limits<double>::quiet_NaN(), 0};
  for (double x : v) s.mean += x;
  s.mean /= static_cast<double>(v.size());
  for (double x : v) s.std += (x - s.mean) * (x - s.mean);
  s.std = std::sqrt(s.std / static_cast<double>(v.size()));
  return s;
}

std::vector<std::string> FeatureNames(Eigen::Index d) {
  std::vector<std::string> names;
  for (Eigen::Index j = 0; j < d; ++j) names.push_back(absl::StrCat("f", j));
  return names;
}

std::string EpsilonText(double eps) { return std::isinf(eps) ? "inf" : absl::StrCat(eps); }

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
  RETURN_IF_ERROR(v.regulator->ImportAttributes(header, keys, values).status());
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
