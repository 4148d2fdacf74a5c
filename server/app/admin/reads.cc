// Read-only views: artifacts, budgets and ledger rows, scoped by role.
#include <map>

#include "absl/strings/str_cat.h"
#include "core/util/status_macros.h"
#include "server/app/vault.h"
#include "server/app/vault_internal.h"
#include "server/storage/ledger_chain.h"

namespace fairvault::server {

using internal::RequireRole;
using storage::Role;

absl::StatusOr<v1::Budget> Vault::BudgetView(int64_t account_id, const std::string& company,
                                             const storage::DatasetRecord& dataset) {
  ASSIGN_OR_RETURN(auto state, store_->GetBudget(account_id, dataset.id));
  return internal::MakeBudget(dataset.name, company, state.grant.epsilon_micro, state.grant.delta,
                              state.spend);
}

absl::StatusOr<v1::GetArtifactResponse> Vault::GetArtifact(const Caller& caller,
                                                           const v1::GetArtifactRequest& req) {
  v1::GetArtifactResponse resp;
  ASSIGN_OR_RETURN(*resp.mutable_artifact(), LoadArtifact(caller, req.artifact_id()));
  return resp;
}

absl::StatusOr<v1::GetBudgetResponse> Vault::GetBudget(const Caller& caller,
                                                       const v1::GetBudgetRequest& req) {
  RETURN_IF_ERROR(RequireRole(caller, {Role::kCompany}));
  v1::GetBudgetResponse resp;
  if (!req.dataset().empty()) {
    ASSIGN_OR_RETURN(auto dataset, store_->GetDataset(req.dataset()));
    auto budget = BudgetView(caller.account_id, caller.name, dataset);
    if (absl::IsNotFound(budget.status())) {
      return absl::NotFoundError(
          absl::StrCat("company '", caller.name, "' has no grant on dataset '", dataset.name, "'"));
    }
    RETURN_IF_ERROR(budget.status());
    *resp.add_budgets() = *std::move(budget);
    return resp;
  }
  ASSIGN_OR_RETURN(auto grants, store_->ListGrants());
  for (const auto& g : grants) {
    if (g.account_id != caller.account_id) continue;
    ASSIGN_OR_RETURN(auto dataset, store_->GetDatasetById(g.dataset_id));
    ASSIGN_OR_RETURN(*resp.add_budgets(), BudgetView(caller.account_id, caller.name, dataset));
  }
  return resp;
}

absl::StatusOr<v1::ListLedgerResponse> Vault::ListLedger(const Caller& caller,
                                                         const v1::ListLedgerRequest& req) {
  ASSIGN_OR_RETURN(storage::LedgerFilter filter,
                   internal::PageFilter(req.after_seq(), req.limit()));
  if (caller.role == Role::kCompany) {
    if (!req.company().empty() && req.company() != caller.name) {
      return absl::PermissionDeniedError("company: a company may list only its own ledger rows");
    }
    filter.account = caller.name;
  } else if (!req.company().empty()) {
    filter.account = req.company();
  }
  if (!req.dataset().empty()) filter.dataset = req.dataset();
  ASSIGN_OR_RETURN(auto rows, store_->ListLedger(filter));
  v1::ListLedgerResponse resp;
  for (const auto& r : rows) {
    v1::LedgerEntry* e = resp.add_entries();
    internal::FillLedgerEntry(r, e);
    if (req.with_canonical()) {
      e->set_canonical(storage::LedgerRowEncoding(r, r.account_id, r.dataset_id));
    }
  }
  return resp;
}

absl::StatusOr<v1::ListBudgetsResponse> Vault::ListBudgets(const Caller& caller,
                                                           const v1::ListBudgetsRequest& req) {
  RETURN_IF_ERROR(RequireRole(caller, {Role::kAuditor, Role::kRegulator}));
  ASSIGN_OR_RETURN(auto grants, store_->ListGrants());
  ASSIGN_OR_RETURN(auto datasets, store_->ListDatasets());
  ASSIGN_OR_RETURN(auto accounts, store_->ListAccounts());
  std::map<int64_t, std::string> account_name;
  for (const auto& a : accounts) account_name[a.id] = a.name;
  std::map<int64_t, const storage::DatasetRecord*> dataset_by_id;
  for (const auto& d : datasets) dataset_by_id[d.id] = &d;
  v1::ListBudgetsResponse resp;
  for (const auto& g : grants) {
    const auto* dataset = dataset_by_id[g.dataset_id];
    if (dataset == nullptr) continue;
    if (!req.dataset().empty() && dataset->name != req.dataset()) continue;
    if (!req.company().empty() && account_name[g.account_id] != req.company()) continue;
    ASSIGN_OR_RETURN(*resp.add_budgets(),
                     BudgetView(g.account_id, account_name[g.account_id], *dataset));
  }
  if (req.company().empty()) {
    for (const auto& d : datasets) {
      if (!d.cap_micro || (!req.dataset().empty() && d.name != req.dataset())) continue;
      ASSIGN_OR_RETURN(auto spend, store_->GetDatasetSpend(d.id));
      *resp.add_budgets() = internal::MakeBudget(d.name, "", *d.cap_micro, d.cap_delta, spend);
    }
  }
  return resp;
}

absl::StatusOr<v1::ListAccessLogResponse> Vault::ListAccessLog(
    const Caller& caller, const v1::ListAccessLogRequest& req) {
  RETURN_IF_ERROR(RequireRole(caller, {Role::kAuditor, Role::kRegulator}));
  ASSIGN_OR_RETURN(storage::LedgerFilter filter,
                   internal::PageFilter(req.after_seq(), req.limit()));
  if (!req.company().empty()) filter.account = req.company();
  ASSIGN_OR_RETURN(auto rows, store_->ListAccessLog(filter));
  v1::ListAccessLogResponse resp;
  for (const auto& r : rows) {
    v1::AccessLogEntry* e = resp.add_entries();
    e->set_seq(r.seq);
    e->set_time_unix_micros(r.time_micros);
    e->set_account(r.account);
    e->set_dataset(r.dataset);
    e->set_artifact_id(r.artifact_id);
    e->set_rows(r.rows);
    e->set_new_decisions(r.new_decisions);
  }
  return resp;
}

}  // namespace fairvault::server
