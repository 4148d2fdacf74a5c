// The stored-subtree Merkle tree against RFC 9162's recursive definitions, the published
// Certificate Transparency vectors, and the tampering a verifier must catch.
#include "core/transparency/merkle.h"

#include <functional>
#include <map>
#include <random>
#include <utility>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fairvault::core::transparency {
namespace {

using ::testing::HasSubstr;

// The RFC's definitions, recursively over the leaf hashes: the reference the stored-subtree
// implementation must agree with.
int64_t Split(int64_t n) {
  int64_t k = 1;
  while (k * 2 < n) k *= 2;
  return k;
}
Hash RefRoot(const std::vector<Hash>& l, int64_t b, int64_t e) {
  if (e - b == 0) return EmptyRoot();
  if (e - b == 1) return l[b];
  const int64_t k = Split(e - b);
  return NodeHash(RefRoot(l, b, b + k), RefRoot(l, b + k, e));
}
void RefPath(const std::vector<Hash>& l, int64_t m, int64_t b, int64_t e, std::vector<Hash>* out) {
  if (e - b <= 1) return;
  const int64_t k = Split(e - b);
  if (m < k) {
    RefPath(l, m, b, b + k, out);
    out->push_back(RefRoot(l, b + k, e));
  } else {
    RefPath(l, m - k, b + k, e, out);
    out->push_back(RefRoot(l, b, b + k));
  }
}
void RefSubProof(const std::vector<Hash>& l, int64_t m, int64_t b, int64_t e, bool flag,
                 std::vector<Hash>* out) {
  if (m == e - b) {
    if (!flag) out->push_back(RefRoot(l, b, e));
    return;
  }
  const int64_t k = Split(e - b);
  if (m <= k) {
    RefSubProof(l, m, b, b + k, flag, out);
    out->push_back(RefRoot(l, b + k, e));
  } else {
    RefSubProof(l, m - k, b + k, e, false, out);
    out->push_back(RefRoot(l, b, b + k));
  }
}

// A tree built the way the store builds it: NodesForAppend per leaf into a map.
class StoredTree {
 public:
  void Append(const Hash& leaf) {
    auto nodes = NodesForAppend(size_, leaf, Reader());
    ASSERT_TRUE(nodes.ok()) << nodes.status();
    for (StoredNode& n : *nodes) nodes_[{n.level, n.index}] = std::move(n.hash);
    ++size_;
  }
  std::function<absl::StatusOr<Hash>(int, int64_t)> Reader() {
    return [this](int level, int64_t index) -> absl::StatusOr<Hash> {
      auto it = nodes_.find({level, index});
      if (it == nodes_.end()) {
        return absl::NotFoundError(absl::StrCat("no node ", level, "/", index));
      }
      ++reads_;
      return it->second;
    };
  }
  int64_t size() const { return size_; }
  int64_t nodes() const { return static_cast<int64_t>(nodes_.size()); }
  int64_t reads_ = 0;

 private:
  int64_t size_ = 0;
  std::map<std::pair<int, int64_t>, Hash> nodes_;
};

// The recursive reference costs a pass over the leaves per proof: every proof of the trees up
// to 100 leaves and around the powers of two beyond; every proof of every size is verified.
bool Referenced(int64_t n) {
  return n <= 100 || (n >= 127 && n <= 129) || (n >= 255 && n <= 257) || n == 300;
}

Hash Leaf(int64_t i) { return LeafHash(absl::StrCat("row ", i)); }

std::string Hex(const Hash& h) { return absl::BytesToHexString(h); }
Hash Unhex(absl::string_view s) { return absl::HexStringToBytes(s); }

TEST(MerkleTest, RootsAndProofsMatchTheRfcDefinitionsOnEveryTreeUpTo300Leaves) {
  StoredTree tree;
  RootBuilder builder;
  std::vector<Hash> leaves;
  std::vector<Hash> roots{EmptyRoot()};
  ASSERT_EQ(builder.Root(), EmptyRoot());
  for (int64_t n = 1; n <= 300; ++n) {
    leaves.push_back(Leaf(n - 1));
    tree.Append(leaves.back());
    builder.Append(leaves.back());
    auto root = RootHash(n, tree.Reader());
    ASSERT_TRUE(root.ok()) << root.status();
    ASSERT_EQ(*root, RefRoot(leaves, 0, n)) << "size " << n;
    ASSERT_EQ(builder.Root(), *root) << "size " << n;
    ASSERT_EQ(builder.size(), n);
    roots.push_back(*root);
    for (int64_t m = 0; m < n; ++m) {
      auto proof = InclusionProof(m, n, tree.Reader());
      ASSERT_TRUE(proof.ok()) << proof.status();
      if (Referenced(n)) {
        std::vector<Hash> want;
        RefPath(leaves, m, 0, n, &want);
        ASSERT_EQ(*proof, want) << "leaf " << m << " of " << n;
      }
      ASSERT_TRUE(VerifyInclusion(leaves[m], m, n, *proof, *root).ok()) << m << " of " << n;
    }
  }
  // Every consistency proof between every pair of sizes.
  for (int64_t n = 1; n <= 300; ++n) {
    for (int64_t m = 1; m <= n; ++m) {
      auto proof = ConsistencyProof(m, n, tree.Reader());
      ASSERT_TRUE(proof.ok()) << proof.status();
      if (Referenced(n)) {
        std::vector<Hash> want;
        if (m < n) RefSubProof(leaves, m, 0, n, true, &want);
        ASSERT_EQ(*proof, want) << m << " -> " << n;
      }
      ASSERT_TRUE(VerifyConsistency(m, n, *proof, roots[m], roots[n]).ok()) << m << " -> " << n;
    }
  }
}

// Data only: the leaves, roots and proofs the Certificate Transparency implementations test
// against (transparency-dev/merkle, testonly/constants.go; the same in certificate-transparency-go),
// produced by those independent implementations.
const char* const kCtLeaves[] = {"",         "00",       "10",
                                 "2021",     "3031",     "40414243",
                                 "5051525354555657", "606162636465666768696a6b6c6d6e6f"};
const char* const kCtRoots[] = {
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328"};

TEST(MerkleTest, AgreesWithTheCertificateTransparencyVectors) {
  StoredTree tree;
  EXPECT_EQ(Hex(EmptyRoot()), kCtRoots[0]);
  for (int i = 0; i < 8; ++i) {
    tree.Append(LeafHash(Unhex(kCtLeaves[i])));
    auto root = RootHash(i + 1, tree.Reader());
    ASSERT_TRUE(root.ok());
    EXPECT_EQ(Hex(*root), kCtRoots[i + 1]) << "size " << i + 1;
  }
  struct Vector {
    int64_t a, b;
    std::vector<std::string> proof;
  };
  const std::vector<Vector> inclusion = {
      {0, 8,
       {"96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"}},
      {5, 8,
       {"bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
        "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"}}};
  for (const Vector& v : inclusion) {
    auto proof = InclusionProof(v.a, v.b, tree.Reader());
    ASSERT_TRUE(proof.ok());
    std::vector<std::string> hex;
    for (const Hash& h : *proof) hex.push_back(Hex(h));
    EXPECT_EQ(hex, v.proof) << "leaf " << v.a;
  }
  const std::vector<Vector> consistency = {
      {2, 8,
       {"5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"}},
      {6, 8,
       {"0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
        "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"}},
      {2, 5,
       {"5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"}}};
  for (const Vector& v : consistency) {
    auto proof = ConsistencyProof(v.a, v.b, tree.Reader());
    ASSERT_TRUE(proof.ok());
    std::vector<std::string> hex;
    std::vector<Hash> raw;
    for (const std::string& h : v.proof) raw.push_back(Unhex(h));
    for (const Hash& h : *proof) hex.push_back(Hex(h));
    EXPECT_EQ(hex, v.proof) << v.a << " -> " << v.b;
    EXPECT_TRUE(
        VerifyConsistency(v.a, v.b, raw, Unhex(kCtRoots[v.a]), Unhex(kCtRoots[v.b])).ok());
  }
}

TEST(MerkleTest, RandomSizesUpToAMillionLeavesNeedOnlyLogarithmicReads) {
  StoredTree tree;
  std::vector<Hash> leaves;
  constexpr int64_t kLeaves = 1'000'000;
  leaves.reserve(kLeaves);
  for (int64_t i = 0; i < kLeaves; ++i) {
    leaves.push_back(Leaf(i));
    tree.Append(leaves.back());
  }
  EXPECT_LT(tree.nodes(), 2 * kLeaves);  // about two stored hashes per leaf
  std::mt19937_64 gen(20261129);  // sizes at random, fixed seed: a failure names its sizes and recurs
  for (int trial = 0; trial < 20; ++trial) {
    const int64_t n = absl::Uniform<int64_t>(gen, 1, kLeaves + 1);
    const int64_t m = absl::Uniform<int64_t>(gen, 0, n);
    const int64_t old = absl::Uniform<int64_t>(gen, 1, n + 1);
    auto root = RootHash(n, tree.Reader());
    auto old_root = RootHash(old, tree.Reader());
    ASSERT_TRUE(root.ok() && old_root.ok());
    // The reference recursion hashes every leaf: for two of the trials.
    if (trial < 2) {
      ASSERT_EQ(*root, RefRoot(leaves, 0, n)) << n;
    }
    tree.reads_ = 0;
    auto proof = InclusionProof(m, n, tree.Reader());
    ASSERT_TRUE(proof.ok());
    EXPECT_LE(tree.reads_, 21 * 21) << "reads for one inclusion proof in " << n;
    EXPECT_TRUE(VerifyInclusion(leaves[m], m, n, *proof, *root).ok()) << m << " of " << n;
    auto consistency = ConsistencyProof(old, n, tree.Reader());
    ASSERT_TRUE(consistency.ok());
    EXPECT_TRUE(VerifyConsistency(old, n, *consistency, *old_root, *root).ok())
        << old << " -> " << n;
  }
}

class TamperTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int64_t i = 0; i < 100; ++i) {
      leaves_.push_back(Leaf(i));
      tree_.Append(leaves_.back());
    }
  }
  Hash Root(int64_t n) { return *RootHash(n, tree_.Reader()); }
  StoredTree tree_;
  std::vector<Hash> leaves_;
};

TEST_F(TamperTest, AnAlteredRowIsNotIncluded) {
  auto proof = InclusionProof(37, 100, tree_.Reader());
  ASSERT_TRUE(proof.ok());
  absl::Status s = VerifyInclusion(LeafHash("row 37, epsilon edited"), 37, 100, *proof, Root(100));
  EXPECT_THAT(s.message(), HasSubstr("not in this tree"));
  // The right row at the wrong place, a proof hash flipped, a proof cut short or padded.
  EXPECT_FALSE(VerifyInclusion(leaves_[37], 36, 100, *proof, Root(100)).ok());
  std::vector<Hash> flipped = *proof;
  flipped[2][0] ^= 1;
  EXPECT_FALSE(VerifyInclusion(leaves_[37], 37, 100, flipped, Root(100)).ok());
  std::vector<Hash> shorter(proof->begin(), proof->end() - 1);
  EXPECT_THAT(VerifyInclusion(leaves_[37], 37, 100, shorter, Root(100)).message(),
              HasSubstr("shorter"));
  std::vector<Hash> longer = *proof;
  longer.push_back(Root(4));
  EXPECT_THAT(VerifyInclusion(leaves_[37], 37, 100, longer, Root(100)).message(),
              HasSubstr("longer"));
  EXPECT_THAT(VerifyInclusion(leaves_[37], 100, 100, *proof, Root(100)).message(),
              HasSubstr("not in a tree of 100"));
}

TEST_F(TamperTest, AReorderedPairChangesTheRootAndFailsConsistency) {
  StoredTree swapped;
  for (int64_t i = 0; i < 100; ++i) swapped.Append(leaves_[i == 40 ? 41 : i == 41 ? 40 : i]);
  const Hash swapped_root = *RootHash(100, swapped.Reader());
  EXPECT_NE(swapped_root, Root(100));
  // The log as it stood at 40 rows is no prefix of the reordered one at 100.
  auto proof = ConsistencyProof(41, 100, swapped.Reader());
  ASSERT_TRUE(proof.ok());
  EXPECT_THAT(VerifyConsistency(41, 100, *proof, Root(41), swapped_root).message(),
              HasSubstr("rewritten"));
}

TEST_F(TamperTest, ATruncatedLogCannotBeShownToExtendTheOldOne) {
  // An operator who dropped the last rows and appended new ones: the earlier checkpoint at 90
  // is not a prefix of the new 95-row tree.
  StoredTree truncated;
  for (int64_t i = 0; i < 80; ++i) truncated.Append(leaves_[i]);
  for (int64_t i = 0; i < 15; ++i) truncated.Append(LeafHash(absl::StrCat("new row ", i)));
  auto proof = ConsistencyProof(90, 95, truncated.Reader());
  ASSERT_TRUE(proof.ok());
  EXPECT_FALSE(VerifyConsistency(90, 95, *proof, Root(90), *RootHash(95, truncated.Reader())).ok());
  // A smaller tree never extends a larger one.
  EXPECT_THAT(VerifyConsistency(90, 80, {}, Root(90), Root(80)).message(),
              HasSubstr("cannot be a prefix"));
}

TEST_F(TamperTest, TwoRootsForOneSizeAreASplitView) {
  StoredTree forked;
  for (int64_t i = 0; i < 100; ++i) forked.Append(i == 99 ? LeafHash("other") : leaves_[i]);
  const Hash other = *RootHash(100, forked.Reader());
  EXPECT_THAT(VerifyConsistency(100, 100, {}, Root(100), other).message(),
              HasSubstr("split view"));
  // Two auditors shown the two forks at 100 cannot both be consistent with one later tree.
  for (int64_t i = 100; i < 120; ++i) tree_.Append(Leaf(i));
  auto proof = ConsistencyProof(100, 120, tree_.Reader());
  ASSERT_TRUE(proof.ok());
  const Hash later = Root(120);
  EXPECT_TRUE(VerifyConsistency(100, 120, *proof, Root(100), later).ok());
  EXPECT_FALSE(VerifyConsistency(100, 120, *proof, other, later).ok());
}

TEST(MerkleTest, MalformedInputsAreRefused) {
  EXPECT_FALSE(VerifyInclusion("short", 0, 1, {}, EmptyRoot()).ok());
  EXPECT_FALSE(VerifyConsistency(1, 2, {}, LeafHash("a"), LeafHash("b")).ok());
  StoredTree tree;
  tree.Append(Leaf(0));
  EXPECT_FALSE(InclusionProof(1, 1, tree.Reader()).ok());
  EXPECT_FALSE(ConsistencyProof(2, 1, tree.Reader()).ok());
  // A node the tree does not have is an error, not a wrong proof.
  EXPECT_FALSE(RootHash(2, tree.Reader()).ok());
}

}  // namespace
}  // namespace fairvault::core::transparency
