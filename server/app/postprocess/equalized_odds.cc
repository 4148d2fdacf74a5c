// FitEqualizedOddsPostProcessor (Jagielski et al. 2019, Alg. 1): the noisy (prediction, group,
// label) counts, then the LP on them, through the one charge path (vault_charge_impl.h).
#include <cmath>
#include <cstdlib>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/accounting/accountant.h"
#include "core/postprocess/equalized_odds.h"
#include "core/util/status_macros.h"
#include "core/util/validate.h"
#include "server/app/vault.h"
#include "server/app/vault_charge_impl.h"
#include "server/app/vault_internal.h"

namespace fairvault::server {

using internal::RequireRole;
using storage::Role;
namespace accounting = core::accounting;

// ---- FitEqualizedOddsPostProcessor -----------------------------------------------------------

absl::StatusOr<v1::FitEqualizedOddsResponse> Vault::FitEqualizedOdds(
    const Caller& caller, const v1::FitEqualizedOddsRequest& req) {
  RETURN_IF_ERROR(RequireRole(caller, {Role::kCompany}));
  RETURN_IF_ERROR(core::ValidateIsFiniteAndPositive(req.epsilon(), "epsilon"));
  RETURN_IF_ERROR(core::ValidateIsFiniteAndNonNegative(req.gamma(), "gamma"));
  const double beta = req.beta() == 0 ? 0.05 : req.beta();
  RETURN_IF_ERROR(core::ValidateInOpenRange(beta, 0, 1, "beta"));
  if (req.prediction_column().empty() || req.label_column().empty()) {
    return absl::InvalidArgumentError("prediction_column and label_column must be set");
  }
  PreparedRelease release = PreparedRelease::Of("FitEqualizedOddsPostProcessor", req);
  release.noise = v1::NOISE_KIND_DISCRETE_LAPLACE;
  release.parts = {{"counts", 2.0}};  // the (ŷ, a, y) table: one subject moves between two cells
  ASSIGN_OR_RETURN(auto replay, Replay<v1::FitEqualizedOddsResponse>(caller, release));
  if (replay) return *std::move(replay);

  ASSIGN_OR_RETURN(OutcomeRows outcomes,
                   LoadOutcomes(caller, req.table_handle(), req.prediction_column(),
                                req.label_column(), req.attributes(), req.unmatched(),
                                "attributes: equalized odds needs at least two groups", &release));
  const ResolvedTable& table = outcomes.table;
  const JoinedRows& joined = outcomes.joined;
  const core::postprocess::EoCounts& counts = outcomes.counts;
  core::postprocess::EoOptions options;
  options.gamma = req.gamma();
  options.beta = beta;
  options.epsilon = req.epsilon();
  options.m = static_cast<int64_t>(joined.table_rows.size());
  options.all_pairs = req.all_pairs();
  options.decision_floor = req.decision_floor();
  if (req.has_min_group_count()) options.min_group_count = req.min_group_count();
  options.group_labels = joined.group_labels;
  RETURN_IF_ERROR(options.Validate());
  // Refused before anything is charged: the group count comes from the public schema.
  RETURN_IF_ERROR(core::postprocess::CheckEoProblemSize(joined.num_groups, options));

  return ChargeAndRelease<v1::FitEqualizedOddsResponse>(
      caller, release,
      [&](const Noises& noises, int64_t seq, v1::FitEqualizedOddsResponse* resp)
          -> absl::StatusOr<std::optional<storage::ArtifactRecord>> {
        core::postprocess::EoCounts noisy;
        ASSIGN_OR_RETURN(auto solution, core::postprocess::FitEqualizedOdds(
                                            counts, options, *noises[0], gen_, &noisy));
        v1::Artifact* artifact = resp->mutable_artifact();
        const int64_t now = clock_->NowMicros();
        charge_internal::FillArtifactEnvelope(caller, table.dataset.name, seq, now, artifact);
        v1::EqualizedOddsPostProcessor* eo = artifact->mutable_equalized_odds();
        for (const auto& a : joined.attributes) eo->add_attributes(a);
        for (int a = 0; a < joined.num_groups; ++a) {
          const auto& g = solution.groups[a];
          v1::EqualizedOddsGroup* out = eo->add_groups();
          out->set_group(joined.group_labels[a]);
          out->set_p_flip_to_1_given_0(g.p0);
          out->set_p_keep_1_given_1(g.p1);
          out->set_noisy_pred0_label0(noisy.at(0, a, 0));
          out->set_noisy_pred0_label1(noisy.at(0, a, 1));
          out->set_noisy_pred1_label0(noisy.at(1, a, 0));
          out->set_noisy_pred1_label1(noisy.at(1, a, 1));
          out->set_noisy_fpr(g.noisy_fpr);
          out->set_noisy_tpr(g.noisy_tpr);
          out->set_derived_fpr(g.derived_fpr);
          out->set_derived_tpr(g.derived_tpr);
          out->set_fpr_slack(g.fpr_slack);
          out->set_tpr_slack(g.tpr_slack);
          out->set_excluded(g.excluded);
          out->set_excluded_reason(g.excluded_reason);
          if (g.excluded) eo->add_excluded_groups(joined.group_labels[a]);
        }
        eo->set_min_group_count(solution.min_group_count);
        eo->set_m(options.m);
        eo->set_epsilon(options.epsilon);
        eo->set_gamma(options.gamma);
        eo->set_beta(options.beta);
        eo->set_reference_group(solution.reference_group);
        eo->set_objective(solution.objective);
        eo->set_noisy_error(solution.noisy_error);
        for (const auto& w : solution.warnings) eo->add_warnings(w);
        eo->set_decision_floor(options.decision_floor);
        ASSIGN_OR_RETURN(const double bound, internal::DecisionLogRatioBound(*artifact));
        eo->set_decision_log_ratio_bound(bound);
        resp->set_rows_dropped(joined.dropped);
        return std::optional<storage::ArtifactRecord>(
            charge_internal::ArtifactRecordOf(*artifact, caller, table.dataset.id, now));
      });
}

}  // namespace fairvault::server
