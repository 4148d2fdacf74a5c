#include "core/learn/reductions.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "core/learn/fair_game.h"
#include "core/postprocess/glpk_util.h"
#include "core/util/status_macros.h"
#include "core/util/validate.h"

namespace fairvault::core::learn {
namespace {

namespace glpk = postprocess::glpk;

// The candidates' multiples of the average λ̄ (FinalMixture::kCandidates).
constexpr std::array<double, 8> kCandidateScales = {0, 0.25, 0.5, 0.75, 1, 1.5, 2, 3};

// Below this a mixture LP coefficient is floating-point residue of an exact 0.
constexpr double kRoundingResidue = 1e-12;

double Clamp01(double v) { return std::min(1.0, std::max(0.0, v)); }

// A deterministic 64-bit digest of packed decisions (splitmix64 finalizer over the words).
uint64_t Digest(const std::vector<uint64_t>& words) {
  uint64_t h = 0x9e3779b97f4a7c15ULL ^ words.size();
  for (uint64_t w : words) {
    uint64_t z = h + w + 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    h = z ^ (z >> 31);
  }
  return h;
}

// ∂(λᵀγ)/∂h_i · n for a row of cell (a, y): the a-dependent term net_c / q̂_c minus the label's
// (equalized odds) or the population's (demographic parity) share, net = λ_+ − λ_−.
std::vector<double> LagrangianShift(ReductionConstraint constraint, const ReleasedCells& cells,
                                    absl::Span<const double> lambda) {
  const int k = cells.k;
  const double n = static_cast<double>(cells.n);
  std::vector<double> shift(2 * k, 0.0);
  if (constraint == ReductionConstraint::kEqualizedOdds) {
    for (int y = 0; y < 2; ++y) {
      double label_share = 0;
      for (int a = 0; a < k; ++a) label_share += lambda[4 * a + 2 * y] - lambda[4 * a + 2 * y + 1];
      label_share /= std::max(cells.label_rows[y], 1.0);
      for (int a = 0; a < k; ++a) {
        const double net = lambda[4 * a + 2 * y] - lambda[4 * a + 2 * y + 1];
        shift[2 * a + y] = n * (net / cells.counts[2 * a + y] - label_share);
      }
    }
  } else {
    double population_share = 0;
    for (int a = 0; a < k; ++a) population_share += lambda[2 * a] - lambda[2 * a + 1];
    population_share /= std::max(n, 1.0);
    for (int a = 0; a < k; ++a) {
      const double net = lambda[2 * a] - lambda[2 * a + 1];
      const double group_rows = cells.counts[2 * a] + cells.counts[2 * a + 1];
      for (int y = 0; y < 2; ++y) shift[2 * a + y] = n * (net / group_rows - population_share);
    }
  }
  return shift;
}

// One best response's record: its training decisions' group (responses deciding alike on every
// training row share their true moments, so their released estimates are averaged).
struct Audit {
  std::vector<double> moments;  // released, one per moment (before the bound and the signs)
  uint64_t digest = 0;
  double error = 0;
};

struct Response {
  std::vector<int> rounds;         // the rounds that returned it
  std::vector<double> moment_sum;  // Σ over those rounds of the released moments
  double error = 0;                // on the training rows (public)
};

// Fairlearn's final step: the mixture over the responses minimising error + B·max violation,
// min Σ_g err_g w_g + B s  s.t.  Σ_g (γ̄_gj − bound) w_g − s <= 0 for every j, Σ_g w_g = 1.
absl::StatusOr<std::vector<double>> SolveMixture(const std::vector<Response>& responses,
                                                 int constraints, double bound,
                                                 double lambda_bound) {
  const int g = static_cast<int>(responses.size());
  glpk::ScopedGlpk scoped;
  glpk::ProbPtr lp(glp_create_prob());
  glp_set_obj_dir(lp.get(), GLP_MIN);
  glp_add_cols(lp.get(), g + 1);
  for (int c = 0; c < g; ++c) {
    glp_set_col_bnds(lp.get(), c + 1, GLP_LO, 0, 0);
    glp_set_obj_coef(lp.get(), c + 1, responses[c].error);
  }
  glp_set_col_bnds(lp.get(), g + 1, GLP_LO, 0, 0);
  glp_set_obj_coef(lp.get(), g + 1, lambda_bound);
  glp_add_rows(lp.get(), constraints + 1);
  std::vector<int> index(g + 2);
  std::vector<double> value(g + 2);
  for (int j = 0; j < constraints; ++j) {
    for (int c = 0; c < g; ++c) {
      index[c + 1] = c + 1;
      const double slack =
          responses[c].moment_sum[j] / static_cast<double>(responses[c].rounds.size()) - bound;
      // A moment equal to the bound comes out as a rounding residue (8.7e-18 for 0.01 - 0.01);
      // left in, such entries made GLPK's simplex cycle (glpk_util_test). Moments are counts'
      // ratios, so nothing below 1e-12 is a real difference.
      value[c + 1] = std::abs(slack) < kRoundingResidue ? 0.0 : slack;
    }
    index[g + 1] = g + 1;
    value[g + 1] = -1;
    glp_set_mat_row(lp.get(), j + 1, g + 1, index.data(), value.data());
    glp_set_row_bnds(lp.get(), j + 1, GLP_UP, 0, 0);
  }
  for (int c = 0; c < g; ++c) {
    index[c + 1] = c + 1;
    value[c + 1] = 1;
  }
  glp_set_mat_row(lp.get(), constraints + 1, g, index.data(), value.data());
  glp_set_row_bnds(lp.get(), constraints + 1, GLP_FX, 1, 1);
  glp_smcp parm = glpk::QuietSimplexParams();
  parm.presolve = GLP_ON;
  RETURN_IF_ERROR(glpk::RunSimplex(lp.get(), parm, "the reductions learner's mixture LP"));
  std::vector<double> weights(g);
  double total = 0;
  for (int c = 0; c < g; ++c) {
    weights[c] = std::max(0.0, glp_get_col_prim(lp.get(), c + 1));
    total += weights[c];
  }
  if (!(total > 0)) return absl::InternalError("the mixture LP returned no weight");
  for (double& w : weights) w /= total;
  return weights;
}

}  // namespace

int CandidateCount() { return static_cast<int>(kCandidateScales.size()); }

int ReductionConstraintCount(ReductionConstraint constraint, int k) {
  return constraint == ReductionConstraint::kEqualizedOdds ? 4 * k : 2 * k;
}

double CellReleaseL1Factor(int k) { return k == 2 ? 1.0 : 2.0; }
double CellReleaseL2Factor(int k) { return k == 2 ? 1.0 : std::sqrt(2.0); }

int FirstNoisedGroup(int k) { return k == 2 ? 1 : 0; }

std::vector<std::vector<double>> ReleaseGroupCells(const std::vector<std::vector<int64_t>>& exact,
                                                   const dp::IntegerNoise& noise,
                                                   absl::BitGenRef gen) {
  const int cells = static_cast<int>(exact.size());
  const int k = cells / 2;
  const size_t m = cells > 0 ? exact[0].size() : 0;
  const int first = FirstNoisedGroup(k);
  std::vector<std::vector<double>> released(cells, std::vector<double>(m, 0.0));
  for (int y = 0; y < 2 && y < cells; ++y) {
    for (size_t j = 0; j < m; ++j) {
      // The label's total over every group: the company's own sum (public).
      int64_t total = 0;
      for (int c = y; c < cells; c += 2) total += exact[c][j];
      int64_t noised = 0;
      for (int c = y + 2 * first; c < cells; c += 2) {
        const int64_t v = noise.AddNoise(exact[c][j], gen);
        released[c][j] = static_cast<double>(v);
        noised += v;
      }
      if (first == 1) {
        released[y][j] = static_cast<double>(total - noised);  // K = 2: the other group
      } else {
        // K > 2: the least-squares projection onto the public total spreads the residual
        // evenly over the K groups.
        const double share = static_cast<double>(total - noised) / k;
        for (int c = y; c < cells; c += 2) released[c][j] += share;
      }
    }
  }
  return released;
}

ReleasedCells ReleaseCells(const GameData& data, double mass_floor,
                           const dp::IntegerNoise& count_noise, const dp::IntegerNoise& sum_noise,
                           absl::BitGenRef gen) {
  const int k = data.k;
  ReleasedCells cells;
  cells.k = k;
  cells.n = data.n;
  for (int y : data.y) cells.label_rows[y] += 1;
  std::vector<std::vector<int64_t>> counts(2 * k);
  for (int c = 0; c < 2 * k; ++c) counts[c] = {data.cell_counts[c]};
  const std::vector<std::vector<double>> noisy_counts = ReleaseGroupCells(counts, count_noise, gen);
  const std::vector<std::vector<double>> noisy_sums =
      ReleaseGroupCells(data.cell_sums, sum_noise, gen);
  cells.counts.resize(2 * k);
  cells.sums.resize(2 * k);
  for (int c = 0; c < 2 * k; ++c) {
    cells.counts[c] = std::max(noisy_counts[c][0], mass_floor);
    cells.sums[c].resize(data.d);
    for (int j = 0; j < data.d; ++j) {
      cells.sums[c](j) = noisy_sums[c][j] * data.feature_grid;
    }
  }
  return cells;
}

absl::StatusOr<Eigen::VectorXd> ReductionBestResponse(const GameData& data,
                                                      const ReleasedCells& cells,
                                                      ReductionConstraint constraint,
                                                      absl::Span<const double> lambda) {
  const int k = cells.k;
  if (static_cast<int>(lambda.size()) != ReductionConstraintCount(constraint, k)) {
    return absl::InvalidArgumentError(
        absl::StrCat("lambda must have ", ReductionConstraintCount(constraint, k),
                     " entries (got ", lambda.size(), ")"));
  }
  for (double l : lambda) {
    if (!(l >= 0) || !std::isfinite(l)) {
      return absl::InvalidArgumentError("lambda entries must be finite and >= 0");
    }
  }
  if (static_cast<int>(cells.sums.size()) != 2 * k || data.d != cells.sums[0].size()) {
    return absl::InvalidArgumentError("the released cells do not match the game's features");
  }
  const std::vector<double> shift = LagrangianShift(constraint, cells, lambda);
  Eigen::VectorXd target = Eigen::VectorXd::Zero(data.d);
  for (int c = 0; c < 2 * k; ++c) {
    const double r = (c % 2 == 1 ? 1.0 : -1.0) - shift[c];
    target.noalias() += r * cells.sums[c];
  }
  Eigen::VectorXd w = data.gram.solve(target);
  if (!w.allFinite()) return absl::InternalError("the least-squares solve diverged");
  return w;
}

absl::StatusOr<Eigen::VectorXd> FairGameBestResponse(const GameData& data,
                                                     const ReleasedCells& cells,
                                                     absl::Span<const double> lambda) {
  const int k = cells.k;
  if (static_cast<int>(lambda.size()) != ConstraintCount(k)) {
    return absl::InvalidArgumentError(absl::StrCat("lambda must have 4(K-1) = ", ConstraintCount(k),
                                                   " entries (got ", lambda.size(), ")"));
  }
  for (double l : lambda) {
    if (!(l >= 0) || !std::isfinite(l)) {
      return absl::InvalidArgumentError("lambda entries must be finite and >= 0");
    }
  }
  if (static_cast<int>(cells.sums.size()) != 2 * k || data.d != cells.sums[0].size() ||
      cells.n <= 0) {
    return absl::InvalidArgumentError("the released cells do not match the game's features");
  }
  std::vector<double> masses(2 * k);
  for (int c = 0; c < 2 * k; ++c) masses[c] = cells.counts[c] / static_cast<double>(cells.n);
  const std::vector<double> shift = CostShifts(lambda, masses, k);
  Eigen::VectorXd cost1 = data.xt_label0;  // Xᵀ C1: the a-free part, then the released shifts
  for (int c = 0; c < 2 * k; ++c) cost1.noalias() += shift[c] * cells.sums[c];
  Eigen::VectorXd w = data.gram.solve(data.xt_label1) - data.gram.solve(cost1);
  if (!w.allFinite()) return absl::InternalError("the least-squares solve diverged");
  return w;
}

std::vector<double> ReductionMoments(ReductionConstraint constraint, const ReleasedCells& cells,
                                     absl::Span<const double> positives,
                                     const double label_positives[2]) {
  const int k = cells.k;
  std::vector<double> moments;
  if (constraint == ReductionConstraint::kEqualizedOdds) {
    moments.assign(2 * k, 0.0);
    for (int y = 0; y < 2; ++y) {
      const double overall = label_positives[y] / std::max(cells.label_rows[y], 1.0);
      for (int a = 0; a < k; ++a) {
        const int c = 2 * a + y;
        moments[c] = Clamp01(positives[c] / cells.counts[c]) - overall;
      }
    }
  } else {
    moments.assign(k, 0.0);
    const double overall = (label_positives[0] + label_positives[1]) /
                           std::max(static_cast<double>(cells.n), 1.0);
    for (int a = 0; a < k; ++a) {
      moments[a] = Clamp01((positives[2 * a] + positives[2 * a + 1]) /
                           (cells.counts[2 * a] + cells.counts[2 * a + 1])) -
                   overall;
    }
  }
  return moments;
}

absl::Status ReductionOptions::Validate() const {
  if (rounds < 1) return absl::InvalidArgumentError("rounds must be >= 1");
  RETURN_IF_ERROR(ValidateIsFiniteAndNonNegative(bound, "gamma"));
  if (bound > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gamma: the moments lie in [-1, 1], so a bound above 1 constrains nothing (got ", bound,
        ")"));
  }
  // B in [1e-9, 1e9] (as the game's): every cost shift n·B/n̂ stays finite.
  RETURN_IF_ERROR(ValidateLambdaBound(lambda_bound));
  RETURN_IF_ERROR(ValidateIsFiniteAndPositive(learning_rate, "learning_rate"));
  if (learning_rate > 1e9) {
    return absl::InvalidArgumentError(
        absl::StrCat("learning_rate must be at most 1e9 (got ", learning_rate, ")"));
  }
  if (!(mass_floor >= 1) || !std::isfinite(mass_floor)) {
    return absl::InvalidArgumentError("mass_floor must be finite and >= 1");
  }
  return absl::OkStatus();
}

absl::StatusOr<ReductionResult> RunReductionsLearner(
    const GameData& data, const ReductionOptions& options, const ReductionNoises& noises,
    absl::BitGenRef gen, const std::function<bool(int64_t, int64_t)>& progress) {
  RETURN_IF_ERROR(options.Validate());
  if (noises.counts == nullptr || noises.sums == nullptr || noises.positives == nullptr ||
      (options.mixture == FinalMixture::kCandidates && noises.candidates == nullptr)) {
    return absl::InternalError("the reductions learner needs its three noises");
  }
  if (!data.KeepsMatrix()) {
    return absl::FailedPreconditionError(
        "the reductions learner needs the rows: build the game with KeepMatrix::kYes");
  }
  const int k = data.k;
  const int constraints = ReductionConstraintCount(options.constraint, k);
  ReductionResult result;

  // 1-2. The counts and the feature sums, once: every best response is post-processing of them.
  const ReleasedCells cells =
      ReleaseCells(data, options.mass_floor, *noises.counts, *noises.sums, gen);
  result.masses.resize(2 * k);
  for (int c = 0; c < 2 * k; ++c) {
    result.masses[c] = cells.counts[c] / static_cast<double>(std::max<int64_t>(data.n, 1));
  }
  result.cells = cells;

  // 3. T rounds of exponentiated gradient.
  std::vector<double> theta(constraints, 0.0), lambda(constraints, 0.0);
  result.lambda_average.assign(constraints, 0.0);
  std::vector<Response> responses;
  std::vector<Eigen::VectorXd> weights_of_round;
  // Responses are grouped by a 64-bit digest of their packed training decisions (n/8 bytes are
  // hashed, none kept): a collision, about T²/2^64, would only merge two groups' estimates.
  absl::flat_hash_map<uint64_t, int> response_of;
  std::vector<uint64_t> packed(static_cast<size_t>((data.n + 63) / 64), 0);
  std::vector<std::vector<int64_t>> positives(2 * k, std::vector<int64_t>(1, 0));
  // A response's audit: its training decisions' digest and error (public), and its released
  // positives per cell as moments. Counted branch-free: the work does not depend on the groups.
  const auto audit_response = [&](const Eigen::VectorXd& w,
                                  const dp::IntegerNoise& noise) -> absl::StatusOr<Audit> {
    const Eigen::VectorXd margin = *data.x * w;
    for (auto& cell : positives) cell[0] = 0;
    std::fill(packed.begin(), packed.end(), 0);
    int64_t wrong = 0;
    for (int64_t i = 0; i < data.n; ++i) {
      const int h = margin(i) > 0 ? 1 : 0;
      packed[static_cast<size_t>(i / 64)] |= static_cast<uint64_t>(h) << (i % 64);
      positives[2 * data.group[i] + data.y[i]][0] += h;
      wrong += h ^ data.y[i];
    }
    double label_positives[2] = {0, 0};
    for (int c = 0; c < 2 * k; ++c) label_positives[c % 2] += static_cast<double>(positives[c][0]);
    const std::vector<std::vector<double>> released = ReleaseGroupCells(positives, noise, gen);
    std::vector<double> noisy(2 * k);
    for (int c = 0; c < 2 * k; ++c) noisy[c] = released[c][0];
    Audit audit;
    audit.moments = ReductionMoments(options.constraint, cells, noisy, label_positives);
    audit.digest = Digest(packed);
    audit.error = static_cast<double>(wrong) / static_cast<double>(std::max<int64_t>(data.n, 1));
    return audit;
  };
  // Groups a response with earlier ones that decide alike on every training row.
  const auto record = [&](const Audit& audit, int index) {
    auto [it, inserted] = response_of.try_emplace(audit.digest, static_cast<int>(responses.size()));
    if (inserted) {
      Response r;
      r.moment_sum.assign(constraints, 0.0);
      r.error = audit.error;
      responses.push_back(std::move(r));
    }
    Response& r = responses[it->second];
    r.rounds.push_back(index);
    for (size_t m = 0; m < audit.moments.size(); ++m) {
      r.moment_sum[2 * m] += audit.moments[m];
      r.moment_sum[2 * m + 1] -= audit.moments[m];
    }
  };
  // Progress counts the rounds and, with the candidates mixture, the candidates.
  const int64_t total_steps =
      options.rounds + (options.mixture == FinalMixture::kCandidates ? CandidateCount() : 0);
  for (int t = 0; t < options.rounds; ++t) {
    AuditorLambda(theta, options.lambda_bound, &lambda);
    for (int c = 0; c < constraints; ++c) result.lambda_average[c] += lambda[c] / options.rounds;
    ASSIGN_OR_RETURN(Eigen::VectorXd w,
                     ReductionBestResponse(data, cells, options.constraint, lambda));
    ASSIGN_OR_RETURN(const Audit audit, audit_response(w, *noises.positives));
    record(audit, t);
    for (size_t m = 0; m < audit.moments.size(); ++m) {
      theta[2 * m] += options.learning_rate * (audit.moments[m] - options.bound);
      theta[2 * m + 1] += options.learning_rate * (-audit.moments[m] - options.bound);
    }
    weights_of_round.push_back(std::move(w));
    if (progress && !progress(t + 1, total_steps)) {
      return absl::AbortedError("the learner was stopped");
    }
  }
  result.distinct_responses = static_cast<int>(responses.size());

  // 4. The mixture: over groups of alike responses, each group's weight split evenly among the
  // rounds (or candidates) that returned it.
  if (options.mixture == FinalMixture::kCandidates) {
    // The candidates along the average λ̄: their own releases, then the LP over them alone.
    responses.clear();
    weights_of_round.clear();
    response_of.clear();
    for (size_t m = 0; m < kCandidateScales.size(); ++m) {
      for (int c = 0; c < constraints; ++c) lambda[c] = kCandidateScales[m] * result.lambda_average[c];
      ASSIGN_OR_RETURN(Eigen::VectorXd w,
                       ReductionBestResponse(data, cells, options.constraint, lambda));
      ASSIGN_OR_RETURN(const Audit audit, audit_response(w, *noises.candidates));
      record(audit, static_cast<int>(m));
      weights_of_round.push_back(std::move(w));
      if (progress && !progress(options.rounds + m + 1, total_steps)) {
        return absl::AbortedError("the learner was stopped");
      }
    }
  }
  // The LP may also choose the constant classifier of the training majority (with an intercept
  // column): its moments are exactly 0 — every group's rate is the same 0 or 1 — so it needs no
  // release, and its error is public. With it the LP's mixture never errs more on the training
  // rows than predicting one class for everyone, whatever the noise did to the candidates'
  // moments (small groups: the noisy moments made the LP pick responses erring 0.6 on Law School).
  if (options.mixture != FinalMixture::kAverage && options.intercept_column >= 0 &&
      options.intercept_column < data.d) {
    int64_t ones = 0;
    for (int y : data.y) ones += y;
    const bool majority = 2 * ones >= data.n;
    Eigen::VectorXd w = Eigen::VectorXd::Zero(data.d);
    w(options.intercept_column) = majority ? 1 : -1;
    Response constant;
    constant.moment_sum.assign(constraints, 0.0);
    constant.error = static_cast<double>(majority ? data.n - ones : ones) /
                     static_cast<double>(std::max<int64_t>(data.n, 1));
    constant.rounds.push_back(static_cast<int>(weights_of_round.size()));
    weights_of_round.push_back(std::move(w));
    responses.push_back(std::move(constant));
  }
  std::vector<double> group_weight(responses.size());
  if (options.mixture == FinalMixture::kAverage) {
    for (size_t g = 0; g < responses.size(); ++g) {
      group_weight[g] = static_cast<double>(responses[g].rounds.size()) / options.rounds;
    }
  } else {
    ASSIGN_OR_RETURN(group_weight, SolveMixture(responses, constraints, options.bound,
                                                options.lambda_bound));
  }
  result.violations.assign(constraints, 0.0);
  for (size_t g = 0; g < responses.size(); ++g) {
    if (!(group_weight[g] > 0)) continue;
    const Response& r = responses[g];
    const double rounds = static_cast<double>(r.rounds.size());
    result.training_error += group_weight[g] * r.error;
    for (int j = 0; j < constraints; ++j) {
      result.violations[j] += group_weight[g] * (r.moment_sum[j] / rounds - options.bound);
    }
    for (int t : r.rounds) {
      result.components.push_back(weights_of_round[t]);
      result.weights.push_back(group_weight[g] / rounds);
    }
  }
  return result;
}

}  // namespace fairvault::core::learn
