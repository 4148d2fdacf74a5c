// Internal to the statistical-parity post-processor (statistical_parity.h): the two solvers for
// step 5 of ALGORITHMS.md §2, which couple each group's pmf to a target near a common
// barycenter on the bin grid. Not a public API.
#ifndef FAIRVAULT_CORE_POSTPROCESS_SP_COUPLINGS_H_
#define FAIRVAULT_CORE_POSTPROCESS_SP_COUPLINGS_H_

#include <vector>

#include "absl/status/statusor.h"

namespace fairvault::core::postprocess::sp_internal {

// Inputs shared by both solvers: K >= 1 groups with weights w_a > 0 and pmfs p_a of one length
// k >= 1 (entries >= 0, each summing to 1 up to rounding).
struct CouplingProblem {
  std::vector<double> weights;
  std::vector<std::vector<double>> pmf;
};

struct Couplings {
  // gamma[a][j * k + l] = γ_a[j][l] >= 0: mass of group a moved from bin j to bin l.
  std::vector<std::vector<double>> gamma;
  std::vector<double> barycenter;  // b, a pmf
};

// The §2 LP on GLPK, for the KS tolerance alpha in [0, 1]. Internal if GLPK fails.
absl::StatusOr<Couplings> SolveCouplingsLp(const CouplingProblem& problem, double alpha);

// The exact α = 0 optimum by quantile averaging; O(K·k) pieces plus O(K·k²) to fill gamma.
Couplings SolveCouplingsQuantile(const CouplingProblem& problem);

}  // namespace fairvault::core::postprocess::sp_internal

#endif  // FAIRVAULT_CORE_POSTPROCESS_SP_COUPLINGS_H_
