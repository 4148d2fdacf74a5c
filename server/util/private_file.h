// Files only their owner may read (mode 0600): what the server writes that holds protected
// data or a secret — the SQLite database, its backups, the bootstrap key file.
#ifndef FAIRVAULT_SERVER_UTIL_PRIVATE_FILE_H_
#define FAIRVAULT_SERVER_UTIL_PRIVATE_FILE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace fairvault::server {

// The mode of every file made here: read and write for the owner only.
inline constexpr unsigned kPrivateFileMode = 0600;

// A new regular file with mode exactly 0600, whatever the process umask (the mode is set on
// the new descriptor, before its content is written). The name is taken at Create, so a caller
// can reserve it before doing work whose result goes there (creating an account whose key is
// shown once). Until Commit the file is removed when the object is destroyed.
// Not thread-safe; move-only.
class NewPrivateFile {
 public:
  // AlreadyExists if anything exists at `path` (a dangling symlink too): nothing is changed
  // then. Other failures (no such directory, no permission) are FailedPrecondition naming
  // `path`.
  static absl::StatusOr<NewPrivateFile> Create(const std::string& path);

  NewPrivateFile(NewPrivateFile&& other) noexcept;
  NewPrivateFile& operator=(NewPrivateFile&&) = delete;
  NewPrivateFile(const NewPrivateFile&) = delete;
  ~NewPrivateFile();

  // Writes `content`, fsyncs and closes the file, which then stays. DataLoss naming the path
  // when that fails (the file is removed). At most once.
  absl::Status Commit(absl::string_view content);

  const std::string& path() const { return path_; }

 private:
  NewPrivateFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}

  std::string path_;
  int fd_ = -1;  // -1 once committed or moved from
};

// NewPrivateFile::Create then Commit(""): an empty 0600 file.
absl::Status CreatePrivateFile(const std::string& path);

// NewPrivateFile::Create then Commit(content).
absl::Status WriteNewPrivateFile(const std::string& path, absl::string_view content);

}  // namespace fairvault::server

#endif  // FAIRVAULT_SERVER_UTIL_PRIVATE_FILE_H_
