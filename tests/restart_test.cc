// Kill the server and start it again on the same file: ledger, budgets and chain intact, and
// a replayed idempotency key returns the same bytes without a new charge.
#include "core/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "tests/vault_fixture.h"

namespace fairvault::testing {
namespace {

namespace v1 = ::fairvault::v1;

class RestartTest : public VaultFixture {
 protected:
  void SetUp() override { StartVault(MakePopulation(3000, 5), /*epsilon=*/3, /*delta=*/1e-6); }
};

TEST_F(RestartTest, KilledServerRestartsWithLedgerBudgetsAndReplaysIntact) {
  v1::NoisyCountsRequest counts;
  counts.set_idempotency_key("before-crash");
  counts.set_table_handle(table_handle_);
  counts.add_columns("region");
  counts.set_epsilon(0.7);
  counts.set_noise(v1::NOISE_KIND_DISCRETE_GAUSSIAN);
  auto first = company_->NoisyCounts(counts);
  ASSERT_OK(first);
  v1::FitEqualizedOddsRequest eo;
  eo.set_idempotency_key("eo-before-crash");
  eo.set_table_handle(table_handle_);
  eo.set_prediction_column("prediction");
  eo.set_label_column("label");
  eo.add_attributes("sex");
  eo.set_epsilon(1);
  eo.set_gamma(0.05);
  auto fitted = company_->FitEqualizedOddsPostProcessor(eo);
  ASSERT_OK(fitted);

  auto ledger_before = auditor_->AuditorListLedger();
  ASSERT_OK(ledger_before);
  auto budget_before = company_->GetBudget();
  ASSERT_OK(budget_before);

  ASSERT_OK(server_->Kill());
  ASSERT_OK(server_->Start());
  company_ = server_->Connect(company_key_);
  auditor_ = server_->Connect(auditor_key_);

  auto ledger_after = auditor_->AuditorListLedger();
  ASSERT_OK(ledger_after);
  EXPECT_EQ(ledger_after->SerializeAsString(), ledger_before->SerializeAsString());
  auto budget_after = company_->GetBudget();
  ASSERT_OK(budget_after);
  EXPECT_EQ(budget_after->SerializeAsString(), budget_before->SerializeAsString());
  auto verify = auditor_->AuditorVerifyLedger();
  ASSERT_OK(verify);
  EXPECT_TRUE(verify->ok()) << verify->message();

  auto replay = company_->NoisyCounts(counts);
  ASSERT_OK(replay);
  EXPECT_EQ(replay->SerializeAsString(), first->SerializeAsString());
  auto refit = company_->FitEqualizedOddsPostProcessor(eo);
  ASSERT_OK(refit);
  EXPECT_EQ(refit->SerializeAsString(), fitted->SerializeAsString());
  v1::GetArtifactRequest get;
  get.set_artifact_id(fitted->artifact().id());
  auto artifact = company_->GetArtifact(get);
  ASSERT_OK(artifact);
  EXPECT_EQ(artifact->artifact().SerializeAsString(), fitted->artifact().SerializeAsString());

  auto ledger_final = auditor_->AuditorListLedger();
  ASSERT_OK(ledger_final);
  EXPECT_EQ(ledger_final->entries_size(), ledger_before->entries_size());

  // A graceful stop (SIGTERM) also leaves everything intact.
  ASSERT_OK(server_->Stop());
  ASSERT_OK(server_->Start());
  auditor_ = server_->Connect(auditor_key_);
  auto verify2 = auditor_->AuditorVerifyLedger();
  ASSERT_OK(verify2);
  EXPECT_TRUE(verify2->ok());
  EXPECT_EQ(verify2->rows_checked(), ledger_before->entries_size());
}

// An online backup taken while the server runs restores to a vault with the same ledger (verified
// by the copy command and again by the restored server), budgets and replays; a second backup to
// the same file is refused without touching it.
TEST_F(RestartTest, OnlineBackupRestoresAVerifiedLedger) {
  v1::NoisyCountsRequest counts;
  counts.set_idempotency_key("before-backup");
  counts.set_table_handle(table_handle_);
  counts.add_columns("region");
  counts.set_epsilon(0.5);
  auto first = company_->NoisyCounts(counts);
  ASSERT_OK(first);
  auto ledger = auditor_->AuditorListLedger();
  ASSERT_OK(ledger);
  auto budget = company_->GetBudget();
  ASSERT_OK(budget);

  const std::string copy = TempDatabasePath("backup");
  ASSERT_OK_AND_ASSIGN(const std::string said, server_->Backup(copy));
  EXPECT_NE(said.find("ledger verified"), std::string::npos) << said;
  EXPECT_FALSE(server_->Backup(copy).ok());  // the target exists: refused

  ServerProcess restored(copy);
  ASSERT_OK(restored.Start());
  auto auditor = restored.Connect(auditor_key_);
  auto company = restored.Connect(company_key_);
  auto ledger_after = auditor->AuditorListLedger();
  ASSERT_OK(ledger_after);
  EXPECT_EQ(ledger_after->SerializeAsString(), ledger->SerializeAsString());
  auto budget_after = company->GetBudget();
  ASSERT_OK(budget_after);
  EXPECT_EQ(budget_after->SerializeAsString(), budget->SerializeAsString());
  auto verify = auditor->AuditorVerifyLedger();
  ASSERT_OK(verify);
  EXPECT_TRUE(verify->ok()) << verify->message();
  auto replay = company->NoisyCounts(counts);
  ASSERT_OK(replay);
  EXPECT_EQ(replay->SerializeAsString(), first->SerializeAsString());
}

}  // namespace
}  // namespace fairvault::testing
