// In-memory index of a dataset's subjects: key -> row, and each row's category codes. Built
// from the stored batches on first use, appended to on import. Holds protected data: it
// never leaves the server except through a charged mechanism.
#ifndef FAIRVAULT_SERVER_APP_SUBJECT_INDEX_H_
#define FAIRVAULT_SERVER_APP_SUBJECT_INDEX_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/repeated_field.h"

namespace fairvault::server {

class SubjectIndex {
 public:
  explicit SubjectIndex(int num_attributes) : num_attributes_(num_attributes) {}
  SubjectIndex(const SubjectIndex&) = delete;
  SubjectIndex& operator=(const SubjectIndex&) = delete;

  int num_attributes() const { return num_attributes_; }
  int64_t size() const { return static_cast<int64_t>(codes_.size()) / num_attributes_; }
  // Row of a key, or -1.
  int64_t Find(absl::string_view key) const {
    auto it = row_of_key_.find(key);
    return it == row_of_key_.end() ? int64_t{-1} : static_cast<int64_t>(it->second);
  }
  // Find for each of `keys`, in order (-1 where a key is not a subject). The hash table's
  // slots are fetched a few keys ahead: a lookup in a large index is a cache miss.
  template <typename Keys>
  std::vector<int32_t> FindAll(const Keys& keys) const {
    constexpr size_t kAhead = 8;
    std::vector<int32_t> rows(keys.size());
    for (size_t i = 0; i < rows.size() && i < kAhead; ++i) row_of_key_.prefetch(keys[i]);
    for (size_t i = 0; i < rows.size(); ++i) {
      if (i + kAhead < rows.size()) row_of_key_.prefetch(keys[i + kAhead]);
      rows[i] = static_cast<int32_t>(Find(keys[i]));
    }
    return rows;
  }
  uint16_t Code(int64_t row, int attribute) const {
    return codes_[row * num_attributes_ + attribute];
  }

  // A key of an appended batch that is already a subject: its position in the batch, and the
  // position of the earlier key of the same batch it repeats (-1: indexed before the batch).
  struct Repeat {
    int64_t position = 0;
    int64_t earlier_position = -1;
  };
  using Keys = google::protobuf::RepeatedPtrField<std::string>;
  using Codes = google::protobuf::RepeatedField<uint32_t>;
  // Appends `keys` as new rows with their row-major `codes`, all or none: on the first key that
  // repeats a subject (indexed or earlier in `keys`) nothing is added and the repeat returned.
  std::optional<Repeat> Append(const Keys& keys, const Codes& codes);
  // Removes the last batch appended (keys.size() rows), e.g. when storing it failed.
  void RemoveLast(const Keys& keys);
  void Reserve(int64_t rows);

 private:
  static constexpr size_t kBlockBytes = 1 << 20;
  // Copies a key into the arena; the view stays valid as long as the index.
  absl::string_view Keep(absl::string_view key);

  int num_attributes_;
  // Keys live in fixed-size blocks (no allocation per key); the map holds views into them.
  std::vector<std::unique_ptr<char[]>> blocks_;
  size_t block_used_ = kBlockBytes;
  absl::flat_hash_map<absl::string_view, uint32_t> row_of_key_;
  std::vector<uint16_t> codes_;
};

}  // namespace fairvault::server

#endif  // FAIRVAULT_SERVER_APP_SUBJECT_INDEX_H_
