// The ledger's Merkle tree and its checkpoints (issue 25), on every backend: each appended row
// extends the tree in its own transaction, the tree's root is the RFC 9162 root of the rows'
// hashes, proofs from the stored nodes verify, and checkpoints are stored once per size.
#include "absl/strings/escaping.h"
#include "core/transparency/merkle.h"
#include "server/storage/ledger_chain.h"
#include "server/storage/store_test_fixture.h"

namespace fairvault::server::storage::store_testing {
namespace {

namespace tlog = core::transparency;

// The root recomputed from the rows alone, as an auditor holding the whole ledger would.
tlog::Hash RootOfRows(const std::vector<LedgerRow>& rows, size_t n) {
  std::vector<tlog::Hash> level;
  for (size_t i = 0; i < n; ++i) level.push_back(tlog::LeafHash(absl::HexStringToBytes(rows[i].hash)));
  std::function<tlog::Hash(size_t, size_t)> root = [&](size_t b, size_t e) -> tlog::Hash {
    if (e - b == 1) return level[b];
    size_t k = 1;
    while (k * 2 < e - b) k *= 2;
    return tlog::NodeHash(root(b, b + k), root(b + k, e));
  };
  return n == 0 ? tlog::EmptyRoot() : root(0, n);
}

TEST_P(StoreTest, EveryLedgerRowIsALeafOfTheTree) {
  ASSERT_NO_FATAL_FAILURE(BuildLedger());
  for (int i = 0; i < 6; ++i) ASSERT_OK(Charge(Request(acme_, census_, absl::StrCat("t", i), 1000)));
  const std::vector<LedgerRow> rows = Ledger();
  ASSERT_EQ(rows.size(), 11u);
  ASSERT_OK(store_->ReadTree([&](int64_t size, tlog::NodeReader read) -> absl::Status {
    EXPECT_EQ(size, 11);
    for (int64_t n = 1; n <= size; ++n) {
      absl::StatusOr<tlog::Hash> root = tlog::RootHash(n, read);
      EXPECT_TRUE(root.ok()) << root.status();
      EXPECT_EQ(*root, RootOfRows(rows, n)) << n;
      for (int64_t m = 0; m < n; ++m) {
        auto proof = tlog::InclusionProof(m, n, read);
        EXPECT_TRUE(proof.ok());
        EXPECT_TRUE(tlog::VerifyInclusion(tlog::LeafHash(absl::HexStringToBytes(rows[m].hash)),
                                          m, n, *proof, *root)
                        .ok())
            << m << " of " << n;
      }
    }
    return absl::OkStatus();
  }));
  // A row's encoding is what its hash covers.
  EXPECT_EQ(absl::BytesToHexString(tlog::Sha256(
                LedgerRowEncoding(rows[2], rows[2].account_id, rows[2].dataset_id))),
            rows[2].hash);
  auto one = store_->GetLedgerRow(3);
  ASSERT_OK(one);
  EXPECT_EQ(one->hash, rows[2].hash);
  EXPECT_EQ(one->account_id, acme_.id);
  EXPECT_TRUE(absl::IsNotFound(store_->GetLedgerRow(12).status()));
}

TEST_P(StoreTest, AChargeThatFailsLeavesNoLeafBehind) {
  ASSERT_NO_FATAL_FAILURE(BuildLedger());
  // Over budget: refused inside the charge transaction, nothing appended.
  EXPECT_FALSE(Charge(Request(acme_, census_, "too-much", 50'000'000)).ok());
  ASSERT_OK(store_->ReadTree([&](int64_t size, tlog::NodeReader read) -> absl::Status {
    EXPECT_EQ(size, 5);
    EXPECT_TRUE(absl::IsNotFound(read(0, 5).status()));
    return absl::OkStatus();
  }));
}

TEST_P(StoreTest, VerifyChecksTheTreeAgainstTheRows) {
  ASSERT_NO_FATAL_FAILURE(BuildLedger());
  for (int i = 0; i < 6; ++i) ASSERT_OK(Charge(Request(acme_, census_, absl::StrCat("t", i), 1000)));
  ASSERT_TRUE(Verify().ok) << Verify().message;
  const std::string zero = GetParam() == Backend::kSqlite ? "zeroblob(32)" : "'\\x00'::bytea";
  struct Case {
    std::string sql;
    int64_t first_bad_seq;
    const char* message;
  };
  const Case cases[] = {
      // A leaf rewritten: the row it stands for is named.
      {"UPDATE merkle_nodes SET hash = " + zero + " WHERE level = 0 AND idx = 4", 5,
       "node 0/4 does not match the ledger rows 5..5"},
      // An inner node rewritten (proofs through it would fail), its leaves intact.
      {"UPDATE merkle_nodes SET hash = " + zero + " WHERE level = 2 AND idx = 1", 5,
       "node 2/1 does not match the ledger rows 5..8"},
      // A node dropped, and one beyond the ledger.
      {"DELETE FROM merkle_nodes WHERE level = 1 AND idx = 2", 5, "lacks node 1/2"},
      {"INSERT INTO merkle_nodes(level, idx, hash) VALUES(0, 11, " + zero + ")", 12,
       "beyond the ledger's 11 rows"},
      // A stray node above the highest complete subtree (11 rows: level 3 has node 0 only).
      {"INSERT INTO merkle_nodes(level, idx, hash) VALUES(5, 0, " + zero + ")", 1,
       "node 5/0 beyond the ledger's 11 rows"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.sql);
    // Each case on a fresh copy of the tree: drop the tampering after checking it.
    ASSERT_EQ(Raw(LiftTreeGuard() + "CREATE TABLE saved AS SELECT * FROM merkle_nodes; " + c.sql +
                  ";"),
              "");
    const LedgerVerification v = Verify();
    EXPECT_FALSE(v.ok);
    EXPECT_EQ(v.first_bad_seq, c.first_bad_seq);
    EXPECT_THAT(v.message, HasSubstr(c.message));
    ASSERT_EQ(Raw("DELETE FROM merkle_nodes; INSERT INTO merkle_nodes SELECT * FROM saved; "
                  "DROP TABLE saved;"),
              "");
    ASSERT_TRUE(Verify().ok) << Verify().message;
  }
}

TEST_P(StoreTest, CheckpointsAreStoredOncePerSize) {
  EXPECT_TRUE(absl::IsNotFound(store_->GetCheckpoint(0).status()));
  ASSERT_OK(store_->PutCheckpoint(CheckpointRecord{3, tlog::LeafHash("a"), "note 3\n", 1}));
  ASSERT_OK(store_->PutCheckpoint(CheckpointRecord{7, tlog::LeafHash("b"), "note 7\n", 2}));
  EXPECT_TRUE(absl::IsAlreadyExists(
      store_->PutCheckpoint(CheckpointRecord{7, tlog::LeafHash("c"), "another\n", 3})));
  auto latest = store_->GetCheckpoint(0);
  ASSERT_OK(latest);
  EXPECT_EQ(latest->size, 7);
  EXPECT_EQ(latest->root, tlog::LeafHash("b"));  // the first stays
  EXPECT_EQ(latest->note, "note 7\n");
  auto three = store_->GetCheckpoint(3);
  ASSERT_OK(three);
  EXPECT_EQ(three->note, "note 3\n");
  EXPECT_TRUE(absl::IsNotFound(store_->GetCheckpoint(5).status()));
  auto covering = store_->CheckpointCovering(4);
  ASSERT_OK(covering);
  EXPECT_EQ(covering->size, 7);
  EXPECT_TRUE(absl::IsNotFound(store_->CheckpointCovering(8).status()));
}

TEST_P(StoreTest, CosignaturesAreKeptPerWitnessAndCounted) {
  for (int64_t size : {3, 7, 9}) {
    ASSERT_OK(store_->PutCheckpoint(CheckpointRecord{size, tlog::LeafHash("a"), "n\n", size}));
  }
  // Checkpoint 3 and 9: two witnesses; 7: one (cosigned twice: the later line replaces).
  ASSERT_OK(store_->PutCosignature({3, "w1", 11, "line w1 3\n", 1}));
  ASSERT_OK(store_->PutCosignature({3, "w2", 22, "line w2 3\n", 1}));
  ASSERT_OK(store_->PutCosignature({7, "w1", 11, "old w1 7\n", 1}));
  ASSERT_OK(store_->PutCosignature({7, "w1", 11, "new w1 7\n", 2}));
  ASSERT_OK(store_->PutCosignature({9, "w2", 22, "line w2 9\n", 1}));
  ASSERT_OK(store_->PutCosignature({9, "w1", 11, "line w1 9\n", 1}));
  auto seven = store_->ListCosignatures(7);
  ASSERT_OK(seven);
  ASSERT_EQ(seven->size(), 1u);
  EXPECT_EQ((*seven)[0].line, "new w1 7\n");
  auto nine = store_->ListCosignatures(9);
  ASSERT_OK(nine);
  ASSERT_EQ(nine->size(), 2u);
  EXPECT_EQ((*nine)[0].witness, "w1");  // by witness name
  EXPECT_EQ((*nine)[1].key_hash, 22);
  EXPECT_TRUE(store_->ListCosignatures(5)->empty());
  auto two = store_->CosignedSizes(4, 0, 2, /*newest_first=*/false, 10);
  ASSERT_OK(two);
  EXPECT_EQ(*two, (std::vector<int64_t>{9}));
  auto any = store_->CosignedSizes(1, 0, 1, /*newest_first=*/true, 2);
  ASSERT_OK(any);
  EXPECT_EQ(*any, (std::vector<int64_t>{9, 7}));
  auto oldest = store_->CosignedSizes(1, 0, 2, /*newest_first=*/false, 1);
  ASSERT_OK(oldest);
  EXPECT_EQ(*oldest, (std::vector<int64_t>{3}));
  auto bounded = store_->CosignedSizes(1, 8, 1, /*newest_first=*/true, 10);
  ASSERT_OK(bounded);
  EXPECT_EQ(*bounded, (std::vector<int64_t>{7, 3}));
}

}  // namespace
}  // namespace fairvault::server::storage::store_testing
