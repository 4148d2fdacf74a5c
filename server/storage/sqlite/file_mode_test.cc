// Issue 19 §2: what the SQLite store writes holds protected attributes, so a new database, its
// -wal and -shm files and a backup are 0600 even under the usual umask 022.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/storage/sqlite/sqlite_store.h"

namespace fairvault::server::storage {
namespace {

using ::fairvault::testing::IsOk;
using ::fairvault::testing::StatusIs;

// The permission bits of `path`, or -1 when it does not exist.
int ModeOf(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return -1;
  return static_cast<int>(st.st_mode & 07777);
}

// Each test runs under umask 022 (as a login shell) in its own directory.
class SqliteFileModeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    old_umask_ = umask(022);
    std::string pattern = absl::StrCat(::testing::TempDir(), "fairvault_file_mode_XXXXXX");
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    umask(old_umask_);
    std::system(absl::StrCat("rm -rf '", dir_, "'").c_str());
  }
  std::string Path(const std::string& name) const { return absl::StrCat(dir_, "/", name); }

  // A store with one account written, so that the WAL holds a transaction.
  void OpenAndWrite(const std::string& db) {
    auto store = SqliteStore::Open(db);
    ASSERT_THAT(store.status(), IsOk());
    AccountRecord account;
    account.name = "regulator";
    account.role = Role::kRegulator;
    account.key_salt = std::string(16, 's');
    account.key_hash = std::string(32, 'h');
    ASSERT_THAT((*store)->CreateAccount(account).status(), IsOk());
    // While the store is open its side files exist.
    EXPECT_EQ(ModeOf(db), 0600);
    EXPECT_EQ(ModeOf(db + "-wal"), 0600);
    EXPECT_EQ(ModeOf(db + "-shm"), 0600);
  }

  mode_t old_umask_ = 0;
  std::string dir_;
};

TEST_F(SqliteFileModeTest, NewDatabaseAndItsWalAndShmAreOwnerOnly) {
  OpenAndWrite(Path("vault.db"));
  EXPECT_EQ(ModeOf(Path("vault.db")), 0600);
}

TEST_F(SqliteFileModeTest, ExistingDatabaseKeepsItsMode) {
  const std::string db = Path("vault.db");
  OpenAndWrite(db);
  ASSERT_EQ(chmod(db.c_str(), 0640), 0);
  ASSERT_THAT(SqliteStore::Open(db).status(), IsOk());
  EXPECT_EQ(ModeOf(db), 0640);  // the operator's choice, as documented
}

TEST_F(SqliteFileModeTest, BackupIsOwnerOnlyAndNeverReplacesAFile) {
  const std::string db = Path("vault.db");
  OpenAndWrite(db);
  const std::string out = Path("backup.db");
  ASSERT_THAT(SqliteStore::Backup(db, out).status(), IsOk());
  EXPECT_EQ(ModeOf(out), 0600);
  // A second backup to the same name is refused and leaves the first one as it was.
  EXPECT_THAT(SqliteStore::Backup(db, out).status(),
              StatusIs(absl::StatusCode::kAlreadyExists, "choose a new file"));
  EXPECT_EQ(ModeOf(out), 0600);
  ASSERT_THAT(SqliteStore::Open(out).status(), IsOk());
}

TEST_F(SqliteFileModeTest, BackupRefusesASymlinkAtTheTarget) {
  const std::string db = Path("vault.db");
  OpenAndWrite(db);
  const std::string out = Path("link.db");
  ASSERT_EQ(symlink(Path("elsewhere.db").c_str(), out.c_str()), 0);
  EXPECT_THAT(SqliteStore::Backup(db, out).status(), StatusIs(absl::StatusCode::kAlreadyExists));
  EXPECT_EQ(ModeOf(Path("elsewhere.db")), -1);  // nothing was written through the link
}

}  // namespace
}  // namespace fairvault::server::storage
