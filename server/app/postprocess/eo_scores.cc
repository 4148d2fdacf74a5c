// FitEqualizedOddsScoresPostProcessor (issue 8 §6): equalized odds from a classifier's scores.
// One release through the common charge path: the (group, label, score bin) histogram with
// discrete Laplace noise (L1 sensitivity 2 under replace-one on a); the ROC repair, the LP and
// the artifact are post-processing. See docs/privacy.md.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/postprocess/eo_scores.h"
#include "core/postprocess/statistical_parity.h"
#include "core/util/status_macros.h"
#include "core/util/validate.h"
#include "server/app/vault.h"
#include "server/app/vault_charge_impl.h"
#include "server/app/vault_internal.h"

namespace fairvault::server {

using internal::RequireRole;
using storage::Role;
namespace pp = core::postprocess;

absl::StatusOr<v1::FitEqualizedOddsScoresResponse> Vault::FitEqualizedOddsScores(
    const Caller& caller, const v1::FitEqualizedOddsScoresRequest& req) {
  // 1. Parameters only: nothing here reads the table or the vault.
  RETURN_IF_ERROR(RequireRole(caller, {Role::kCompany}));
  RETURN_IF_ERROR(core::ValidateIsFiniteAndPositive(req.epsilon(), "epsilon"));
  ASSIGN_OR_RETURN(const pp::ScoreGrid grid, internal::MakeGrid(req.lo(), req.hi(), req.bins()));
  pp::EoScoresOptions options;
  options.gamma = req.gamma();
  options.all_pairs = req.all_pairs();
  options.monotone = !req.non_monotone();
  options.decision_floor = req.decision_floor();
  RETURN_IF_ERROR(options.Validate());
  if (req.score_column().empty() || req.label_column().empty()) {
    return absl::InvalidArgumentError("score_column and label_column must be set");
  }
  PreparedRelease release = PreparedRelease::Of("FitEqualizedOddsScoresPostProcessor", req);
  release.noise = v1::NOISE_KIND_DISCRETE_LAPLACE;
  // The (a, y, bin) histogram: one subject moves between two cells of the same (y, bin).
  release.parts = {{"histogram", 2.0}};
  // 5. After the charge: the ROC repair and the LP from the stored noisy histogram alone,
  // outside the transaction every other charge waits for.
  release.finish = [&caller, grid, options, this](google::protobuf::Message* message)
      -> absl::StatusOr<std::optional<storage::ArtifactRecord>> {
    auto* resp = static_cast<v1::FitEqualizedOddsScoresResponse*>(message);
    v1::Artifact* artifact = resp->mutable_artifact();
    v1::EqualizedOddsScoresPostProcessor* eo = artifact->mutable_equalized_odds_scores();
    const int num_groups = eo->groups_size();
    std::vector<int64_t> noisy(static_cast<size_t>(2 * num_groups) * grid.k);
    for (int a = 0; a < num_groups; ++a) {
      const v1::EqualizedOddsScoresGroup& g = eo->groups(a);
      if (g.noisy_counts_label0_size() != grid.k || g.noisy_counts_label1_size() != grid.k) {
        return absl::DataLossError("the stored release's histogram does not match its bins");
      }
      for (int j = 0; j < grid.k; ++j) {
        noisy[pp::EoScoreCell(a, 0, j, grid.k)] = g.noisy_counts_label0(j);
        noisy[pp::EoScoreCell(a, 1, j, grid.k)] = g.noisy_counts_label1(j);
      }
    }
    ASSIGN_OR_RETURN(auto solution,
                     pp::SolveEqualizedOddsFromScores(noisy, num_groups, grid, eo->m(), options,
                                                      resp->charge().cost().noise_scale()));
    for (int a = 0; a < num_groups; ++a) {
      const pp::EoScoresGroup& g = solution.groups[a];
      v1::EqualizedOddsScoresGroup* out = eo->mutable_groups(a);
      *out->mutable_p_positive() = {g.p.begin(), g.p.end()};
      *out->mutable_pmf_label0() = {g.pmf_negative.begin(), g.pmf_negative.end()};
      *out->mutable_pmf_label1() = {g.pmf_positive.begin(), g.pmf_positive.end()};
      out->set_mass_label0(g.mass_negative);
      out->set_mass_label1(g.mass_positive);
      out->set_derived_fpr(g.derived_fpr);
      out->set_derived_tpr(g.derived_tpr);
    }
    eo->set_noisy_error(solution.noisy_error);
    for (const auto& w : solution.warnings) eo->add_warnings(w);
    ASSIGN_OR_RETURN(const double bound, internal::DecisionLogRatioBound(*artifact));
    eo->set_decision_log_ratio_bound(bound);
    // Account, dataset and ledger seq: the store takes them from the charge's rows.
    return std::optional<storage::ArtifactRecord>(charge_internal::ArtifactRecordOf(
        *artifact, caller, /*dataset_id=*/0, clock_->NowMicros()));
  };
  // 2. Replay before anything else, so a retry works after the table expired.
  ASSIGN_OR_RETURN(auto replay, Replay<v1::FitEqualizedOddsScoresResponse>(caller, release));
  if (replay) return *std::move(replay);

  // 3. The company's own data and presence (never a): table, columns, join, 0/1 labels.
  ASSIGN_OR_RETURN(ScoredRows scored,
                   LoadScores(caller, req.table_handle(), req.score_column(), req.attributes(),
                              req.unmatched(), grid, &release));
  const JoinedRows& joined = scored.joined;
  if (joined.num_groups < 2) {
    return absl::InvalidArgumentError("attributes: equalized odds needs at least two groups");
  }
  ASSIGN_OR_RETURN(int label_col,
                   internal::ColumnIndex(*scored.table.table, req.label_column(), "label_column"));
  ASSIGN_OR_RETURN(auto labels, internal::BinaryColumn(*scored.table.table, label_col,
                                                       joined.table_rows, "label_column"));
  const int64_t m = static_cast<int64_t>(joined.table_rows.size());
  if (m == 0) {
    return absl::InvalidArgumentError("the table has no rows for subjects in the vault");
  }
  int64_t clipped = 0;
  ASSIGN_OR_RETURN(
      std::vector<int64_t> counts,
      pp::EoScoreCounts(scored.scores, labels, joined.group, joined.num_groups, grid, &clipped));
  // Sizes are public (schema and grid): refused before the charge.
  RETURN_IF_ERROR(pp::CheckEoScoresProblemSize(joined.num_groups, grid, options));

  // 4. The charge, and the noisy histogram stored inside its transaction.
  return ChargeAndRelease<v1::FitEqualizedOddsScoresResponse>(
      caller, release,
      [&](const Noises& noises, int64_t seq, v1::FitEqualizedOddsScoresResponse* resp)
          -> absl::StatusOr<std::optional<storage::ArtifactRecord>> {
        const std::vector<int64_t> noisy = internal::AddNoiseToEach(counts, *noises[0], gen_);
        v1::Artifact* artifact = resp->mutable_artifact();
        charge_internal::FillArtifactEnvelope(caller, scored.table.dataset.name, seq,
                                              clock_->NowMicros(), artifact);
        v1::EqualizedOddsScoresPostProcessor* eo = artifact->mutable_equalized_odds_scores();
        for (const auto& a : joined.attributes) eo->add_attributes(a);
        eo->set_lo(grid.lo);
        eo->set_hi(grid.hi);
        eo->set_bins(grid.k);
        eo->set_epsilon(req.epsilon());
        eo->set_gamma(options.gamma);
        eo->set_m(m);
        eo->set_reference_group(options.all_pairs ? -1 : 0);
        eo->set_monotone(options.monotone);
        for (int a = 0; a < joined.num_groups; ++a) {
          v1::EqualizedOddsScoresGroup* out = eo->add_groups();
          out->set_group(joined.group_labels[a]);
          for (int j = 0; j < grid.k; ++j) {
            out->add_noisy_counts_label0(noisy[pp::EoScoreCell(a, 0, j, grid.k)]);
            out->add_noisy_counts_label1(noisy[pp::EoScoreCell(a, 1, j, grid.k)]);
          }
        }
        eo->set_scores_clipped(clipped);
        eo->set_decision_floor(options.decision_floor);
        resp->set_rows_dropped(joined.dropped);
        resp->set_scores_clipped(clipped);
        return std::optional<storage::ArtifactRecord>();
      });
}

}  // namespace fairvault::server
