// dockerd by PID, the repository copy and the compose commands of the container test.
#include "tests/container/compose_stack.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/testing/files.h"

namespace fairvault::testing {
namespace {

using Clock = std::chrono::steady_clock;

std::string LastLines(const std::string& text, int n) {
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  const size_t from = lines.size() > static_cast<size_t>(n) ? lines.size() - n : 0;
  std::string out;
  for (size_t i = from; i < lines.size(); ++i) absl::StrAppend(&out, lines[i], "\n");
  return out;
}

}  // namespace

CommandResult Shell(const std::string& command, const std::string& dir, bool quiet) {
  const Clock::time_point start = Clock::now();
  CommandResult result;
  int fds[2];
  if (pipe(fds) != 0) return result;
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    close(fds[0]);
    close(fds[1]);
    if (!dir.empty() && chdir(dir.c_str()) != 0) _exit(127);
    execl("/bin/bash", "bash", "-c", command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[1]);
  char buf[65536];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof(buf))) > 0 || (n < 0 && errno == EINTR)) {
    if (n > 0) result.output.append(buf, n);
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (quiet && result.ok()) return result;
  std::printf("container_test $ %s  [exit %d, %.1f s]\n", command.c_str(), result.status, seconds);
  if (!result.ok()) std::printf("%s", LastLines(result.output, 40).c_str());
  std::fflush(stdout);
  return result;
}

int FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

absl::StatusOr<std::unique_ptr<DockerEngine>> DockerEngine::Start(const std::string& data_root,
                                                                  const std::string& run_dir) {
  std::unique_ptr<DockerEngine> engine(new DockerEngine());
  engine->run_dir_ = run_dir;
  if (Shell(absl::StrCat("mkdir -p '", data_root, "' '", run_dir, "/exec'")).status != 0) {
    return absl::InternalError(absl::StrCat("cannot create ", data_root, " or ", run_dir));
  }
  // One engine per data root: a second run waits for nothing and says who holds it.
  const std::string lock = data_root + ".lock";
  // Not close-on-exec: dockerd inherits the lock, so a dockerd that outlived its test (killed
  // with SIGKILL) still holds it, and the next run says so instead of starting a second one.
  engine->lock_fd_ = open(lock.c_str(), O_CREAT | O_RDWR, 0600);
  if (engine->lock_fd_ < 0 || flock(engine->lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "another container test holds ", lock, " (its dockerd uses ", data_root, ")"));
  }
  const std::string socket = run_dir + "/docker.sock";
  const std::string log = run_dir + "/dockerd.log";
  const pid_t pid = fork();
  if (pid == 0) {
    const int out = open(log.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0600);
    dup2(out, STDOUT_FILENO);
    dup2(out, STDERR_FILENO);
    // Stopped with the test: by Stop(), or by the kernel when the test dies (SIGTERM, so that
    // dockerd stops its containers and its containerd).
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    // Its own containerd namespaces: a system dockerd's containers are never touched.
    execlp("dockerd", "dockerd", "--data-root", data_root.c_str(), "--exec-root",
           (run_dir + "/exec").c_str(), "--pidfile", (run_dir + "/dockerd.pid").c_str(), "-H",
           ("unix://" + socket).c_str(), "--containerd-namespace", "fairvault-test",
           "--containerd-plugins-namespace", "fairvault-test-plugins",
           static_cast<char*>(nullptr));
    std::fprintf(stderr, "exec dockerd: %s\n", std::strerror(errno));
    _exit(127);
  }
  engine->pid_ = pid;
  setenv("DOCKER_HOST", ("unix://" + socket).c_str(), 1);
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(60);
  while (Clock::now() < deadline) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      engine->pid_ = -1;
      return absl::FailedPreconditionError(absl::StrCat(
          "dockerd exited at once (status ", status,
          "); it needs root or the privileges to mount overlay file systems and set up "
          "networks. Its log:\n",
          LastLines(ReadFile(log), 15)));
    }
    if (access(socket.c_str(), F_OK) == 0 && Shell("docker version --format '{{.Server.Version}}'", "", /*quiet=*/true).ok()) {
      return engine;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("dockerd did not answer within 60 s. Its log:\n", LastLines(ReadFile(log), 15)));
}

absl::Status DockerEngine::Stop() {
  if (pid_ <= 0) return absl::OkStatus();
  kill(pid_, SIGTERM);
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(60);
  int status = 0;
  while (waitpid(pid_, &status, WNOHANG) == 0) {
    if (Clock::now() > deadline) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      pid_ = -1;
      return absl::DeadlineExceededError("dockerd did not stop within 60 s of SIGTERM: killed");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  pid_ = -1;
  unsetenv("DOCKER_HOST");
  return absl::OkStatus();
}

DockerEngine::~DockerEngine() {
  (void)Stop();
  if (lock_fd_ >= 0) close(lock_fd_);
}

absl::StatusOr<std::unique_ptr<ComposeStack>> ComposeStack::Copy(const std::string& source_root,
                                                                 const std::string& dir) {
  const CommandResult copied = Shell(absl::StrCat(
      "set -o pipefail; mkdir -p '", dir, "' && cd '", source_root,
      "' && git ls-files -z --cached --others --exclude-standard | "
      "tar --null --ignore-failed-read -T - -c | tar -x -C '",
      dir, "'"));
  if (!copied.ok()) {
    return absl::InternalError(absl::StrCat("copying ", source_root, ": ", copied.output));
  }
  std::unique_ptr<ComposeStack> stack(new ComposeStack());
  stack->dir_ = dir;
  return stack;
}

CommandResult ComposeStack::Compose(const std::string& args, bool quiet) const {
  return Run("docker-compose -f deploy/docker-compose.yml " + args, quiet);
}

std::string ComposeStack::ContainerId(const std::string& service) const {
  const CommandResult id = Compose("ps -q " + service, /*quiet=*/true);
  return id.ok() ? std::string(absl::StripAsciiWhitespace(LastLines(id.output, 2))) : "";
}

namespace {
std::string Inspect(const ComposeStack& stack, const std::string& service,
                    const std::string& format) {
  const std::string id = stack.ContainerId(service);
  if (id.empty()) return "";
  const CommandResult r =
      stack.Run(absl::StrCat("docker inspect -f '", format, "' ", id), /*quiet=*/true);
  return r.ok() ? std::string(absl::StripAsciiWhitespace(r.output)) : "";
}
}  // namespace

pid_t ComposeStack::HostPid(const std::string& service) const {
  int pid = 0;
  return absl::SimpleAtoi(Inspect(*this, service, "{{.State.Pid}}"), &pid) ? pid : 0;
}

int ComposeStack::RestartCount(const std::string& service) const {
  int count = -1;
  return absl::SimpleAtoi(Inspect(*this, service, "{{.RestartCount}}"), &count) ? count : -1;
}

absl::Time ComposeStack::StartedAt(const std::string& service) const {
  absl::Time at;
  std::string error;
  return absl::ParseTime(absl::RFC3339_full, Inspect(*this, service, "{{.State.StartedAt}}"), &at,
                         &error)
             ? at
             : absl::InfinitePast();
}

std::string ComposeStack::Health(const std::string& service) const {
  return Inspect(*this, service, "{{if .State.Health}}{{.State.Health.Status}}{{end}}");
}

absl::Status ComposeStack::WaitHealthy(const std::vector<std::string>& services,
                                       std::chrono::seconds limit) const {
  const Clock::time_point deadline = Clock::now() + limit;
  for (const std::string& service : services) {
    while (Health(service) != "healthy") {
      if (Clock::now() > deadline) {
        return absl::DeadlineExceededError(absl::StrCat(
            service, " is not healthy after ", limit.count(), " s (", Health(service), "):\n",
            LastLines(Compose("logs --tail 20 " + service).output, 20)));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
  }
  return absl::OkStatus();
}

std::unique_ptr<client::Client> ComposeStack::Connect(int replica,
                                                      const std::string& api_key) const {
  client::ClientOptions options;
  options.target = absl::StrCat("127.0.0.1:", port(replica));
  options.api_key = api_key;
  options.root_cert_pem = ReadFile("deploy/secrets/tls/ca.pem");
  options.deadline_seconds = 60;
  auto client = client::Client::Create(options);
  return client.ok() ? *std::move(client) : nullptr;
}

std::string ComposeStack::ReadFile(const std::string& relative) const {
  return ::fairvault::testing::ReadFile(dir_ + "/" + relative);
}

}  // namespace fairvault::testing
