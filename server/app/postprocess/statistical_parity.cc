// FitStatisticalParityPostProcessor (Xian, Li, Kamath, Zhao 2024, Alg. 1): the noisy (group,
// score bin) histogram, then the optimal transport to a barycenter, through the one charge path.
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/postprocess/statistical_parity.h"
#include "core/util/status_macros.h"
#include "core/util/validate.h"
#include "server/app/vault.h"
#include "server/app/vault_charge_impl.h"
#include "server/app/vault_internal.h"

namespace fairvault::server {

using internal::RequireRole;
using storage::Role;
namespace pp = core::postprocess;

namespace {

// An artifact's transport must fit a response message (64 MiB): 2M doubles is 16 MB.
constexpr int64_t kMaxTransportEntries = 2'000'000;

v1::SpSolverKind ToProto(pp::SpSolver solver) {
  switch (solver) {
    case pp::SpSolver::kLinearProgram:
      return v1::SP_SOLVER_LINEAR_PROGRAM;
    case pp::SpSolver::kQuantile:
      return v1::SP_SOLVER_QUANTILE;
    default:
      return v1::SP_SOLVER_AUTO;
  }
}

}  // namespace

// ---- FitStatisticalParityPostProcessor ------------------------------------------------------

absl::StatusOr<v1::FitStatisticalParityResponse> Vault::FitStatisticalParity(
    const Caller& caller, const v1::FitStatisticalParityRequest& req) {
  RETURN_IF_ERROR(RequireRole(caller, {Role::kCompany}));
  RETURN_IF_ERROR(core::ValidateIsFiniteAndPositive(req.epsilon(), "epsilon"));
  ASSIGN_OR_RETURN(pp::ScoreGrid grid, internal::MakeGrid(req.lo(), req.hi(), req.bins()));
  pp::SpOptions options;
  options.alpha = req.alpha();
  switch (req.solver()) {
    case v1::SP_SOLVER_LINEAR_PROGRAM:
      options.solver = pp::SpSolver::kLinearProgram;
      break;
    case v1::SP_SOLVER_QUANTILE:
      options.solver = pp::SpSolver::kQuantile;
      break;
    case v1::SP_SOLVER_AUTO:
      options.solver = pp::SpSolver::kAuto;
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "solver: unknown value ", static_cast<int>(req.solver()),
          "; use SP_SOLVER_AUTO (0), SP_SOLVER_LINEAR_PROGRAM (1) or SP_SOLVER_QUANTILE (2)"));
  }
  RETURN_IF_ERROR(options.Validate());  // also: the quantile solver needs alpha = 0
  if (req.score_column().empty()) return absl::InvalidArgumentError("score_column must be set");
  RETURN_IF_ERROR(core::ValidateInHalfOpenRange(req.decision_floor(), 0, 1, "decision_floor"));
  if (req.decision_floor() > 0 && req.decision_floor() < pp::kMinDecisionFloor) {
    return absl::InvalidArgumentError(
        absl::StrCat("decision_floor must be 0 or at least ", pp::kMinDecisionFloor, " (got ",
                     req.decision_floor(),
                     "); below that Decide could not draw its outputs exactly, and the "
                     "decision bound would exceed 13 anyway"));
  }
  PreparedRelease release = PreparedRelease::Of("FitStatisticalParityPostProcessor", req);
  release.parts = {{"histogram", 2.0}};  // one subject moves between two (group, bin) cells
  const double floor = req.decision_floor();
  // Steps 4-5, after the charge: the transport from the stored noisy histogram alone (the LP
  // at its size limit takes about 26 s, which no other charge waits for).
  release.finish = [&caller, grid, options, floor, this](google::protobuf::Message* message)
      -> absl::StatusOr<std::optional<storage::ArtifactRecord>> {
    auto* resp = static_cast<v1::FitStatisticalParityResponse*>(message);
    v1::Artifact* artifact = resp->mutable_artifact();
    v1::StatisticalParityPostProcessor* sp = artifact->mutable_statistical_parity();
    const int num_groups = sp->groups_size();
    const double n = static_cast<double>(sp->n());
    std::vector<double> masses;
    masses.reserve(static_cast<size_t>(num_groups) * grid.k);
    for (const v1::StatisticalParityGroup& g : sp->groups()) {
      if (g.noisy_counts_size() != grid.k) {
        return absl::DataLossError("the stored release's histogram does not match its bins");
      }
      for (int64_t c : g.noisy_counts()) masses.push_back(static_cast<double>(c) / n);
    }
    ASSIGN_OR_RETURN(auto solution, pp::SolveStatisticalParity(masses, num_groups, grid, options));
    const double noise_scale = resp->charge().cost().noise_scale();
    for (int a = 0; a < num_groups; ++a) {
      v1::StatisticalParityGroup* g = sp->mutable_groups(a);
      g->set_weight(solution.weights[a]);
      int64_t total = 0;
      for (int64_t c : g->noisy_counts()) total += std::max<int64_t>(0, c);
      *g->mutable_pmf() = {solution.pmf[a].begin(), solution.pmf[a].end()};
      *g->mutable_target() = {solution.targets[a].begin(), solution.targets[a].end()};
      // Mixing every row with the uniform distribution keeps the groups' outputs at parity
      // with one another and bounds what a single decision reveals.
      for (double t : solution.transport[a]) {
        g->add_transport((1 - floor) * t + floor / grid.k);
      }
      // Post-processing of the noisy histogram: a group whose noisy mass is comparable to
      // the noise in its bins has a repaired pmf that is mostly noise.
      if (total < 10 * noise_scale * std::sqrt(static_cast<double>(grid.k))) {
        sp->add_warnings(absl::StrCat(
            "group '", g->group(), "' has a noisy count of ", total,
            ", within the noise of its ", grid.k,
            " bins: its transport is fitted mostly to noise; use fewer bins or a larger "
            "epsilon"));
      }
    }
    *sp->mutable_barycenter() = {solution.barycenter.begin(), solution.barycenter.end()};
    sp->set_objective(solution.objective);
    sp->set_solver(ToProto(solution.used));
    ASSIGN_OR_RETURN(const double bound, internal::DecisionLogRatioBound(*artifact));
    sp->set_decision_log_ratio_bound(bound);
    if (options.alpha == 0) {
      sp->add_warnings(
          "alpha = 0: statistical parity holds for the noisy histogram; on the true data it "
          "holds only up to the noise (exact fairness is impossible under DP)");
    }
    // Account, dataset and ledger seq: the store takes them from the charge's rows.
    return std::optional<storage::ArtifactRecord>(charge_internal::ArtifactRecordOf(
        *artifact, caller, /*dataset_id=*/0, clock_->NowMicros()));
  };
  ASSIGN_OR_RETURN(auto replay, Replay<v1::FitStatisticalParityResponse>(caller, release));
  if (replay) return *std::move(replay);

  ASSIGN_OR_RETURN(ScoredRows scored,
                   LoadScores(caller, req.table_handle(), req.score_column(), req.attributes(),
                              req.unmatched(), grid, &release));
  const JoinedRows& joined = scored.joined;
  const std::vector<int64_t>& counts = scored.counts;
  const int64_t clipped = scored.clipped;
  const int64_t n = static_cast<int64_t>(joined.table_rows.size());
  // Refuse oversized problems before anything is charged: the solver's limits, and an
  // artifact that must fit in one response message.
  RETURN_IF_ERROR(pp::CheckProblemSize(joined.num_groups, grid, options));
  if (static_cast<int64_t>(joined.num_groups) * grid.k * grid.k > kMaxTransportEntries) {
    return absl::InvalidArgumentError(absl::StrCat(
        "groups x bins^2 = ", static_cast<int64_t>(joined.num_groups) * grid.k * grid.k,
        " transport entries exceed the artifact limit of ", kMaxTransportEntries,
        "; use fewer bins or attributes"));
  }

  // Steps 1-3 inside the charge: the noisy histogram, stored before anything is solved.
  return ChargeAndRelease<v1::FitStatisticalParityResponse>(
      caller, release,
      [&](const Noises& noises, int64_t seq, v1::FitStatisticalParityResponse* resp)
          -> absl::StatusOr<std::optional<storage::ArtifactRecord>> {
        const std::vector<int64_t> noisy = internal::AddNoiseToEach(counts, *noises[0], gen_);
        v1::Artifact* artifact = resp->mutable_artifact();
        charge_internal::FillArtifactEnvelope(caller, scored.table.dataset.name, seq,
                                              clock_->NowMicros(), artifact);
        v1::StatisticalParityPostProcessor* sp = artifact->mutable_statistical_parity();
        for (const auto& a : joined.attributes) sp->add_attributes(a);
        sp->set_lo(grid.lo);
        sp->set_hi(grid.hi);
        sp->set_bins(grid.k);
        sp->set_alpha(options.alpha);
        sp->set_epsilon(req.epsilon());
        sp->set_n(n);
        for (int a = 0; a < joined.num_groups; ++a) {
          v1::StatisticalParityGroup* g = sp->add_groups();
          g->set_group(joined.group_labels[a]);
          for (int j = 0; j < grid.k; ++j) g->add_noisy_counts(noisy[a * grid.k + j]);
        }
        sp->set_scores_clipped(clipped);
        sp->set_decision_floor(floor);
        resp->set_rows_dropped(joined.dropped);
        resp->set_scores_clipped(clipped);
        return std::optional<storage::ArtifactRecord>();
      });
}

}  // namespace fairvault::server
