// In-memory index of a dataset's subjects: key -> row, and each row's category codes. Built
// from the stored batches on first use, appended to on import. Holds protected data: it
// never leaves the server except through a charged mechanism.
#ifndef FAIRVAULT_SERVER_APP_SUBJECT_INDEX_H_
#define FAIRVAULT_SERVER_APP_SUBJECT_INDEX_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace fairvault::server {

class SubjectIndex {
 public:
  explicit SubjectIndex(int num_attributes) : num_attributes_(num_attributes) {}

  int num_attributes() const { return num_attributes_; }
  int64_t size() const { return static_cast<int64_t>(codes_.size()) / num_attributes_; }
  // Row of a key, or -1.
  int64_t Find(const std::string& key) const {
    auto it = row_of_key_.find(key);
    return it == row_of_key_.end() ? int64_t{-1} : static_cast<int64_t>(it->second);
  }
  uint16_t Code(int64_t row, int attribute) const {
    return codes_[row * num_attributes_ + attribute];
  }
  // Appends keys with their row-major codes. Callers check for duplicates first.
  template <typename Keys, typename Codes>
  void Append(const Keys& keys, const Codes& codes) {
    uint32_t row = static_cast<uint32_t>(size());
    for (const std::string& key : keys) row_of_key_.emplace(key, row++);
    codes_.insert(codes_.end(), codes.begin(), codes.end());
  }
  void Reserve(int64_t rows);

 private:
  int num_attributes_;
  absl::flat_hash_map<std::string, uint32_t> row_of_key_;
  std::vector<uint16_t> codes_;
};

}  // namespace fairvault::server

#endif  // FAIRVAULT_SERVER_APP_SUBJECT_INDEX_H_
