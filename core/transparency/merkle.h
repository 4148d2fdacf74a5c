// The ledger's Merkle tree, hashed as RFC 9162 (Certificate Transparency 2.0) §2.1 does:
// leaf hash SHA-256(0x00 || entry), node hash SHA-256(0x01 || left || right), the tree over n
// leaves split at the largest power of two below n. Proofs are built from the hashes of the
// complete subtrees that appending leaves produces (stored as they complete, so nothing is
// rebuilt: appending leaf i stores 1 + the number of trailing one bits of i hashes), and
// verified with RFC 9162's own algorithms (§2.1.3.2, §2.1.4.2), which need nothing but the
// proof, the sizes and the roots.
#ifndef FAIRVAULT_CORE_TRANSPARENCY_MERKLE_H_
#define FAIRVAULT_CORE_TRANSPARENCY_MERKLE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace fairvault::core::transparency {

// A 32-byte SHA-256 digest, as raw bytes.
using Hash = std::string;
inline constexpr size_t kHashBytes = 32;

Hash Sha256(absl::string_view data);
// SHA-256(0x00 || entry).
Hash LeafHash(absl::string_view entry);
// SHA-256(0x01 || left || right).
Hash NodeHash(absl::string_view left, absl::string_view right);
// The root of the empty tree: SHA-256 of nothing.
Hash EmptyRoot();

// The hash of the complete subtree at `level` (its 2^level leaves) with index `index` at that
// level, i.e. over leaves [index * 2^level, (index + 1) * 2^level). Level 0 is the leaf hashes.
using NodeReader = absl::FunctionRef<absl::StatusOr<Hash>(int level, int64_t index)>;

struct StoredNode {
  int level = 0;
  int64_t index = 0;
  Hash hash;
};

// The complete subtrees to store when the leaf with hash `leaf` becomes leaf `index` (0-based)
// of a tree of `index` leaves: the leaf itself and each subtree it completes. `read` needs to
// return only nodes stored before.
absl::StatusOr<std::vector<StoredNode>> NodesForAppend(int64_t index, const Hash& leaf,
                                                       NodeReader read);

// MTH(D[0:size]) (EmptyRoot() for size 0).
absl::StatusOr<Hash> RootHash(int64_t size, NodeReader read);

// The root of a tree whose every leaf the caller has, built leaf by leaf with one hash per set
// bit of the size (the complete subtrees of the tree's right edge): how a verifier who reads the
// whole log recomputes a checkpoint's root without storing the tree.
class RootBuilder {
 public:
  // Appends leaf hash `leaf` as leaf size().
  void Append(const Hash& leaf);
  int64_t size() const { return size_; }
  // MTH of the leaves appended so far (EmptyRoot() for none).
  Hash Root() const;

 private:
  int64_t size_ = 0;
  std::vector<Hash> subtrees_;  // largest (leftmost) first
};
// PATH(index, D[0:size]) (RFC 9162 §2.1.3.1).
absl::StatusOr<std::vector<Hash>> InclusionProof(int64_t index, int64_t size, NodeReader read);
// PROOF(old_size, D[0:size]) (RFC 9162 §2.1.4.1); empty when old_size is 0 or equals size.
absl::StatusOr<std::vector<Hash>> ConsistencyProof(int64_t old_size, int64_t size,
                                                   NodeReader read);

// RFC 9162 §2.1.3.2. OK iff `proof` shows the leaf with hash `leaf` at `index` in the tree of
// `size` leaves with root `root`; otherwise InvalidArgument saying what did not match.
absl::Status VerifyInclusion(const Hash& leaf, int64_t index, int64_t size,
                             const std::vector<Hash>& proof, const Hash& root);
// RFC 9162 §2.1.4.2. OK iff `proof` shows the tree of `old_size` leaves with root `old_root`
// is a prefix of the tree of `size` leaves with root `root`.
absl::Status VerifyConsistency(int64_t old_size, int64_t size, const std::vector<Hash>& proof,
                               const Hash& old_root, const Hash& root);

}  // namespace fairvault::core::transparency

#endif  // FAIRVAULT_CORE_TRANSPARENCY_MERKLE_H_
