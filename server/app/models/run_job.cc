// RunJob: what the job runner runs for a FitFairModel job, from the job's record alone (its
// request, its noise plan fixed at submission and its 256-bit seed), so that a re-run after a
// crash, on this process or another replica, draws the same noise and stores the same artifact.
#include <algorithm>
#include <cmath>

#include "core/learn/exponential_mechanism.h"
#include "core/learn/game_data.h"
#include "core/learn/selection.h"
#include "core/random/chacha20_stream.h"
#include "server/app/models/reductions_job.h"
#include "server/app/models/stochastic_job.h"
#include "server/util/crypto.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/accounting/accountant.h"
#include "core/dp/integer_noise.h"
#include "core/learn/fair_game.h"
#include "core/util/status_macros.h"
#include "core/util/validate.h"
#include "server/app/models/models_internal.h"
#include "server/app/vault.h"
#include "server/app/vault_charge_impl.h"
#include "server/app/vault_internal.h"

namespace fairvault::server {

using internal::RequireRole;
using storage::Role;
using models_internal::kZeroGammaNote;
using models_internal::SecureLaplace;
using models_internal::KeyOf;
using models_internal::SetFeatures;
using models_internal::AddComponent;
using models_internal::LearnerOptionsOf;
using models_internal::GameInputs;
using models_internal::LoadGameInputs;
namespace learn = core::learn;
namespace accounting = core::accounting;

// ---- RunJob ----------------------------------------------------------------------------------

absl::StatusOr<storage::ArtifactRecord> Vault::RunJob(const storage::JobRecord& job,
                                                      JobControl& control) {
  v1::FitFairModelRequest req;
  storage::JobPlan plan;
  if (!req.ParseFromString(job.request) || !plan.ParseFromString(job.plan) ||
      job.seed.size() != 32) {
    return absl::DataLossError(absl::StrCat("job ", job.id, " is corrupt"));
  }
  ASSIGN_OR_RETURN(storage::AccountRecord account, store_->GetAccountById(job.account_id));
  const Caller owner{account.id, account.name, account.role};
  ASSIGN_OR_RETURN(ResolvedTable table, ResolveTable(owner, job.table_handle,
                                                     /*allow_expired=*/true));
  ASSIGN_OR_RETURN(JoinedRows joined,
                   Join(table, req.attributes(), req.unmatched(), job.subject_limit));
  // Every random draw of the job comes from its stored key: a re-run repeats them exactly.
  core::ChaCha20Stream stream(KeyOf(job.seed));
  absl::BitGenRef gen(stream);
  const auto progress = [&control](int64_t done, int64_t total) {
    return control.Progress(done, total);
  };

  v1::Artifact artifact;
  artifact.set_id(absl::StrCat("art_", HexEncode(Sha256(job.id)).substr(0, 32)));
  artifact.set_dataset(table.dataset.name);
  artifact.set_company(account.name);
  artifact.set_created_unix(job.submitted_micros / 1'000'000);
  artifact.set_ledger_seq(job.ledger_seq);
  v1::FairModel* model = artifact.mutable_fair_model();
  model->set_label_column(req.label_column());
  for (const auto& a : joined.attributes) model->add_attributes(a);
  model->set_epsilon(req.epsilon());
  model->set_gamma(req.gamma());
  model->set_rows_used(static_cast<int64_t>(joined.table_rows.size()));
  model->set_rows_dropped(joined.dropped);

  if (req.algorithm() == v1::FAIR_MODEL_ALGORITHM_EXPONENTIAL_MECHANISM) {
    learn::EmLearnerInput input;
    input.k = joined.num_groups;
    input.group = joined.group;
    ASSIGN_OR_RETURN(int label, internal::ColumnIndex(*table.table, req.label_column(), "label"));
    ASSIGN_OR_RETURN(
        input.y, internal::BinaryColumn(*table.table, label, joined.table_rows, "label_column"));
    for (const std::string& name : req.hypothesis_columns()) {
      ASSIGN_OR_RETURN(int c, internal::ColumnIndex(*table.table, name, "hypothesis_columns"));
      ASSIGN_OR_RETURN(
          std::vector<int> h,
          internal::BinaryColumn(*table.table, c, joined.table_rows, "hypothesis_columns"));
      input.predictions.emplace_back(h.begin(), h.end());
    }
    ASSIGN_OR_RETURN(auto m_noise, core::dp::MakeDiscreteLaplaceNoise(1 / plan.epsilon_min()));
    ASSIGN_OR_RETURN(
        learn::EmLearnerResult result,
        learn::ExponentialMechanismLearner(input, plan.epsilon_min(), plan.epsilon_select(),
                                           plan.em_delta(), *m_noise, gen));
    control.Progress(1, 1);
    model->set_algorithm("exponential_mechanism");
    model->set_hypothesis_column(req.hypothesis_columns(result.chosen));
    model->set_hypothesis_index(result.chosen);
    model->set_delta(0);
    model->set_released_min_positives(result.released_min_positives);
    model->set_utility_sensitivity(result.sensitivity);
    model->add_notes(absl::StrCat(
        "pure ", req.epsilon(),
        "-DP: the released M (epsilon/2) floors every group's TPR "
        "denominator, so the selection (epsilon/2) is private whatever the data; the floors "
        "change the utility only when M exceeds a group's true count, which the shift "
        "ln(1/em_delta)/(epsilon/2) makes happen with probability <= em_delta = ",
        plan.em_delta()));
  } else if (IsStochasticAlgorithm(req.algorithm())) {
    ASSIGN_OR_RETURN(int label, internal::ColumnIndex(*table.table, req.label_column(), "label"));
    learn::StochasticData data;
    ASSIGN_OR_RETURN(data.y, internal::ClassColumn(*table.table, label, joined.table_rows,
                                                   "label_column", learn::kMaxClasses));
    const int max_label = data.y.empty() ? 1 : *std::max_element(data.y.begin(), data.y.end());
    data.classes = ClassesOf(req, max_label);
    data.group = joined.group;
    data.k = joined.num_groups;
    ASSIGN_OR_RETURN(GameInputs inputs,
                     LoadGameInputs(*table.table, joined.table_rows, req.feature_columns(), ""));
    ASSIGN_OR_RETURN(
        data.x, learn::BuildFeatureMatrix(inputs.features, req.clip_l1(), !req.no_intercept()));
    SetFeatures(req.feature_columns(), req.clip_l1(), !req.no_intercept(), model);
    RETURN_IF_ERROR(RunStochasticJob(data, req, plan, gen, progress, model));
  } else {
    // The linear learners train on the company's features; all read the rows every step.
    ASSIGN_OR_RETURN(GameInputs inputs, LoadGameInputs(*table.table, joined.table_rows,
                                                       req.feature_columns(), req.label_column()));
    const bool intercept = !req.no_intercept();
    ASSIGN_OR_RETURN(
        learn::GameData data,
        learn::BuildGameData(inputs.features, std::move(inputs.labels), joined.group,
                             joined.num_groups, req.clip_l1(), intercept, learn::KeepMatrix::kYes));
    SetFeatures(req.feature_columns(), req.clip_l1(), intercept, model);
    if (req.algorithm() == v1::FAIR_MODEL_ALGORITHM_EXPONENTIATED_GRADIENT) {
      std::optional<learn::ValidationRows> validation;
      if (!req.validation_table_handle().empty()) {
        ASSIGN_OR_RETURN(validation,
                         LoadValidationRows(owner, req, job.dataset_id, joined.num_groups,
                                            job.subject_limit, /*allow_expired=*/true));
      }
      RETURN_IF_ERROR(RunReductionsJob(data, req, plan, validation ? &*validation : nullptr, gen,
                                       progress, model));
      return charge_internal::ArtifactRecordOf(artifact, owner, job.dataset_id,
                                               job.submitted_micros);
    }
    learn::LearnerPlan learner_plan{plan.epsilon_masses(), plan.epsilon_round()};
    ASSIGN_OR_RETURN(learn::LearnerResult result,
                     learn::RunDpOracleLearner(data, LearnerOptionsOf(req), learner_plan,
                                               SecureLaplace(), gen, progress));
    model->set_algorithm(req.algorithm() == v1::FAIR_MODEL_ALGORITHM_PRIVATE_FAIR_NR
                             ? "private_fair_nr"
                             : "dp_oracle_learner");
    for (const Eigen::VectorXd& w : result.components) AddComponent(w, model);
    model->set_rounds(req.rounds());
    *model->mutable_lambda_average() = {result.lambda_average.begin(), result.lambda_average.end()};
    *model->mutable_noisy_violations() = {result.last_violations.begin(),
                                          result.last_violations.end()};
    if (req.gamma() == 0) model->add_notes(kZeroGammaNote);
  }
  return charge_internal::ArtifactRecordOf(artifact, owner, job.dataset_id, job.submitted_micros);
}

}  // namespace fairvault::server
