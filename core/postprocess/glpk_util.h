// GLPK plumbing shared by the post-processors' linear programs: thread-safe use of GLPK's
// environment, silenced output, owned problem objects, and solver status as absl::Status.
#ifndef FAIRVAULT_CORE_POSTPROCESS_GLPK_UTIL_H_
#define FAIRVAULT_CORE_POSTPROCESS_GLPK_UTIL_H_

#include <glpk.h>

#include <memory>
#include <mutex>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace fairvault::core::postprocess::glpk {

// Hold one for as long as any GLPK object is alive on this thread (declare it before the
// problem so that the problem is deleted first). It
//   * serialises all GLPK use behind one mutex when GLPK was built without thread-local storage
//     (with TLS, as in Debian 12's GLPK 5.0, every thread has its own environment and
//     independent problems solve concurrently; a problem must stay in its creating thread);
//   * arranges for this thread's GLPK environment to be freed when the thread exits (gRPC's
//     synchronous server creates and retires worker threads; GLPK would leak it otherwise);
//   * switches GLPK's terminal output off, restoring the previous setting on destruction.
// Not copyable or movable.
class ScopedGlpk {
 public:
  ScopedGlpk();
  ~ScopedGlpk();
  ScopedGlpk(const ScopedGlpk&) = delete;
  ScopedGlpk& operator=(const ScopedGlpk&) = delete;

 private:
  std::optional<std::lock_guard<std::mutex>> lock_;
  int previous_term_out_;
};

struct ProbDeleter {
  void operator()(glp_prob* lp) const { glp_delete_prob(lp); }
};
// An owned GLPK problem: ProbPtr lp(glp_create_prob());
using ProbPtr = std::unique_ptr<glp_prob, ProbDeleter>;

// Simplex parameters with all messages off; callers adjust method, presolve and tolerances.
glp_smcp QuietSimplexParams();

// The iterations RunSimplex allows one solve of `lp`: far above what the simplex needs on our
// LPs (a few times their rows), a bound on a cycling one (GLPK has no other guard; milliseconds
// on a small LP). A count, not a time, so that the outcome never depends on the machine's load.
int SimplexIterationLimit(const glp_prob* lp);

// Runs glp_simplex(lp, &parm) with at most SimplexIterationLimit(lp) iterations; if that does
// not end optimal (cycling, or the presolver misjudging feasibility on rounding-level
// mismatches), once more from the standard basis without the presolver by the dual simplex
// (primal where the basis is not dual feasible). OK only if a run
// returned 0 with the status GLP_OPT; otherwise Internal naming `what` ("the equalized-odds
// LP"), since callers only pass LPs that are feasible and bounded by construction.
absl::Status RunSimplex(glp_prob* lp, const glp_smcp& parm, absl::string_view what);

}  // namespace fairvault::core::postprocess::glpk

#endif  // FAIRVAULT_CORE_POSTPROCESS_GLPK_UTIL_H_
