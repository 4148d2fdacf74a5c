// Appending to the subject index.
#include "server/app/subject_index.h"

namespace fairvault::server {

void SubjectIndex::Reserve(int64_t rows) {
  row_of_key_.reserve(rows);
  codes_.reserve(rows * num_attributes_);
}

}  // namespace fairvault::server
