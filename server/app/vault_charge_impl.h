// The one charge path, shared by every spending use-case: replay check, declared cost,
// privacy filter, release, ledger row and stored response (see storage::Store::Charge).
// Included only by the vault's .cc files that define spending use-cases.
#ifndef FAIRVAULT_SERVER_APP_VAULT_CHARGE_IMPL_H_
#define FAIRVAULT_SERVER_APP_VAULT_CHARGE_IMPL_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/accounting/accountant.h"
#include "core/dp/integer_noise.h"
#include "core/util/status_macros.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "server/metrics/metrics.h"
#include "server/app/vault.h"
#include "server/app/vault_internal.h"
#include "server/storage/store_common.h"
#include "server/util/crypto.h"

namespace fairvault::server {
// Idempotency keys with this prefix are the vault's own (the decision licence's).
inline constexpr char kReservedKeyPrefix[] = "vault:";
inline constexpr char kDecisionLicenceKind[] = "DecisionLicence";

namespace charge_internal {

namespace accounting = core::accounting;

inline std::string SerializeDeterministic(const google::protobuf::Message& message) {
  std::string out;
  {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    message.SerializeToCodedStream(&coded);
  }
  return out;
}

// Digest of a request's parameters: everything but the idempotency key.
inline std::string ParamsDigest(const std::string& kind, const google::protobuf::Message& request) {
  std::unique_ptr<google::protobuf::Message> copy(request.New());
  copy->CopyFrom(request);
  const auto* field = copy->GetDescriptor()->FindFieldByName("idempotency_key");
  if (field != nullptr) copy->GetReflection()->ClearField(copy.get(), field);
  return HexEncode(Sha256(absl::StrCat(kind, std::string(1, '\0'), SerializeDeterministic(*copy))));
}

// Fills an artifact's envelope: a fresh id, owner, dataset, time and the paying ledger row.
inline void FillArtifactEnvelope(const Caller& caller, const std::string& dataset,
                                 int64_t ledger_seq, int64_t now_micros, v1::Artifact* artifact) {
  artifact->set_id(absl::StrCat("art_", HexEncode(RandomBytes(16))));
  artifact->set_dataset(dataset);
  artifact->set_company(caller.name);
  artifact->set_created_unix(now_micros / 1'000'000);
  artifact->set_ledger_seq(ledger_seq);
}

// The stored record of a finished artifact (in the one artifact format: the serialized
// v1::Artifact).
inline storage::ArtifactRecord ArtifactRecordOf(const v1::Artifact& artifact, const Caller& caller,
                                                int64_t dataset_id, int64_t now_micros) {
  storage::ArtifactRecord record;
  record.id = artifact.id();
  record.account_id = caller.account_id;
  record.dataset_id = dataset_id;
  record.ledger_seq = artifact.ledger_seq();
  record.created_micros = now_micros;
  record.payload = SerializeDeterministic(artifact);
  return record;
}

// A spending request turned down by the privacy filter (or the job limit): counted as a
// refusal for the operators' metrics, and marked so that the gRPC handler does not count it
// again.
inline absl::Status Refused(Metrics* metrics, const std::string& kind, Refusal reason,
                            absl::Status status) {
  if (metrics != nullptr) metrics->RecordRefusal(kind, reason);
  return MarkCounted(std::move(status));
}

// A stored response (or stored failure) returned instead of a charge.
inline absl::Status Replayed(Metrics* metrics, const std::string& kind, absl::Status status) {
  if (metrics != nullptr) metrics->RecordReplay(kind);
  return MarkCounted(std::move(status));
}

template <typename Response>
absl::StatusOr<Response> ParseStored(const std::string& payload) {
  Response resp;
  if (!resp.ParseFromString(payload)) return absl::DataLossError("stored response is corrupt");
  return resp;
}

// A pending release (PreparedRelease::finish) this build does not finish: a newer replica
// charged it, and finishes it on a retry that reaches one.
inline absl::Status StoredByANewerServer() {
  return absl::UnavailableError(
      "this release was charged by a newer vault server, which finishes it; retry (it will not "
      "be charged again)");
}

// A retry that stopped waiting for a charged release's finish (its client cancelled, or its
// deadline is a second away): the charge stands and the release is finished by the call that
// charged it or by a later retry.
inline absl::Status StoppedWaitingForFinish(const WaitLimit& limit,
                                            absl::string_view waiting_for) {
  const std::string rest = absl::StrCat(
      " while waiting for ", waiting_for,
      "; the release is charged: retry with the same idempotency key to get it (it will not be "
      "charged again)");
  if (limit.cancelled && limit.cancelled()) {
    return absl::CancelledError(absl::StrCat("the client cancelled the call", rest));
  }
  return absl::DeadlineExceededError(absl::StrCat("the call's deadline was near", rest));
}

}  // namespace charge_internal

template <typename Response>
absl::StatusOr<std::optional<Response>> Vault::Replay(const Caller& caller,
                                                      const PreparedRelease& release) {
  RETURN_IF_ERROR(internal::ValidateToken(release.idempotency_key, "idempotency_key"));
  if (absl::StartsWith(release.idempotency_key, kReservedKeyPrefix) &&
      release.request_kind != kDecisionLicenceKind) {
    return absl::InvalidArgumentError(
        absl::StrCat("idempotency_key: keys starting with '", kReservedKeyPrefix,
                     "' are reserved for the vault; choose another key"));
  }
  auto stored = store_->GetStoredResponse(caller.account_id, release.idempotency_key);
  if (absl::IsNotFound(stored.status())) return std::optional<Response>();
  RETURN_IF_ERROR(stored.status());
  if (stored->params_digest !=
      charge_internal::ParamsDigest(release.request_kind, *release.request)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "idempotency_key '", release.idempotency_key,
        "' was already used with different parameters; use a new key for a new request"));
  }
  // The decision licence is a part of Decide, whose call itself is fresh: not a replay.
  if (caller.outputs != nullptr && release.request_kind != kDecisionLicenceKind) {
    caller.outputs->replayed_ledger_seq = stored->ledger_seq;
  }
  if (caller.Previewing()) {
    v1::Cost cost;
    if (stored->failure.ok()) {
      ASSIGN_OR_RETURN(Response resp, charge_internal::ParseStored<Response>(stored->payload));
      cost = resp.charge().cost();
    }
    return PriceReplay(caller, release, *stored, cost);
  }
  // A charged release that failed fails again.
  RETURN_IF_ERROR(
      charge_internal::Replayed(options_.metrics, release.request_kind, stored->failure));
  ASSIGN_OR_RETURN(Response resp, charge_internal::ParseStored<Response>(stored->payload));
  // A charged release whose call did not store its post-processing (the process stopped, or
  // the store failed, in between): finished now from the stored release, with no new noise.
  if (stored->pending) {
    ASSIGN_OR_RETURN(resp, FinishCharged(caller, release, std::move(resp), caller.wait_limit));
  }
  return std::optional<Response>(std::move(resp));
}

template <typename Response>
absl::StatusOr<Response> Vault::FinishCharged(const Caller& caller, const PreparedRelease& release,
                                              Response pending, const WaitLimit& limit) {
  // Every error from here on comes after the charge (which stands): marked as counted with it.
  absl::StatusOr<Response> finished = [&]() -> absl::StatusOr<Response> {
    const std::string held = absl::StrCat(caller.account_id, "/", release.idempotency_key);
    if (!finish_gate_.Hold(held, limit)) {
      return charge_internal::StoppedWaitingForFinish(limit, "another call's finish of this release");
    }
    absl::Cleanup drop = [&] { finish_gate_.Drop(held); };
    // Another call of this release (here, or on another replica) may have finished it since
    // this one read it: then its stored response.
    ASSIGN_OR_RETURN(storage::StoredResponse now,
                     store_->GetStoredResponse(caller.account_id, release.idempotency_key));
    if (!now.pending) {
      RETURN_IF_ERROR(now.failure);
      return charge_internal::ParseStored<Response>(now.payload);
    }
    // A release this build charges whole, left pending by a newer build (replicas of two
    // versions): not this build's to finish, nor to return unfinished.
    if (!release.finish) return charge_internal::StoredByANewerServer();
    if (!finish_gate_.AcquireSlot(limit)) {
      return charge_internal::StoppedWaitingForFinish(limit, "a free post-processing slot");
    }
    absl::Cleanup release_slot = [&] { finish_gate_.ReleaseSlot(); };
    absl::StatusOr<std::optional<storage::ArtifactRecord>> artifact = release.finish(&pending);
    const absl::Status failure =
        artifact.ok() ? absl::OkStatus() : storage::ChargedFailure(artifact.status());
    const std::string payload =
        failure.ok() ? charge_internal::SerializeDeterministic(pending) : std::string();
    // Not stored (the store failed): the charge stands and a retry finishes the stored release.
    ASSIGN_OR_RETURN(
        storage::StoredResponse stored,
        store_->FinishRelease(caller.account_id, release.idempotency_key, payload, failure,
                              artifact.ok() ? *std::move(artifact) : std::nullopt));
    RETURN_IF_ERROR(stored.failure);
    if (stored.payload == payload) return pending;
    return charge_internal::ParseStored<Response>(stored.payload);
  }();
  if (!finished.ok()) return MarkCounted(finished.status());
  return finished;
}

template <typename Response>
absl::StatusOr<Response> Vault::ChargeAndRelease(const Caller& caller,
                                                 const PreparedRelease& release,
                                                 const ReleaseFill<Response>& fill) {
  ASSIGN_OR_RETURN(const int64_t epsilon_micro,
                   charge_internal::accounting::EpsilonToMicro(release.epsilon));
  storage::ChargeRequest charge;
  charge.account_id = caller.account_id;
  charge.account_name = caller.name;
  charge.dataset_id = release.dataset_id;
  charge.dataset_name = release.dataset_name;
  charge.request_kind = release.request_kind;
  charge.idempotency_key = release.idempotency_key;
  charge.params_digest = charge_internal::ParamsDigest(release.request_kind, *release.request);
  charge.epsilon = charge_internal::accounting::MicroToEpsilon(epsilon_micro);
  // A release that creates a training job is admitted only below the job limit, which the
  // store decides inside the charge transaction on the jobs every replica shares.
  if (release.job_out != nullptr) charge.job_limit = options_.max_pending_jobs;

  // The noise scales depend only on the declared epsilon, the public sensitivities and the
  // grant's delta — never on the data.
  Noises noises;
  v1::Cost cost;
  cost.set_epsilon(charge.epsilon);
  if (release.parts.empty() && release.composed) {
    // A composition the use-case calibrated with the accountant (a learner's many releases).
    if (release.mechanism.empty()) return absl::InternalError("a release needs a mechanism");
    charge.cost = *release.composed;
    charge.mechanism = release.mechanism;
    charge.delta = release.composed_cost.delta();
    cost = release.composed_cost;
  } else if (release.parts.empty()) {
    // A pure epsilon-DP mechanism without integer noise (the decision licence).
    if (release.mechanism.empty()) return absl::InternalError("a release needs a mechanism");
    charge.cost = charge_internal::accounting::LaplaceCost(epsilon_micro);
    charge.mechanism = release.mechanism;
  } else if (release.noise == v1::NOISE_KIND_DISCRETE_GAUSSIAN) {
    if (release.parts.size() != 1) {
      return absl::InternalError("Gaussian releases have exactly one part");
    }
    const double sensitivity = release.parts[0].sensitivity;
    auto budget = store_->GetBudget(caller.account_id, release.dataset_id);
    if (absl::IsNotFound(budget.status())) {
      return charge_internal::Refused(
          options_.metrics, release.request_kind, Refusal::kNoGrant,
          absl::PermissionDeniedError(
              absl::StrCat("company '", caller.name, "' has no budget grant on dataset '",
                           release.dataset_name, "'; ask the regulator for a grant")));
    }
    RETURN_IF_ERROR(budget.status());
    if (budget->grant.delta <= 0) {
      return charge_internal::Refused(
          options_.metrics, release.request_kind, Refusal::kDeltaRequired,
          absl::FailedPreconditionError(absl::StrCat(
              "noise: discrete Gaussian needs a grant with delta > 0; the grant on '",
              release.dataset_name,
              "' has delta 0 — use NOISE_KIND_DISCRETE_LAPLACE (CLI: --noise laplace)")));
    }
    charge.delta = budget->grant.delta;
    ASSIGN_OR_RETURN(double sigma, charge_internal::accounting::CalibrateGaussianSigma(
                                       charge.epsilon, charge.delta, sensitivity));
    ASSIGN_OR_RETURN(auto noise, core::dp::MakeDiscreteGaussianNoise(sigma));
    charge.cost = charge_internal::accounting::GaussianCost(sensitivity, noise->Scale());
    noises.push_back(std::move(noise));
  } else {
    // Pure epsilon: parts with shares summing to 1 compose to epsilon (basic composition).
    for (const auto& part : release.parts) {
      const double scale = part.sensitivity / (charge.epsilon * part.share);
      if (scale > core::dp::kMaxDiscreteLaplaceScale) {  // name the field to change
        return absl::InvalidArgumentError(absl::StrCat(
            "epsilon ", charge.epsilon, " is too small for this release: its noise scale ", scale,
            " exceeds the sampler's limit 2^40; use epsilon >= ",
            part.sensitivity / (part.share * core::dp::kMaxDiscreteLaplaceScale) * (1 + 1e-6)));
      }
      ASSIGN_OR_RETURN(auto noise, core::dp::MakeDiscreteLaplaceNoise(scale));
      noises.push_back(std::move(noise));
    }
    charge.cost = charge_internal::accounting::LaplaceCost(epsilon_micro);
  }
  if (!noises.empty()) {
    charge.mechanism = noises[0]->Name();
    cost.set_noise_scale(noises[0]->Scale());
    cost.set_sensitivity(release.parts[0].sensitivity);
  }
  if (!release.composed) {
    cost.set_delta(charge.delta);
    cost.set_mechanism(charge.mechanism);
  }
  if (release.parts.size() > 1) {
    for (size_t i = 0; i < release.parts.size(); ++i) {
      v1::Cost* part = cost.add_parts();
      part->set_name(release.parts[i].name);
      part->set_epsilon(charge.epsilon * release.parts[i].share);
      part->set_mechanism(noises[i]->Name());
      part->set_noise_scale(noises[i]->Scale());
      part->set_sensitivity(release.parts[i].sensitivity);
    }
  }

  if (caller.Previewing()) return Price(caller, release, charge, cost);

  absl::Status body_failure;  // the release's own failure, once its noise was drawn
  Response resp;               // the release, once the body ran: what the store keeps, unparsed
  bool stored_whole = false;   // whether the stored bytes are all of `resp`
  absl::StatusOr<storage::ChargeOutcome> outcome = store_->Charge(
      charge, clock_->NowMicros(),
      [&](int64_t seq, const storage::BudgetState& after) -> absl::StatusOr<storage::ChargeResult> {
        resp.Clear();
        absl::StatusOr<std::optional<storage::ArtifactRecord>> artifact = fill(noises, seq, &resp);
        if (!artifact.ok()) {
          body_failure = artifact.status();
          return body_failure;
        }
        v1::Charge* c = resp.mutable_charge();
        *c->mutable_cost() = cost;
        *c->mutable_budget_after() =
            internal::MakeBudget(release.dataset_name, caller.name, after.grant.epsilon_micro,
                                 after.grant.delta, after.spend);
        c->set_ledger_seq(seq);
        if (release.finish && artifact->has_value()) {
          body_failure = absl::InternalError("a release with a finish stores its artifact later");
          return body_failure;
        }
        storage::ChargeResult result{charge_internal::SerializeDeterministic(resp),
                                     *std::move(artifact), std::nullopt,
                                     /*pending=*/static_cast<bool>(release.finish)};
        stored_whole = result.response_payload.size() == resp.ByteSizeLong();
        if (release.job_out != nullptr && release.job_out->has_value()) {
          result.job = **release.job_out;
          result.job->ledger_seq = seq;
        }
        return result;
      });
  Metrics* metrics = options_.metrics;
  if (outcome.ok() && release.replayed_out != nullptr) *release.replayed_out = outcome->replayed;
  if (outcome.ok() && outcome->pending) {
    // The release is charged and durable; its post-processing runs now, outside the batch.
    absl::StatusOr<Response> finished =
        !outcome->replayed && stored_whole
            ? std::move(resp)
            : charge_internal::ParseStored<Response>(outcome->response_payload);
    if (finished.ok()) {
      if (outcome->replayed && caller.outputs != nullptr) {
        caller.outputs->replayed_ledger_seq = finished->charge().ledger_seq();
      }
      // A call that charged finishes its release whatever its client does; one that found
      // it charged by another (a replay) waits only within its own limit.
      finished = FinishCharged(caller, release, *std::move(finished),
                               outcome->replayed ? caller.wait_limit : WaitLimit{});
    } else {
      finished = MarkCounted(finished.status());
    }
    if (metrics != nullptr) {  // the charge stands whatever the finish did
      if (outcome->replayed) {
        metrics->RecordReplay(release.request_kind);
      } else {
        metrics->RecordCharge(release.request_kind, /*failed=*/!finished.ok());
      }
    }
    return finished;
  }
  if (!outcome.ok()) {
    const absl::Status& status = outcome.status();
    // The store kept the charge and stored the body's failure (storage::ChargedFailure: same
    // code, the body's message and a note), or returned a concurrent retry's stored failure.
    if (!body_failure.ok() && status.code() == body_failure.code() &&
        absl::StartsWith(status.message(), body_failure.message())) {
      if (metrics != nullptr) metrics->RecordCharge(release.request_kind, /*failed=*/true);
      return MarkCounted(status);
    }
    if (body_failure.ok() && absl::StrContains(status.message(), "this release was charged")) {
      return charge_internal::Replayed(metrics, release.request_kind, status);
    }
    if (std::optional<Refusal> refusal = FilterRefusal(status); refusal && body_failure.ok()) {
      return charge_internal::Refused(metrics, release.request_kind, *refusal, status);
    }
    return status;  // not charged: the gRPC handler counts it by its code
  }
  if (metrics != nullptr) {
    if (outcome->replayed) {
      metrics->RecordReplay(release.request_kind);
    } else {
      metrics->RecordCharge(release.request_kind, /*failed=*/false);
    }
  }
  // This call's own release was stored as the serialization of `resp`: returned as it is (if
  // serializing it failed, the stored bytes are returned, as a replay would).
  if (!outcome->replayed && stored_whole) return resp;
  // A concurrent call with the same key committed first: its stored response is returned.
  ASSIGN_OR_RETURN(Response stored,
                   charge_internal::ParseStored<Response>(outcome->response_payload));
  if (outcome->replayed && caller.outputs != nullptr &&
      release.request_kind != kDecisionLicenceKind) {
    caller.outputs->replayed_ledger_seq = stored.charge().ledger_seq();
  }
  return stored;
}

}  // namespace fairvault::server

#endif  // FAIRVAULT_SERVER_APP_VAULT_CHARGE_IMPL_H_
