// fork/exec plumbing for the end-to-end tests.
#include "tests/server_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

#ifndef FAIRVAULT_SERVER_BINARY
#error "FAIRVAULT_SERVER_BINARY must be defined by the build"
#endif

namespace fairvault::testing {
namespace {

// Starts argv with stdout on a pipe; returns the pid and the read end. With `log_fd` >= 0,
// stdout and stderr go to that file instead (and *out_fd is -1).
absl::Status Spawn(const std::vector<std::string>& argv, pid_t* pid, int* out_fd, int log_fd = -1) {
  int fds[2] = {-1, -1};
  if (log_fd < 0 && pipe(fds) != 0) return absl::InternalError("pipe failed");
  *pid = fork();
  if (*pid < 0) return absl::InternalError("fork failed");
  if (*pid == 0) {
    if (log_fd >= 0) {
      dup2(log_fd, STDOUT_FILENO);
      dup2(log_fd, STDERR_FILENO);
      close(log_fd);
    } else {
      dup2(fds[1], STDOUT_FILENO);
      close(fds[0]);
      close(fds[1]);
    }
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  if (log_fd >= 0) {
    *out_fd = -1;
    return absl::OkStatus();
  }
  close(fds[1]);
  *out_fd = fds[0];
  return absl::OkStatus();
}

// The next line the server prints on stdout: from the pipe, or, with a log file, the first
// line after `*offset` that starts with "fairvault-server " (polled for up to 60 s).
absl::StatusOr<std::string> NextLine(int fd, const std::string& log_path, size_t* offset) {
  std::string line;
  if (fd >= 0) {
    char c;
    while (read(fd, &c, 1) == 1 && c != '\n') line.push_back(c);
    return line;
  }
  for (int i = 0; i < 6000; ++i) {
    std::ifstream in(log_path, std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    size_t end;
    while ((end = text.find('\n', *offset)) != std::string::npos) {
      line = text.substr(*offset, end - *offset);
      *offset = end + 1;
      if (line.rfind("fairvault-server ", 0) == 0) return line;
    }
    usleep(10'000);
  }
  return absl::DeadlineExceededError("the server printed no port line within 60 s");
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
  std::vector<std::string> argv = {
      FAIRVAULT_SERVER_BINARY, "serve", "--db", db_path_, "--listen", "127.0.0.1:0"};
  bool metrics = false;
  for (const std::string& flag : serve_flags_) {
    argv.push_back(flag);
    metrics = metrics || flag.rfind("--metrics-listen", 0) == 0;
  }
  int log_fd = -1;
  size_t offset = 0;
  if (!log_path_.empty()) {
    log_fd = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (log_fd < 0) return absl::InternalError(absl::StrCat("cannot open ", log_path_));
    offset = static_cast<size_t>(lseek(log_fd, 0, SEEK_END));
  }
  int fd;
  absl::Status spawned = Spawn(argv, &pid_, &fd, log_fd);
  if (log_fd >= 0) close(log_fd);
  if (!spawned.ok()) return spawned;
  // "fairvault-server listening on port N", then "fairvault-server metrics on port M".
  auto port_line = [&](const std::string& prefix, int* port) -> absl::Status {
    absl::StatusOr<std::string> line = NextLine(fd, log_path_, &offset);
    if (!line.ok()) return line.status();
    if (line->rfind(prefix, 0) != 0) {
      return absl::InternalError(absl::StrCat("server did not start: '", *line, "'"));
    }
    *port = std::stoi(line->substr(prefix.size()));
    return absl::OkStatus();
  };
  absl::Status started = port_line("fairvault-server listening on port ", &port_);
  if (started.ok() && metrics) {
    started = port_line("fairvault-server metrics on port ", &metrics_port_);
  }
  if (fd >= 0) close(fd);
  return started;
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
