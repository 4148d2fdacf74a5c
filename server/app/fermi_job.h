// DP-FERMI as a managed training job (issue 10, in progress: logistic regression, demographic
// parity): its defaults, its noise plan at submission and its training run. Free of the vault's
// internals; vault_models.cc calls it from FitFairModel and RunJob.
#ifndef FAIRVAULT_SERVER_APP_FERMI_JOB_H_
#define FAIRVAULT_SERVER_APP_FERMI_JOB_H_

#include <cstdint>
#include <functional>
#include <optional>

#include "absl/random/bit_gen_ref.h"
#include "absl/status/statusor.h"
#include "core/accounting/accountant.h"
#include "core/learn/dp_fermi.h"
#include "core/learn/fair_game.h"
#include "fairvault/v1/fairvault.pb.h"
#include "server/storage/records.pb.h"

namespace fairvault::server {

// The request's DP-FERMI parameters with the paper's defaults filled in (in place), validated.
absl::Status FillFermiDefaults(v1::FitFairModelRequest* req);
core::learn::FermiOptions FermiOptionsOf(const v1::FitFairModelRequest& req);

// The noise plan of a submission on n rows with grant delta: epsilon · marginals_share for the
// group marginals (discrete Laplace, L1 sensitivity 2), the rest for the training steps (each
// a pair of Gaussian mechanisms with multiplier z on a batch drawn without replacement,
// amplified by Wang-Balle-Kasiviswanathan's bound; z from the accountant). Sets the job plan,
// the charged cost and its description. FailedPrecondition for a grant with delta 0.
struct FermiCharge {
  storage::JobPlan plan;
  core::accounting::PrivacyCost cost;
  v1::Cost description;
  int64_t steps = 0;
};
absl::StatusOr<FermiCharge> PlanFermiJob(const v1::FitFairModelRequest& req, int64_t n,
                                         double delta, int64_t total_micro);

// Trains on the game's rows (x with intercept, labels, groups): releases the marginals, then
// runs the steps with the plan's noise. Fills the model's classifier and notes.
absl::Status RunFermiJob(const core::learn::GameData& data, const v1::FitFairModelRequest& req,
                         const storage::JobPlan& plan, absl::BitGenRef gen,
                         const std::function<bool(int64_t, int64_t)>& progress,
                         v1::FairModel* model);

}  // namespace fairvault::server

#endif  // FAIRVAULT_SERVER_APP_FERMI_JOB_H_
