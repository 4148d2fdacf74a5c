// fork/exec plumbing for the end-to-end tests.
#include "tests/server_process.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

#ifndef FAIRVAULT_SERVER_BINARY
#error "FAIRVAULT_SERVER_BINARY must be defined by the build"
#endif

namespace fairvault::testing {
namespace {

// Starts argv with stdout on a pipe; returns the pid and the read end.
absl::Status Spawn(const std::vector<std::string>& argv, pid_t* pid, int* out_fd) {
  int fds[2];
  if (pipe(fds) != 0) return absl::InternalError("pipe failed");
  *pid = fork();
  if (*pid < 0) return absl::InternalError("fork failed");
  if (*pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    close(fds[0]);
    close(fds[1]);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  close(fds[1]);
  *out_fd = fds[0];
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> RunCommand(const std::vector<std::string>& argv) {
  pid_t pid;
  int fd;
  if (auto s = Spawn(argv, &pid, &fd); !s.ok()) return s;
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) out.append(buf, n);
  close(fd);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::InternalError(absl::StrCat(argv[0], " failed with status ", status));
  }
  return out;
}

std::string TempDatabasePath(const std::string& stem) {
  static std::atomic<int> counter{0};
  const char* dir = getenv("TMPDIR");
  return absl::StrCat(dir ? dir : "/tmp", "/fairvault-", stem, "-", getpid(), "-", counter++,
                      ".db");
}

ServerProcess::~ServerProcess() {
  if (pid_ > 0) (void)Kill();
  for (const char* suffix : {"", "-wal", "-shm"}) unlink((db_path_ + suffix).c_str());
}

absl::StatusOr<std::string> ServerProcess::Bootstrap(const std::string& name) {
  auto out = RunCommand({FAIRVAULT_SERVER_BINARY, "bootstrap", "--db", db_path_, "--name", name});
  if (!out.ok()) return out.status();
  return std::string(absl::StripAsciiWhitespace(*out));
}

absl::StatusOr<std::string> ServerProcess::Backup(const std::string& out) const {
  return RunCommand({FAIRVAULT_SERVER_BINARY, "backup", "--db", db_path_, "--out", out});
}

absl::Status ServerProcess::Start() {
  int fd;
  if (auto s =
          Spawn({FAIRVAULT_SERVER_BINARY, "serve", "--db", db_path_, "--listen", "127.0.0.1:0"},
                &pid_, &fd);
      !s.ok()) {
    return s;
  }
  // Read the first line: "fairvault-server listening on port N".
  std::string line;
  char c;
  while (read(fd, &c, 1) == 1 && c != '\n') line.push_back(c);
  close(fd);
  const std::string prefix = "fairvault-server listening on port ";
  if (line.rfind(prefix, 0) != 0) {
    return absl::InternalError(absl::StrCat("server did not start: '", line, "'"));
  }
  port_ = std::stoi(line.substr(prefix.size()));
  return absl::OkStatus();
}

absl::Status ServerProcess::Wait() {
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
  return absl::OkStatus();
}

absl::Status ServerProcess::Stop() {
  if (pid_ <= 0) return absl::FailedPreconditionError("not running");
  kill(pid_, SIGTERM);
  return Wait();
}

absl::Status ServerProcess::Kill() {
  if (pid_ <= 0) return absl::FailedPreconditionError("not running");
  kill(pid_, SIGKILL);
  return Wait();
}

std::unique_ptr<client::Client> ServerProcess::Connect(const std::string& api_key) const {
  client::ClientOptions options;
  options.target = target();
  options.api_key = api_key;
  options.deadline_seconds = 120;
  auto c = client::Client::Create(options);
  return c.ok() ? *std::move(c) : nullptr;
}

}  // namespace fairvault::testing
