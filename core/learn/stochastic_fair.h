// The stochastic fair learners on a Network (network.h): DP-FERMI (Lowy, Gupta, Razaviyayn,
// ICLR 2023, Alg. 1; ALGORITHMS.md §5) and PF-LD (Tran, Fioretto, Van Hentenryck, AAAI 2021;
// ALGORITHMS.md §6), for demographic parity, equalized odds and (PF-LD) accuracy parity over K
// groups (a K-valued attribute or the joint categories of several).
//
// Privacy (docs/privacy.md, "DP-FERMI" and "PF-LD"): the company's features and labels are
// public; only the group a_i is protected. Each step splits its gradient into the exact part
// (the loss and every term that does not read a_i) and the a-dependent part, a sum over the
// batch of per-row vectors, each first clipped to a public L2 norm C. Changing one subject's
// group moves one row's vector: the sum by at most 2C. The sum is snapped to a power-of-two grid
// and released with discrete Gaussian noise of std z × (its L2 sensitivity in grid steps), the
// rounding and a floating-point margin included (NoisySumPlan). Everything the learners use
// about the groups is either such a release or a released marginal (public constants).
//
// DP-FERMI: noisy two-timescale SGDA on min_θ max_{‖W_b‖_F ≤ D} mean_i ℓ(θ) + λ·mean_i ψ_i,
//   ψ_i = −Σ_j F_ij Σ_r W_b[r][j]² + 2 Σ_j W_b[a_i][j] F_ij / √p̂_b(a_i) − 1,
// with b = 0 for demographic parity and b = y_i for equalized odds (one W per label, p̂_b the
// released group marginals among label b). The a-dependent parts: ∇_θ of the second term (clip
// C_θ, sensitivity 2 C_θ) and ∇_W of it (one row 2 F_i/√p̂ in the row of the row's group, clip
// C_W; a group change moves it to another row: sensitivity √2 C_W); two releases per step.
//
// PF-LD: the Lagrangian J(θ) + Σ_{G,c} λ_{G,c} |μ_c(D) − μ_c(D_G)| over groups G and
// components c (demographic parity: the mean probability of each class j, j = 1 only for binary
// models; equalized odds: the same among the rows of each label y; accuracy parity: the mean
// probability of the true label). Primal step: DP-SGD on the constraint gradients' group parts
// (per-row clip C_p), the population parts exact, the signs from the last released violations;
// dual step once per epoch: the per-group sums of the components over all rows (each row's
// contribution has L2 norm <= 1, so sensitivity √2) released with the same multiplier z, then
// λ_{G,c} += s·|v̂_{G,c}|.
#ifndef FAIRVAULT_CORE_LEARN_STOCHASTIC_FAIR_H_
#define FAIRVAULT_CORE_LEARN_STOCHASTIC_FAIR_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "Eigen/Dense"
#include "absl/random/bit_gen_ref.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/dp/integer_noise.h"
#include "core/learn/network.h"

namespace fairvault::core::learn {

enum class Fairness { kDemographicParity, kEqualizedOdds, kAccuracyParity };

// The company's rows (public) and the protected groups.
struct StochasticData {
  RowMatrix x;             // n × d, preprocessed, intercept included
  std::vector<int> y;      // labels 0..classes-1
  std::vector<int> group;  // 0..k-1 (protected)
  int k = 0;
  int classes = 2;
  int64_t n() const { return x.rows(); }
};

// The cells the released marginals count: one per group (demographic and accuracy parity) or
// one per (label, group), label-major (equalized odds).
int MarginalCells(Fairness fairness, int k, int classes);
// The exact cell of row i (protected: only ever counted, then noised).
int MarginalCell(Fairness fairness, int k, int label, int group);

// A released vector sum: contributions clipped so that one subject's group change moves the
// exact sum by at most `change_bound` in L2, with each summand coordinate at most `term_bound`
// in absolute value. Grid: a power of two with change_bound/grid near 2^b, b chosen so that the
// std stays below 2^19 steps. Sensitivity in steps: change_bound/grid (raised by 1e-9 relative
// for the clip's float scaling) + √dim (rounding moves each coordinate by <= 1/2 step in each
// neighbour) × (1 + the float summation margin 2·γ_rows·rows·term_bound/grid).
struct NoisySumPlan {
  double grid = 0;
  double sensitivity_steps = 0;
  double std_steps = 0;
  int64_t dim = 0;
};
absl::StatusOr<NoisySumPlan> PlanNoisySum(double change_bound, double term_bound, int64_t dim,
                                          int64_t rows, double multiplier);

// Makes the integer noise of a given std in grid steps (server: the discrete Gaussian; tests:
// zero noise).
using NoiseFactory =
    std::function<absl::StatusOr<std::unique_ptr<dp::IntegerNoise>>(double std_steps)>;

// Called every epoch with (steps done, steps); returning false stops with Aborted.
using Progress = std::function<bool(int64_t, int64_t)>;

struct FermiOptions {
  int epochs = 200;
  int batch_size = 1024;
  double lr_theta = 0.005;
  double lr_w = 0.01;
  double w_radius = 1;    // D
  double clip_theta = 1;  // C_θ
  double clip_w = 1;      // C_W
  double lambda = 0.5;
  Fairness fairness = Fairness::kDemographicParity;
  absl::Status Validate() const;
  // lr_theta, lr_w, w_radius, clip_theta and clip_w at most 1,000 (kMaxStepScale): a new
  // request's check. Not part of Validate, which a job charged before the cap also passes.
  absl::Status ValidateStepScales() const;
};

struct PfldOptions {
  int epochs = 200;
  int batch_size = 1024;
  double lr_theta = 0.005;
  double clip = 10;  // C_p
  double dual_lr = 0.1;
  // The target violation τ in [0, 1] (issue 22 §4): the dual step is λ ← max(0, λ + s·(|v̂| − τ)),
  // so a multiplier grows only while its released violation exceeds τ and shrinks below it. 0:
  // the paper's λ ← λ + s·|v̂| (equality constraints).
  double target = 0;
  Fairness fairness = Fairness::kDemographicParity;
  absl::Status Validate() const;
  // lr_theta, clip (clip_theta) and dual_lr at most 1,000, as FermiOptions'.
  absl::Status ValidateStepScales() const;
};

// Steps of a schedule: epochs × ceil(n / min(batch, n)).
int64_t StochasticSteps(int64_t n, int epochs, int batch_size);

struct FermiPlan {
  NoisySumPlan theta, w;
};
absl::StatusOr<FermiPlan> PlanDpFermi(const NetworkShape& shape, int k, int64_t n,
                                      const FermiOptions& options, double multiplier);

struct PfldPlan {
  NoisySumPlan primal, dual;
  int components = 0;
};
absl::StatusOr<PfldPlan> PlanPfld(const NetworkShape& shape, int k, int64_t n,
                                  const PfldOptions& options, double multiplier);

// What a run reports besides the model: PF-LD's final multipliers and last released violations
// (group-major, components inner), both post-processing of its dual releases. Nothing computed
// from the groups without noise belongs here (how many rows were clipped depends on their
// groups: docs/privacy.md §6).
struct StochasticTrace {
  std::vector<double> lambda;
  std::vector<double> violations;
};

// DP-FERMI. `marginals`: MarginalCells entries, each > 0: the released p̂ (per label block for
// equalized odds, each block summing to about 1). The network must be initialised.
absl::Status TrainDpFermi(const StochasticData& data, absl::Span<const double> marginals,
                          const FermiOptions& options, const FermiPlan& plan,
                          const NoiseFactory& noise, absl::BitGenRef gen, const Progress& progress,
                          Network* net, StochasticTrace* trace);

// PF-LD. `group_counts`: MarginalCells entries, the released counts n̂ (each >= 1).
absl::Status TrainPfld(const StochasticData& data, absl::Span<const double> group_counts,
                       const PfldOptions& options, const PfldPlan& plan, const NoiseFactory& noise,
                       absl::BitGenRef gen, const Progress& progress, Network* net,
                       StochasticTrace* trace);

}  // namespace fairvault::core::learn

#endif  // FAIRVAULT_CORE_LEARN_STOCHASTIC_FAIR_H_
