// fairvault-server: `serve` runs the vault; `bootstrap` creates the first regulator key;
// `backup` and `migrate` copy a vault.
//
//   fairvault-server bootstrap --db vault.db --name regulator [--out regulator.key]
//   fairvault-server serve --db vault.db [--listen 127.0.0.1:50051]
//       [--tls-cert cert.pem --tls-key key.pem] [--job-workers 1]
//       [--metrics-listen 127.0.0.1:9464]
#include <malloc.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/notification.h"
#include "core/random/secure_bitgen.h"
#include "core/transparency/note.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "server/app/vault.h"
#include "server/grpc/metrics_interceptor.h"
#include "server/grpc/services.h"
#include "server/metrics/endpoint.h"
#include "server/storage/postgres/pg_store.h"
#include "server/storage/sqlite/sqlite_store.h"
#include "server/util/private_file.h"

#ifndef FAIRVAULT_VERSION
#error "FAIRVAULT_VERSION must be defined by the build"
#endif

namespace fairvault::server {
namespace {

// Each subcommand's usage, printed by `fairvault-server COMMAND --help` (stdout, exit 0) and
// after a usage error in it (stderr, exit 2); `fairvault-server --help` prints them all.
constexpr char kDbHelp[] =
    "  --db DB is a SQLite file (created if missing, mode 0600; one server process) or a\n"
    "  PostgreSQL URI postgresql://USER@HOST:PORT/NAME?passfile=... (several replicas may\n"
    "  share it).\n";

constexpr char kBootstrapUsage[] =
    "usage: fairvault-server bootstrap --db DB --name NAME [--out FILE]\n"
    "      Creates a regulator account in the database and prints its API key once on\n"
    "      stdout; with --out, writes it into the new FILE instead (mode 0600; an existing\n"
    "      file is refused before the account is created).\n";

constexpr char kBackupUsage[] =
    "usage: fairvault-server backup --db PATH --out FILE\n"
    "      Copies the database (also while a server runs on it: one consistent snapshot,\n"
    "      SQLite's online backup) into the new FILE (mode 0600) and verifies the copy's\n"
    "      ledger; a copy that does not verify is removed and the exit status is 1.\n";

constexpr char kMigrateUsage[] =
    "usage: fairvault-server migrate --from FILE --to postgresql://...\n"
    "      Copies the SQLite vault FILE (stop its server first) into an empty PostgreSQL\n"
    "      database in one transaction, ids and seqs kept. Refuses unless FILE's ledger\n"
    "      verifies; checks that the copy verifies with the same head hash.\n";

constexpr char kLogKeyUsage[] =
    "usage: fairvault-server log-key --out FILE [--origin NAME]\n"
    "       fairvault-server log-key --key FILE [--endorse-with OLD_FILE]\n"
    "      The transparency log's Ed25519 signing key. With --out, creates a new key in the\n"
    "      new FILE (mode 0600) for the log named --origin (default fairvault/ledger; no\n"
    "      spaces or '+'); with --key, reads one. Prints the verifier key on stdout\n"
    "      (\"<origin>+<key hash>+<base64 key>\"): give it to companies and auditors, who\n"
    "      check receipts and checkpoints with it and nothing else. bootstrap on a SQLite\n"
    "      file creates DB.log-key this way, and serve signs with it. With --endorse-with\n"
    "      (a rotation: the key being replaced), prints instead a note naming both verifier\n"
    "      keys, signed by the old key and the new: publish it beside the new key, and\n"
    "      whoever holds the old verifier key checks it (fairvault log rotation) and takes\n"
    "      the new key from it.\n";

constexpr char kServeUsage[] =
    "usage: fairvault-server serve --db DB [--listen HOST:PORT] [--tls-cert PEM --tls-key PEM]\n"
    "                              [--job-workers N] [--job-lease-seconds S]\n"
    "                              [--metrics-listen IPv4:PORT] [--table-cache-bytes N]\n"
    "                              [--log-key FILE] [--checkpoint-seconds S]\n"
    "                              [--checkpoint-rows N] [--witnesses FILE]\n"
    "                              [--witness-quorum N]\n"
    "      Serves the vault (default listen address 127.0.0.1:50051). SIGTERM/SIGINT stop it\n"
    "      gracefully. --job-workers: threads that run training jobs (default 1). A running\n"
    "      job is leased to its process for --job-lease-seconds (default 30), renewed while it\n"
    "      runs; a job whose process died is taken over by any server on the same database\n"
    "      once its lease ends (at shutdown leases are released at once). The health service\n"
    "      reports SERVING for \"\" and for each of the vault's services by name; gRPC server\n"
    "      reflection lists them.\n"
    "      --metrics-listen: serve Prometheus metrics at http://IPv4:PORT/metrics (off by\n"
    "      default; no authentication: use loopback or a private network).\n"
    "      --table-cache-bytes: memory for company tables kept parsed between requests\n"
    "      (default 2147483648, 2 GiB; at most 4 tables); the least recently used go first,\n"
    "      never the table a request is using.\n"
    "      --log-key: the transparency log's signing key (default DB.log-key for a SQLite\n"
    "      file, if it exists; see log-key). With one, a checkpoint of the ledger's Merkle\n"
    "      tree is signed and stored once --checkpoint-rows rows (default 1000) are new, or\n"
    "      --checkpoint-seconds (default 10) after the latest if any row is; without one no\n"
    "      new checkpoint is signed (receipts for newer rows are refused).\n"
    "      --witnesses: a file of witness verifier keys (cosignature/v1, from `fairvault\n"
    "      witness key`), one per line ('#' comments). The vault stores their cosignatures\n"
    "      of checkpoints, and receipts cite only checkpoints that --witness-quorum of them\n"
    "      (default: all; 0: cosignatures are kept and served, receipts do not wait) have\n"
    "      cosigned.\n";

struct Subcommand {
  const char* name;
  const char* usage;
};
constexpr Subcommand kSubcommands[] = {{"bootstrap", kBootstrapUsage},
                                       {"serve", kServeUsage},
                                       {"log-key", kLogKeyUsage},
                                       {"backup", kBackupUsage},
                                       {"migrate", kMigrateUsage}};

std::string FullUsage() {
  std::string out =
      "usage: fairvault-server COMMAND [flags]\n"
      "       fairvault-server COMMAND --help\n"
      "       fairvault-server --version\n";
  absl::StrAppend(&out, kDbHelp);
  for (const Subcommand& c : kSubcommands) absl::StrAppend(&out, c.usage);
  absl::StrAppend(&out,
                  "Files the server creates (the database and its -wal/-shm, backups, --out key\n"
                  "files) are readable by their owner only: its umask is 077.\n");
  return out;
}

// A usage error: the message and `usage` (a subcommand's, or all) on stderr, exit status 2.
int Usage(const std::string& error, const std::string& usage = FullUsage()) {
  if (!error.empty()) std::cerr << "error: " << error << "\n";
  std::cerr << usage;
  return 2;
}

// --name value pairs after the subcommand.
bool ParseFlags(int argc, char** argv, std::map<std::string, std::string>* flags,
                std::string* error) {
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0) {
      *error = absl::StrCat("unexpected argument '", arg, "'");
      return false;
    }
    auto eq = arg.find('=');
    if (eq != std::string::npos) {
      (*flags)[arg.substr(2, eq - 2)] = arg.substr(eq + 1);
    } else if (i + 1 < argc) {
      (*flags)[arg.substr(2)] = argv[++i];
    } else {
      *error = absl::StrCat("flag ", arg, " needs a value");
      return false;
    }
  }
  return true;
}

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::stringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

// UsageError unless every flag is one the command knows (a typo must not, say, silently
// start a plaintext server).
// A PostgreSQL store at `uri`; an error names the database by its URI without the password
// (the store's own message names nothing about it, and logged libpq's detail before).
absl::StatusOr<std::unique_ptr<storage::PgStore>> OpenPostgres(const std::string& uri) {
  auto store = storage::PgStore::Open(uri);
  if (!store.ok()) {
    return absl::Status(store.status().code(),
                        absl::StrCat("PostgreSQL database ", storage::RedactedConnInfo(uri), ": ",
                                     store.status().message()));
  }
  return store;
}

// --db: a postgresql:// URI selects PostgreSQL (replicas share it), anything else is a SQLite
// file. `metrics` (may be null; must outlive the store) gets the SQLite log's size and the
// charges per committed transaction.
absl::StatusOr<std::unique_ptr<storage::Store>> OpenStore(const std::string& db,
                                                          Metrics* metrics = nullptr) {
  std::unique_ptr<storage::Store> opened;
  if (storage::IsPostgresUri(db)) {
    auto store = OpenPostgres(db);
    if (!store.ok()) return store.status();
    opened = *std::move(store);
  } else {
    storage::SqliteStore::Options options;
    if (metrics != nullptr) {
      options.on_wal_bytes = [metrics](int64_t bytes) { metrics->SetSqliteWalBytes(bytes); };
    }
    auto store = storage::SqliteStore::Open(db, std::move(options));
    if (!store.ok()) return store.status();
    opened = *std::move(store);
  }
  if (metrics != nullptr) {
    opened->SetChargeCommitObserver(
        [metrics](int64_t charges) { metrics->RecordChargeCommit(charges); });
  }
  return opened;
}

bool OnlyKnownFlags(const std::map<std::string, std::string>& flags,
                    std::initializer_list<const char*> known, std::string* error) {
  for (const auto& [name, value] : flags) {
    bool ok = false;
    for (const char* k : known) ok = ok || name == k;
    if (!ok) {
      *error = absl::StrCat("unknown flag --", name);
      return false;
    }
  }
  return true;
}

constexpr char kDefaultOrigin[] = "fairvault/ledger";

// A new signing key for the log `origin` in the new file `path` (0600); its verifier key.
absl::StatusOr<std::string> CreateLogKey(const std::string& path, const std::string& origin) {
  absl::StatusOr<core::transparency::NoteSigner> signer =
      core::transparency::NoteSigner::Generate(origin);
  if (!signer.ok()) return signer.status();
  if (absl::Status written = WriteNewPrivateFile(path, signer->EncodedSecret() + "\n");
      !written.ok()) {
    return written;
  }
  return signer->verifier().Encoded();
}

absl::StatusOr<core::transparency::NoteSigner> ReadLogKey(const std::string& path) {
  std::string text;
  if (!ReadFile(path, &text)) {
    // Not the argument itself: it may be a key's secret text given where a file goes.
    if (absl::StartsWith(path, "PRIVATE+KEY")) {
      return absl::InvalidArgumentError(
          "the log key must be given as a file, not as the key's text");
    }
    return absl::FailedPreconditionError(absl::StrCat("cannot read the log key ", path));
  }
  absl::StatusOr<core::transparency::NoteSigner> signer =
      core::transparency::NoteSigner::Parse(text);
  if (!signer.ok()) {
    // The key's text is a secret: only what is wrong with it is said.
    return absl::InvalidArgumentError(
        absl::StrCat("the log key ", path, " is malformed: ", signer.status().message()));
  }
  return signer;
}

int LogKey(std::map<std::string, std::string>& flags) {
  std::string error;
  if (!OnlyKnownFlags(flags, {"out", "origin", "key", "endorse-with"}, &error)) {
    return Usage(error, kLogKeyUsage);
  }
  if (flags.count("out") == flags.count("key")) {
    return Usage("log-key needs --out FILE (a new key) or --key FILE (an existing one)",
                 kLogKeyUsage);
  }
  if (flags.count("endorse-with") && !flags.count("key")) {
    return Usage("--endorse-with goes with --key (the new key)", kLogKeyUsage);
  }
  if (flags.count("key")) {
    if (flags.count("origin")) return Usage("--origin goes with --out", kLogKeyUsage);
    auto signer = ReadLogKey(flags["key"]);
    if (!signer.ok()) {
      std::cerr << "error: " << signer.status().message() << "\n";
      return 1;
    }
    if (!flags.count("endorse-with")) {
      std::cout << signer->verifier().Encoded() << "\n";
      return 0;
    }
    auto old_key = ReadLogKey(flags["endorse-with"]);
    absl::StatusOr<std::string> rotation =
        old_key.ok() ? core::transparency::EndorseRotation(*old_key, *signer) : old_key.status();
    if (!rotation.ok()) {
      std::cerr << "error: " << rotation.status().message() << "\n";
      return 1;
    }
    std::cout << *rotation;
    return 0;
  }
  const std::string origin = flags.count("origin") ? flags["origin"] : kDefaultOrigin;
  if (absl::Status valid = core::transparency::ValidKeyName(origin); !valid.ok()) {
    return Usage(absl::StrCat("--origin: ", valid.message()), kLogKeyUsage);
  }
  auto verifier = CreateLogKey(flags["out"], origin);
  if (!verifier.ok()) {
    std::cerr << "error: " << verifier.status().message() << "\n";
    return 1;
  }
  std::cerr << "log key created in " << flags["out"] << " (mode 0600); its verifier key:\n";
  std::cout << *verifier << "\n";
  return 0;
}

int Bootstrap(std::map<std::string, std::string>& flags) {
  std::string error;
  if (!OnlyKnownFlags(flags, {"db", "name", "out"}, &error)) return Usage(error, kBootstrapUsage);
  if (flags["db"].empty() || flags["name"].empty()) {
    return Usage("bootstrap needs --db and --name", kBootstrapUsage);
  }
  // The key file's name is taken before the account exists, so that a key shown once is never
  // lost to a file that cannot be written; it is removed again if the account is not created.
  std::optional<NewPrivateFile> key_file;
  if (flags.count("out")) {
    if (flags["out"].empty()) return Usage("--out needs a file name", kBootstrapUsage);
    absl::StatusOr<NewPrivateFile> file = NewPrivateFile::Create(flags["out"]);
    if (!file.ok()) return Usage(absl::StrCat("--out: ", file.status().message()), kBootstrapUsage);
    key_file.emplace(*std::move(file));
  }
  auto store = OpenStore(flags["db"]);
  if (!store.ok()) {
    std::cerr << "error: " << store.status() << "\n";
    return 1;
  }
  RealClock clock;
  core::SecureBitGen gen;
  Vault vault(store->get(), &clock, gen);
  auto created = vault.CreateAccountUnchecked(flags["name"], storage::Role::kRegulator);
  if (!created.ok()) {
    std::cerr << "error: " << created.status() << "\n";
    return 1;
  }
  // A SQLite vault gets its log key beside it (serve finds it there); a PostgreSQL one's key
  // is made with log-key and given to every replica.
  const std::string default_key = flags["db"] + ".log-key";
  if (!storage::IsPostgresUri(flags["db"]) && access(default_key.c_str(), F_OK) != 0) {
    auto verifier = CreateLogKey(default_key, kDefaultOrigin);
    if (verifier.ok()) {
      std::cerr << "transparency log key created in " << default_key
                << " (mode 0600); its verifier key, for companies and auditors:\n"
                << *verifier << "\n";
    } else {
      std::cerr << "warning: no log key: " << verifier.status().message() << "\n";
    }
  }
  if (key_file.has_value()) {
    if (absl::Status written = key_file->Commit(created->api_key() + "\n"); !written.ok()) {
      std::cerr << "error: " << written.message() << "; the account '" << created->account().name()
                << "' exists but its key is lost: bootstrap again with another --name\n";
      return 1;
    }
    std::cerr << "regulator account '" << created->account().name() << "' created; its API key "
              << "is in " << key_file->path() << " (mode 0600, shown nowhere else)\n";
    return 0;
  }
  std::cerr << "regulator account '" << created->account().name()
            << "' created; its API key follows (shown once, store it safely):\n";
  std::cout << created->api_key() << std::endl;
  return 0;
}

int Backup(std::map<std::string, std::string>& flags) {
  std::string error;
  if (!OnlyKnownFlags(flags, {"db", "out"}, &error)) return Usage(error, kBackupUsage);
  if (flags["db"].empty() || flags["out"].empty()) {
    return Usage("backup needs --db and --out", kBackupUsage);
  }
  auto verified = storage::SqliteStore::Backup(flags["db"], flags["out"]);
  if (!verified.ok()) {
    std::cerr << "error: " << verified.status() << "\n";
    return 1;
  }
  std::cout << "backup " << flags["out"] << ": ledger verified, " << verified->rows_checked
            << " rows, head hash " << verified->head_hash << "\n";
  return 0;
}

int Migrate(std::map<std::string, std::string>& flags) {
  std::string error;
  if (!OnlyKnownFlags(flags, {"from", "to"}, &error)) return Usage(error, kMigrateUsage);
  if (flags["from"].empty() || !storage::IsPostgresUri(flags["to"])) {
    return Usage("migrate needs --from SQLITE_FILE and --to postgresql://...", kMigrateUsage);
  }
  if (access(flags["from"].c_str(), R_OK) != 0) {
    return Usage(absl::StrCat("--from: cannot read ", flags["from"]), kMigrateUsage);
  }
  auto target = OpenPostgres(flags["to"]);
  if (!target.ok()) {
    std::cerr << "error: " << target.status() << "\n";
    return 1;
  }
  auto report = (*target)->ImportSqlite(flags["from"]);
  if (!report.ok()) {
    std::cerr << "error: " << report.status() << "\n";
    return 1;
  }
  for (const auto& [table, rows] : report->rows) std::cout << table << ": " << rows << " rows\n";
  std::cout << "migrated: ledger verified on both sides, " << report->copy.rows_checked
            << " rows, head hash " << report->copy.head_hash << "\n";
  return 0;
}

int Serve(std::map<std::string, std::string>& flags) {
  std::string error;
  if (!OnlyKnownFlags(flags,
                      {"db", "listen", "tls-cert", "tls-key", "job-workers", "job-lease-seconds",
                       "metrics-listen", "table-cache-bytes", "log-key", "checkpoint-seconds",
                       "checkpoint-rows", "witnesses", "witness-quorum"},
                      &error)) {
    return Usage(error, kServeUsage);
  }
  if (flags["db"].empty()) return Usage("serve needs --db", kServeUsage);
  const std::string listen = flags.count("listen") ? flags["listen"] : "127.0.0.1:50051";
  VaultOptions options;
  if (flags.count("job-workers") && !absl::SimpleAtoi(flags["job-workers"], &options.job_workers)) {
    return Usage(
        absl::StrCat("--job-workers must be an integer (got '", flags["job-workers"], "')"),
        kServeUsage);
  }
  if (flags.count("table-cache-bytes") &&
      (!absl::SimpleAtoi(flags["table-cache-bytes"], &options.table_cache_bytes) ||
       options.table_cache_bytes < 0)) {
    return Usage(absl::StrCat("--table-cache-bytes must be a number of bytes >= 0 (got '",
                              flags["table-cache-bytes"], "')"),
                 kServeUsage);
  }
  if (flags.count("job-lease-seconds")) {
    int seconds = 0;
    if (!absl::SimpleAtoi(flags["job-lease-seconds"], &seconds)) {
      return Usage(absl::StrCat("--job-lease-seconds must be an integer (got '",
                                flags["job-lease-seconds"], "')"),
                   kServeUsage);
    }
    options.job_lease_micros = int64_t{seconds} * 1'000'000;
  }
  int64_t checkpoint_seconds = 10, checkpoint_rows = 1000;
  if (flags.count("checkpoint-seconds") &&
      (!absl::SimpleAtoi(flags["checkpoint-seconds"], &checkpoint_seconds) ||
       checkpoint_seconds < 1)) {
    return Usage(absl::StrCat("--checkpoint-seconds must be an integer >= 1 (got '",
                              flags["checkpoint-seconds"], "')"),
                 kServeUsage);
  }
  if (flags.count("checkpoint-rows") &&
      (!absl::SimpleAtoi(flags["checkpoint-rows"], &checkpoint_rows) || checkpoint_rows < 1)) {
    return Usage(absl::StrCat("--checkpoint-rows must be an integer >= 1 (got '",
                              flags["checkpoint-rows"], "')"),
                 kServeUsage);
  }
  {
    std::string key_path = flags.count("log-key") ? flags["log-key"] : "";
    if (key_path.empty() && !storage::IsPostgresUri(flags["db"]) &&
        access((flags["db"] + ".log-key").c_str(), F_OK) == 0) {
      key_path = flags["db"] + ".log-key";
    }
    if (!key_path.empty()) {
      auto signer = ReadLogKey(key_path);
      if (!signer.ok()) {
        return Usage(absl::StrCat("--log-key: ", signer.status().message()), kServeUsage);
      }
      options.log_signer = *std::move(signer);
    } else {
      std::cerr << "fairvault-server: no transparency log key (--log-key): checkpoints are not "
                   "signed (receipts for rows newer than every stored checkpoint are refused)\n";
    }
  }
  if (flags.count("witnesses")) {
    std::string text;
    if (!ReadFile(flags["witnesses"], &text)) {
      return Usage(absl::StrCat("--witnesses: cannot read ", flags["witnesses"]), kServeUsage);
    }
    int line_number = 0;
    for (absl::string_view line : absl::StrSplit(text, '\n')) {
      ++line_number;
      line = absl::StripAsciiWhitespace(line);
      if (line.empty() || line[0] == '#') continue;
      auto witness = core::transparency::NoteVerifier::Parse(line);
      if (!witness.ok()) {
        return Usage(absl::StrCat("--witnesses: line ", line_number, ": ",
                                  witness.status().message()),
                     kServeUsage);
      }
      options.witnesses.push_back(*std::move(witness));
    }
    if (options.witnesses.empty()) {
      return Usage(absl::StrCat("--witnesses: ", flags["witnesses"], " lists no key"),
                   kServeUsage);
    }
    options.witness_quorum = static_cast<int>(options.witnesses.size());
  }
  if (flags.count("witness-quorum") &&
      (!options.witnesses.size() ||
       !absl::SimpleAtoi(flags["witness-quorum"], &options.witness_quorum) ||
       options.witness_quorum < 0)) {
    return Usage(absl::StrCat("--witness-quorum must be an integer >= 0 and goes with "
                              "--witnesses (got '",
                              flags["witness-quorum"], "')"),
                 kServeUsage);
  }
  if (absl::Status valid = options.Validate(); !valid.ok()) {
    // VaultOptions names its fields (job_workers, job_lease_seconds): name the flag too.
    const absl::string_view message = valid.message();
    const char* flag = absl::StartsWith(message, "job_lease")   ? "--job-lease-seconds"
                       : absl::StartsWith(message, "witness_") ? "--witness-quorum"
                       : absl::StartsWith(message, "witness")  ? "--witnesses"
                                                               : "--job-workers";
    return Usage(absl::StrCat(flag, ": ", message), kServeUsage);
  }

  // Block the stop signals before any thread starts, then wait for them on one thread.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  // Metrics (declared before everything that counts into them, the store included) and their
  // endpoint.
  std::unique_ptr<Metrics> metrics;
  if (flags.count("metrics-listen")) metrics = std::make_unique<Metrics>(ServedMethodNames());
  auto store = OpenStore(flags["db"], metrics.get());
  if (!store.ok()) {
    std::cerr << "error: " << store.status() << "\n";
    return 1;
  }
  std::unique_ptr<MetricsEndpoint> metrics_endpoint;
  if (metrics != nullptr) {
    auto endpoint = MetricsEndpoint::Start(flags["metrics-listen"], metrics->registry());
    if (absl::IsInvalidArgument(endpoint.status())) {
      return Usage(std::string(endpoint.status().message()), kServeUsage);
    }
    if (!endpoint.ok()) {
      std::cerr << "error: " << endpoint.status().message() << "\n";
      return 1;
    }
    metrics_endpoint = *std::move(endpoint);
    options.metrics = metrics.get();
  }
  RealClock clock;
  core::SecureBitGen gen;
  Vault vault(store->get(), &clock, gen, options);
  // Before serving: re-queues the jobs a previous process left unfinished.
  if (absl::Status started = vault.StartJobs(); !started.ok()) {
    std::cerr << "error: cannot start the job workers: " << started << "\n";
    return 1;
  }
  RegulatorServiceImpl regulator(&vault);
  CompanyServiceImpl company(&vault, metrics.get());
  AuditorServiceImpl auditor(&vault);

  std::shared_ptr<grpc::ServerCredentials> credentials;
  if (!flags["tls-cert"].empty() || !flags["tls-key"].empty()) {
    grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
    if (!ReadFile(flags["tls-cert"], &pair.cert_chain) ||
        !ReadFile(flags["tls-key"], &pair.private_key)) {
      return Usage("cannot read --tls-cert / --tls-key", kServeUsage);
    }
    grpc::SslServerCredentialsOptions options;
    options.pem_key_cert_pairs.push_back(pair);
    credentials = grpc::SslServerCredentials(options);
  } else {
    credentials = grpc::InsecureServerCredentials();
  }

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  // A second server on the same port must fail, not share it: each keeps its own in-memory
  // subject index.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  int port = 0;
  builder.AddListeningPort(listen, credentials, &port);
  // gRPC's synchronous server lets at most MAX_POLLERS idle threads wait for calls (default 2):
  // with more concurrent callers, every call beyond them made and ended a thread (clone, a
  // stack mapped and unmapped). Idle threads cost a stack each and no CPU.
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, 64);
  builder.SetMaxReceiveMessageSize(64 << 20);
  builder.SetMaxSendMessageSize(64 << 20);
  builder.RegisterService(&regulator);
  builder.RegisterService(&company);
  builder.RegisterService(&auditor);
  if (metrics != nullptr) {
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> counting;
    counting.push_back(std::make_unique<MetricsInterceptorFactory>(metrics.get()));
    builder.experimental().SetInterceptorCreators(std::move(counting));
  }
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    std::cerr << "error: cannot listen on " << listen << "\n";
    return 1;
  }
  // Health per service name, as load balancers and orchestrators ask for it.
  grpc::HealthCheckServiceInterface* health = server->GetHealthCheckService();
  for (const char* name :
       {v1::RegulatorService::service_full_name(), v1::CompanyService::service_full_name(),
        v1::AuditorService::service_full_name()}) {
    health->SetServingStatus(name, true);
  }
  // Scripts wait for this line (the real port when --listen ends in :0).
  std::cout << "fairvault-server listening on port " << port << std::endl;
  if (metrics_endpoint != nullptr) {
    std::cout << "fairvault-server metrics on port " << metrics_endpoint->port() << std::endl;
  }

  // The transparency log's checkpointer.
  absl::Notification stopping;
  std::thread checkpointer([&] {
    while (!stopping.WaitForNotificationWithTimeout(absl::Seconds(1))) {
      absl::StatusOr<bool> signed_one =
          vault.CheckpointIfDue(checkpoint_rows, checkpoint_seconds * 1'000'000);
      if (!signed_one.ok()) {
        std::cerr << "fairvault-server: checkpoint not signed: " << signed_one.status() << "\n";
      }
    }
  });

  std::thread stopper([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    std::cerr << "fairvault-server: signal " << sig << ", shutting down\n";
    health->Shutdown();  // every service NOT_SERVING while requests drain
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(10));
  });
  server->Wait();
  stopper.join();
  stopping.Notify();
  checkpointer.join();
  return 0;
}

}  // namespace
}  // namespace fairvault::server

// The server holds tables of millions of rows and builds and frees buffers of that size per
// upload. glibc would hand each freed one back to the kernel and fault its pages in again on
// the next upload (measured: about a tenth of an upload's time on 1M rows); keep them instead.
static void KeepFreedMemory() {
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_TOP_PAD, 256 << 20);
}

int main(int argc, char** argv) {
  using namespace fairvault::server;
  // Everything the server creates holds protected data or a secret: the database and its
  // -wal/-shm, backups, key files, SQLite's temporary files. Owner only, whatever umask it was
  // started with (the database, backups and key files are also created 0600 explicitly).
  umask(077);
  KeepFreedMemory();
  if (argc < 2) return Usage("");
  const std::string first = argv[1];
  if (first == "--help" || first == "-h" || first == "help") {
    // `help COMMAND` prints that command's usage.
    for (const Subcommand& c : kSubcommands) {
      if (argc > 2 && c.name == std::string(argv[2])) {
        std::cout << c.usage;
        return 0;
      }
    }
    std::cout << FullUsage();
    return 0;
  }
  if (first == "--version" || first == "version") {
    std::cout << "fairvault-server " << FAIRVAULT_VERSION << "\n";
    return 0;
  }
  const Subcommand* command = nullptr;
  for (const Subcommand& c : kSubcommands) {
    if (first == c.name) command = &c;
  }
  if (command == nullptr) return Usage(absl::StrCat("unknown command '", first, "'"));
  // --help / -h anywhere after the subcommand: its usage, before any flag is checked and
  // without opening anything.
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::cout << command->usage;
      return 0;
    }
  }
  std::map<std::string, std::string> flags;
  std::string error;
  if (!ParseFlags(argc, argv, &flags, &error)) return Usage(error, command->usage);
  if (first == "bootstrap") return Bootstrap(flags);
  if (first == "log-key") return LogKey(flags);
  if (first == "serve") return Serve(flags);
  if (first == "backup") return Backup(flags);
  return Migrate(flags);
}
