// The PostgreSQL backend's parameters, results, connection and row readers, shared by its files
// (one per domain: catalog, ledger, tables, artifacts, jobs). Internal to
// server/storage/postgres.
#ifndef FAIRVAULT_SERVER_STORAGE_POSTGRES_STATEMENT_H_
#define FAIRVAULT_SERVER_STORAGE_POSTGRES_STATEMENT_H_

#include <libpq-fe.h>

#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/internal/endian.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/accounting/accountant.h"
#include "core/util/status_macros.h"
#include "server/storage/postgres/pg_store.h"
#include "server/storage/store.h"
#include "server/storage/store_common.h"
#include "server/util/crypto.h"

namespace fairvault::server::storage::postgres {

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
  // A ListingAfterCursor query's parameters (its filter values are referenced, not copied).
  static Params Listing(const ListingQuery& q) {
    Params p;
    p.Int(q.after_seq);
    for (const std::string& v : q.filters) p.Text(v);
    p.Int(q.limit);
    return p;
  }
  Params& Null(Oid type) {
    types_.push_back(type);
    values_.push_back(nullptr);
    lengths_.push_back(0);
    return *this;
  }

  // A copy that owns every value (Text and Bytes refer to the caller's strings).
  Params Copy() const {
    Params out;
    for (size_t i = 0; i < types_.size(); ++i) {
      if (values_[i] == nullptr) {
        out.Null(types_[i]);
      } else {
        out.Add(types_[i], std::string(values_[i], lengths_[i]));
      }
    }
    return out;
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
  // The command's tag without its row count ("COMMIT", "ROLLBACK", "INSERT 0 1" ...).
  std::string command() const { return PQcmdStatus(r_); }
  // Rows a command changed.
  int64_t changed() const {
    const char* n = PQcmdTuples(r_);
    return n[0] == '\0' ? 0 : std::strtoll(n, nullptr, 10);
  }

 private:
  PGresult* r_;
};

// A statement and its parameters, for Conn::Pipeline and Conn::Defer.
struct Query {
  std::string sql;
  Params params;
};

// Whether a SQLSTATE says the connection is gone (or the server is shutting down or starting).
bool IsConnectionLoss(const char* sqlstate);

}  // namespace fairvault::server::storage::postgres

namespace fairvault::server::storage {

// One connection. Exec maps PostgreSQL's errors to statuses: a lost connection (or a server
// that is restarting) is Unavailable (its detail logged by the store), a unique violation
// AlreadyExists.
class PgStore::Conn {
  using Params = postgres::Params;
  using Query = postgres::Query;
  using Result = postgres::Result;

 public:
  Conn(PGconn* c, PgStore* store) : c_(c), store_(store) {}
  ~Conn() { PQfinish(c_); }
  bool ok() const { return !broken_ && PQstatus(c_) == CONNECTION_OK; }
  // Whether the pool may lend the connection again: open, outside any transaction, nothing
  // deferred. (A transaction left open by a failed call ends when the connection closes.)
  bool reusable() const { return ok() && deferred_.empty() && PQtransactionStatus(c_) == PQTRANS_IDLE; }

  // A query (SELECT, INSERT, UPDATE, DELETE or WITH) is prepared on the connection the first
  // time its text and parameter types are seen and executed by name afterwards, so the server
  // parses and plans it once per connection instead of at every call; anything else, and texts
  // beyond kMaxPrepared, run unnamed.
  // Statements deferred with Defer go first, in the same round trip (Pipeline).
  absl::StatusOr<Result> Exec(const char* sql, const Params& p = Params()) {
    if (broken_) return DatabaseUnavailable();  // closed by the pool when returned
    if (!deferred_.empty()) {
      std::vector<Query> one;
      one.push_back(Query{sql, p.Copy()});
      ASSIGN_OR_RETURN(std::vector<Result> results, Pipeline(std::move(one)));
      return std::move(results.front());
    }
    ASSIGN_OR_RETURN(const std::string name, Prepared(sql, p));
    if (name.empty()) {
      ASSIGN_OR_RETURN(Result r, Check(PQexecParams(c_, sql, p.size(), p.types(), p.values(),
                                                    p.lengths(), p.formats(),
                                                    /*resultFormat=*/1)));
      RETURN_IF_ERROR(Committed(sql, r));
      return r;
    }
    return Check(PQexecPrepared(c_, name.c_str(), p.size(), p.values(), p.lengths(), p.formats(),
                                /*resultFormat=*/1));
  }

  // Several statements without parameters (the schema).
  absl::Status Script(const char* sql) {
    if (broken_) return DatabaseUnavailable();
    RETURN_IF_ERROR(Flush());
    return Check(PQexec(c_, sql)).status();
  }

  // A statement whose result the caller does not need (a write, a savepoint), sent with the
  // connection's next round trip (Exec, Pipeline, Flush or Script) before that round trip's own
  // statements; its failure is that call's. `p`'s values are copied. Past kMaxDeferred
  // statements they are sent now, which is this call's failure.
  absl::Status Defer(const char* sql, const Params& p = Params()) {
    deferred_.push_back(Query{sql, p.Copy()});
    return deferred_.size() < kMaxDeferred ? absl::OkStatus() : Flush();
  }
  // Forgets the deferred statements (a failed charge's writes, before its ROLLBACK TO).
  void DropDeferred() { deferred_.clear(); }
  // Sends the deferred statements, if any: one round trip.
  absl::Status Flush() {
    if (deferred_.empty()) return absl::OkStatus();
    return Pipeline({}).status();
  }

  // The deferred statements, then `queries`, in one round trip (libpq's pipeline mode): the
  // queries' results in order, or the first statement's error (those after it did not run).
  // Inside a transaction block an error leaves the transaction failed, as with Exec; outside
  // one, the statements run as one implicit transaction. A protocol failure breaks the
  // connection (ok() is false; the pool closes it).
  absl::StatusOr<std::vector<Result>> Pipeline(std::vector<Query> queries);

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
    if (!ok() || sqlstate == nullptr || postgres::IsConnectionLoss(sqlstate)) {
      status = store_->Unavailable(message);
    } else if (sqlstate != nullptr && std::strcmp(sqlstate, "23505") == 0) {
      status = absl::AlreadyExistsError(absl::StrCat("constraint: ", message));
    } else if (sqlstate != nullptr &&
               (std::strcmp(sqlstate, "40001") == 0 || std::strcmp(sqlstate, "40P01") == 0 ||
                std::strcmp(sqlstate, "55P03") == 0)) {
      // A serialization failure, a deadlock, a lock not had within the operator's lock_timeout.
      status = absl::AbortedError(absl::StrCat("postgres: ", message, "; retry"));
    } else if (sqlstate != nullptr && std::strcmp(sqlstate, "57014") == 0) {
      // Cancelled: the operator's statement_timeout, or an administrator's pg_cancel_backend.
      status = absl::DeadlineExceededError(absl::StrCat("postgres: ", message, "; retry"));
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
      deferred_.clear();
      (void)Run("ROLLBACK");
      return result;
    }
    if (absl::Status committed = Commit(); !committed.ok()) {
      // A deferred statement's failure stopped the COMMIT before it ran.
      if (InTransactionBlock()) (void)Run("ROLLBACK");
      return committed;
    }
    return result;
  }

  // COMMIT, failing unless the transaction committed (Exec).
  absl::Status Commit() { return Run("COMMIT"); }

  // Whether a transaction block is open (possibly failed, until ROLLBACK TO a savepoint):
  // false once the connection dropped or the server ended the transaction.
  bool InTransactionBlock() const {
    if (broken_) return false;  // the pool closes it, which ends any transaction
    const PGTransactionStatusType status = PQtransactionStatus(c_);
    return status == PQTRANS_INTRANS || status == PQTRANS_INERROR || status == PQTRANS_ACTIVE;
  }

  // Serializes ledger (or access-log) appends across every process on the database.
  absl::Status LockHead(const char* name) {
    return Run("SELECT name FROM heads WHERE name=$1 FOR UPDATE", Params().Text(name));
  }
  // BEGIN, then LockHead("ledger"), deferred to the next round trip (a batch of charges opens
  // with them and its first charge's reads).
  absl::Status DeferBeginAndLockLedgerHead() {
    RETURN_IF_ERROR(Defer("BEGIN"));
    return Defer("SELECT name FROM heads WHERE name=$1 FOR UPDATE", Params().Text("ledger"));
  }
  TreeFrontier& tree_frontier() { return store_->tree_frontier_; }

 private:
  // The store's texts are a fixed set; a text built with values in it would not repeat.
  static constexpr size_t kMaxPrepared = 512;
  // Deferred statements a round trip carries at most: their results (a few bytes each) wait
  // in the socket until every statement is sent, so a pipeline stays short.
  static constexpr size_t kMaxDeferred = 64;

  // The name `sql` with `p`'s types is prepared under on this connection (preparing it now if
  // needed), or empty to run it unnamed. A prepared statement outlives a rolled-back
  // transaction; a lost connection takes them all with it, and this Conn with them.
  absl::StatusOr<std::string> Prepared(const char* sql, const Params& p) {
    if (!IsQuery(sql)) return std::string();
    std::string key = PreparedKey(sql, p);
    auto it = prepared_.find(key);
    if (it != prepared_.end()) return it->second;
    if (prepared_.size() >= kMaxPrepared) return std::string();
    std::string name = PreparedName(key);
    RETURN_IF_ERROR(Check(PQprepare(c_, name.c_str(), sql, p.size(), p.types())).status());
    prepared_.emplace(std::move(key), name);
    return name;
  }
  static bool IsQuery(const char* sql) {
    static constexpr const char* kQueries[] = {"SELECT", "INSERT", "UPDATE", "DELETE", "WITH"};
    bool query = false;
    for (const char* q : kQueries) query = query || std::strncmp(sql, q, std::strlen(q)) == 0;
    return query;
  }
  static std::string PreparedKey(const char* sql, const Params& p) {
    std::string key(sql);
    key.append(reinterpret_cast<const char*>(p.types()), p.size() * sizeof(Oid));
    return key;
  }
  // Named after the text and types, not the order of first use: the same name means the same
  // statement on every connection of every server, so a name that reaches a connection
  // without it (a pooler that mixes connections) fails instead of running another query.
  static std::string PreparedName(const std::string& key) {
    return absl::StrCat("fv_", HexEncode(Sha256(key)).substr(0, 32));
  }

  // PostgreSQL answers the COMMIT of a transaction an error aborted with a ROLLBACK, not an
  // error: a COMMIT fails here unless it committed.
  static absl::Status Committed(const char* sql, const Result& r) {
    if (std::strcmp(sql, "COMMIT") == 0 && r.command() != "COMMIT") {
      return absl::InternalError("postgres: the transaction was rolled back at its commit");
    }
    return absl::OkStatus();
  }

  // The pipeline's state is unknown: the connection is closed (ok() is false from now on,
  // and the pool replaces it).
  absl::Status Broken(const char* what) {
    broken_ = true;
    deferred_.clear();
    return store_->Unavailable(absl::StrCat("a pipeline ", what, ": ", PQerrorMessage(c_)));
  }

  PGconn* c_;
  PgStore* store_;
  bool broken_ = false;
  std::vector<Query> deferred_;
  // Statement text and parameter types -> the name it is prepared under.
  absl::flat_hash_map<std::string, std::string> prepared_;
};

}  // namespace fairvault::server::storage

namespace fairvault::server::storage::postgres {

using Conn = PgStore::Conn;

inline constexpr char kAccountCols[] =
    "id, name, role, key_salt, key_hash, created_micros";
inline constexpr char kDatasetCols[] =
    "id, name, attributes, created_micros, subject_count, cap_micro, cap_delta";
inline constexpr char kDatasetColsOfD[] =  // kDatasetCols of `datasets d` in a join
    "d.id, d.name, d.attributes, d.created_micros, d.subject_count, d.cap_micro, d.cap_delta";
inline constexpr char kLedgerCols[] =
    "seq, time_micros, kind, account_id, account, dataset_id, dataset, request_kind, "
    "idempotency_key, epsilon, delta, mechanism, pure_micro, rdp, prev_hash, hash, actor";
// What ListLedger selects after kLedgerCols: the artifact and the job each charge created.
inline constexpr char kLedgerCreatedCols[] =
    "COALESCE((SELECT MIN(a.id) FROM artifacts a WHERE a.ledger_seq = ledger.seq), ''), "
    "COALESCE((SELECT MIN(j.id) FROM jobs j WHERE j.ledger_seq = ledger.seq), '')";
inline constexpr char kJobCols[] =
    "id, account_id, dataset_id, ledger_seq, idempotency_key, table_handle, algorithm, request, "
    "plan, seed, subject_limit, state, done, total, submitted_micros, started_micros, "
    "finished_micros, attempts, artifact_id, error, lease_owner, lease_expires_micros";

AccountRecord ReadAccount(const Result& r, int i);
DatasetRecord ReadDataset(const Result& r, int i);
absl::StatusOr<core::accounting::Spend> ReadSpend(const Result& r, int i, int first_col);
// The ledger's Merkle tree inside the caller's transaction: one stored node; adding the row
// `seq` (hex hash) as a leaf; adding every row not yet in it (the schema's version 8 step).
absl::StatusOr<std::string> TreeNode(Conn& c, int level, int64_t idx);
// Appends defer their INSERTs to the connection's next round trip (Conn::Defer).
absl::Status AppendTreeLeaf(Conn& c, int64_t seq, const std::string& prev_hash,
                            const std::string& hash);
absl::Status BackfillTree(Conn& c);
LedgerRow ReadLedger(const Result& r, int i);
JobRecord ReadJob(const Result& r, int i);
absl::Status NotFoundIfEmpty(const Result& r, const std::string& what);
absl::StatusOr<JobRecord> JobIn(Conn& c, const std::string& id, bool for_update);
absl::StatusOr<DatasetRecord> DatasetById(Conn& c, int64_t id);
// Holds dataset `id`'s row key-shared until the transaction ends, or DeletedWithItsDataset(what)
// if it is gone. DeleteDataset locks the row (after the ledger's lock) before its deletes, each
// a statement of its own: whichever is second waits for the other to commit, so the rows
// written before this call are either deleted with the dataset or never committed. Call it
// after the transaction's large writes, so that a deletion (and every charge queued behind
// its ledger lock) waits at most for the commit.
absl::Status RequireDatasetUntilCommit(Conn& c, int64_t id, const std::string& what);
absl::StatusOr<GrantRecord> GrantIn(Conn& c, int64_t account_id, int64_t dataset_id);
absl::StatusOr<core::accounting::Spend> SpendIn(Conn& c, int64_t account_id, int64_t dataset_id);
absl::StatusOr<core::accounting::Spend> DatasetSpendIn(Conn& c, int64_t dataset_id);
// What a charge's admission reads, in one query: the dataset (NotFound as DatasetById), the
// company's grant on it (NotFound as GrantIn) and its spend (as SpendIn).
struct AdmissionInputs {
  absl::StatusOr<DatasetRecord> dataset;
  absl::StatusOr<GrantRecord> grant;
  absl::StatusOr<core::accounting::Spend> spend;
};
Query AdmissionQuery(int64_t account_id, int64_t dataset_id);
AdmissionInputs ReadAdmission(const Result& r, int64_t account_id, int64_t dataset_id);
// Appends one row to the chain (and the Merkle tree) inside the caller's transaction, which
// holds the head's lock; fills seq and hashes. The INSERTs are deferred to the connection's
// next round trip (Conn::Defer): the caller's COMMIT or Flush sends them.
absl::Status AppendLedger(Conn& c, LedgerRow& row, int64_t account_id, int64_t dataset_id);
// The ledger's last row (seq 0 and the genesis hash when empty), read inside the caller's
// transaction, which holds the head's lock; and the append after it, for a caller that needed
// the next seq before building its row.
struct LedgerHead {
  int64_t seq;
  std::string hash;
};
absl::StatusOr<LedgerHead> ReadLedgerHead(Conn& c);
// The same read as a query for a pipeline, and its result.
Query LedgerHeadQuery();
LedgerHead ReadLedgerHead(const Result& head);
absl::Status AppendLedger(Conn& c, const LedgerHead& head, LedgerRow& row, int64_t account_id,
                          int64_t dataset_id);

}  // namespace fairvault::server::storage::postgres

#endif  // FAIRVAULT_SERVER_STORAGE_POSTGRES_STATEMENT_H_
