// Tests of the Store, one suite run against both backends (SQLite, and PostgreSQL on a private
// server this binary starts): persistence across reopen, datasets and what goes with them,
// subject batches, table expiry, the schema version, and — PostgreSQL's reason to exist —
// charges from several store instances at once. The ledger and charge path are in
// store_ledger_test.cc, jobs in store_jobs_test.cc, migrations in store_migration_test.cc; the
// fixtures in store_test_fixture.h. All of them are one binary, instantiated here.
#include <mutex>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "server/storage/store_test_fixture.h"

namespace fairvault::server::storage::store_testing {
namespace {

// ---- persistence -------------------------------------------------------------------------------

TEST_P(StoreTest, EverythingSurvivesCloseAndReopen) {
  ASSERT_NO_FATAL_FAILURE(BuildLedger());
  bool called = false;
  ArtifactRecord artifact{"art_1", acme_.id, census_.id, 0, 77, "artifact-bytes"};
  auto with_artifact =
      store_->Charge(Request(acme_, census_, "k3", 100'000, "d3"), ++now_, Body(&called, artifact));
  ASSERT_OK(with_artifact);
  ASSERT_OK(store_->PutSubjectBatch(census_.id, "b1", "bd", 0, 3, "batch-bytes"));
  ASSERT_OK(store_->PutTable(TableRecord{"tbl_1", acme_.id, census_.id, 3, now_ + 1000, "tbl"}));
  const std::vector<LedgerRow> ledger_before = Ledger();
  const std::string head_before = Verify().head_hash;

  ASSERT_NO_FATAL_FAILURE(Reopen());

  auto accounts = store_->ListAccounts();
  ASSERT_OK(accounts);
  ASSERT_EQ(accounts->size(), 2u);
  auto acme = store_->GetAccountByName("acme");
  ASSERT_OK(acme);
  EXPECT_EQ(acme->id, acme_.id);
  EXPECT_EQ(acme->role, Role::kCompany);
  EXPECT_EQ(acme->key_salt, acme_.key_salt);  // binary salt with a NUL byte
  EXPECT_EQ(acme->key_hash, acme_.key_hash);
  EXPECT_EQ(acme->created_micros, acme_.created_micros);

  auto dataset = store_->GetDataset("census");
  ASSERT_OK(dataset);
  EXPECT_EQ(dataset->subject_count, 3);
  EXPECT_EQ(dataset->cap_micro, std::optional<int64_t>(5'000'000));
  auto digest = store_->GetBatchDigest(census_.id, "b1");
  ASSERT_OK(digest);
  EXPECT_EQ(*digest, "bd");

  auto budget = store_->GetBudget(acme_.id, census_.id);
  ASSERT_OK(budget);
  EXPECT_EQ(budget->grant.epsilon_micro, 2'000'000);
  EXPECT_EQ(budget->spend.releases, 3);
  EXPECT_EQ(budget->spent_micro, 850'000);
  auto grants = store_->ListGrants();
  ASSERT_OK(grants);
  EXPECT_EQ(grants->size(), 2u);

  const std::vector<LedgerRow> ledger_after = Ledger();
  ASSERT_EQ(ledger_after.size(), ledger_before.size());
  for (size_t i = 0; i < ledger_after.size(); ++i) {
    EXPECT_EQ(ledger_after[i].hash, ledger_before[i].hash);
    EXPECT_EQ(ledger_after[i].rdp_nano, ledger_before[i].rdp_nano);
  }
  const LedgerVerification v = Verify();
  EXPECT_TRUE(v.ok) << v.message;
  EXPECT_EQ(v.head_hash, head_before);

  auto stored = store_->GetStoredResponse(acme_.id, "k3");
  ASSERT_OK(stored);
  EXPECT_EQ(stored->payload, with_artifact->response_payload);
  auto art = store_->GetArtifact("art_1");
  ASSERT_OK(art);
  EXPECT_EQ(art->payload, "artifact-bytes");
  auto table = store_->GetTable("tbl_1");
  ASSERT_OK(table);
  EXPECT_EQ(table->payload, "tbl");

  // Replays still work and new charges continue the chain.
  auto replay = Charge(Request(acme_, census_, "k3", 100'000, "d3"));
  ASSERT_OK(replay);
  EXPECT_TRUE(replay->replayed);
  EXPECT_EQ(replay->response_payload, with_artifact->response_payload);
  ASSERT_OK(Charge(Request(acme_, census_, "k4", 100'000)));
  EXPECT_EQ(Ledger().back().seq, static_cast<int64_t>(ledger_before.size()) + 1);
  EXPECT_TRUE(Verify().ok);
}

// ---- datasets ----------------------------------------------------------------------------------

TEST_P(StoreTest, DeletedDatasetKeepsLedgerVerifiableAndIsNotReusedById) {
  Grant(acme_, census_, 1'000'000);
  ASSERT_OK(Charge(Request(acme_, census_, "k1", 700'000)));
  ASSERT_OK(store_->DeleteDataset(census_.id));
  EXPECT_THAT(store_->GetDataset("census"), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_EQ(Ledger().size(), 2u);  // ledger rows stay
  EXPECT_TRUE(Verify().ok);

  // A new dataset of the same name starts with a clean budget, and the ledger still verifies
  // once it is charged.
  DatasetRecord again = MakeDataset("census");
  EXPECT_NE(again.id, census_.id);
  Grant(acme_, again, 1'000'000);
  EXPECT_EQ(SpentMicro(acme_, again), 0);
  ASSERT_OK(Charge(Request(acme_, again, "k2", 500'000)));
  EXPECT_EQ(SpentMicro(acme_, again), 500'000);
  const LedgerVerification v = Verify();
  EXPECT_TRUE(v.ok) << v.message;
}

TEST_P(StoreTest, DeletedDatasetTakesItsArtifactsDecisionsWithIt) {
  Grant(acme_, census_, 1'000'000);
  DatasetRecord other = MakeDataset("other");
  Grant(acme_, other, 1'000'000);
  bool called = false;
  ASSERT_OK(
      store_->Charge(Request(acme_, census_, "k1", 100'000), ++now_,
                     Body(&called, ArtifactRecord{"art_c", acme_.id, census_.id, 0, 1, "c"})));
  ASSERT_OK(store_->Charge(Request(acme_, other, "k2", 100'000), ++now_,
                           Body(&called, ArtifactRecord{"art_o", acme_.id, other.id, 0, 1, "o"})));
  ASSERT_OK(store_->RecordDecisionBatch("art_c", 1, "census decisions",
                                        AccessLogRow{0, now_, "acme", "census", "art_c", 2, 2}));
  ASSERT_OK(store_->RecordDecisionBatch("art_o", 1, "other decisions",
                                        AccessLogRow{0, now_, "acme", "other", "art_o", 1, 1}));
  // A row stored by key before schema version 7, for each artifact; since, none can be added.
  EXPECT_THAT(Raw("INSERT INTO decisions(artifact_id, subject_key, input, output) VALUES "
                  "('art_c', 's2', 1, 0)"),
              HasSubstr("stored as batches since schema version 7"));
  ASSERT_EQ(Raw(LiftDecisionsGuard() +
                "INSERT INTO decisions(artifact_id, subject_key, input, output) VALUES "
                "('art_c', 's1', 1, 0), ('art_o', 's1', 1, 1)"),
            "");

  ASSERT_OK(store_->DeleteDataset(census_.id));

  EXPECT_THAT(DecisionBatches("art_c"), ::testing::IsEmpty());
  EXPECT_THAT(DecisionBatches("art_o"),
              ::testing::ElementsAre(std::make_pair(int64_t{1}, std::string("other decisions"))));
  EXPECT_THAT(KeyedDecisions("art_c"), ::testing::IsEmpty());
  EXPECT_THAT(KeyedDecisions("art_o"), ::testing::ElementsAre("s1 1 1"));
  // The tables hold nothing else.
  EXPECT_EQ(Scalar("SELECT COUNT(*) FROM decision_batches"), 1);
  EXPECT_EQ(Scalar("SELECT COUNT(*) FROM decisions"), 1);
}

// What a caller read before the regulator deleted its dataset (the dataset for an upload or a
// grant, the artifact for a Decide) no longer lets it store anything under that dataset: no
// table, grant, cap or decision outlives the deletion, and no ledger or access-log row names it
// afterwards.
TEST_P(StoreTest, ADeletedDatasetTakesNoLaterTableGrantCapOrDecision) {
  Grant(acme_, census_, 1'000'000);
  bool called = false;
  ASSERT_OK(
      store_->Charge(Request(acme_, census_, "k1", 100'000), ++now_,
                     Body(&called, ArtifactRecord{"art_c", acme_.id, census_.id, 0, 1, "c"})));
  ASSERT_OK(store_->DeleteDataset(census_.id));
  const size_t ledger_rows = Ledger().size();

  EXPECT_THAT(store_->PutTable(TableRecord{"t_late", acme_.id, census_.id, 1, now_ + 1, "t"}),
              StatusIs(absl::StatusCode::kNotFound, "dataset that was deleted"));
  EXPECT_THAT(store_->SetGrant(GrantRecord{globex_.id, census_.id, 1'000'000, 0}, globex_.name,
                               census_.name, "regulator", ++now_),
              StatusIs(absl::StatusCode::kNotFound, "dataset that was deleted"));
  EXPECT_THAT(store_->SetCap(census_.id, census_.name, 5'000'000, 0, "regulator", ++now_),
              StatusIs(absl::StatusCode::kNotFound, "dataset that was deleted"));
  const AccessLogRow log{0, now_, "acme", "census", "art_c", 2, 2};
  EXPECT_THAT(store_->RecordDecisionBatch("art_c", 1, "late decisions", log),
              StatusIs(absl::StatusCode::kNotFound, "artifact 'art_c'"));
  EXPECT_THAT(store_->RecordDecisionBatch("art_c", 1, "", log),
              StatusIs(absl::StatusCode::kNotFound, "artifact 'art_c'"));

  EXPECT_EQ(Scalar("SELECT COUNT(*) FROM company_tables"), 0);
  EXPECT_EQ(Scalar("SELECT COUNT(*) FROM grants"), 0);
  EXPECT_EQ(Scalar("SELECT COUNT(*) FROM decision_batches"), 0);
  EXPECT_EQ(Scalar("SELECT COUNT(*) FROM access_log"), 0);
  EXPECT_EQ(Ledger().size(), ledger_rows);
  EXPECT_TRUE(Verify().ok);
}

// A decision batch and its access-log row are one transaction: a batch the store refuses (its
// number taken: another process decided first) leaves no log row and is Aborted, so that the
// caller rereads; a call that decided nobody new logs its row alone.
TEST_P(StoreTest, DecisionBatchesAndTheirAccessLogRowCommitTogether) {
  ASSERT_NO_FATAL_FAILURE(MakeArtifact("art", acme_, census_));
  ASSERT_NO_FATAL_FAILURE(MakeArtifact("art_g", globex_, census_));
  auto seq = store_->RecordDecisionBatch("art", 1, "first",
                                         AccessLogRow{0, 5, "acme", "census", "art", 3, 2});
  ASSERT_OK(seq);
  EXPECT_THAT(store_->RecordDecisionBatch("art", 1, "rival",
                                          AccessLogRow{0, 6, "acme", "census", "art", 2, 2}),
              StatusIs(absl::StatusCode::kAborted, "retry"));
  auto none_new = store_->RecordDecisionBatch("art", 2, "",
                                              AccessLogRow{0, 7, "acme", "census", "art", 3, 0});
  ASSERT_OK(none_new);
  ASSERT_OK(store_->RecordDecisionBatch("art", 2, "second",
                                        AccessLogRow{0, 8, "acme", "census", "art", 1, 1}));
  // Another company's row, and the log filtered by company.
  auto globex_seq = store_->RecordDecisionBatch(
      "art_g", 1, "g", AccessLogRow{0, 9, "globex", "census", "art_g", 1, 1});
  ASSERT_OK(globex_seq);
  LedgerFilter of_globex;
  of_globex.account = "globex";
  auto globex_log = store_->ListAccessLog(of_globex);
  ASSERT_OK(globex_log);
  ASSERT_EQ(globex_log->size(), 1u);
  EXPECT_EQ((*globex_log)[0].seq, *globex_seq);
  LedgerFilter of_acme{"acme", std::nullopt, *seq, 1};
  auto acme_after_first = store_->ListAccessLog(of_acme);
  ASSERT_OK(acme_after_first);
  ASSERT_EQ(acme_after_first->size(), 1u);
  EXPECT_EQ((*acme_after_first)[0].seq, *none_new);
  auto log = store_->ListAccessLog(LedgerFilter{});
  ASSERT_OK(log);
  ASSERT_EQ(log->size(), 4u);
  EXPECT_EQ((*log)[0].seq, *seq);
  EXPECT_EQ((*log)[0].rows, 3);
  EXPECT_EQ((*log)[0].new_decisions, 2);
  EXPECT_EQ((*log)[1].seq, *none_new);
  EXPECT_EQ((*log)[1].new_decisions, 0);
  EXPECT_THAT(DecisionBatches("art"),
              ::testing::ElementsAre(std::make_pair(int64_t{1}, std::string("first")),
                                     std::make_pair(int64_t{2}, std::string("second"))));
  // Read from a batch on: only the later ones.
  std::vector<int64_t> after_first;
  ASSERT_OK(store_->ForEachDecisionBatch("art", 1, [&](int64_t batch, const std::string&) {
    after_first.push_back(batch);
    return absl::OkStatus();
  }));
  EXPECT_THAT(after_first, ::testing::ElementsAre(2));
}

// SQLite's migrations from versions that shipped before PostgreSQL existed.

TEST_P(StoreTest, SubjectBatchesAccumulateInOrder) {
  ASSERT_OK(store_->PutSubjectBatch(census_.id, "b1", "d1", 0, 2, "one"));
  // An importer whose index predates b1 (another process imported it meanwhile) is refused,
  // and stores nothing: its keys were not checked against b1's.
  EXPECT_THAT(store_->PutSubjectBatch(census_.id, "b2", "d2", 0, 5, "two"),
              StatusIs(absl::StatusCode::kAborted, "another vault process"));
  EXPECT_THAT(store_->GetBatchDigest(census_.id, "b2"), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_EQ(store_->GetDatasetById(census_.id)->subject_count, 2);
  ASSERT_OK(store_->PutSubjectBatch(census_.id, "b2", "d2", 2, 5, "two"));
  EXPECT_THAT(store_->PutSubjectBatch(census_.id, "b1", "d1", 7, 2, "one"),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  auto d = store_->GetDataset("census");
  ASSERT_OK(d);
  EXPECT_EQ(d->subject_count, 7);
  std::vector<std::string> payloads;
  ASSERT_OK(store_->ForEachSubjectBatch(census_.id, [&](const std::string& p) {
    payloads.push_back(p);
    return absl::OkStatus();
  }));
  EXPECT_THAT(payloads, ::testing::ElementsAre("one", "two"));
  EXPECT_THAT(store_->GetBatchDigest(census_.id, "b3"), StatusIs(absl::StatusCode::kNotFound));
}

TEST_P(StoreTest, DuplicateNamesAreAlreadyExists) {
  AccountRecord a;
  a.name = "acme";
  EXPECT_THAT(store_->CreateAccount(a), StatusIs(absl::StatusCode::kAlreadyExists, "acme"));
  DatasetRecord d;
  d.name = "census";
  EXPECT_THAT(store_->CreateDataset(d), StatusIs(absl::StatusCode::kAlreadyExists, "census"));
}

// ---- tables ------------------------------------------------------------------------------------

TEST_P(StoreTest, PurgeExpiredTablesRemovesOnlyExpiredOnes) {
  ASSERT_OK(store_->PutTable(TableRecord{"t100", acme_.id, census_.id, 1, 100, "a"}));
  ASSERT_OK(store_->PutTable(TableRecord{"t200", acme_.id, census_.id, 1, 200, "b"}));
  ASSERT_OK(store_->PutTable(TableRecord{"t300", globex_.id, census_.id, 1, 300, "c"}));

  auto purged = store_->PurgeExpiredTables(200);  // t200 expires at 200: still valid
  ASSERT_OK(purged);
  EXPECT_EQ(*purged, 1);
  EXPECT_THAT(store_->GetTable("t100"), StatusIs(absl::StatusCode::kNotFound, "t100"));
  EXPECT_OK(store_->GetTable("t200"));
  EXPECT_OK(store_->GetTable("t300"));

  purged = store_->PurgeExpiredTables(250);
  ASSERT_OK(purged);
  EXPECT_EQ(*purged, 1);
  EXPECT_THAT(store_->GetTable("t200"), StatusIs(absl::StatusCode::kNotFound));
  auto kept = store_->GetTable("t300");
  ASSERT_OK(kept);
  EXPECT_EQ(kept->account_id, globex_.id);
  EXPECT_EQ(kept->payload, "c");

  purged = store_->PurgeExpiredTables(250);
  ASSERT_OK(purged);
  EXPECT_EQ(*purged, 0);
}

TEST_P(StoreTest, SchemaVersionIsRecordedAndReopeningKeepsIt) {
  const std::string query =
      GetParam() == Backend::kSqlite ? "PRAGMA user_version" : "SELECT version FROM schema_version";
  EXPECT_EQ(Scalar(query), 11);
  ASSERT_NO_FATAL_FAILURE(Reopen());
  EXPECT_EQ(Scalar(query), 11);
  if (GetParam() == Backend::kPostgres) {
    EXPECT_EQ(Scalar("SELECT COUNT(*) FROM schema_version"), 1);
  }
}

// What replicas do: several store instances (each its own connections, as separate processes
// have) charge one grant and one dataset cap at once. Exactly the admissible number of
// releases succeed, every seq is used once, and the ledger verifies.
TEST_P(StoreTest, ChargesFromSeveralStoresOnOneDatabaseNeverOverspend) {
  Grant(acme_, census_, 3'000'000);  // 30 releases of 0.1 by the grant...
  Grant(globex_, census_, 3'000'000);
  // ...45 by the cap:
  ASSERT_OK(store_->SetCap(census_.id, census_.name, 4'500'000, 0, "regulator", ++now_));
  std::vector<std::unique_ptr<Store>> stores;
  for (int i = 0; i < 2; ++i) {
    auto another = OpenAnother();
    ASSERT_OK(another);
    stores.push_back(*std::move(another));
  }
  constexpr int kThreads = 16, kAttempts = 8;  // 128 attempts
  std::atomic<int> admitted{0}, refused{0}, other{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Store* store = stores[t % 2].get();
      const AccountRecord& who = t % 4 < 2 ? acme_ : globex_;
      for (int i = 0; i < kAttempts; ++i) {
        bool called = false;
        auto outcome = store->Charge(Request(who, census_, absl::StrCat("t", t, "-", i), 100'000),
                                     now_ + 1 + t * kAttempts + i, Body(&called));
        if (outcome.ok()) {
          ++admitted;
        } else if (absl::IsResourceExhausted(outcome.status())) {
          EXPECT_FALSE(called);  // refused before the body ran
          ++refused;
        } else {
          ADD_FAILURE() << outcome.status();
          ++other;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(admitted.load(), 45);
  EXPECT_EQ(refused.load(), kThreads * kAttempts - 45);
  EXPECT_EQ(other.load(), 0);
  const std::vector<LedgerRow> rows = Ledger();
  int charges = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].seq, static_cast<int64_t>(i + 1));
    charges += rows[i].kind == "charge";
  }
  EXPECT_EQ(charges, 45);
  EXPECT_LE(SpentMicro(acme_, census_), 3'000'000);
  EXPECT_LE(SpentMicro(globex_, census_), 3'000'000);
  EXPECT_EQ(SpentMicro(acme_, census_) + SpentMicro(globex_, census_), 4'500'000);
  const LedgerVerification v = Verify();
  EXPECT_TRUE(v.ok) << v.message;
  EXPECT_EQ(v.rows_checked, static_cast<int64_t>(rows.size()));
}

// Group commit on a real database: charges that queue behind a slow one share a transaction;
// inside it, one whose artifact cannot be stored (its id is taken) is rolled back alone and not
// charged, while the others of the batch are committed, charged once each, and chained.
TEST_P(StoreTest, ChargesQueuedTogetherCommitTogetherAndAFailingOneIsRolledBackAlone) {
  Grant(acme_, census_, 10'000'000);
  std::mutex commits_mu;
  std::vector<int64_t> commits;
  store_->SetChargeCommitObserver([&](int64_t n) {
    std::lock_guard<std::mutex> lock(commits_mu);
    commits.push_back(n);
  });
  auto body_with_artifact = [&](const std::string& artifact_id, absl::Duration pause) {
    return [=](int64_t seq, const BudgetState&) -> absl::StatusOr<ChargeResult> {
      absl::SleepFor(pause);
      return ChargeResult{absl::StrCat("payload-", seq),
                          ArtifactRecord{artifact_id, acme_.id, census_.id, 0, 7, "model"},
                          std::nullopt};
    };
  };
  constexpr int kThreads = 8;
  std::vector<absl::StatusOr<ChargeOutcome>> outcomes(kThreads);
  std::vector<std::thread> threads;
  // The first charge's body takes 300 ms, long enough for the others to queue behind it.
  threads.emplace_back([&] {
    outcomes[0] = store_->Charge(Request(acme_, census_, "slow", 100'000), now_ + 1,
                                 body_with_artifact("art_slow", absl::Milliseconds(300)));
  });
  absl::SleepFor(absl::Milliseconds(50));
  for (int t = 1; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Threads 1 and 2 store the same artifact id: whichever runs second fails.
      const std::string id = t <= 2 ? "art_dup" : absl::StrCat("art_", t);
      outcomes[t] = store_->Charge(Request(acme_, census_, absl::StrCat("k", t), 100'000),
                                   now_ + 1 + t, body_with_artifact(id, absl::ZeroDuration()));
    });
  }
  for (std::thread& t : threads) t.join();
  int released = 0, taken = 0;
  for (const auto& o : outcomes) {
    if (o.ok()) {
      ++released;
    } else {
      EXPECT_EQ(o.status().code(), absl::StatusCode::kAlreadyExists) << o.status();
      ++taken;
    }
  }
  EXPECT_EQ(released, kThreads - 1);
  EXPECT_EQ(taken, 1);
  EXPECT_EQ(SpentMicro(acme_, census_), (kThreads - 1) * 100'000);
  int charges = 0;
  for (const LedgerRow& row : Ledger()) charges += row.kind == "charge";
  EXPECT_EQ(charges, kThreads - 1);
  const LedgerVerification v = Verify();
  EXPECT_TRUE(v.ok) << v.message;
  // The seven queued behind the slow charge were committed in fewer transactions than charges.
  std::lock_guard<std::mutex> lock(commits_mu);
  int64_t total = 0;
  for (int64_t n : commits) total += n;
  EXPECT_EQ(total, kThreads);
  EXPECT_LT(commits.size(), static_cast<size_t>(kThreads)) << "no two charges shared a commit";
}

// The reads a request makes before it charges (its account, a stored response, a budget, a
// table's record) run beside a batch of charges instead of waiting for its commit, and see only
// what is committed: while a charge's body runs inside its transaction, its response is not
// there to replay and its spend is not counted; after the commit, both are.
TEST_P(StoreTest, ReadsDoNotWaitForABatchAndSeeOnlyWhatIsCommitted) {
  Grant(acme_, census_, 10'000'000);
  absl::Notification inside, finish;
  std::thread charging([&] {
    auto outcome = store_->Charge(
        Request(acme_, census_, "held", 250'000), now_ + 1,
        [&](int64_t seq, const BudgetState&) -> absl::StatusOr<ChargeResult> {
          inside.Notify();
          finish.WaitForNotification();
          return ChargeResult{absl::StrCat("payload-", seq), std::nullopt, std::nullopt};
        });
    EXPECT_OK(outcome);
  });
  inside.WaitForNotification();
  // On another thread, with a deadline: a read that waited for the batch would never return.
  absl::Notification read_done;
  absl::Status read_result = absl::InternalError("not run");
  std::thread reading([&] {
    read_result = [&]() -> absl::Status {
      ASSIGN_OR_RETURN(AccountRecord account, store_->GetAccountById(acme_.id));
      if (account.name != acme_.name) return absl::InternalError("another account");
      auto stored = store_->GetStoredResponse(acme_.id, "held");
      if (!absl::IsNotFound(stored.status())) {
        return absl::InternalError("the uncommitted response was visible");
      }
      ASSIGN_OR_RETURN(BudgetState budget, store_->GetBudget(acme_.id, census_.id));
      if (budget.spent_micro != 0) return absl::InternalError("the uncommitted spend was counted");
      ASSIGN_OR_RETURN(DatasetRecord dataset, store_->GetDatasetById(census_.id));
      if (dataset.name != census_.name) return absl::InternalError("another dataset");
      // The ledger and access-log listings (an auditor's, a company's) likewise.
      LedgerFilter of_acme;
      of_acme.account = acme_.name;
      ASSIGN_OR_RETURN(std::vector<LedgerRow> rows, store_->ListLedger(of_acme));
      if (rows.size() != 1 || rows[0].kind != "grant") {
        return absl::InternalError("the uncommitted ledger row was listed");
      }
      RETURN_IF_ERROR(store_->ListAccessLog(LedgerFilter{}).status());
      RETURN_IF_ERROR(store_->ListJobs(JobFilter{}).status());
      // The ledger's verification reads one snapshot: the grant, not the held charge.
      ASSIGN_OR_RETURN(LedgerVerification verified, store_->VerifyLedger());
      if (!verified.ok || verified.rows_checked != 1) {
        return absl::InternalError(absl::StrCat("verification: ", verified.message, ", ",
                                                verified.rows_checked, " rows"));
      }
      return absl::OkStatus();
    }();
    read_done.Notify();
  });
  const bool returned = read_done.WaitForNotificationWithTimeout(absl::Seconds(20));
  finish.Notify();
  reading.join();
  charging.join();
  EXPECT_TRUE(returned) << "the reads waited for the batch's commit";
  EXPECT_OK(read_result);
  auto stored = store_->GetStoredResponse(acme_.id, "held");
  ASSERT_OK(stored);
  EXPECT_EQ(SpentMicro(acme_, census_), 250'000);
  LedgerFilter of_acme;
  of_acme.account = acme_.name;
  auto rows = store_->ListLedger(of_acme);
  ASSERT_OK(rows);
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[1].idempotency_key, "held");
}

// The upgrade path from one machine to replicas: a SQLite vault copied into PostgreSQL.

INSTANTIATE_TEST_SUITE_P(Backends, StoreTest,
                         ::testing::Values(Backend::kSqlite, Backend::kPostgres), BackendName);

INSTANTIATE_TEST_SUITE_P(Backends, StoreJobTest,
                         ::testing::Values(Backend::kSqlite, Backend::kPostgres), BackendName);

}  // namespace
}  // namespace fairvault::server::storage::store_testing
