// Many parallel spending requests against a small grant never charge more than the grant:
// the privacy filter's check and debit are one transaction.
#include <atomic>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "tests/vault_fixture.h"

namespace fairvault::testing {
namespace {

namespace v1 = ::fairvault::v1;

class ConcurrencyTest : public VaultFixture {
 protected:
  void SetUp() override { StartVault(MakePopulation(2000, 11), /*epsilon=*/1, /*delta=*/0); }
};

TEST_F(ConcurrencyTest, ParallelRequestsNeverOverspendTheGrant) {
  constexpr int kThreads = 16, kPerThread = 8;  // 128 requests of 0.05: 6.4x the grant
  std::atomic<int> admitted{0}, exhausted{0}, other{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto client = server_->Connect(company_key_);
      for (int i = 0; i < kPerThread; ++i) {
        v1::NoisyCountsRequest req;
        req.set_idempotency_key(absl::StrCat("t", t, "-", i));
        req.set_table_handle(table_handle_);
        req.add_attributes("sex");
        req.set_epsilon(0.05);
        auto resp = client->NoisyCounts(req);
        if (resp.ok()) {
          ++admitted;
          EXPECT_LE(resp->charge().budget_after().epsilon_spent(), 1.0);
        } else if (absl::IsResourceExhausted(resp.status())) {
          ++exhausted;
        } else {
          ++other;
          ADD_FAILURE() << resp.status();
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  // Budgets are exact micro-units: exactly 20 x 0.05 fit into 1.
  EXPECT_EQ(admitted.load(), 20);
  EXPECT_EQ(exhausted.load(), kThreads * kPerThread - 20);
  EXPECT_EQ(other.load(), 0);
  auto budget = company_->GetBudget();
  ASSERT_OK(budget);
  EXPECT_DOUBLE_EQ(budget->budgets(0).epsilon_spent(), 1.0);
  EXPECT_DOUBLE_EQ(budget->budgets(0).epsilon_remaining(), 0.0);
  auto ledger = auditor_->AuditorListLedger();
  ASSERT_OK(ledger);
  int charges = 0;
  for (const auto& e : ledger->entries()) charges += e.kind() == "charge";
  EXPECT_EQ(charges, 20);
  auto verify = auditor_->AuditorVerifyLedger();
  ASSERT_OK(verify);
  EXPECT_TRUE(verify->ok()) << verify->message();
}

TEST_F(ConcurrencyTest, ConcurrentRetriesOfOneKeyAreChargedOnce) {
  constexpr int kThreads = 8;
  std::vector<std::string> bytes(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto client = server_->Connect(company_key_);
      v1::NoisyCountsRequest req;
      req.set_idempotency_key("same-key");
      req.set_table_handle(table_handle_);
      req.set_epsilon(0.3);
      auto resp = client->NoisyCounts(req);
      ASSERT_OK(resp);
      bytes[t] = resp->SerializeAsString();
    });
  }
  for (auto& t : threads) t.join();
  for (int t = 1; t < kThreads; ++t) EXPECT_EQ(bytes[t], bytes[0]);
  auto budget = company_->GetBudget();
  ASSERT_OK(budget);
  EXPECT_DOUBLE_EQ(budget->budgets(0).epsilon_spent(), 0.3);
}

}  // namespace
}  // namespace fairvault::testing
