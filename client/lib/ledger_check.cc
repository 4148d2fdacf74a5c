// The auditor's own check of the ledger against a signed checkpoint (see ledger_check.h).
#include "client/lib/ledger_check.h"

#include <cmath>
#include <set>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/lib/receipts.h"
#include "core/util/truncate.h"

namespace fairvault::client {
namespace tlog = core::transparency;
using core::Truncated;
using core::accounting::MicroToEpsilon;
using core::accounting::PrivacyCost;
using core::accounting::Spend;
using core::accounting::SpentEpsilonMicro;

namespace {

// The prev_hash of the first row (as the vault writes it).
constexpr char kGenesis[] = "0000000000000000000000000000000000000000000000000000000000000000";

std::string Eps(int64_t micro) {
  return micro == INT64_MAX ? std::string("unbounded") : absl::StrCat(MicroToEpsilon(micro));
}

}  // namespace

PrivacyCost RecordedCost(const v1::LedgerEntry& e) {
  PrivacyCost cost;
  if (e.has_pure_epsilon_micro()) cost.pure_epsilon_micro = e.pure_epsilon_micro();
  cost.rdp_nano.assign(e.rdp_nano().begin(), e.rdp_nano().end());
  return cost;
}

LedgerCheck::LedgerCheck(tlog::Checkpoint checkpoint)
    : checkpoint_(std::move(checkpoint)), head_hash_(kGenesis) {}

absl::Status LedgerCheck::Fail(int64_t seq, const std::string& what) {
  failed_ = absl::DataLossError(
      seq > 0 ? absl::StrCat("ledger row ", seq, ": ", what) : what);
  return failed_;
}

absl::Status LedgerCheck::Add(const v1::LedgerEntry& e) {
  if (!failed_.ok()) return failed_;
  const int64_t seq = rows_ + 1;
  if (e.seq() != seq) {
    return Fail(seq, absl::StrCat("is missing: the vault listed row ", e.seq(), " after row ",
                                  rows_));
  }
  if (e.canonical().empty()) {
    return Fail(seq, "was listed without its canonical encoding (a vault older than "
                     "ListLedgerRequest.with_canonical cannot be checked this way)");
  }
  if (absl::Status encoded = VerifyRowEncoding(e, e.canonical()); !encoded.ok()) {
    return Fail(0, absl::StrCat("ledger ", encoded.message()));
  }
  if (e.prev_hash() != head_hash_) {
    return Fail(seq, absl::StrCat("does not chain to row ", rows_, ": its prev_hash is ",
                                  Truncated(e.prev_hash()), ", that row's hash ", head_hash_));
  }
  // The ids the encoding names (fields 3 and 5), which the rows' names may not tell apart: a
  // dataset deleted and created again under its name is another dataset.
  const std::vector<absl::string_view> f = absl::StrSplit(e.canonical(), '\x1f');
  int64_t account_id = 0, dataset_id = 0;
  if (!absl::SimpleAtoi(f[3], &account_id) || !absl::SimpleAtoi(f[5], &dataset_id)) {
    return Fail(seq, "its encoding's account or dataset id is not a number");
  }
  if (absl::Status ids = CheckIds(e, account_id, dataset_id); !ids.ok()) return ids;
  if (e.kind() == "grant" || e.kind() == "cap") {
    const Limit limit{std::llround(e.epsilon() * 1e6), e.delta()};
    if (e.kind() == "grant") {
      grants_[{account_id, dataset_id}] = limit;
      grant_ids_[{e.account(), e.dataset()}] = {account_id, dataset_id};
    } else {
      caps_[dataset_id] = limit;
      cap_ids_[e.dataset()] = dataset_id;
    }
  } else if (e.kind() == "charge") {
    if (absl::Status charged = Charge(e, account_id, dataset_id); !charged.ok()) return charged;
  } else {
    return Fail(seq, absl::StrCat("has kind '", Truncated(e.kind()), "', not grant, cap or charge"));
  }
  head_hash_ = e.hash();
  tree_.Append(tlog::LeafHash(absl::HexStringToBytes(e.hash())));
  ++rows_;
  if (expected_head_ && rows_ == expected_head_->first && e.hash() != expected_head_->second) {
    return Fail(seq, absl::StrCat("is not the head the vault's VerifyLedger reported (hash ",
                                  Truncated(expected_head_->second), ")"));
  }
  if (rows_ == checkpoint_.size && tree_.Root() != checkpoint_.root) {
    return Fail(0, absl::StrCat("the ledger's first ", rows_, " rows are not the tree of the "
                                "signed checkpoint of that size: their root is ",
                                absl::BytesToHexString(tree_.Root()), ", the checkpoint's ",
                                absl::BytesToHexString(checkpoint_.root)));
  }
  return absl::OkStatus();
}

absl::Status LedgerCheck::CheckIds(const v1::LedgerEntry& e, int64_t account_id,
                                   int64_t dataset_id) {
  const bool is_cap = e.kind() == "cap";
  if (is_cap != (account_id == 0) || is_cap != e.account().empty()) {
    return Fail(e.seq(), absl::StrCat("names account '", Truncated(e.account()), "' (id ",
                                      account_id, "): a cap row names none, other rows one"));
  }
  if (!is_cap) {
    auto [by_id, new_id] = account_names_.emplace(account_id, e.account());
    auto [by_name, new_name] = account_ids_.emplace(e.account(), account_id);
    if (by_id->second != e.account() || by_name->second != account_id) {
      return Fail(e.seq(), absl::StrCat("names account '", Truncated(e.account()), "' by id ",
                                        account_id, ", but earlier rows name account id ",
                                        by_name->second, " '", Truncated(by_id->second),
                                        "': an account has one name and one id"));
    }
  }
  auto [by_id, new_id] = dataset_names_.emplace(dataset_id, e.dataset());
  if (by_id->second != e.dataset()) {
    return Fail(e.seq(), absl::StrCat("names dataset id ", dataset_id, " '",
                                      Truncated(e.dataset()), "', earlier rows '",
                                      Truncated(by_id->second), "'"));
  }
  auto [current, new_name] = dataset_ids_.emplace(e.dataset(), dataset_id);
  if (dataset_id < current->second) {
    return Fail(e.seq(), absl::StrCat("names dataset '", Truncated(e.dataset()), "' by id ",
                                      dataset_id, ", which id ", current->second,
                                      " replaced at an earlier row (ids only grow)"));
  }
  if (dataset_id > current->second) {
    recreated_.push_back(absl::StrCat("dataset '", Truncated(e.dataset()),
                                      "' was created again (id ", dataset_id, ") at row ",
                                      e.seq()));
    current->second = dataset_id;
  }
  return absl::OkStatus();
}

// A charge as the vault's filter admits one (server/storage/store_common.cc, AdmitCharge): the
// company's composed spend after it within the grant in force, and every company's together
// within the dataset's cap if it has one.
absl::Status LedgerCheck::Charge(const v1::LedgerEntry& e, int64_t account_id,
                                 int64_t dataset_id) {
  ++charges_;
  const PrivacyCost cost = RecordedCost(e);
  auto grant = grants_.find({account_id, dataset_id});
  if (grant == grants_.end()) {
    return Fail(e.seq(), absl::StrCat("charges company '", Truncated(e.account()),
                                      "' on dataset '", Truncated(e.dataset()),
                                      "', which no earlier row granted it"));
  }
  Spend& spend = spends_[{account_id, dataset_id}];
  spend.Add(cost);
  const int64_t spent = SpentEpsilonMicro(spend, grant->second.delta);
  if (spent > grant->second.epsilon_micro) {
    return Fail(e.seq(), absl::StrCat("takes company '", Truncated(e.account()), "' to epsilon ",
                                      Eps(spent), " on dataset '", Truncated(e.dataset()),
                                      "' (composed at delta ", grant->second.delta,
                                      "), over its grant of ", Eps(grant->second.epsilon_micro)));
  }
  Spend& all = dataset_spends_[dataset_id];
  all.Add(cost);
  auto cap = caps_.find(dataset_id);
  if (cap == caps_.end()) return absl::OkStatus();
  if (!cost.pure_epsilon_micro && cap->second.delta <= 0) {
    return Fail(e.seq(), absl::StrCat("is not pure epsilon, but dataset '", Truncated(e.dataset()),
                                      "' has a cap with delta 0"));
  }
  const int64_t all_spent = SpentEpsilonMicro(all, cap->second.delta);
  if (all_spent > cap->second.epsilon_micro) {
    return Fail(e.seq(), absl::StrCat("takes dataset '", Truncated(e.dataset()), "' to epsilon ",
                                      Eps(all_spent), " (all companies, composed at delta ",
                                      cap->second.delta, "), over its cap of ",
                                      Eps(cap->second.epsilon_micro)));
  }
  return absl::OkStatus();
}

void LedgerCheck::ExpectHead(int64_t seq, std::string hash) {
  expected_head_.emplace(seq, std::move(hash));
}

absl::Status LedgerCheck::Finish() {
  if (!failed_.ok()) return failed_;
  if (expected_head_ && rows_ < expected_head_->first) {
    return Fail(0, absl::StrCat("the vault's VerifyLedger checked ", expected_head_->first,
                                " rows but ListLedger listed only ", rows_));
  }
  if (rows_ < checkpoint_.size) {
    return Fail(0, absl::StrCat("the vault signed a checkpoint of ", checkpoint_.size,
                                " rows but listed only ", rows_));
  }
  if (checkpoint_.size == 0 && checkpoint_.root != tlog::EmptyRoot()) {
    return Fail(0, "the signed checkpoint of 0 rows does not have the empty tree's root");
  }
  return absl::OkStatus();
}

absl::Status LedgerCheck::CompareBudgets(const v1::ListBudgetsResponse& budgets) const {
  if (!failed_.ok()) return failed_;
  std::set<std::pair<std::string, std::string>> seen;
  for (const v1::Budget& b : budgets.budgets()) {
    const bool is_cap = b.company().empty();
    const std::string what =
        is_cap ? absl::StrCat("the cap of dataset '", Truncated(b.dataset()), "'")
               : absl::StrCat("the grant of company '", Truncated(b.company()),
                              "' on dataset '", Truncated(b.dataset()), "'");
    if (!seen.insert({b.company(), b.dataset()}).second) {
      return absl::DataLossError(absl::StrCat("the vault lists ", what, " twice"));
    }
    Limit limit;
    Spend spend;
    if (is_cap) {
      auto id = cap_ids_.find(b.dataset());
      if (id == cap_ids_.end()) {
        return absl::DataLossError(absl::StrCat("the vault lists ", what, ", which no row set"));
      }
      if (id->second != dataset_ids_.at(b.dataset())) {
        return absl::DataLossError(absl::StrCat("the vault lists ", what,
                                                ", which no row set since it was created again"));
      }
      limit = caps_.at(id->second);
      if (auto s = dataset_spends_.find(id->second); s != dataset_spends_.end()) spend = s->second;
    } else {
      auto ids = grant_ids_.find({b.company(), b.dataset()});
      if (ids == grant_ids_.end()) {
        return absl::DataLossError(absl::StrCat("the vault lists ", what, ", which no row set"));
      }
      if (ids->second.second != dataset_ids_.at(b.dataset())) {
        return absl::DataLossError(absl::StrCat("the vault lists ", what,
                                                ", which no row set since it was created again"));
      }
      limit = grants_.at(ids->second);
      if (auto s = spends_.find(ids->second); s != spends_.end()) spend = s->second;
    }
    if (b.epsilon_granted() != MicroToEpsilon(limit.epsilon_micro) || b.delta() != limit.delta) {
      return absl::DataLossError(absl::StrCat(
          "the vault says ", what, " is epsilon ", b.epsilon_granted(), " at delta ", b.delta(),
          "; its last row set epsilon ", MicroToEpsilon(limit.epsilon_micro), " at delta ",
          limit.delta));
    }
    const int64_t spent = SpentEpsilonMicro(spend, limit.delta);
    if (b.epsilon_spent() != MicroToEpsilon(spent) || b.releases() != spend.releases) {
      return absl::DataLossError(absl::StrCat(
          "the vault says ", b.releases(), " releases spent epsilon ", b.epsilon_spent(),
          " of ", what, "; the rows' charges are ", spend.releases, " composing to ",
          Eps(spent)));
    }
  }
  return absl::OkStatus();
}

}  // namespace fairvault::client
