// LedgerCheck on ledgers built with the vault's own row encoding (server/storage/ledger_chain):
// an honest ledger passes, and each thing a vault could show an auditor instead — an edited
// row, a broken chain, a gap, another tree, fewer rows than it signed, a charge past a grant or
// a cap, budgets that are not the rows' composition — fails naming the row.
#include "client/lib/ledger_check.h"

#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "core/accounting/accountant.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/storage/ledger_chain.h"

namespace fairvault::client {
namespace {

using ::fairvault::testing::StatusIs;
using server::storage::LedgerRow;
namespace tlog = core::transparency;
namespace acc = core::accounting;

// A ledger as a vault writes one: rows chained by hash, listed as ListLedger lists them with
// their canonical encodings.
class Ledger {
 public:
  void Grant(const std::string& company, int64_t account_id, const std::string& dataset,
             int64_t dataset_id, double epsilon, double delta = 0) {
    LedgerRow row;
    row.kind = "grant";
    row.account = company;
    row.dataset = dataset;
    row.epsilon = epsilon;
    row.delta = delta;
    row.actor = "regulator";
    Append(row, account_id, dataset_id);
  }
  void Cap(const std::string& dataset, int64_t dataset_id, double epsilon, double delta = 0) {
    LedgerRow row;
    row.kind = "cap";
    row.dataset = dataset;
    row.epsilon = epsilon;
    row.delta = delta;
    row.actor = "regulator";
    Append(row, 0, dataset_id);
  }
  // A pure-epsilon charge (Laplace), or with `sigma` a Gaussian one of L2 sensitivity 1.
  void Charge(const std::string& company, int64_t account_id, const std::string& dataset,
              int64_t dataset_id, double epsilon, double sigma = 0) {
    LedgerRow row;
    row.kind = "charge";
    row.account = company;
    row.dataset = dataset;
    row.request_kind = "noisy_counts";
    row.idempotency_key = absl::StrCat("key-", entries.size() + 1);
    row.epsilon = epsilon;
    row.mechanism = sigma > 0 ? "gaussian" : "discrete_laplace";
    const acc::PrivacyCost cost = sigma > 0 ? acc::GaussianCost(1, sigma)
                                            : acc::PureDpCost(std::llround(epsilon * 1e6));
    row.pure_micro = cost.pure_epsilon_micro;
    row.rdp_nano = cost.rdp_nano;
    Append(row, account_id, dataset_id);
  }

  // The signed checkpoint's content for the first `size` rows (the signature is checked
  // before LedgerCheck sees a checkpoint).
  tlog::Checkpoint CheckpointOf(int64_t size) const {
    tlog::RootBuilder tree;
    for (int64_t i = 0; i < size; ++i) {
      tree.Append(tlog::LeafHash(absl::HexStringToBytes(entries[i].hash())));
    }
    tlog::Checkpoint c;
    c.origin = "vault.example/log";
    c.size = size;
    c.root = tree.Root();
    return c;
  }

  std::vector<v1::LedgerEntry> entries;

 private:
  void Append(LedgerRow& row, int64_t account_id, int64_t dataset_id) {
    row.seq = static_cast<int64_t>(entries.size()) + 1;
    row.time_micros = 1'800'000'000'000'000 + row.seq;
    row.prev_hash = entries.empty() ? server::storage::kGenesisHash : entries.back().hash();
    row.hash = server::storage::LedgerRowHash(row, account_id, dataset_id);
    v1::LedgerEntry e;
    e.set_seq(row.seq);
    e.set_time_unix_micros(row.time_micros);
    e.set_kind(row.kind);
    e.set_account(row.account);
    e.set_dataset(row.dataset);
    e.set_request_kind(row.request_kind);
    e.set_idempotency_key(row.idempotency_key);
    e.set_epsilon(row.epsilon);
    e.set_delta(row.delta);
    e.set_mechanism(row.mechanism);
    if (row.pure_micro) e.set_pure_epsilon_micro(*row.pure_micro);
    for (int64_t v : row.rdp_nano) e.add_rdp_nano(v);
    e.set_prev_hash(row.prev_hash);
    e.set_hash(row.hash);
    e.set_actor(row.actor);
    e.set_canonical(server::storage::LedgerRowEncoding(row, account_id, dataset_id));
    entries.push_back(e);
  }
};

// Checks every row of `entries` against `checkpoint`: the first failure, or Finish's status.
absl::Status CheckAll(const std::vector<v1::LedgerEntry>& entries,
                      const tlog::Checkpoint& checkpoint, LedgerCheck* out = nullptr) {
  LedgerCheck check(checkpoint);
  absl::Status status;
  for (const v1::LedgerEntry& e : entries) {
    status = check.Add(e);
    if (!status.ok()) break;
  }
  if (status.ok()) status = check.Finish();
  if (out != nullptr) *out = check;
  return status;
}

// CheckAll of the whole ledger against the checkpoint of all its rows.
absl::Status CheckWhole(const Ledger& l) {
  return CheckAll(l.entries, l.CheckpointOf(static_cast<int64_t>(l.entries.size())));
}

v1::Budget MakeBudget(const std::string& company, const std::string& dataset, double granted,
                      double delta, double spent, int64_t releases) {
  v1::Budget b;
  b.set_company(company);
  b.set_dataset(dataset);
  b.set_epsilon_granted(granted);
  b.set_delta(delta);
  b.set_epsilon_spent(spent);
  b.set_releases(releases);
  return b;
}

// Two companies on a capped dataset, a regrant, a Gaussian release at delta > 0.
Ledger Honest() {
  Ledger l;
  l.Grant("acme", 2, "adult", 1, 1.0);
  l.Cap("adult", 1, 1.5);
  l.Charge("acme", 2, "adult", 1, 0.25);
  l.Grant("globex", 3, "adult", 1, 0.5);
  l.Charge("globex", 3, "adult", 1, 0.5);
  l.Charge("acme", 2, "adult", 1, 0.25);
  l.Grant("acme", 2, "credit", 4, 2.0, 1e-5);
  l.Charge("acme", 2, "credit", 4, 0, /*sigma=*/4.0);
  return l;
}

TEST(LedgerCheckTest, AnHonestLedgerPassesAtEveryCheckpointSize) {
  const Ledger l = Honest();
  for (int64_t size = 1; size <= static_cast<int64_t>(l.entries.size()); ++size) {
    LedgerCheck check(l.CheckpointOf(size));
    ASSERT_OK(CheckAll(l.entries, l.CheckpointOf(size), &check)) << "size " << size;
    EXPECT_EQ(check.rows(), 8);
    EXPECT_EQ(check.charges(), 4);
    EXPECT_EQ(check.head_hash(), l.entries.back().hash());
  }
}

TEST(LedgerCheckTest, BudgetsThatAreTheRowsCompositionPassAndOthersFail) {
  const Ledger l = Honest();
  LedgerCheck check(l.CheckpointOf(8));
  ASSERT_OK(CheckAll(l.entries, l.CheckpointOf(8), &check));
  v1::ListBudgetsResponse budgets;
  *budgets.add_budgets() = MakeBudget("acme", "adult", 1.0, 0, 0.5, 2);
  *budgets.add_budgets() = MakeBudget("globex", "adult", 0.5, 0, 0.5, 1);
  *budgets.add_budgets() = MakeBudget("", "adult", 1.5, 0, 1.0, 3);
  EXPECT_OK(check.CompareBudgets(budgets));

  v1::ListBudgetsResponse understated = budgets;
  understated.mutable_budgets(0)->set_epsilon_spent(0.25);
  EXPECT_THAT(check.CompareBudgets(understated),
              StatusIs(absl::StatusCode::kDataLoss, "grant of company 'acme' on dataset 'adult'"));
  v1::ListBudgetsResponse fewer = budgets;
  fewer.mutable_budgets(2)->set_releases(2);
  EXPECT_THAT(check.CompareBudgets(fewer),
              StatusIs(absl::StatusCode::kDataLoss, "the cap of dataset 'adult'"));
  v1::ListBudgetsResponse raised = budgets;
  raised.mutable_budgets(1)->set_epsilon_granted(5);
  EXPECT_THAT(check.CompareBudgets(raised),
              StatusIs(absl::StatusCode::kDataLoss, "its last row set epsilon 0.5"));
  v1::ListBudgetsResponse unknown = budgets;
  *unknown.add_budgets() = MakeBudget("initech", "adult", 1, 0, 0, 0);
  EXPECT_THAT(check.CompareBudgets(unknown),
              StatusIs(absl::StatusCode::kDataLoss, "which no row set"));
}

TEST(LedgerCheckTest, AnEditedFieldIsCaught) {
  Ledger l = Honest();
  l.entries[2].set_epsilon(0.125);  // what the vault shows differs from what it hashed
  EXPECT_THAT(CheckWhole(l),
              StatusIs(absl::StatusCode::kDataLoss, "row 3: its epsilon is '0.125'"));
  l = Honest();
  l.entries[2].set_canonical(l.entries[3].canonical());
  EXPECT_THAT(CheckWhole(l),
              StatusIs(absl::StatusCode::kDataLoss, "does not hash to its hash"));
  l = Honest();
  l.entries[2].clear_canonical();
  EXPECT_THAT(CheckWhole(l),
              StatusIs(absl::StatusCode::kDataLoss, "without its canonical encoding"));
}

TEST(LedgerCheckTest, ABrokenChainAGapAndAReorderAreCaught) {
  // A row dropped from the listing: a gap.
  Ledger l = Honest();
  std::vector<v1::LedgerEntry> gap = l.entries;
  gap.erase(gap.begin() + 3);
  EXPECT_THAT(CheckAll(gap, l.CheckpointOf(8)),
              StatusIs(absl::StatusCode::kDataLoss, "ledger row 4: is missing"));
  // A row rewritten consistently (its own hash recomputed) and renumbered into the gap: the
  // next row's prev_hash names the row it replaced.
  Ledger other;
  other.Grant("acme", 2, "adult", 1, 1.0);
  other.Cap("adult", 1, 1.5);
  other.Charge("acme", 2, "adult", 1, 0.01);
  std::vector<v1::LedgerEntry> rewritten = l.entries;
  rewritten[2] = other.entries[2];
  EXPECT_THAT(CheckAll(rewritten, l.CheckpointOf(8)),
              StatusIs(absl::StatusCode::kDataLoss, "ledger row 4: does not chain to row 3"));
  // The whole ledger rewritten from row 3 on: it chains, but is not the tree the vault signed.
  Ledger forged;
  forged.Grant("acme", 2, "adult", 1, 1.0);
  forged.Cap("adult", 1, 1.5);
  forged.Charge("acme", 2, "adult", 1, 0.01);
  EXPECT_THAT(CheckAll(forged.entries, l.CheckpointOf(3)),
              StatusIs(absl::StatusCode::kDataLoss, "not the tree of the signed checkpoint"));
}

TEST(LedgerCheckTest, FewerRowsThanTheCheckpointSignedFail) {
  const Ledger l = Honest();
  std::vector<v1::LedgerEntry> truncated(l.entries.begin(), l.entries.begin() + 5);
  EXPECT_THAT(CheckAll(truncated, l.CheckpointOf(8)),
              StatusIs(absl::StatusCode::kDataLoss, "signed a checkpoint of 8 rows but listed only 5"));
}

TEST(LedgerCheckTest, AChargePastTheGrantOrTheCapIsCaughtEvenWhenHashedAndSigned) {
  Ledger over_grant;
  over_grant.Grant("acme", 2, "adult", 1, 1.0);
  over_grant.Charge("acme", 2, "adult", 1, 0.75);
  over_grant.Charge("acme", 2, "adult", 1, 0.5);
  EXPECT_THAT(CheckWhole(over_grant),
              StatusIs(absl::StatusCode::kDataLoss,
                       "row 3: takes company 'acme' to epsilon 1.25 on dataset 'adult'"));
  // Lowering a grant below the spend stops further charges.
  Ledger lowered;
  lowered.Grant("acme", 2, "adult", 1, 1.0);
  lowered.Charge("acme", 2, "adult", 1, 0.5);
  lowered.Grant("acme", 2, "adult", 1, 0.25);
  lowered.Charge("acme", 2, "adult", 1, 0.01);
  EXPECT_THAT(CheckWhole(lowered),
              StatusIs(absl::StatusCode::kDataLoss, "over its grant of 0.25"));
  Ledger over_cap;
  over_cap.Cap("adult", 1, 1.0);
  over_cap.Grant("acme", 2, "adult", 1, 1.0);
  over_cap.Grant("globex", 3, "adult", 1, 1.0);
  over_cap.Charge("acme", 2, "adult", 1, 0.75);
  over_cap.Charge("globex", 3, "adult", 1, 0.5);
  EXPECT_THAT(CheckWhole(over_cap),
              StatusIs(absl::StatusCode::kDataLoss,
                       "row 5: takes dataset 'adult' to epsilon 1.25 (all companies"));
  Ledger ungranted;
  ungranted.Grant("acme", 2, "adult", 1, 1.0);
  ungranted.Charge("acme", 2, "credit", 4, 0.1);
  EXPECT_THAT(CheckWhole(ungranted),
              StatusIs(absl::StatusCode::kDataLoss, "which no earlier row granted it"));
  // A dataset deleted and created again under its name is another dataset: the old grant does
  // not cover charges on the new one.
  Ledger recreated;
  recreated.Grant("acme", 2, "adult", 1, 1.0);
  recreated.Charge("acme", 2, "adult", 5, 0.1);
  EXPECT_THAT(CheckWhole(recreated),
              StatusIs(absl::StatusCode::kDataLoss, "which no earlier row granted it"));
  Ledger gaussian_under_pure_cap;
  gaussian_under_pure_cap.Cap("adult", 1, 10.0);
  gaussian_under_pure_cap.Grant("acme", 2, "adult", 1, 10.0, 1e-5);
  gaussian_under_pure_cap.Charge("acme", 2, "adult", 1, 0, /*sigma=*/4.0);
  EXPECT_THAT(CheckWhole(gaussian_under_pure_cap),
              StatusIs(absl::StatusCode::kDataLoss, "has a cap with delta 0"));
}

// Grants, spends and caps are kept by the ids the encodings name; ids that do not match the
// names would let one company's charges run on another's grant, or a dataset's spend restart.
TEST(LedgerCheckTest, IdsThatDisagreeWithTheNamesAreCaught) {
  Ledger borrowed;  // acme charged on beta's grant: by id within it, by name twice acme's
  borrowed.Grant("acme", 2, "adult", 1, 1.0);
  borrowed.Grant("beta", 3, "adult", 1, 1.0);
  borrowed.Charge("acme", 2, "adult", 1, 1.0);
  borrowed.Charge("acme", 3, "adult", 1, 1.0);
  EXPECT_THAT(CheckWhole(borrowed),
              StatusIs(absl::StatusCode::kDataLoss,
                       "row 4: names account 'acme' by id 3, but earlier rows name account id 2"));
  Ledger renamed;
  renamed.Grant("acme", 2, "adult", 1, 1.0);
  renamed.Grant("acme", 2, "credit", 1, 1.0);
  EXPECT_THAT(CheckWhole(renamed),
              StatusIs(absl::StatusCode::kDataLoss, "names dataset id 1 'credit', earlier rows"));
  // A dataset "created again" whose old id comes back: the cap and spend would start over at
  // will.
  Ledger flipped;
  flipped.Grant("acme", 2, "adult", 1, 1.0);
  flipped.Cap("adult", 1, 1.0);
  flipped.Grant("acme", 2, "adult", 9, 1.0);
  flipped.Charge("acme", 2, "adult", 9, 1.0);
  flipped.Charge("acme", 2, "adult", 1, 1.0);
  EXPECT_THAT(CheckWhole(flipped),
              StatusIs(absl::StatusCode::kDataLoss,
                       "row 5: names dataset 'adult' by id 1, which id 9 replaced"));
  // Honestly created again: reported, and its budgets are the new id's.
  std::vector<v1::LedgerEntry> again(flipped.entries.begin(), flipped.entries.begin() + 4);
  LedgerCheck check(flipped.CheckpointOf(4));
  ASSERT_OK(CheckAll(again, flipped.CheckpointOf(4), &check));
  ASSERT_EQ(check.recreated().size(), 1u);
  EXPECT_EQ(check.recreated()[0], "dataset 'adult' was created again (id 9) at row 3");
  v1::ListBudgetsResponse budgets;
  *budgets.add_budgets() = MakeBudget("acme", "adult", 1.0, 0, 1.0, 1);
  EXPECT_OK(check.CompareBudgets(budgets));
  *budgets.add_budgets() = MakeBudget("", "adult", 1.0, 0, 0, 0);  // the old dataset's cap
  EXPECT_THAT(check.CompareBudgets(budgets),
              StatusIs(absl::StatusCode::kDataLoss, "since it was created again"));
  budgets.mutable_budgets()->RemoveLast();
  *budgets.add_budgets() = MakeBudget("acme", "adult", 1.0, 0, 1.0, 1);
  EXPECT_THAT(check.CompareBudgets(budgets), StatusIs(absl::StatusCode::kDataLoss, "twice"));
  // A cap row naming an account, a grant naming none.
  Ledger odd;
  odd.Grant("", 0, "adult", 1, 1.0);
  EXPECT_THAT(CheckWhole(odd),
              StatusIs(absl::StatusCode::kDataLoss, "a cap row names none, other rows one"));
}

TEST(LedgerCheckTest, TheRowsMustAgreeWithTheVaultsOwnVerification) {
  const Ledger l = Honest();
  LedgerCheck agrees(l.CheckpointOf(8));
  agrees.ExpectHead(5, l.entries[4].hash());
  for (const v1::LedgerEntry& e : l.entries) ASSERT_OK(agrees.Add(e));
  EXPECT_OK(agrees.Finish());
  LedgerCheck other_head(l.CheckpointOf(8));
  other_head.ExpectHead(5, l.entries[3].hash());
  absl::Status status;
  for (const v1::LedgerEntry& e : l.entries) status.Update(other_head.Add(e));
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kDataLoss,
                               "ledger row 5: is not the head the vault's VerifyLedger reported"));
  LedgerCheck longer(l.CheckpointOf(4));
  longer.ExpectHead(9, "ab");
  for (const v1::LedgerEntry& e : l.entries) ASSERT_OK(longer.Add(e));
  EXPECT_THAT(longer.Finish(), StatusIs(absl::StatusCode::kDataLoss,
                                        "VerifyLedger checked 9 rows but ListLedger listed only 8"));
}

TEST(LedgerCheckTest, AfterAFailureEveryCallFailsTheSameWay) {
  Ledger l = Honest();
  LedgerCheck check(l.CheckpointOf(8));
  ASSERT_OK(check.Add(l.entries[0]));
  const absl::Status failed = check.Add(l.entries[2]);
  EXPECT_THAT(failed, StatusIs(absl::StatusCode::kDataLoss, "is missing"));
  EXPECT_EQ(check.Add(l.entries[1]), failed);
  EXPECT_EQ(check.Finish(), failed);
  EXPECT_EQ(check.CompareBudgets(v1::ListBudgetsResponse()), failed);
}

}  // namespace
}  // namespace fairvault::client
