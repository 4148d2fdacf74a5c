// Private files: created with O_EXCL and mode 0600 set on the descriptor (private_file.h).
#include "server/util/private_file.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace fairvault::server {

absl::StatusOr<NewPrivateFile> NewPrivateFile::Create(const std::string& path) {
  // O_EXCL with O_CREAT also refuses a symlink at `path`, even a dangling one.
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, kPrivateFileMode);
  if (fd < 0) {
    const int err = errno;
    if (err == EEXIST) {
      return absl::AlreadyExistsError(
          absl::StrCat(path, " exists; choose a new file name (nothing was written)"));
    }
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create ", path, ": ", std::strerror(err)));
  }
  // open() applied the umask (0277 would have left 0400). The file is new and ours, so setting
  // the mode on its descriptor races with nobody.
  if (fchmod(fd, kPrivateFileMode) != 0) {
    const int err = errno;
    close(fd);
    unlink(path.c_str());
    return absl::FailedPreconditionError(
        absl::StrCat("cannot set mode 0600 on ", path, ": ", std::strerror(err)));
  }
  return NewPrivateFile(path, fd);
}

NewPrivateFile::NewPrivateFile(NewPrivateFile&& other) noexcept
    : path_(std::move(other.path_)), fd_(std::exchange(other.fd_, -1)) {}

NewPrivateFile::~NewPrivateFile() {
  if (fd_ < 0) return;
  close(fd_);
  unlink(path_.c_str());
}

absl::Status NewPrivateFile::Commit(absl::string_view content) {
  if (fd_ < 0) return absl::FailedPreconditionError(absl::StrCat(path_, " was already written"));
  int err = 0;
  size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = write(fd_, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      err = n < 0 ? errno : EIO;
      break;
    }
    done += static_cast<size_t>(n);
  }
  if (err == 0 && fsync(fd_) != 0) err = errno;
  if (close(std::exchange(fd_, -1)) != 0 && err == 0) err = errno;
  if (err != 0) {
    unlink(path_.c_str());
    return absl::DataLossError(
        absl::StrCat("cannot write ", path_, ": ", std::strerror(err), " (the file was removed)"));
  }
  return absl::OkStatus();
}

absl::Status CreatePrivateFile(const std::string& path) {
  absl::StatusOr<NewPrivateFile> file = NewPrivateFile::Create(path);
  if (!file.ok()) return file.status();
  return file->Commit("");
}

absl::Status WriteNewPrivateFile(const std::string& path, absl::string_view content) {
  absl::StatusOr<NewPrivateFile> file = NewPrivateFile::Create(path);
  if (!file.ok()) return file.status();
  return file->Commit(content);
}

}  // namespace fairvault::server
