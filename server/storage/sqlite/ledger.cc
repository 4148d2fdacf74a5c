// The SQLite backend: grants, caps and spend, the one charge transaction (privacy filter, job
// limit, release, ledger row and stored response), and the hash-chained ledger.
#include "server/storage/sqlite/sqlite_store.h"

#include <sqlite3.h>

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "core/util/status_macros.h"
#include "core/util/truncate.h"
#include "server/storage/ledger_chain.h"
#include "server/storage/sqlite/statement.h"
#include "server/storage/store_common.h"

namespace fairvault::server::storage {

using sqlite::Stmt;
using sqlite::Transaction;
using sqlite::ReadSpend;
using sqlite::ReadLedger;
using sqlite::kLedgerCols;
using sqlite::kLedgerCreatedCols;
using sqlite::StoredFailure;
using sqlite::NotFoundIfNoRow;
using sqlite::kJobCols;
using core::accounting::Spend;
using core::accounting::SpentEpsilonMicro;

// ---- grants, caps, spend -------------------------------------------------------------------

absl::StatusOr<std::pair<int64_t, std::string>> SqliteStore::LedgerHeadLocked() {
  Stmt s(*cache_, "SELECT seq, hash FROM ledger ORDER BY seq DESC LIMIT 1");
  ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return std::make_pair(int64_t{0}, std::string(kGenesisHash));
  return std::make_pair(s.Int(0), s.Text(1));
}

absl::Status SqliteStore::AppendLedgerLocked(LedgerRow& row, int64_t account_id,
                                             int64_t dataset_id) {
  ASSIGN_OR_RETURN(auto head, LedgerHeadLocked());
  row.seq = head.first + 1;
  row.prev_hash = head.second;
  row.hash = LedgerRowHash(row, account_id, dataset_id);
  Stmt s(*cache_, absl::StrCat("INSERT INTO ledger(", kLedgerCols,
                           ") VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)")
                  .c_str());
  s.Bind(1, row.seq).Bind(2, row.time_micros).Bind(3, row.kind).Bind(4, account_id);
  s.Bind(5, row.account).Bind(6, dataset_id).Bind(7, row.dataset).Bind(8, row.request_kind);
  s.Bind(9, row.idempotency_key).Bind(10, row.epsilon).Bind(11, row.delta);
  s.Bind(12, row.mechanism);
  if (row.pure_micro) {
    s.Bind(13, *row.pure_micro);
  } else {
    s.BindNull(13);
  }
  std::string rdp = EncodeInt64s(row.rdp_nano);
  s.BindBlob(14, rdp).Bind(15, row.prev_hash).Bind(16, row.hash).Bind(17, row.actor);
  RETURN_IF_ERROR(s.Run());
  return AppendTreeLeafLocked(row.seq, row.prev_hash, row.hash);
}

absl::StatusOr<std::string> SqliteStore::TreeNodeLocked(int level, int64_t idx) {
  Stmt s(*cache_, "SELECT hash FROM merkle_nodes WHERE level=? AND idx=?");
  s.Bind(1, static_cast<int64_t>(level)).Bind(2, idx);
  RETURN_IF_ERROR(NotFoundIfNoRow(
      s.Step(), absl::StrCat("the Merkle tree has no node ", level, "/", idx)));
  return s.Text(0);
}

absl::Status SqliteStore::AppendTreeLeafLocked(int64_t seq, const std::string& prev_hash,
                                               const std::string& hash) {
  ASSIGN_OR_RETURN(std::vector<core::transparency::StoredNode> nodes,
                   tree_frontier_.NodesForRow(
                       seq, prev_hash, hash,
                       [this](int level, int64_t idx) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                         return TreeNodeLocked(level, idx);
                       }));
  for (const core::transparency::StoredNode& n : nodes) {
    Stmt s(*cache_, "INSERT INTO merkle_nodes(level, idx, hash) VALUES(?,?,?)");
    s.Bind(1, static_cast<int64_t>(n.level)).Bind(2, n.index).BindBlob(3, n.hash);
    RETURN_IF_ERROR(s.Run());
  }
  return absl::OkStatus();
}

absl::StatusOr<GrantRecord> SqliteStore::SetGrant(const GrantRecord& grant,
                                                  const std::string& account_name,
                                                  const std::string& dataset_name,
                                                  const std::string& actor, int64_t now_micros) {
  absl::MutexLock lock(&mu_);
  Transaction txn(db_);
  RETURN_IF_ERROR(txn.status());
  {
    Stmt d(*cache_, "SELECT 1 FROM datasets WHERE id=?");
    d.Bind(1, grant.dataset_id);
    ASSIGN_OR_RETURN(bool found, d.Step());
    if (!found) return DeletedWithItsDataset("the grant");
  }
  Stmt s(*cache_,
         "INSERT INTO grants(account_id, dataset_id, epsilon_micro, delta) VALUES(?,?,?,?) "
         "ON CONFLICT(account_id, dataset_id) DO UPDATE SET epsilon_micro=excluded.epsilon_micro, "
         "delta=excluded.delta");
  s.Bind(1, grant.account_id).Bind(2, grant.dataset_id).Bind(3, grant.epsilon_micro);
  s.Bind(4, grant.delta);
  RETURN_IF_ERROR(s.Run());
  LedgerRow row = GrantLedgerRow(grant, account_name, dataset_name, actor, now_micros);
  RETURN_IF_ERROR(AppendLedgerLocked(row, grant.account_id, grant.dataset_id));
  RETURN_IF_ERROR(txn.Commit());
  return grant;
}

absl::StatusOr<std::vector<GrantRecord>> SqliteStore::ListGrants() {
  absl::MutexLock lock(&mu_);
  Stmt s(*cache_,
         "SELECT account_id, dataset_id, epsilon_micro, delta FROM grants "
         "ORDER BY dataset_id, account_id");
  return AllRows(s, [](const Stmt& r) {
    return GrantRecord{r.Int(0), r.Int(1), r.Int(2), r.Double(3)};
  });
}

absl::Status SqliteStore::SetCap(int64_t dataset_id, const std::string& dataset_name,
                                 int64_t epsilon_micro, double delta, const std::string& actor,
                                 int64_t now_micros) {
  absl::MutexLock lock(&mu_);
  Transaction txn(db_);
  RETURN_IF_ERROR(txn.status());
  Stmt s(*cache_, "UPDATE datasets SET cap_micro=?, cap_delta=? WHERE id=?");
  s.Bind(1, epsilon_micro).Bind(2, delta).Bind(3, dataset_id);
  RETURN_IF_ERROR(s.Run());
  if (sqlite3_changes(db_) == 0) return DeletedWithItsDataset("the cap");
  LedgerRow row = CapLedgerRow(dataset_name, epsilon_micro, delta, actor, now_micros);
  RETURN_IF_ERROR(AppendLedgerLocked(row, 0, dataset_id));
  return txn.Commit();
}

absl::StatusOr<GrantRecord> SqliteStore::GrantLocked(sqlite::StmtCache& cache,
                                                     int64_t account_id, int64_t dataset_id) {
  Stmt s(cache, "SELECT epsilon_micro, delta FROM grants WHERE account_id=? AND dataset_id=?");
  s.Bind(1, account_id).Bind(2, dataset_id);
  RETURN_IF_ERROR(NotFoundIfNoRow(s.Step(), "no grant"));
  return GrantRecord{account_id, dataset_id, s.Int(0), s.Double(1)};
}

absl::StatusOr<Spend> SqliteStore::SpendLocked(sqlite::StmtCache& cache, int64_t account_id,
                                               int64_t dataset_id) {
  Stmt s(cache,
         "SELECT releases, pure_micro, rdp_all, rdp_nonpure FROM spend "
         "WHERE account_id=? AND dataset_id=?");
  s.Bind(1, account_id).Bind(2, dataset_id);
  ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return Spend{};
  return ReadSpend(s, 0);
}

absl::StatusOr<Spend> SqliteStore::DatasetSpendLocked(int64_t dataset_id) {
  Stmt s(*cache_, "SELECT releases, pure_micro, rdp_all, rdp_nonpure FROM spend WHERE dataset_id=?");
  s.Bind(1, dataset_id);
  Spend total;
  while (true) {
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    ASSIGN_OR_RETURN(Spend one, ReadSpend(s, 0));
    total.Merge(one);  // saturating: a wrapped sum would look like no spend at all
  }
  return total;
}

absl::StatusOr<BudgetState> SqliteStore::GetBudget(int64_t account_id, int64_t dataset_id) {
  return Reading([&](sqlite::StmtCache& cache) -> absl::StatusOr<BudgetState> {
    // One read transaction for both, so that the spend belongs to the grant read.
    Stmt begin(cache.db(), "BEGIN");
    RETURN_IF_ERROR(begin.Run());
    BudgetState state;
    absl::Status read = [&]() -> absl::Status {
      ASSIGN_OR_RETURN(state.grant, GrantLocked(cache, account_id, dataset_id));
      ASSIGN_OR_RETURN(state.spend, SpendLocked(cache, account_id, dataset_id));
      return absl::OkStatus();
    }();
    Stmt end(cache.db(), "COMMIT");
    RETURN_IF_ERROR(end.Run());
    RETURN_IF_ERROR(read);
    state.spent_micro = SpentEpsilonMicro(state.spend, state.grant.delta);
    return state;
  });
}

absl::StatusOr<Spend> SqliteStore::GetDatasetSpend(int64_t dataset_id) {
  absl::MutexLock lock(&mu_);
  return DatasetSpendLocked(dataset_id);
}


// ---- charges -------------------------------------------------------------------------------

absl::StatusOr<StoredResponse> SqliteStore::GetStoredResponse(int64_t account_id,
                                                              const std::string& key) {
  return Reading([&](sqlite::StmtCache& cache) -> absl::StatusOr<StoredResponse> {
    Stmt s(cache,
           "SELECT request_kind, params_digest, ledger_seq, payload, error_code, error_message, "
           "pending FROM responses WHERE account_id=? AND idempotency_key=?");
    s.Bind(1, account_id).Bind(2, key);
    RETURN_IF_ERROR(NotFoundIfNoRow(s.Step(), "no stored response"));
    return StoredResponse{s.Text(0), s.Text(1), s.Int(2), s.Text(3), StoredFailure(s, 4),
                          s.Int(6) != 0};
  });
}

// A transaction of its own (one sync), after the charge's: the charges queued meanwhile were
// not held up by the post-processing that produced `payload`.
absl::StatusOr<StoredResponse> SqliteStore::FinishRelease(int64_t account_id,
                                                          const std::string& key,
                                                          const std::string& payload,
                                                          const absl::Status& failure,
                                                          std::optional<ArtifactRecord> artifact) {
  absl::MutexLock lock(&mu_);
  Transaction txn(db_);
  RETURN_IF_ERROR(txn.status());
  StoredResponse stored;
  int64_t dataset_id = 0, charged_micros = 0;
  bool dataset_kept = false;  // a dataset deleted since the charge took its artifacts along
  {
    Stmt s(*cache_,
           "SELECT r.request_kind, r.params_digest, r.ledger_seq, r.payload, r.error_code, "
           "r.error_message, r.pending, l.dataset_id, l.time_micros, "
           "EXISTS(SELECT 1 FROM datasets d WHERE d.id = l.dataset_id) FROM responses r JOIN "
           "ledger l ON l.seq = r.ledger_seq WHERE r.account_id=? AND r.idempotency_key=?");
    s.Bind(1, account_id).Bind(2, key);
    RETURN_IF_ERROR(NotFoundIfNoRow(s.Step(), "no stored response"));
    stored = StoredResponse{s.Text(0), s.Text(1), s.Int(2), s.Text(3), StoredFailure(s, 4),
                            s.Int(6) != 0};
    dataset_id = s.Int(7);
    charged_micros = s.Int(8);
    dataset_kept = s.Int(9) != 0;
  }
  if (!stored.pending) return stored;  // finished first by another call
  {
    Stmt s(*cache_,
           "UPDATE responses SET payload=?, error_code=?, error_message=?, pending=0 WHERE "
           "account_id=? AND idempotency_key=?");
    // Bound values must outlive the statement's run (Stmt binds without copying).
    const std::string kept = failure.ok() ? payload : std::string();
    const std::string message(failure.message());
    s.BindBlob(1, kept);
    s.Bind(2, static_cast<int64_t>(failure.code())).Bind(3, message);
    s.Bind(4, account_id).Bind(5, key);
    RETURN_IF_ERROR(s.Run());
  }
  if (artifact && failure.ok() && dataset_kept) {
    Stmt s(*cache_,
           "INSERT INTO artifacts(id, account_id, dataset_id, ledger_seq, created_micros, payload) "
           "VALUES(?,?,?,?,?,?)");
    s.Bind(1, artifact->id).Bind(2, account_id).Bind(3, dataset_id).Bind(4, stored.ledger_seq);
    s.Bind(5, charged_micros).BindBlob(6, artifact->payload);
    RETURN_IF_ERROR(s.Run());
  }
  RETURN_IF_ERROR(txn.Commit());
  stored.payload = failure.ok() ? payload : std::string();
  stored.failure = failure;
  stored.pending = false;
  return stored;
}

absl::StatusOr<ChargeOutcome> SqliteStore::Charge(const ChargeRequest& request, int64_t now_micros,
                                                  const ChargeBody& body) {
  return batcher_.Charge(request, now_micros, body, [this](absl::Span<PendingCharge* const> batch) {
    absl::MutexLock lock(&mu_);
    return RunChargeBatch(
        batch,
        BatchOps{[this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return ExecCached("BEGIN IMMEDIATE"); },
                 [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return ExecCached("SAVEPOINT charge"); },
                 [this](const char* sql) ABSL_NO_THREAD_SAFETY_ANALYSIS { return ExecCached(sql); },
                 [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return !sqlite3_get_autocommit(db_); },
                 [this](const PendingCharge& p, absl::Status* failure)
                     ABSL_NO_THREAD_SAFETY_ANALYSIS {
                       return ChargeOneLocked(p.request, p.now_micros, p.body, failure);
                     }});
  });
}

void SqliteStore::SetChargeCommitObserver(std::function<void(int64_t charges)> observer) {
  batcher_.SetCommitObserver(std::move(observer));
}

absl::StatusOr<ChargeOutcome> SqliteStore::ChargeOneLocked(const ChargeRequest& request,
                                                           int64_t now_micros,
                                                           const ChargeBody& body,
                                                           absl::Status* failure) {
  // 1. Replays return the stored bytes, charged once.
  {
    Stmt s(*cache_,
           "SELECT params_digest, payload, error_code, error_message, pending FROM responses "
           "WHERE account_id=? AND idempotency_key=?");
    s.Bind(1, request.account_id).Bind(2, request.idempotency_key);
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (row) {
      if (s.Text(0) != request.params_digest) {
        return IdempotencyKeyReused(request.idempotency_key);
      }
      RETURN_IF_ERROR(StoredFailure(s, 2));
      return ChargeOutcome{s.Text(1), true, s.Int(4) != 0};
    }
  }

  // 2. The privacy filter, on the declared cost only, and the job limit.
  ASSIGN_OR_RETURN(Spend spend, SpendLocked(*cache_, request.account_id, request.dataset_id));
  absl::StatusOr<DatasetRecord> dataset = DatasetLocked(*cache_, "id=?", request.dataset_id, "");
  ASSIGN_OR_RETURN(
      Admission admitted,
      AdmitCharge(
          request, GrantLocked(*cache_, request.account_id, request.dataset_id), spend, dataset,
          [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return DatasetSpendLocked(request.dataset_id); },
          [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS -> absl::StatusOr<int64_t> {
            Stmt s(*cache_, "SELECT COUNT(*) FROM jobs WHERE state IN (1, 2)");
            RETURN_IF_ERROR(s.Step().status());
            return s.Int(0);
          }));

  // 3. Compute the release inside the transaction, then debit and store it together.
  ASSIGN_OR_RETURN(auto head, LedgerHeadLocked());
  const int64_t seq = head.first + 1;
  ChargeResult result = RunChargeBody(body, seq, admitted.after, failure);

  LedgerRow row = ChargeLedgerRow(request, now_micros);
  RETURN_IF_ERROR(AppendLedgerLocked(row, request.account_id, request.dataset_id));
  if (row.seq != seq) return absl::InternalError("ledger sequence moved inside a transaction");
  {
    Stmt s(*cache_,
           "INSERT INTO spend(account_id, dataset_id, releases, pure_micro, rdp_all, "
           "rdp_nonpure) VALUES(?,?,?,?,?,?) ON CONFLICT(account_id, dataset_id) DO UPDATE SET "
           "releases=excluded.releases, pure_micro=excluded.pure_micro, "
           "rdp_all=excluded.rdp_all, rdp_nonpure=excluded.rdp_nonpure");
    const Spend& after = admitted.after.spend;
    std::string all = EncodeInt64s(after.rdp_all_nano);
    std::string nonpure = EncodeInt64s(after.rdp_nonpure_nano);
    s.Bind(1, request.account_id).Bind(2, request.dataset_id).Bind(3, after.releases);
    s.Bind(4, after.pure_micro).BindBlob(5, all).BindBlob(6, nonpure);
    RETURN_IF_ERROR(s.Run());
  }
  {
    Stmt s(*cache_,
           "INSERT INTO responses(account_id, idempotency_key, request_kind, params_digest, "
           "ledger_seq, payload, error_code, error_message, pending) VALUES(?,?,?,?,?,?,?,?,?)");
    s.Bind(1, request.account_id).Bind(2, request.idempotency_key).Bind(3, request.request_kind);
    s.Bind(4, request.params_digest).Bind(5, seq).BindBlob(6, result.response_payload);
    s.Bind(7, static_cast<int64_t>(failure->code())).Bind(8, std::string(failure->message()));
    s.Bind(9, static_cast<int64_t>(result.pending && failure->ok() ? 1 : 0));
    RETURN_IF_ERROR(s.Run());
  }
  if (result.artifact) {
    const ArtifactRecord& a = *result.artifact;
    Stmt s(*cache_,
           "INSERT INTO artifacts(id, account_id, dataset_id, ledger_seq, created_micros, payload) "
           "VALUES(?,?,?,?,?,?)");
    s.Bind(1, a.id).Bind(2, a.account_id).Bind(3, a.dataset_id).Bind(4, seq);
    s.Bind(5, a.created_micros).BindBlob(6, a.payload);
    RETURN_IF_ERROR(s.Run());
  }
  if (result.job) {
    // Created queued and unstarted, paid for by this charge, whatever the record says.
    const JobRecord& j = *result.job;
    Stmt s(*cache_, absl::StrCat("INSERT INTO jobs(", kJobCols,
                             ", validation_table_handle) "
                             "VALUES(?,?,?,?,?,?,?,?,?,?,?,?,0,?,?,0,0,0,'','','',0,?)")
                    .c_str());
    s.Bind(1, j.id).Bind(2, j.account_id).Bind(3, j.dataset_id).Bind(4, seq);
    s.Bind(5, j.idempotency_key).Bind(6, j.table_handle);
    s.Bind(7, static_cast<int64_t>(j.algorithm)).BindBlob(8, j.request).BindBlob(9, j.plan);
    s.BindBlob(10, j.seed).Bind(11, j.subject_limit);
    s.Bind(12, static_cast<int64_t>(JobState::kQueued)).Bind(13, j.total);
    s.Bind(14, j.submitted_micros != 0 ? j.submitted_micros : now_micros);
    s.Bind(15, j.validation_table_handle);
    RETURN_IF_ERROR(s.Run());
  }
  return ChargeOutcome{std::move(result.response_payload), false, result.pending};
}


// ---- ledger --------------------------------------------------------------------------------

// On a listing connection: a listing (a page of up to 10,000 rows) never holds up a batch of
// charges or a request's reads, and it sees the last commit, so every charge already answered.
absl::StatusOr<std::vector<LedgerRow>> SqliteStore::ListLedger(const LedgerFilter& filter) {
  return Listing([&](sqlite::StmtCache& cache) -> absl::StatusOr<std::vector<LedgerRow>> {
    const ListingQuery q = ListingAfterCursor(filter, '?', /*by_dataset=*/true);
    Stmt s(cache,
           absl::StrCat("SELECT ", kLedgerCols, ", ", kLedgerCreatedCols, " FROM ledger", q.sql)
               .c_str());
    s.BindListing(q);
    return AllRows(s, [](const Stmt& r) {
      LedgerRow row = ReadLedger(r);
      row.artifact_id = r.Text(17);
      row.job_id = r.Text(18);
      return row;
    });
  });
}

absl::StatusOr<LedgerRow> SqliteStore::GetLedgerRow(int64_t seq) {
  absl::MutexLock lock(&mu_);
  Stmt s(*cache_, absl::StrCat("SELECT ", kLedgerCols, ", ", kLedgerCreatedCols,
                               " FROM ledger WHERE seq = ?").c_str());
  s.Bind(1, seq);
  RETURN_IF_ERROR(NotFoundIfNoRow(s.Step(), absl::StrCat("the ledger has no row ", seq)));
  LedgerRow row = ReadLedger(s);
  row.artifact_id = s.Text(17);
  row.job_id = s.Text(18);
  return row;
}

// ---- transparency log ------------------------------------------------------------------------

absl::Status SqliteStore::ReadTree(const TreeFn& fn) {
  absl::MutexLock lock(&mu_);  // no write between the size and the nodes
  ASSIGN_OR_RETURN(auto head, LedgerHeadLocked());
  return fn(head.first, [this](int level, int64_t idx) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return TreeNodeLocked(level, idx);
  });
}

absl::Status SqliteStore::PutCheckpoint(const CheckpointRecord& checkpoint) {
  absl::MutexLock lock(&mu_);
  Stmt s(*cache_, "INSERT INTO checkpoints(size, root, note, created_micros) VALUES(?,?,?,?)");
  s.Bind(1, checkpoint.size).BindBlob(2, checkpoint.root).Bind(3, checkpoint.note);
  s.Bind(4, checkpoint.created_micros);
  return s.Run();
}

namespace {
CheckpointRecord ReadCheckpoint(const Stmt& s) {
  return CheckpointRecord{s.Int(0), s.Text(1), s.Text(2), s.Int(3)};
}
}  // namespace

absl::StatusOr<CheckpointRecord> SqliteStore::GetCheckpoint(int64_t size) {
  absl::MutexLock lock(&mu_);
  Stmt s(*cache_,
         "SELECT size, root, note, created_micros FROM checkpoints WHERE ?1 = 0 OR size = ?1 "
         "ORDER BY size DESC LIMIT 1");
  s.Bind(1, size);
  RETURN_IF_ERROR(NotFoundIfNoRow(
      s.Step(), size == 0 ? std::string("no checkpoint has been signed yet")
                          : absl::StrCat("no checkpoint of ", size, " rows is stored")));
  return ReadCheckpoint(s);
}

absl::StatusOr<CheckpointRecord> SqliteStore::CheckpointCovering(int64_t min_size) {
  absl::MutexLock lock(&mu_);
  Stmt s(*cache_,
         "SELECT size, root, note, created_micros FROM checkpoints WHERE size >= ? "
         "ORDER BY size LIMIT 1");
  s.Bind(1, min_size);
  RETURN_IF_ERROR(
      NotFoundIfNoRow(s.Step(), absl::StrCat("no checkpoint covers ", min_size, " rows yet")));
  return ReadCheckpoint(s);
}

absl::Status SqliteStore::PutCosignature(const CosignatureRecord& c) {
  absl::MutexLock lock(&mu_);
  Stmt s(*cache_,
         "INSERT OR REPLACE INTO cosignatures(size, witness, key_hash, line, created_micros) "
         "VALUES(?,?,?,?,?)");
  s.Bind(1, c.size).Bind(2, c.witness).Bind(3, c.key_hash).Bind(4, c.line);
  s.Bind(5, c.created_micros);
  return s.Run();
}

absl::StatusOr<std::vector<CosignatureRecord>> SqliteStore::ListCosignatures(int64_t size) {
  absl::MutexLock lock(&mu_);
  Stmt s(*cache_,
         "SELECT size, witness, key_hash, line, created_micros FROM cosignatures WHERE size = ? "
         "ORDER BY witness, key_hash");
  s.Bind(1, size);
  std::vector<CosignatureRecord> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return out;
    out.push_back({s.Int(0), s.Text(1), s.Int(2), s.Text(3), s.Int(4)});
  }
}

absl::StatusOr<std::vector<int64_t>> SqliteStore::CosignedSizes(int64_t min_size,
                                                                int64_t max_size,
                                                                int min_witnesses,
                                                                bool newest_first, int limit) {
  absl::MutexLock lock(&mu_);
  Stmt s(*cache_, newest_first
                      ? "SELECT size FROM cosignatures WHERE size >= ?1 AND (?2 = 0 OR size <= ?2) "
                        "GROUP BY size HAVING COUNT(*) >= ?3 ORDER BY size DESC LIMIT ?4"
                      : "SELECT size FROM cosignatures WHERE size >= ?1 AND (?2 = 0 OR size <= ?2) "
                        "GROUP BY size HAVING COUNT(*) >= ?3 ORDER BY size LIMIT ?4");
  s.Bind(1, min_size).Bind(2, max_size).Bind(3, int64_t{min_witnesses}).Bind(4, int64_t{limit});
  std::vector<int64_t> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return out;
    out.push_back(s.Int(0));
  }
}

namespace {

// Runs `sql` and calls `fn` on each row.
absl::Status ForEachRow(sqlite3* db, const char* sql,
                        const std::function<absl::Status(const Stmt&)>& fn) {
  Stmt s(db, sql);
  while (true) {
    ASSIGN_OR_RETURN(bool has, s.Step());
    if (!has) return absl::OkStatus();
    RETURN_IF_ERROR(fn(s));
  }
}

// What VerifyLedgerFrom reads, from SQLite (the caller has the connection to itself).
class SqliteLedgerReader final : public LedgerReader {
 public:
  explicit SqliteLedgerReader(sqlite3* db) : db_(db) {}
  absl::Status ForEachLedgerRow(const RowFn& fn) override {
    return ForEachRow(db_,
                      absl::StrCat("SELECT ", kLedgerCols, " FROM ledger ORDER BY seq").c_str(),
                      [&](const Stmt& s) { return fn(ReadLedger(s), s.Int(3), s.Int(5)); });
  }
  absl::Status ForEachGrant(const GrantFn& fn) override {
    return ForEachRow(db_, "SELECT account_id, dataset_id, epsilon_micro, delta FROM grants",
                      [&](const Stmt& s) { return fn(s.Int(0), s.Int(1), s.Int(2), s.Double(3)); });
  }
  absl::Status ForEachCap(const CapFn& fn) override {
    return ForEachRow(db_,
                      "SELECT id, cap_micro, cap_delta FROM datasets WHERE cap_micro IS NOT NULL",
                      [&](const Stmt& s) { return fn(s.Int(0), s.Int(1), s.Double(2)); });
  }
  absl::Status ForEachSpend(const SpendFn& fn) override {
    return ForEachRow(
        db_, "SELECT account_id, dataset_id, releases, pure_micro, rdp_all, rdp_nonpure FROM spend",
        [&](const Stmt& s) -> absl::Status {
          ASSIGN_OR_RETURN(Spend stored, ReadSpend(s, 2));
          return fn(s.Int(0), s.Int(1), stored);
        });
  }
  absl::StatusOr<bool> DatasetExists(int64_t dataset_id) override {
    Stmt d(db_, "SELECT 1 FROM datasets WHERE id=?");
    d.Bind(1, dataset_id);
    return d.Step();
  }
  absl::Status ForEachTreeNode(int level, const NodeFn& fn) override {
    Stmt s(db_, "SELECT idx, hash FROM merkle_nodes WHERE level=? ORDER BY idx");
    s.Bind(1, static_cast<int64_t>(level));
    while (true) {
      ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) return absl::OkStatus();
      RETURN_IF_ERROR(fn(s.Int(0), s.Text(1)));
    }
  }

 private:
  sqlite3* db_;
};

}  // namespace

// One snapshot (a read transaction) on a listing connection: the charges committed meanwhile
// are neither seen nor held up. The log cannot restart while the snapshot is open, so it is
// restarted first when it is large: however many verifications follow one another, the log
// grows past its usual bound only by what is charged during one of them.
absl::StatusOr<LedgerVerification> SqliteStore::VerifyLedger() {
  // Before the listing connection is taken (listings do not wait behind the writer's lock), and
  // only with a listing connection (without one the read below runs under mu_ itself).
  if (!listers_.empty() &&
      log_frames_.load(std::memory_order_relaxed) * frame_bytes_ >= kWalCheckpointBytes) {
    absl::MutexLock lock(&mu_);
    RestartAfterCommit();  // as a commit at the limit: tried at most every kMaxRestartBackoff
  }
  return Listing([&](sqlite::StmtCache& cache) -> absl::StatusOr<LedgerVerification> {
    ++snapshots_;
    absl::Cleanup snapshot_ended = [this] { --snapshots_; };
    const int rc = sqlite3_exec(cache.db(), "BEGIN", nullptr, nullptr, nullptr);
    if (rc != SQLITE_OK) return sqlite::SqliteFailure(cache.db(), rc, "BEGIN");
    SqliteLedgerReader reader(cache.db());
    return VerifyLedgerFrom(reader);  // Listing rolls the read transaction back
  });
}

}  // namespace fairvault::server::storage
