// PostgreSQL store: schema, statements and the one charge transaction, over libpq. Parameters
// and results travel in binary form (bytea payloads of hundreds of megabytes are not escaped).
#include "server/storage/pg_store.h"

#include <libpq-fe.h>
#include <sqlite3.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <iostream>
#include <map>
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
#include "server/storage/sqlite_store.h"
#include "server/storage/store_common.h"

namespace fairvault::server::storage {
namespace {

using core::accounting::Spend;
using core::accounting::SpentEpsilonMicro;

// The schema version Migrate brings a database to (table schema_version). The PostgreSQL schema
// started at the SQLite schema's version 4 (job leases), so the numbers mean the same on both.
constexpr int64_t kSchemaVersion = 4;

// Applied under an advisory lock; every statement is idempotent.
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
CREATE INDEX IF NOT EXISTS ledger_by_account ON ledger(account, seq);
CREATE TABLE IF NOT EXISTS heads(name TEXT PRIMARY KEY);
INSERT INTO heads(name) VALUES ('ledger'), ('access_log') ON CONFLICT DO NOTHING;
CREATE OR REPLACE FUNCTION fairvault_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN RAISE EXCEPTION 'the % is append-only', TG_ARGV[0]; END $$;
CREATE OR REPLACE TRIGGER ledger_append_only BEFORE UPDATE OR DELETE ON ledger
  FOR EACH ROW EXECUTE FUNCTION fairvault_append_only('ledger');
CREATE OR REPLACE TRIGGER ledger_no_truncate BEFORE TRUNCATE ON ledger
  FOR EACH STATEMENT EXECUTE FUNCTION fairvault_append_only('ledger');
CREATE TABLE IF NOT EXISTS responses(
  account_id BIGINT NOT NULL, idempotency_key TEXT NOT NULL, request_kind TEXT NOT NULL,
  params_digest TEXT NOT NULL, ledger_seq BIGINT NOT NULL, payload BYTEA NOT NULL,
  error_code BIGINT NOT NULL DEFAULT 0, error_message TEXT NOT NULL DEFAULT '',
  PRIMARY KEY(account_id, idempotency_key));
CREATE TABLE IF NOT EXISTS access_log(
  seq BIGINT PRIMARY KEY, time_micros BIGINT NOT NULL, account TEXT NOT NULL,
  dataset TEXT NOT NULL, artifact_id TEXT NOT NULL, rows BIGINT NOT NULL,
  new_decisions BIGINT NOT NULL DEFAULT -1);
CREATE OR REPLACE TRIGGER access_log_append_only BEFORE UPDATE OR DELETE ON access_log
  FOR EACH ROW EXECUTE FUNCTION fairvault_append_only('access log');
CREATE OR REPLACE TRIGGER access_log_no_truncate BEFORE TRUNCATE ON access_log
  FOR EACH STATEMENT EXECUTE FUNCTION fairvault_append_only('access log');
CREATE TABLE IF NOT EXISTS decisions(
  artifact_id TEXT NOT NULL, subject_key TEXT NOT NULL, input DOUBLE PRECISION NOT NULL,
  output DOUBLE PRECISION NOT NULL, PRIMARY KEY(artifact_id, subject_key));
CREATE TABLE IF NOT EXISTS artifacts(
  id TEXT PRIMARY KEY, account_id BIGINT NOT NULL, dataset_id BIGINT NOT NULL,
  ledger_seq BIGINT NOT NULL, created_micros BIGINT NOT NULL, payload BYTEA NOT NULL);
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
CREATE INDEX IF NOT EXISTS jobs_by_seq ON jobs(ledger_seq);
CREATE INDEX IF NOT EXISTS jobs_by_state ON jobs(state, ledger_seq);
CREATE INDEX IF NOT EXISTS jobs_by_table ON jobs(table_handle, state);
)sql";

// Type OIDs of the parameters we send (pg_type.h).
constexpr Oid kInt8 = 20;
constexpr Oid kText = 25;
constexpr Oid kFloat8 = 701;
constexpr Oid kBytea = 17;

// Binary parameters for PQexecParams.
class Params {
 public:
  Params& Int(int64_t v) {
    std::string b(8, '\0');
    absl::big_endian::Store64(b.data(), static_cast<uint64_t>(v));
    return Add(kInt8, std::move(b));
  }
  Params& Double(double v) {
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    std::string b(8, '\0');
    absl::big_endian::Store64(b.data(), bits);
    return Add(kFloat8, std::move(b));
  }
  Params& Text(const std::string& v) { return Ref(kText, v); }
  Params& Bytes(const std::string& v) { return Ref(kBytea, v); }
  Params& OptionalInt(const std::optional<int64_t>& v) { return v ? Int(*v) : Null(kInt8); }
  Params& OptionalText(const std::optional<std::string>& v) { return v ? Text(*v) : Null(kText); }
  Params& Null(Oid type) {
    types_.push_back(type);
    values_.push_back(nullptr);
    lengths_.push_back(0);
    return *this;
  }

  int size() const { return static_cast<int>(types_.size()); }
  const Oid* types() const { return types_.data(); }
  const char* const* values() const { return values_.data(); }
  const int* lengths() const { return lengths_.data(); }
  const int* formats() const {
    formats_.assign(types_.size(), 1);
    return formats_.data();
  }

 private:
  Params& Add(Oid type, std::string bytes) {
    owned_.push_back(std::make_unique<std::string>(std::move(bytes)));
    return Ref(type, *owned_.back());
  }
  // Refers to `v`, which must outlive the call.
  Params& Ref(Oid type, const std::string& v) {
    types_.push_back(type);
    values_.push_back(v.data());
    lengths_.push_back(static_cast<int>(v.size()));
    return *this;
  }
  std::vector<Oid> types_;
  std::vector<const char*> values_;
  std::vector<int> lengths_;
  mutable std::vector<int> formats_;
  std::vector<std::unique_ptr<std::string>> owned_;
};

// A query result in binary form.
class Result {
 public:
  explicit Result(PGresult* r) : r_(r) {}
  Result(Result&& o) noexcept : r_(std::exchange(o.r_, nullptr)) {}
  Result& operator=(Result&&) = delete;
  ~Result() { PQclear(r_); }

  int rows() const { return PQntuples(r_); }
  bool IsNull(int row, int col) const { return PQgetisnull(r_, row, col) != 0; }
  int64_t Int(int row, int col) const {
    const char* p = PQgetvalue(r_, row, col);
    switch (PQgetlength(r_, row, col)) {
      case 8:
        return static_cast<int64_t>(absl::big_endian::Load64(p));
      case 4:
        return static_cast<int32_t>(absl::big_endian::Load32(p));
      case 2:
        return static_cast<int16_t>(absl::big_endian::Load16(p));
      case 1:
        return static_cast<unsigned char>(p[0]);
      default:
        return 0;
    }
  }
  double Double(int row, int col) const {
    uint64_t bits = absl::big_endian::Load64(PQgetvalue(r_, row, col));
    double v;
    std::memcpy(&v, &bits, sizeof v);
    return v;
  }
  std::string Text(int row, int col) const {
    return std::string(PQgetvalue(r_, row, col), PQgetlength(r_, row, col));
  }
  // Rows a command changed.
  int64_t changed() const {
    const char* n = PQcmdTuples(r_);
    return n[0] == '\0' ? 0 : std::strtoll(n, nullptr, 10);
  }

 private:
  PGresult* r_;
};

constexpr char kRedacted[] = "********";

// Where the password is in `conninfo`: [begin, end) spans, as libpq reads a URI (userinfo up
// to the first '@' before any '/', "user:password"; a `password` query parameter) or a
// key=value string (`password = value`, the value possibly single-quoted).
std::vector<std::pair<size_t, size_t>> PasswordSpans(const std::string& conninfo) {
  std::vector<std::pair<size_t, size_t>> spans;
  if (IsPostgresUri(conninfo)) {
    const size_t start = conninfo.find("://") + 3;
    size_t rest = start;
    const size_t at = conninfo.find_first_of("@/", start);
    if (at != std::string::npos && conninfo[at] == '@') {
      const size_t colon = conninfo.find(':', start);
      if (colon < at) spans.emplace_back(colon + 1, at);
      rest = at + 1;
    }
    size_t param = conninfo.find('?', rest);
    while (param != std::string::npos) {
      const size_t begin = param + 1;
      const size_t end = std::min(conninfo.find('&', begin), conninfo.size());
      const size_t eq = conninfo.find('=', begin);
      if (eq < end && conninfo.compare(begin, eq - begin, "password") == 0) {
        spans.emplace_back(eq + 1, end);
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
    const bool is_password = conninfo.compare(key, i - key, "password") == 0;
    while (space(i)) ++i;
    if (i >= conninfo.size() || conninfo[i] != '=') break;  // malformed: libpq refuses it
    ++i;
    while (space(i)) ++i;
    const size_t value = i;
    if (i < conninfo.size() && conninfo[i] == '\'') {
      for (++i; i < conninfo.size() && conninfo[i] != '\''; ++i) {
        if (conninfo[i] == '\\') ++i;
      }
      i = std::min(i + 1, conninfo.size());
    } else {
      while (i < conninfo.size() && !space(i)) ++i;
    }
    if (is_password) spans.emplace_back(value, i);
  }
  return spans;
}

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

// `text` (a libpq message) without `conninfo`'s password, as written or decoded, and as one
// line.
std::string Scrubbed(std::string text, const std::string& conninfo) {
  for (const auto& [begin, end] : PasswordSpans(conninfo)) {
    const std::string raw = conninfo.substr(begin, end - begin);
    for (const std::string& secret : {raw, PercentDecoded(raw)}) {
      if (!secret.empty()) text = absl::StrReplaceAll(text, {{secret, kRedacted}});
    }
  }
  text = absl::StrReplaceAll(text, {{"\n\t", " "}, {"\n", " "}, {"\t", " "}});
  while (!text.empty() && text.back() == ' ') text.pop_back();
  return text;
}

bool IsConnectionLoss(const char* sqlstate) {
  // 08: connection exceptions; 57P01-57P03: the server is shutting down or starting;
  // 53300: too many connections.
  return sqlstate != nullptr &&
         (absl::StartsWith(sqlstate, "08") || absl::StartsWith(sqlstate, "57P") ||
          std::strcmp(sqlstate, "53300") == 0);
}

}  // namespace

bool IsPostgresUri(const std::string& db) {
  return absl::StartsWith(db, "postgresql://") || absl::StartsWith(db, "postgres://");
}

std::string RedactedConnInfo(const std::string& conninfo) {
  std::string out = conninfo;
  const auto spans = PasswordSpans(conninfo);
  for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
    out.replace(it->first, it->second - it->first, kRedacted);
  }
  return out;
}

// One connection. Exec maps PostgreSQL's errors to statuses: a lost connection (or a server
// that is restarting) is Unavailable (its detail logged by the store), a unique violation
// AlreadyExists.
class PgStore::Conn {
 public:
  Conn(PGconn* c, PgStore* store) : c_(c), store_(store) {}
  ~Conn() { PQfinish(c_); }
  bool ok() const { return PQstatus(c_) == CONNECTION_OK; }

  absl::StatusOr<Result> Exec(const char* sql, const Params& p = Params()) {
    return Check(PQexecParams(c_, sql, p.size(), p.types(), p.values(), p.lengths(), p.formats(),
                              /*resultFormat=*/1));
  }

  // Several statements without parameters (the schema).
  absl::Status Script(const char* sql) { return Check(PQexec(c_, sql)).status(); }

  absl::StatusOr<Result> Check(PGresult* raw) {
    const ExecStatusType st = raw == nullptr ? PGRES_FATAL_ERROR : PQresultStatus(raw);
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) return Result(raw);
    const char* sqlstate = raw ? PQresultErrorField(raw, PG_DIAG_SQLSTATE) : nullptr;
    std::string message = raw ? PQresultErrorMessage(raw) : PQerrorMessage(c_);
    while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) {
      message.pop_back();
    }
    absl::Status status;
    // No SQLSTATE: libpq's own error, not the server's; e.g. "server closed the connection
    // unexpectedly" while PQstatus still says CONNECTION_OK (seen under pg_ctl stop -m immediate).
    if (!ok() || sqlstate == nullptr || IsConnectionLoss(sqlstate)) {
      status = store_->Unavailable(message);
    } else if (sqlstate != nullptr && std::strcmp(sqlstate, "23505") == 0) {
      status = absl::AlreadyExistsError(absl::StrCat("constraint: ", message));
    } else if (sqlstate != nullptr &&
               (std::strcmp(sqlstate, "40001") == 0 || std::strcmp(sqlstate, "40P01") == 0)) {
      status = absl::AbortedError(absl::StrCat("postgres: ", message, "; retry"));
    } else if (sqlstate != nullptr && std::strcmp(sqlstate, "54000") == 0) {
      status = absl::InvalidArgumentError(
          "a value is larger than the database accepts (1 GB per batch or table); split it");
    } else {
      status = absl::InternalError(absl::StrCat("postgres: ", message));
    }
    PQclear(raw);
    return status;
  }

  absl::Status Run(const char* sql, const Params& p = Params()) { return Exec(sql, p).status(); }

  // BEGIN ... COMMIT around `fn`, rolled back unless `fn` and the commit succeed.
  template <typename Fn>
  auto InTransaction(Fn fn) -> decltype(fn()) {
    RETURN_IF_ERROR(Run("BEGIN"));
    auto result = fn();
    if (!result.ok()) {
      (void)Run("ROLLBACK");
      return result;
    }
    RETURN_IF_ERROR(Run("COMMIT"));
    return result;
  }

  // Serializes ledger (or access-log) appends across every process on the database.
  absl::Status LockHead(const char* name) {
    return Run("SELECT name FROM heads WHERE name=$1 FOR UPDATE", Params().Text(name));
  }

 private:
  PGconn* c_;
  PgStore* store_;
};

namespace {

using Conn = PgStore::Conn;

constexpr char kAccountCols[] = "id, name, role, key_salt, key_hash, created_micros";
AccountRecord ReadAccount(const Result& r, int i) {
  return AccountRecord{r.Int(i, 0),  r.Text(i, 1), static_cast<Role>(r.Int(i, 2)),
                       r.Text(i, 3), r.Text(i, 4), r.Int(i, 5)};
}

constexpr char kDatasetCols[] =
    "id, name, attributes, created_micros, subject_count, cap_micro, cap_delta";
DatasetRecord ReadDataset(const Result& r, int i) {
  DatasetRecord d;
  d.id = r.Int(i, 0);
  d.name = r.Text(i, 1);
  d.attributes = r.Text(i, 2);
  d.created_micros = r.Int(i, 3);
  d.subject_count = r.Int(i, 4);
  if (!r.IsNull(i, 5)) d.cap_micro = r.Int(i, 5);
  d.cap_delta = r.Double(i, 6);
  return d;
}

absl::StatusOr<Spend> ReadSpend(const Result& r, int i, int first_col) {
  Spend spend;
  spend.releases = r.Int(i, first_col);
  spend.pure_micro = r.Int(i, first_col + 1);
  ASSIGN_OR_RETURN(spend.rdp_all_nano, DecodeInt64s(r.Text(i, first_col + 2)));
  ASSIGN_OR_RETURN(spend.rdp_nonpure_nano, DecodeInt64s(r.Text(i, first_col + 3)));
  return spend;
}

constexpr char kLedgerCols[] =
    "seq, time_micros, kind, account_id, account, dataset_id, dataset, request_kind, "
    "idempotency_key, epsilon, delta, mechanism, pure_micro, rdp, prev_hash, hash";
LedgerRow ReadLedger(const Result& r, int i) {
  LedgerRow row;
  row.seq = r.Int(i, 0);
  row.time_micros = r.Int(i, 1);
  row.kind = r.Text(i, 2);
  row.account = r.Text(i, 4);
  row.dataset = r.Text(i, 6);
  row.request_kind = r.Text(i, 7);
  row.idempotency_key = r.Text(i, 8);
  row.epsilon = r.Double(i, 9);
  row.delta = r.Double(i, 10);
  row.mechanism = r.Text(i, 11);
  if (!r.IsNull(i, 12)) row.pure_micro = r.Int(i, 12);
  auto rdp = DecodeInt64s(r.Text(i, 13));
  if (rdp.ok()) row.rdp_nano = *std::move(rdp);
  row.prev_hash = r.Text(i, 14);
  row.hash = r.Text(i, 15);
  return row;
}

constexpr char kJobCols[] =
    "id, account_id, dataset_id, ledger_seq, idempotency_key, table_handle, algorithm, request, "
    "plan, seed, subject_limit, state, done, total, submitted_micros, started_micros, "
    "finished_micros, attempts, artifact_id, error, lease_owner, lease_expires_micros";
JobRecord ReadJob(const Result& r, int i) {
  JobRecord j;
  j.id = r.Text(i, 0);
  j.account_id = r.Int(i, 1);
  j.dataset_id = r.Int(i, 2);
  j.ledger_seq = r.Int(i, 3);
  j.idempotency_key = r.Text(i, 4);
  j.table_handle = r.Text(i, 5);
  j.algorithm = static_cast<int32_t>(r.Int(i, 6));
  j.request = r.Text(i, 7);
  j.plan = r.Text(i, 8);
  j.seed = r.Text(i, 9);
  j.subject_limit = r.Int(i, 10);
  j.state = static_cast<JobState>(r.Int(i, 11));
  j.done = r.Int(i, 12);
  j.total = r.Int(i, 13);
  j.submitted_micros = r.Int(i, 14);
  j.started_micros = r.Int(i, 15);
  j.finished_micros = r.Int(i, 16);
  j.attempts = static_cast<int32_t>(r.Int(i, 17));
  j.artifact_id = r.Text(i, 18);
  j.error = r.Text(i, 19);
  j.lease_owner = r.Text(i, 20);
  j.lease_expires_micros = r.Int(i, 21);
  return j;
}

absl::Status NotFoundIfEmpty(const Result& r, const std::string& what) {
  if (r.rows() == 0) return absl::NotFoundError(what);
  return absl::OkStatus();
}

absl::StatusOr<JobRecord> JobIn(Conn& c, const std::string& id, bool for_update) {
  ASSIGN_OR_RETURN(Result r, c.Exec(absl::StrCat("SELECT ", kJobCols, " FROM jobs WHERE id=$1",
                                                 for_update ? " FOR UPDATE" : "")
                                        .c_str(),
                                    Params().Text(id)));
  RETURN_IF_ERROR(NotFoundIfEmpty(r, UnknownJob(id)));
  return ReadJob(r, 0);
}

absl::StatusOr<DatasetRecord> DatasetById(Conn& c, int64_t id) {
  ASSIGN_OR_RETURN(
      Result r, c.Exec(absl::StrCat("SELECT ", kDatasetCols, " FROM datasets WHERE id=$1").c_str(),
                       Params().Int(id)));
  RETURN_IF_ERROR(NotFoundIfEmpty(r, absl::StrCat("no dataset with id ", id)));
  return ReadDataset(r, 0);
}

absl::StatusOr<GrantRecord> GrantIn(Conn& c, int64_t account_id, int64_t dataset_id) {
  ASSIGN_OR_RETURN(Result r, c.Exec("SELECT epsilon_micro, delta FROM grants "
                                    "WHERE account_id=$1 AND dataset_id=$2",
                                    Params().Int(account_id).Int(dataset_id)));
  RETURN_IF_ERROR(NotFoundIfEmpty(r, "no grant"));
  return GrantRecord{account_id, dataset_id, r.Int(0, 0), r.Double(0, 1)};
}

absl::StatusOr<Spend> SpendIn(Conn& c, int64_t account_id, int64_t dataset_id) {
  ASSIGN_OR_RETURN(Result r, c.Exec("SELECT releases, pure_micro, rdp_all, rdp_nonpure FROM spend "
                                    "WHERE account_id=$1 AND dataset_id=$2",
                                    Params().Int(account_id).Int(dataset_id)));
  if (r.rows() == 0) return Spend{};
  return ReadSpend(r, 0, 0);
}

absl::StatusOr<Spend> DatasetSpendIn(Conn& c, int64_t dataset_id) {
  ASSIGN_OR_RETURN(Result r, c.Exec("SELECT releases, pure_micro, rdp_all, rdp_nonpure FROM spend "
                                    "WHERE dataset_id=$1",
                                    Params().Int(dataset_id)));
  Spend total;
  for (int i = 0; i < r.rows(); ++i) {
    ASSIGN_OR_RETURN(Spend one, ReadSpend(r, i, 0));
    total.Merge(one);  // saturating: a wrapped sum would look like no spend at all
  }
  return total;
}

// Appends one row to the chain inside the caller's transaction, which holds the ledger head's
// lock; fills seq and hashes.
absl::Status AppendLedger(Conn& c, LedgerRow& row, int64_t account_id, int64_t dataset_id) {
  ASSIGN_OR_RETURN(Result head, c.Exec("SELECT seq, hash FROM ledger ORDER BY seq DESC LIMIT 1"));
  row.seq = head.rows() == 0 ? 1 : head.Int(0, 0) + 1;
  row.prev_hash = head.rows() == 0 ? std::string(kGenesisHash) : head.Text(0, 1);
  row.hash = LedgerRowHash(row, account_id, dataset_id);
  const std::string rdp = EncodeInt64s(row.rdp_nano);
  Params p;
  p.Int(row.seq).Int(row.time_micros).Text(row.kind).Int(account_id).Text(row.account);
  p.Int(dataset_id).Text(row.dataset).Text(row.request_kind).Text(row.idempotency_key);
  p.Double(row.epsilon).Double(row.delta).Text(row.mechanism).OptionalInt(row.pure_micro);
  p.Bytes(rdp).Text(row.prev_hash).Text(row.hash);
  return c.Run(absl::StrCat("INSERT INTO ledger(", kLedgerCols,
                            ") VALUES($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16)")
                   .c_str(),
               p);
}

// A PostgreSQL array literal of `values` (for = ANY($n::text[]) and unnest).
std::string ArrayLiteral(const std::vector<std::string>& values) {
  std::string out = "{";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    out += '"';
    for (char ch : values[i]) {
      if (ch == '"' || ch == '\\') out += '\\';
      out += ch;
    }
    out += '"';
  }
  out += '}';
  return out;
}

// What VerifyLedgerFrom reads, inside one REPEATABLE READ transaction (one snapshot).
class PgLedgerReader final : public LedgerReader {
 public:
  explicit PgLedgerReader(Conn& c) : c_(c) {}
  absl::Status ForEachLedgerRow(const RowFn& fn) override {
    // In pages: a ledger of millions of rows is not held in memory at once.
    int64_t after = 0;
    while (true) {
      ASSIGN_OR_RETURN(Result r, c_.Exec(absl::StrCat("SELECT ", kLedgerCols,
                                                      " FROM ledger WHERE seq > $1 "
                                                      "ORDER BY seq LIMIT 10000")
                                             .c_str(),
                                         Params().Int(after)));
      if (r.rows() == 0) return absl::OkStatus();
      for (int i = 0; i < r.rows(); ++i) {
        RETURN_IF_ERROR(fn(ReadLedger(r, i), r.Int(i, 3), r.Int(i, 5)));
        after = r.Int(i, 0);
      }
    }
  }
  absl::Status ForEachGrant(const GrantFn& fn) override {
    ASSIGN_OR_RETURN(Result r,
                     c_.Exec("SELECT account_id, dataset_id, epsilon_micro, delta FROM grants"));
    for (int i = 0; i < r.rows(); ++i) {
      RETURN_IF_ERROR(fn(r.Int(i, 0), r.Int(i, 1), r.Int(i, 2), r.Double(i, 3)));
    }
    return absl::OkStatus();
  }
  absl::Status ForEachCap(const CapFn& fn) override {
    ASSIGN_OR_RETURN(
        Result r,
        c_.Exec("SELECT id, cap_micro, cap_delta FROM datasets WHERE cap_micro IS NOT NULL"));
    for (int i = 0; i < r.rows(); ++i)
      RETURN_IF_ERROR(fn(r.Int(i, 0), r.Int(i, 1), r.Double(i, 2)));
    return absl::OkStatus();
  }
  absl::Status ForEachSpend(const SpendFn& fn) override {
    ASSIGN_OR_RETURN(Result r, c_.Exec("SELECT account_id, dataset_id, releases, pure_micro, "
                                       "rdp_all, rdp_nonpure FROM spend"));
    for (int i = 0; i < r.rows(); ++i) {
      ASSIGN_OR_RETURN(Spend stored, ReadSpend(r, i, 2));
      RETURN_IF_ERROR(fn(r.Int(i, 0), r.Int(i, 1), stored));
    }
    return absl::OkStatus();
  }
  absl::StatusOr<bool> DatasetExists(int64_t dataset_id) override {
    ASSIGN_OR_RETURN(Result r,
                     c_.Exec("SELECT 1 FROM datasets WHERE id=$1", Params().Int(dataset_id)));
    return r.rows() > 0;
  }

 private:
  Conn& c_;
};

}  // namespace

// ---- connections and schema ------------------------------------------------------------------

PgStore::PgStore(std::string conninfo, int pool_size)
    : conninfo_(std::move(conninfo)), pool_size_(std::max(pool_size, 1)) {}

PgStore::~PgStore() = default;

void PgStore::Release::operator()(Conn* conn) const {
  absl::MutexLock lock(&store->mu_);
  if (conn->ok()) {
    store->idle_.emplace_back(conn);
  } else {
    delete conn;  // a broken connection is replaced by a new one on the next Borrow
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
        "the connection string does not parse (", Scrubbed(message, conninfo),
        "); correct it (a libpq URI: postgresql://USER@HOST:PORT/NAME?passfile=PATH)"));
  }
  PQconninfoFree(parsed);
  std::unique_ptr<PgStore> store(new PgStore(conninfo, pool_size));
  ASSIGN_OR_RETURN(Borrowed c, store->Borrow());
  RETURN_IF_ERROR(c->InTransaction([&]() -> absl::Status {
    // One process applies the schema at a time (CREATE ... IF NOT EXISTS races otherwise).
    RETURN_IF_ERROR(c->Run("SELECT pg_advisory_xact_lock(7261626175)"));
    RETURN_IF_ERROR(c->Script(kSchema));
    ASSIGN_OR_RETURN(Result v, c->Exec("SELECT version FROM schema_version"));
    const int64_t at = v.rows() == 0 ? 0 : v.Int(0, 0);
    if (at > kSchemaVersion) {
      return absl::FailedPreconditionError(absl::StrCat("the database has schema version ", at,
                                                        " but this fairvault-server knows ",
                                                        kSchemaVersion, "; upgrade the server"));
    }
    // Steps after version 4 go here, each idempotent.
    if (v.rows() == 0) {
      return c->Run("INSERT INTO schema_version(version) VALUES($1)", Params().Int(kSchemaVersion));
    }
    return c->Run("UPDATE schema_version SET version=$1", Params().Int(kSchemaVersion));
  }));
  return store;
}

// ---- accounts --------------------------------------------------------------------------------

absl::StatusOr<AccountRecord> PgStore::CreateAccount(AccountRecord account) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  auto r = c->Exec(
      "INSERT INTO accounts(name, role, key_salt, key_hash, created_micros) "
      "VALUES($1,$2,$3,$4,$5) RETURNING id",
      Params()
          .Text(account.name)
          .Int(static_cast<int64_t>(account.role))
          .Bytes(account.key_salt)
          .Bytes(account.key_hash)
          .Int(account.created_micros));
  if (absl::IsAlreadyExists(r.status())) return AccountNameTaken(account.name);
  RETURN_IF_ERROR(r.status());
  account.id = r->Int(0, 0);
  return account;
}

absl::StatusOr<AccountRecord> PgStore::GetAccountById(int64_t id) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  ASSIGN_OR_RETURN(
      Result r, c->Exec(absl::StrCat("SELECT ", kAccountCols, " FROM accounts WHERE id=$1").c_str(),
                        Params().Int(id)));
  RETURN_IF_ERROR(NotFoundIfEmpty(r, absl::StrCat("no account with id ", id)));
  return ReadAccount(r, 0);
}

absl::StatusOr<AccountRecord> PgStore::GetAccountByName(const std::string& name) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  ASSIGN_OR_RETURN(
      Result r,
      c->Exec(absl::StrCat("SELECT ", kAccountCols, " FROM accounts WHERE name=$1").c_str(),
              Params().Text(name)));
  RETURN_IF_ERROR(NotFoundIfEmpty(r, absl::StrCat("no account named '", name, "'")));
  return ReadAccount(r, 0);
}

absl::StatusOr<std::vector<AccountRecord>> PgStore::ListAccounts() {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  ASSIGN_OR_RETURN(
      Result r,
      c->Exec(absl::StrCat("SELECT ", kAccountCols, " FROM accounts ORDER BY id").c_str()));
  std::vector<AccountRecord> out;
  for (int i = 0; i < r.rows(); ++i) out.push_back(ReadAccount(r, i));
  return out;
}

// ---- datasets --------------------------------------------------------------------------------

absl::StatusOr<DatasetRecord> PgStore::CreateDataset(DatasetRecord dataset) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  auto r = c->Exec(
      "INSERT INTO datasets(name, attributes, created_micros) VALUES($1,$2,$3) RETURNING id",
      Params().Text(dataset.name).Bytes(dataset.attributes).Int(dataset.created_micros));
  if (absl::IsAlreadyExists(r.status())) return DatasetNameTaken(dataset.name);
  RETURN_IF_ERROR(r.status());
  dataset.id = r->Int(0, 0);
  return dataset;
}

absl::StatusOr<DatasetRecord> PgStore::GetDataset(const std::string& name) {
  if (name.empty()) return absl::InvalidArgumentError("dataset must be set");
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  ASSIGN_OR_RETURN(
      Result r,
      c->Exec(absl::StrCat("SELECT ", kDatasetCols, " FROM datasets WHERE name=$1").c_str(),
              Params().Text(name)));
  RETURN_IF_ERROR(NotFoundIfEmpty(r, UnknownDataset(name)));
  return ReadDataset(r, 0);
}

absl::StatusOr<DatasetRecord> PgStore::GetDatasetById(int64_t id) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  return DatasetById(*c, id);
}

absl::StatusOr<std::vector<DatasetRecord>> PgStore::ListDatasets() {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  ASSIGN_OR_RETURN(
      Result r,
      c->Exec(absl::StrCat("SELECT ", kDatasetCols, " FROM datasets ORDER BY name").c_str()));
  std::vector<DatasetRecord> out;
  for (int i = 0; i < r.rows(); ++i) out.push_back(ReadDataset(r, i));
  return out;
}

absl::Status PgStore::DeleteDataset(int64_t dataset_id) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  return c->InTransaction([&]() -> absl::Status {
    // Grants and spend are what the filter reads: change them under the ledger's lock.
    RETURN_IF_ERROR(c->LockHead("ledger"));
    for (const char* sql :
         {"DELETE FROM subject_batches WHERE dataset_id=$1",
          "DELETE FROM company_tables WHERE dataset_id=$1",
          "DELETE FROM decisions WHERE artifact_id IN (SELECT id FROM artifacts WHERE "
          "dataset_id=$1)",
          "DELETE FROM artifacts WHERE dataset_id=$1", "DELETE FROM jobs WHERE dataset_id=$1",
          "DELETE FROM grants WHERE dataset_id=$1", "DELETE FROM spend WHERE dataset_id=$1",
          "DELETE FROM datasets WHERE id=$1"}) {
      RETURN_IF_ERROR(c->Run(sql, Params().Int(dataset_id)));
    }
    return absl::OkStatus();
  });
}

// ---- subjects --------------------------------------------------------------------------------

absl::StatusOr<std::string> PgStore::GetBatchDigest(int64_t dataset_id,
                                                    const std::string& batch_id) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  ASSIGN_OR_RETURN(Result r,
                   c->Exec("SELECT digest FROM subject_batches WHERE dataset_id=$1 AND batch_id=$2",
                           Params().Int(dataset_id).Text(batch_id)));
  RETURN_IF_ERROR(NotFoundIfEmpty(r, "no such batch"));
  return r.Text(0, 0);
}

absl::Status PgStore::PutSubjectBatch(int64_t dataset_id, const std::string& batch_id,
                                      const std::string& digest, int64_t expected_subject_count,
                                      int64_t rows, const std::string& payload) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  return c->InTransaction([&]() -> absl::Status {
    // The count first: its row lock orders concurrent imports into one dataset.
    ASSIGN_OR_RETURN(Result u,
                     c->Exec("UPDATE datasets SET subject_count = subject_count + $1 "
                             "WHERE id=$2 AND subject_count=$3",
                             Params().Int(rows).Int(dataset_id).Int(expected_subject_count)));
    if (u.changed() == 0) return DatasetChangedConcurrently(dataset_id);
    absl::Status st = c->Run(
        "INSERT INTO subject_batches(dataset_id, batch_id, digest, rows, payload) "
        "VALUES($1,$2,$3,$4,$5)",
        Params().Int(dataset_id).Text(batch_id).Text(digest).Int(rows).Bytes(payload));
    if (absl::IsAlreadyExists(st)) return BatchImportedConcurrently(batch_id);
    return st;
  });
}

absl::Status PgStore::ForEachSubjectBatch(
    int64_t dataset_id, const std::function<absl::Status(const std::string&)>& fn) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  // One batch per query: each payload can be hundreds of megabytes.
  ASSIGN_OR_RETURN(Result ids,
                   c->Exec("SELECT seq FROM subject_batches WHERE dataset_id=$1 ORDER BY seq",
                           Params().Int(dataset_id)));
  for (int i = 0; i < ids.rows(); ++i) {
    ASSIGN_OR_RETURN(Result r,
                     c->Exec("SELECT payload FROM subject_batches WHERE dataset_id=$1 AND seq=$2",
                             Params().Int(dataset_id).Int(ids.Int(i, 0))));
    if (r.rows() == 0) continue;  // its dataset was deleted meanwhile
    RETURN_IF_ERROR(fn(r.Text(0, 0)));
  }
  return absl::OkStatus();
}

// ---- grants, caps, spend ---------------------------------------------------------------------

absl::StatusOr<GrantRecord> PgStore::SetGrant(const GrantRecord& grant,
                                              const std::string& account_name,
                                              const std::string& dataset_name, int64_t now_micros) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  RETURN_IF_ERROR(c->InTransaction([&]() -> absl::Status {
    RETURN_IF_ERROR(c->LockHead("ledger"));
    RETURN_IF_ERROR(c->Run(
        "INSERT INTO grants(account_id, dataset_id, epsilon_micro, delta) VALUES($1,$2,$3,$4) "
        "ON CONFLICT(account_id, dataset_id) DO UPDATE SET "
        "epsilon_micro=excluded.epsilon_micro, delta=excluded.delta",
        Params()
            .Int(grant.account_id)
            .Int(grant.dataset_id)
            .Int(grant.epsilon_micro)
            .Double(grant.delta)));
    LedgerRow row = GrantLedgerRow(grant, account_name, dataset_name, now_micros);
    return AppendLedger(*c, row, grant.account_id, grant.dataset_id);
  }));
  return grant;
}

absl::StatusOr<std::vector<GrantRecord>> PgStore::ListGrants() {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  ASSIGN_OR_RETURN(Result r, c->Exec("SELECT account_id, dataset_id, epsilon_micro, delta "
                                     "FROM grants ORDER BY dataset_id, account_id"));
  std::vector<GrantRecord> out;
  for (int i = 0; i < r.rows(); ++i) {
    out.push_back(GrantRecord{r.Int(i, 0), r.Int(i, 1), r.Int(i, 2), r.Double(i, 3)});
  }
  return out;
}

absl::Status PgStore::SetCap(int64_t dataset_id, const std::string& dataset_name,
                             int64_t epsilon_micro, double delta, int64_t now_micros) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  return c->InTransaction([&]() -> absl::Status {
    RETURN_IF_ERROR(c->LockHead("ledger"));
    RETURN_IF_ERROR(c->Run("UPDATE datasets SET cap_micro=$1, cap_delta=$2 WHERE id=$3",
                           Params().Int(epsilon_micro).Double(delta).Int(dataset_id)));
    LedgerRow row = CapLedgerRow(dataset_name, epsilon_micro, delta, now_micros);
    return AppendLedger(*c, row, 0, dataset_id);
  });
}

absl::StatusOr<BudgetState> PgStore::GetBudget(int64_t account_id, int64_t dataset_id) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  // Grant and spend from one snapshot.
  return c->InTransaction([&]() -> absl::StatusOr<BudgetState> {
    RETURN_IF_ERROR(c->Run("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"));
    BudgetState state;
    ASSIGN_OR_RETURN(state.grant, GrantIn(*c, account_id, dataset_id));
    ASSIGN_OR_RETURN(state.spend, SpendIn(*c, account_id, dataset_id));
    state.spent_micro = SpentEpsilonMicro(state.spend, state.grant.delta);
    return state;
  });
}

absl::StatusOr<Spend> PgStore::GetDatasetSpend(int64_t dataset_id) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  return DatasetSpendIn(*c, dataset_id);
}

// ---- tables ----------------------------------------------------------------------------------

absl::Status PgStore::PutTable(const TableRecord& table) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  return c->Run(
      "INSERT INTO company_tables(handle, account_id, dataset_id, rows, expires_micros, payload) "
      "VALUES($1,$2,$3,$4,$5,$6)",
      Params()
          .Text(table.handle)
          .Int(table.account_id)
          .Int(table.dataset_id)
          .Int(table.rows)
          .Int(table.expires_micros)
          .Bytes(table.payload));
}

absl::StatusOr<TableRecord> PgStore::GetTable(const std::string& handle) {
  return ReadTable(handle, /*with_payload=*/true);
}

absl::StatusOr<TableRecord> PgStore::GetTableInfo(const std::string& handle) {
  return ReadTable(handle, /*with_payload=*/false);
}

absl::StatusOr<TableRecord> PgStore::ReadTable(const std::string& handle, bool with_payload) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  ASSIGN_OR_RETURN(
      Result r,
      c->Exec(with_payload ? "SELECT handle, account_id, dataset_id, rows, expires_micros, payload "
                             "FROM company_tables WHERE handle=$1"
                           : "SELECT handle, account_id, dataset_id, rows, expires_micros, "
                             "''::bytea FROM company_tables WHERE handle=$1",
              Params().Text(handle)));
  RETURN_IF_ERROR(NotFoundIfEmpty(r, UnknownTable(handle)));
  return TableRecord{r.Text(0, 0), r.Int(0, 1), r.Int(0, 2),
                     r.Int(0, 3),  r.Int(0, 4), r.Text(0, 5)};
}

absl::StatusOr<int64_t> PgStore::PurgeExpiredTables(int64_t now_micros) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  // A queued or running job still reads its table (a re-run after a restart too).
  ASSIGN_OR_RETURN(Result r, c->Exec("DELETE FROM company_tables WHERE expires_micros < $1 AND "
                                     "handle NOT IN (SELECT table_handle FROM jobs WHERE state "
                                     "IN (1, 2))",
                                     Params().Int(now_micros)));
  return r.changed();
}

// ---- charges ---------------------------------------------------------------------------------

absl::StatusOr<StoredResponse> PgStore::GetStoredResponse(int64_t account_id,
                                                          const std::string& key) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  ASSIGN_OR_RETURN(Result r, c->Exec("SELECT request_kind, params_digest, ledger_seq, payload, "
                                     "error_code, error_message FROM responses "
                                     "WHERE account_id=$1 AND idempotency_key=$2",
                                     Params().Int(account_id).Text(key)));
  RETURN_IF_ERROR(NotFoundIfEmpty(r, "no stored response"));
  return StoredResponse{r.Text(0, 0), r.Text(0, 1), r.Int(0, 2), r.Text(0, 3),
                        absl::Status(static_cast<absl::StatusCode>(r.Int(0, 4)), r.Text(0, 5))};
}

absl::StatusOr<ChargeOutcome> PgStore::Charge(const ChargeRequest& request, int64_t now_micros,
                                              const ChargeBody& body) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  // The charged failure of a body, returned after the commit that stores it.
  absl::Status failure;
  absl::StatusOr<ChargeOutcome> outcome = c->InTransaction([&]() -> absl::StatusOr<ChargeOutcome> {
    // 0. Every charge on the database, from any process, waits here for the one before.
    RETURN_IF_ERROR(c->LockHead("ledger"));

    // 1. Replays return the stored bytes, charged once.
    ASSIGN_OR_RETURN(Result stored,
                     c->Exec("SELECT params_digest, payload, error_code, error_message "
                             "FROM responses WHERE account_id=$1 AND idempotency_key=$2",
                             Params().Int(request.account_id).Text(request.idempotency_key)));
    if (stored.rows() > 0) {
      if (stored.Text(0, 0) != request.params_digest) {
        return IdempotencyKeyReused(request.idempotency_key);
      }
      RETURN_IF_ERROR(
          absl::Status(static_cast<absl::StatusCode>(stored.Int(0, 2)), stored.Text(0, 3)));
      return ChargeOutcome{stored.Text(0, 1), true};
    }

    // 2. The privacy filter, on the declared cost only, and the job limit. Jobs are created
    // only by charges, which hold the lock: no other process adds one before this commits.
    ASSIGN_OR_RETURN(Spend spend, SpendIn(*c, request.account_id, request.dataset_id));
    ASSIGN_OR_RETURN(Admission admitted,
                     AdmitCharge(
                         request, GrantIn(*c, request.account_id, request.dataset_id), spend,
                         DatasetById(*c, request.dataset_id),
                         [&] { return DatasetSpendIn(*c, request.dataset_id); },
                         [&]() -> absl::StatusOr<int64_t> {
                           ASSIGN_OR_RETURN(
                               Result r,
                               c->Exec("SELECT COUNT(*) FROM jobs WHERE state IN (1, 2)"));
                           return r.Int(0, 0);
                         }));

    // 3. Compute the release inside the transaction, then debit and store it together.
    ASSIGN_OR_RETURN(Result head, c->Exec("SELECT COALESCE(MAX(seq), 0) FROM ledger"));
    const int64_t seq = head.Int(0, 0) + 1;
    absl::StatusOr<ChargeResult> computed = body(seq, admitted.after);
    ChargeResult result;
    if (computed.ok()) {
      result = *std::move(computed);
    } else {
      failure = ChargedFailure(computed.status());
    }
    LedgerRow row = ChargeLedgerRow(request, now_micros);
    RETURN_IF_ERROR(AppendLedger(*c, row, request.account_id, request.dataset_id));
    if (row.seq != seq) return absl::InternalError("ledger sequence moved inside a transaction");
    const Spend& after = admitted.after.spend;
    const std::string all = EncodeInt64s(after.rdp_all_nano);
    const std::string nonpure = EncodeInt64s(after.rdp_nonpure_nano);
    RETURN_IF_ERROR(c->Run(
        "INSERT INTO spend(account_id, dataset_id, releases, pure_micro, rdp_all, rdp_nonpure) "
        "VALUES($1,$2,$3,$4,$5,$6) ON CONFLICT(account_id, dataset_id) DO UPDATE SET "
        "releases=excluded.releases, pure_micro=excluded.pure_micro, rdp_all=excluded.rdp_all, "
        "rdp_nonpure=excluded.rdp_nonpure",
        Params()
            .Int(request.account_id)
            .Int(request.dataset_id)
            .Int(after.releases)
            .Int(after.pure_micro)
            .Bytes(all)
            .Bytes(nonpure)));
    RETURN_IF_ERROR(
        c->Run("INSERT INTO responses(account_id, idempotency_key, request_kind, params_digest, "
               "ledger_seq, payload, error_code, error_message) VALUES($1,$2,$3,$4,$5,$6,$7,$8)",
               Params()
                   .Int(request.account_id)
                   .Text(request.idempotency_key)
                   .Text(request.request_kind)
                   .Text(request.params_digest)
                   .Int(seq)
                   .Bytes(result.response_payload)
                   .Int(static_cast<int64_t>(failure.code()))
                   .Text(std::string(failure.message()))));
    if (result.artifact) {
      const ArtifactRecord& a = *result.artifact;
      RETURN_IF_ERROR(
          c->Run("INSERT INTO artifacts(id, account_id, dataset_id, ledger_seq, "
                 "created_micros, payload) VALUES($1,$2,$3,$4,$5,$6)",
                 Params()
                     .Text(a.id)
                     .Int(a.account_id)
                     .Int(a.dataset_id)
                     .Int(seq)
                     .Int(a.created_micros)
                     .Bytes(a.payload)));
    }
    if (result.job) {
      // Created queued and unstarted, paid for by this charge, whatever the record says.
      const JobRecord& j = *result.job;
      Params p;
      p.Text(j.id).Int(j.account_id).Int(j.dataset_id).Int(seq).Text(j.idempotency_key);
      p.Text(j.table_handle).Int(j.algorithm).Bytes(j.request).Bytes(j.plan).Bytes(j.seed);
      p.Int(j.subject_limit).Int(static_cast<int64_t>(JobState::kQueued)).Int(j.total);
      p.Int(j.submitted_micros != 0 ? j.submitted_micros : now_micros);
      RETURN_IF_ERROR(c->Run(absl::StrCat("INSERT INTO jobs(", kJobCols,
                                          ") VALUES($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,0,$13,"
                                          "$14,0,0,0,'','','',0)")
                                 .c_str(),
                             p));
    }
    return ChargeOutcome{std::move(result.response_payload), false};
  });
  RETURN_IF_ERROR(outcome.status());
  if (!outcome->replayed) RETURN_IF_ERROR(failure);
  return outcome;
}

absl::StatusOr<ArtifactRecord> PgStore::GetArtifact(const std::string& id) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  ASSIGN_OR_RETURN(Result r, c->Exec("SELECT id, account_id, dataset_id, ledger_seq, "
                                     "created_micros, payload FROM artifacts WHERE id=$1",
                                     Params().Text(id)));
  RETURN_IF_ERROR(NotFoundIfEmpty(r, absl::StrCat("unknown artifact_id '", id, "'")));
  return ArtifactRecord{r.Text(0, 0), r.Int(0, 1), r.Int(0, 2),
                        r.Int(0, 3),  r.Int(0, 4), r.Text(0, 5)};
}

// ---- access log and decisions ----------------------------------------------------------------

absl::StatusOr<std::vector<AccessLogRow>> PgStore::ListAccessLog(const LedgerFilter& filter) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  ASSIGN_OR_RETURN(
      Result r,
      c->Exec("SELECT seq, time_micros, account, dataset, artifact_id, "
              "rows, new_decisions FROM access_log WHERE seq > $1 AND "
              "($2::text IS NULL OR account = $2) ORDER BY seq LIMIT $3",
              Params().Int(filter.after_seq).OptionalText(filter.account).Int(filter.limit)));
  std::vector<AccessLogRow> out;
  for (int i = 0; i < r.rows(); ++i) {
    out.push_back(AccessLogRow{r.Int(i, 0), r.Int(i, 1), r.Text(i, 2), r.Text(i, 3), r.Text(i, 4),
                               r.Int(i, 5), r.Int(i, 6)});
  }
  return out;
}

namespace {
// Keys per statement when looking up or recording decisions.
constexpr size_t kDecisionChunk = 20'000;
}  // namespace

absl::StatusOr<absl::flat_hash_map<std::string, DecisionRow>> PgStore::GetDecisions(
    const std::string& artifact_id, absl::Span<const std::string* const> subject_keys) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  absl::flat_hash_map<std::string, DecisionRow> out;
  for (size_t start = 0; start < subject_keys.size(); start += kDecisionChunk) {
    std::vector<std::string> chunk;
    for (size_t i = start; i < std::min(subject_keys.size(), start + kDecisionChunk); ++i) {
      chunk.push_back(*subject_keys[i]);
    }
    const std::string keys = ArrayLiteral(chunk);
    ASSIGN_OR_RETURN(Result r, c->Exec("SELECT subject_key, input, output FROM decisions "
                                       "WHERE artifact_id=$1 AND subject_key = ANY($2::text[])",
                                       Params().Text(artifact_id).Text(keys)));
    for (int i = 0; i < r.rows(); ++i) {
      std::string key = r.Text(i, 0);
      out.emplace(key, DecisionRow{key, r.Double(i, 1), r.Double(i, 2)});
    }
  }
  return out;
}

absl::StatusOr<int64_t> PgStore::RecordDecisions(const std::string& artifact_id,
                                                 const std::vector<DecisionRow>& rows,
                                                 const AccessLogRow& log) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  absl::StatusOr<int64_t> seq = c->InTransaction([&]() -> absl::StatusOr<int64_t> {
    for (size_t start = 0; start < rows.size(); start += kDecisionChunk) {
      std::vector<std::string> keys, inputs, outputs;
      for (size_t i = start; i < std::min(rows.size(), start + kDecisionChunk); ++i) {
        keys.push_back(rows[i].subject_key);
        // %.17g: the text form reads back as the same double.
        inputs.push_back(absl::StrFormat("%.17g", rows[i].input));
        outputs.push_back(absl::StrFormat("%.17g", rows[i].output));
      }
      const std::string k = ArrayLiteral(keys), in = ArrayLiteral(inputs),
                        out = ArrayLiteral(outputs);
      RETURN_IF_ERROR(
          c->Run("INSERT INTO decisions(artifact_id, subject_key, input, output) "
                 "SELECT $1, * FROM unnest($2::text[], $3::text::float8[], "
                 "$4::text::float8[])",
                 Params().Text(artifact_id).Text(k).Text(in).Text(out)));
    }
    // Access-log rows get consecutive seqs in commit order (a sequence would leave gaps and
    // commit out of order, and an auditor paging by seq could miss a row).
    RETURN_IF_ERROR(c->LockHead("access_log"));
    ASSIGN_OR_RETURN(Result head, c->Exec("SELECT COALESCE(MAX(seq), 0) FROM access_log"));
    const int64_t next = head.Int(0, 0) + 1;
    RETURN_IF_ERROR(
        c->Run("INSERT INTO access_log(seq, time_micros, account, dataset, "
               "artifact_id, rows, new_decisions) VALUES($1,$2,$3,$4,$5,$6,$7)",
               Params()
                   .Int(next)
                   .Int(log.time_micros)
                   .Text(log.account)
                   .Text(log.dataset)
                   .Text(log.artifact_id)
                   .Int(log.rows)
                   .Int(log.new_decisions)));
    return next;
  });
  if (absl::IsAlreadyExists(seq.status())) {
    // Another process decided some of these subjects at the same time; nothing of this call
    // was stored or returned. A retry returns the stored decisions.
    return absl::AbortedError(
        "another vault process decided some of these subjects concurrently; retry the call (the "
        "stored decisions will be returned)");
  }
  return seq;
}

// ---- ledger ----------------------------------------------------------------------------------

absl::StatusOr<std::vector<LedgerRow>> PgStore::ListLedger(const LedgerFilter& filter) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  ASSIGN_OR_RETURN(Result r,
                   c->Exec(absl::StrCat("SELECT ", kLedgerCols,
                                        " FROM ledger WHERE seq > $1 AND ($2::text IS NULL OR "
                                        "account = $2) AND ($3::text IS NULL OR dataset = $3) "
                                        "ORDER BY seq LIMIT $4")
                               .c_str(),
                           Params()
                               .Int(filter.after_seq)
                               .OptionalText(filter.account)
                               .OptionalText(filter.dataset)
                               .Int(filter.limit)));
  std::vector<LedgerRow> out;
  for (int i = 0; i < r.rows(); ++i) out.push_back(ReadLedger(r, i));
  return out;
}

absl::StatusOr<LedgerVerification> PgStore::VerifyLedger() {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  return c->InTransaction([&]() -> absl::StatusOr<LedgerVerification> {
    RETURN_IF_ERROR(c->Run("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY"));
    PgLedgerReader reader(*c);
    return VerifyLedgerFrom(reader);
  });
}

// ---- jobs ------------------------------------------------------------------------------------

absl::StatusOr<JobRecord> PgStore::GetJob(const std::string& id) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  return JobIn(*c, id, /*for_update=*/false);
}

absl::StatusOr<std::vector<JobRecord>> PgStore::ListJobs(const JobFilter& filter) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  ASSIGN_OR_RETURN(Result r, c->Exec(absl::StrCat("SELECT ", kJobCols,
                                                  " FROM jobs WHERE ($1::bigint IS NULL OR "
                                                  "account_id = $1) AND ($2::bigint IS NULL OR "
                                                  "dataset_id = $2) ORDER BY ledger_seq DESC "
                                                  "LIMIT $3")
                                         .c_str(),
                                     Params()
                                         .OptionalInt(filter.account_id)
                                         .OptionalInt(filter.dataset_id)
                                         .Int(filter.limit)));
  std::vector<JobRecord> out;
  for (int i = 0; i < r.rows(); ++i) out.push_back(ReadJob(r, i));
  return out;
}

absl::StatusOr<std::vector<JobRecord>> PgStore::ListUnfinishedJobs() {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  ASSIGN_OR_RETURN(Result r, c->Exec(absl::StrCat("SELECT ", kJobCols,
                                                  " FROM jobs WHERE state IN (1, 2) "
                                                  "ORDER BY ledger_seq")
                                         .c_str()));
  std::vector<JobRecord> out;
  for (int i = 0; i < r.rows(); ++i) out.push_back(ReadJob(r, i));
  return out;
}

absl::StatusOr<JobRecord> PgStore::StartJob(const std::string& id, const JobLease& lease) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  // One statement tests and claims: of two claimants (in any processes), one changes the row.
  ASSIGN_OR_RETURN(
      Result r,
      c->Exec(absl::StrCat("UPDATE jobs SET state=2, attempts=attempts+1, "
                           "started_micros=$1, finished_micros=0, done=0, "
                           "lease_owner=$2, lease_expires_micros=$3 WHERE id=$4 AND "
                           "(state=1 OR (state=2 AND lease_expires_micros < $1)) "
                           "RETURNING ",
                           kJobCols)
                  .c_str(),
              Params().Int(lease.now_micros).Text(lease.owner).Int(lease.expires_micros).Text(id)));
  if (r.rows() > 0) return ReadJob(r, 0);
  ASSIGN_OR_RETURN(JobRecord job, JobIn(*c, id, /*for_update=*/false));
  return NotClaimable(job, lease.now_micros);
}

absl::Status PgStore::RenewJobLease(const std::string& id, const JobLease& lease) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  ASSIGN_OR_RETURN(Result r,
                   c->Exec("UPDATE jobs SET lease_expires_micros=$1 WHERE id=$2 AND "
                           "state=2 AND lease_owner=$3",
                           Params().Int(lease.expires_micros).Text(id).Text(lease.owner)));
  if (r.changed() > 0) return absl::OkStatus();
  ASSIGN_OR_RETURN(JobRecord job, JobIn(*c, id, /*for_update=*/false));
  return RequireLeaseHolder(job, lease.owner, "renew the lease of");
}

absl::Status PgStore::UpdateJobProgress(const std::string& id, const std::string& owner,
                                        int64_t done, int64_t total) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  return c->Run("UPDATE jobs SET done=$1, total=$2 WHERE id=$3 AND state=2 AND lease_owner=$4",
                Params().Int(done).Int(total).Text(id).Text(owner));
}

absl::Status PgStore::FinishJob(const std::string& id, const std::string& owner,
                                const ArtifactRecord& artifact, int64_t now_micros) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  return c->InTransaction([&]() -> absl::Status {
    ASSIGN_OR_RETURN(JobRecord job, JobIn(*c, id, /*for_update=*/true));
    RETURN_IF_ERROR(RequireLeaseHolder(job, owner, "finish"));
    // The artifact was paid for by the job's charge.
    RETURN_IF_ERROR(
        c->Run("INSERT INTO artifacts(id, account_id, dataset_id, ledger_seq, "
               "created_micros, payload) VALUES($1,$2,$3,$4,$5,$6)",
               Params()
                   .Text(artifact.id)
                   .Int(artifact.account_id)
                   .Int(artifact.dataset_id)
                   .Int(job.ledger_seq)
                   .Int(artifact.created_micros)
                   .Bytes(artifact.payload)));
    return c->Run(
        "UPDATE jobs SET state=3, artifact_id=$1, finished_micros=$2, "
        "done=CASE WHEN total > 0 THEN total ELSE done END WHERE id=$3",
        Params().Text(artifact.id).Int(now_micros).Text(id));
  });
}

absl::Status PgStore::FailJob(const std::string& id, const std::string& owner,
                              const std::string& error, int64_t now_micros) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  return c->InTransaction([&]() -> absl::Status {
    ASSIGN_OR_RETURN(JobRecord job, JobIn(*c, id, /*for_update=*/true));
    RETURN_IF_ERROR(RequireLeaseHolder(job, owner, "fail"));
    return c->Run("UPDATE jobs SET state=4, error=$1, finished_micros=$2 WHERE id=$3",
                  Params().Text(error).Int(now_micros).Text(id));
  });
}

absl::StatusOr<JobRecord> PgStore::CancelJob(const std::string& id, int64_t now_micros) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  RETURN_IF_ERROR(
      c->Run("UPDATE jobs SET state=5, finished_micros=$1, error=$2 WHERE id=$3 AND "
             "state IN (1, 2)",
             Params().Int(now_micros).Text(kCancelledByCompany).Text(id)));
  return JobIn(*c, id, /*for_update=*/false);
}

// ---- import of a SQLite vault ----------------------------------------------------------------

namespace {

// The tables of a vault, in an order that satisfies nothing but readability (there are no
// foreign keys), each with the column its rows are read in order of.
constexpr std::pair<const char*, const char*> kImportedTables[] = {
    {"accounts", "id"},         {"datasets", "id"},
    {"subject_batches", "seq"}, {"grants", "account_id"},
    {"spend", "account_id"},    {"company_tables", "handle"},
    {"ledger", "seq"},          {"responses", "ledger_seq"},
    {"access_log", "seq"},      {"decisions", "artifact_id"},
    {"artifacts", "id"},        {"jobs", "ledger_seq"},
};

}  // namespace

absl::StatusOr<ImportReport> PgStore::ImportSqlite(const std::string& sqlite_path) {
  ImportReport report;
  // The source, brought to the current schema, must verify; its head is what the copy must
  // reproduce.
  {
    ASSIGN_OR_RETURN(std::unique_ptr<SqliteStore> source, SqliteStore::Open(sqlite_path));
    ASSIGN_OR_RETURN(LedgerVerification v, source->VerifyLedger());
    if (!v.ok) {
      return absl::FailedPreconditionError(
          absl::StrCat("the SQLite vault's ledger does not verify (", v.message,
                       "); nothing was copied. Restore a verified backup first"));
    }
    report.source = v;
  }
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(sqlite_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    const std::string msg = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return absl::UnavailableError(absl::StrCat("cannot open ", sqlite_path, ": ", msg));
  }
  struct Closer {
    sqlite3* db;
    ~Closer() {
      sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr);
      sqlite3_close(db);
    }
  } closer{db};
  // One read snapshot of the source for the whole copy.
  if (sqlite3_exec(db, "BEGIN; SELECT COUNT(*) FROM ledger;", nullptr, nullptr, nullptr) !=
      SQLITE_OK) {
    return absl::InternalError(absl::StrCat("sqlite: ", sqlite3_errmsg(db)));
  }

  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  RETURN_IF_ERROR(c->InTransaction([&]() -> absl::Status {
    RETURN_IF_ERROR(c->LockHead("ledger"));
    RETURN_IF_ERROR(c->LockHead("access_log"));
    ASSIGN_OR_RETURN(Result used, c->Exec("SELECT (SELECT COUNT(*) FROM accounts) + "
                                          "(SELECT COUNT(*) FROM datasets) + "
                                          "(SELECT COUNT(*) FROM ledger)"));
    if (used.Int(0, 0) != 0) {
      return absl::FailedPreconditionError(
          "the PostgreSQL database already holds a vault (accounts, datasets or ledger rows); "
          "migrate into a new, empty database");
    }
    for (const auto& [table, order] : kImportedTables) {
      // PostgreSQL's column types decide how each value is sent.
      ASSIGN_OR_RETURN(Result types, c->Exec("SELECT column_name::text, data_type::text FROM "
                                             "information_schema.columns WHERE table_name=$1 "
                                             "AND table_schema=current_schema()",
                                             Params().Text(table)));
      std::map<std::string, std::string> type_of;
      for (int i = 0; i < types.rows(); ++i) type_of[types.Text(i, 0)] = types.Text(i, 1);
      sqlite3_stmt* stmt = nullptr;
      const std::string select = absl::StrCat("SELECT * FROM ", table, " ORDER BY ", order);
      if (sqlite3_prepare_v2(db, select.c_str(), -1, &stmt, nullptr) != SQLITE_OK) {
        return absl::InternalError(absl::StrCat("sqlite: ", sqlite3_errmsg(db)));
      }
      std::unique_ptr<sqlite3_stmt, int (*)(sqlite3_stmt*)> owned(stmt, sqlite3_finalize);
      const int n = sqlite3_column_count(stmt);
      std::vector<std::string> columns, placeholders;
      for (int i = 0; i < n; ++i) {
        columns.push_back(sqlite3_column_name(stmt, i));
        if (!type_of.count(columns.back())) {
          return absl::FailedPreconditionError(absl::StrCat("column ", table, ".", columns.back(),
                                                            " has no PostgreSQL counterpart"));
        }
        placeholders.push_back(absl::StrCat("$", i + 1));
      }
      const std::string insert =
          absl::StrCat("INSERT INTO ", table, "(", absl::StrJoin(columns, ", "), ") VALUES(",
                       absl::StrJoin(placeholders, ", "), ")");
      int64_t rows = 0;
      while (true) {
        const int rc = sqlite3_step(stmt);
        if (rc == SQLITE_DONE) break;
        if (rc != SQLITE_ROW)
          return absl::InternalError(absl::StrCat("sqlite: ", sqlite3_errmsg(db)));
        Params p;
        std::vector<std::string> values(n);
        for (int i = 0; i < n; ++i) {
          const std::string& type = type_of[columns[i]];
          if (sqlite3_column_type(stmt, i) == SQLITE_NULL) {
            p.Null(type == "bigint" ? kInt8 : type == "double precision" ? kFloat8 : kText);
          } else if (type == "bigint") {
            p.Int(sqlite3_column_int64(stmt, i));
          } else if (type == "double precision") {
            p.Double(sqlite3_column_double(stmt, i));
          } else {
            const void* blob = sqlite3_column_blob(stmt, i);
            values[i].assign(static_cast<const char*>(blob ? blob : ""),
                             sqlite3_column_bytes(stmt, i));
            if (type == "bytea") {
              p.Bytes(values[i]);
            } else {
              p.Text(values[i]);
            }
          }
        }
        RETURN_IF_ERROR(c->Run(insert.c_str(), p));
        ++rows;
      }
      report.rows[table] = rows;
    }
    // Ids are never reused: the sequences continue after the largest id SQLite ever handed out
    // (sqlite_sequence remembers deleted datasets too).
    int64_t max_dataset = 0;
    {
      sqlite3_stmt* stmt = nullptr;
      if (sqlite3_prepare_v2(db, "SELECT seq FROM sqlite_sequence WHERE name='datasets'", -1, &stmt,
                             nullptr) == SQLITE_OK &&
          sqlite3_step(stmt) == SQLITE_ROW) {
        max_dataset = sqlite3_column_int64(stmt, 0);
      }
      sqlite3_finalize(stmt);
    }
    RETURN_IF_ERROR(
        c->Run("SELECT setval('datasets_id_seq', GREATEST($1, (SELECT COALESCE(MAX(id), "
               "0) FROM datasets), 1))",
               Params().Int(max_dataset)));
    RETURN_IF_ERROR(
        c->Run("SELECT setval('accounts_id_seq', GREATEST((SELECT COALESCE(MAX(id), 0) "
               "FROM accounts), 1))"));
    return c->Run(
        "SELECT setval('subject_batches_seq_seq', GREATEST((SELECT COALESCE(MAX(seq), "
        "0) FROM subject_batches), 1))");
  }));
  ASSIGN_OR_RETURN(report.copy, VerifyLedger());
  if (!report.copy.ok || report.copy.head_hash != report.source.head_hash ||
      report.copy.rows_checked != report.source.rows_checked) {
    return absl::DataLossError(absl::StrCat(
        "the copy's ledger (", report.copy.rows_checked, " rows, head ", report.copy.head_hash,
        report.copy.ok ? "" : ", does not verify: " + report.copy.message,
        ") differs from the source's (", report.source.rows_checked, " rows, head ",
        report.source.head_hash,
        "): was a server writing to the SQLite file? Stop it, drop the database and migrate "
        "again"));
  }
  return report;
}

}  // namespace fairvault::server::storage
