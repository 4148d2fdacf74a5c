// Runs the real fairvault-server binary for end-to-end tests: bootstrap a regulator key,
// start on a loopback port chosen by the kernel, stop with SIGTERM or kill with SIGKILL.
#ifndef FAIRVAULT_TESTS_SERVER_PROCESS_H_
#define FAIRVAULT_TESTS_SERVER_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/lib/client.h"

namespace fairvault::testing {

// Runs a command to completion and returns its stdout; error if it exits non-zero.
absl::StatusOr<std::string> RunCommand(const std::vector<std::string>& argv);

// A fresh temporary path for a database file (the file does not exist yet).
std::string TempDatabasePath(const std::string& stem);

class ServerProcess {
 public:
  explicit ServerProcess(std::string db_path) : db_path_(std::move(db_path)) {}
  ~ServerProcess();

  // `fairvault-server bootstrap`: the new regulator's API key.
  absl::StatusOr<std::string> Bootstrap(const std::string& name);
  // `fairvault-server backup --db <this db> --out out` (the server may be running); its stdout.
  absl::StatusOr<std::string> Backup(const std::string& out) const;
  // Extra `serve` flags for the next Start(), e.g. {"--metrics-listen", "127.0.0.1:0"} (then
  // Start also waits for the metrics port).
  void set_serve_flags(std::vector<std::string> flags) { serve_flags_ = std::move(flags); }
  // Appends the server's stdout and stderr to the file `path` (instead of a pipe and the test's
  // stderr), for tests that read what the server logs.
  void set_log_path(std::string path) { log_path_ = std::move(path); }
  // Starts `fairvault-server serve` on 127.0.0.1:0 and waits for its port.
  absl::Status Start();
  // SIGTERM and wait (graceful), or SIGKILL and wait (crash).
  absl::Status Stop();
  absl::Status Kill();

  int port() const { return port_; }
  // The metrics endpoint's port (0 unless started with --metrics-listen).
  int metrics_port() const { return metrics_port_; }
  std::string target() const { return "127.0.0.1:" + std::to_string(port_); }
  const std::string& db_path() const { return db_path_; }
  // A client for `api_key` (empty: no key).
  std::unique_ptr<client::Client> Connect(const std::string& api_key) const;

 private:
  absl::Status Wait();
  std::string db_path_;
  pid_t pid_ = -1;
  int port_ = 0;
  int metrics_port_ = 0;
  std::vector<std::string> serve_flags_;
  std::string log_path_;
};

}  // namespace fairvault::testing

#endif  // FAIRVAULT_TESTS_SERVER_PROCESS_H_
