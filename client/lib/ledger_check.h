// An auditor's own check of the whole ledger against a signed checkpoint, from the rows the
// vault lists (with their canonical encodings, ListLedgerRequest.with_canonical): each row hashes to its hash and says what its encoding says, the rows chain
// from the genesis hash with no gap, the first `checkpoint.size` of them are exactly the tree
// the vault signed (the root is recomputed from the rows), and no charge took a company past
// the grant in force nor a dataset past its cap, with the spend composed from the rows' own
// costs as the vault's accountant composes it. The vault's VerifyLedger says the same of its
// own database; this says it of what the vault shows, and the signature ties that to every
// receipt and checkpoint anyone else holds. It takes each row's recorded cost as the cost of
// its release (the company that asked checks its own: the response's Cost, its receipt).
#ifndef FAIRVAULT_CLIENT_LIB_LEDGER_CHECK_H_
#define FAIRVAULT_CLIENT_LIB_LEDGER_CHECK_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "core/accounting/accountant.h"
#include "core/transparency/merkle.h"
#include "core/transparency/note.h"
#include "fairvault/v1/fairvault.pb.h"

namespace fairvault::client {

// A charge row's recorded cost (`pure_epsilon_micro`, `rdp_nano`), as the accountant composes it.
core::accounting::PrivacyCost RecordedCost(const v1::LedgerEntry& entry);

class LedgerCheck {
 public:
  // `checkpoint`: an opened (signature-checked) checkpoint of the ledger.
  explicit LedgerCheck(core::transparency::Checkpoint checkpoint);

  // The next row, in seq order. DataLoss naming the row and what is wrong with it; after a
  // failure every later call returns the same status.
  absl::Status Add(const v1::LedgerEntry& entry);
  // Row `seq` must be listed and have hash `hash` (what the vault's VerifyLedger said of its
  // head before the rows were listed: a vault that answers the two calls differently fails).
  void ExpectHead(int64_t seq, std::string hash);
  // After the last row: the rows reach the checkpoint's size (the root was compared when they
  // did) and any ExpectHead row. DataLoss otherwise.
  absl::Status Finish();
  // The vault's budgets (ListBudgets) against the rows: each grant and cap is the last one its
  // row set, on the dataset's current id, and its spend and release count are the rows'
  // composition; none is listed twice. Compare only budgets read when the ledger had exactly
  // the rows added. DataLoss naming the first budget that differs.
  absl::Status CompareBudgets(const v1::ListBudgetsResponse& budgets) const;

  int64_t rows() const { return rows_; }
  int64_t charges() const { return charges_; }
  const std::string& head_hash() const { return head_hash_; }
  const core::transparency::Checkpoint& checkpoint() const { return checkpoint_; }
  // "dataset 'adult' was created again (id 5) at row 12", for each dataset name whose rows
  // moved to a new id: its spend and cap start over there (a deletion writes no row).
  const std::vector<std::string>& recreated() const { return recreated_; }

 private:
  struct Limit {
    int64_t epsilon_micro = 0;
    double delta = 0;
  };
  absl::Status Fail(int64_t seq, const std::string& what);
  // The ids the row's encoding names against its names: an account id is one name and a name
  // one id; a dataset id is one name, and a name's id only grows (a dataset created again).
  absl::Status CheckIds(const v1::LedgerEntry& e, int64_t account_id, int64_t dataset_id);
  absl::Status Charge(const v1::LedgerEntry& e, int64_t account_id, int64_t dataset_id);

  core::transparency::Checkpoint checkpoint_;
  core::transparency::RootBuilder tree_;
  absl::Status failed_;
  int64_t rows_ = 0;
  int64_t charges_ = 0;
  std::string head_hash_;
  // By (account id, dataset id) and by dataset id, as the rows' encodings name them.
  std::map<std::pair<int64_t, int64_t>, Limit> grants_;
  std::map<std::pair<int64_t, int64_t>, core::accounting::Spend> spends_;
  std::map<int64_t, Limit> caps_;
  std::map<int64_t, core::accounting::Spend> dataset_spends_;
  // The ids of the last grant row of each (company, dataset) name, and of the last cap row of
  // each dataset name: what ListBudgets names.
  std::map<std::pair<std::string, std::string>, std::pair<int64_t, int64_t>> grant_ids_;
  std::map<std::string, int64_t> cap_ids_;
  std::map<int64_t, std::string> account_names_, dataset_names_;
  std::map<std::string, int64_t> account_ids_, dataset_ids_;  // a dataset name's current id
  std::vector<std::string> recreated_;
  std::optional<std::pair<int64_t, std::string>> expected_head_;
};

}  // namespace fairvault::client

#endif  // FAIRVAULT_CLIENT_LIB_LEDGER_CHECK_H_
