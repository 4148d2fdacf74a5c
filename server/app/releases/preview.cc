// PreviewRelease: a spending request priced by the one charge path, stopped before the charge.
//
// The request runs through its own use-case with Caller::outputs->preview set. Validation,
// the table and the join are the request's own; the charge path (ChargeAndRelease, or Replay
// for a key already used) then fills the preview from the declared cost, the public sizes and
// a read of the privacy filter's state, and stops the use-case with a status PreviewRelease
// drops. Nothing is charged, stored or logged, and no noise is drawn (docs/privacy.md,
// "Previews").
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/dp/integer_noise.h"
#include "core/util/status_macros.h"
#include "server/app/vault.h"
#include "server/app/vault_internal.h"
#include "server/storage/store_common.h"

namespace fairvault::server {
namespace {

constexpr double kPreviewConfidence = 0.95;

// The status that stops a priced use-case. Never reaches a caller: PreviewRelease replaces it
// by the preview, and only it runs use-cases in preview mode.
absl::Status Priced() {
  return absl::AbortedError("priced, not charged (internal to PreviewRelease)");
}

// One accuracy entry per noisy part of `cost`: its own parts, or the cost itself when it has
// none. Parts without integer noise (an exponential mechanism's selection, a best response
// whose scale depends on a later round's λ) have noise_scale 0 and no entry.
absl::Status AddAccuracy(const v1::Cost& cost, int64_t rows, int64_t groups,
                         v1::PreviewReleaseResponse* preview) {
  const auto add = [&](const v1::Cost& part) -> absl::Status {
    if (!(part.noise_scale() > 0)) return absl::OkStatus();
    ASSIGN_OR_RETURN(
        const int64_t width,
        core::dp::NoiseHalfWidth(part.mechanism(), part.noise_scale(), kPreviewConfidence));
    v1::NoiseAccuracy* out = preview->add_accuracy();
    out->set_name(part.name());
    out->set_mechanism(part.mechanism());
    out->set_noise_scale(part.noise_scale());
    out->set_half_width_95(width);
    if (rows > 0 && groups > 0) {
      out->set_relative_to_average_group(static_cast<double>(width) /
                                         (static_cast<double>(rows) / static_cast<double>(groups)));
    }
    return absl::OkStatus();
  };
  if (cost.parts().empty()) return add(cost);
  for (const v1::Cost& part : cost.parts()) RETURN_IF_ERROR(add(part));
  return absl::OkStatus();
}

}  // namespace

absl::Status Vault::Price(const Caller& caller, const PreparedRelease& release,
                          const storage::ChargeRequest& charge, const v1::Cost& cost) {
  v1::PreviewReleaseResponse* preview = caller.outputs->preview;
  *preview->mutable_cost() = cost;
  preview->set_rows(release.rows);
  preview->set_groups(release.groups);
  RETURN_IF_ERROR(AddAccuracy(cost, release.rows, release.groups, preview));

  // The filter's decision on the state now, read without the charge lock: the same
  // AdmitCharge the store runs, on the same inputs (grant, spend, cap, dataset spend, and the
  // unfinished jobs for a release that creates one).
  absl::StatusOr<storage::BudgetState> state =
      store_->GetBudget(caller.account_id, release.dataset_id);
  if (!state.ok() && !absl::IsNotFound(state.status())) return state.status();
  absl::StatusOr<storage::GrantRecord> grant =
      state.ok() ? absl::StatusOr<storage::GrantRecord>(state->grant) : state.status();
  const core::accounting::Spend spend = state.ok() ? state->spend : core::accounting::Spend();
  absl::StatusOr<storage::DatasetRecord> dataset = store_->GetDatasetById(release.dataset_id);
  absl::StatusOr<storage::Admission> admission = storage::AdmitCharge(
      charge, grant, spend, dataset, [&] { return store_->GetDatasetSpend(release.dataset_id); },
      [&]() -> absl::StatusOr<int64_t> {
        ASSIGN_OR_RETURN(std::vector<storage::JobRecord> jobs, store_->ListUnfinishedJobs());
        return static_cast<int64_t>(jobs.size());
      });
  if (state.ok()) {
    *preview->mutable_budget_now() =
        internal::MakeBudget(release.dataset_name, caller.name, state->grant.epsilon_micro,
                             state->grant.delta, state->spend);
  }
  if (admission.ok()) {
    preview->set_admitted(true);
    *preview->mutable_budget_after() = internal::MakeBudget(
        release.dataset_name, caller.name, admission->after.grant.epsilon_micro,
        admission->after.grant.delta, admission->after.spend);
  } else if (absl::IsResourceExhausted(admission.status()) ||
             absl::IsPermissionDenied(admission.status()) ||
             absl::IsFailedPrecondition(admission.status()) ||
             absl::IsNotFound(admission.status())) {
    preview->set_admitted(false);
    preview->set_refusal_code(absl::StatusCodeToString(admission.status().code()));
    preview->set_refusal(std::string(admission.status().message()));
    *preview->mutable_budget_after() = preview->budget_now();
  } else {
    return admission.status();
  }
  caller.outputs->priced = true;
  return Priced();
}

absl::Status Vault::PriceReplay(const Caller& caller, const PreparedRelease& release,
                                const storage::StoredResponse& stored, const v1::Cost& cost) {
  v1::PreviewReleaseResponse* preview = caller.outputs->preview;
  *preview->mutable_cost() = cost;
  preview->set_replay_of_ledger_seq(stored.ledger_seq);
  preview->set_admitted(true);  // sending it returns the stored bytes; nothing is charged
  if (release.dataset_id != 0) {
    absl::StatusOr<storage::DatasetRecord> dataset = store_->GetDatasetById(release.dataset_id);
    if (dataset.ok()) {
      absl::StatusOr<v1::Budget> now = BudgetView(caller.account_id, caller.name, *dataset);
      if (now.ok()) {
        *preview->mutable_budget_now() = *now;
        *preview->mutable_budget_after() = *now;
      }
    }
  }
  caller.outputs->priced = true;
  return Priced();
}

absl::StatusOr<v1::PreviewReleaseResponse> Vault::PreviewRelease(
    const Caller& caller, const v1::PreviewReleaseRequest& req) {
  RETURN_IF_ERROR(internal::RequireRole(caller, {storage::Role::kCompany}));
  v1::PreviewReleaseResponse preview;
  CallOutputs outputs;
  outputs.preview = &preview;
  Caller pricing = caller;
  pricing.outputs = &outputs;
  absl::Status status;
  using R = v1::PreviewReleaseRequest;
  switch (req.request_case()) {
    case R::kNoisyCounts:
      status = NoisyCounts(pricing, req.noisy_counts()).status();
      break;
    case R::kFitEqualizedOdds:
      status = FitEqualizedOdds(pricing, req.fit_equalized_odds()).status();
      break;
    case R::kFitStatisticalParity:
      status = FitStatisticalParity(pricing, req.fit_statistical_parity()).status();
      break;
    case R::kFitEqualizedOddsScores:
      status = FitEqualizedOddsScores(pricing, req.fit_equalized_odds_scores()).status();
      break;
    case R::kAuditClassifier:
      status = AuditClassifier(pricing, req.audit_classifier()).status();
      break;
    case R::kAuditRegressor:
      status = AuditRegressor(pricing, req.audit_regressor()).status();
      break;
    case R::kDecide:
      status = Decide(pricing, req.decide()).status();
      break;
    case R::kCellSums:
      status = ReleaseCellSums(pricing, req.cell_sums()).status();
      break;
    case R::kBestResponse:
      status = BestResponse(pricing, req.best_response()).status();
      break;
    case R::kFitFairModel:
      status = FitFairModel(pricing, req.fit_fair_model()).status();
      break;
    case R::REQUEST_NOT_SET:
      return absl::InvalidArgumentError(
          "request: set the spending request to price (noisy_counts, fit_equalized_odds, "
          "fit_statistical_parity, fit_equalized_odds_scores, audit_classifier, audit_regressor, "
          "decide, best_response, fit_fair_model or cell_sums)");
  }
  if (outputs.priced) return preview;
  // Every spending use-case reaches the charge path (or a replay) after its validation; a
  // failure before it is the request's own error, returned as the request would return it.
  if (!status.ok()) return status;
  return absl::InternalError("the request completed without reaching the charge path");
}

}  // namespace fairvault::server
