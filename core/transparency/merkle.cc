// RFC 9162 §2.1 Merkle trees over stored complete subtrees (see merkle.h).
#include "core/transparency/merkle.h"

#include <openssl/evp.h>
#include <openssl/sha.h>

#include <utility>

#include "absl/numeric/bits.h"
#include "absl/strings/str_cat.h"
#include "core/util/status_macros.h"

namespace fairvault::core::transparency {
namespace {

// The largest power of two strictly below n (n >= 2).
int64_t SplitPoint(int64_t n) {
  return int64_t{1} << (63 - absl::countl_zero(static_cast<uint64_t>(n - 1)));
}

absl::Status CheckHash(const Hash& h, absl::string_view what) {
  if (h.size() != kHashBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " has ", h.size(), " bytes; a SHA-256 hash has 32"));
  }
  return absl::OkStatus();
}

// MTH(D[begin:end]) from stored complete subtrees. Every range the RFC's recursion reaches
// starts at a multiple of its own largest power of two, so its complete parts are stored.
absl::StatusOr<Hash> SubtreeHash(int64_t begin, int64_t end, NodeReader read) {
  const int64_t n = end - begin;
  if (absl::has_single_bit(static_cast<uint64_t>(n)) && begin % n == 0) {
    const int level = absl::countr_zero(static_cast<uint64_t>(n));
    ASSIGN_OR_RETURN(Hash h, read(level, begin >> level));
    RETURN_IF_ERROR(CheckHash(h, "a stored tree node"));
    return h;
  }
  const int64_t k = SplitPoint(n);
  ASSIGN_OR_RETURN(Hash left, SubtreeHash(begin, begin + k, read));
  ASSIGN_OR_RETURN(Hash right, SubtreeHash(begin + k, end, read));
  return NodeHash(left, right);
}

// PATH(m, D[begin:end]) appended to `out` in RFC order (leaf side first).
absl::Status Path(int64_t m, int64_t begin, int64_t end, NodeReader read, std::vector<Hash>* out) {
  const int64_t n = end - begin;
  if (n <= 1) return absl::OkStatus();
  const int64_t k = SplitPoint(n);
  if (m < k) {
    RETURN_IF_ERROR(Path(m, begin, begin + k, read, out));
    ASSIGN_OR_RETURN(Hash right, SubtreeHash(begin + k, end, read));
    out->push_back(std::move(right));
  } else {
    RETURN_IF_ERROR(Path(m - k, begin + k, end, read, out));
    ASSIGN_OR_RETURN(Hash left, SubtreeHash(begin, begin + k, read));
    out->push_back(std::move(left));
  }
  return absl::OkStatus();
}

// SUBPROOF(m, D[begin:end], b).
absl::Status SubProof(int64_t m, int64_t begin, int64_t end, bool b, NodeReader read,
                      std::vector<Hash>* out) {
  const int64_t n = end - begin;
  if (m == n) {
    if (!b) {
      ASSIGN_OR_RETURN(Hash h, SubtreeHash(begin, end, read));
      out->push_back(std::move(h));
    }
    return absl::OkStatus();
  }
  const int64_t k = SplitPoint(n);
  if (m <= k) {
    RETURN_IF_ERROR(SubProof(m, begin, begin + k, b, read, out));
    ASSIGN_OR_RETURN(Hash right, SubtreeHash(begin + k, end, read));
    out->push_back(std::move(right));
  } else {
    RETURN_IF_ERROR(SubProof(m - k, begin + k, end, false, read, out));
    ASSIGN_OR_RETURN(Hash left, SubtreeHash(begin, begin + k, read));
    out->push_back(std::move(left));
  }
  return absl::OkStatus();
}

absl::Status Mismatch(absl::string_view what) { return absl::InvalidArgumentError(what); }

}  // namespace

Hash Sha256(absl::string_view data) {
  // OpenSSL 3's SHA256() looks the algorithm up in its provider on every call, under a lock
  // every thread shares (about half of a short input's time): looked up once here.
  static EVP_MD* const kSha256 = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  Hash out(kHashBytes, '\0');
  auto* digest = reinterpret_cast<unsigned char*>(out.data());
  unsigned int size = 0;
  if (kSha256 == nullptr ||
      EVP_Digest(data.data(), data.size(), digest, &size, kSha256, nullptr) != 1) {
    SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), digest);
  }
  return out;
}

Hash LeafHash(absl::string_view entry) { return Sha256(absl::StrCat(std::string(1, '\0'), entry)); }

Hash NodeHash(absl::string_view left, absl::string_view right) {
  return Sha256(absl::StrCat("\x01", left, right));
}

Hash EmptyRoot() { return Sha256(""); }

absl::StatusOr<std::vector<StoredNode>> NodesForAppend(int64_t index, const Hash& leaf,
                                                       NodeReader read) {
  if (index < 0) return absl::InvalidArgumentError("a leaf index is >= 0");
  RETURN_IF_ERROR(CheckHash(leaf, "the leaf hash"));
  std::vector<StoredNode> out{{0, index, leaf}};
  Hash h = leaf;
  int64_t i = index;
  for (int level = 0; (i & 1) != 0; ++level, i >>= 1) {
    ASSIGN_OR_RETURN(Hash left, read(level, i - 1));
    RETURN_IF_ERROR(CheckHash(left, "a stored tree node"));
    h = NodeHash(left, h);
    out.push_back(StoredNode{level + 1, i >> 1, h});
  }
  return out;
}

absl::StatusOr<Hash> RootHash(int64_t size, NodeReader read) {
  if (size < 0) return absl::InvalidArgumentError("a tree size is >= 0");
  if (size == 0) return EmptyRoot();
  return SubtreeHash(0, size, read);
}

void RootBuilder::Append(const Hash& leaf) {
  subtrees_.push_back(leaf);
  // Each trailing one bit of the old size is a subtree the new leaf completes a level above.
  for (int64_t s = size_; (s & 1) != 0; s >>= 1) {
    Hash right = std::move(subtrees_.back());
    subtrees_.pop_back();
    subtrees_.back() = NodeHash(subtrees_.back(), right);
  }
  ++size_;
}

Hash RootBuilder::Root() const {
  if (subtrees_.empty()) return EmptyRoot();
  // RFC 9162 splits at the largest power of two below the size: the leftmost subtree, then
  // the tree of the rest, from the right.
  Hash h = subtrees_.back();
  for (size_t i = subtrees_.size() - 1; i-- > 0;) h = NodeHash(subtrees_[i], h);
  return h;
}

absl::StatusOr<std::vector<Hash>> InclusionProof(int64_t index, int64_t size, NodeReader read) {
  if (index < 0 || index >= size) {
    return absl::InvalidArgumentError(
        absl::StrCat("leaf ", index, " is not in a tree of ", size, " leaves"));
  }
  std::vector<Hash> out;
  RETURN_IF_ERROR(Path(index, 0, size, read, &out));
  return out;
}

absl::StatusOr<std::vector<Hash>> ConsistencyProof(int64_t old_size, int64_t size,
                                                   NodeReader read) {
  if (old_size < 0 || old_size > size) {
    return absl::InvalidArgumentError(absl::StrCat("a tree of ", old_size,
                                                   " leaves is not a prefix of one of ", size));
  }
  std::vector<Hash> out;
  if (old_size == 0 || old_size == size) return out;
  RETURN_IF_ERROR(SubProof(old_size, 0, size, true, read, &out));
  return out;
}

absl::Status VerifyInclusion(const Hash& leaf, int64_t index, int64_t size,
                             const std::vector<Hash>& proof, const Hash& root) {
  RETURN_IF_ERROR(CheckHash(leaf, "the leaf hash"));
  RETURN_IF_ERROR(CheckHash(root, "the root hash"));
  if (index < 0 || index >= size) {
    return Mismatch(absl::StrCat("inclusion: leaf ", index, " is not in a tree of ", size,
                                 " leaves"));
  }
  int64_t fn = index, sn = size - 1;
  Hash r = leaf;
  for (const Hash& p : proof) {
    RETURN_IF_ERROR(CheckHash(p, "a proof hash"));
    if (sn == 0) return Mismatch("inclusion: the proof is longer than the tree is deep");
    if ((fn & 1) != 0 || fn == sn) {
      r = NodeHash(p, r);
      if ((fn & 1) == 0) {
        while ((fn & 1) == 0 && fn != 0) {
          fn >>= 1;
          sn >>= 1;
        }
      }
    } else {
      r = NodeHash(r, p);
    }
    fn >>= 1;
    sn >>= 1;
  }
  if (sn != 0) return Mismatch("inclusion: the proof is shorter than the tree is deep");
  if (r != root) {
    return Mismatch("inclusion: the proof leads to another root: the row is not in this tree");
  }
  return absl::OkStatus();
}

absl::Status VerifyConsistency(int64_t old_size, int64_t size, const std::vector<Hash>& proof,
                               const Hash& old_root, const Hash& root) {
  RETURN_IF_ERROR(CheckHash(old_root, "the old root hash"));
  RETURN_IF_ERROR(CheckHash(root, "the new root hash"));
  if (old_size < 0 || old_size > size) {
    return Mismatch(absl::StrCat("consistency: a tree of ", old_size,
                                 " leaves cannot be a prefix of one of ", size));
  }
  if (old_size == size) {
    if (!proof.empty()) return Mismatch("consistency: equal sizes need an empty proof");
    if (old_root != root) {
      return Mismatch(absl::StrCat("consistency: two different roots for ", size,
                                   " leaves: a split view (fork) of the log"));
    }
    return absl::OkStatus();
  }
  if (old_size == 0) {
    if (!proof.empty()) return Mismatch("consistency: from the empty tree the proof is empty");
    if (old_root != EmptyRoot()) return Mismatch("consistency: the empty tree has another root");
    return absl::OkStatus();
  }
  if (proof.empty()) return Mismatch("consistency: the proof is empty");
  for (const Hash& p : proof) RETURN_IF_ERROR(CheckHash(p, "a proof hash"));
  std::vector<Hash> path;
  if (absl::has_single_bit(static_cast<uint64_t>(old_size))) path.push_back(old_root);
  path.insert(path.end(), proof.begin(), proof.end());
  int64_t fn = old_size - 1, sn = size - 1;
  while ((fn & 1) != 0) {
    fn >>= 1;
    sn >>= 1;
  }
  Hash fr = path[0], sr = path[0];
  for (size_t i = 1; i < path.size(); ++i) {
    const Hash& c = path[i];
    if (sn == 0) return Mismatch("consistency: the proof is longer than the tree is deep");
    if ((fn & 1) != 0 || fn == sn) {
      fr = NodeHash(c, fr);
      sr = NodeHash(c, sr);
      if ((fn & 1) == 0) {
        while ((fn & 1) == 0 && fn != 0) {
          fn >>= 1;
          sn >>= 1;
        }
      }
    } else {
      sr = NodeHash(sr, c);
    }
    fn >>= 1;
    sn >>= 1;
  }
  if (sn != 0) return Mismatch("consistency: the proof is shorter than the tree is deep");
  if (fr != old_root) {
    return Mismatch(absl::StrCat("consistency: the proof does not lead to the old root: the ",
                                 old_size, "-row log was rewritten, not extended"));
  }
  if (sr != root) {
    return Mismatch("consistency: the proof does not lead to the new root: the new log does not "
                    "extend the old one");
  }
  return absl::OkStatus();
}

}  // namespace fairvault::core::transparency
