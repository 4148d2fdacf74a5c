// ReleaseCellSums and BestResponse with a sums_key (issue 22 §1): the per-cell feature sums
// S_ay = Σ_{i in cell (a, y)} x_i and counts n_ay of a least-squares game, released once
// through the one charge path; with the least-squares oracle every best response to every λ is
// then post-processing of them (and of the company's own features), computed here for nothing
// or by the company itself. See docs/privacy.md, "ReleaseCellSums".
#include <algorithm>
#include <cmath>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/learn/fair_game.h"
#include "core/learn/reductions.h"
#include "core/util/status_macros.h"
#include "core/util/validate.h"
#include "server/app/models/models_internal.h"
#include "server/app/vault.h"
#include "server/app/vault_charge_impl.h"
#include "server/app/vault_internal.h"

namespace fairvault::server {

using internal::RequireRole;
using models_internal::AddComponent;
using models_internal::GameInputs;
using models_internal::kMaxFeatures;
using models_internal::kZeroGammaNote;
using models_internal::LoadGameInputs;
using models_internal::SetFeatures;
using internal::ValidateColumns;
using storage::Role;
namespace learn = core::learn;

namespace {

constexpr double kDefaultCountsShare = 0.1;
// The released numbers (2K cells x (d + 1)) a response may hold.
constexpr int64_t kMaxReleasedValues = 1'000'000;
constexpr char kInterceptName[] = "(intercept)";

// The label column is 0/1 on the used rows: the label's fault, named before anything else.
absl::Status CheckLabel(const CompanyTable& table, const std::string& label_column,
                        const std::vector<int64_t>& rows) {
  ASSIGN_OR_RETURN(const int label, internal::ColumnIndex(table, label_column, "label_column"));
  return internal::BinaryColumn(table, label, rows, "label_column").status();
}

}  // namespace

absl::StatusOr<v1::CellSumsResponse> Vault::ReleaseCellSums(const Caller& caller,
                                                            const v1::CellSumsRequest& req) {
  // 1. Parameters only.
  RETURN_IF_ERROR(RequireRole(caller, {Role::kCompany}));
  RETURN_IF_ERROR(core::ValidateIsFiniteAndPositive(req.epsilon(), "epsilon"));
  RETURN_IF_ERROR(ValidateColumns(req.feature_columns(), "feature_columns", 1, kMaxFeatures));
  if (req.label_column().empty()) return absl::InvalidArgumentError("label_column must be set");
  RETURN_IF_ERROR(core::ValidateIsFiniteAndNonNegative(req.clip_l1(), "clip_l1"));
  const double counts_share = req.counts_share() == 0 ? kDefaultCountsShare : req.counts_share();
  RETURN_IF_ERROR(core::ValidateInOpenRange(counts_share, 0, 1, "counts_share"));
  PreparedRelease release = PreparedRelease::Of("CellSums", req);
  release.noise = v1::NOISE_KIND_DISCRETE_LAPLACE;
  // 2. Replay first.
  ASSIGN_OR_RETURN(auto replay, Replay<v1::CellSumsResponse>(caller, release));
  if (replay) return *std::move(replay);
  // Checks added after releases were stored come after the replay: a stored release replays.
  RETURN_IF_ERROR(internal::RequireNotAmong(req.label_column(), "label_column",
                                            req.feature_columns(), "feature_columns"));

  // 3. The table, the join and the game's a-free part (the company's rows).
  ASSIGN_OR_RETURN(ResolvedTable table, ResolveTable(caller, req.table_handle()));
  release.dataset_id = table.dataset.id;
  release.dataset_name = table.dataset.name;
  ASSIGN_OR_RETURN(JoinedRows joined, Join(table, req.attributes(), req.unmatched()));
  release.SizesFrom(joined);
  const int k = joined.num_groups;
  if (k < 2) return absl::InvalidArgumentError("attributes: the cells need at least two groups");
  const bool intercept = !req.no_intercept();
  const int64_t values =
      2 * static_cast<int64_t>(k) * (req.feature_columns_size() + (intercept ? 2 : 1));
  if (values > kMaxReleasedValues) {
    return absl::InvalidArgumentError(absl::StrCat(
        "attributes: ", k, " groups x 2 labels x ", req.feature_columns_size(),
        " feature_columns would release ", values, " numbers (at most ", kMaxReleasedValues,
        "); use fewer attributes or feature_columns"));
  }
  RETURN_IF_ERROR(CheckLabel(*table.table, req.label_column(), joined.table_rows));
  ASSIGN_OR_RETURN(std::shared_ptr<const learn::GameData> game,
                   LeastSquaresGame(table, joined, req.feature_columns(), req.label_column(),
                                    req.clip_l1(), intercept, /*keep_rows=*/false));
  ASSIGN_OR_RETURN(GameInputs inputs, LoadGameInputs(*table.table, joined.table_rows,
                                                     req.feature_columns(), req.label_column()));
  learn::GameData data = *game;
  RETURN_IF_ERROR(learn::RegroupGameData(inputs.features, req.clip_l1(), intercept, joined.group,
                                         k, &data));
  // One row changing group moves its count and its feature vector (L1 <= max_row_steps grid
  // steps, public: the company's features) between two cells of the same label; for K = 2
  // only group 1 is noised (group 0 is the public total minus it), so one noised cell moves.
  const double l1 = learn::CellReleaseL1Factor(k);
  release.parts = {{"counts", l1, counts_share},
                   {"sums", l1 * static_cast<double>(data.max_row_steps), 1 - counts_share}};

  // 4. The charge, then the release inside it.
  return ChargeAndRelease<v1::CellSumsResponse>(
      caller, release,
      [&](const Noises& noises, int64_t,
          v1::CellSumsResponse* resp) -> absl::StatusOr<std::optional<storage::ArtifactRecord>> {
        std::vector<std::vector<int64_t>> exact_counts(2 * k);
        for (int c = 0; c < 2 * k; ++c) exact_counts[c] = {data.cell_counts[c]};
        const std::vector<std::vector<double>> counts =
            learn::ReleaseGroupCells(exact_counts, *noises[0], gen_);
        const std::vector<std::vector<double>> sums =
            learn::ReleaseGroupCells(data.cell_sums, *noises[1], gen_);
        *resp->mutable_feature_columns() = req.feature_columns();
        resp->set_label_column(req.label_column());
        for (const auto& a : joined.attributes) resp->add_attributes(a);
        *resp->mutable_feature_names() = req.feature_columns();
        if (intercept) resp->add_feature_names(kInterceptName);
        resp->set_clip_l1(req.clip_l1());
        resp->set_intercept(intercept);
        for (int c = 0; c < 2 * k; ++c) {
          v1::CellSum* cell = resp->add_cells();
          cell->set_group(joined.group_labels[c / 2]);
          cell->set_label(c % 2);
          cell->set_noisy_count(counts[c][0]);
          for (double s : sums[c]) cell->add_noisy_sums(s * data.feature_grid);
        }
        resp->set_rows_used(data.n);
        resp->set_rows_dropped(joined.dropped);
        resp->set_table_handle(req.table_handle());
        resp->set_feature_grid(data.feature_grid);
        resp->set_counts_noise_scale(noises[0]->Scale());
        resp->set_sums_noise_scale(noises[1]->Scale());
        return std::optional<storage::ArtifactRecord>();
      });
}

absl::StatusOr<v1::BestResponseResponse> Vault::BestResponseFromSums(
    const Caller& caller, const v1::BestResponseRequest& req) {
  // 1. Parameters only.
  RETURN_IF_ERROR(RequireRole(caller, {Role::kCompany}));
  if (req.epsilon() != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "epsilon: a best response from sums_key is post-processing of that release and costs "
        "nothing; send epsilon 0 (got ",
        req.epsilon(), ")"));
  }
  if (!req.masses_key().empty()) {
    return absl::InvalidArgumentError(
        "masses_key: with sums_key the masses are that release's counts; leave masses_key empty");
  }
  if (req.oracle() != v1::BEST_RESPONSE_ORACLE_UNSPECIFIED &&
      req.oracle() != v1::BEST_RESPONSE_ORACLE_LEAST_SQUARES) {
    return absl::InvalidArgumentError(
        "oracle: a best response from sums_key is least squares (FTPL needs fresh noise per "
        "row); use BEST_RESPONSE_ORACLE_LEAST_SQUARES (1)");
  }
  RETURN_IF_ERROR(internal::ValidateToken(req.sums_key(), "sums_key"));
  ASSIGN_OR_RETURN(const double mass_floor, models_internal::ValidateGameRequest(req));
  RETURN_IF_ERROR(learn::ValidateLambdaBound(req.lambda_bound()));

  // 2. The release the response post-processes: the caller's own, on the same game.
  auto stored = store_->GetStoredResponse(caller.account_id, req.sums_key());
  if (absl::IsNotFound(stored.status())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sums_key: you have no release with idempotency key '", req.sums_key(),
        "'; release the cell sums first with ReleaseCellSums (CLI: `fairvault cell-sums`) on "
        "the same table, columns and preprocessing, and pass its key"));
  }
  RETURN_IF_ERROR(stored.status());
  if (stored->request_kind != "CellSums" || !stored->failure.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("sums_key: the release '", req.sums_key(), "' is a ", stored->request_kind,
                     ", not a successful ReleaseCellSums release"));
  }
  v1::CellSumsResponse sums;
  if (!sums.ParseFromString(stored->payload)) {
    return absl::DataLossError("the stored cell-sums release is corrupt");
  }
  const bool intercept = !req.no_intercept();
  const auto mismatch = [&](const std::string& what, const std::string& released,
                            const std::string& requested) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sums_key: release '", req.sums_key(), "' has ", what, " ", released,
        ", this request ", requested, "; send the release's, or release the sums again"));
  };
  if (sums.table_handle() != req.table_handle()) {
    return mismatch("table_handle", sums.table_handle(), req.table_handle());
  }
  if (!std::equal(sums.feature_columns().begin(), sums.feature_columns().end(),
                  req.feature_columns().begin(), req.feature_columns().end())) {
    return mismatch("feature_columns", absl::StrJoin(sums.feature_columns(), ","),
                    absl::StrJoin(req.feature_columns(), ","));
  }
  if (sums.label_column() != req.label_column()) {
    return mismatch("label_column", sums.label_column(), req.label_column());
  }
  if (sums.clip_l1() != req.clip_l1() || sums.intercept() != intercept) {
    return mismatch("clip_l1/intercept",
                    absl::StrCat(sums.clip_l1(), "/", sums.intercept() ? "yes" : "no"),
                    absl::StrCat(req.clip_l1(), "/", intercept ? "yes" : "no"));
  }

  // 3. The table, the join and the game's a-free part.
  ASSIGN_OR_RETURN(ResolvedTable table, ResolveTable(caller, req.table_handle()));
  ASSIGN_OR_RETURN(JoinedRows joined, Join(table, req.attributes(), req.unmatched()));
  if (!std::equal(sums.attributes().begin(), sums.attributes().end(), joined.attributes.begin(),
                  joined.attributes.end())) {
    return mismatch("attributes", absl::StrJoin(sums.attributes(), ","),
                    absl::StrJoin(joined.attributes, ","));
  }
  const int k = joined.num_groups;
  if (k < 2) return absl::InvalidArgumentError("attributes: the game needs at least two groups");
  if (req.lambda_size() != learn::ConstraintCount(k)) {
    return absl::InvalidArgumentError(
        absl::StrCat("lambda: ", k, " groups need 4(K-1) = ", learn::ConstraintCount(k),
                     " entries (got ", req.lambda_size(), ")"));
  }
  const int64_t rows = static_cast<int64_t>(joined.table_rows.size());
  if (sums.rows_used() != rows || sums.cells_size() != 2 * k) {
    return mismatch("rows x cells", absl::StrCat(sums.rows_used(), " x ", sums.cells_size()),
                    absl::StrCat(rows, " x ", 2 * k, " now (the table or the vault changed)"));
  }
  RETURN_IF_ERROR(CheckLabel(*table.table, req.label_column(), joined.table_rows));
  ASSIGN_OR_RETURN(std::shared_ptr<const learn::GameData> game,
                   LeastSquaresGame(table, joined, req.feature_columns(), req.label_column(),
                                    req.clip_l1(), intercept, /*keep_rows=*/false));
  learn::ReleasedCells cells;
  cells.k = k;
  cells.n = rows;
  for (int c = 0; c < 2 * k; ++c) {
    const v1::CellSum& cell = sums.cells(c);
    if (cell.group() != joined.group_labels[c / 2] || cell.label() != c % 2 ||
        cell.noisy_sums_size() != game->d) {
      return absl::DataLossError("the stored cell-sums release does not match its own game");
    }
    cells.counts.push_back(std::max(cell.noisy_count(), mass_floor));
    cells.sums.push_back(Eigen::Map<const Eigen::VectorXd>(cell.noisy_sums().data(), game->d));
  }
  const std::vector<double> lambda(req.lambda().begin(), req.lambda().end());
  if (caller.Previewing()) {
    // Nothing to price: no charge, no noise.
    v1::PreviewReleaseResponse* preview = caller.outputs->preview;
    preview->mutable_cost()->set_mechanism("post_processing");
    preview->set_rows(rows);
    preview->set_groups(k);
    preview->set_admitted(true);
    preview->set_replay_of_ledger_seq(stored->ledger_seq);
    caller.outputs->priced = true;
    return absl::AbortedError("priced, not charged (internal to PreviewRelease)");
  }

  // 4. Post-processing: no charge, nothing stored; the artifact names the paying release.
  ASSIGN_OR_RETURN(const Eigen::VectorXd weights, learn::FairGameBestResponse(*game, cells, lambda));
  v1::BestResponseResponse resp;
  v1::Artifact* artifact = resp.mutable_artifact();
  charge_internal::FillArtifactEnvelope(caller, table.dataset.name, stored->ledger_seq,
                                        clock_->NowMicros(), artifact);
  artifact->clear_id();  // not stored: the caller keeps it (`predict --artifact-file`)
  v1::FairModel* model = artifact->mutable_fair_model();
  model->set_algorithm("best_response_least_squares");
  SetFeatures(req.feature_columns(), req.clip_l1(), intercept, model);
  AddComponent(weights, model);
  model->set_label_column(req.label_column());
  for (const auto& a : joined.attributes) model->add_attributes(a);
  model->set_gamma(req.gamma());
  model->set_rounds(1);
  model->set_rows_used(rows);
  model->set_rows_dropped(joined.dropped);
  model->add_notes(absl::StrCat("post-processing of the cell sums released under key '",
                                req.sums_key(), "' (ledger seq ", stored->ledger_seq,
                                "): charged nothing, not stored"));
  if (req.gamma() == 0) model->add_notes(kZeroGammaNote);
  resp.set_rows_used(rows);
  resp.set_rows_dropped(joined.dropped);
  resp.set_max_row_l1(game->max_row_l1);
  v1::Charge* charge = resp.mutable_charge();
  charge->mutable_cost()->set_mechanism("post_processing");
  charge->set_ledger_seq(stored->ledger_seq);
  return resp;
}

}  // namespace fairvault::server
