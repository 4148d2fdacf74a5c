// The decision path: an attribute-aware artifact applied by the vault to subjects it holds.
// The company sends (subject key, prediction or score) and gets the post-processed output,
// never the attribute. Not charged; every call is written to the access log (see
// docs/privacy.md for what a decision reveals).
#include <cmath>
#include <limits>

#include "absl/random/distributions.h"
#include "absl/strings/str_cat.h"
#include "core/postprocess/statistical_parity.h"
#include "core/util/status_macros.h"
#include "server/app/vault.h"
#include "server/app/vault_internal.h"
#include "server/util/crypto.h"

namespace fairvault::server {

using internal::RequireRole;
using storage::Role;
namespace pp = core::postprocess;

namespace {

constexpr char kDecisionKeyName[] = "decision-prf-key";

// max |log P_a(x) - log P_b(x)| over the outcomes x of one input and all pairs of groups.
double LogRatioBound(const std::vector<std::vector<double>>& probs_by_group) {
  double bound = 0;
  for (size_t a = 0; a < probs_by_group.size(); ++a) {
    for (size_t b = a + 1; b < probs_by_group.size(); ++b) {
      for (size_t x = 0; x < probs_by_group[a].size(); ++x) {
        const double pa = probs_by_group[a][x], pb = probs_by_group[b][x];
        if (pa <= 0 && pb <= 0) continue;
        if (pa <= 0 || pb <= 0) return std::numeric_limits<double>::infinity();
        bound = std::max(bound, std::abs(std::log(pa) - std::log(pb)));
      }
    }
  }
  return bound;
}

}  // namespace

absl::StatusOr<v1::Artifact> Vault::LoadArtifact(const Caller& caller, const std::string& id) {
  if (id.empty()) return absl::InvalidArgumentError("artifact_id must be set");
  ASSIGN_OR_RETURN(auto record, store_->GetArtifact(id));
  if (caller.role == Role::kCompany && record.account_id != caller.account_id) {
    return absl::PermissionDeniedError(
        absl::StrCat("artifact '", id, "' belongs to another company"));
  }
  v1::Artifact artifact;
  if (!artifact.ParseFromString(record.payload)) {
    return absl::DataLossError("stored artifact is corrupt");
  }
  return artifact;
}

absl::StatusOr<v1::DecideResponse> Vault::Decide(const Caller& caller,
                                                 const v1::DecideRequest& req) {
  RETURN_IF_ERROR(RequireRole(caller, {Role::kCompany}));
  ASSIGN_OR_RETURN(v1::Artifact artifact, LoadArtifact(caller, req.artifact_id()));
  const int64_t rows = req.subject_keys_size();
  if (rows == 0 || rows != req.values_size()) {
    return absl::InvalidArgumentError(absl::StrCat("send one value per subject key (got ", rows,
                                                   " subject_keys and ", req.values_size(),
                                                   " values)"));
  }
  if (rows > options_.max_rows) {
    return absl::InvalidArgumentError(
        absl::StrCat("at most ", options_.max_rows, " rows per call; split the request"));
  }
  const bool is_eo = artifact.has_equalized_odds();
  if (!is_eo && !artifact.has_statistical_parity()) {
    return absl::InvalidArgumentError(
        absl::StrCat("artifact '", artifact.id(), "' is not an attribute-aware post-processor"));
  }
  auto dataset = store_->GetDataset(artifact.dataset());
  if (absl::IsNotFound(dataset.status())) {
    return absl::FailedPreconditionError(
        absl::StrCat("the artifact's dataset '", artifact.dataset(), "' was deleted"));
  }
  RETURN_IF_ERROR(dataset.status());
  ASSIGN_OR_RETURN(auto all_attributes, DatasetAttributes(*dataset));
  const auto& artifact_attributes =
      is_eo ? artifact.equalized_odds().attributes() : artifact.statistical_parity().attributes();
  ASSIGN_OR_RETURN(GroupSpec spec,
                   ResolveGroups(all_attributes, dataset->name, artifact_attributes));

  // The artifact's per-group decision rule, and its groups in the dataset's current order.
  std::vector<std::vector<std::vector<double>>> probs;  // [input][group][outcome]
  pp::SpSolution transport;
  pp::ScoreGrid grid;
  std::vector<std::string> labels;
  if (is_eo) {
    const auto& eo = artifact.equalized_odds();
    probs.assign(2, {});
    for (const auto& g : eo.groups()) {
      labels.push_back(g.group());
      probs[0].push_back({1 - g.p_flip_to_1_given_0(), g.p_flip_to_1_given_0()});
      probs[1].push_back({1 - g.p_keep_1_given_1(), g.p_keep_1_given_1()});
    }
  } else {
    const auto& sp = artifact.statistical_parity();
    grid = pp::ScoreGrid{sp.lo(), sp.hi(), sp.bins()};
    RETURN_IF_ERROR(grid.Validate());
    probs.assign(grid.k, {});
    for (const auto& g : sp.groups()) {
      labels.push_back(g.group());
      if (g.transport_size() != grid.k * grid.k) {
        return absl::DataLossError("stored transport has the wrong size");
      }
      transport.transport.emplace_back(g.transport().begin(), g.transport().end());
      for (int j = 0; j < grid.k; ++j) {
        probs[j].emplace_back(g.transport().begin() + j * grid.k,
                              g.transport().begin() + (j + 1) * grid.k);
      }
    }
  }
  if (labels != spec.group_labels) {
    return absl::FailedPreconditionError(
        absl::StrCat("artifact '", artifact.id(), "' groups no longer match dataset '",
                     dataset->name, "'; fit a new post-processor"));
  }
  double bound = 0;
  for (const auto& input : probs) bound = std::max(bound, LogRatioBound(input));

  ASSIGN_OR_RETURN(const std::string key, store_->GetOrCreateSecret(kDecisionKeyName, 32));
  ASSIGN_OR_RETURN(auto slot, LoadIndex(*dataset));
  v1::DecideResponse resp;
  resp.mutable_outputs()->Reserve(static_cast<int>(rows));
  {
    absl::ReaderMutexLock lock(&slot->mu);
    const SubjectIndex& index = *slot->index;
    for (int64_t i = 0; i < rows; ++i) {
      const std::string& subject_key = req.subject_keys(i);
      const double value = req.values(i);
      const int64_t subject = index.Find(subject_key);
      if (subject < 0) {
        return absl::InvalidArgumentError(absl::StrCat("subject key at row ", i + 1,
                                                       " is not in dataset '", dataset->name,
                                                       "'; decisions need subjects in the vault"));
      }
      if (!std::isfinite(value) || (is_eo && value != 0 && value != 1)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "values: row ", i + 1, " is ", value,
            is_eo ? "; predictions must be 0 or 1" : "; scores must be finite numbers"));
      }
      const int group = spec.GroupOf(index, subject);
      // One secure stream per (artifact, subject): asking again returns the same decision,
      // so repeated queries cannot average the randomization away.
      KeyedBitGen gen(key, absl::StrCat(artifact.id(), std::string(1, '\0'), subject_key));
      if (is_eo) {
        const double p = probs[static_cast<int>(value)][group][1];
        resp.add_outputs(absl::Bernoulli(gen, p) ? 1 : 0);
      } else {
        resp.add_outputs(pp::SampleFairScore(transport, grid, group, grid.Bin(value), gen));
      }
    }
  }
  resp.set_decision_log_ratio_bound(bound);
  storage::AccessLogRow log;
  log.time_micros = clock_->NowMicros();
  log.account = caller.name;
  log.dataset = dataset->name;
  log.artifact_id = artifact.id();
  log.rows = rows;
  ASSIGN_OR_RETURN(const int64_t seq, store_->AppendAccessLog(log));
  resp.set_access_log_seq(seq);
  return resp;
}

}  // namespace fairvault::server
