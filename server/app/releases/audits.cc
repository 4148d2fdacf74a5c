// Spending use-cases over scores and classifier outputs: the statistical-parity
// post-processor (Xian et al. 2024) and the private fairness audits. Each is one release
// through the common charge path.
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/dp/granularity.h"
#include "core/fairness/audit.h"
#include "core/postprocess/equalized_odds.h"
#include "core/postprocess/statistical_parity.h"
#include "core/util/status_macros.h"
#include "core/util/validate.h"
#include "server/app/vault.h"
#include "server/app/vault_charge_impl.h"
#include "server/app/vault_internal.h"
#include "server/util/crypto.h"

namespace fairvault::server {

using internal::RequireRole;
using storage::Role;
namespace pp = core::postprocess;
namespace fairness = core::fairness;

namespace {

// An artifact's transport must fit a response message (64 MiB): 2M doubles is 16 MB.
constexpr int64_t kMaxTransportEntries = 2'000'000;
// As for NoisyCounts.
constexpr int64_t kMaxAuditCells = 100'000;

// The public bin grid of a request, with messages naming the request's fields.
absl::StatusOr<fairness::AuditOptions> MakeAuditOptions(double confidence) {
  fairness::AuditOptions options;
  options.confidence = confidence == 0 ? 0.95 : confidence;
  RETURN_IF_ERROR(options.Validate());
  return options;
}

// Draws of one noise part, for the audits' bootstrap of the DP error.
fairness::NoiseDraw DrawOf(const core::dp::IntegerNoise& noise) {
  return [&noise](absl::BitGenRef gen) { return noise.AddNoise(0, gen); };
}

// The discrete Laplace scale of an audit's count noise (0 for none), which the exact rate
// intervals need; the audits are pure-ε releases, so any other mechanism is our bug.
absl::StatusOr<double> LaplaceScaleOf(const core::dp::IntegerNoise& noise) {
  if (noise.Name() == "none") return 0.0;
  if (noise.Name() != "discrete_laplace") {
    return absl::InternalError(
        absl::StrCat("audit intervals need discrete Laplace noise (got ", noise.Name(), ")"));
  }
  return noise.Scale();
}

void CopyInterval(const fairness::Interval& from, v1::Interval* to) {
  to->set_estimate(from.estimate);
  to->set_lo(from.lo);
  to->set_hi(from.hi);
}

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

// The released histogram plus noise, one draw per cell.
std::vector<int64_t> AddNoise(const std::vector<int64_t>& exact,
                              const core::dp::IntegerNoise& noise, absl::BitGenRef gen) {
  std::vector<int64_t> noisy(exact.size());
  for (size_t i = 0; i < exact.size(); ++i) noisy[i] = noise.AddNoise(exact[i], gen);
  return noisy;
}

}  // namespace

absl::StatusOr<Vault::ScoredRows> Vault::LoadScores(
    const Caller& caller, const std::string& handle, const std::string& score_column,
    const google::protobuf::RepeatedPtrField<std::string>& attributes, v1::UnmatchedKeys unmatched,
    const pp::ScoreGrid& grid, PreparedRelease* release) {
  ScoredRows out;
  ASSIGN_OR_RETURN(out.table, ResolveTable(caller, handle));
  release->dataset_id = out.table.dataset.id;
  release->dataset_name = out.table.dataset.name;
  ASSIGN_OR_RETURN(int column,
                   internal::ColumnIndex(*out.table.table, score_column, "score_column"));
  ASSIGN_OR_RETURN(out.joined, Join(out.table, attributes, unmatched));
  release->SizesFrom(out.joined);
  ASSIGN_OR_RETURN(out.scores, internal::NumericColumn(*out.table.table, column,
                                                       out.joined.table_rows, "score_column"));
  ASSIGN_OR_RETURN(out.counts, pp::HistogramCounts(out.scores, out.joined.group,
                                                   out.joined.num_groups, grid, &out.clipped));
  return out;
}

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
  PreparedRelease release;
  release.request_kind = "FitStatisticalParityPostProcessor";
  release.idempotency_key = req.idempotency_key();
  release.request = &req;
  release.epsilon = req.epsilon();
  release.parts = {{"histogram", 2.0}};  // one subject moves between two (group, bin) cells
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
  const double floor = req.decision_floor();

  return ChargeAndRelease<v1::FitStatisticalParityResponse>(
      caller, release,
      [&](const Noises& noises, int64_t seq, v1::FitStatisticalParityResponse* resp)
          -> absl::StatusOr<std::optional<storage::ArtifactRecord>> {
        const std::vector<int64_t> noisy = AddNoise(counts, *noises[0], gen_);
        std::vector<double> masses(noisy.size());
        for (size_t i = 0; i < noisy.size(); ++i) masses[i] = static_cast<double>(noisy[i]) / n;
        ASSIGN_OR_RETURN(auto solution,
                         pp::SolveStatisticalParity(masses, joined.num_groups, grid, options));
        v1::Artifact* artifact = resp->mutable_artifact();
        const int64_t now = clock_->NowMicros();
        charge_internal::FillArtifactEnvelope(caller, scored.table.dataset.name, seq, now,
                                              artifact);
        v1::StatisticalParityPostProcessor* sp = artifact->mutable_statistical_parity();
        for (const auto& a : joined.attributes) sp->add_attributes(a);
        sp->set_lo(grid.lo);
        sp->set_hi(grid.hi);
        sp->set_bins(grid.k);
        sp->set_alpha(options.alpha);
        sp->set_epsilon(req.epsilon());
        sp->set_n(n);
        const double noise_scale = noises[0]->Scale();
        for (int a = 0; a < joined.num_groups; ++a) {
          v1::StatisticalParityGroup* g = sp->add_groups();
          g->set_group(joined.group_labels[a]);
          g->set_weight(solution.weights[a]);
          int64_t total = 0;
          for (int j = 0; j < grid.k; ++j) {
            g->add_noisy_counts(noisy[a * grid.k + j]);
            total += std::max<int64_t>(0, noisy[a * grid.k + j]);
          }
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
                "group '", joined.group_labels[a], "' has a noisy count of ", total,
                ", within the noise of its ", grid.k,
                " bins: its transport is fitted mostly to noise; use fewer bins or a larger "
                "epsilon"));
          }
        }
        *sp->mutable_barycenter() = {solution.barycenter.begin(), solution.barycenter.end()};
        sp->set_objective(solution.objective);
        sp->set_solver(ToProto(solution.used));
        sp->set_scores_clipped(clipped);
        sp->set_decision_floor(floor);
        ASSIGN_OR_RETURN(const double bound, internal::DecisionLogRatioBound(*artifact));
        sp->set_decision_log_ratio_bound(bound);
        if (options.alpha == 0) {
          sp->add_warnings(
              "alpha = 0: statistical parity holds for the noisy histogram; on the true data it "
              "holds only up to the noise (exact fairness is impossible under DP)");
        }
        resp->set_rows_dropped(joined.dropped);
        resp->set_scores_clipped(clipped);
        return std::optional<storage::ArtifactRecord>(
            charge_internal::ArtifactRecordOf(*artifact, caller, scored.table.dataset.id, now));
      });
}

// ---- AuditClassifier -----------------------------------------------------------------------

absl::StatusOr<v1::AuditClassifierResponse> Vault::AuditClassifier(
    const Caller& caller, const v1::AuditClassifierRequest& req) {
  RETURN_IF_ERROR(RequireRole(caller, {Role::kCompany}));
  RETURN_IF_ERROR(core::ValidateIsFiniteAndPositive(req.epsilon(), "epsilon"));
  ASSIGN_OR_RETURN(auto audit_options, MakeAuditOptions(req.confidence()));
  if (req.prediction_column().empty() || req.label_column().empty()) {
    return absl::InvalidArgumentError("prediction_column and label_column must be set");
  }
  PreparedRelease release;
  release.request_kind = "AuditClassifier";
  release.idempotency_key = req.idempotency_key();
  release.request = &req;
  release.epsilon = req.epsilon();
  release.parts = {{"counts", 2.0}};  // the (ŷ, a, y) table
  ASSIGN_OR_RETURN(auto replay, Replay<v1::AuditClassifierResponse>(caller, release));
  if (replay) return *std::move(replay);

  ASSIGN_OR_RETURN(ResolvedTable table, ResolveTable(caller, req.table_handle()));
  release.dataset_id = table.dataset.id;
  release.dataset_name = table.dataset.name;
  ASSIGN_OR_RETURN(int pred_col, internal::ColumnIndex(*table.table, req.prediction_column(),
                                                       "prediction_column"));
  ASSIGN_OR_RETURN(int label_col,
                   internal::ColumnIndex(*table.table, req.label_column(), "label_column"));
  ASSIGN_OR_RETURN(JoinedRows joined, Join(table, req.attributes(), req.unmatched()));
  release.SizesFrom(joined);
  ASSIGN_OR_RETURN(auto pred, internal::BinaryColumn(*table.table, pred_col, joined.table_rows,
                                                     "prediction_column"));
  ASSIGN_OR_RETURN(auto label, internal::BinaryColumn(*table.table, label_col, joined.table_rows,
                                                      "label_column"));
  ASSIGN_OR_RETURN(auto counts, pp::CountEo(pred, label, joined.group, joined.num_groups));

  return ChargeAndRelease<v1::AuditClassifierResponse>(
      caller, release,
      [&](const Noises& noises, int64_t, v1::AuditClassifierResponse* resp)
          -> absl::StatusOr<std::optional<storage::ArtifactRecord>> {
        const std::vector<int64_t> noisy = AddNoise(counts.n, *noises[0], gen_);
        ASSIGN_OR_RETURN(const double scale, LaplaceScaleOf(*noises[0]));
        ASSIGN_OR_RETURN(auto audit,
                         fairness::AuditClassifier(noisy, joined.num_groups, scale,
                                                   DrawOf(*noises[0]), audit_options, gen_));
        v1::ClassifierAuditReport* report = resp->mutable_report();
        for (const auto& a : joined.attributes) report->add_attributes(a);
        const int K = joined.num_groups;
        for (int a = 0; a < K; ++a) {
          v1::ClassifierGroupReport* g = report->add_groups();
          g->set_group(joined.group_labels[a]);
          CopyInterval(audit.groups[a].selection_rate, g->mutable_selection_rate());
          CopyInterval(audit.groups[a].tpr, g->mutable_tpr());
          CopyInterval(audit.groups[a].fpr, g->mutable_fpr());
          CopyInterval(audit.groups[a].error, g->mutable_error());
          g->set_noisy_pred0_label0(noisy[(0 * K + a) * 2 + 0]);
          g->set_noisy_pred0_label1(noisy[(0 * K + a) * 2 + 1]);
          g->set_noisy_pred1_label0(noisy[(1 * K + a) * 2 + 0]);
          g->set_noisy_pred1_label1(noisy[(1 * K + a) * 2 + 1]);
          g->set_noisy_rows(static_cast<int64_t>(audit.groups[a].noisy_rows));
          g->set_small_group(audit.groups[a].small_group);
        }
        report->set_small_group_threshold(fairness::SmallGroupThreshold(scale, 4));
        CopyInterval(audit.demographic_parity_violation,
                     report->mutable_demographic_parity_violation());
        CopyInterval(audit.equalized_odds_violation, report->mutable_equalized_odds_violation());
        report->set_confidence(audit_options.confidence);
        report->set_m(static_cast<int64_t>(joined.table_rows.size()));
        report->set_epsilon(req.epsilon());
        resp->set_rows_dropped(joined.dropped);
        return std::optional<storage::ArtifactRecord>();
      });
}

// ---- AuditRegressor ------------------------------------------------------------------------

absl::StatusOr<v1::AuditRegressorResponse> Vault::AuditRegressor(
    const Caller& caller, const v1::AuditRegressorRequest& req) {
  RETURN_IF_ERROR(RequireRole(caller, {Role::kCompany}));
  RETURN_IF_ERROR(core::ValidateIsFiniteAndPositive(req.epsilon(), "epsilon"));
  ASSIGN_OR_RETURN(pp::ScoreGrid grid, internal::MakeGrid(req.lo(), req.hi(), req.bins()));
  ASSIGN_OR_RETURN(auto audit_options, MakeAuditOptions(req.confidence()));
  if (req.score_column().empty()) return absl::InvalidArgumentError("score_column must be set");
  // Group sums of (score - lo), each score snapped to a public power-of-two grid (Mironov):
  // one subject adds at most max_steps grid steps to one group, so moving them between groups
  // changes the vector of sums by at most 2 max_steps in L1.
  ASSIGN_OR_RETURN(const double granularity,
                   core::dp::PowerOfTwoGranularity(grid.hi - grid.lo, 20));
  ASSIGN_OR_RETURN(const int64_t max_steps, core::dp::SnapToGrid(grid.hi - grid.lo, granularity));
  PreparedRelease release;
  release.request_kind = "AuditRegressor";
  release.idempotency_key = req.idempotency_key();
  release.request = &req;
  release.epsilon = req.epsilon();
  release.parts = {{"histogram", 2.0, 0.5}, {"sums", 2.0 * max_steps, 0.5}};
  ASSIGN_OR_RETURN(auto replay, Replay<v1::AuditRegressorResponse>(caller, release));
  if (replay) return *std::move(replay);

  ASSIGN_OR_RETURN(ScoredRows scored,
                   LoadScores(caller, req.table_handle(), req.score_column(), req.attributes(),
                              req.unmatched(), grid, &release));
  const JoinedRows& joined = scored.joined;
  const std::vector<double>& scores = scored.scores;
  const std::vector<int64_t>& counts = scored.counts;
  const int64_t clipped = scored.clipped;
  if (static_cast<int64_t>(joined.num_groups) * grid.k > kMaxAuditCells) {
    return absl::InvalidArgumentError(absl::StrCat(
        "groups x bins = ", static_cast<int64_t>(joined.num_groups) * grid.k,
        " histogram cells exceed the limit of ", kMaxAuditCells, "; use fewer bins or attributes"));
  }
  std::vector<int64_t> sums(joined.num_groups, 0);
  for (size_t i = 0; i < scores.size(); ++i) {
    const double s = std::clamp(scores[i], grid.lo, grid.hi);
    ASSIGN_OR_RETURN(int64_t steps, core::dp::SnapToGrid(s - grid.lo, granularity));
    sums[joined.group[i]] += std::clamp<int64_t>(steps, 0, max_steps);
  }

  return ChargeAndRelease<v1::AuditRegressorResponse>(
      caller, release,
      [&](const Noises& noises, int64_t, v1::AuditRegressorResponse* resp)
          -> absl::StatusOr<std::optional<storage::ArtifactRecord>> {
        const std::vector<int64_t> noisy_counts = AddNoise(counts, *noises[0], gen_);
        const std::vector<int64_t> noisy_sums = AddNoise(sums, *noises[1], gen_);
        ASSIGN_OR_RETURN(auto audit, fairness::AuditRegressor(
                                         noisy_counts, noisy_sums, joined.num_groups, grid.lo,
                                         grid.hi, grid.k, granularity, DrawOf(*noises[0]),
                                         DrawOf(*noises[1]), audit_options, gen_));
        // Public: the histogram noise's scale and the bin count, never the data.
        ASSIGN_OR_RETURN(const double count_scale, LaplaceScaleOf(*noises[0]));
        const double small_below = fairness::SmallGroupThreshold(count_scale, grid.k);
        v1::RegressorAuditReport* report = resp->mutable_report();
        for (const auto& a : joined.attributes) report->add_attributes(a);
        for (int a = 0; a < joined.num_groups; ++a) {
          v1::RegressorGroupReport* g = report->add_groups();
          g->set_group(joined.group_labels[a]);
          CopyInterval(audit.groups[a].mean, g->mutable_mean());
          *g->mutable_histogram() = {audit.groups[a].histogram.begin(),
                                     audit.groups[a].histogram.end()};
          int64_t noisy_rows = 0;
          for (int j = 0; j < grid.k; ++j) {
            g->add_noisy_counts(noisy_counts[a * grid.k + j]);
            noisy_rows += noisy_counts[a * grid.k + j];
          }
          g->set_noisy_rows(noisy_rows);
          g->set_small_group(static_cast<double>(noisy_rows) < small_below);
        }
        report->set_small_group_threshold(small_below);
        CopyInterval(audit.max_ks, report->mutable_max_ks());
        report->set_confidence(audit_options.confidence);
        report->set_n(static_cast<int64_t>(joined.table_rows.size()));
        report->set_epsilon(req.epsilon());
        report->set_lo(grid.lo);
        report->set_hi(grid.hi);
        report->set_bins(grid.k);
        report->set_scores_clipped(clipped);
        resp->set_rows_dropped(joined.dropped);
        resp->set_scores_clipped(clipped);
        return std::optional<storage::ArtifactRecord>();
      });
}

}  // namespace fairvault::server
