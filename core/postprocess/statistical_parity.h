// Differentially private fair regression post-processing for statistical parity (Xian, Li,
// Kamath, Zhao 2024, Alg. 1; ALGORITHMS.md §2): a noisy joint histogram of (group, score bin),
// repaired per group into a pmf, then optimal transport of each group's pmf onto targets that
// lie within a KS ball of radius α/2 around a common barycenter.
#ifndef FAIRVAULT_CORE_POSTPROCESS_STATISTICAL_PARITY_H_
#define FAIRVAULT_CORE_POSTPROCESS_STATISTICAL_PARITY_H_

#include <cstdint>
#include <vector>

#include "absl/random/bit_gen_ref.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/postprocess/decision_floor.h"

namespace fairvault::core::postprocess {

// The public bin grid on [lo, hi]: width w = (hi-lo)/k, bin(s) = clamp(floor((s-lo)/w), 0, k-1),
// centre v_j = lo + (j + 1/2) w.
struct ScoreGrid {
  double lo = 0;
  double hi = 1;
  int k = 10;
  static constexpr int kMaxBins = 1000;
  // The narrowest range, relative to its magnitude, whose bins (and the regressor audit's
  // 2^20-step sum grid) stay distinct in double precision.
  static constexpr double kMinRelativeWidth = 1e-9;
  // InvalidArgument unless lo, hi finite, lo < hi, hi - lo >= kMinRelativeWidth *
  // max(|lo|, |hi|), 1 <= k <= kMaxBins.
  absl::Status Validate() const;
  // Precondition: Validate() is OK. (s-lo)/w within a few ulps of an integer counts as that
  // integer, so a score written as a bin edge (0.29 on [0, 1], k = 100) opens that bin; NaN -> 0.
  int Bin(double s) const;
  double Center(int j) const;
};

// Exact counts[a * k + j] of scores per (group, bin). Scores must be finite (InvalidArgument
// naming the row otherwise); scores outside [lo, hi] fall in the end bins, and `clipped`
// (optional) receives how many there were. group in [0, num_groups).
absl::StatusOr<std::vector<int64_t>> HistogramCounts(absl::Span<const double> scores,
                                                     absl::Span<const int> group, int num_groups,
                                                     const ScoreGrid& grid,
                                                     int64_t* clipped = nullptr);

// Step 4 of Alg. 1 for one group: from (noisy) per-bin masses (fractions of n, any sign) and
// the group weight w_a: c_j = Σ_{l<=j} mass_l / w_a, L∞ isotonic regression
// ((running max from the left + running min from the right)/2), clip to [0,1], c_{k-1} = 1,
// differences -> a valid pmf.
std::vector<double> RepairedPmf(absl::Span<const double> masses, double weight);

enum class SpSolver {
  kAuto = 0,           // the quantile solver when alpha = 0, else the LP
  kLinearProgram = 1,  // the §2 LP on GLPK
  kQuantile = 2,       // specialised 1-D solver: monotone couplings; alpha = 0 only
};

struct SpOptions {
  double alpha = 0;  // KS tolerance in [0, 1]
  SpSolver solver = SpSolver::kAuto;
  absl::Status Validate() const;
};

struct SpSolution {
  std::vector<double> weights;                 // w_a = max(Σ_j h[a][j], 1e-6)
  std::vector<std::vector<double>> pmf;        // p_a (K x k), repaired
  std::vector<double> barycenter;              // b (k)
  std::vector<std::vector<double>> targets;    // q_a (K x k)
  std::vector<std::vector<double>> transport;  // g_a (K x k*k), row j = distribution over l
  double objective = 0;                        // Σ_a w_a Σ_{j,l} γ_a[j][l] (v_j - v_l)^2
  SpSolver used = SpSolver::kLinearProgram;
};

// InvalidArgument when a problem of this size is too large to solve in reasonable time
// (K*k^2 over 400,000 for the LP, over 2^24 for any solver). Public so callers can refuse
// before spending anything; SolveStatisticalParity checks it too.
absl::Status CheckProblemSize(int num_groups, const ScoreGrid& grid, const SpOptions& options);

// Steps 3-6 on a histogram of per-(group, bin) masses as fractions of n (noisy or exact;
// size K*k). InvalidArgument for bad sizes/options or the quantile solver with alpha > 0, and
// for problems too large to solve in reasonable time (K*k^2 over 400,000 for the LP, over 2^24
// for any solver); Internal if GLPK fails. The barycenter is a pmf for every alpha. Thread-safe:
// concurrent calls are independent.
absl::StatusOr<SpSolution> SolveStatisticalParity(absl::Span<const double> masses, int num_groups,
                                                  const ScoreGrid& grid, const SpOptions& options);

// Step 7: the fair output for a score in bin `bin` of group `a`: v_L with L ~ g_a[bin][.], drawn
// exactly from the row's double weights when they span at most 2^63 in ratio (see
// kMinDecisionFloor), else to within about 2^-52 of the row total.
// Reads only solution.transport. Preconditions: 0 <= a < transport.size(), each row of
// transport[a] has k entries >= 0; bin is clamped to [0, k). A row without positive entries
// returns v_bin.
double SampleFairScore(const SpSolution& solution, const ScoreGrid& grid, int a, int bin,
                       absl::BitGenRef gen);

}  // namespace fairvault::core::postprocess

#endif  // FAIRVAULT_CORE_POSTPROCESS_STATISTICAL_PARITY_H_
