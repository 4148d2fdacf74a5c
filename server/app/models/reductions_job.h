// The exponentiated-gradient learner (core/learn/reductions.h; issue 22) as a managed training
// job: its defaults, its noise plan and charge at submission, and its run. Free of the vault's
// internals; fit_fair_model.cc and run_job.cc call it.
#ifndef FAIRVAULT_SERVER_APP_MODELS_REDUCTIONS_JOB_H_
#define FAIRVAULT_SERVER_APP_MODELS_REDUCTIONS_JOB_H_

#include <cstdint>
#include <functional>

#include "absl/random/bit_gen_ref.h"
#include "absl/status/statusor.h"
#include "core/accounting/accountant.h"
#include "core/learn/game_data.h"
#include "core/learn/selection.h"
#include "fairvault/v1/fairvault.pb.h"
#include "server/storage/records.pb.h"

namespace fairvault::server {

// The request's defaults filled in (in place) and validated against `max_rounds`: nothing here
// reads data.
absl::Status FillReductionDefaults(int max_rounds, v1::FitFairModelRequest* req);

// The noise plan of a submission on n rows, d preprocessed features and k groups, with grant
// delta: epsilon · masses_share for the group-label counts and epsilon · sums_share for the
// per-cell feature sums (discrete Laplace, L1 sensitivity CellReleaseL1Factor(k) rows and
// CellReleaseL1Factor(k) · max_row_steps feature steps); the rest for the T rounds' positives
// and, with the candidates mixture, the 8 candidates' (each half of the Gaussian RDP):
// discrete Gaussian from one multiplier z of the accountant (L2 sensitivity
// CellReleaseL2Factor(k)) when delta > 0 and its std beats the Laplace alternative's and fits
// its sampler, else discrete Laplace at one per-release epsilon. Checks that every sampler takes
// its scale whatever the features, and bounds what the job holds (the job cannot fail on them
// after the charge).
struct ReductionCharge {
  storage::JobPlan plan;
  core::accounting::PrivacyCost cost;
  v1::Cost description;
  bool gaussian = false;
};
absl::StatusOr<ReductionCharge> PlanReductionsJob(const v1::FitFairModelRequest& req, int64_t n,
                                                  int d, int k, double delta,
                                                  int64_t total_micro);

// The managed selection's options from a request whose defaults are filled in.
core::learn::SelectionOptions SelectionOptionsOf(const v1::FitFairModelRequest& req);

// Trains on the game's rows (kept) with the plan's noise; fills the model's components,
// weights, λ average, released violations and notes. With FINAL_MIXTURE_SELECTED, `validation`
// (the company's validation rows, preprocessed like the game's) holds the rows the selection
// chooses on, and the model is the chosen candidate; else it must be null.
absl::Status RunReductionsJob(const core::learn::GameData& data,
                              const v1::FitFairModelRequest& req, const storage::JobPlan& plan,
                              const core::learn::ValidationRows* validation, absl::BitGenRef gen,
                              const std::function<bool(int64_t, int64_t)>& progress,
                              v1::FairModel* model);

}  // namespace fairvault::server

#endif  // FAIRVAULT_SERVER_APP_MODELS_REDUCTIONS_JOB_H_
