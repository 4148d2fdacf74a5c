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

void ExpectSameNodes(const std::vector<tlog::StoredNode>& a,
                     const std::vector<tlog::StoredNode>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].level, b[i].level);
    EXPECT_EQ(a[i].index, b[i].index);
    EXPECT_EQ(a[i].hash, b[i].hash);
  }
}

// A ledger's row hashes (hex) and its tree's stored nodes, counting the nodes read.
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
  // The nodes `frontier` gives the next row, `hash`, after this ledger's head; stored with the
  // row when `commit` (a rolled-back row leaves nothing).
  std::vector<tlog::StoredNode> Append(TreeFrontier& frontier, const std::string& hash,
                                       bool commit = true) {
    const int64_t seq = static_cast<int64_t>(hashes.size());
    auto added = frontier.NodesForRow(seq, hashes.back(), hash, Reader());
    EXPECT_TRUE(added.ok()) << added.status();
    if (!added.ok()) return {};
    if (commit) {
      for (const tlog::StoredNode& n : *added) nodes[{n.level, n.index}] = n.hash;
      hashes.push_back(hash);
    }
    return *added;
  }
  // The nodes the next row, `hash`, adds with every sibling read from the store (on a copy:
  // this ledger's count does not move); adds the reads that took to `*read_count`.
  std::vector<tlog::StoredNode> Expected(const std::string& hash,
                                         int64_t* read_count = nullptr) const {
    Ledger copy = *this;
    copy.reads = 0;
    auto want = TreeNodesForRow(static_cast<int64_t>(hashes.size()), hash, copy.Reader());
    EXPECT_TRUE(want.ok()) << want.status();
    if (read_count != nullptr) *read_count += copy.reads;
    return want.ok() ? *want : std::vector<tlog::StoredNode>{};
  }
};

std::string RandomHash(std::mt19937_64& gen) {
  return absl::StrFormat("%016x%016x%016x%016x", gen(), gen(), gen(), gen());
}

TEST(TreeFrontierTest, AppendsFromItsOwnHeadReadNothingAndMatchTheStoredTree) {
  std::mt19937_64 gen(7);
  Ledger stored;
  TreeFrontier frontier;
  int64_t reads_without = 0;
  for (int64_t seq = 1; seq <= 200; ++seq) {
    const std::string hash = RandomHash(gen);
    const std::vector<tlog::StoredNode> want = stored.Expected(hash, &reads_without);
    ExpectSameNodes(stored.Append(frontier, hash), want);
  }
  EXPECT_GT(reads_without, 150);  // about one a row without the frontier
  EXPECT_EQ(stored.reads, 0);
}

// Another process appended, or the transaction that last appended here rolled back: the head
// read under the lock is not the frontier's, so the siblings come from the store.
TEST(TreeFrontierTest, AnotherHeadIsReadFromTheStore) {
  std::mt19937_64 gen(8);
  Ledger ledger;
  TreeFrontier frontier, other;
  for (int64_t seq = 1; seq <= 7; ++seq) ledger.Append(frontier, RandomHash(gen));
  // Row 8 appended here, then rolled back: nothing stored, the head is still row 7.
  (void)ledger.Append(frontier, RandomHash(gen), /*commit=*/false);
  // Rows 8 to 11 appended by another process.
  for (int64_t seq = 8; seq <= 11; ++seq) ledger.Append(other, RandomHash(gen));
  // Row 12 here: 12 = leaf 11 (binary 1011) completes two subtrees, whose siblings are read.
  const std::string hash = RandomHash(gen);
  std::vector<tlog::StoredNode> want = ledger.Expected(hash);
  ledger.reads = 0;
  ExpectSameNodes(ledger.Append(frontier, hash), want);
  EXPECT_EQ(ledger.reads, 2);
  // From its own head again, the next rows read only the nodes it never saw: 13 = leaf 12
  // completes nothing; 14 = leaf 13 needs leaf 12 (its own); 16 = leaf 15 needs the 4-leaf
  // subtree of leaves 8-11, written by the other process.
  ledger.reads = 0;
  for (int64_t seq = 13; seq <= 16; ++seq) {
    const std::string next = RandomHash(gen);
    want = ledger.Expected(next);
    ExpectSameNodes(ledger.Append(frontier, next), want);
  }
  EXPECT_EQ(ledger.reads, 1);
}

// The same size with another row at its head: this process's row 9 was rolled back and
// another process wrote a different row 9. Row 10 (leaf 9) needs leaf 8, the other's.
TEST(TreeFrontierTest, TheSameSizeWithAnotherHeadIsReadFromTheStore) {
  std::mt19937_64 gen(9);
  Ledger ledger;
  TreeFrontier frontier, other;
  for (int64_t seq = 1; seq <= 8; ++seq) ledger.Append(frontier, RandomHash(gen));
  (void)ledger.Append(frontier, RandomHash(gen), /*commit=*/false);
  ledger.Append(other, RandomHash(gen));
  const std::string hash = RandomHash(gen);
  const std::vector<tlog::StoredNode> want = ledger.Expected(hash);
  ledger.reads = 0;
  ExpectSameNodes(ledger.Append(frontier, hash), want);
  EXPECT_EQ(ledger.reads, 1);
}

}  // namespace
}  // namespace fairvault::server::storage
