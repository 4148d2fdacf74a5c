// Kill the server and start it again on the same file: ledger, budgets and chain intact, and
// a replayed idempotency key returns the same bytes without a new charge.
#include <sqlite3.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/lib/receipts.h"
#include "core/testing/status_matchers.h"
#include "core/transparency/note.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/storage/sqlite/sqlite_store.h"
#include "tests/charge_checks.h"
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

// kill -9 while eight clients charge at once, so that the server is committing charges in
// batches (group commit) when it dies, after the write-ahead log has grown to the size at which
// it restarts and is being written again from its start (over frames of earlier commits): after
// the restart every response a client received has its ledger row, the chain verifies, no key
// is charged twice, every answered key replays its bytes, and every unanswered key's retry is
// charged at most once.
TEST_F(RestartTest, KilledWhileCommittingBatchesOfChargesKeepsEveryAnsweredRowAndNoOther) {
  constexpr int kThreads = 8;
  std::atomic<bool> stop{false};
  std::atomic<int> ok{0};
  std::vector<std::vector<Outcome>> outcomes(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::unique_ptr<client::Client> client = server_->Connect(company_key_);
      for (int i = 0; !stop.load(); ++i) {
        outcomes[t].push_back(
            Charge(*client, CountsBySex(table_handle_, absl::StrCat("b", t, "-", i), 0.0005)));
        if (!outcomes[t].back().status.ok()) break;  // the server is gone
        ++ok;
      }
    });
  }
  // The log restarts once it holds kWalCheckpointBytes; 500 charges after the file first
  // reaches that size are written over the restarted log's start.
  using server::storage::SqliteStore;
  const std::string wal = server_->db_path() + "-wal";
  const auto wal_bytes = [&wal] {
    std::error_code absent;  // no file yet: 0 bytes
    const std::uintmax_t bytes = std::filesystem::file_size(wal, absent);
    return absent ? int64_t{0} : static_cast<int64_t>(bytes);
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while ((ok.load() < 300 || wal_bytes() < SqliteStore::kWalCheckpointBytes) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const int64_t wal_reached = wal_bytes();
  const int at_restart_size = ok.load();
  while (ok.load() < at_restart_size + 500 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const int64_t wal_at_kill = wal_bytes();
  ASSERT_OK(server_->Kill());
  stop = true;
  for (std::thread& t : threads) t.join();
  ASSERT_OK(server_->Start());
  company_ = server_->Connect(company_key_);
  auditor_ = server_->Connect(auditor_key_);
  regulator_ = server_->Connect(regulator_key_);

  std::vector<Outcome> all;
  int answered = 0, cut_off = 0;
  for (const auto& per_thread : outcomes) {
    for (const Outcome& o : per_thread) {
      all.push_back(o);
      (o.status.ok() ? answered : cut_off) += 1;
    }
  }
  EXPECT_GE(answered, 300);
  EXPECT_GE(wal_reached, SqliteStore::kWalCheckpointBytes)
      << "the log never reached its restart size";
  EXPECT_GE(answered, at_restart_size + 500);
  // Rewritten in place, not emptied, and within the bound docs/operations.md states
  // (kWalLimitBytes plus the last transaction, well under 1 MiB here).
  EXPECT_GE(wal_at_kill, SqliteStore::kWalCheckpointBytes);
  EXPECT_LE(wal_at_kill, SqliteStore::kWalLimitBytes + (int64_t{1} << 20));
  CheckLedger(*auditor_, *regulator_, all);  // VerifyLedger: the tree's every node, too
  // Every answered charge's row is in the signed tree after the restart: its receipt verifies
  // with nothing but the vault's verifier key.
  std::ifstream key_file(server_->db_path() + ".log-key");
  std::stringstream key_text;
  key_text << key_file.rdbuf();
  auto signer = core::transparency::NoteSigner::Parse(key_text.str());
  ASSERT_OK(signer);
  for (const Outcome& o : all) {
    if (!o.status.ok()) continue;
    v1::GetReceiptRequest req;
    req.set_idempotency_key(o.key);
    auto receipt = company_->GetReceipt(req, /*auditor=*/false);
    ASSERT_OK(receipt) << o.key;
    EXPECT_OK(client::VerifyReceipt(receipt->receipt(), signer->verifier()).status()) << o.key;
  }
  for (const Outcome& o : all) {
    auto again = company_->NoisyCounts(CountsBySex(table_handle_, o.key, 0.0005));
    ASSERT_OK(again) << o.key;
    if (o.status.ok()) {
      EXPECT_EQ(again->SerializeAsString(), o.bytes) << o.key;  // the stored bytes
    }
  }
  // The retries of the cut-off calls: each key charged once at most (CheckLedger counts).
  std::vector<Outcome> replayed;
  for (const Outcome& o : all) {
    replayed.push_back(Charge(*company_, CountsBySex(table_handle_, o.key, 0.0005)));
  }
  CheckLedger(*auditor_, *regulator_, replayed);
  std::printf("restart_test batches: %d answered, %d cut off by kill -9; all intact\n", answered,
              cut_off);
}

// kill -9 after a release's charge committed and before its post-processing was stored: the
// restarted vault holds the charge and the noisy histogram, not yet finished; the retry
// finishes that histogram (the same noisy counts and artifact id, no second charge) and a
// replay returns its bytes.
TEST_F(RestartTest, KilledBeforeTheFinishWasStoredTheRetryFinishesTheChargedHistogram) {
  const auto raw = [this](const std::string& sql) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(server_->db_path().c_str(), &db), SQLITE_OK);
    sqlite3_busy_timeout(db, 10'000);
    EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK)
        << sqlite3_errmsg(db);
    sqlite3_close(db);
  };
  // Storing the finished response takes minutes of the server's CPU (a trigger counting to
  // 2e9), so the kill lands inside that transaction whatever the machine's speed.
  raw("CREATE TRIGGER slow_finish BEFORE UPDATE ON responses BEGIN SELECT COUNT(*) FROM "
      "(WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 2000000000) "
      "SELECT x FROM c); END");
  v1::FitStatisticalParityRequest sp;
  sp.set_idempotency_key("sp-killed");
  sp.set_table_handle(table_handle_);
  sp.set_score_column("prediction");
  sp.add_attributes("sex");
  sp.add_attributes("race");
  sp.set_lo(0);
  sp.set_hi(1);
  sp.set_bins(20);
  sp.set_alpha(0.1);
  sp.set_solver(v1::SP_SOLVER_LINEAR_PROGRAM);
  sp.set_epsilon(1);
  auto before = auditor_->AuditorListLedger();
  ASSERT_OK(before);
  const int rows = before->entries_size();
  absl::Status fit_status;
  std::thread fit([&] { fit_status = company_->FitStatisticalParityPostProcessor(sp).status(); });
  // The charge commits first: its ledger row appears, then the kill.
  bool charged = false;
  for (int i = 0; i < 2000 && !charged; ++i) {
    auto ledger = auditor_->AuditorListLedger();
    charged = ledger.ok() && ledger->entries_size() > rows;
    if (!charged) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_OK(server_->Kill());
  fit.join();
  ASSERT_TRUE(charged) << "the charge's ledger row never appeared";
  EXPECT_FALSE(fit_status.ok());  // killed before it answered
  raw("DROP TRIGGER slow_finish");

  // What the killed server left: the charge and the noisy histogram, pending.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open_v2(server_->db_path().c_str(), &db, SQLITE_OPEN_READONLY, nullptr),
            SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db,
                               "SELECT pending, payload FROM responses WHERE "
                               "idempotency_key = 'sp-killed'",
                               -1, &stmt, nullptr),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int(stmt, 0), 1);
  v1::FitStatisticalParityResponse charged_release;
  EXPECT_TRUE(charged_release.ParseFromArray(sqlite3_column_blob(stmt, 1),
                                             sqlite3_column_bytes(stmt, 1)));
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  const auto& histogram = charged_release.artifact().statistical_parity();
  ASSERT_EQ(histogram.groups_size(), 6);
  EXPECT_EQ(histogram.groups(0).transport_size(), 0);

  ASSERT_OK(server_->Start());
  company_ = server_->Connect(company_key_);
  auditor_ = server_->Connect(auditor_key_);
  auto retry = company_->FitStatisticalParityPostProcessor(sp);
  ASSERT_OK(retry);
  EXPECT_EQ(retry->artifact().id(), charged_release.artifact().id());
  EXPECT_EQ(retry->charge().ledger_seq(), charged_release.charge().ledger_seq());
  const auto& finished = retry->artifact().statistical_parity();
  ASSERT_EQ(finished.groups_size(), 6);
  for (int a = 0; a < 6; ++a) {
    EXPECT_THAT(finished.groups(a).noisy_counts(),
                ::testing::ElementsAreArray(histogram.groups(a).noisy_counts()));
    EXPECT_EQ(finished.groups(a).transport_size(), 20 * 20);
  }
  auto replay = company_->FitStatisticalParityPostProcessor(sp);
  ASSERT_OK(replay);
  EXPECT_EQ(replay->SerializeAsString(), retry->SerializeAsString());
  v1::GetArtifactRequest get;
  get.set_artifact_id(retry->artifact().id());
  auto artifact = company_->GetArtifact(get);
  ASSERT_OK(artifact);
  EXPECT_EQ(artifact->artifact().SerializeAsString(), retry->artifact().SerializeAsString());
  auto after = auditor_->AuditorListLedger();
  ASSERT_OK(after);
  EXPECT_EQ(after->entries_size(), rows + 1);  // one charge
  auto verify = auditor_->AuditorVerifyLedger();
  ASSERT_OK(verify);
  EXPECT_TRUE(verify->ok()) << verify->message();
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
