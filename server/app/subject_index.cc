// Appending to the subject index.
#include "server/app/subject_index.h"

#include <cstring>

namespace fairvault::server {

void SubjectIndex::Reserve(int64_t rows) {
  row_of_key_.reserve(rows);
  codes_.reserve(rows * num_attributes_);
}

absl::string_view SubjectIndex::Keep(absl::string_view key) {
  if (key.size() > kBlockBytes - block_used_) {
    blocks_.push_back(std::make_unique<char[]>(std::max(kBlockBytes, key.size())));
    block_used_ = 0;
  }
  char* out = blocks_.back().get() + block_used_;
  std::memcpy(out, key.data(), key.size());
  block_used_ += key.size();
  return absl::string_view(out, key.size());
}

std::optional<SubjectIndex::Repeat> SubjectIndex::Append(const Keys& keys, const Codes& codes) {
  const int64_t first_row = size();
  const size_t blocks = blocks_.size();
  const size_t block_used = block_used_;
  row_of_key_.reserve(row_of_key_.size() + keys.size());
  for (int64_t i = 0; i < keys.size(); ++i) {
    auto it = row_of_key_.find(keys[i]);
    if (it != row_of_key_.end()) {
      const int64_t earlier = it->second >= first_row ? it->second - first_row : -1;
      for (int64_t j = 0; j < i; ++j) row_of_key_.erase(keys[j]);
      blocks_.resize(blocks);
      block_used_ = block_used;
      return Repeat{i, earlier};
    }
    row_of_key_.emplace(Keep(keys[i]), static_cast<uint32_t>(first_row + i));
  }
  codes_.insert(codes_.end(), codes.begin(), codes.end());
  return std::nullopt;
}

void SubjectIndex::RemoveLast(const Keys& keys) {
  for (const std::string& key : keys) row_of_key_.erase(key);
  codes_.resize(codes_.size() - static_cast<size_t>(keys.size()) * num_attributes_);
  // The keys' arena bytes stay allocated until the index goes: a failed store is rare.
}

}  // namespace fairvault::server
