#include "core/learn/stochastic_fair.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "absl/random/distributions.h"
#include "absl/strings/str_cat.h"
#include "core/dp/granularity.h"
#include "core/util/status_macros.h"
#include "core/util/validate.h"

namespace fairvault::core::learn {
namespace {

// The std stays at most 2^19 grid steps (the discrete Gaussian sampler takes <= 2^20) and the
// sensitivity spans at most 2^16 steps.
constexpr double kMaxStdSteps = 0x1p19;
constexpr int kMaxSensitivityBits = 16;
constexpr int kMinSensitivityBits = 4;
// Rows per block of a full-data pass (PF-LD's dual step).
constexpr int64_t kPassBlock = 4096;

absl::Status ValidateSchedule(int epochs, int batch_size) {
  if (epochs < 1 || epochs > 10'000) {
    return absl::InvalidArgumentError("epochs must be in 1..10000");
  }
  if (batch_size < 1) return absl::InvalidArgumentError("batch_size must be >= 1");
  return absl::OkStatus();
}

// Draws a batch of b distinct rows uniformly at random into perm[0..b) (partial Fisher-Yates
// on the running permutation).
void DrawBatch(int64_t b, absl::BitGenRef gen, std::vector<int64_t>& perm) {
  const int64_t n = static_cast<int64_t>(perm.size());
  for (int64_t t = 0; t < b; ++t) {
    const int64_t j = t + absl::Uniform<int64_t>(gen, 0, n - t);
    std::swap(perm[t], perm[j]);
  }
}

// One released sum: snap to the grid, add integer noise, back to real units (in place).
class Release {
 public:
  static absl::StatusOr<Release> Make(const NoisySumPlan& plan, const NoiseFactory& factory) {
    Release r;
    r.plan_ = plan;
    ASSIGN_OR_RETURN(r.noise_, factory(plan.std_steps));
    return r;
  }
  // The sum is exact (it depends on the attribute): a failure to snap it says nothing of its
  // value. Clipped terms keep a finite sum on the grid, so only a model whose outputs are no
  // longer numbers (NaN, from parameters that overflowed) gets here.
  absl::Status Apply(Eigen::Ref<Eigen::VectorXd> sum, absl::BitGenRef gen) const {
    for (Eigen::Index j = 0; j < sum.size(); ++j) {
      absl::StatusOr<int64_t> steps = dp::SnapToGrid(sum(j), plan_.grid);
      if (!steps.ok()) {
        return absl::InternalError(
            "the model diverged: its outputs are no longer numbers; lower its step sizes or "
            "clips");
      }
      sum(j) = dp::FromGrid(noise_->AddNoise(*steps, gen), plan_.grid);
    }
    return absl::OkStatus();
  }

 private:
  NoisySumPlan plan_;
  std::unique_ptr<dp::IntegerNoise> noise_;
};

// Rows per step (at most n), steps per epoch and in all.
struct Schedule {
  int64_t batch;
  int64_t steps_per_epoch;
  int64_t steps;
};
Schedule ScheduleOf(int64_t n, int epochs, int batch_size) {
  const int64_t b = std::min<int64_t>(batch_size, std::max<int64_t>(n, 1));
  const int64_t per_epoch = (n + b - 1) / b;
  return {b, per_epoch, static_cast<int64_t>(epochs) * per_epoch};
}

// Scaled whether or not the projection binds: the same work for every W.
void ProjectToBall(Eigen::Ref<Eigen::MatrixXd> w, double radius) {
  w *= radius / std::max(w.norm(), radius);
}

bool Report(const Progress& progress, int64_t done, int64_t total) {
  return !progress || progress(done, total);
}

}  // namespace

int MarginalCells(Fairness fairness, int k, int classes) {
  return fairness == Fairness::kEqualizedOdds ? k * classes : k;
}

int MarginalCell(Fairness fairness, int k, int label, int group) {
  return fairness == Fairness::kEqualizedOdds ? label * k + group : group;
}

absl::StatusOr<NoisySumPlan> PlanNoisySum(double change_bound, double term_bound, int64_t dim,
                                          int64_t rows, double multiplier) {
  RETURN_IF_ERROR(ValidateIsFiniteAndPositive(change_bound, "clipping norm"));
  RETURN_IF_ERROR(ValidateIsFiniteAndPositive(multiplier, "noise multiplier"));
  if (dim < 1 || rows < 1) return absl::InternalError("a noisy sum needs a dimension and rows");
  // b bits of sensitivity: z·2^b plus the rounding terms must stay within kMaxStdSteps.
  int bits = kMaxSensitivityBits;
  while (bits > kMinSensitivityBits && multiplier * std::ldexp(1.0, bits) > kMaxStdSteps / 2) {
    --bits;
  }
  NoisySumPlan plan;
  plan.dim = dim;
  ASSIGN_OR_RETURN(plan.grid, dp::PowerOfTwoGranularity(change_bound, bits));
  // The float summation error of one coordinate: |fl(Σ) − Σ| <= γ_m Σ|terms|, γ_m =
  // m·u/(1 − m·u), in each neighbour.
  const double u = std::numeric_limits<double>::epsilon() / 2;
  const double m = static_cast<double>(rows);
  const double gamma = m * u / (1 - m * u);
  const double float_steps = 2 * gamma * m * term_bound * (1 + 1e-9) / plan.grid;
  plan.sensitivity_steps = change_bound * (1 + 1e-9) / plan.grid +
                           std::sqrt(static_cast<double>(dim)) * (1 + float_steps);
  plan.std_steps = multiplier * plan.sensitivity_steps;
  if (!(plan.std_steps <= 2 * kMaxStdSteps)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the noise multiplier ", multiplier, " is too large for the sampler over ", dim,
        " coordinates (std ", plan.std_steps, " grid steps); use more epsilon or fewer steps"));
  }
  return plan;
}

// The step sizes, clips and W's radius scale every update: above this cap a few steps
// overflow the model's parameters, a failure a request's parameters show before its charge.
// (Within it a model can still diverge, from the noise drawn: that failure is post-processing
// of the releases, and the job says so.)
namespace {

constexpr double kMaxStepScale = 1000;

absl::Status ValidateStepSize(double value, absl::string_view field) {
  return ValidateIsPositiveAtMost(value, kMaxStepScale, field,
                                  "larger values overflow the model's parameters within a few "
                                  "steps; the defaults are 0.1 to 5");
}

}  // namespace

absl::Status FermiOptions::ValidateStepScales() const {
  RETURN_IF_ERROR(ValidateStepSize(lr_theta, "lr_theta"));
  RETURN_IF_ERROR(ValidateStepSize(lr_w, "lr_w"));
  RETURN_IF_ERROR(ValidateStepSize(w_radius, "w_radius"));
  RETURN_IF_ERROR(ValidateStepSize(clip_theta, "clip_theta"));
  return ValidateStepSize(clip_w, "clip_w");
}

absl::Status PfldOptions::ValidateStepScales() const {
  RETURN_IF_ERROR(ValidateStepSize(lr_theta, "lr_theta"));
  RETURN_IF_ERROR(ValidateStepSize(clip, "clip_theta"));
  return ValidateStepSize(dual_lr, "dual_lr");
}

absl::Status FermiOptions::Validate() const {
  RETURN_IF_ERROR(ValidateSchedule(epochs, batch_size));
  RETURN_IF_ERROR(ValidateIsFiniteAndPositive(lr_theta, "lr_theta"));
  RETURN_IF_ERROR(ValidateIsFiniteAndPositive(lr_w, "lr_w"));
  RETURN_IF_ERROR(ValidateIsFiniteAndPositive(w_radius, "w_radius"));
  RETURN_IF_ERROR(ValidateIsFiniteAndPositive(clip_theta, "clip_theta"));
  RETURN_IF_ERROR(ValidateIsFiniteAndPositive(clip_w, "clip_w"));
  RETURN_IF_ERROR(ValidateIsFiniteAndNonNegative(lambda, "fairness_lambda"));
  if (fairness == Fairness::kAccuracyParity) {
    return absl::InvalidArgumentError(
        "fairness: DP-FERMI trains for demographic parity or equalized odds; accuracy parity is "
        "PF-LD's");
  }
  return absl::OkStatus();
}

absl::Status PfldOptions::Validate() const {
  RETURN_IF_ERROR(ValidateSchedule(epochs, batch_size));
  RETURN_IF_ERROR(ValidateIsFiniteAndPositive(lr_theta, "lr_theta"));
  RETURN_IF_ERROR(ValidateIsFiniteAndPositive(clip, "clip_theta"));
  RETURN_IF_ERROR(ValidateIsFiniteAndPositive(dual_lr, "dual_lr"));
  RETURN_IF_ERROR(ValidateIsFiniteAndNonNegative(target, "gamma"));
  if (target > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("gamma: PF-LD's target violation is a gap between rates, at most 1 (got ",
                     target, ")"));
  }
  return absl::OkStatus();
}

int64_t StochasticSteps(int64_t n, int epochs, int batch_size) {
  return ScheduleOf(n, epochs, batch_size).steps;
}

absl::StatusOr<FermiPlan> PlanDpFermi(const NetworkShape& shape, int k, int64_t n,
                                      const FermiOptions& options, double multiplier) {
  RETURN_IF_ERROR(shape.Validate());
  RETURN_IF_ERROR(options.Validate());
  if (k < 2) return absl::InvalidArgumentError("DP-FERMI needs at least two groups");
  const int64_t b = std::min<int64_t>(options.batch_size, n);
  const int blocks = options.fairness == Fairness::kEqualizedOdds ? shape.classes() : 1;
  FermiPlan plan;
  ASSIGN_OR_RETURN(plan.theta, PlanNoisySum(2 * options.clip_theta, options.clip_theta,
                                            shape.NumParams(), b, multiplier));
  // A row's W gradient (norm <= C_W) sits in its group's row of W; a group change moves it
  // to another row, a disjoint support: the sum moves by at most √2·C_W.
  ASSIGN_OR_RETURN(plan.w,
                   PlanNoisySum(std::sqrt(2.0) * options.clip_w, options.clip_w,
                                static_cast<int64_t>(blocks) * k * shape.classes(), b, multiplier));
  return plan;
}

namespace {

// PF-LD's constraint components: which class probability each one averages (−1: the row's true
// label) and over which label's rows (−1: all rows).
struct Component {
  int cls;
  int label;
};

std::vector<Component> PfldComponents(Fairness fairness, int classes) {
  std::vector<Component> out;
  // A binary model's two class probabilities sum to 1: one constraint per group suffices.
  const int first = classes == 2 ? 1 : 0;
  switch (fairness) {
    case Fairness::kDemographicParity:
      for (int j = first; j < classes; ++j) out.push_back({j, -1});
      break;
    case Fairness::kEqualizedOdds:
      for (int y = 0; y < classes; ++y) {
        for (int j = first; j < classes; ++j) out.push_back({j, y});
      }
      break;
    case Fairness::kAccuracyParity:
      out.push_back({-1, -1});
      break;
  }
  return out;
}

}  // namespace

absl::StatusOr<PfldPlan> PlanPfld(const NetworkShape& shape, int k, int64_t n,
                                  const PfldOptions& options, double multiplier) {
  RETURN_IF_ERROR(shape.Validate());
  RETURN_IF_ERROR(options.Validate());
  if (k < 2) return absl::InvalidArgumentError("PF-LD needs at least two groups");
  const int64_t b = std::min<int64_t>(options.batch_size, n);
  PfldPlan plan;
  plan.components = static_cast<int>(PfldComponents(options.fairness, shape.classes()).size());
  ASSIGN_OR_RETURN(plan.primal,
                   PlanNoisySum(2 * options.clip, options.clip, shape.NumParams(), b, multiplier));
  // One row's contributions to the group sums: probabilities of distinct classes (or one), L2
  // norm <= 1; moving it between two groups changes two blocks: √2.
  ASSIGN_OR_RETURN(
      plan.dual,
      PlanNoisySum(std::sqrt(2.0), 1.0, static_cast<int64_t>(k) * plan.components, n, multiplier));
  return plan;
}

namespace {

absl::Status CheckData(const StochasticData& data, const Network& net, int64_t cells,
                       absl::Span<const double> public_values) {
  const int64_t n = data.n();
  if (n < 1 || data.k < 2) return absl::InvalidArgumentError("a fit needs rows and two groups");
  if (static_cast<int64_t>(data.y.size()) != n || static_cast<int64_t>(data.group.size()) != n ||
      data.x.cols() != net.shape().inputs || data.classes != net.shape().classes()) {
    return absl::InternalError("stochastic learner: data and model shapes disagree");
  }
  if (static_cast<int64_t>(public_values.size()) != cells) {
    return absl::InternalError("stochastic learner: wrong number of released marginals");
  }
  for (double v : public_values) {
    if (!(v > 0) || !std::isfinite(v)) return absl::InternalError("marginals must be positive");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status TrainDpFermi(const StochasticData& data, absl::Span<const double> marginals,
                          const FermiOptions& options, const FermiPlan& plan,
                          const NoiseFactory& noise, absl::BitGenRef gen, const Progress& progress,
                          Network* net, StochasticTrace* trace) {
  RETURN_IF_ERROR(options.Validate());
  const int k = data.k;
  const int l = data.classes;
  const bool eo = options.fairness == Fairness::kEqualizedOdds;
  const int blocks = eo ? l : 1;
  RETURN_IF_ERROR(CheckData(data, *net, MarginalCells(options.fairness, k, l), marginals));
  ASSIGN_OR_RETURN(const Release release_theta, Release::Make(plan.theta, noise));
  ASSIGN_OR_RETURN(const Release release_w, Release::Make(plan.w, noise));

  const int64_t n = data.n();
  const auto [b, steps_per_epoch, steps] = ScheduleOf(n, options.epochs, options.batch_size);
  const int64_t p = net->shape().NumParams();
  const double lambda = options.lambda;
  std::vector<double> inv_sqrt_p(marginals.size());
  for (size_t c = 0; c < marginals.size(); ++c) inv_sqrt_p[c] = 1 / std::sqrt(marginals[c]);

  // W: block β (rows β·k .. β·k + k − 1) is the W of label β (equalized odds) or the only one.
  Eigen::MatrixXd w = Eigen::MatrixXd::Zero(static_cast<Eigen::Index>(blocks) * k, l);
  Eigen::MatrixXd exact_w(w.rows(), l), col_sq(blocks, l), mass(blocks, l);
  Eigen::VectorXd priv_w(w.size());  // column-major view of a w-shaped matrix
  Eigen::VectorXd exact_theta(p), priv_theta(p);
  RowMatrix exact_cot(b, l), priv_cot(b, l);
  std::vector<int> labels(b);
  Eigen::RowVectorXd w_row(l);
  std::vector<int64_t> perm(n);
  std::iota(perm.begin(), perm.end(), 0);

  for (int64_t step = 0; step < steps; ++step) {
    DrawBatch(b, gen, perm);
    const absl::Span<const int64_t> rows(perm.data(), static_cast<size_t>(b));
    net->Forward(data.x, rows);
    const RowMatrix& f = net->probabilities();
    for (int beta = 0; beta < blocks; ++beta) {
      col_sq.row(beta) =
          w.middleRows(static_cast<Eigen::Index>(beta) * k, k).colwise().squaredNorm();
    }
    mass.setZero();
    priv_w.setZero();
    Eigen::Map<Eigen::MatrixXd> priv_w_matrix(priv_w.data(), w.rows(), l);
    for (int64_t i = 0; i < b; ++i) {
      const int64_t row = rows[i];
      const int y = data.y[row];
      labels[i] = y;
      const int beta = eo ? y : 0;
      const int cell = MarginalCell(options.fairness, k, y, data.group[row]);
      const Eigen::Index w_index = static_cast<Eigen::Index>(beta) * k + data.group[row];
      // ψ's a-free term (exact) and its a-dependent term (clipped, noised) on the probabilities.
      exact_cot.row(i) = -lambda * col_sq.row(beta);
      priv_cot.row(i) = (2 * inv_sqrt_p[cell]) * w.row(w_index);
      mass.row(beta) += f.row(i);
      // ∇_W of the a-dependent term: one row of W, 2 F_i / √p̂, clipped to C_W.
      w_row = (2 * inv_sqrt_p[cell]) * f.row(i);
      // Scaled whether or not the clip binds: the same work for every row.
      w_row *= options.clip_w / std::max(w_row.norm(), options.clip_w);
      priv_w_matrix.row(w_index) += w_row;
    }
    exact_theta.setZero();
    net->AddExactGradient(exact_cot, labels, &exact_theta);
    net->ClippedGradientSum(priv_cot, options.clip_theta, &priv_theta);
    // The only releases: the two noisy sums.
    RETURN_IF_ERROR(release_theta.Apply(priv_theta, gen));
    RETURN_IF_ERROR(release_w.Apply(priv_w, gen));
    // ∇_W of ψ's a-free term: −2 W[r][j] Σ_i F_ij over the block's rows (exact).
    for (int beta = 0; beta < blocks; ++beta) {
      const auto block = w.middleRows(static_cast<Eigen::Index>(beta) * k, k);
      exact_w.middleRows(static_cast<Eigen::Index>(beta) * k, k) =
          -2 * (block.array().rowwise() * mass.row(beta).array()).matrix();
    }
    net->params() -=
        (options.lr_theta / static_cast<double>(b)) * (exact_theta + lambda * priv_theta);
    w += (options.lr_w * lambda / static_cast<double>(b)) * (exact_w + priv_w_matrix);
    for (int beta = 0; beta < blocks; ++beta) {
      ProjectToBall(w.middleRows(static_cast<Eigen::Index>(beta) * k, k), options.w_radius);
    }
    if (!net->params().allFinite()) return absl::InternalError("DP-FERMI diverged");
    if ((step + 1) % steps_per_epoch == 0 && !Report(progress, step + 1, steps)) {
      return absl::AbortedError("DP-FERMI was stopped");
    }
  }
  return absl::OkStatus();
}

absl::Status TrainPfld(const StochasticData& data, absl::Span<const double> group_counts,
                       const PfldOptions& options, const PfldPlan& plan, const NoiseFactory& noise,
                       absl::BitGenRef gen, const Progress& progress, Network* net,
                       StochasticTrace* trace) {
  RETURN_IF_ERROR(options.Validate());
  const int k = data.k;
  const int l = data.classes;
  RETURN_IF_ERROR(CheckData(data, *net, MarginalCells(options.fairness, k, l), group_counts));
  const std::vector<Component> comps = PfldComponents(options.fairness, l);
  const int nc = static_cast<int>(comps.size());
  if (nc != plan.components) return absl::InternalError("PF-LD plan and options disagree");
  ASSIGN_OR_RETURN(const Release release_primal, Release::Make(plan.primal, noise));
  ASSIGN_OR_RETURN(const Release release_dual, Release::Make(plan.dual, noise));

  const int64_t n = data.n();
  const auto [b, steps_per_epoch, steps] = ScheduleOf(n, options.epochs, options.batch_size);
  const int64_t p = net->shape().NumParams();

  // Public: rows per label (the company's labels) and the released group counts.
  std::vector<double> label_rows(l, 0);
  for (int y : data.y) label_rows[y] += 1;
  const auto filter_rows = [&](const Component& c) {
    return c.label < 0 ? static_cast<double>(n) : std::max(label_rows[c.label], 1.0);
  };
  const auto group_rows = [&](int g, const Component& c) {
    return group_counts[MarginalCell(options.fairness, k, c.label < 0 ? 0 : c.label, g)];
  };
  // Dual state, group-major: λ_{G,c} >= 0 and the sign of the last released violation.
  std::vector<double> lambda(static_cast<size_t>(k) * nc, 0), sign(lambda.size(), 0),
      violation(lambda.size(), 0);
  // Per component: Σ_G λ s n / n_filter (the population parts' weight, exact).
  std::vector<double> population_weight(nc, 0);

  Eigen::VectorXd exact_theta(p), priv_theta(p);
  RowMatrix exact_cot(b, l), priv_cot(b, l);
  std::vector<int> labels(b);
  Eigen::VectorXd group_sums(static_cast<Eigen::Index>(k) * nc);
  std::vector<double> population_sums(nc);
  std::vector<int64_t> perm(n);
  std::iota(perm.begin(), perm.end(), 0);
  const auto qualifies = [&](const Component& c, int y) { return c.label < 0 || c.label == y; };
  const auto cls_of = [](const Component& c, int y) { return c.cls < 0 ? y : c.cls; };
  Eigen::VectorXd average = Eigen::VectorXd::Zero(p);
  int64_t averaged = 0;

  for (int64_t step = 0; step < steps; ++step) {
    DrawBatch(b, gen, perm);
    const absl::Span<const int64_t> rows(perm.data(), static_cast<size_t>(b));
    net->Forward(data.x, rows);
    exact_cot.setZero();
    priv_cot.setZero();
    for (int64_t i = 0; i < b; ++i) {
      const int64_t row = rows[i];
      const int y = data.y[row];
      const int g = data.group[row];
      labels[i] = y;
      for (int c = 0; c < nc; ++c) {
        if (!qualifies(comps[c], y)) continue;
        const int j = cls_of(comps[c], y);
        // λ s (∇μ_c(D) − ∇μ_c(D_G)), estimated on the batch (n/b scaling in the step size).
        exact_cot(i, j) += population_weight[c];
        const size_t gc = static_cast<size_t>(g) * nc + c;
        priv_cot(i, j) -= lambda[gc] * sign[gc] * static_cast<double>(n) / group_rows(g, comps[c]);
      }
    }
    exact_theta.setZero();
    net->AddExactGradient(exact_cot, labels, &exact_theta);
    net->ClippedGradientSum(priv_cot, options.clip, &priv_theta);
    RETURN_IF_ERROR(release_primal.Apply(priv_theta, gen));
    net->params() -= (options.lr_theta / static_cast<double>(b)) * (exact_theta + priv_theta);
    if (!net->params().allFinite()) return absl::InternalError("PF-LD diverged");

    if ((step + 1) % steps_per_epoch != 0) continue;
    // The dual step: every row's components, summed per group (released) and overall (exact).
    group_sums.setZero();
    std::fill(population_sums.begin(), population_sums.end(), 0.0);
    for (int64_t start = 0; start < n; start += kPassBlock) {
      const int64_t count = std::min(kPassBlock, n - start);
      net->ForwardRange(data.x, start, count);
      const RowMatrix& f = net->probabilities();
      for (int64_t i = 0; i < count; ++i) {
        const int y = data.y[start + i];
        const int g = data.group[start + i];
        for (int c = 0; c < nc; ++c) {
          if (!qualifies(comps[c], y)) continue;
          const double v = f(i, cls_of(comps[c], y));
          group_sums(static_cast<Eigen::Index>(g) * nc + c) += v;
          population_sums[c] += v;
        }
      }
    }
    RETURN_IF_ERROR(release_dual.Apply(group_sums, gen));
    std::fill(population_weight.begin(), population_weight.end(), 0.0);
    for (int g = 0; g < k; ++g) {
      for (int c = 0; c < nc; ++c) {
        const size_t gc = static_cast<size_t>(g) * nc + c;
        const double v = population_sums[c] / filter_rows(comps[c]) -
                         group_sums(static_cast<Eigen::Index>(gc)) / group_rows(g, comps[c]);
        violation[gc] = v;
        sign[gc] = static_cast<double>((v > 0) - (v < 0));
        lambda[gc] = std::max(0.0, lambda[gc] + options.dual_lr * (std::abs(v) - options.target));
        population_weight[c] +=
            lambda[gc] * sign[gc] * static_cast<double>(n) / filter_rows(comps[c]);
      }
    }
    // The stable final model (issue 22 §4): the average of the epoch-end iterates of the second
    // half of training (post-processing of the noisy steps that made them). The last iterate
    // alone swung with the dual's oscillation (all-negative or > 50 % positive in some fits).
    const int64_t epoch = (step + 1) / steps_per_epoch;
    if (2 * epoch > options.epochs) {
      average += net->params();
      ++averaged;
    }
    if (!Report(progress, step + 1, steps)) return absl::AbortedError("PF-LD was stopped");
  }
  if (averaged > 0) net->params() = average / static_cast<double>(averaged);
  if (trace != nullptr) {
    trace->lambda = lambda;
    trace->violations = violation;
  }
  return absl::OkStatus();
}

}  // namespace fairvault::core::learn
