// GLPK plumbing shared by the post-processors' linear programs (see glpk_util.h).
#include "core/postprocess/glpk_util.h"

#include <glpk.h>

#include <algorithm>
#include <mutex>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace fairvault::core::postprocess::glpk {
namespace {

// GLPK keeps its environment (terminal switch, memory accounting, error hook) in one static
// pointer. Since 4.61 it is declared with a thread-local storage class when the compiler supports
// it, and glp_config("TLS") names that class. Debian 12's GLPK 5.0 reports "_Thread_local" (its
// libglpk.so.40 has a PT_TLS segment), so each thread gets an independent environment. A build
// without TLS shares one environment, so then we serialise all of our GLPK use with a mutex.
bool GlpkIsReentrant() {
  static const bool reentrant = [] {
    const char* tls = glp_config("TLS");  // does not create the environment
    return tls != nullptr && *tls != '\0';
  }();
  return reentrant;
}

std::mutex& GlpkMutex() {
  static std::mutex* mu = new std::mutex;  // never destroyed: usable during static teardown
  return *mu;
}

// With a thread-local environment, GLPK asks each thread to call glp_free_env before it exits or
// the environment leaks. (glp_free_env returns 1, harmlessly, if it was already freed.)
struct GlpkThreadEnvReleaser {
  ~GlpkThreadEnvReleaser() { glp_free_env(); }
};

void ReleaseGlpkEnvAtThreadExit() {
  thread_local GlpkThreadEnvReleaser releaser;
  (void)releaser;
}

}  // namespace

ScopedGlpk::ScopedGlpk() {
  if (GlpkIsReentrant()) {
    ReleaseGlpkEnvAtThreadExit();
  } else {
    lock_.emplace(GlpkMutex());
  }
  // msg_lev in the solver parameters silences the simplex; glp_term_out silences anything else
  // GLPK might print through this (thread's) environment.
  previous_term_out_ = glp_term_out(GLP_OFF);
}

ScopedGlpk::~ScopedGlpk() { glp_term_out(previous_term_out_); }

glp_smcp QuietSimplexParams() {
  glp_smcp parm;
  glp_init_smcp(&parm);
  parm.msg_lev = GLP_MSG_OFF;
  return parm;
}

namespace {

absl::Status SimplexOnce(glp_prob* lp, const glp_smcp& parm, absl::string_view what) {
  const int ret = glp_simplex(lp, &parm);
  if (ret != 0) {
    return absl::InternalError(
        absl::StrCat("GLPK glp_simplex failed with return code ", ret, " on ", what));
  }
  const int status = glp_get_status(lp);
  if (status != GLP_OPT) {
    return absl::InternalError(
        absl::StrCat("GLPK found no optimal solution to ", what, " (status ", status, ")"));
  }
  return absl::OkStatus();
}

}  // namespace

int SimplexIterationLimit(const glp_prob* lp) {
  // glp_get_num_* take a non-const problem but do not change it.
  glp_prob* p = const_cast<glp_prob*>(lp);
  return 10'000 + 50 * (glp_get_num_rows(p) + glp_get_num_cols(p));
}

absl::Status RunSimplex(glp_prob* lp, const glp_smcp& parm, absl::string_view what) {
  glp_smcp capped = parm;
  capped.it_lim = std::min(parm.it_lim, SimplexIterationLimit(lp));
  absl::Status solved = SimplexOnce(lp, capped, what);
  if (solved.ok()) return solved;
  // GLPK's presolved primal simplex can cycle on a degenerate LP (tests: the mixture LP of
  // glpk_util_test), and its presolver judges feasibility with its own tolerances: once more,
  // from the standard basis, without the presolver and by the other method (the dual simplex,
  // which falls back to the primal where the basis is not dual feasible), so that a caller
  // that already solved without the presolver does not repeat the same run.
  glp_std_basis(lp);
  capped.presolve = GLP_OFF;
  capped.meth = GLP_DUALP;
  return SimplexOnce(lp, capped, what);
}

}  // namespace fairvault::core::postprocess::glpk
