// Fair models without the attribute at decision time (issue 9; ALGORITHMS.md §3-4):
// - BestResponse: one private best response to the company's λ, one charged release;
// - FitFairModel: a managed learner, charged once at submission (the ledger row, the stored
//   response and the job record commit together), then run by the job runner (RunJob) from the
//   job's stored randomness, so a re-run after a crash produces the same artifact.
// The models never need the protected attribute to predict. See docs/privacy.md.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <memory>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "core/accounting/accountant.h"
#include "core/dp/integer_noise.h"
#include "core/learn/exponential_mechanism.h"
#include "core/learn/fair_game.h"
#include "core/random/chacha20_stream.h"
#include "core/util/status_macros.h"
#include "core/util/validate.h"
#include "server/app/stochastic_job.h"
#include "server/app/vault.h"
#include "server/app/vault_charge_impl.h"
#include "server/app/vault_internal.h"
#include "server/util/crypto.h"

namespace fairvault::server {
namespace {

using internal::RequireRole;
using storage::Role;
namespace learn = core::learn;
namespace accounting = core::accounting;

constexpr int kMaxFeatures = 1000;
constexpr int kMaxHypotheses = 5000;
constexpr int kDefaultRounds = 100;
// B = 1: with η = 1, B = 10 overshoots (noise-free test error 0.41 on Communities against 0.17
// with B = 1; experiments/results/jagielski_fig1_investigation.md).
constexpr double kDefaultLambdaBound = 1;
constexpr double kDefaultLearningRate = 1;
constexpr double kDefaultMassesShare = 0.1;
// The smallest per-release epsilon a game learner accepts (checked before the charge).
constexpr double kMinRoundEpsilon = 1e-6;
constexpr char kZeroGammaNote[] =
    "gamma = 0 asks for exact equalized odds, which no differentially private learner can "
    "guarantee (Cummings et al. 2019, Thm 1): the model is fair only up to the noise";

absl::Status ValidateColumns(const google::protobuf::RepeatedPtrField<std::string>& columns,
                             const char* field, int lo, int hi) {
  if (columns.size() < lo || columns.size() > hi) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": give ", lo, "..", hi, " columns (got ", columns.size(), ")"));
  }
  std::set<std::string> seen;
  for (const std::string& c : columns) {
    if (c.empty()) return absl::InvalidArgumentError(absl::StrCat(field, ": empty column name"));
    if (!seen.insert(c).second) {
      return absl::InvalidArgumentError(absl::StrCat(field, ": column '", c, "' given twice"));
    }
  }
  return absl::OkStatus();
}

// Borrows a noise the charge path made (its scale fixed before the charge) as the factory the
// core expects, checking that the core asks for that very scale.
learn::NoiseFactory Borrow(const core::dp::IntegerNoise& noise, double planned_scale) {
  class Borrowed : public core::dp::IntegerNoise {
   public:
    explicit Borrowed(const core::dp::IntegerNoise& n) : n_(n) {}
    int64_t AddNoise(int64_t v, absl::BitGenRef gen) const override { return n_.AddNoise(v, gen); }
    std::string Name() const override { return n_.Name(); }
    double Scale() const override { return n_.Scale(); }
    int64_t HalfWidth(double confidence) const override { return n_.HalfWidth(confidence); }

   private:
    const core::dp::IntegerNoise& n_;
  };
  return [&noise,
          planned_scale](double scale) -> absl::StatusOr<std::unique_ptr<core::dp::IntegerNoise>> {
    if (scale != planned_scale) {
      return absl::InternalError("a best response asked for another noise than it was charged");
    }
    return std::make_unique<Borrowed>(noise);
  };
}

learn::NoiseFactory SecureLaplace() {
  return [](double scale) { return core::dp::MakeDiscreteLaplaceNoise(scale); };
}

learn::Oracle OracleOf(v1::BestResponseOracle oracle) {
  return oracle == v1::BEST_RESPONSE_ORACLE_FTPL ? learn::Oracle::kFtpl
                                                 : learn::Oracle::kLeastSquares;
}

std::string SeedBytes(const core::ChaCha20Stream::Key& key) {
  std::string out(32, '\0');
  std::memcpy(out.data(), key.data(), 32);
  return out;
}

core::ChaCha20Stream::Key KeyOf(const std::string& seed) {
  core::ChaCha20Stream::Key key{};
  std::memcpy(key.data(), seed.data(), std::min<size_t>(seed.size(), 32));
  return key;
}

void SetFeatures(const google::protobuf::RepeatedPtrField<std::string>& columns, double clip_l1,
                 bool intercept, v1::FairModel* model) {
  v1::FeaturePreprocessing* f = model->mutable_features();
  *f->mutable_feature_columns() = columns;
  f->set_clip_l1(clip_l1);
  f->set_intercept(intercept);
}

void AddComponent(const Eigen::VectorXd& w, v1::FairModel* model) {
  v1::LinearClassifier* c = model->add_components();
  c->mutable_weights()->Reserve(static_cast<int>(w.size()));
  for (Eigen::Index j = 0; j < w.size(); ++j) c->add_weights(w(j));
}

learn::LearnerOptions LearnerOptionsOf(const v1::FitFairModelRequest& req) {
  learn::LearnerOptions options;
  options.rounds = req.rounds();
  options.lambda_bound = req.lambda_bound();
  options.learning_rate = req.learning_rate();
  options.gamma = req.gamma();
  options.mass_floor = req.mass_floor();
  options.oracle = req.algorithm() == v1::FAIR_MODEL_ALGORITHM_PRIVATE_FAIR_NR
                       ? learn::Oracle::kFtpl
                       : learn::Oracle::kLeastSquares;
  return options;
}

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
        "clip_theta", "marginals_share", "model", "fairness", "hidden_units", "dual_lr"}},
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

// A best response's game that public inputs show cannot be solved (features out of scale, a
// singular or non-finite system) is refused before the charge rather than failed in it.
absl::Status CheckGameIsSolvable(const learn::GameData& game) {
  RETURN_IF_ERROR(learn::CheckFeatureScale(game.max_row_l1));
  if (!game.gram.solve(game.xt_label0).allFinite() ||
      !game.gram.solve(game.xt_label1).allFinite()) {
    return absl::InvalidArgumentError(
        "feature_columns: the least-squares system of these features has no finite solution; "
        "rescale the features or set clip_l1");
  }
  return absl::OkStatus();
}

}  // namespace

// The company's features over the joined rows, read in place from the stored table (no copies:
// valid while `table` and `rows` live), and its 0/1 labels (if `label_column` is not empty): its
// own, public data.
struct GameInputs {
  learn::FeatureColumns features;
  std::vector<int> labels;
};

static absl::StatusOr<GameInputs> LoadGameInputs(
    const storage::StoredTable& table, const std::vector<int64_t>& rows,
    const google::protobuf::RepeatedPtrField<std::string>& feature_columns,
    const std::string& label_column) {
  GameInputs in;
  if (!label_column.empty()) {
    ASSIGN_OR_RETURN(int label, internal::ColumnIndex(table, label_column, "label_column"));
    ASSIGN_OR_RETURN(in.labels, internal::BinaryColumn(table, label, rows, "label_column"));
  }
  for (const std::string& name : feature_columns) {
    ASSIGN_OR_RETURN(int c, internal::ColumnIndex(table, name, "feature_columns"));
    ASSIGN_OR_RETURN(const absl::Span<const double> values,
                     internal::NumericValues(table, c, "feature_columns"));
    in.features.columns.push_back(values);
  }
  in.features.rows = rows;
  return in;
}

// ---- BestResponse ----------------------------------------------------------------------------

// The a-free part of the game of the last BestResponse, reused by the next one on the same table
// (the same cached object), rows, columns and preprocessing: a company calls BestResponse round
// after round with a new λ, and rebuilding XᵀX costs a second at 1M rows. Nothing that read the
// groups is reused: whether an entry is reused depends on public inputs only (the key holds no
// group, and every call regroups its copy: O(n·d)), so a call's time says nothing about whether
// two attribute choices, or two vaults, group the rows alike (issue 19: it did, when the groups
// were part of the key). Every call still plans and draws its own noise. One entry, so the
// memory stays bounded (it is replaced by the next game, or freed when a call finds its table
// gone from the vault's cache). A least-squares call builds the game without the n x d matrix
// (it needs only the sums; at 1M x 50 the matrix is 400 MB of fresh memory, over a second on a
// VM): such an entry cannot serve an FTPL call, which rebuilds it with the matrix; an entry with
// the matrix serves both (its copies share the matrix).
struct Vault::GameCache {
  absl::Mutex mu;
  std::weak_ptr<const void> table ABSL_GUARDED_BY(mu);
  std::vector<std::string> columns ABSL_GUARDED_BY(mu);  // features..., label
  double clip_l1 ABSL_GUARDED_BY(mu) = 0;
  bool intercept ABSL_GUARDED_BY(mu) = true;
  std::vector<int64_t> rows ABSL_GUARDED_BY(mu);
  std::shared_ptr<const learn::GameData> data ABSL_GUARDED_BY(mu);
  std::atomic<int64_t> built{0};
};

int64_t Vault::GamesBuilt() const { return game_cache_->built.load(); }

std::shared_ptr<Vault::GameCache> Vault::NewGameCache() { return std::make_shared<GameCache>(); }

absl::StatusOr<v1::BestResponseResponse> Vault::BestResponse(const Caller& caller,
                                                             const v1::BestResponseRequest& req) {
  // 1. Parameters only.
  RETURN_IF_ERROR(RequireRole(caller, {Role::kCompany}));
  RETURN_IF_ERROR(core::ValidateIsFiniteAndPositive(req.epsilon(), "epsilon"));
  RETURN_IF_ERROR(ValidateColumns(req.feature_columns(), "feature_columns", 1, kMaxFeatures));
  if (req.label_column().empty()) return absl::InvalidArgumentError("label_column must be set");
  RETURN_IF_ERROR(internal::ValidateToken(req.masses_key(), "masses_key"));
  RETURN_IF_ERROR(core::ValidateIsFiniteAndPositive(req.lambda_bound(), "lambda_bound"));
  RETURN_IF_ERROR(core::ValidateIsFiniteAndNonNegative(req.gamma(), "gamma"));
  RETURN_IF_ERROR(core::ValidateIsFiniteAndNonNegative(req.clip_l1(), "clip_l1"));
  const double mass_floor = req.mass_floor() == 0 ? 1 : req.mass_floor();
  if (!(mass_floor >= 1) || !std::isfinite(mass_floor)) {
    return absl::InvalidArgumentError("mass_floor must be finite and >= 1 (0 means 1)");
  }
  double lambda_l1 = 0;
  for (double l : req.lambda()) {
    if (!std::isfinite(l) || l < 0) {
      return absl::InvalidArgumentError("lambda: every entry must be finite and >= 0");
    }
    lambda_l1 += l;
  }
  if (lambda_l1 > req.lambda_bound() * (1 + 1e-12)) {
    return absl::InvalidArgumentError(absl::StrCat("lambda: its L1 norm ", lambda_l1,
                                                   " exceeds lambda_bound ", req.lambda_bound()));
  }
  if (req.oracle() != v1::BEST_RESPONSE_ORACLE_LEAST_SQUARES &&
      req.oracle() != v1::BEST_RESPONSE_ORACLE_FTPL) {
    return absl::InvalidArgumentError(
        "oracle: use BEST_RESPONSE_ORACLE_LEAST_SQUARES (1) or BEST_RESPONSE_ORACLE_FTPL (2)");
  }
  PreparedRelease release;
  release.request_kind = "BestResponse";
  release.idempotency_key = req.idempotency_key();
  release.request = &req;
  release.epsilon = req.epsilon();
  release.noise = v1::NOISE_KIND_DISCRETE_LAPLACE;
  // 2. Replay first.
  ASSIGN_OR_RETURN(auto replay, Replay<v1::BestResponseResponse>(caller, release));
  if (replay) return *std::move(replay);
  // Checks added after releases were stored come after the replay: a stored release replays.
  RETURN_IF_ERROR(learn::ValidateLambdaBound(req.lambda_bound()));

  // 3. The company's table, the join, and the released masses (public).
  ASSIGN_OR_RETURN(ResolvedTable table, ResolveTable(caller, req.table_handle()));
  release.dataset_id = table.dataset.id;
  release.dataset_name = table.dataset.name;
  ASSIGN_OR_RETURN(JoinedRows joined, Join(table, req.attributes(), req.unmatched()));
  release.SizesFrom(joined);
  const int k = joined.num_groups;
  if (k < 2) return absl::InvalidArgumentError("attributes: the game needs at least two groups");
  if (req.lambda_size() != learn::ConstraintCount(k)) {
    return absl::InvalidArgumentError(
        absl::StrCat("lambda: ", k, " groups need 4(K-1) = ", learn::ConstraintCount(k),
                     " entries (got ", req.lambda_size(), ")"));
  }
  {
    // The label before the masses: a label column that is not 0/1 is the label's fault, not
    // the masses release's (whose check would otherwise send the company to pay for another).
    ASSIGN_OR_RETURN(const int label,
                     internal::ColumnIndex(*table.table, req.label_column(), "label_column"));
    RETURN_IF_ERROR(
        internal::BinaryColumn(*table.table, label, joined.table_rows, "label_column").status());
  }
  ASSIGN_OR_RETURN(const std::vector<double> masses,
                   ReleasedMasses(caller, req.masses_key(), req.table_handle(), req.label_column(),
                                  joined, mass_floor));
  const bool intercept = !req.no_intercept();
  const learn::Oracle oracle = OracleOf(req.oracle());
  // Only FTPL reads the rows (Xᵀ c̃ over noisy per-row costs).
  const bool needs_rows = oracle == learn::Oracle::kFtpl;
  std::vector<std::string> columns(req.feature_columns().begin(), req.feature_columns().end());
  columns.push_back(req.label_column());
  std::shared_ptr<const learn::GameData> game;
  {
    GameCache& last = *game_cache_;
    absl::MutexLock lock(&last.mu);
    const std::shared_ptr<const void> cached = last.table.lock();
    if (cached == nullptr) {
      last.data.reset();
    } else if (cached.get() == table.cached.get() && last.columns == columns &&
               last.clip_l1 == req.clip_l1() && last.intercept == intercept &&
               last.rows == joined.table_rows && (!needs_rows || last.data->KeepsMatrix())) {
      game = last.data;
    }
  }
  ASSIGN_OR_RETURN(GameInputs inputs, LoadGameInputs(*table.table, joined.table_rows,
                                                     req.feature_columns(), req.label_column()));
  if (game == nullptr) {
    ASSIGN_OR_RETURN(learn::GameData built,
                     learn::BuildGameData(inputs.features, inputs.labels, joined.group, k,
                                          req.clip_l1(), intercept,
                                          needs_rows ? learn::KeepMatrix::kYes
                                                     : learn::KeepMatrix::kNo));
    RETURN_IF_ERROR(CheckGameIsSolvable(built));
    game = std::make_shared<const learn::GameData>(std::move(built));
    ++game_cache_->built;
    GameCache& last = *game_cache_;
    absl::MutexLock lock(&last.mu);
    last.data.reset();  // the old game's memory goes before the copies below
    last.table = table.cached;
    last.columns = std::move(columns);
    last.clip_l1 = req.clip_l1();
    last.intercept = intercept;
    last.rows = joined.table_rows;
    last.data = game;
  }
  // This call's groups, on a copy that shares the matrix: computed whether or not the a-free
  // part was reused.
  learn::GameData grouped = *game;
  RETURN_IF_ERROR(learn::RegroupGameData(inputs.features, req.clip_l1(), intercept, joined.group,
                                         k, &grouped));
  const learn::GameData& data = grouped;
  const std::vector<double> lambda(req.lambda().begin(), req.lambda().end());
  // The epsilon the ledger charges (micro-units): the noise is calibrated to it.
  ASSIGN_OR_RETURN(const int64_t epsilon_micro, accounting::EpsilonToMicro(req.epsilon()));
  const double epsilon = accounting::MicroToEpsilon(epsilon_micro);
  // 4. The noise plan from public quantities (λ, B, q̂, the features, epsilon).
  ASSIGN_OR_RETURN(const double cost_grid,
                   learn::PlanCostGrid(data.n, data.max_row_steps, req.lambda_bound(), masses,
                                       oracle, epsilon));
  ASSIGN_OR_RETURN(const learn::BestResponsePlan plan,
                   learn::PlanBestResponse(data, lambda, masses, oracle, epsilon, cost_grid));
  if (plan.unresolved) {
    // Refused rather than silently answered without the fairness costs.
    return absl::InvalidArgumentError(absl::StrCat(
        "lambda: the cost differences between groups it gives are below the resolution of a "
        "release at epsilon ",
        epsilon, " and lambda_bound ", req.lambda_bound(), " (grid ", cost_grid,
        "); raise epsilon, bring lambda_bound closer to lambda's L1 norm, or send lambda = 0 "
        "for the response without fairness costs (nothing was charged)"));
  }
  if (plan.sensitivity_steps > 0) {
    release.parts = {
        {oracle == learn::Oracle::kFtpl ? "row_costs" : "cost_sums", plan.sensitivity_steps}};
  } else {
    release.mechanism = "none_needed";  // the costs do not depend on a: charged all the same
  }

  // 5. The charge, then the release inside it.
  return ChargeAndRelease<v1::BestResponseResponse>(
      caller, release,
      [&](const Noises& noises, int64_t seq, v1::BestResponseResponse* resp)
          -> absl::StatusOr<std::optional<storage::ArtifactRecord>> {
        learn::NoiseFactory factory =
            noises.empty() ? SecureLaplace() : Borrow(*noises[0], plan.noise_scale_steps);
        ASSIGN_OR_RETURN(learn::BestResponse br,
                         learn::PrivateBestResponse(data, lambda, masses, oracle, epsilon,
                                                    cost_grid, factory, gen_));
        v1::Artifact* artifact = resp->mutable_artifact();
        const int64_t now = clock_->NowMicros();
        charge_internal::FillArtifactEnvelope(caller, table.dataset.name, seq, now, artifact);
        v1::FairModel* model = artifact->mutable_fair_model();
        model->set_algorithm(oracle == learn::Oracle::kFtpl ? "best_response_ftpl"
                                                            : "best_response_least_squares");
        SetFeatures(req.feature_columns(), req.clip_l1(), intercept, model);
        AddComponent(br.weights, model);
        model->set_label_column(req.label_column());
        for (const auto& a : joined.attributes) model->add_attributes(a);
        model->set_epsilon(req.epsilon());
        model->set_gamma(req.gamma());
        model->set_rounds(1);
        model->set_rows_used(data.n);
        model->set_rows_dropped(joined.dropped);
        if (req.gamma() == 0) model->add_notes(kZeroGammaNote);
        resp->set_rows_used(data.n);
        resp->set_rows_dropped(joined.dropped);
        resp->set_sensitivity(br.sensitivity);
        resp->set_cost_change_bound(br.cost_change);
        resp->set_max_row_l1(data.max_row_l1);
        return std::optional<storage::ArtifactRecord>(
            charge_internal::ArtifactRecordOf(*artifact, caller, table.dataset.id, now));
      });
}

absl::StatusOr<std::vector<double>> Vault::ReleasedMasses(const Caller& caller,
                                                          const std::string& key,
                                                          const std::string& table_handle,
                                                          const std::string& label_column,
                                                          const JoinedRows& joined, double floor) {
  auto stored = store_->GetStoredResponse(caller.account_id, key);
  if (absl::IsNotFound(stored.status())) {
    return absl::InvalidArgumentError(
        absl::StrCat("masses_key: you have no release with idempotency key '", key,
                     "'; release the group-label masses first with NoisyCounts over columns = [",
                     label_column, "] and pass its key"));
  }
  RETURN_IF_ERROR(stored.status());
  if (stored->request_kind != "NoisyCounts" || !stored->failure.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("masses_key: the release '", key, "' is a ",
                                                   stored->request_kind,
                                                   ", not a successful NoisyCounts release"));
  }
  v1::NoisyCountsResponse counts;
  if (!counts.ParseFromString(stored->payload)) {
    return absl::DataLossError("the stored masses release is corrupt");
  }
  // Releases from before the response named its table carry no handle.
  if (!counts.table_handle().empty() && counts.table_handle() != table_handle) {
    return absl::InvalidArgumentError(absl::StrCat(
        "masses_key: release '", key, "' counts table '", counts.table_handle(),
        "', not this request's table '", table_handle, "'; release the masses on the same table"));
  }
  if (counts.columns_size() != 1 || counts.columns(0) != label_column) {
    return absl::InvalidArgumentError(
        absl::StrCat("masses_key: release '", key, "' counts columns [",
                     absl::StrJoin(counts.columns(), ","), "], not [", label_column, "]"));
  }
  if (!std::equal(counts.attributes().begin(), counts.attributes().end(), joined.attributes.begin(),
                  joined.attributes.end())) {
    return absl::InvalidArgumentError(
        absl::StrCat("masses_key: release '", key, "' is over attributes [",
                     absl::StrJoin(counts.attributes(), ","), "], this request over [",
                     absl::StrJoin(joined.attributes, ","), "]"));
  }
  const int k = joined.num_groups;
  std::vector<int64_t> noisy(2 * k, 0);
  for (const v1::CountCell& cell : counts.cells()) {
    const auto g = std::find(joined.group_labels.begin(), joined.group_labels.end(), cell.group());
    if (g == joined.group_labels.end() || cell.values_size() != 1 ||
        (cell.values(0) != "0" && cell.values(0) != "1")) {
      return absl::InvalidArgumentError(absl::StrCat(
          "masses_key: release '", key, "' has a cell (", absl::StrJoin(cell.values(), ","), ", ",
          cell.group(), ") that is not a (0/1 label, group) pair of this request"));
    }
    const int index =
        2 * static_cast<int>(g - joined.group_labels.begin()) + (cell.values(0) == "1" ? 1 : 0);
    noisy[index] = cell.noisy_count();
  }
  // A label value absent from the used rows has no cell: its count is the floor.
  return learn::MassesFromNoisyCounts(noisy, counts.rows_used(), floor);
}

// ---- FitFairModel ----------------------------------------------------------------------------

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
  const bool linear = game || stochastic;  // trained on the feature columns
  if (stochastic) {
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
        "(3), FAIR_MODEL_ALGORITHM_DP_FERMI (4) or FAIR_MODEL_ALGORITHM_PF_LD (5)");
  }
  PreparedRelease release;
  release.request_kind = "FitFairModel";
  release.idempotency_key = req.idempotency_key();
  release.request = &req;
  release.epsilon = req.epsilon();
  release.mechanism = "discrete_laplace";
  // 2. Replay first: the same job, charged once.
  ASSIGN_OR_RETURN(auto replay, Replay<v1::FitFairModelResponse>(caller, release));
  if (replay) return *std::move(replay);
  // Checks added after releases were stored come after the replay: a stored release replays.
  RETURN_IF_ERROR(RefuseUnreadParameters(req));

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
    if (game && req.no_intercept() && !some_feature_nonzero) {
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
  if (stochastic) {
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
  if (!stochastic) {
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
    // The linear learners train on the company's features; both read the rows every step.
    ASSIGN_OR_RETURN(GameInputs inputs, LoadGameInputs(*table.table, joined.table_rows,
                                                       req.feature_columns(), req.label_column()));
    const bool intercept = !req.no_intercept();
    ASSIGN_OR_RETURN(
        learn::GameData data,
        learn::BuildGameData(inputs.features, std::move(inputs.labels), joined.group,
                             joined.num_groups, req.clip_l1(), intercept, learn::KeepMatrix::kYes));
    SetFeatures(req.feature_columns(), req.clip_l1(), intercept, model);
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
