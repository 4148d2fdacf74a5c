// Migrations: SQLite databases of earlier schema versions opened by this build, and a SQLite
// vault moved to PostgreSQL whole and verified (fixtures in store_test_fixture.h).
#include "absl/strings/str_cat.h"
#include "server/storage/store_test_fixture.h"
#include "core/transparency/merkle.h"
#include "core/util/status_macros.h"

namespace fairvault::server::storage::store_testing {
namespace {

class SqliteMigrationTest : public StoreTest {};

TEST_P(SqliteMigrationTest, DatabaseFromBeforeStoredFailuresIsMigratedOnOpen) {
  Grant(acme_, census_, 1'000'000);
  ASSERT_OK(Charge(Request(acme_, census_, "k1", 100'000)));
  const std::string payload = store_->GetStoredResponse(acme_.id, "k1")->payload;
  store_.reset();
  // The responses table as the first release shipped it, holding the stored response.
  ASSERT_EQ(Raw("CREATE TABLE old_responses("
                "  account_id INTEGER NOT NULL, idempotency_key TEXT NOT NULL,"
                "  request_kind TEXT NOT NULL, params_digest TEXT NOT NULL,"
                "  ledger_seq INTEGER NOT NULL, payload BLOB NOT NULL,"
                "  PRIMARY KEY(account_id, idempotency_key));"
                "INSERT INTO old_responses SELECT account_id, idempotency_key, request_kind,"
                "  params_digest, ledger_seq, payload FROM responses;"
                "DROP TABLE responses; ALTER TABLE old_responses RENAME TO responses;"
                "PRAGMA user_version=0"),
            "");

  ASSERT_NO_FATAL_FAILURE(Reopen());
  // The old response still replays, and new charges (which store failures) work.
  auto replay = Charge(Request(acme_, census_, "k1", 100'000));
  ASSERT_OK(replay);
  EXPECT_TRUE(replay->replayed);
  EXPECT_EQ(replay->response_payload, payload);
  ASSERT_OK(Charge(Request(acme_, census_, "k2", 100'000)));
  EXPECT_EQ(SpentMicro(acme_, census_), 200'000);
  EXPECT_EQ(Scalar("PRAGMA user_version"), 11);
  // Opening again is a no-op.
  ASSERT_NO_FATAL_FAILURE(Reopen());
  EXPECT_EQ(SpentMicro(acme_, census_), 200'000);
}

TEST_P(SqliteMigrationTest, AccessLogFromVersion1IsMigratedOnOpen) {
  store_.reset();
  // The access log as schema version 1 had it, with one logged call.
  ASSERT_EQ(Raw("DROP TABLE access_log;"
                "CREATE TABLE access_log(seq INTEGER PRIMARY KEY AUTOINCREMENT,"
                "  time_micros INTEGER NOT NULL, account TEXT NOT NULL, dataset TEXT NOT NULL,"
                "  artifact_id TEXT NOT NULL, rows INTEGER NOT NULL);"
                "INSERT INTO access_log(time_micros, account, dataset, artifact_id, rows)"
                "  VALUES(7, 'acme', 'census', 'art', 40);"
                "PRAGMA user_version=1"),
            "");
  ASSERT_NO_FATAL_FAILURE(Reopen());
  ASSERT_NO_FATAL_FAILURE(MakeArtifact("art", acme_, census_));
  ASSERT_OK(store_->RecordDecisionBatch("art", 1, "decided",
                                        AccessLogRow{0, 8, "acme", "census", "art", 1, 1}));
  auto log = store_->ListAccessLog(LedgerFilter{});
  ASSERT_OK(log);
  ASSERT_EQ(log->size(), 2u);
  EXPECT_EQ((*log)[0].rows, 40);
  EXPECT_EQ((*log)[0].new_decisions, -1);  // not recorded then
  EXPECT_EQ((*log)[1].new_decisions, 1);
  EXPECT_EQ(Scalar("PRAGMA user_version"), 11);
}

TEST_P(SqliteMigrationTest, LedgerFromVersion5KeepsVerifyingAndNewGrantsNameTheirActor) {
  // Rows as version 5 wrote them: no actor column, hashes that never covered one.
  ASSERT_OK(store_->SetGrant(GrantRecord{acme_.id, census_.id, 2'000'000, 0}, acme_.name,
                             census_.name, "", ++now_));
  ASSERT_OK(Charge(Request(acme_, census_, "k1", 100'000)));
  ASSERT_OK(store_->SetCap(census_.id, census_.name, 5'000'000, 0, "", ++now_));
  const std::string head = Verify().head_hash;
  store_.reset();
  ASSERT_EQ(Raw("ALTER TABLE ledger DROP COLUMN actor; PRAGMA user_version=5"), "");

  ASSERT_NO_FATAL_FAILURE(Reopen());
  EXPECT_EQ(Scalar("PRAGMA user_version"), 11);
  LedgerVerification v = Verify();
  EXPECT_TRUE(v.ok) << v.message;
  EXPECT_EQ(v.head_hash, head);
  ASSERT_OK(store_->SetGrant(GrantRecord{acme_.id, census_.id, 3'000'000, 0}, acme_.name,
                             census_.name, "regulator", ++now_));
  const std::vector<LedgerRow> rows = Ledger();
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0].actor, "");  // not recorded then
  EXPECT_EQ(rows[2].actor, "");
  EXPECT_EQ(rows[3].actor, "regulator");
  v = Verify();
  EXPECT_TRUE(v.ok) << v.message;
  EXPECT_EQ(v.rows_checked, 4);
}

TEST_P(SqliteMigrationTest, AVersion7LedgerJoinsTheMerkleTreeInOrder) {
  ASSERT_OK(store_->SetGrant(GrantRecord{acme_.id, census_.id, 2'000'000, 0}, acme_.name,
                             census_.name, "regulator", ++now_));
  for (int i = 0; i < 4; ++i) ASSERT_OK(Charge(Request(acme_, census_, absl::StrCat("k", i), 1000)));
  core::transparency::Hash root;
  ASSERT_OK(store_->ReadTree([&](int64_t size, core::transparency::NodeReader read) {
    EXPECT_EQ(size, 5);
    ASSIGN_OR_RETURN(root, core::transparency::RootHash(size, read));
    return absl::OkStatus();
  }));
  store_.reset();
  // As version 7 left it: no tree at all.
  ASSERT_EQ(Raw("DROP TABLE merkle_nodes; DROP TABLE checkpoints; PRAGMA user_version=7"), "");
  ASSERT_NO_FATAL_FAILURE(Reopen());
  EXPECT_EQ(Scalar("PRAGMA user_version"), 11);
  ASSERT_OK(Charge(Request(acme_, census_, "after", 1000)));
  ASSERT_OK(store_->ReadTree([&](int64_t size, core::transparency::NodeReader read) {
    EXPECT_EQ(size, 6);
    ASSIGN_OR_RETURN(core::transparency::Hash old_root, core::transparency::RootHash(5, read));
    EXPECT_EQ(old_root, root);  // the same tree as if it had been built row by row
    ASSIGN_OR_RETURN(core::transparency::Hash new_root, core::transparency::RootHash(6, read));
    ASSIGN_OR_RETURN(auto proof, core::transparency::ConsistencyProof(5, 6, read));
    EXPECT_TRUE(core::transparency::VerifyConsistency(5, 6, proof, root, new_root).ok());
    return absl::OkStatus();
  }));
}

TEST_P(SqliteMigrationTest, ADatabaseOfANewerSchemaIsRefused) {
  store_.reset();
  ASSERT_EQ(Raw("PRAGMA user_version=99"), "");
  EXPECT_THAT(SqliteStore::Open(path_),
              StatusIs(absl::StatusCode::kFailedPrecondition, "schema version 99"));
}

class SqliteJobMigrationTest : public StoreJobTest {};

TEST_P(SqliteJobMigrationTest, DatabaseFromVersion2GainsTheJobsTableOnOpen) {
  store_.reset();
  ASSERT_EQ(Raw("DROP TABLE jobs; PRAGMA user_version=2"), "");
  ASSERT_NO_FATAL_FAILURE(Reopen());
  EXPECT_EQ(Scalar("PRAGMA user_version"), 11);
  ASSERT_GT(Submit(NewJob("job_a", acme_, census_)), 0);
  EXPECT_EQ(Job("job_a").state, JobState::kQueued);
}

TEST_P(SqliteJobMigrationTest, DatabaseFromVersion3GainsJobLeasesOnOpen) {
  ASSERT_GT(Submit(NewJob("job_a", acme_, census_)), 0);
  store_.reset();
  ASSERT_EQ(Raw("ALTER TABLE jobs DROP COLUMN lease_owner; "
                "ALTER TABLE jobs DROP COLUMN lease_expires_micros; PRAGMA user_version=3"),
            "");
  ASSERT_NO_FATAL_FAILURE(Reopen());
  EXPECT_EQ(Scalar("PRAGMA user_version"), 11);
  auto started = store_->StartJob("job_a", Lease(5'000));
  ASSERT_OK(started);
  EXPECT_EQ(started->lease_owner, kOwner);
  EXPECT_EQ(started->lease_expires_micros, 1'005'000);
}

class MigrateTest : public StoreJobTest {};

TEST_P(MigrateTest, ASqliteVaultMovesToPostgresWholeAndVerified) {
  // A vault with every kind of row: grants, a cap, charges with an artifact, a stored failure,
  // a job, subjects, a table, decisions and their access-log row, a deleted dataset.
  ASSERT_NO_FATAL_FAILURE(BuildLedger());
  ArtifactRecord artifact{"art_1", acme_.id, census_.id, 0, 7, std::string("model\0bytes", 11)};
  bool called = false;
  ASSERT_OK(
      store_->Charge(Request(acme_, census_, "k-art", 100'000), ++now_, Body(&called, artifact)));
  ASSERT_THAT(store_->Charge(Request(acme_, census_, "k-fail", 100'000), ++now_,
                             [](int64_t, const BudgetState&) -> absl::StatusOr<ChargeResult> {
                               return absl::InternalError("solver failed");
                             }),
              StatusIs(absl::StatusCode::kInternal));
  ASSERT_GT(Submit(NewJob("job_a", acme_, census_)), 0);
  ASSERT_OK(store_->PutSubjectBatch(census_.id, "b1", "d1", 0, 3, std::string("sub\0jects", 9)));
  ASSERT_OK(store_->PutTable(TableRecord{"tbl_1", acme_.id, census_.id, 3, now_ + 1, "cols"}));
  ASSERT_OK(store_->RecordDecisionBatch("art_1", 1, std::string("packed\0decisions", 16),
                                        AccessLogRow{0, now_, "acme", "census", "art_1", 2, 2}));
  // And decisions stored by key, as before schema version 7.
  ASSERT_EQ(Raw(LiftDecisionsGuard() +
                "INSERT INTO decisions(artifact_id, subject_key, input, output) VALUES "
                "('art_1', 's0', 1, 0.25), ('art_1', 's9', 0, 1)"),
            "");
  DatasetRecord gone = MakeDataset("gone");
  ASSERT_OK(store_->DeleteDataset(gone.id));
  const std::string sqlite_path = path_;
  auto sqlite_head = store_->VerifyLedger();
  ASSERT_OK(sqlite_head);
  const std::string replay_bytes = store_->GetStoredResponse(acme_.id, "k-art")->payload;
  store_.reset();

  TestPostgres* pg = SharedPostgres();
  ASSERT_NE(pg, nullptr);
  auto uri = pg->CreateDatabase("migrated");
  ASSERT_OK(uri);
  auto target = PgStore::Open(*uri);
  ASSERT_OK(target);
  auto report = (*target)->ImportSqlite(sqlite_path);
  ASSERT_OK(report);
  EXPECT_TRUE(report->copy.ok);
  EXPECT_EQ(report->copy.head_hash, sqlite_head->head_hash);
  EXPECT_EQ(report->rows.at("ledger"), sqlite_head->rows_checked);
  EXPECT_EQ(report->rows.at("decisions"), 2);
  EXPECT_EQ(report->rows.at("decision_batches"), 1);
  EXPECT_EQ(report->rows.at("jobs"), 1);

  // Everything reads back as it was, replays return the stored bytes and failures, budgets
  // are unchanged, and new charges chain onto the copied head.
  store_ = *std::move(target);
  EXPECT_EQ(SpentMicro(acme_, census_), 1'050'000);  // 0.25 + 0.5 + 3 x 0.1
  auto replay = Charge(Request(acme_, census_, "k-art", 100'000));
  ASSERT_OK(replay);
  EXPECT_TRUE(replay->replayed);
  EXPECT_EQ(replay->response_payload, replay_bytes);
  EXPECT_THAT(Charge(Request(acme_, census_, "k-fail", 100'000)),
              StatusIs(absl::StatusCode::kInternal, "solver failed"));
  EXPECT_EQ(store_->GetArtifact("art_1")->payload, artifact.payload);
  EXPECT_EQ(Job("job_a").state, JobState::kQueued);
  EXPECT_EQ(store_->GetTable("tbl_1")->payload, "cols");
  std::vector<std::string> batches;
  ASSERT_OK(store_->ForEachSubjectBatch(census_.id, [&](const std::string& b) {
    batches.push_back(b);
    return absl::OkStatus();
  }));
  EXPECT_THAT(batches, ::testing::ElementsAre(std::string("sub\0jects", 9)));
  EXPECT_THAT(DecisionBatches("art_1"),
              ::testing::ElementsAre(
                  std::make_pair(int64_t{1}, std::string("packed\0decisions", 16))));
  EXPECT_THAT(KeyedDecisions("art_1"), ::testing::UnorderedElementsAre("s0 1 0.25", "s9 0 1"));
  ASSERT_OK(Charge(Request(acme_, census_, "k-new", 100'000)));
  EXPECT_TRUE(Verify().ok);
  // Ids are never reused: the deleted dataset's id stays taken.
  EXPECT_GT(MakeDataset("fresh").id, gone.id);
  // The copy is refused into a database that holds a vault.
  EXPECT_THAT(static_cast<PgStore*>(store_.get())->ImportSqlite(sqlite_path),
              StatusIs(absl::StatusCode::kFailedPrecondition, "already holds a vault"));
}

TEST_P(MigrateTest, ALedgerThatDoesNotVerifyIsNotCopied) {
  ASSERT_NO_FATAL_FAILURE(BuildLedger());
  store_.reset();
  ASSERT_EQ(Raw("UPDATE spend SET pure_micro = 0;"), "");
  TestPostgres* pg = SharedPostgres();
  ASSERT_NE(pg, nullptr);
  auto uri = pg->CreateDatabase("refused");
  ASSERT_OK(uri);
  auto target = PgStore::Open(*uri);
  ASSERT_OK(target);
  EXPECT_THAT((*target)->ImportSqlite(path_),
              StatusIs(absl::StatusCode::kFailedPrecondition, "does not verify"));
  EXPECT_EQ(pg->Scalar("refused", "SELECT COUNT(*) FROM ledger"), 0);
  EXPECT_EQ(pg->Scalar("refused", "SELECT COUNT(*) FROM accounts"), 0);
}

INSTANTIATE_TEST_SUITE_P(Sqlite, SqliteMigrationTest, ::testing::Values(Backend::kSqlite),
                         BackendName);
INSTANTIATE_TEST_SUITE_P(Sqlite, MigrateTest, ::testing::Values(Backend::kSqlite), BackendName);
INSTANTIATE_TEST_SUITE_P(Sqlite, SqliteJobMigrationTest, ::testing::Values(Backend::kSqlite),
                         BackendName);

}  // namespace
}  // namespace fairvault::server::storage::store_testing
