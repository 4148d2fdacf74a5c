// FitFairModel (issues 9, 10; ALGORITHMS.md §3-6): a managed fair learner, charged once at
// submission (the ledger row, the stored response and the job record commit together), then run
// by the job runner (run_job.cc) from the job's stored randomness, so that a re-run after a crash
// produces the same artifact. Everything public inputs can foresee is refused before the charge.
#include <algorithm>
#include <cmath>
#include <set>

#include "core/learn/exponential_mechanism.h"
#include "core/learn/game_data.h"
#include "core/learn/reductions.h"
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
using models_internal::kMaxFeatures;
using models_internal::kZeroGammaNote;
using internal::ValidateColumns;
using models_internal::SeedBytes;
using models_internal::LearnerOptionsOf;
using models_internal::GameInputs;
using models_internal::LoadGameInputs;
namespace learn = core::learn;
namespace accounting = core::accounting;

namespace {

constexpr int kMaxHypotheses = 5000;
constexpr int kDefaultRounds = 100;
// B = 1: with η = 1, B = 10 overshoots (noise-free test error 0.41 on Communities against 0.17
// with B = 1; experiments/jagielski/results/jagielski_fig1_investigation.md).
constexpr double kDefaultLambdaBound = 1;
constexpr double kDefaultLearningRate = 1;
constexpr double kDefaultMassesShare = 0.1;
// The smallest per-release epsilon a game learner accepts (checked before the charge).
constexpr double kMinRoundEpsilon = 1e-6;

// The FitFairModelRequest parameters each algorithm reads, beyond the ones every algorithm reads
// (key, table, algorithm, label, attributes, epsilon, unmatched). A request that sets another
// one is refused before the charge: a company that sets lr_w on PF-LD or epochs on the
// exponential mechanism believes it changes something, and would pay for a job that ignores it.
struct AlgorithmParameters {
  v1::FairModelAlgorithm algorithm;
  const char* name;
  std::vector<const char*> fields;
};

const std::vector<AlgorithmParameters>& ParametersRead() {
  static const auto* table = new std::vector<AlgorithmParameters>{
      {v1::FAIR_MODEL_ALGORITHM_DP_ORACLE_LEARNER,
       "dp_oracle_learner",
       {"feature_columns", "gamma", "rounds", "lambda_bound", "learning_rate", "masses_share",
        "clip_l1", "no_intercept", "mass_floor"}},
      {v1::FAIR_MODEL_ALGORITHM_PRIVATE_FAIR_NR,
       "private_fair_nr",
       {"feature_columns", "gamma", "rounds", "lambda_bound", "learning_rate", "masses_share",
        "clip_l1", "no_intercept", "mass_floor"}},
      {v1::FAIR_MODEL_ALGORITHM_EXPONENTIAL_MECHANISM,
       "exponential_mechanism",
       {"hypothesis_columns", "em_delta"}},
      {v1::FAIR_MODEL_ALGORITHM_DP_FERMI,
       "dp_fermi",
       {"feature_columns", "clip_l1", "no_intercept", "epochs", "batch_size", "lr_theta", "lr_w",
        "w_radius", "clip_theta", "clip_w", "fairness_lambda", "marginals_share", "model",
        "fairness", "hidden_units"}},
      {v1::FAIR_MODEL_ALGORITHM_PF_LD,
       "pf_ld",
       {"feature_columns", "clip_l1", "no_intercept", "epochs", "batch_size", "lr_theta",
        "clip_theta", "marginals_share", "model", "fairness", "hidden_units", "dual_lr",
        "gamma"}},
      {v1::FAIR_MODEL_ALGORITHM_EXPONENTIATED_GRADIENT,
       "exponentiated_gradient",
       {"feature_columns", "gamma", "rounds", "lambda_bound", "learning_rate", "masses_share",
        "sums_share", "clip_l1", "no_intercept", "mass_floor", "fairness", "mixture",
        "validation_table_handle", "selection_target", "selection_penalty", "selection_share",
        "selection_candidates"}},
  };
  return *table;
}

absl::Status RefuseUnreadParameters(const v1::FitFairModelRequest& req) {
  static const std::set<std::string> kCommon = {"idempotency_key", "table_handle", "algorithm",
                                                "label_column",    "attributes",   "epsilon",
                                                "unmatched"};
  const AlgorithmParameters* own = nullptr;
  for (const AlgorithmParameters& a : ParametersRead()) {
    if (a.algorithm == req.algorithm()) own = &a;
  }
  if (own == nullptr) return absl::OkStatus();  // an unknown algorithm is refused by the caller
  std::vector<const google::protobuf::FieldDescriptor*> set;
  req.GetReflection()->ListFields(req, &set);
  for (const google::protobuf::FieldDescriptor* field : set) {
    const std::string& name = field->name();
    if (kCommon.count(name) > 0) continue;
    if (std::any_of(own->fields.begin(), own->fields.end(),
                    [&](const char* f) { return name == f; })) {
      continue;
    }
    std::vector<std::string> readers;
    for (const AlgorithmParameters& a : ParametersRead()) {
      if (std::any_of(a.fields.begin(), a.fields.end(),
                      [&](const char* f) { return name == f; })) {
        readers.push_back(a.name);
      }
    }
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": ", own->name, " does not read this parameter",
        readers.empty() ? ""
                        : absl::StrCat(" (", absl::StrJoin(readers, " and "),
                                       readers.size() == 1 ? " reads it)" : " read it)"),
        "; remove it (nothing was charged)"));
  }
  return absl::OkStatus();
}

}  // namespace

// ---- FitFairModel ----------------------------------------------------------------------------

absl::StatusOr<core::learn::ValidationRows> Vault::LoadValidationRows(
    const Caller& owner, const v1::FitFairModelRequest& req, int64_t dataset_id, int k,
    int64_t subject_limit, bool allow_expired) {
  ASSIGN_OR_RETURN(ResolvedTable table,
                   ResolveTable(owner, req.validation_table_handle(), allow_expired));
  if (table.dataset.id != dataset_id) {
    return absl::InvalidArgumentError(absl::StrCat(
        "validation_table_handle: the table is on dataset '", table.dataset.name,
        "', not the training table's; upload the validation rows to the same dataset"));
  }
  ASSIGN_OR_RETURN(JoinedRows joined, Join(table, req.attributes(), req.unmatched(), subject_limit));
  if (joined.num_groups != k) {
    return absl::InvalidArgumentError(absl::StrCat(
        "validation_table_handle: its join has ", joined.num_groups, " groups, the training's ", k));
  }
  if (joined.table_rows.empty()) {
    return absl::InvalidArgumentError("validation_table_handle: the table has no joined rows");
  }
  core::learn::ValidationRows rows;
  rows.k = k;
  rows.group = joined.group;
  ASSIGN_OR_RETURN(const int label,
                   internal::ColumnIndex(*table.table, req.label_column(), "label_column"));
  ASSIGN_OR_RETURN(rows.y, internal::BinaryColumn(*table.table, label, joined.table_rows,
                                                  "label_column (validation table)"));
  ASSIGN_OR_RETURN(GameInputs inputs, LoadGameInputs(*table.table, joined.table_rows,
                                                     req.feature_columns(), ""));
  ASSIGN_OR_RETURN(rows.x, core::learn::BuildFeatureMatrix(inputs.features, req.clip_l1(),
                                                           !req.no_intercept()));
  return rows;
}

absl::StatusOr<v1::FitFairModelResponse> Vault::FitFairModel(const Caller& caller,
                                                             const v1::FitFairModelRequest& req) {
  // 1. Parameters only (defaults filled in a copy that the job stores).
  RETURN_IF_ERROR(RequireRole(caller, {Role::kCompany}));
  RETURN_IF_ERROR(core::ValidateIsFiniteAndPositive(req.epsilon(), "epsilon"));
  RETURN_IF_ERROR(core::ValidateIsFiniteAndNonNegative(req.gamma(), "gamma"));
  if (req.label_column().empty()) return absl::InvalidArgumentError("label_column must be set");
  v1::FitFairModelRequest job_request = req;
  const bool game = req.algorithm() == v1::FAIR_MODEL_ALGORITHM_DP_ORACLE_LEARNER ||
                    req.algorithm() == v1::FAIR_MODEL_ALGORITHM_PRIVATE_FAIR_NR;
  const bool stochastic = IsStochasticAlgorithm(req.algorithm());
  const bool reductions = req.algorithm() == v1::FAIR_MODEL_ALGORITHM_EXPONENTIATED_GRADIENT;
  const bool linear = game || stochastic || reductions;  // trained on the feature columns
  if (reductions) {
    RETURN_IF_ERROR(ValidateColumns(req.feature_columns(), "feature_columns", 1, kMaxFeatures));
    RETURN_IF_ERROR(FillReductionDefaults(options_.max_job_rounds, &job_request));
  } else if (stochastic) {
    RETURN_IF_ERROR(ValidateColumns(req.feature_columns(), "feature_columns", 1, kMaxFeatures));
    RETURN_IF_ERROR(FillStochasticDefaults(&job_request));
  } else if (game) {
    RETURN_IF_ERROR(ValidateColumns(req.feature_columns(), "feature_columns", 1, kMaxFeatures));
    if (req.rounds() == 0) job_request.set_rounds(kDefaultRounds);
    if (req.lambda_bound() == 0) job_request.set_lambda_bound(kDefaultLambdaBound);
    if (req.learning_rate() == 0) job_request.set_learning_rate(kDefaultLearningRate);
    if (req.masses_share() == 0) job_request.set_masses_share(kDefaultMassesShare);
    if (req.mass_floor() == 0) job_request.set_mass_floor(1);
    if (job_request.rounds() < 1 || job_request.rounds() > options_.max_job_rounds) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rounds must be in 1..", options_.max_job_rounds, " (0 means ", kDefaultRounds, ")"));
    }
    RETURN_IF_ERROR(core::ValidateInOpenRange(job_request.masses_share(), 0, 1, "masses_share"));
    RETURN_IF_ERROR(core::ValidateIsFiniteAndNonNegative(req.clip_l1(), "clip_l1"));
    learn::LearnerOptions options = LearnerOptionsOf(job_request);
    RETURN_IF_ERROR(options.Validate());
  } else if (req.algorithm() == v1::FAIR_MODEL_ALGORITHM_EXPONENTIAL_MECHANISM) {
    RETURN_IF_ERROR(
        ValidateColumns(req.hypothesis_columns(), "hypothesis_columns", 2, kMaxHypotheses));
    if (req.em_delta() != 0) {
      RETURN_IF_ERROR(core::ValidateInOpenRange(req.em_delta(), 0, 1, "em_delta"));
    }
  } else {
    return absl::InvalidArgumentError(
        "algorithm: use FAIR_MODEL_ALGORITHM_DP_ORACLE_LEARNER (1), "
        "FAIR_MODEL_ALGORITHM_EXPONENTIAL_MECHANISM (2), FAIR_MODEL_ALGORITHM_PRIVATE_FAIR_NR "
        "(3), FAIR_MODEL_ALGORITHM_DP_FERMI (4), FAIR_MODEL_ALGORITHM_PF_LD (5) or "
        "FAIR_MODEL_ALGORITHM_EXPONENTIATED_GRADIENT (6)");
  }
  PreparedRelease release = PreparedRelease::Of("FitFairModel", req);
  release.mechanism = "discrete_laplace";
  // 2. Replay first: the same job, charged once.
  ASSIGN_OR_RETURN(auto replay, Replay<v1::FitFairModelResponse>(caller, release));
  if (replay) return *std::move(replay);
  // Checks added after releases were stored come after the replay: a stored release replays.
  RETURN_IF_ERROR(RefuseUnreadParameters(req));
  if (stochastic) RETURN_IF_ERROR(ValidateStochasticStepScales(job_request));
  // (The exponential mechanism's hypotheses are candidate predictions: the label among them is
  // the perfect candidate, a fair benchmark, not a mistake.)
  if (linear) {
    RETURN_IF_ERROR(internal::RequireNotAmong(req.label_column(), "label_column",
                                              req.feature_columns(), "feature_columns"));
  }

  // 3. The table, the join and the columns, checked before charging (the company's own data;
  // nothing here depends on a).
  ASSIGN_OR_RETURN(ResolvedTable table, ResolveTable(caller, req.table_handle()));
  release.dataset_id = table.dataset.id;
  release.dataset_name = table.dataset.name;
  ASSIGN_OR_RETURN(JoinedRows joined, Join(table, req.attributes(), req.unmatched()));
  release.SizesFrom(joined);
  if (joined.num_groups < 2) {
    return absl::InvalidArgumentError("attributes: a fair model needs at least two groups");
  }
  const int64_t n = static_cast<int64_t>(joined.table_rows.size());
  const int64_t width = linear ? req.feature_columns_size() : req.hypothesis_columns_size();
  if (n * width > options_.max_job_cells) {
    return absl::InvalidArgumentError(absl::StrCat(
        "feature_columns: ", n, " rows x ", width, " columns exceed the vault's limit of ",
        options_.max_job_cells, " cells per job; use fewer columns or rows"));
  }
  if (reductions && !job_request.validation_table_handle().empty()) {
    // The validation rows the selection will read, checked now: the job must not fail on them
    // after its charge.
    ASSIGN_OR_RETURN(const core::learn::ValidationRows validation,
                     LoadValidationRows(caller, job_request, table.dataset.id, joined.num_groups,
                                        joined.subjects, /*allow_expired=*/false));
    RETURN_IF_ERROR(core::learn::CheckSelectionFeasible(validation, SelectionOptionsOf(job_request)));
    if (static_cast<int64_t>(validation.y.size()) * width > options_.max_job_cells) {
      return absl::InvalidArgumentError(absl::StrCat(
          "validation_table_handle: ", validation.y.size(), " rows x ", width,
          " columns exceed the vault's limit of ", options_.max_job_cells, " cells per job"));
    }
  }
  int classes = 2;
  int64_t label_one_rows = 0;  // the company's own labels (public)
  {
    auto label = internal::ColumnIndex(*table.table, req.label_column(), "label_column");
    RETURN_IF_ERROR(label.status());
    if (stochastic) {
      // The company's own labels (public): their largest value sets the classes.
      ASSIGN_OR_RETURN(const std::vector<int> labels,
                       internal::ClassColumn(*table.table, *label, joined.table_rows,
                                             "label_column", learn::kMaxClasses));
      const int max_label = labels.empty() ? 1 : *std::max_element(labels.begin(), labels.end());
      classes = ClassesOf(job_request, max_label);
      RETURN_IF_ERROR(
          internal::ClassColumn(*table.table, *label, joined.table_rows, "label_column", classes)
              .status());
    } else {
      ASSIGN_OR_RETURN(const std::vector<int> labels,
                       internal::BinaryColumn(*table.table, *label, joined.table_rows,
                                              "label_column"));
      label_one_rows = std::count(labels.begin(), labels.end(), 1);
    }
    bool some_feature_nonzero = false;
    for (const std::string& name : linear ? req.feature_columns() : req.hypothesis_columns()) {
      const char* field = linear ? "feature_columns" : "hypothesis_columns";
      ASSIGN_OR_RETURN(int c, internal::ColumnIndex(*table.table, name, field));
      if (linear) {
        ASSIGN_OR_RETURN(const absl::Span<const double> values,
                         internal::NumericValues(*table.table, c, field));
        for (int64_t r : joined.table_rows) some_feature_nonzero |= values[r] != 0;
      } else {
        RETURN_IF_ERROR(internal::BinaryColumn(*table.table, c, joined.table_rows, field).status());
      }
    }
    if ((game || reductions) && req.no_intercept() && !some_feature_nonzero) {
      return absl::InvalidArgumentError(
          "feature_columns: every feature is 0 on every row and no_intercept is set, so no "
          "classifier can be fitted; drop no_intercept or add a feature");
    }
    if (linear) {
      // The features' scale (public) must be one every round can compute with.
      ASSIGN_OR_RETURN(GameInputs inputs, LoadGameInputs(*table.table, joined.table_rows,
                                                         req.feature_columns(), ""));
      ASSIGN_OR_RETURN(const double largest,
                       learn::MaxPreprocessedRowL1(inputs.features, req.clip_l1(),
                                                   !req.no_intercept()));
      RETURN_IF_ERROR(learn::CheckFeatureScale(largest));
    }
  }
  // 4. The noise plan from the total (epsilon, grant delta) through the accountant.
  auto budget = store_->GetBudget(caller.account_id, release.dataset_id);
  if (absl::IsNotFound(budget.status())) {
    return charge_internal::Refused(
        options_.metrics, release.request_kind, Refusal::kNoGrant,
        absl::PermissionDeniedError(
            absl::StrCat("company '", caller.name, "' has no budget grant on dataset '",
                         release.dataset_name, "'; ask the regulator for a grant")));
  }
  RETURN_IF_ERROR(budget.status());
  const double delta = budget->grant.delta;
  ASSIGN_OR_RETURN(const int64_t total_micro, accounting::EpsilonToMicro(req.epsilon()));
  storage::JobPlan plan;
  v1::Cost cost;
  cost.set_epsilon(accounting::MicroToEpsilon(total_micro));
  cost.set_mechanism("discrete_laplace");
  const auto add_part = [&](const std::string& name, double epsilon, double scale,
                            double sensitivity) {
    v1::Cost* part = cost.add_parts();
    part->set_name(name);
    part->set_epsilon(epsilon);
    part->set_mechanism("discrete_laplace");
    part->set_noise_scale(scale);
    part->set_sensitivity(sensitivity);
  };
  int64_t total_steps = 1;
  bool described = false;  // the plan set cost's delta itself
  if (reductions) {
    const int d = req.feature_columns_size() + (req.no_intercept() ? 0 : 1);
    ASSIGN_OR_RETURN(ReductionCharge planned,
                     PlanReductionsJob(job_request, n, d, joined.num_groups, delta, total_micro));
    plan = planned.plan;
    total_steps = job_request.rounds() +
                  (job_request.mixture() == v1::FINAL_MIXTURE_CANDIDATES
                       ? core::learn::CandidateCount()
                       : (job_request.mixture() == v1::FINAL_MIXTURE_SELECTED ? 1 : 0));
    release.composed = planned.cost;
    release.mechanism = planned.description.mechanism();
    cost = planned.description;
    described = true;
  } else if (stochastic) {
    const int inputs = req.feature_columns_size() + (req.no_intercept() ? 0 : 1);
    ASSIGN_OR_RETURN(
        StochasticCharge planned,
        PlanStochasticJob(job_request, n, inputs, classes, joined.num_groups, delta, total_micro));
    plan = planned.plan;
    total_steps = planned.steps;
    release.composed = planned.cost;
    release.mechanism = "discrete_gaussian";
    cost = planned.description;
  } else if (game) {
    const int64_t rounds = job_request.rounds();
    total_steps = rounds;
    plan.set_epsilon_masses(job_request.masses_share() * cost.epsilon());
    const std::vector<accounting::PureDpRepetition> fixed = {{plan.epsilon_masses(), 1}};
    ASSIGN_OR_RETURN(const double per_round,
                     accounting::CalibrateRepeatedPureDp(total_micro, delta, fixed, 2 * rounds));
    if (per_round < kMinRoundEpsilon) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rounds: ", rounds, " rounds at epsilon ", cost.epsilon(), " leave ", per_round,
          " per release, below ", kMinRoundEpsilon,
          " (the best responses would lose the fairness costs); use fewer rounds or more "
          "epsilon"));
    }
    // Every round must plan and sample whatever the released masses and λ (not only the first).
    const int d = req.feature_columns_size() + (req.no_intercept() ? 0 : 1);
    RETURN_IF_ERROR(learn::CheckGamePlannable(n, d, job_request.lambda_bound(),
                                              job_request.mass_floor(), per_round,
                                              plan.epsilon_masses()));
    plan.set_epsilon_round(per_round);
    release.composed =
        accounting::ComposedPureDpCost({{plan.epsilon_masses(), 1}, {per_round, 2 * rounds}});
    add_part("masses", plan.epsilon_masses(), 2 / plan.epsilon_masses(), 2);
    // A best response's scale depends on that round's λ (public): its sensitivity in steps is
    // stated per round in the job's record, not here.
    add_part(absl::StrCat("best_responses (", rounds, " x)"), per_round, 0, 0);
    add_part(absl::StrCat("violations (", rounds, " x)"), per_round, 2 / per_round, 2);
  } else {
    plan.set_epsilon_min(cost.epsilon() / 2);
    plan.set_epsilon_select(cost.epsilon() / 2);
    plan.set_em_delta(req.em_delta() != 0 ? req.em_delta()
                                          : std::exp(-std::sqrt(static_cast<double>(n))));
    if (!(plan.em_delta() > 0)) plan.set_em_delta(1e-300);
    // What public sizes show cannot succeed is refused here, not failed after the charge.
    RETURN_IF_ERROR(learn::CheckEmFeasible(label_one_rows, joined.num_groups, plan.epsilon_min(),
                                           plan.epsilon_select(), plan.em_delta()));
    release.composed = accounting::ComposedPureDpCost({{cost.epsilon() / 2, 2}});
    add_part("min_positives", plan.epsilon_min(), 1 / plan.epsilon_min(), 1);
    add_part("selection", plan.epsilon_select(), 0, 0);
  }
  // Which bound the ledger will take (both are valid): the RDP conversion needs delta.
  if (!stochastic && !described) {
    accounting::Spend alone;
    alone.Add(*release.composed);
    cost.set_delta(
        delta > 0 && accounting::SpentEpsilonMicro(alone, delta) < alone.pure_micro ? delta : 0);
  }
  release.composed_cost = cost;

  // 5. The charge: ledger row, stored response and job record in one transaction, admitted
  // only below the job limit (options_.max_pending_jobs: the store counts the unfinished jobs
  // of every replica inside the transaction, so concurrent submissions cannot overshoot it).
  std::optional<storage::JobRecord> job;
  release.job_out = &job;
  ASSIGN_OR_RETURN(v1::FitFairModelResponse response,
                   ChargeAndRelease<v1::FitFairModelResponse>(
                       caller, release,
                       [&](const Noises&, int64_t seq, v1::FitFairModelResponse* resp)
                           -> absl::StatusOr<std::optional<storage::ArtifactRecord>> {
                         storage::JobRecord record;
                         record.id = absl::StrCat("job_", HexEncode(RandomBytes(16)));
                         record.account_id = caller.account_id;
                         record.dataset_id = table.dataset.id;
                         record.ledger_seq = seq;
                         record.idempotency_key = req.idempotency_key();
                         record.table_handle = req.table_handle();
                         record.validation_table_handle = job_request.validation_table_handle();
                         record.algorithm = req.algorithm();
                         record.request = charge_internal::SerializeDeterministic(job_request);
                         record.plan = charge_internal::SerializeDeterministic(plan);
                         record.seed = SeedBytes(core::ChaCha20Stream::NewKey(gen_));
                         record.subject_limit = joined.subjects;
                         record.state = storage::JobState::kQueued;
                         record.total = total_steps;
                         record.submitted_micros = clock_->NowMicros();
                         v1::Job* out = resp->mutable_job();
                         out->set_id(record.id);
                         out->set_dataset(table.dataset.name);
                         out->set_company(caller.name);
                         out->set_algorithm(req.algorithm());
                         out->set_state(v1::JOB_STATE_QUEUED);
                         out->set_total(record.total);
                         out->set_submitted_unix(record.submitted_micros / 1'000'000);
                         out->set_ledger_seq(seq);
                         out->set_idempotency_key(req.idempotency_key());
                         if (req.gamma() == 0 && game) resp->add_notes(kZeroGammaNote);
                         job = std::move(record);
                         return std::optional<storage::ArtifactRecord>();
                       }));
  SubmitJob(response.job().id());
  return response;
}

}  // namespace fairvault::server
