// A private PostgreSQL server for tests, from Debian's postgresql package: initdb into a new
// temporary directory and pg_ctl start, listening on a Unix socket in that directory only (no
// TCP port, so tests never collide with each other or with a system cluster). initdb refuses to
// run as root, so as root the server runs as the unprivileged `postgres` user the package
// creates.
#ifndef FAIRVAULT_SERVER_STORAGE_POSTGRES_TEST_POSTGRES_H_
#define FAIRVAULT_SERVER_STORAGE_POSTGRES_TEST_POSTGRES_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace fairvault::server::storage {

class TestPostgres {
 public:
  struct Options {
    // fsync off makes tests fast; benchmarks keep it on (a commit then waits for the disk).
    bool fsync = false;
    int max_connections = 200;
  };
  // FailedPrecondition (saying what to install) without the postgresql package. First stops
  // and removes the servers of test processes that died without stopping theirs (a crash
  // skips the destructor): each directory names the process that made it (owner.pid).
  static absl::StatusOr<std::unique_ptr<TestPostgres>> Start(Options options);
  static absl::StatusOr<std::unique_ptr<TestPostgres>> Start() { return Start(Options()); }
  // Stops the server at once and removes its directory.
  ~TestPostgres();
  TestPostgres(const TestPostgres&) = delete;
  TestPostgres& operator=(const TestPostgres&) = delete;

  // The libpq URI of database `db` (what `fairvault-server --db` takes).
  std::string Uri(const std::string& db) const;
  // Creates the empty database `db`; returns its URI.
  absl::StatusOr<std::string> CreateDatabase(const std::string& db);
  // Stops the server (immediate mode: like a crash, connections are cut) and starts it again.
  absl::Status Stop();
  absl::Status Restart();
  // Runs `sql` on `db` through a raw connection, as someone with database access (not the
  // vault) could; returns the error message, empty on success.
  std::string Exec(const std::string& db, const std::string& sql) const;
  // The first column of the first row as an integer; -1 on failure.
  int64_t Scalar(const std::string& db, const std::string& sql) const;
  const std::string& dir() const { return dir_; }

 private:
  TestPostgres(std::string bin, std::string dir, Options options)
      : bin_(std::move(bin)), dir_(std::move(dir)), options_(options) {}
  // Runs a server binary (as `postgres` when we are root); its output goes to dir/commands.log.
  absl::Status Run(const std::string& tool, const std::string& args) const;
  absl::Status StartServer() const;
  // Stops and removes every /tmp/fairvault-pg-* whose owner.pid names a process that is gone.
  static void RemoveOrphans(const std::string& bin);

  std::string bin_;  // /usr/lib/postgresql/N/bin
  std::string dir_;  // data in dir/data, socket in dir
  Options options_;
  bool running_ = false;
};

}  // namespace fairvault::server::storage

#endif  // FAIRVAULT_SERVER_STORAGE_POSTGRES_TEST_POSTGRES_H_
