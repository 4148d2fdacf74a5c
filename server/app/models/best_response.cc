// BestResponse (issue 9; ALGORITHMS.md §3): one private best response to the company's λ, one
// charged release, with the group-label masses read from an earlier NoisyCounts release. The
// model needs no protected attribute to predict. See docs/privacy.md.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <memory>

#include "absl/synchronization/mutex.h"
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
using models_internal::Borrow;
using models_internal::SecureLaplace;
using models_internal::OracleOf;
using models_internal::SetFeatures;
using models_internal::AddComponent;
using models_internal::CheckGameIsSolvable;
using models_internal::GameInputs;
using models_internal::LoadGameInputs;
namespace learn = core::learn;
namespace accounting = core::accounting;

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
  // With released cell sums the response is post-processing (cell_sums.cc).
  if (!req.sums_key().empty()) return BestResponseFromSums(caller, req);
  // 1. Parameters only.
  RETURN_IF_ERROR(RequireRole(caller, {Role::kCompany}));
  RETURN_IF_ERROR(core::ValidateIsFiniteAndPositive(req.epsilon(), "epsilon"));
  RETURN_IF_ERROR(internal::ValidateToken(req.masses_key(), "masses_key"));
  ASSIGN_OR_RETURN(const double mass_floor, models_internal::ValidateGameRequest(req));
  if (req.oracle() != v1::BEST_RESPONSE_ORACLE_LEAST_SQUARES &&
      req.oracle() != v1::BEST_RESPONSE_ORACLE_FTPL) {
    return absl::InvalidArgumentError(
        "oracle: use BEST_RESPONSE_ORACLE_LEAST_SQUARES (1) or BEST_RESPONSE_ORACLE_FTPL (2)");
  }
  PreparedRelease release = PreparedRelease::Of("BestResponse", req);
  release.noise = v1::NOISE_KIND_DISCRETE_LAPLACE;
  // 2. Replay first.
  ASSIGN_OR_RETURN(auto replay, Replay<v1::BestResponseResponse>(caller, release));
  if (replay) return *std::move(replay);
  // Checks added after releases were stored come after the replay: a stored release replays.
  RETURN_IF_ERROR(learn::ValidateLambdaBound(req.lambda_bound()));
  RETURN_IF_ERROR(internal::RequireNotAmong(req.label_column(), "label_column",
                                            req.feature_columns(), "feature_columns"));

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
  ASSIGN_OR_RETURN(std::shared_ptr<const learn::GameData> game,
                   LeastSquaresGame(table, joined, req.feature_columns(), req.label_column(),
                                    req.clip_l1(), intercept, oracle == learn::Oracle::kFtpl));
  ASSIGN_OR_RETURN(GameInputs inputs, LoadGameInputs(*table.table, joined.table_rows,
                                                     req.feature_columns(), req.label_column()));
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

absl::StatusOr<std::shared_ptr<const learn::GameData>> Vault::LeastSquaresGame(
    const ResolvedTable& table, const JoinedRows& joined,
    const google::protobuf::RepeatedPtrField<std::string>& feature_columns,
    const std::string& label_column, double clip_l1, bool intercept, bool keep_rows) {
  std::vector<std::string> columns(feature_columns.begin(), feature_columns.end());
  columns.push_back(label_column);
  {
    GameCache& last = *game_cache_;
    absl::MutexLock lock(&last.mu);
    const std::shared_ptr<const void> cached = last.table.lock();
    if (cached == nullptr) {
      last.data.reset();
    } else if (cached.get() == table.cached.get() && last.columns == columns &&
               last.clip_l1 == clip_l1 && last.intercept == intercept &&
               last.rows == joined.table_rows && (!keep_rows || last.data->KeepsMatrix())) {
      return last.data;
    }
  }
  ASSIGN_OR_RETURN(GameInputs inputs, LoadGameInputs(*table.table, joined.table_rows,
                                                     feature_columns, label_column));
  ASSIGN_OR_RETURN(learn::GameData built,
                   learn::BuildGameData(inputs.features, inputs.labels, joined.group,
                                        joined.num_groups, clip_l1, intercept,
                                        keep_rows ? learn::KeepMatrix::kYes
                                                  : learn::KeepMatrix::kNo));
  RETURN_IF_ERROR(CheckGameIsSolvable(built));
  auto game = std::make_shared<const learn::GameData>(std::move(built));
  ++game_cache_->built;
  GameCache& last = *game_cache_;
  absl::MutexLock lock(&last.mu);
  last.data.reset();  // the old game's memory goes before the copies callers make
  last.table = table.cached;
  last.columns = std::move(columns);
  last.clip_l1 = clip_l1;
  last.intercept = intercept;
  last.rows = joined.table_rows;
  last.data = game;
  return game;
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

}  // namespace fairvault::server
