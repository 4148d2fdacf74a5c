// TreeFrontier: the nodes a row adds to the ledger's Merkle tree are the same with it as with
// every sibling read from the store, and it reads nothing while its head is the ledger's.
#include "server/storage/ledger_chain.h"

#include <map>
#include <random>
#include <utility>

#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fairvault::server::storage {
namespace {

namespace tlog = core::transparency;

// A ledger's row hashes (hex) and its tree's stored nodes, appended without a frontier.
struct Ledger {
  std::vector<std::string> hashes{kGenesisHash};  // hashes[seq]; [0] is the genesis hash
  std::map<std::pair<int, int64_t>, tlog::Hash> nodes;
  int64_t reads = 0;

  // A callable; NodeReader only refers to one, so call sites keep it alive.
  auto Reader() {
    return [this](int level, int64_t idx) -> absl::StatusOr<tlog::Hash> {
      ++reads;
      auto it = nodes.find({level, idx});
      if (it == nodes.end()) return absl::NotFoundError("no node");
      return it->second;
    };
  }
  void Store(const std::vector<tlog::StoredNode>& added) {
    for (const tlog::StoredNode& n : added) nodes[{n.level, n.index}] = n.hash;
  }
};

std::string RandomHash(std::mt19937_64& gen) {
  return absl::StrFormat("%016x%016x%016x%016x", gen(), gen(), gen(), gen());
}

void ExpectSameNodes(const std::vector<tlog::StoredNode>& a,
                     const std::vector<tlog::StoredNode>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].level, b[i].level);
    EXPECT_EQ(a[i].index, b[i].index);
    EXPECT_EQ(a[i].hash, b[i].hash);
  }
}

TEST(TreeFrontierTest, AppendsFromItsOwnHeadReadNothingAndMatchTheStoredTree) {
  std::mt19937_64 gen(7);
  Ledger reference, stored;
  TreeFrontier frontier;
  for (int64_t seq = 1; seq <= 200; ++seq) {
    const std::string hash = RandomHash(gen);
    auto want = TreeNodesForRow(seq, hash, reference.Reader());
    ASSERT_TRUE(want.ok());
    reference.Store(*want);
    auto got = frontier.NodesForRow(seq, reference.hashes.back(), hash, stored.Reader());
    ASSERT_TRUE(got.ok()) << got.status();
    ExpectSameNodes(*got, *want);
    stored.Store(*got);
    reference.hashes.push_back(hash);
  }
  EXPECT_GT(reference.reads, 150);  // about one a row without the frontier
  EXPECT_EQ(stored.reads, 0);
}

// Another process appended, or the transaction that last appended here rolled back: the head
// read under the lock is not the frontier's, so the siblings come from the store.
TEST(TreeFrontierTest, AnotherHeadIsReadFromTheStore) {
  std::mt19937_64 gen(8);
  Ledger ledger;
  TreeFrontier frontier;
  auto append = [&](int64_t seq, const std::string& prev, const std::string& hash,
                    TreeFrontier& f) -> std::vector<tlog::StoredNode> {
    auto nodes = f.NodesForRow(seq, prev, hash, ledger.Reader());
    EXPECT_TRUE(nodes.ok()) << nodes.status();
    return nodes.ok() ? *nodes : std::vector<tlog::StoredNode>{};
  };
  for (int64_t seq = 1; seq <= 7; ++seq) {
    const std::string hash = RandomHash(gen);
    ledger.Store(append(seq, ledger.hashes.back(), hash, frontier));
    ledger.hashes.push_back(hash);
  }
  // Row 8 appended here, then rolled back: nothing stored, the head is still row 7.
  (void)append(8, ledger.hashes.back(), RandomHash(gen), frontier);
  // Rows 8 to 11 appended by another process.
  TreeFrontier other;
  for (int64_t seq = 8; seq <= 11; ++seq) {
    const std::string hash = RandomHash(gen);
    ledger.Store(append(seq, ledger.hashes.back(), hash, other));
    ledger.hashes.push_back(hash);
  }
  // Row 12 here: 12 = leaf 11 (binary 1011) completes two subtrees, whose siblings are read.
  const std::string hash = RandomHash(gen);
  Ledger reference = ledger;
  auto want = TreeNodesForRow(12, hash, reference.Reader());
  ASSERT_TRUE(want.ok());
  ledger.reads = 0;
  const std::vector<tlog::StoredNode> got = append(12, ledger.hashes.back(), hash, frontier);
  ExpectSameNodes(got, *want);
  EXPECT_EQ(ledger.reads, 2);
  ledger.Store(got);
  ledger.hashes.push_back(hash);
  // From its own head again, the next rows read only the nodes it never saw: 13 = leaf 12
  // completes nothing; 14 = leaf 13 needs leaf 12 (its own); 16 = leaf 15 needs the 4-leaf
  // subtree of leaves 8-11, written by the other process.
  ledger.reads = 0;
  for (int64_t seq = 13; seq <= 16; ++seq) {
    const std::string next = RandomHash(gen);
    Ledger ref = ledger;
    auto expected = TreeNodesForRow(seq, next, ref.Reader());
    ASSERT_TRUE(expected.ok());
    const std::vector<tlog::StoredNode> nodes = append(seq, ledger.hashes.back(), next, frontier);
    ExpectSameNodes(nodes, *expected);
    ledger.Store(nodes);
    ledger.hashes.push_back(next);
  }
  EXPECT_EQ(ledger.reads, 1);
}

// The same size with another row at its head: this process's row 9 was rolled back and
// another process wrote a different row 9. Row 10 (leaf 9) needs leaf 8, the other's.
TEST(TreeFrontierTest, TheSameSizeWithAnotherHeadIsReadFromTheStore) {
  std::mt19937_64 gen(9);
  Ledger ledger;
  TreeFrontier frontier, other;
  for (int64_t seq = 1; seq <= 8; ++seq) {
    const std::string hash = RandomHash(gen);
    auto nodes = frontier.NodesForRow(seq, ledger.hashes.back(), hash, ledger.Reader());
    ASSERT_TRUE(nodes.ok());
    ledger.Store(*nodes);
    ledger.hashes.push_back(hash);
  }
  ASSERT_TRUE(frontier.NodesForRow(9, ledger.hashes.back(), RandomHash(gen), ledger.Reader()).ok());
  const std::string theirs = RandomHash(gen);
  auto nodes = other.NodesForRow(9, ledger.hashes.back(), theirs, ledger.Reader());
  ASSERT_TRUE(nodes.ok());
  ledger.Store(*nodes);
  ledger.hashes.push_back(theirs);
  const std::string hash = RandomHash(gen);
  Ledger reference = ledger;
  auto want = TreeNodesForRow(10, hash, reference.Reader());
  ASSERT_TRUE(want.ok());
  ledger.reads = 0;
  auto got = frontier.NodesForRow(10, ledger.hashes.back(), hash, ledger.Reader());
  ASSERT_TRUE(got.ok());
  ExpectSameNodes(*got, *want);
  EXPECT_EQ(ledger.reads, 1);
}

}  // namespace
}  // namespace fairvault::server::storage
