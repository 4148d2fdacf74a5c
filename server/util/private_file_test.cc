// Private files are 0600 whatever the umask, new, and never written through an existing name.
#include "server/util/private_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fairvault::server {
namespace {

using ::fairvault::testing::IsOk;
using ::fairvault::testing::StatusIs;

int ModeOf(const std::string& path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return -1;
  return static_cast<int>(st.st_mode & 07777);
}

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string TempPath(const std::string& name) {
  const std::string path =
      absl::StrCat(::testing::TempDir(), "fairvault_private_file_", getpid(), "_", name);
  unlink(path.c_str());
  return path;
}

TEST(PrivateFileTest, NewFileIsOwnerOnlyUnderAnyUmask) {
  for (mode_t mask : {mode_t{022}, mode_t{0}, mode_t{0277}}) {
    const mode_t old = umask(mask);
    const std::string path = TempPath(absl::StrCat("umask", mask));
    EXPECT_THAT(WriteNewPrivateFile(path, "fv_1_key\n"), IsOk());
    umask(old);
    EXPECT_EQ(ModeOf(path), 0600) << "umask " << mask;
    EXPECT_EQ(Read(path), "fv_1_key\n");
    unlink(path.c_str());
  }
}

TEST(PrivateFileTest, NeverOverwritesAFile) {
  const std::string path = TempPath("existing");
  std::ofstream(path) << "the first key\n";
  EXPECT_THAT(WriteNewPrivateFile(path, "another key\n"),
              StatusIs(absl::StatusCode::kAlreadyExists, "choose a new file name"));
  EXPECT_EQ(Read(path), "the first key\n");
  EXPECT_THAT(CreatePrivateFile(path), StatusIs(absl::StatusCode::kAlreadyExists));
  unlink(path.c_str());
}

TEST(PrivateFileTest, NeverWritesThroughASymlink) {
  const std::string target = TempPath("target");
  const std::string link = TempPath("link");
  ASSERT_EQ(symlink(target.c_str(), link.c_str()), 0);
  EXPECT_THAT(WriteNewPrivateFile(link, "secret"), StatusIs(absl::StatusCode::kAlreadyExists));
  EXPECT_EQ(ModeOf(target), -1);
  unlink(link.c_str());
}

TEST(PrivateFileTest, AnUncommittedFileIsRemoved) {
  const std::string path = TempPath("reserved");
  {
    auto file = NewPrivateFile::Create(path);
    ASSERT_THAT(file.status(), IsOk());
    EXPECT_EQ(ModeOf(path), 0600);  // the name is taken at once
  }
  EXPECT_EQ(ModeOf(path), -1);
  auto file = NewPrivateFile::Create(path);
  ASSERT_THAT(file.status(), IsOk());
  EXPECT_THAT(file->Commit("k\n"), IsOk());
  EXPECT_EQ(Read(path), "k\n");
  unlink(path.c_str());
}

TEST(PrivateFileTest, MissingDirectoryNamesThePath) {
  const std::string path = TempPath("no/such/dir/key");
  EXPECT_THAT(WriteNewPrivateFile(path, "k"),
              StatusIs(absl::StatusCode::kFailedPrecondition, path));
}

}  // namespace
}  // namespace fairvault::server
