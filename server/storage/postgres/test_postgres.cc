// A private PostgreSQL server per test binary (see test_postgres.h).
#include "server/storage/postgres/test_postgres.h"

#include <glob.h>
#include <libpq-fe.h>
#include <pwd.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace fairvault::server::storage {
namespace {

// The newest /usr/lib/postgresql/N/bin with initdb, or "".
std::string FindServerBin() {
  glob_t g;
  std::vector<std::string> found;
  if (glob("/usr/lib/postgresql/*/bin/initdb", 0, nullptr, &g) == 0) {
    for (size_t i = 0; i < g.gl_pathc; ++i) found.emplace_back(g.gl_pathv[i]);
  }
  globfree(&g);
  if (found.empty()) return "";
  std::sort(found.begin(), found.end(), [](const std::string& a, const std::string& b) {
    return std::atoi(a.c_str() + 20) < std::atoi(b.c_str() + 20);  // after /usr/lib/postgresql/
  });
  const std::string& initdb = found.back();
  return initdb.substr(0, initdb.size() - std::string("/initdb").size());
}

// The port only names the socket file (.s.PGSQL.<port>) in our own directory.
constexpr int kPort = 5433;

}  // namespace

absl::StatusOr<std::unique_ptr<TestPostgres>> TestPostgres::Start(Options options) {
  const std::string bin = FindServerBin();
  if (bin.empty()) {
    return absl::FailedPreconditionError(
        "no PostgreSQL server binaries under /usr/lib/postgresql/*/bin; install Debian's "
        "postgresql package (deploy/install-deps.sh postgresql)");
  }
  RemoveOrphans(bin);
  std::string tmpl = "/tmp/fairvault-pg-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) return absl::InternalError("mkdtemp failed");
  std::unique_ptr<TestPostgres> pg(new TestPostgres(bin, tmpl, options));
  if (std::FILE* f = std::fopen((tmpl + "/owner.pid").c_str(), "w")) {
    std::fprintf(f, "%d\n", static_cast<int>(getpid()));
    std::fclose(f);
  }
  if (geteuid() == 0) {
    const passwd* user = getpwnam("postgres");
    if (user == nullptr) {
      return absl::FailedPreconditionError(
          "running as root needs the 'postgres' user (Debian's postgresql package creates it)");
    }
    if (chown(tmpl.c_str(), user->pw_uid, user->pw_gid) != 0) {
      return absl::InternalError(absl::StrCat("cannot chown ", tmpl, " to postgres"));
    }
  }
  if (absl::Status s = pg->Run("initdb", absl::StrCat("-D ", tmpl,
                                                      "/data -U fairvault "
                                                      "--auth=trust -E UTF8 --no-sync "
                                                      "--locale=C.UTF-8"));
      !s.ok()) {
    return s;
  }
  if (absl::Status s = pg->StartServer(); !s.ok()) return s;
  pg->running_ = true;
  return pg;
}

void TestPostgres::RemoveOrphans(const std::string& bin) {
  glob_t g;
  if (glob("/tmp/fairvault-pg-*/owner.pid", 0, nullptr, &g) != 0) {
    globfree(&g);
    return;
  }
  for (size_t i = 0; i < g.gl_pathc; ++i) {
    const std::string pid_file = g.gl_pathv[i];
    int pid = 0;
    if (std::FILE* f = std::fopen(pid_file.c_str(), "r")) {
      if (std::fscanf(f, "%d", &pid) != 1) pid = 0;
      std::fclose(f);
    }
    // Alive (or not ours to signal): kept. A pid reused since only keeps an orphan longer.
    if (pid <= 0 || kill(pid, 0) == 0 || errno != ESRCH) continue;
    std::unique_ptr<TestPostgres> orphan(
        new TestPostgres(bin, pid_file.substr(0, pid_file.size() - 10), Options()));
    orphan->running_ = access((orphan->dir_ + "/data/postmaster.pid").c_str(), F_OK) == 0;
  }  // each destructor stops its server and removes its directory
  globfree(&g);
}

TestPostgres::~TestPostgres() {
  if (access(dir_.c_str(), F_OK) != 0) return;  // removed as an orphan (RemoveOrphans)
  if (running_) (void)Run("pg_ctl", absl::StrCat("-D ", dir_, "/data -m immediate -w stop"));
  std::system(absl::StrCat("rm -rf '", dir_, "'").c_str());
}

absl::Status TestPostgres::Run(const std::string& tool, const std::string& args) const {
  const std::string prefix = geteuid() == 0 ? "runuser -u postgres -- " : "";
  const std::string command =
      absl::StrCat(prefix, bin_, "/", tool, " ", args, " >>'", dir_, "/commands.log' 2>&1");
  const int rc = std::system(command.c_str());
  if (rc != 0) {
    return absl::InternalError(absl::StrCat("'", tool, " ", args, "' failed (status ", rc,
                                            "); see ", dir_, "/commands.log"));
  }
  return absl::OkStatus();
}

absl::Status TestPostgres::StartServer() const {
  return Run("pg_ctl", absl::StrCat("-D ", dir_, "/data -l ", dir_, "/server.log -w -t 60 -o \"-k ",
                                    dir_, " -c listen_addresses='' -p ", kPort,
                                    " -c fsync=", options_.fsync ? "on" : "off",
                                    " -c synchronous_commit=", options_.fsync ? "on" : "off",
                                    " -c max_connections=", options_.max_connections, "\" start"));
}

std::string TestPostgres::Uri(const std::string& db) const {
  return absl::StrCat("postgresql:///", db, "?host=", dir_, "&port=", kPort, "&user=fairvault");
}

absl::StatusOr<std::string> TestPostgres::CreateDatabase(const std::string& db) {
  const std::string error = Exec("postgres", absl::StrCat("CREATE DATABASE \"", db, "\""));
  if (!error.empty()) return absl::InternalError(absl::StrCat("CREATE DATABASE: ", error));
  return Uri(db);
}

absl::Status TestPostgres::Stop() {
  running_ = false;
  return Run("pg_ctl", absl::StrCat("-D ", dir_, "/data -m immediate -w stop"));
}

absl::Status TestPostgres::Restart() {
  if (running_) {
    if (absl::Status s = Stop(); !s.ok()) return s;
  }
  if (absl::Status s = StartServer(); !s.ok()) return s;
  running_ = true;
  return absl::OkStatus();
}

std::string TestPostgres::Exec(const std::string& db, const std::string& sql) const {
  PGconn* c = PQconnectdb(Uri(db).c_str());
  std::string error;
  if (PQstatus(c) != CONNECTION_OK) {
    error = PQerrorMessage(c);
  } else {
    PGresult* r = PQexec(c, sql.c_str());
    const ExecStatusType st = PQresultStatus(r);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
      error = PQresultErrorMessage(r);
      if (error.empty()) error = "error";
    }
    PQclear(r);
  }
  PQfinish(c);
  return error;
}

int64_t TestPostgres::Scalar(const std::string& db, const std::string& sql) const {
  PGconn* c = PQconnectdb(Uri(db).c_str());
  int64_t value = -1;
  if (PQstatus(c) == CONNECTION_OK) {
    PGresult* r = PQexec(c, sql.c_str());
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0 && !PQgetisnull(r, 0, 0)) {
      value = std::strtoll(PQgetvalue(r, 0, 0), nullptr, 10);
    }
    PQclear(r);
  }
  PQfinish(c);
  return value;
}

}  // namespace fairvault::server::storage
