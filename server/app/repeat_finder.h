// Finding a repeated subject key among a stream of keys (a table may name each subject once).
#ifndef FAIRVAULT_SERVER_APP_REPEAT_FINDER_H_
#define FAIRVAULT_SERVER_APP_REPEAT_FINDER_H_

#include <cstdint>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "absl/strings/string_view.h"

namespace fairvault::server {

// Keys are added one by one and each is hashed once: the table is keyed by the 64-bit hash, so
// growing it never reads the keys again (a map keyed by the strings rehashes every key at each
// growth, which dominated the upload of a million rows). Keys are compared only when hashes
// are equal. Not thread-safe.
class RepeatFinder {
 public:
  void Reserve(int64_t keys) { first_.reserve(keys); }
  // The row passed with an earlier equal key, or 0 for a new key. `key` must outlive the
  // finder; rows are > 0.
  int64_t Add(absl::string_view key, int64_t row) {
    auto [it, inserted] = first_.try_emplace(absl::Hash<absl::string_view>{}(key), key, row);
    if (inserted) return 0;
    if (it->second.first == key) return it->second.second;
    // A different key with the same hash (rare): exact comparison from here on.
    auto [other, new_key] = collided_.try_emplace(key, row);
    return new_key ? 0 : other->second;
  }

 private:
  absl::flat_hash_map<uint64_t, std::pair<absl::string_view, int64_t>> first_;
  absl::flat_hash_map<absl::string_view, int64_t> collided_;
};

}  // namespace fairvault::server

#endif  // FAIRVAULT_SERVER_APP_REPEAT_FINDER_H_
