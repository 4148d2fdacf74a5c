// The private fairness audits of a classifier's outputs and of a regressor's scores: each one
// release through the common charge path, every value with its confidence interval.
#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/dp/granularity.h"
#include "core/dp/integer_noise.h"
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

// The audits' bootstrap runs after the charge (PreparedRelease::finish), from the stored noisy
// counts and sums alone: the charge stores the release, and no other charge of the store waits
// for the bootstrap. Its work is (histogram cells) x (draws), a noise draw from the secure
// stream per cell and draw (about 2.3 us each on the reference machine, twice for the
// regressor's two passes), so it is still bounded, since the caller waits for it: 1,000 draws
// up to 400 cells, fewer (never under 100) up to kMaxAuditCells, and larger audits are refused
// before the charge. Both the cell count (groups from the dataset's public schema, bins from
// the request) and so the draws are public. 100,000 cells once took 224 s.
constexpr int64_t kBootstrapCellDraws = 400'000;
constexpr int kMostDraws = 1'000;
constexpr int kFewestDraws = 100;
constexpr int64_t kMaxAuditCells = kBootstrapCellDraws / kFewestDraws;

// The request's confidence (0: 0.95), with the bootstrap's most draws.
absl::StatusOr<fairness::AuditOptions> MakeAuditOptions(double confidence) {
  fairness::AuditOptions options;
  options.confidence = confidence == 0 ? 0.95 : confidence;
  options.bootstrap_draws = kMostDraws;
  RETURN_IF_ERROR(options.Validate());
  return options;
}

// Fits `options`' draws to an audit of `cells` histogram cells; InvalidArgument past
// kMaxAuditCells, naming `what` the cells are and the request's `fix`.
absl::Status FitDrawsToCells(int64_t cells, const char* what, const char* fix,
                             fairness::AuditOptions& options) {
  if (cells > kMaxAuditCells) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " = ", cells, " histogram cells exceed the audits' limit of ", kMaxAuditCells,
        "; use fewer ", fix));
  }
  options.bootstrap_draws = static_cast<int>(std::clamp<int64_t>(
      kBootstrapCellDraws / std::max<int64_t>(cells, 1), kFewestDraws, kMostDraws));
  return options.Validate();
}

// The discrete Laplace noise a stored charge's cost (or one of its parts) names: the
// bootstrap's simulated DP error after the charge, at the public scale the release was drawn at.
absl::StatusOr<std::unique_ptr<core::dp::IntegerNoise>> StoredLaplaceNoise(const v1::Cost& cost) {
  if (cost.mechanism() != "discrete_laplace") {
    return absl::DataLossError(absl::StrCat("the stored audit names noise '", cost.mechanism(),
                                            "'; audits draw discrete Laplace noise"));
  }
  return core::dp::MakeDiscreteLaplaceNoise(cost.noise_scale());
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

}  // namespace

// ---- AuditClassifier -----------------------------------------------------------------------

absl::StatusOr<v1::AuditClassifierResponse> Vault::AuditClassifier(
    const Caller& caller, const v1::AuditClassifierRequest& req) {
  RETURN_IF_ERROR(RequireRole(caller, {Role::kCompany}));
  RETURN_IF_ERROR(core::ValidateIsFiniteAndPositive(req.epsilon(), "epsilon"));
  ASSIGN_OR_RETURN(auto audit_options, MakeAuditOptions(req.confidence()));
  if (req.prediction_column().empty() || req.label_column().empty()) {
    return absl::InvalidArgumentError("prediction_column and label_column must be set");
  }
  PreparedRelease release = PreparedRelease::Of("AuditClassifier", req);
  release.parts = {{"counts", 2.0}};  // the (ŷ, a, y) table
  // After the charge: the intervals, from the stored noisy counts and public inputs alone.
  release.finish = [audit_options, this](google::protobuf::Message* message)
      -> absl::StatusOr<std::optional<storage::ArtifactRecord>> {
    auto* resp = static_cast<v1::AuditClassifierResponse*>(message);
    v1::ClassifierAuditReport* report = resp->mutable_report();
    const int K = report->groups_size();
    fairness::AuditOptions options = audit_options;
    RETURN_IF_ERROR(FitDrawsToCells(4 * static_cast<int64_t>(K), "groups x outcome cells",
                                    "attributes", options));
    std::vector<int64_t> noisy(4 * static_cast<size_t>(K));
    for (int a = 0; a < K; ++a) {
      const v1::ClassifierGroupReport& g = report->groups(a);
      noisy[(0 * K + a) * 2 + 0] = g.noisy_pred0_label0();
      noisy[(0 * K + a) * 2 + 1] = g.noisy_pred0_label1();
      noisy[(1 * K + a) * 2 + 0] = g.noisy_pred1_label0();
      noisy[(1 * K + a) * 2 + 1] = g.noisy_pred1_label1();
    }
    ASSIGN_OR_RETURN(auto noise, StoredLaplaceNoise(resp->charge().cost()));
    const double scale = resp->charge().cost().noise_scale();  // the release's, as charged
    ASSIGN_OR_RETURN(auto audit,
                     fairness::AuditClassifier(noisy, K, scale, DrawOf(*noise), options, gen_));
    for (int a = 0; a < K; ++a) {
      v1::ClassifierGroupReport* g = report->mutable_groups(a);
      CopyInterval(audit.groups[a].selection_rate, g->mutable_selection_rate());
      CopyInterval(audit.groups[a].tpr, g->mutable_tpr());
      CopyInterval(audit.groups[a].fpr, g->mutable_fpr());
      CopyInterval(audit.groups[a].error, g->mutable_error());
      g->set_noisy_rows(static_cast<int64_t>(audit.groups[a].noisy_rows));
      g->set_small_group(audit.groups[a].small_group);
    }
    report->set_small_group_threshold(fairness::SmallGroupThreshold(scale, 4));
    CopyInterval(audit.demographic_parity_violation,
                 report->mutable_demographic_parity_violation());
    CopyInterval(audit.equalized_odds_violation, report->mutable_equalized_odds_violation());
    CopyInterval(audit.tpr_difference, report->mutable_tpr_difference());
    CopyInterval(audit.fpr_difference, report->mutable_fpr_difference());
    return std::optional<storage::ArtifactRecord>();
  };
  ASSIGN_OR_RETURN(auto replay, Replay<v1::AuditClassifierResponse>(caller, release));
  if (replay) return *std::move(replay);

  ASSIGN_OR_RETURN(OutcomeRows outcomes,
                   LoadOutcomes(caller, req.table_handle(), req.prediction_column(),
                                req.label_column(), req.attributes(), req.unmatched(),
                                /*two_groups_needed=*/nullptr, &release));
  const JoinedRows& joined = outcomes.joined;
  const pp::EoCounts& counts = outcomes.counts;
  // One (prediction, label) table per group of the public schema.
  RETURN_IF_ERROR(FitDrawsToCells(static_cast<int64_t>(counts.n.size()),
                                  "groups x outcome cells", "attributes", audit_options));

  return ChargeAndRelease<v1::AuditClassifierResponse>(
      caller, release,
      [&](const Noises& noises, int64_t, v1::AuditClassifierResponse* resp)
          -> absl::StatusOr<std::optional<storage::ArtifactRecord>> {
        // The release alone, stored pending; the intervals come after the commit (finish).
        const std::vector<int64_t> noisy = internal::AddNoiseToEach(counts.n, *noises[0], gen_);
        v1::ClassifierAuditReport* report = resp->mutable_report();
        for (const auto& a : joined.attributes) report->add_attributes(a);
        const int K = joined.num_groups;
        for (int a = 0; a < K; ++a) {
          v1::ClassifierGroupReport* g = report->add_groups();
          g->set_group(joined.group_labels[a]);
          g->set_noisy_pred0_label0(noisy[(0 * K + a) * 2 + 0]);
          g->set_noisy_pred0_label1(noisy[(0 * K + a) * 2 + 1]);
          g->set_noisy_pred1_label0(noisy[(1 * K + a) * 2 + 0]);
          g->set_noisy_pred1_label1(noisy[(1 * K + a) * 2 + 1]);
        }
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
  PreparedRelease release = PreparedRelease::Of("AuditRegressor", req);
  release.parts = {{"histogram", 2.0, 0.5}, {"sums", 2.0 * max_steps, 0.5}};
  // After the charge: the means, histograms and intervals, from the stored noisy counts and
  // sums and public inputs alone.
  release.finish = [audit_options, grid, granularity, this](google::protobuf::Message* message)
      -> absl::StatusOr<std::optional<storage::ArtifactRecord>> {
    auto* resp = static_cast<v1::AuditRegressorResponse*>(message);
    v1::RegressorAuditReport* report = resp->mutable_report();
    const int K = report->groups_size();
    fairness::AuditOptions options = audit_options;
    RETURN_IF_ERROR(FitDrawsToCells(static_cast<int64_t>(K) * grid.k, "groups x bins",
                                    "bins or attributes", options));
    std::vector<int64_t> noisy_counts, noisy_sums;
    noisy_counts.reserve(static_cast<size_t>(K) * grid.k);
    for (const v1::RegressorGroupReport& g : report->groups()) {
      if (g.noisy_counts_size() != grid.k) {
        return absl::DataLossError("the stored audit's histogram does not match its bins");
      }
      noisy_counts.insert(noisy_counts.end(), g.noisy_counts().begin(), g.noisy_counts().end());
      noisy_sums.push_back(g.noisy_score_sum());
    }
    const v1::Cost& cost = resp->charge().cost();
    if (cost.parts_size() != 2) {
      return absl::DataLossError("the stored audit's charge does not list its two parts");
    }
    ASSIGN_OR_RETURN(auto count_noise, StoredLaplaceNoise(cost.parts(0)));
    ASSIGN_OR_RETURN(auto sum_noise, StoredLaplaceNoise(cost.parts(1)));
    ASSIGN_OR_RETURN(auto audit,
                     fairness::AuditRegressor(noisy_counts, noisy_sums, K, grid.lo, grid.hi,
                                              grid.k, granularity, DrawOf(*count_noise),
                                              DrawOf(*sum_noise), options, gen_));
    for (int a = 0; a < K; ++a) {
      v1::RegressorGroupReport* g = report->mutable_groups(a);
      CopyInterval(audit.groups[a].mean, g->mutable_mean());
      *g->mutable_histogram() = {audit.groups[a].histogram.begin(),
                                 audit.groups[a].histogram.end()};
    }
    CopyInterval(audit.max_ks, report->mutable_max_ks());
    return std::optional<storage::ArtifactRecord>();
  };
  ASSIGN_OR_RETURN(auto replay, Replay<v1::AuditRegressorResponse>(caller, release));
  if (replay) return *std::move(replay);

  ASSIGN_OR_RETURN(ScoredRows scored,
                   LoadScores(caller, req.table_handle(), req.score_column(), req.attributes(),
                              req.unmatched(), grid, &release));
  const JoinedRows& joined = scored.joined;
  const std::vector<double>& scores = scored.scores;
  const std::vector<int64_t>& counts = scored.counts;
  const int64_t clipped = scored.clipped;
  RETURN_IF_ERROR(FitDrawsToCells(static_cast<int64_t>(joined.num_groups) * grid.k,
                                  "groups x bins", "bins or attributes", audit_options));
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
        // The release alone, stored pending; the audit comes after the commit (finish).
        const std::vector<int64_t> noisy_counts = internal::AddNoiseToEach(counts, *noises[0], gen_);
        const std::vector<int64_t> noisy_sums = internal::AddNoiseToEach(sums, *noises[1], gen_);
        // Public: the histogram noise's scale and the bin count, never the data.
        ASSIGN_OR_RETURN(const double count_scale, LaplaceScaleOf(*noises[0]));
        const double small_below = fairness::SmallGroupThreshold(count_scale, grid.k);
        v1::RegressorAuditReport* report = resp->mutable_report();
        for (const auto& a : joined.attributes) report->add_attributes(a);
        for (int a = 0; a < joined.num_groups; ++a) {
          v1::RegressorGroupReport* g = report->add_groups();
          g->set_group(joined.group_labels[a]);
          g->set_noisy_score_sum(noisy_sums[a]);
          int64_t noisy_rows = 0;
          for (int j = 0; j < grid.k; ++j) {
            g->add_noisy_counts(noisy_counts[a * grid.k + j]);
            noisy_rows += noisy_counts[a * grid.k + j];
          }
          g->set_noisy_rows(noisy_rows);
          g->set_small_group(static_cast<double>(noisy_rows) < small_below);
        }
        report->set_small_group_threshold(small_below);
        report->set_score_sum_granularity(granularity);
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
