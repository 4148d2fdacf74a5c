// The Store's ledger (one suite over both backends; fixtures in store_test_fixture.h): the hash
// chain and its tamper detection, and the atomic charge path (privacy filter, replays, stored
// failures, rollback).
#include "server/storage/store_common.h"
#include "server/storage/store_test_fixture.h"

namespace fairvault::server::storage::store_testing {
namespace {

// ---- ledger hash chain -------------------------------------------------------------------------

TEST_P(StoreTest, LedgerRowsAreContiguousAndHashChained) {
  ASSERT_NO_FATAL_FAILURE(BuildLedger());
  const std::vector<LedgerRow> rows = Ledger();
  ASSERT_EQ(rows.size(), 5u);
  const std::vector<std::string> kinds = {"grant", "cap", "charge", "grant", "charge"};
  const std::vector<int64_t> account_ids = {acme_.id, 0, acme_.id, globex_.id, acme_.id};
  for (size_t i = 0; i < rows.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(rows[i].seq, static_cast<int64_t>(i) + 1);
    EXPECT_EQ(rows[i].kind, kinds[i]);
    EXPECT_EQ(rows[i].prev_hash, i == 0 ? std::string(kGenesisHash) : rows[i - 1].hash);
    EXPECT_EQ(rows[i].hash.size(), 64u);
    EXPECT_EQ(rows[i].hash, LedgerRowHash(rows[i], account_ids[i], census_.id));
  }
  EXPECT_EQ(rows[0].account, "acme");
  EXPECT_DOUBLE_EQ(rows[0].epsilon, 2.0);
  EXPECT_EQ(rows[1].account, "");
  EXPECT_DOUBLE_EQ(rows[1].epsilon, 5.0);
  EXPECT_EQ(rows[2].idempotency_key, "k1");
  EXPECT_EQ(rows[2].request_kind, "NoisyCounts");
  EXPECT_EQ(rows[2].mechanism, "discrete_laplace");
  EXPECT_EQ(rows[2].pure_micro, std::optional<int64_t>(250'000));
  EXPECT_EQ(rows[2].rdp_nano, LaplaceCost(250'000).rdp_nano);
  EXPECT_FALSE(rows[0].pure_micro.has_value());

  const LedgerVerification v = Verify();
  EXPECT_TRUE(v.ok) << v.message;
  EXPECT_EQ(v.rows_checked, 5);
  EXPECT_EQ(v.first_bad_seq, 0);
  EXPECT_EQ(v.head_hash, rows.back().hash);
}

// The canonical encoding is a stored promise: these hashes were computed independently (Python's
// hashlib over the documented encoding). A row without an actor hashes as every row did before
// schema version 6, so old ledgers verify unchanged.
TEST(LedgerRowHashTest, MatchesTheDocumentedEncodingWithAndWithoutAnActor) {
  LedgerRow row;
  row.seq = 7;
  row.time_micros = 1'700'000'000'000'001;
  row.kind = "grant";
  row.account = "acme";
  row.dataset = "census";
  row.epsilon = 2.5;
  row.delta = 1e-6;
  row.prev_hash = kGenesisHash;
  EXPECT_EQ(LedgerRowHash(row, 3, 2),
            "f6ba53044d3d02014385bb57ae116ceb67bc2ab4fac02c959795039b5ed6ed4e");
  row.actor = "regulator";
  EXPECT_EQ(LedgerRowHash(row, 3, 2),
            "4610968902a3a8e8a965079eafff8ce58a56d80f9a0827e7d582fe1d9c896bfc");
}

TEST_P(StoreTest, GrantAndCapRowsNameTheRegulatorUnderTheirHash) {
  ASSERT_NO_FATAL_FAILURE(BuildLedger());
  const std::vector<LedgerRow> rows = Ledger();
  ASSERT_EQ(rows.size(), 5u);
  EXPECT_EQ(rows[0].actor, "regulator");  // grant
  EXPECT_EQ(rows[1].actor, "regulator");  // cap
  EXPECT_EQ(rows[2].actor, "");           // charge
  // Erasing who granted breaks the row's hash, as any other edit does.
  ASSERT_EQ(Raw(LiftLedgerGuard() + "UPDATE ledger SET actor = '' WHERE seq = 1;"), "");
  const LedgerVerification v = Verify();
  EXPECT_FALSE(v.ok);
  EXPECT_EQ(v.first_bad_seq, 1);
}

TEST_P(StoreTest, VerifyOkOnEmptyLedger) {
  const LedgerVerification v = Verify();
  EXPECT_TRUE(v.ok);
  EXPECT_EQ(v.rows_checked, 0);
  EXPECT_EQ(v.head_hash, kGenesisHash);
}

TEST_P(StoreTest, ListLedgerFiltersByAccountDatasetAndSeq) {
  ASSERT_NO_FATAL_FAILURE(BuildLedger());
  LedgerFilter f;
  f.account = "acme";
  auto rows = store_->ListLedger(f);
  ASSERT_OK(rows);
  ASSERT_EQ(rows->size(), 3u);
  for (const auto& r : *rows) EXPECT_EQ(r.account, "acme");
  f.after_seq = 3;
  rows = store_->ListLedger(f);
  ASSERT_OK(rows);
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].seq, 5);
  LedgerFilter other;
  other.dataset = "nope";
  rows = store_->ListLedger(other);
  ASSERT_OK(rows);
  EXPECT_TRUE(rows->empty());
  // Every combination of the filters, each value bound to its own column.
  auto seqs = [&](std::optional<std::string> account, std::optional<std::string> dataset,
                  int64_t after_seq, int limit) {
    LedgerFilter filter{std::move(account), std::move(dataset), after_seq, limit};
    auto listed = store_->ListLedger(filter);
    EXPECT_OK(listed);
    std::vector<int64_t> out;
    for (const LedgerRow& r : listed.ok() ? *listed : std::vector<LedgerRow>()) {
      out.push_back(r.seq);
    }
    return out;
  };
  EXPECT_THAT(seqs("acme", "census", 0, 10), ::testing::ElementsAre(1, 3, 5));
  EXPECT_THAT(seqs("acme", "census", 1, 1), ::testing::ElementsAre(3));
  EXPECT_THAT(seqs("globex", "census", 0, 10), ::testing::ElementsAre(4));
  EXPECT_THAT(seqs("globex", "nope", 0, 10), ::testing::IsEmpty());
  EXPECT_THAT(seqs(std::nullopt, "census", 3, 10), ::testing::ElementsAre(4, 5));
  EXPECT_THAT(seqs(std::nullopt, std::nullopt, 0, 10), ::testing::ElementsAre(1, 2, 3, 4, 5));
  LedgerFilter limited;
  limited.limit = 2;
  rows = store_->ListLedger(limited);
  ASSERT_OK(rows);
  EXPECT_EQ(rows->size(), 2u);
}

TEST_P(StoreTest, VerifyDetectsEditedRow) {
  ASSERT_NO_FATAL_FAILURE(BuildLedger());
  ASSERT_EQ(Raw(LiftLedgerGuard() + "UPDATE ledger SET epsilon = epsilon * 0.5 WHERE seq = 3;"),
            "");
  const LedgerVerification v = Verify();
  EXPECT_FALSE(v.ok);
  EXPECT_EQ(v.first_bad_seq, 3);
  EXPECT_THAT(v.message, HasSubstr("row 3"));
}

TEST_P(StoreTest, VerifyDetectsEditedCostOfCharge) {
  ASSERT_NO_FATAL_FAILURE(BuildLedger());
  // Lowering the recorded cost and the spend together still breaks the row's hash.
  ASSERT_EQ(Raw(LiftLedgerGuard() + "UPDATE ledger SET pure_micro = 1 WHERE seq = 5;"), "");
  const LedgerVerification v = Verify();
  EXPECT_FALSE(v.ok);
  EXPECT_EQ(v.first_bad_seq, 5);
}

TEST_P(StoreTest, VerifyDetectsDeletedMiddleRow) {
  ASSERT_NO_FATAL_FAILURE(BuildLedger());
  ASSERT_EQ(Raw(LiftLedgerGuard() + "DELETE FROM ledger WHERE seq = 2;"), "");
  const LedgerVerification v = Verify();
  EXPECT_FALSE(v.ok);
  EXPECT_EQ(v.first_bad_seq, 2);
}

TEST_P(StoreTest, VerifyDetectsRenumberedRows) {
  ASSERT_NO_FATAL_FAILURE(BuildLedger());
  // Closing the gap after a deletion still leaves a row that does not chain.
  ASSERT_EQ(Raw(LiftLedgerGuard() + "DELETE FROM ledger WHERE seq = 2; "
                                    "UPDATE ledger SET seq = seq - 1 WHERE seq > 2;"),
            "");
  const LedgerVerification v = Verify();
  EXPECT_FALSE(v.ok);
  EXPECT_EQ(v.first_bad_seq, 2);
}

TEST_P(StoreTest, VerifyDetectsEditedSpendTotals) {
  ASSERT_NO_FATAL_FAILURE(BuildLedger());
  ASSERT_EQ(Raw("UPDATE spend SET pure_micro = 0;"), "");
  const LedgerVerification v = Verify();
  EXPECT_FALSE(v.ok);
  EXPECT_THAT(v.message, HasSubstr("spend"));
  // The filter reads the spend table, so the tampering would have reset the budget.
  EXPECT_EQ(SpentMicro(acme_, census_), 0);
}

TEST_P(StoreTest, VerifyDetectsDeletedSpendTotals) {
  ASSERT_NO_FATAL_FAILURE(BuildLedger());
  ASSERT_EQ(Raw("DELETE FROM spend;"), "");
  const LedgerVerification v = Verify();
  EXPECT_FALSE(v.ok) << "a deleted spend row resets a budget; the ledger must notice";
  EXPECT_THAT(v.message, HasSubstr("spend"));
}

TEST_P(StoreTest, VerifyDetectsInflatedReleaseCount) {
  ASSERT_NO_FATAL_FAILURE(BuildLedger());
  ASSERT_EQ(Raw("UPDATE spend SET releases = releases + 1;"), "");
  EXPECT_FALSE(Verify().ok);
}

TEST_P(StoreTest, VerifyDetectsARaisedGrantOrCap) {
  ASSERT_NO_FATAL_FAILURE(BuildLedger());
  ASSERT_EQ(Raw("UPDATE grants SET epsilon_micro = epsilon_micro * 10;"), "");
  LedgerVerification v = Verify();
  EXPECT_FALSE(v.ok) << "a grant raised behind the ledger's back must be noticed";
  EXPECT_THAT(v.message, HasSubstr("grant"));
}

TEST_P(StoreTest, VerifyDetectsAClearedCap) {
  ASSERT_NO_FATAL_FAILURE(BuildLedger());
  ASSERT_EQ(Raw("UPDATE datasets SET cap_micro = NULL;"), "");
  LedgerVerification v = Verify();
  EXPECT_FALSE(v.ok) << "lifting a cap behind the ledger's back must be noticed";
  EXPECT_THAT(v.message, HasSubstr("cap"));
}

TEST_P(StoreTest, TriggersBlockLedgerUpdateAndDelete) {
  ASSERT_NO_FATAL_FAILURE(BuildLedger());
  EXPECT_THAT(Raw("UPDATE ledger SET epsilon = 0 WHERE seq = 3;"), HasSubstr("append-only"));
  EXPECT_THAT(Raw("DELETE FROM ledger WHERE seq = 3;"), HasSubstr("append-only"));
  EXPECT_THAT(Raw("DELETE FROM ledger;"), HasSubstr("append-only"));
  EXPECT_EQ(Ledger().size(), 5u);
  EXPECT_TRUE(Verify().ok);
}

// ---- the charge path ---------------------------------------------------------------------------

TEST_P(StoreTest, ChargeWithinGrantPassesSeqAndBudgetAfterToBody) {
  Grant(acme_, census_, 1'000'000);
  int64_t seen_seq = -1;
  BudgetState seen;
  auto outcome =
      store_->Charge(Request(acme_, census_, "k1", 300'000), ++now_,
                     [&](int64_t seq, const BudgetState& after) -> absl::StatusOr<ChargeResult> {
                       seen_seq = seq;
                       seen = after;
                       return ChargeResult{"hello", std::nullopt, std::nullopt};
                     });
  ASSERT_OK(outcome);
  EXPECT_FALSE(outcome->replayed);
  EXPECT_EQ(outcome->response_payload, "hello");
  EXPECT_EQ(seen_seq, 2);  // after the grant row
  EXPECT_EQ(seen.grant.epsilon_micro, 1'000'000);
  EXPECT_EQ(seen.spend.releases, 1);
  EXPECT_EQ(seen.spend.pure_micro, 300'000);
  EXPECT_EQ(seen.spent_micro, 300'000);

  const auto rows = Ledger();
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1].seq, 2);
  EXPECT_EQ(rows[1].kind, "charge");
  EXPECT_EQ(rows[1].idempotency_key, "k1");
  EXPECT_EQ(SpentMicro(acme_, census_), 300'000);
  auto stored = store_->GetStoredResponse(acme_.id, "k1");
  ASSERT_OK(stored);
  EXPECT_EQ(stored->payload, "hello");
  EXPECT_EQ(stored->ledger_seq, 2);
  EXPECT_EQ(stored->params_digest, "digest");
  EXPECT_EQ(stored->request_kind, "NoisyCounts");
  EXPECT_TRUE(Verify().ok);
}

TEST_P(StoreTest, ChargeOverBudgetIsRefusedBeforeBodyRuns) {
  Grant(acme_, census_, 500'000);
  ASSERT_OK(Charge(Request(acme_, census_, "k1", 300'000)));
  const size_t rows_before = Ledger().size();

  bool called = false;
  auto refused = store_->Charge(Request(acme_, census_, "k2", 300'000), ++now_, Body(&called));
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kResourceExhausted, "left"));
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kResourceExhausted, "0.2"));
  EXPECT_FALSE(called);
  EXPECT_EQ(Ledger().size(), rows_before);
  EXPECT_EQ(SpentMicro(acme_, census_), 300'000);
  EXPECT_THAT(store_->GetStoredResponse(acme_.id, "k2"), StatusIs(absl::StatusCode::kNotFound));

  // What is left can still be spent exactly.
  ASSERT_OK(Charge(Request(acme_, census_, "k3", 200'000)));
  EXPECT_EQ(SpentMicro(acme_, census_), 500'000);
  EXPECT_TRUE(Verify().ok);
}

TEST_P(StoreTest, TenTenthsSpendExactlyOneAndTheEleventhIsRefused) {
  Grant(acme_, census_, 1'000'000, /*delta=*/0);
  for (int i = 0; i < 10; ++i) {
    ASSERT_OK(Charge(Request(acme_, census_, absl::StrCat("k", i), 100'000))) << i;
  }
  EXPECT_EQ(SpentMicro(acme_, census_), 1'000'000);
  bool called = false;
  EXPECT_THAT(store_->Charge(Request(acme_, census_, "k10", 100'000), ++now_, Body(&called)),
              StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_FALSE(called);
  // Even the smallest release no longer fits.
  EXPECT_THAT(Charge(Request(acme_, census_, "k11", 1)),
              StatusIs(absl::StatusCode::kResourceExhausted));
  auto budget = store_->GetBudget(acme_.id, census_.id);
  ASSERT_OK(budget);
  EXPECT_EQ(budget->spend.releases, 10);
  EXPECT_EQ(budget->spend.pure_micro, 1'000'000);
}

TEST_P(StoreTest, DatasetCapLimitsTheSumOverCompanies) {
  Grant(acme_, census_, 1'000'000);
  Grant(globex_, census_, 1'000'000);
  ASSERT_OK(store_->SetCap(census_.id, census_.name, 1'500'000, 0, "regulator", ++now_));
  ASSERT_OK(Charge(Request(acme_, census_, "a1", 1'000'000)));

  // globex's own grant has room for 0.6, the cap does not.
  bool called = false;
  auto refused = store_->Charge(Request(globex_, census_, "g1", 600'000), ++now_, Body(&called));
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kResourceExhausted, "cap"));
  // Neither the cap nor its remainder (acme's spend shows in it) is told to globex.
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kResourceExhausted, "does not admit it"));
  EXPECT_THAT(std::string(refused.status().message()), ::testing::Not(::testing::HasSubstr("0.5")));
  EXPECT_THAT(std::string(refused.status().message()), ::testing::Not(::testing::HasSubstr("1.5")));
  EXPECT_FALSE(called);
  EXPECT_EQ(SpentMicro(globex_, census_), 0);

  ASSERT_OK(Charge(Request(globex_, census_, "g2", 500'000)));
  auto total = store_->GetDatasetSpend(census_.id);
  ASSERT_OK(total);
  EXPECT_EQ(total->pure_micro, 1'500'000);
  EXPECT_EQ(total->releases, 2);
  EXPECT_THAT(Charge(Request(globex_, census_, "g3", 1)),
              StatusIs(absl::StatusCode::kResourceExhausted, "cap"));
}

TEST_P(StoreTest, CapOnOtherDatasetDoesNotLimit) {
  DatasetRecord other = MakeDataset("other");
  Grant(acme_, census_, 1'000'000);
  ASSERT_OK(store_->SetCap(other.id, other.name, 1, 0, "regulator", ++now_));
  EXPECT_OK(Charge(Request(acme_, census_, "k", 1'000'000)));
}

TEST_P(StoreTest, ReplayReturnsStoredPayloadWithoutCharging) {
  Grant(acme_, census_, 1'000'000);
  auto first = Charge(Request(acme_, census_, "k1", 400'000));
  ASSERT_OK(first);
  const size_t rows = Ledger().size();

  bool called = false;
  auto replay = store_->Charge(Request(acme_, census_, "k1", 400'000), ++now_,
                               [&](int64_t, const BudgetState&) -> absl::StatusOr<ChargeResult> {
                                 called = true;
                                 return ChargeResult{"different", std::nullopt, std::nullopt};
                               });
  ASSERT_OK(replay);
  EXPECT_TRUE(replay->replayed);
  EXPECT_EQ(replay->response_payload, first->response_payload);
  EXPECT_FALSE(called);
  EXPECT_EQ(Ledger().size(), rows);
  EXPECT_EQ(SpentMicro(acme_, census_), 400'000);

  // A replay is answered even when the budget could no longer pay for the request.
  ASSERT_OK(Charge(Request(acme_, census_, "k2", 600'000)));
  auto late = Charge(Request(acme_, census_, "k1", 400'000));
  ASSERT_OK(late);
  EXPECT_TRUE(late->replayed);
  EXPECT_EQ(late->response_payload, first->response_payload);
  EXPECT_EQ(SpentMicro(acme_, census_), 1'000'000);
}

TEST_P(StoreTest, IdempotencyKeysArePerAccount) {
  Grant(acme_, census_, 1'000'000);
  Grant(globex_, census_, 1'000'000);
  auto a = Charge(Request(acme_, census_, "same", 100'000, "d1"));
  auto g = Charge(Request(globex_, census_, "same", 100'000, "d2"));
  ASSERT_OK(a);
  ASSERT_OK(g);
  EXPECT_FALSE(g->replayed);
  EXPECT_EQ(SpentMicro(globex_, census_), 100'000);
}

TEST_P(StoreTest, SameKeyWithDifferentDigestIsRefused) {
  Grant(acme_, census_, 1'000'000);
  ASSERT_OK(Charge(Request(acme_, census_, "k1", 100'000, "digest-a")));
  const size_t rows = Ledger().size();
  bool called = false;
  EXPECT_THAT(
      store_->Charge(Request(acme_, census_, "k1", 100'000, "digest-b"), ++now_, Body(&called)),
      StatusIs(absl::StatusCode::kFailedPrecondition, "k1"));
  EXPECT_FALSE(called);
  EXPECT_EQ(Ledger().size(), rows);
  EXPECT_EQ(SpentMicro(acme_, census_), 100'000);
}

TEST_P(StoreTest, DatasetSpendSaturatesInsteadOfWrapping) {
  // Three companies each spend just under epsilon 1e6 with a tiny-sigma Gaussian: per company the
  // curve's top orders hold ~3.6e18 nano-units, so the dataset-wide sum of the three exceeds
  // INT64_MAX there. A wrapping sum turns those orders negative, the conversion then reports a
  // spend of 0, and a cap set afterwards admits anything.
  const AccountRecord initech = MakeAccount("initech", Role::kCompany);
  const AccountRecord hooli = MakeAccount("hooli", Role::kCompany);
  constexpr int64_t kHuge = 1'000'000'000'000;  // epsilon 1e6
  int i = 0;
  for (const AccountRecord* a : std::vector<const AccountRecord*>{&acme_, &globex_, &initech}) {
    Grant(*a, census_, kHuge, 1e-6);
    ChargeRequest r = Request(*a, census_, absl::StrCat("g", i++), 1);
    r.cost = core::accounting::GaussianCost(1.0, 7.5e-4);
    r.epsilon = 9.9e5;
    r.delta = 1e-6;
    r.mechanism = "discrete_gaussian";
    ASSERT_OK(Charge(r));
  }
  auto all = store_->GetDatasetSpend(census_.id);
  ASSERT_OK(all);
  EXPECT_EQ(all->releases, 3);
  for (int64_t v : all->rdp_all_nano) EXPECT_GE(v, 0);
  EXPECT_EQ(all->rdp_all_nano.back(), std::numeric_limits<int64_t>::max());
  EXPECT_GT(core::accounting::SpentEpsilonMicro(*all, 1e-6), 2 * kHuge);

  // The regulator caps the dataset at epsilon 10: nothing more may be released.
  ASSERT_OK(store_->SetCap(census_.id, census_.name, 10'000'000, 1e-6, "regulator", ++now_));
  Grant(hooli, census_, 1'000'000, 1e-6);
  EXPECT_THAT(Charge(Request(hooli, census_, "after-cap", 100'000)),
              StatusIs(absl::StatusCode::kResourceExhausted, "dataset-wide cap"));
}

TEST_P(StoreTest, FailingBodyIsChargedAndReplaysItsFailure) {
  Grant(acme_, census_, 1'000'000);
  ASSERT_OK(Charge(Request(acme_, census_, "k0", 100'000)));
  const size_t rows = Ledger().size();

  // The body runs after the noise is drawn: a failure that depends on the noisy data must
  // not be retryable for free, so it is charged and stored.
  auto failed = store_->Charge(Request(acme_, census_, "k1", 300'000), ++now_,
                               [](int64_t, const BudgetState&) -> absl::StatusOr<ChargeResult> {
                                 return absl::InternalError("solver exploded");
                               });
  EXPECT_THAT(failed, StatusIs(absl::StatusCode::kInternal, "solver exploded"));
  EXPECT_THAT(failed, StatusIs(absl::StatusCode::kInternal, "charged"));
  EXPECT_EQ(Ledger().size(), rows + 1);
  EXPECT_EQ(SpentMicro(acme_, census_), 400'000);
  auto stored = store_->GetStoredResponse(acme_.id, "k1");
  ASSERT_OK(stored);
  EXPECT_THAT(stored->failure, StatusIs(absl::StatusCode::kInternal, "solver exploded"));
  EXPECT_TRUE(Verify().ok);

  // A replay returns the same failure without running the body or charging again.
  bool called = false;
  ArtifactRecord artifact{"art_x", acme_.id, census_.id, 0, now_, "body"};
  auto retry =
      store_->Charge(Request(acme_, census_, "k1", 300'000), ++now_, Body(&called, artifact));
  EXPECT_THAT(retry, StatusIs(absl::StatusCode::kInternal, "solver exploded"));
  EXPECT_FALSE(called);
  EXPECT_EQ(Ledger().size(), rows + 1);
  EXPECT_EQ(SpentMicro(acme_, census_), 400'000);
  EXPECT_THAT(store_->GetArtifact("art_x"), StatusIs(absl::StatusCode::kNotFound));
}

// A release whose post-processing runs after its charge (ChargeResult::pending): the charge
// and the release are stored first; the finished response and its artifact replace the
// release once, whoever finishes first, and a pending release survives a restart.
TEST_P(StoreTest, APendingReleaseIsFinishedOnceAndItsChargeStands) {
  Grant(acme_, census_, 1'000'000);
  const ChargeBody release = [](int64_t, const BudgetState&) -> absl::StatusOr<ChargeResult> {
    return ChargeResult{"the release", std::nullopt, std::nullopt, /*pending=*/true};
  };
  auto charged = store_->Charge(Request(acme_, census_, "k1", 300'000), ++now_, release);
  ASSERT_OK(charged);
  EXPECT_TRUE(charged->pending);
  EXPECT_FALSE(charged->replayed);
  const size_t rows = Ledger().size();
  const int64_t seq = Ledger().back().seq;

  // What a process that stopped before finishing leaves: the charge and the release.
  ASSERT_NO_FATAL_FAILURE(Reopen());
  auto stored = store_->GetStoredResponse(acme_.id, "k1");
  ASSERT_OK(stored);
  EXPECT_TRUE(stored->pending);
  EXPECT_EQ(stored->payload, "the release");
  EXPECT_EQ(stored->ledger_seq, seq);
  bool called = false;
  auto replay = store_->Charge(Request(acme_, census_, "k1", 300'000), ++now_, Body(&called));
  ASSERT_OK(replay);
  EXPECT_TRUE(replay->replayed);
  EXPECT_TRUE(replay->pending);
  EXPECT_EQ(replay->response_payload, "the release");
  EXPECT_FALSE(called);

  ArtifactRecord artifact{"art_p", 0, 0, 0, now_, "the artifact"};
  auto finished = store_->FinishRelease(acme_.id, "k1", "finished", absl::OkStatus(), artifact);
  ASSERT_OK(finished);
  EXPECT_FALSE(finished->pending);
  EXPECT_EQ(finished->payload, "finished");
  auto kept = store_->GetArtifact("art_p");
  ASSERT_OK(kept);
  EXPECT_EQ(kept->account_id, acme_.id);
  EXPECT_EQ(kept->dataset_id, census_.id);
  EXPECT_EQ(kept->ledger_seq, seq);
  EXPECT_EQ(kept->created_micros, Ledger().back().time_micros);  // the charge's time
  EXPECT_EQ(kept->payload, "the artifact");

  // A second finish (a concurrent retry's) gets the first one's response; its artifact is
  // not kept.
  ArtifactRecord other{"art_q", 0, 0, 0, now_, "another artifact"};
  auto second = store_->FinishRelease(acme_.id, "k1", "finished again", absl::OkStatus(), other);
  ASSERT_OK(second);
  EXPECT_EQ(second->payload, "finished");
  EXPECT_THAT(store_->GetArtifact("art_q"), StatusIs(absl::StatusCode::kNotFound));
  auto again = store_->Charge(Request(acme_, census_, "k1", 300'000), ++now_, Body(&called));
  ASSERT_OK(again);
  EXPECT_FALSE(again->pending);
  EXPECT_EQ(again->response_payload, "finished");

  // A post-processing that failed is stored as the release's charged failure.
  ASSERT_OK(store_->Charge(Request(acme_, census_, "k2", 200'000), ++now_, release));
  auto failed = store_->FinishRelease(acme_.id, "k2", "", ChargedFailure(absl::InternalError("lp")),
                                      ArtifactRecord{"art_r", 0, 0, 0, now_, "x"});
  ASSERT_OK(failed);
  EXPECT_THAT(failed->failure, StatusIs(absl::StatusCode::kInternal, "charged"));
  EXPECT_THAT(store_->Charge(Request(acme_, census_, "k2", 200'000), ++now_, Body(&called)),
              StatusIs(absl::StatusCode::kInternal, "lp"));
  EXPECT_THAT(store_->GetArtifact("art_r"), StatusIs(absl::StatusCode::kNotFound));

  EXPECT_FALSE(called);
  EXPECT_EQ(Ledger().size(), rows + 1);
  EXPECT_EQ(SpentMicro(acme_, census_), 500'000);
  EXPECT_TRUE(Verify().ok);
  EXPECT_THAT(store_->FinishRelease(globex_.id, "k1", "x", absl::OkStatus(), std::nullopt),
              StatusIs(absl::StatusCode::kNotFound));
}

// A dataset deleted between a release's charge and its finish took its artifacts along: the
// finished response is stored, its artifact is not.
TEST_P(StoreTest, AReleaseFinishedAfterItsDatasetWasDeletedKeepsNoArtifact) {
  Grant(acme_, census_, 1'000'000);
  ASSERT_OK(store_->Charge(Request(acme_, census_, "k1", 300'000), ++now_,
                           [](int64_t, const BudgetState&) -> absl::StatusOr<ChargeResult> {
                             return ChargeResult{"the release", std::nullopt, std::nullopt,
                                                 /*pending=*/true};
                           }));
  ASSERT_OK(store_->DeleteDataset(census_.id));
  auto finished = store_->FinishRelease(acme_.id, "k1", "finished", absl::OkStatus(),
                                        ArtifactRecord{"art_d", 0, 0, 0, now_, "artifact"});
  ASSERT_OK(finished);
  EXPECT_EQ(finished->payload, "finished");
  EXPECT_THAT(store_->GetArtifact("art_d"), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_TRUE(Verify().ok);
}

TEST_P(StoreTest, ChargeWithoutGrantIsPermissionDenied) {
  bool called = false;
  EXPECT_THAT(store_->Charge(Request(acme_, census_, "k1", 100'000), ++now_, Body(&called)),
              StatusIs(absl::StatusCode::kPermissionDenied, "no budget grant"));
  EXPECT_FALSE(called);
  EXPECT_TRUE(Ledger().empty());
  EXPECT_THAT(store_->GetBudget(acme_.id, census_.id), StatusIs(absl::StatusCode::kNotFound));
}

TEST_P(StoreTest, LoweredGrantStopsSpending) {
  Grant(acme_, census_, 1'000'000);
  ASSERT_OK(Charge(Request(acme_, census_, "k1", 600'000)));
  Grant(acme_, census_, 500'000);
  EXPECT_THAT(Charge(Request(acme_, census_, "k2", 1)),
              StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_EQ(SpentMicro(acme_, census_), 600'000);
  EXPECT_TRUE(Verify().ok);
}

}  // namespace
}  // namespace fairvault::server::storage::store_testing
