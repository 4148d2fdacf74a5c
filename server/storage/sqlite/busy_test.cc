// Another process holding the SQLite database (an operator's sqlite3 shell in a transaction, a
// second vault on the same file): the store's calls wait up to the busy timeout, then fail with
// UNAVAILABLE "retry" — a failure to retry, so a job is re-run rather than failed after its
// charge, and a client retries — and write nothing; the retry after the hold works.
#include <sqlite3.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/accounting/accountant.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/storage/charge_request_testing.h"
#include "server/storage/sqlite/sqlite_store.h"
#include "server/storage/store_common.h"

namespace fairvault::server::storage {
namespace {

using ::fairvault::testing::IsOk;
using ::fairvault::testing::StatusIs;

class SqliteBusyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = absl::StrCat(::testing::TempDir(), "fairvault_busy_test_", info->name(), "_",
                         getpid(), ".db");
    RemoveFiles();
    SqliteStore::Options options;
    options.busy_millis = 100;
    auto store = SqliteStore::Open(path_, options);
    ASSERT_THAT(store.status(), IsOk());
    store_ = *std::move(store);
  }
  void TearDown() override {
    if (holder_ != nullptr) sqlite3_close(holder_);
    store_.reset();
    RemoveFiles();
  }
  void RemoveFiles() {
    for (const char* suffix : {"", "-wal", "-shm"}) {
      std::remove(absl::StrCat(path_, suffix).c_str());
    }
  }

  // Another connection takes the database's write lock and keeps it until Release().
  void Hold() {
    ASSERT_EQ(sqlite3_open(path_.c_str(), &holder_), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(holder_, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);
  }
  void Release() {
    ASSERT_EQ(sqlite3_exec(holder_, "ROLLBACK", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(holder_);
    holder_ = nullptr;
  }

  static AccountRecord Account(const std::string& name) {
    AccountRecord a;
    a.name = name;
    a.role = Role::kCompany;
    a.key_salt = "salt-" + name;
    a.key_hash = std::string(32, 'h');
    return a;
  }

  // The dataset "census", created once.
  DatasetRecord Census() {
    if (census_.id == 0) {
      DatasetRecord d;
      d.name = "census";
      d.attributes = "attrs";
      auto created = store_->CreateDataset(d);
      EXPECT_THAT(created.status(), IsOk());
      if (created.ok()) census_ = *created;
    }
    return census_;
  }

  // A company `name` with a grant of `micro` on census.
  AccountRecord Company(const std::string& name, int64_t micro) {
    auto account = store_->CreateAccount(Account(name));
    EXPECT_THAT(account.status(), IsOk());
    if (!account.ok()) return AccountRecord();
    EXPECT_THAT(store_->SetGrant(GrantRecord{account->id, Census().id, micro, 0}, name, "census",
                                 "regulator", 1),
                IsOk());
    return *account;
  }

  // A NoisyCounts charge of `micro` by `company` on census.
  ChargeRequest Request(const AccountRecord& company, const std::string& key, int64_t micro) {
    return NoisyCountsCharge(company, census_, key, micro);
  }

  // A charge body returning "payload-<seq>".
  static absl::StatusOr<ChargeResult> Payload(int64_t seq, const BudgetState&) {
    return ChargeResult{absl::StrCat("payload-", seq), std::nullopt, std::nullopt};
  }

  std::string path_;
  std::unique_ptr<SqliteStore> store_;
  sqlite3* holder_ = nullptr;
  DatasetRecord census_;
};

TEST_F(SqliteBusyTest, AWriteAnotherProcessHoldsUpIsUnavailableToRetryAndWritesNothing) {
  ASSERT_NO_FATAL_FAILURE(Hold());
  const absl::Status held = store_->CreateAccount(Account("acme")).status();
  EXPECT_THAT(held, StatusIs(absl::StatusCode::kUnavailable, "retry"));
  EXPECT_TRUE(IsFailureToRetry(held));
  // Reads go on beside the hold (WAL).
  EXPECT_THAT(store_->GetAccountByName("acme").status(), StatusIs(absl::StatusCode::kNotFound));
  ASSERT_NO_FATAL_FAILURE(Release());
  auto created = store_->CreateAccount(Account("acme"));
  ASSERT_THAT(created.status(), IsOk());
  EXPECT_THAT(store_->GetAccountByName("acme").status(), IsOk());
}

TEST_F(SqliteBusyTest, AChargeAnotherProcessHoldsUpIsUnavailableUnchargedAndItsRetryCharges) {
  const AccountRecord acme = Company("acme", 1'000'000);
  ASSERT_FALSE(HasFailure());
  const ChargeRequest request = Request(acme, "k1", 250'000);
  int bodies = 0;
  auto body = [&](int64_t seq, const BudgetState& after) {
    ++bodies;
    return Payload(seq, after);
  };

  ASSERT_NO_FATAL_FAILURE(Hold());
  auto held = store_->Charge(request, 2, body);
  EXPECT_THAT(held.status(), StatusIs(absl::StatusCode::kUnavailable, "retry"));
  EXPECT_EQ(bodies, 0);  // refused before the release was computed
  auto budget = store_->GetBudget(acme.id, census_.id);
  ASSERT_THAT(budget.status(), IsOk());
  EXPECT_EQ(budget->spent_micro, 0);
  ASSERT_NO_FATAL_FAILURE(Release());

  auto retried = store_->Charge(request, 3, body);
  ASSERT_THAT(retried.status(), IsOk());
  EXPECT_EQ(bodies, 1);
  budget = store_->GetBudget(acme.id, census_.id);
  ASSERT_THAT(budget.status(), IsOk());
  EXPECT_EQ(budget->spent_micro, 250'000);
  auto verified = store_->VerifyLedger();
  ASSERT_THAT(verified.status(), IsOk());
  EXPECT_TRUE(verified->ok) << verified->message;
  EXPECT_EQ(verified->rows_checked, 2);  // the grant and the one charge
}

// The store's read connections are lent to one reader at a time: many threads reading and
// listing at once, beside charges, each get their own answers (the sanitizer builds check the
// connections are never shared).
TEST_F(SqliteBusyTest, ManyConcurrentReadsAndListingsBesideChargesGetTheirOwnAnswers) {
  std::vector<AccountRecord> accounts;
  for (int i = 0; i < 6; ++i) {
    accounts.push_back(Company(absl::StrCat("company", i), 100'000'000));
  }
  ASSERT_FALSE(HasFailure());
  constexpr int kCharges = 20;
  std::vector<std::thread> threads;
  std::vector<int> wrong(6, 0);
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      for (int k = 0; k < kCharges; ++k) {
        const ChargeRequest r = Request(accounts[t], absl::StrCat("k", k), 1'000);
        auto charged = store_->Charge(r, 100 + k, Payload);
        if (!charged.ok()) ++wrong[t];
        auto account = store_->GetAccountByName(accounts[t].name);
        if (!account.ok() || account->id != accounts[t].id) ++wrong[t];
        auto stored = store_->GetStoredResponse(accounts[t].id, r.idempotency_key);
        if (!stored.ok()) ++wrong[t];
        LedgerFilter mine;
        mine.account = accounts[t].name;
        auto rows = store_->ListLedger(mine);
        // The grant and every charge of this thread so far, and only this account's.
        if (!rows.ok() || static_cast<int>(rows->size()) != k + 2) ++wrong[t];
        for (const LedgerRow& row : rows.ok() ? *rows : std::vector<LedgerRow>()) {
          if (row.account != accounts[t].name) ++wrong[t];
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int t = 0; t < 6; ++t) EXPECT_EQ(wrong[t], 0) << "thread " << t;
  auto verified = store_->VerifyLedger();
  ASSERT_THAT(verified.status(), IsOk());
  EXPECT_TRUE(verified->ok) << verified->message;
  EXPECT_EQ(verified->rows_checked, 6 + 6 * kCharges);
}

// The verification reads one snapshot: beside charges that commit meanwhile it always sees a
// ledger, spends and tree that agree (read outside one transaction, it would find tree nodes
// or spends beyond the rows it read).
TEST_F(SqliteBusyTest, VerificationsBesideChargesAlwaysVerify) {
  const AccountRecord acme = Company("acme", 1'000'000'000);
  ASSERT_FALSE(HasFailure());
  std::atomic<bool> stop{false};
  std::atomic<int> next{0}, committed{0};
  std::vector<std::thread> charging;
  for (int t = 0; t < 3; ++t) {
    charging.emplace_back([&] {
      while (!stop.load()) {
        auto charged =
            store_->Charge(Request(acme, absl::StrCat("k", next.fetch_add(1)), 1), 5, Payload);
        if (charged.ok()) ++committed;
      }
    });
  }
  // Verifications until at least 200 charges committed while they ran, and at least 20 of
  // them (a minute at most). Each takes longer as the charges lengthen the ledger: under ASan on
  // a loaded machine, 90 took the whole minute. Without the snapshot, 76 of 100 failed, so 20
  // that all verify are what a snapshot gives.
  int bad = 0, verifications = 0;
  std::string first_bad;
  const int committed_before = committed.load();
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while ((verifications < 20 || committed.load() - committed_before < 200) &&
         absl::Now() < deadline) {
    auto verified = store_->VerifyLedger();
    ++verifications;
    if (!verified.ok() || !verified->ok) {
      if (bad++ == 0) first_bad = verified.ok() ? verified->message : verified.status().ToString();
    }
  }
  const int committed_meanwhile = committed.load() - committed_before;
  stop = true;
  for (std::thread& t : charging) t.join();
  EXPECT_EQ(bad, 0) << first_bad << " (" << bad << " of " << verifications << ")";
  EXPECT_GE(verifications, 20);
  EXPECT_GE(committed_meanwhile, 200);
}

}  // namespace
}  // namespace fairvault::server::storage
