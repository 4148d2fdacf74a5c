// The decision path: an attribute-aware artifact applied by the vault to subjects it holds.
// The company sends (subject key, prediction or score) and gets the post-processed output,
// never the attribute. A subject gets one decision per artifact (stored, and returned again
// for the same input), so every decision an artifact makes about a subject together reveals
// at most the artifact's decision_log_ratio_bound L about that subject's group: the artifact's
// decisions are L-DP, and L is charged once, on first use (the decision licence). Every call
// is written to the access log. See docs/privacy.md.
#include <cmath>
#include <limits>

#include "absl/container/flat_hash_map.h"
#include "absl/random/distributions.h"
#include "absl/strings/str_cat.h"
#include "core/postprocess/statistical_parity.h"
#include "core/dp/discrete_samplers.h"
#include "core/util/status_macros.h"
#include "server/app/vault.h"
#include "server/app/vault_charge_impl.h"
#include "server/app/vault_internal.h"

namespace fairvault::server {

using internal::RequireRole;
using storage::Role;
namespace pp = core::postprocess;

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
  const bool by_table = !req.table_handle().empty();
  int64_t rows = req.subject_keys_size();
  if (by_table) {
    if (rows > 0 || req.values_size() > 0) {
      return absl::InvalidArgumentError(
          "send either subject_keys and values, or table_handle and value_column: not both");
    }
  } else {
    if (!req.value_column().empty() || req.first_row() != 0 || req.row_count() != 0) {
      return absl::InvalidArgumentError(
          "value_column, first_row and row_count go with table_handle; set it, or send "
          "subject_keys and values alone");
    }
    if (rows == 0 || rows != req.values_size()) {
      return absl::InvalidArgumentError(absl::StrCat("send one value per subject key (got ", rows,
                                                     " subject_keys and ", req.values_size(),
                                                     " values)"));
    }
    if (rows > options_.max_rows) {
      return absl::InvalidArgumentError(
          absl::StrCat("at most ", options_.max_rows, " rows per call; split the request"));
    }
  }
  ASSIGN_OR_RETURN(const double bound, internal::DecisionLogRatioBound(artifact));
  if (!std::isfinite(bound)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "artifact '", artifact.id(),
        "' has decision_log_ratio_bound inf: some decisions would reveal a subject's group "
        "exactly; fit the post-processor with decision_floor > 0 to use Decide"));
  }
  const double floor = artifact.has_equalized_odds()          ? artifact.equalized_odds().decision_floor()
                       : artifact.has_equalized_odds_scores() ? artifact.equalized_odds_scores().decision_floor()
                                                              : artifact.statistical_parity().decision_floor();
  if (!(floor >= pp::kMinDecisionFloor)) {
    // Probabilities below the floor (possible when it is 0) are drawn neither exactly nor with the
    // same work for every group (docs/privacy.md §4, "Timing").
    return absl::FailedPreconditionError(absl::StrCat(
        "artifact '", artifact.id(), "' was fitted with decision_floor ", floor,
        "; Decide needs decision_floor >= ", pp::kMinDecisionFloor,
        ": refit the post-processor with one"));
  }
  const bool is_eo = artifact.has_equalized_odds();
  // Equalized odds from scores: the input is a score (binned as for statistical parity), the
  // output a 0/1 decision.
  const bool is_eo_scores = artifact.has_equalized_odds_scores();
  auto dataset = store_->GetDataset(artifact.dataset());
  if (absl::IsNotFound(dataset.status())) {
    return absl::FailedPreconditionError(
        absl::StrCat("the artifact's dataset '", artifact.dataset(), "' was deleted"));
  }
  RETURN_IF_ERROR(dataset.status());
  ASSIGN_OR_RETURN(auto all_attributes, DatasetAttributes(*dataset));
  const auto& artifact_attributes = is_eo          ? artifact.equalized_odds().attributes()
                                    : is_eo_scores ? artifact.equalized_odds_scores().attributes()
                                                   : artifact.statistical_parity().attributes();
  ASSIGN_OR_RETURN(GroupSpec spec,
                   ResolveGroups(all_attributes, dataset->name, artifact_attributes));
  // A call by table: its rows, its input column and its join with the dataset.
  ResolvedTable table;
  int64_t table_first = 0;  // the first table row decided
  absl::Span<const double> table_values;
  if (by_table) {
    ASSIGN_OR_RETURN(table, ResolveTable(caller, req.table_handle()));
    if (table.dataset.id != dataset->id) {
      return absl::FailedPreconditionError(absl::StrCat(
          "table_handle '", req.table_handle(), "' was uploaded against dataset '",
          table.dataset.name, "'; artifact '", artifact.id(), "' decides subjects of dataset '",
          dataset->name, "': upload the table against that dataset"));
    }
    ASSIGN_OR_RETURN(const int column,
                     internal::ColumnIndex(*table.table, req.value_column(), "value_column"));
    ASSIGN_OR_RETURN(const absl::Span<const double> values,
                     internal::NumericValues(*table.table, column, "value_column"));
    const int64_t table_rows = table.table->rows();
    table_first = req.first_row();
    if (table_first < 0 || table_first >= table_rows || req.row_count() < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "first_row must be in [0, ", table_rows, ") (the table's rows) and row_count >= 0 (got ",
          table_first, " and ", req.row_count(), ")"));
    }
    rows = req.row_count() == 0 ? table_rows - table_first
                                : std::min(req.row_count(), table_rows - table_first);
    const int64_t limit = std::min<int64_t>(kMaxDecideTableRows, options_.max_rows);
    if (rows > limit) {
      return absl::InvalidArgumentError(absl::StrCat(
          "at most ", limit, " table rows per call (", rows,
          " asked): set row_count, then continue from first_row + row_count"));
    }
    table_values = values.subspan(table_first, rows);
    // The whole column is checked on every call, not only this call's rows: a bad value further
    // down would otherwise be refused only after an earlier call charged the licence.
    for (size_t i = 0; i < values.size(); ++i) {
      if (!std::isfinite(values[i]) || (is_eo && values[i] != 0 && values[i] != 1)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "value_column '", req.value_column(), "': table row ", i, " (from 0) is ", values[i],
            is_eo ? "; predictions must be 0 or 1" : "; scores must be finite numbers",
            " (nothing was decided or charged)"));
      }
    }
  }
  // How a refusal names a row: its place in the call (counting from 1), or in the table
  // (counting from 0, as first_row and the CLI's row column do).
  const auto row_name = [&](int64_t i) {
    return by_table ? absl::StrCat("table row ", table_first + i, " (from 0)")
                    : absl::StrCat("row ", i + 1);
  };
  const auto subject_at = [&](int64_t i) {
    return by_table ? absl::StrCat("the subject key of ", row_name(i))
                    : absl::StrCat("subject key at ", row_name(i));
  };
  const auto value_field = [&] {
    return by_table ? absl::StrCat("value_column '", req.value_column(), "'")
                    : std::string("values");
  };

  // The artifact's per-group rule, in the dataset's group order.
  std::vector<std::string> labels;
  std::vector<double> p0, p1;              // equalized odds
  std::vector<std::vector<double>> p_bin;  // equalized odds from scores: [group][bin]
  pp::SpSolution transport;                // statistical parity: only the transport is read
  pp::ScoreGrid grid;
  if (is_eo) {
    for (const auto& g : artifact.equalized_odds().groups()) {
      labels.push_back(g.group());
      p0.push_back(g.p_flip_to_1_given_0());
      p1.push_back(g.p_keep_1_given_1());
    }
  } else if (is_eo_scores) {
    const auto& eos = artifact.equalized_odds_scores();
    grid = pp::ScoreGrid{eos.lo(), eos.hi(), eos.bins()};
    RETURN_IF_ERROR(grid.Validate());
    for (const auto& g : eos.groups()) {
      labels.push_back(g.group());
      p_bin.emplace_back(g.p_positive().begin(), g.p_positive().end());
    }
  } else {
    const auto& sp = artifact.statistical_parity();
    grid = pp::ScoreGrid{sp.lo(), sp.hi(), sp.bins()};
    RETURN_IF_ERROR(grid.Validate());
    for (const auto& g : sp.groups()) {
      labels.push_back(g.group());
      transport.transport.emplace_back(g.transport().begin(), g.transport().end());
    }
  }
  if (labels != spec.group_labels) {
    return absl::FailedPreconditionError(
        absl::StrCat("artifact '", artifact.id(), "' groups no longer match dataset '",
                     dataset->name, "'; fit a new post-processor"));
  }

  // One decision per (artifact, subject), even under concurrent calls: serialised here, and
  // across processes by the store, which refuses a decision batch another process stored
  // first (then the call starts over from the stored decisions; nothing of it left).
  ASSIGN_OR_RETURN(auto slot, LoadIndex(*dataset));
  absl::MutexLock decide_lock(&decide_mu_);
  // By table: the join current for the index (redone if the dataset grew since it was made, as
  // often as imports land in between, up to a bound), taken once: subject rows never move
  // (imports only append), so it stays valid for every attempt below, and nothing after the
  // licence's charge waits on an import.
  std::shared_ptr<const std::vector<int32_t>> join;
  for (int refresh = 1; by_table; ++refresh) {
    {
      absl::ReaderMutexLock lock(&slot->mu);
      ASSIGN_OR_RETURN(join, CurrentJoin(table, *slot->index));
    }
    if (join != nullptr) break;
    if (refresh == kJoinAttempts) {
      return absl::UnavailableError(
          absl::StrCat("dataset '", dataset->name, "' is being imported into; try again"));
    }
    RETURN_IF_ERROR(RefreshJoin(table, *slot));
  }
  // Whether this call paid the licence, in any attempt (a later attempt finds it paid).
  bool licence_charged = false;
  for (int attempt = 1;; ++attempt) {
    ASSIGN_OR_RETURN(const std::shared_ptr<DecisionTable> decided, Decisions(artifact.id(), *slot));

    // Check every row before anything is charged or decided: presence and the company's own
    // inputs only (never the attribute).
    std::vector<int64_t> subject(rows);
    std::vector<int> group(rows);
    std::vector<double> input(rows);  // the prediction, or the score's bin
    // Of each row whose subject was not decided before: the first row of its subject in this
    // call (later rows repeat its output).
    std::vector<int64_t> first_row(rows, -1);
    absl::flat_hash_map<int64_t, int64_t> first_row_of_subject;
    first_row_of_subject.reserve(rows);
    int64_t fresh_subjects = 0;
    {
      absl::ReaderMutexLock lock(&slot->mu);
      std::vector<int32_t> found;
      absl::Span<const double> values = table_values;
      if (by_table) {
        found.assign(join->begin() + table_first, join->begin() + table_first + rows);
      } else {
        found = slot->index->FindAll(req.subject_keys());
        values = absl::MakeConstSpan(req.values().data(), req.values_size());
      }
      for (int64_t i = 0; i < rows; ++i) {
        const double value = values[i];
        subject[i] = found[i];
        if (subject[i] < 0) {
          return absl::InvalidArgumentError(absl::StrCat(
              subject_at(i), " is not in dataset '", dataset->name,
              "'; decisions need subjects in the vault"));
        }
        if (!std::isfinite(value) || (is_eo && value != 0 && value != 1)) {
          return absl::InvalidArgumentError(absl::StrCat(
              value_field(), ": ", row_name(i), " is ", value,
              is_eo ? "; predictions must be 0 or 1" : "; scores must be finite numbers"));
        }
        group[i] = spec.GroupOf(*slot->index, subject[i]);
        input[i] = is_eo ? value : grid.Bin(value);
        double earlier = input[i];
        if (decided->Decided(subject[i])) {
          earlier = decided->Input(subject[i]);
        } else {
          auto [seen, fresh] = first_row_of_subject.try_emplace(subject[i], i);
          first_row[i] = seen->second;
          if (fresh) {
            ++fresh_subjects;
          } else {
            earlier = input[seen->second];
          }
        }
        if (earlier != input[i]) {
          return absl::InvalidArgumentError(absl::StrCat(
              subject_at(i), " was already decided by artifact '", artifact.id(),
              "' with another input (", is_eo ? "prediction " : "score bin ", earlier,
              "); a subject gets one decision per artifact"));
        }
      }
    }

    // The decision licence: L charged once per artifact, before any decision leaves.
    v1::DecideRequest licence_request;
    licence_request.set_artifact_id(artifact.id());
    PreparedRelease licence;
    licence.request_kind = kDecisionLicenceKind;
    licence.idempotency_key = absl::StrCat(kReservedKeyPrefix, "decide:", artifact.id());
    licence.request = &licence_request;
    licence.epsilon = std::max(1.0, std::ceil(bound * 1e6)) / 1e6;  // rounded up
    licence.mechanism = "randomized_decisions";
    licence.dataset_id = dataset->id;
    licence.dataset_name = dataset->name;
    ASSIGN_OR_RETURN(auto paid, Replay<v1::DecideResponse>(caller, licence));
    if (!paid.has_value()) {
      // Another replica may pay the licence between the Replay above and this charge: then
      // the store returns its licence and this call charged nothing.
      bool paid_by_another = false;
      licence.replayed_out = &paid_by_another;
      ASSIGN_OR_RETURN(paid, ChargeAndRelease<v1::DecideResponse>(
                                 caller, licence,
                                 [](const Noises&, int64_t, v1::DecideResponse*)
                                     -> absl::StatusOr<std::optional<storage::ArtifactRecord>> {
                                   return std::optional<storage::ArtifactRecord>();
                                 }));
      if (!paid_by_another) licence_charged = true;
    }

    v1::DecideResponse resp;
    *resp.mutable_charge() = paid->charge();
    resp.set_licence_charged(licence_charged);
    resp.mutable_outputs()->Reserve(static_cast<int>(rows));
    std::vector<DecisionTable::Decision> fresh;
    fresh.reserve(fresh_subjects);
    int64_t already = 0;
    for (int64_t i = 0; i < rows; ++i) {
      if (decided->Decided(subject[i])) {
        resp.add_outputs(decided->Output(subject[i]));
        ++already;
        continue;
      }
      if (const int64_t first = first_row[i]; first != i) {
        resp.add_outputs(resp.outputs(first));  // a key repeated within the call
        continue;
      }
      // A fresh draw from the secure generator.
      // The draws' work does not depend on the group (docs/privacy.md §4, "Timing").
      const double output =
          is_eo
              ? (core::dp::SampleBernoulli(input[i] == 1 ? p1[group[i]] : p0[group[i]], gen_) ? 1
                                                                                              : 0)
          : is_eo_scores
              ? (core::dp::SampleBernoulli(p_bin[group[i]][static_cast<int>(input[i])], gen_)
                     ? 1
                     : 0)
              : pp::SampleFairScore(transport, grid, group[i], static_cast<int>(input[i]), gen_);
      resp.add_outputs(output);
      fresh.push_back(DecisionTable::Decision{subject[i], input[i], output});
    }
    resp.set_decision_log_ratio_bound(bound);
    resp.set_rows_already_decided(already);
    if (by_table) resp.set_table_rows(table.table->rows());
    storage::AccessLogRow log;
    log.time_micros = clock_->NowMicros();
    log.account = caller.name;
    log.dataset = dataset->name;
    log.artifact_id = artifact.id();
    log.rows = rows;
    log.new_decisions = static_cast<int64_t>(fresh.size());
    // The new decisions and the call's log row commit together, before any output is returned.
    const int64_t batch = decided->batches() + 1;
    absl::StatusOr<int64_t> seq = store_->RecordDecisionBatch(
        artifact.id(), batch, fresh.empty() ? std::string() : DecisionTable::Encode(fresh), log);
    if (absl::IsAborted(seq.status()) && attempt < 3) continue;  // reread and start over
    RETURN_IF_ERROR(seq.status());
    for (const DecisionTable::Decision& d : fresh) decided->Set(d);
    if (!fresh.empty()) decided->MarkStored(batch);
    resp.set_access_log_seq(*seq);
    return resp;
  }
}

absl::StatusOr<std::shared_ptr<DecisionTable>> Vault::Decisions(const std::string& artifact_id,
                                                                IndexSlot& slot) {
  std::shared_ptr<DecisionTable> table;
  for (auto it = decision_tables_.begin(); it != decision_tables_.end(); ++it) {
    if (it->first == artifact_id) {
      table = it->second;
      decision_tables_.splice(decision_tables_.begin(), decision_tables_, it);
      break;
    }
  }
  if (table == nullptr) {
    auto fresh = std::make_shared<DecisionTable>();
    // Decisions stored by key before schema version 7, mapped to the subjects' rows.
    absl::ReaderMutexLock lock(&slot.mu);
    RETURN_IF_ERROR(store_->ForEachKeyedDecision(
        artifact_id, [&](const storage::DecisionRow& row) ABSL_NO_THREAD_SAFETY_ANALYSIS {
          const int64_t subject = slot.index->Find(row.subject_key);
          if (subject >= 0) fresh->Set(DecisionTable::Decision{subject, row.input, row.output});
          return absl::OkStatus();
        }));
    table = fresh;
  }
  // Batches stored since (by this process's failed attempt's rival, or another replica); on a
  // failure the table is dropped, to be read whole next time.
  absl::Status read = store_->ForEachDecisionBatch(
      artifact_id, table->batches(),
      [&](int64_t batch, const std::string& payload) { return table->ApplyBatch(batch, payload); });
  decision_tables_.remove_if([&](const auto& entry) { return entry.first == artifact_id; });
  RETURN_IF_ERROR(read);
  decision_tables_.emplace_front(artifact_id, table);
  while (decision_tables_.size() > kDecisionTables) decision_tables_.pop_back();
  return table;
}

}  // namespace fairvault::server
