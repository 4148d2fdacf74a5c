// The PostgreSQL backend over libpq: the connection pool, the schema and its migrations, and the
// redaction of connection strings. Its parameters, results and connection are in statement.h
// (binary form: bytea payloads of hundreds of megabytes are not escaped); its queries in one
// file per domain (catalog.cc, ledger.cc, tables.cc, artifacts.cc, jobs.cc, import.cc).
#include "server/storage/postgres/pg_store.h"

#include <libpq-fe.h>
#include <sqlite3.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/internal/endian.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "core/util/status_macros.h"
#include "server/storage/ledger_chain.h"
#include "server/storage/sqlite/sqlite_store.h"
#include "server/storage/postgres/statement.h"
#include "server/storage/store_common.h"

namespace fairvault::server::storage {

using postgres::Conn;
using postgres::Params;
using postgres::Result;

namespace {

using core::accounting::Spend;
using core::accounting::SpentEpsilonMicro;

// The schema version Migrate brings a database to (table schema_version). The PostgreSQL schema
// started at the SQLite schema's version 4 (job leases), so the numbers mean the same on both.
constexpr int64_t kSchemaVersion = 11;

// Applied under an advisory lock; every statement is idempotent. Any change to it bumps
// kSchemaVersion: a database at the current version is not given the script again (Open).
constexpr char kSchema[] = R"sql(
CREATE TABLE IF NOT EXISTS schema_version(version BIGINT NOT NULL);
CREATE TABLE IF NOT EXISTS accounts(
  id BIGSERIAL PRIMARY KEY, name TEXT NOT NULL UNIQUE, role BIGINT NOT NULL,
  key_salt BYTEA NOT NULL, key_hash BYTEA NOT NULL, created_micros BIGINT NOT NULL);
CREATE TABLE IF NOT EXISTS datasets(
  id BIGSERIAL PRIMARY KEY, name TEXT NOT NULL UNIQUE, attributes BYTEA NOT NULL,
  created_micros BIGINT NOT NULL, subject_count BIGINT NOT NULL DEFAULT 0,
  cap_micro BIGINT, cap_delta DOUBLE PRECISION NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS subject_batches(
  dataset_id BIGINT NOT NULL, batch_id TEXT NOT NULL, digest TEXT NOT NULL,
  rows BIGINT NOT NULL, seq BIGSERIAL NOT NULL, payload BYTEA NOT NULL,
  PRIMARY KEY(dataset_id, batch_id));
CREATE INDEX IF NOT EXISTS subject_batches_by_seq ON subject_batches(dataset_id, seq);
CREATE TABLE IF NOT EXISTS grants(
  account_id BIGINT NOT NULL, dataset_id BIGINT NOT NULL, epsilon_micro BIGINT NOT NULL,
  delta DOUBLE PRECISION NOT NULL, PRIMARY KEY(account_id, dataset_id));
CREATE TABLE IF NOT EXISTS spend(
  account_id BIGINT NOT NULL, dataset_id BIGINT NOT NULL, releases BIGINT NOT NULL,
  pure_micro BIGINT NOT NULL, rdp_all BYTEA NOT NULL, rdp_nonpure BYTEA NOT NULL,
  PRIMARY KEY(account_id, dataset_id));
CREATE TABLE IF NOT EXISTS company_tables(
  handle TEXT PRIMARY KEY, account_id BIGINT NOT NULL, dataset_id BIGINT NOT NULL,
  rows BIGINT NOT NULL, expires_micros BIGINT NOT NULL, payload BYTEA NOT NULL);
CREATE TABLE IF NOT EXISTS ledger(
  seq BIGINT PRIMARY KEY, time_micros BIGINT NOT NULL, kind TEXT NOT NULL,
  account_id BIGINT NOT NULL, account TEXT NOT NULL, dataset_id BIGINT NOT NULL,
  dataset TEXT NOT NULL, request_kind TEXT NOT NULL, idempotency_key TEXT NOT NULL,
  epsilon DOUBLE PRECISION NOT NULL, delta DOUBLE PRECISION NOT NULL, mechanism TEXT NOT NULL,
  pure_micro BIGINT, rdp BYTEA NOT NULL, prev_hash TEXT NOT NULL, hash TEXT NOT NULL);
ALTER TABLE ledger ADD COLUMN IF NOT EXISTS actor TEXT NOT NULL DEFAULT '';
CREATE INDEX IF NOT EXISTS ledger_by_account ON ledger(account, seq);
CREATE TABLE IF NOT EXISTS heads(name TEXT PRIMARY KEY);
INSERT INTO heads(name) VALUES ('ledger'), ('access_log') ON CONFLICT DO NOTHING;
CREATE OR REPLACE FUNCTION fairvault_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN RAISE EXCEPTION 'the % is append-only', TG_ARGV[0]; END $$;
CREATE OR REPLACE TRIGGER ledger_append_only BEFORE UPDATE OR DELETE ON ledger
  FOR EACH ROW EXECUTE FUNCTION fairvault_append_only('ledger');
CREATE OR REPLACE TRIGGER ledger_no_truncate BEFORE TRUNCATE ON ledger
  FOR EACH STATEMENT EXECUTE FUNCTION fairvault_append_only('ledger');
CREATE OR REPLACE TRIGGER heads_append_only BEFORE UPDATE OR DELETE ON heads
  FOR EACH ROW EXECUTE FUNCTION fairvault_append_only('table of lock rows (heads)');
CREATE OR REPLACE TRIGGER heads_no_truncate BEFORE TRUNCATE ON heads
  FOR EACH STATEMENT EXECUTE FUNCTION fairvault_append_only('table of lock rows (heads)');
CREATE TABLE IF NOT EXISTS responses(
  account_id BIGINT NOT NULL, idempotency_key TEXT NOT NULL, request_kind TEXT NOT NULL,
  params_digest TEXT NOT NULL, ledger_seq BIGINT NOT NULL, payload BYTEA NOT NULL,
  error_code BIGINT NOT NULL DEFAULT 0, error_message TEXT NOT NULL DEFAULT '',
  PRIMARY KEY(account_id, idempotency_key));
CREATE TABLE IF NOT EXISTS access_log(
  seq BIGINT PRIMARY KEY, time_micros BIGINT NOT NULL, account TEXT NOT NULL,
  dataset TEXT NOT NULL, artifact_id TEXT NOT NULL, rows BIGINT NOT NULL,
  new_decisions BIGINT NOT NULL DEFAULT -1);
-- A company's access-log listing (ListAccessLog by account). One index row per Decide call.
CREATE INDEX IF NOT EXISTS access_log_by_account ON access_log(account, seq);
CREATE OR REPLACE TRIGGER access_log_append_only BEFORE UPDATE OR DELETE ON access_log
  FOR EACH ROW EXECUTE FUNCTION fairvault_append_only('access log');
CREATE OR REPLACE TRIGGER access_log_no_truncate BEFORE TRUNCATE ON access_log
  FOR EACH STATEMENT EXECUTE FUNCTION fairvault_append_only('access log');
CREATE TABLE IF NOT EXISTS decisions(
  artifact_id TEXT NOT NULL, subject_key TEXT NOT NULL, input DOUBLE PRECISION NOT NULL,
  output DOUBLE PRECISION NOT NULL, PRIMARY KEY(artifact_id, subject_key));
CREATE OR REPLACE FUNCTION fairvault_decisions_read_only() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN RAISE EXCEPTION
    'decisions are stored as batches since schema version 7: upgrade this server'; END $$;
CREATE OR REPLACE TRIGGER decisions_read_only BEFORE INSERT ON decisions
  FOR EACH ROW EXECUTE FUNCTION fairvault_decisions_read_only();
CREATE TABLE IF NOT EXISTS decision_batches(
  artifact_id TEXT NOT NULL, batch BIGINT NOT NULL, payload BYTEA NOT NULL,
  PRIMARY KEY(artifact_id, batch));
CREATE TABLE IF NOT EXISTS merkle_nodes(
  level BIGINT NOT NULL, idx BIGINT NOT NULL, hash BYTEA NOT NULL, PRIMARY KEY(level, idx));
CREATE OR REPLACE TRIGGER merkle_nodes_no_update BEFORE UPDATE OR DELETE OR TRUNCATE
  ON merkle_nodes FOR EACH STATEMENT EXECUTE FUNCTION fairvault_append_only('Merkle tree');
-- A ledger row commits only with its leaf: a replica of an older version (which writes no
-- leaves) cannot append while a newer one keeps the tree.
CREATE OR REPLACE FUNCTION fairvault_ledger_has_leaf() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN
    IF NOT EXISTS (SELECT 1 FROM merkle_nodes WHERE level = 0 AND idx = NEW.seq - 1) THEN
      RAISE EXCEPTION 'ledger row % has no Merkle tree leaf: a fairvault-server older than '
        'schema version 8 wrote it; upgrade every replica', NEW.seq;
    END IF;
    RETURN NULL;
  END $$;
DO $$ BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = 'ledger_has_leaf') THEN
    CREATE CONSTRAINT TRIGGER ledger_has_leaf AFTER INSERT ON ledger
      DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION fairvault_ledger_has_leaf();
  END IF;
END $$;
CREATE TABLE IF NOT EXISTS checkpoints(
  size BIGINT PRIMARY KEY, root BYTEA NOT NULL, note TEXT NOT NULL,
  created_micros BIGINT NOT NULL);
CREATE TABLE IF NOT EXISTS cosignatures(
  size BIGINT NOT NULL, witness TEXT NOT NULL, key_hash BIGINT NOT NULL, line TEXT NOT NULL,
  created_micros BIGINT NOT NULL, PRIMARY KEY(size, witness, key_hash));
CREATE TABLE IF NOT EXISTS artifacts(
  id TEXT PRIMARY KEY, account_id BIGINT NOT NULL, dataset_id BIGINT NOT NULL,
  ledger_seq BIGINT NOT NULL, created_micros BIGINT NOT NULL, payload BYTEA NOT NULL);
CREATE INDEX IF NOT EXISTS artifacts_by_seq ON artifacts(ledger_seq);
CREATE TABLE IF NOT EXISTS jobs(
  id TEXT PRIMARY KEY, account_id BIGINT NOT NULL, dataset_id BIGINT NOT NULL,
  ledger_seq BIGINT NOT NULL, idempotency_key TEXT NOT NULL, table_handle TEXT NOT NULL,
  algorithm BIGINT NOT NULL, request BYTEA NOT NULL, plan BYTEA NOT NULL, seed BYTEA NOT NULL,
  subject_limit BIGINT NOT NULL, state BIGINT NOT NULL, done BIGINT NOT NULL DEFAULT 0,
  total BIGINT NOT NULL DEFAULT 0, submitted_micros BIGINT NOT NULL,
  started_micros BIGINT NOT NULL DEFAULT 0, finished_micros BIGINT NOT NULL DEFAULT 0,
  attempts BIGINT NOT NULL DEFAULT 0, artifact_id TEXT NOT NULL DEFAULT '',
  error TEXT NOT NULL DEFAULT '', lease_owner TEXT NOT NULL DEFAULT '',
  lease_expires_micros BIGINT NOT NULL DEFAULT 0);
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS validation_table_handle TEXT NOT NULL DEFAULT '';
CREATE INDEX IF NOT EXISTS jobs_by_seq ON jobs(ledger_seq);
CREATE INDEX IF NOT EXISTS jobs_by_state ON jobs(state, ledger_seq);
CREATE INDEX IF NOT EXISTS jobs_by_table ON jobs(table_handle, state);
CREATE INDEX IF NOT EXISTS jobs_by_account ON jobs(account_id, ledger_seq);
CREATE INDEX IF NOT EXISTS jobs_by_dataset ON jobs(dataset_id, ledger_seq);
)sql";

constexpr char kRedacted[] = "********";

// The text of a URI component with %XX decoded; itself if it does not decode.
std::string PercentDecoded(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    if (i + 2 >= text.size() || !std::isxdigit(static_cast<unsigned char>(text[i + 1])) ||
        !std::isxdigit(static_cast<unsigned char>(text[i + 2]))) {
      return text;
    }
    out += static_cast<char>(std::stoi(text.substr(i + 1, 2), nullptr, 16));
    i += 2;
  }
  return out;
}

// The connection keywords libpq itself hides when it displays them (`dispchar` '*': password,
// sslpassword, and whatever a later libpq adds).
const std::vector<std::string>& SecretKeywords() {
  static const auto* const keywords = [] {
    auto* out = new std::vector<std::string>;
    PQconninfoOption* defaults = PQconndefaults();
    for (PQconninfoOption* o = defaults; o != nullptr && o->keyword != nullptr; ++o) {
      if (o->dispchar != nullptr && std::strchr(o->dispchar, '*') != nullptr) {
        out->push_back(o->keyword);
      }
    }
    PQconninfoFree(defaults);
    if (out->empty()) *out = {"password", "sslpassword"};  // out of memory: libpq's own list
    return out;
  }();
  return *keywords;
}

bool IsSecretKeyword(const std::string& keyword) {
  const auto& secrets = SecretKeywords();
  return std::find(secrets.begin(), secrets.end(), keyword) != secrets.end();
}

// The options libpq reads from `conninfo` that it sets, as (keyword, value); nullopt if it does
// not parse.
std::optional<std::vector<std::pair<std::string, std::string>>> LibpqOptions(
    const std::string& conninfo) {
  PQconninfoOption* parsed = PQconninfoParse(conninfo.c_str(), nullptr);
  if (parsed == nullptr) return std::nullopt;
  std::vector<std::pair<std::string, std::string>> options;
  for (PQconninfoOption* o = parsed; o->keyword != nullptr; ++o) {
    if (o->val != nullptr && *o->val != '\0') options.emplace_back(o->keyword, o->val);
  }
  PQconninfoFree(parsed);
  return options;
}

// The values of `conninfo`'s secret keywords as libpq reads them (decoded, unquoted); none if
// it does not parse.
std::vector<std::string> SecretValues(const std::string& conninfo) {
  std::vector<std::string> values;
  for (const auto& [keyword, value] : LibpqOptions(conninfo).value_or(
           std::vector<std::pair<std::string, std::string>>())) {
    if (IsSecretKeyword(keyword)) values.push_back(value);
  }
  return values;
}

// A secret's value in `conninfo`, at [begin, end).
struct SecretSpan {
  size_t begin, end;
};

// Where the secrets are in `conninfo`, as libpq reads a URI (userinfo up to the first '@'
// before any '/', "user:password"; a secret keyword's query parameter, its name possibly
// percent-encoded) or a key=value string (`password = value`, the value possibly
// single-quoted, backslash escapes in either form).
std::vector<SecretSpan> PasswordSpans(const std::string& conninfo) {
  std::vector<SecretSpan> spans;
  if (IsPostgresUri(conninfo)) {
    const size_t start = conninfo.find("://") + 3;
    size_t rest = start;
    const size_t at = conninfo.find_first_of("@/", start);
    if (at != std::string::npos && conninfo[at] == '@') {
      const size_t colon = conninfo.find(':', start);
      if (colon < at) spans.push_back({colon + 1, at});
      rest = at + 1;
    }
    size_t param = conninfo.find('?', rest);
    while (param != std::string::npos) {
      const size_t begin = param + 1;
      const size_t end = std::min(conninfo.find('&', begin), conninfo.size());
      const size_t eq = conninfo.find('=', begin);
      if (eq < end && IsSecretKeyword(PercentDecoded(conninfo.substr(begin, eq - begin)))) {
        spans.push_back({eq + 1, end});
      }
      param = end < conninfo.size() ? end : std::string::npos;
    }
    return spans;
  }
  const auto space = [&](size_t i) {
    return i < conninfo.size() && std::isspace(static_cast<unsigned char>(conninfo[i]));
  };
  size_t i = 0;
  while (i < conninfo.size()) {
    while (space(i)) ++i;
    const size_t key = i;
    while (i < conninfo.size() && conninfo[i] != '=' && !space(i)) ++i;
    const bool is_secret = IsSecretKeyword(conninfo.substr(key, i - key));
    while (space(i)) ++i;
    if (i >= conninfo.size() || conninfo[i] != '=') break;  // malformed: libpq refuses it
    ++i;
    while (space(i)) ++i;
    const size_t value = i;
    if (i < conninfo.size() && conninfo[i] == '\'') {
      for (++i; i < conninfo.size() && conninfo[i] != '\''; ++i) {
        if (conninfo[i] == '\\') ++i;
      }
      ++i;
    } else {
      for (; i < conninfo.size() && !space(i); ++i) {
        if (conninfo[i] == '\\') ++i;
      }
    }
    i = std::min(i, conninfo.size());
    if (is_secret) spans.push_back({value, i});
  }
  return spans;
}

// A key=value string's value as libpq reads it: quotes removed, backslash escapes undone.
std::string KeywordValueDecoded(const std::string& raw) {
  std::string out;
  const bool quoted = !raw.empty() && raw[0] == '\'';
  for (size_t i = quoted ? 1 : 0; i < raw.size(); ++i) {
    if (quoted && raw[i] == '\'') break;
    if (raw[i] == '\\' && i + 1 < raw.size()) ++i;
    out += raw[i];
  }
  return out;
}

// `conninfo` with its secrets replaced by kRedacted; an error (which quotes none of it) if that
// might not hide every secret: libpq cannot parse it (its own reading is unknown), a secret
// libpq reads is not a value the spans found, or libpq reads a part of it as a port that is not
// a number or as a user or host holding '@', '?' or '=': a password with an unencoded '/', '@'
// or '?' that libpq takes for something else, which the string would then show.
absl::StatusOr<std::string> Redacted(const std::string& conninfo) {
  const auto options = LibpqOptions(conninfo);
  if (!options) {
    return absl::InvalidArgumentError("the connection string does not parse; correct it");
  }
  std::vector<std::string> secrets;
  absl::Status misread;
  for (const auto& [keyword, value] : *options) {
    if (IsSecretKeyword(keyword)) secrets.push_back(value);
    if (keyword == "port" &&
        value.find_first_not_of("0123456789,") != std::string::npos) {
      misread = absl::InvalidArgumentError(
          "the connection string's port is not a number (a '/' in a password must be "
          "percent-encoded, %2F); correct it");
    }
    if ((keyword == "host" || keyword == "hostaddr" || keyword == "user") &&
        value.find_first_of(keyword == "user" ? "?=" : "@?=") != std::string::npos) {
      misread = absl::InvalidArgumentError(absl::StrCat(
          "the connection string's ", keyword, " holds '", keyword == "user" ? "" : "@', '",
          "?' or '=' (an '@' or '?' in a password must be percent-encoded, %40 and %3F); "
          "correct it"));
    }
  }
  RETURN_IF_ERROR(misread);
  const bool uri = IsPostgresUri(conninfo);
  const std::vector<SecretSpan> spans = PasswordSpans(conninfo);
  std::vector<std::string> found;
  for (const SecretSpan& span : spans) {
    const std::string raw = conninfo.substr(span.begin, span.end - span.begin);
    found.push_back(uri ? PercentDecoded(raw) : KeywordValueDecoded(raw));
  }
  for (const std::string& secret : secrets) {
    if (std::find(found.begin(), found.end(), secret) == found.end()) {
      return absl::InvalidArgumentError(
          "the connection string has a password where the server cannot hide it when it prints "
          "the string; write it percent-encoded as postgresql://USER:PASSWORD@HOST/NAME or "
          "?password=, or better name a passfile");
    }
  }
  std::string out = conninfo;
  for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
    out.replace(it->begin, it->end - it->begin, kRedacted);
  }
  return out;
}

// libpq's message about a string it cannot parse, from its first quote on replaced by a quoted
// kRedacted: what it quotes is a piece of the string, which may be of the password (and may
// itself hold quotes).
std::string WithoutQuotedParts(const std::string& message) {
  const size_t quote = message.find('"');
  if (quote == std::string::npos) return message;
  return absl::StrCat(message.substr(0, quote), "\"", kRedacted, "\"");
}

// `text` (a libpq message) without `conninfo`'s password, as written or decoded, and as one
// line.
std::string Scrubbed(std::string text, const std::string& conninfo) {
  std::vector<std::string> secrets = SecretValues(conninfo);
  for (const SecretSpan& span : PasswordSpans(conninfo)) {
    const std::string raw = conninfo.substr(span.begin, span.end - span.begin);
    secrets.push_back(raw);
    secrets.push_back(PercentDecoded(raw));
  }
  // Longest first, so that a secret inside another is not left half replaced.
  std::sort(secrets.begin(), secrets.end(),
            [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  for (const std::string& secret : secrets) {
    if (!secret.empty()) text = absl::StrReplaceAll(text, {{secret, kRedacted}});
  }
  text = absl::StrReplaceAll(text, {{"\n\t", " "}, {"\n", " "}, {"\t", " "}});
  while (!text.empty() && text.back() == ' ') text.pop_back();
  return text;
}

}  // namespace

bool IsPostgresUri(const std::string& db) {
  return absl::StartsWith(db, "postgresql://") || absl::StartsWith(db, "postgres://");
}

std::string RedactedConnInfo(const std::string& conninfo) {
  absl::StatusOr<std::string> shown = Redacted(conninfo);
  return shown.ok() ? *std::move(shown) : "(a connection string not shown: see the error)";
}

// ---- connections and schema ------------------------------------------------------------------

PgStore::PgStore(std::string conninfo, int pool_size)
    : conninfo_(std::move(conninfo)), pool_size_(std::max(pool_size, 1)) {}

PgStore::~PgStore() = default;

void PgStore::Release::operator()(Conn* conn) const {
  absl::MutexLock lock(&store->mu_);
  if (conn->reusable()) {
    store->idle_.emplace_back(conn);
  } else {
    delete conn;  // broken, or left in a transaction: replaced by a new one on the next Borrow
    --store->open_;
  }
}

absl::StatusOr<PgStore::Borrowed> PgStore::Borrow() {
  {
    absl::MutexLock lock(&mu_);
    auto available = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return !idle_.empty() || open_ < pool_size_;
    };
    mu_.Await(absl::Condition(&available));
    if (!idle_.empty()) {
      Conn* conn = idle_.back().release();
      idle_.pop_back();
      return Borrowed(conn, Release{this});
    }
    ++open_;
  }
  PGconn* raw = PQconnectdb(conninfo_.c_str());
  if (raw == nullptr || PQstatus(raw) != CONNECTION_OK) {
    const std::string message = raw ? PQerrorMessage(raw) : "out of memory";
    PQfinish(raw);
    {
      absl::MutexLock lock(&mu_);
      --open_;
    }
    return Unavailable(absl::StrCat("cannot connect: ", message));
  }
  Reconnected();
  auto conn = Borrowed(new Conn(raw, this), Release{this});
  // Quiet: NOTICEs would go to stderr.
  RETURN_IF_ERROR(conn->Run("SET client_min_messages TO warning"));
  return conn;
}

absl::Status PgStore::Unavailable(const std::string& detail) {
  const std::string line = Scrubbed(detail, conninfo_);
  absl::MutexLock lock(&log_mu_);
  const absl::Time now = absl::Now();
  if (line == last_logged_ && now - last_logged_at_ < absl::Seconds(1)) {
    ++unlogged_;
  } else {
    std::cerr << "fairvault: the PostgreSQL database is unavailable: " << line;
    if (unlogged_ > 0) std::cerr << " (the previous line repeated " << unlogged_ << " times)";
    std::cerr << "\n";
    last_logged_ = line;
    last_logged_at_ = now;
    unlogged_ = 0;
  }
  return DatabaseUnavailable();
}

void PgStore::Reconnected() {
  absl::MutexLock lock(&log_mu_);
  if (last_logged_.empty()) return;
  std::cerr << "fairvault: the PostgreSQL database answers again";
  if (unlogged_ > 0) std::cerr << " (the previous line repeated " << unlogged_ << " times)";
  std::cerr << "\n";
  last_logged_.clear();
  unlogged_ = 0;
}

absl::StatusOr<std::unique_ptr<PgStore>> PgStore::Open(const std::string& conninfo, int pool_size) {
  // A string libpq cannot parse is the operator's mistake, not an outage. libpq's message may
  // quote the offending part, the password included: it is scrubbed.
  char* parse_error = nullptr;
  PQconninfoOption* parsed = PQconninfoParse(conninfo.c_str(), &parse_error);
  if (parsed == nullptr) {
    const std::string message = parse_error != nullptr ? parse_error : "out of memory";
    PQfreemem(parse_error);
    return absl::InvalidArgumentError(absl::StrCat(
        "the connection string does not parse (",
        Scrubbed(WithoutQuotedParts(message), conninfo),
        "); correct it (a libpq URI: postgresql://USER@HOST:PORT/NAME?passfile=PATH)"));
  }
  PQconninfoFree(parsed);
  // Nor is one served whose password could not be hidden in what the server prints.
  RETURN_IF_ERROR(Redacted(conninfo).status());
  std::unique_ptr<PgStore> store(new PgStore(conninfo, pool_size));
  ASSIGN_OR_RETURN(Borrowed c, store->Borrow());
  // A database already at this version gets nothing of the script: its DDL locks the tables
  // even where it changes nothing (ALTER TABLE ... ADD COLUMN IF NOT EXISTS takes the table's
  // exclusive lock, CREATE OR REPLACE TRIGGER and CREATE INDEX IF NOT EXISTS keep writers
  // out), all held to the end of one transaction, so a replica (re)starting beside another
  // one's charges and jobs waited for them, held them up, and could deadlock with them.
  ASSIGN_OR_RETURN(Result exists,
                   c->Exec("SELECT COUNT(to_regclass('schema_version'))"));
  bool current = false;
  if (exists.rows() == 1 && exists.Int(0, 0) == 1) {
    ASSIGN_OR_RETURN(Result v, c->Exec("SELECT 1 FROM schema_version WHERE version = $1",
                                       Params().Int(kSchemaVersion)));
    current = v.rows() > 0;
  }
  if (current) {
    std::cerr << "fairvault: database schema at version " << kSchemaVersion << " (current)\n";
    return store;
  }
  int64_t found = 0;  // the version the database had when this process took the lock
  RETURN_IF_ERROR(c->InTransaction([&]() -> absl::Status {
    // One process applies the schema at a time (CREATE ... IF NOT EXISTS races otherwise).
    RETURN_IF_ERROR(c->Run("SELECT pg_advisory_xact_lock(7261626175)"));
    RETURN_IF_ERROR(c->Script(kSchema));
    ASSIGN_OR_RETURN(Result v, c->Exec("SELECT version FROM schema_version"));
    const int64_t at = v.rows() == 0 ? 0 : v.Int(0, 0);
    found = at;
    if (at > kSchemaVersion) {
      return absl::FailedPreconditionError(absl::StrCat("the database has schema version ", at,
                                                        " but this fairvault-server knows ",
                                                        kSchemaVersion, "; upgrade the server"));
    }
    // Version 5 (a job's validation_table_handle, issue 22) and version 6 (the ledger's actor,
    // issue 23) are kSchema's idempotent ALTER TABLE ... ADD COLUMN IF NOT EXISTS; version 7
    // (decision_batches, issue 24) a new table; version 11 (jobs_by_account, jobs_by_dataset)
    // two CREATE INDEX IF NOT EXISTS. Steps that cannot be written so go here, each idempotent.
    // Version 8: the ledger's Merkle tree (issue 25); the rows written before join it, in order.
    RETURN_IF_ERROR(postgres::BackfillTree(*c));
    // Version 10: responses.pending (1: a charged release whose post-processing is still to be
    // stored; rows from before are finished). Added only where it is missing: ALTER TABLE takes
    // the table's exclusive lock even when the column exists, and at every start it deadlocked
    // with another replica's charges (which read responses, then the ledger).
    ASSIGN_OR_RETURN(Result pending,
                     c->Exec("SELECT 1 FROM information_schema.columns WHERE "
                             "table_schema = current_schema() AND table_name = 'responses' "
                             "AND column_name = 'pending'"));
    if (pending.rows() == 0) {
      RETURN_IF_ERROR(
          c->Run("ALTER TABLE responses ADD COLUMN pending BIGINT NOT NULL DEFAULT 0"));
    }
    if (v.rows() == 0) {
      return c->Run("INSERT INTO schema_version(version) VALUES($1)", Params().Int(kSchemaVersion));
    }
    return c->Run("UPDATE schema_version SET version=$1", Params().Int(kSchemaVersion));
  }));
  // Replicas starting together take the lock in turn: one logs the migration, the others find
  // the database current (what the container test's upgrade checks).
  if (found < kSchemaVersion) {
    std::cerr << "fairvault: database schema migrated from version " << found << " to "
              << kSchemaVersion << "\n";
  } else {
    std::cerr << "fairvault: database schema at version " << kSchemaVersion << " (current)\n";
  }
  return store;
}

}  // namespace fairvault::server::storage
