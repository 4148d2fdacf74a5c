// DP fair regression post-processing for statistical parity (Xian, Li, Kamath, Zhao 2024, Alg. 1;
// ALGORITHMS.md §2): the bin grid, histograms, repair, the step-5 solve and the fair sampler.
#include "core/postprocess/statistical_parity.h"


#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "absl/base/optimization.h"
#include "absl/numeric/int128.h"
#include "absl/random/distributions.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/fairness/histogram_repair.h"
#include "core/postprocess/sp_couplings.h"
#include "core/util/status_macros.h"

namespace fairvault::core::postprocess {
namespace {

// Group weights are floored here (ALGORITHMS.md §2 step 3) so that an empty or negative noisy
// group still has a defined, if negligible, weight.
constexpr double kMinWeight = 1e-6;

// Memory and time guards. The transport alone holds K·k² doubles. The LP has K·k² columns and
// its solve time grows about as k^3.3: at K = 4, k = 100 / 150 / 200 / 300 took 0.3 / 1 / 2.7 /
// 10 s (α = 0; α > 0 somewhat less), so 400,000 columns (k ≈ 316 at K = 4) bounds a request's
// solve to roughly 15 s.
constexpr int64_t kMaxTransportEntries = int64_t{1} << 24;  // 128 MiB of doubles
constexpr int64_t kMaxLpColumns = 400'000;

// Σ_a w_a Σ_{j,l} γ_a[j][l] (v_j − v_l)², with v_j − v_l = (j − l)·width.
double Objective(const std::vector<double>& weights, const std::vector<std::vector<double>>& gamma,
                 const ScoreGrid& grid) {
  const int k = grid.k;
  const double width = (grid.hi - grid.lo) / k;
  double total = 0;
  for (size_t a = 0; a < gamma.size(); ++a) {
    double group = 0;
    for (int j = 0; j < k; ++j) {
      for (int l = 0; l < k; ++l) {
        const double d = static_cast<double>(j - l);
        group += gamma[a][j * k + l] * d * d;
      }
    }
    total += weights[a] * group;
  }
  return total * width * width;
}

}  // namespace

absl::Status ScoreGrid::Validate() const {
  if (!std::isfinite(lo)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "lo must be finite (got ", lo, "); it is the lower end of the public score range"));
  }
  if (!std::isfinite(hi)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "hi must be finite (got ", hi, "); it is the upper end of the public score range"));
  }
  if (!(lo < hi)) {
    return absl::InvalidArgumentError(
        absl::StrCat("lo must be < hi (got lo=", lo, ", hi=", hi, ")"));
  }
  if (!std::isfinite(hi - lo)) {
    return absl::InvalidArgumentError(absl::StrCat("hi - lo must be finite (got lo=", lo,
                                                   ", hi=", hi, "); use a narrower range"));
  }
  if (hi - lo < kMinRelativeWidth * std::max(std::abs(lo), std::abs(hi))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "hi - lo must be at least ", kMinRelativeWidth, " of max(|lo|, |hi|) (got lo=", lo,
        ", hi=", hi, "); such a range cannot be split into distinct bins: widen it"));
  }
  if (k < 1 || k > kMaxBins) {
    return absl::InvalidArgumentError(
        absl::StrCat("k must be in [1, ", kMaxBins, "] (got ", k, ")"));
  }
  return absl::OkStatus();
}

// The header's floor((s − lo)/w), computed as (s − lo)·k/(hi − lo) and snapped to an integer
// when within a few ulps of one, so that a score printed as a bin edge falls in the bin that
// edge opens: on [0, 1] with k = 100, 0.29·100 is 28.999999999999996 in doubles and would
// otherwise land in bin 28. A score that close to an edge is one rounding error from it anyway.
// NaN maps to bin 0; HistogramCounts rejects it before.
int ScoreGrid::Bin(double s) const {
  double x = (s - lo) * k / (hi - lo);
  const double nearest = std::nearbyint(x);
  if (std::abs(x - nearest) <= 8 * std::numeric_limits<double>::epsilon() * std::abs(nearest)) {
    x = nearest;
  }
  if (!(x >= 1.0)) return 0;
  if (x >= k - 1) return k - 1;
  return static_cast<int>(x);
}

double ScoreGrid::Center(int j) const { return lo + (j + 0.5) * ((hi - lo) / k); }

absl::StatusOr<std::vector<int64_t>> HistogramCounts(absl::Span<const double> scores,
                                                     absl::Span<const int> group, int num_groups,
                                                     const ScoreGrid& grid, int64_t* clipped) {
  RETURN_IF_ERROR(grid.Validate());
  if (num_groups < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_groups must be >= 1 (got ", num_groups, ")"));
  }
  if (group.size() != scores.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("scores and group must have the same length (got ", scores.size(), " and ",
                     group.size(), ")"));
  }
  std::vector<int64_t> counts(static_cast<size_t>(num_groups) * grid.k, 0);
  int64_t outside = 0;
  for (size_t i = 0; i < scores.size(); ++i) {
    const double s = scores[i];
    const int a = group[i];
    if (!std::isfinite(s)) {
      return absl::InvalidArgumentError(
          absl::StrCat("score at row ", i, " is not a finite number (got ", s, ")"));
    }
    if (a < 0 || a >= num_groups) {
      return absl::InvalidArgumentError(
          absl::StrCat("group at row ", i, " must be in [0, ", num_groups, ") (got ", a, ")"));
    }
    outside += (s < grid.lo || s > grid.hi) ? 1 : 0;
    ++counts[static_cast<size_t>(a) * grid.k + grid.Bin(s)];
  }
  if (clipped != nullptr) *clipped = outside;
  return counts;
}

std::vector<double> RepairedPmf(absl::Span<const double> masses, double weight) {
  return fairness::RepairCdfToPmf(masses, weight);
}

absl::Status SpOptions::Validate() const {
  if (!(alpha >= 0 && alpha <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "alpha must be in [0, 1] (got ", alpha,
        "); it is the allowed KS distance between groups' outputs, 0 for exact parity"));
  }
  if (solver != SpSolver::kAuto && solver != SpSolver::kLinearProgram &&
      solver != SpSolver::kQuantile) {
    return absl::InvalidArgumentError(
        absl::StrCat("solver must be kAuto, kLinearProgram or "
                     "kQuantile (got ",
                     static_cast<int>(solver), ")"));
  }
  if (solver == SpSolver::kQuantile && alpha != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("solver: the quantile solver needs alpha = 0 (got alpha=", alpha,
                     "); for alpha > 0 use the linear program (SP_SOLVER_LINEAR_PROGRAM, CLI "
                     "--solver lp) or auto"));
  }
  return absl::OkStatus();
}

absl::Status CheckProblemSize(int num_groups, const ScoreGrid& grid, const SpOptions& options) {
  const int64_t entries = static_cast<int64_t>(num_groups) * grid.k * grid.k;
  if (entries > kMaxTransportEntries) {
    return absl::InvalidArgumentError(absl::StrCat("num_groups * k^2 = ", entries,
                                                   " exceeds the limit of ", kMaxTransportEntries,
                                                   " transport entries; use fewer bins"));
  }
  const SpSolver used = options.solver != SpSolver::kAuto ? options.solver
                        : options.alpha == 0              ? SpSolver::kQuantile
                                                          : SpSolver::kLinearProgram;
  if (used == SpSolver::kLinearProgram && entries > kMaxLpColumns) {
    return absl::InvalidArgumentError(
        absl::StrCat("the LP would have num_groups * k^2 = ", entries, " columns (limit ",
                     kMaxLpColumns, "); use fewer bins, or alpha = 0 with the quantile solver"));
  }
  return absl::OkStatus();
}

absl::StatusOr<SpSolution> SolveStatisticalParity(absl::Span<const double> masses, int num_groups,
                                                  const ScoreGrid& grid, const SpOptions& options) {
  RETURN_IF_ERROR(grid.Validate());
  RETURN_IF_ERROR(options.Validate());
  if (num_groups < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_groups must be >= 1 (got ", num_groups, ")"));
  }
  const int k = grid.k;
  if (masses.size() != static_cast<size_t>(num_groups) * k) {
    return absl::InvalidArgumentError(
        absl::StrCat("masses must hold num_groups * k = ", static_cast<int64_t>(num_groups) * k,
                     " cells (got ", masses.size(), ")"));
  }
  for (size_t i = 0; i < masses.size(); ++i) {
    if (!std::isfinite(masses[i])) {
      return absl::InvalidArgumentError(absl::StrCat("mass at index ", i, " (group ", i / k,
                                                     ", bin ", i % k, ") must be finite (got ",
                                                     masses[i], ")"));
    }
  }
  RETURN_IF_ERROR(CheckProblemSize(num_groups, grid, options));
  const SpSolver used = options.solver != SpSolver::kAuto ? options.solver
                        : options.alpha == 0              ? SpSolver::kQuantile
                                                          : SpSolver::kLinearProgram;

  sp_internal::CouplingProblem problem;
  problem.weights.resize(num_groups);
  problem.pmf.resize(num_groups);
  for (int a = 0; a < num_groups; ++a) {
    const absl::Span<const double> row = masses.subspan(static_cast<size_t>(a) * k, k);
    double sum = 0;
    for (double m : row) sum += m;
    problem.weights[a] = std::max(sum, kMinWeight);
    problem.pmf[a] = RepairedPmf(row, problem.weights[a]);
  }

  sp_internal::Couplings couplings;
  if (used == SpSolver::kQuantile) {
    couplings = sp_internal::SolveCouplingsQuantile(problem);
  } else {
    ASSIGN_OR_RETURN(couplings, sp_internal::SolveCouplingsLp(problem, options.alpha));
  }

  SpSolution solution;
  solution.used = used;
  solution.objective = Objective(problem.weights, couplings.gamma, grid);
  solution.targets.assign(num_groups, std::vector<double>(k, 0.0));
  solution.transport.resize(num_groups);
  for (int a = 0; a < num_groups; ++a) {
    const std::vector<double>& gamma = couplings.gamma[a];
    std::vector<double>& g = solution.transport[a];
    g.assign(static_cast<size_t>(k) * k, 0.0);
    for (int j = 0; j < k; ++j) {
      double row = 0;
      for (int l = 0; l < k; ++l) {
        row += gamma[j * k + l];
        solution.targets[a][l] += gamma[j * k + l];
      }
      if (row > 0) {
        for (int l = 0; l < k; ++l) g[j * k + l] = gamma[j * k + l] / row;
      } else {
        g[j * k + j] = 1.0;  // no mass in bin j: leave such scores where they are
      }
    }
  }
  solution.weights = std::move(problem.weights);
  solution.pmf = std::move(problem.pmf);
  solution.barycenter = std::move(couplings.barycenter);
  return solution;
}

namespace {

// Attempts of the rejection below: each is accepted with probability > 1/2, so all of them
// fail with probability below 2^-64.
constexpr int kUniformAttempts = 64;

// Uniform on [0, n), exactly: rejection from the smallest power of two >= n (n >= 1). The
// number of attempts would depend on n (and n on the subject's group, in Decide), so a fixed
// number is made and the first accepted kept; more only if none is (probability < 2^-64).
absl::uint128 UniformBelow(absl::uint128 n, absl::BitGenRef gen) {
  absl::uint128 mask = n - 1;
  for (int shift = 1; shift < 128; shift *= 2) mask |= mask >> shift;
  absl::uint128 chosen = 0;
  uint64_t found = 0;
  for (int attempt = 0; attempt < kUniformAttempts; ++attempt) {
    const uint64_t high = absl::Uniform<uint64_t>(gen);  // sequenced: high word first
    const uint64_t low = absl::Uniform<uint64_t>(gen);
    const absl::uint128 x = absl::MakeUint128(high, low) & mask;
    const uint64_t take = static_cast<uint64_t>(x < n) & (1 ^ found);
    const uint64_t m = uint64_t{0} - take;
    chosen = (absl::MakeUint128(m, m) & x) | (~absl::MakeUint128(m, m) & chosen);
    found |= take;
  }
  while (ABSL_PREDICT_FALSE(found == 0)) {
    const uint64_t high = absl::Uniform<uint64_t>(gen);
    const uint64_t low = absl::Uniform<uint64_t>(gen);
    const absl::uint128 x = absl::MakeUint128(high, low) & mask;
    if (x < n) {
      chosen = x;
      found = 1;
    }
  }
  return chosen;
}

// x = m·2^(e−53) (m a 53-bit integer) as the exact integer m·2^(e − min_exp); 0 unless x > 0.
// Precondition: e − min_exp <= 63 for positive x.
absl::uint128 IntegerWeight(double x, int min_exp) {
  int e = 0;
  const double fraction = std::frexp(x > 0 ? x : 0.5, &e);
  const absl::uint128 w = absl::uint128(static_cast<uint64_t>(std::ldexp(fraction, 53)))
                          << std::max(0, e - min_exp);
  return x > 0 ? w : 0;
}

}  // namespace

// In Decide this draw is the mechanism whose log-ratio bound L protects the subject's group, so
// it follows the row's probabilities exactly: every positive weight m·2^(e-53) becomes the
// integer m·2^(e - e_min) (exact while the weights span at most 2^63 in ratio, which
// decision_floor >= kMinDecisionFloor guarantees), and the bin is chosen by an exactly uniform
// integer below their sum. Rows spanning a wider ratio (only with decision_floor 0, whose
// artifacts Decide refuses) fall back to a double-precision draw, accurate to about 2^-52 of
// the row total. Bins of zero probability are never returned.
//
// The work is the same for every row of the same k (issue 19: the rows are the groups'): every
// bin is visited, the uniform takes a fixed number of attempts, and the bin is picked without
// leaving the loop early.
double SampleFairScore(const SpSolution& solution, const ScoreGrid& grid, int a, int bin,
                       absl::BitGenRef gen) {
  const int k = grid.k;
  bin = std::clamp(bin, 0, k - 1);
  const double* row = solution.transport[a].data() + static_cast<size_t>(bin) * k;
  int min_exp = std::numeric_limits<int>::max(), max_exp = std::numeric_limits<int>::min();
  int positives = 0;
  double total = 0;
  for (int l = 0; l < k; ++l) {
    const bool positive = row[l] > 0;
    int e = 0;
    std::frexp(positive ? row[l] : 0.5, &e);
    min_exp = positive ? std::min(min_exp, e) : min_exp;
    max_exp = positive ? std::max(max_exp, e) : max_exp;
    total += positive ? row[l] : 0.0;
    positives += positive ? 1 : 0;
  }
  if (positives == 0) return grid.Center(bin);
  if (max_exp - min_exp <= 63) {  // 53 + 63 + log2(kMaxBins) < 128 bits
    // Recomputed, not stored: no allocation per draw on Decide's path.
    absl::uint128 sum = 0;
    for (int l = 0; l < k; ++l) sum += IntegerWeight(row[l], min_exp);
    const absl::uint128 u = UniformBelow(sum, gen);
    absl::uint128 cumulative = 0;
    int chosen = 0;
    uint64_t found = 0;
    for (int l = 0; l < k; ++l) {
      cumulative += IntegerWeight(row[l], min_exp);
      const uint64_t take = static_cast<uint64_t>(u < cumulative) & (1 ^ found);
      chosen = take != 0 ? l : chosen;
      found |= take;
    }
    return grid.Center(chosen);
  }
  const double u = absl::Uniform<double>(gen, 0.0, 1.0) * total;
  double cumulative = 0;
  int last_positive = 0;
  for (int l = 0; l < k; ++l) {
    if (row[l] > 0) last_positive = l;
  }
  for (int l = 0; l < last_positive; ++l) {
    if (row[l] <= 0) continue;
    cumulative += row[l];
    if (u < cumulative) return grid.Center(l);
  }
  return grid.Center(last_positive);
}

}  // namespace fairvault::core::postprocess
