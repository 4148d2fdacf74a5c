// The stochastic fair learners (DP-FERMI, PF-LD; core/learn/stochastic_fair.h) as managed
// training jobs: their defaults, their noise plan and charge at submission, and their run. Free
// of the vault's internals; vault_models.cc calls it from FitFairModel and RunJob.
#ifndef FAIRVAULT_SERVER_APP_MODELS_STOCHASTIC_JOB_H_
#define FAIRVAULT_SERVER_APP_MODELS_STOCHASTIC_JOB_H_

#include <cstdint>
#include <functional>

#include "absl/random/bit_gen_ref.h"
#include "absl/status/statusor.h"
#include "core/accounting/accountant.h"
#include "core/learn/network.h"
#include "core/learn/stochastic_fair.h"
#include "fairvault/v1/fairvault.pb.h"
#include "server/storage/records.pb.h"

namespace fairvault::server {

bool IsStochasticAlgorithm(v1::FairModelAlgorithm algorithm);

// The request's parameters with the papers' defaults filled in (in place), validated: nothing
// here reads data.
absl::Status FillStochasticDefaults(v1::FitFairModelRequest* req);
// The filled request's step sizes and clips at most 1,000 (larger ones overflow the model):
// checked after the replay, so that a job charged before this check replays.
absl::Status ValidateStochasticStepScales(const v1::FitFairModelRequest& filled);

// The number of classes the label column must hold: 2 for logistic regression, else the
// company's own largest label + 1 (public), at least 2. `max_label` is that largest label.
int ClassesOf(const v1::FitFairModelRequest& req, int max_label);
// The model the request trains on `inputs` preprocessed features.
core::learn::NetworkShape ShapeOf(const v1::FitFairModelRequest& req, int inputs, int classes);

// The noise plan of a submission on n rows, `inputs` features, `classes` classes and k groups,
// with grant delta: epsilon · marginals_share for the group marginals (discrete Laplace on the
// counts, L1 sensitivity 2); the rest for the training releases, all discrete Gaussians with one
// noise multiplier z from the accountant: DP-FERMI's two releases per step (batches drawn
// without replacement, Wang-Balle-Kasiviswanathan Theorem 9), PF-LD's one per step plus its
// per-epoch dual release on all rows. Checks that the sampler can take the stds (the job cannot
// fail on them after the charge). FailedPrecondition for a grant with delta 0.
struct StochasticCharge {
  storage::JobPlan plan;
  core::accounting::PrivacyCost cost;
  v1::Cost description;
  int64_t steps = 0;
};
absl::StatusOr<StochasticCharge> PlanStochasticJob(const v1::FitFairModelRequest& req, int64_t n,
                                                   int inputs, int classes, int k, double delta,
                                                   int64_t total_micro);

// Trains: releases the marginals, then runs the learner with the plan's noise. Fills the model's
// network, marginals and notes.
absl::Status RunStochasticJob(const core::learn::StochasticData& data,
                              const v1::FitFairModelRequest& req, const storage::JobPlan& plan,
                              absl::BitGenRef gen, const core::learn::Progress& progress,
                              v1::FairModel* model);

}  // namespace fairvault::server

#endif  // FAIRVAULT_SERVER_APP_MODELS_STOCHASTIC_JOB_H_
