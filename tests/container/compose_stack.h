// The compose deployment as an operator runs it, for tests/container/container_test.cc: a Docker
// engine of the test's own (dockerd started by PID, its socket under a temporary directory, its
// images and build cache in a directory kept between runs), and a copy of the repository in
// which the README's compose steps run (`deploy/compose-secrets.sh`, `docker-compose ... up`),
// reached only through the replicas' ports published on 127.0.0.1.
#ifndef FAIRVAULT_TESTS_CONTAINER_COMPOSE_STACK_H_
#define FAIRVAULT_TESTS_CONTAINER_COMPOSE_STACK_H_

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/lib/client.h"

namespace fairvault::testing {

// What a shell command printed (stdout and stderr together) and its exit status.
struct CommandResult {
  int status = -1;
  std::string output;
  bool ok() const { return status == 0; }
};

// Runs `command` with /bin/bash -c (in `dir` when given), printing it and how long it took
// (when `quiet`, only if it fails: the polls).
CommandResult Shell(const std::string& command, const std::string& dir = "", bool quiet = false);

// A free TCP port on 127.0.0.1 (bound and released: another process may take it meanwhile).
int FreeLoopbackPort();

// dockerd as a child of the test: data root `data_root` (images, build cache, volumes),
// exec root, pid file, socket and log under `run_dir`. DOCKER_HOST points at it while it runs,
// so every docker and docker-compose command of the process and its children uses it.
class DockerEngine {
 public:
  // Starts dockerd and waits (60 s at most) until it answers. An error says why it could not
  // (no privileges, no dockerd, another run holding `data_root`), with the log's last lines.
  static absl::StatusOr<std::unique_ptr<DockerEngine>> Start(const std::string& data_root,
                                                             const std::string& run_dir);
  ~DockerEngine();
  // SIGTERM, then SIGKILL after 60 s; waits for the process.
  absl::Status Stop();

 private:
  DockerEngine() = default;
  pid_t pid_ = -1;
  int lock_fd_ = -1;
  std::string run_dir_;
};

// A copy of the repository in `dir`, and the compose project in it.
class ComposeStack {
 public:
  // Copies the files git knows in `source_root` (tracked, and untracked but not ignored) to
  // `dir`: a checkout as an operator has it, where deploy/secrets and deploy/.env are the
  // test's own.
  static absl::StatusOr<std::unique_ptr<ComposeStack>> Copy(const std::string& source_root,
                                                            const std::string& dir);

  const std::string& dir() const { return dir_; }
  // A command in the copy's root.
  CommandResult Run(const std::string& command, bool quiet = false) const {
    return Shell(command, dir_, quiet);
  }
  // `docker-compose -f deploy/docker-compose.yml ARGS` in the copy's root.
  CommandResult Compose(const std::string& args, bool quiet = false) const;

  // The container of `service` ("" if none), its main process's PID on this host (0 if not
  // running; kill -9 of it is a crash, which the restart policy answers, where `docker kill`
  // would count as a manual stop), its restart count and whether Docker sees it healthy.
  std::string ContainerId(const std::string& service) const;
  pid_t HostPid(const std::string& service) const;
  int RestartCount(const std::string& service) const;
  // When Docker last started the service's container (absl::InfinitePast() if unknown).
  absl::Time StartedAt(const std::string& service) const;
  std::string Health(const std::string& service) const;
  // Waits until every service in `services` is healthy.
  absl::Status WaitHealthy(const std::vector<std::string>& services,
                           std::chrono::seconds limit) const;

  // The replicas' host ports (127.0.0.1), set in deploy/.env by PublishOnLoopback.
  void PublishOnLoopback(int port1, int port2) {
    ports_[0] = port1;
    ports_[1] = port2;
  }
  int port(int replica) const { return ports_[replica - 1]; }
  // A TLS client of replica 1 or 2 with the stack's CA (deploy/secrets/tls/ca.pem).
  std::unique_ptr<client::Client> Connect(int replica, const std::string& api_key) const;
  // A file of the copy, e.g. "deploy/secrets/regulator.key" ("" if unreadable).
  std::string ReadFile(const std::string& relative) const;

 private:
  std::string dir_;
  int ports_[2] = {0, 0};
};

}  // namespace fairvault::testing

#endif  // FAIRVAULT_TESTS_CONTAINER_COMPOSE_STACK_H_
