// The PostgreSQL backend: grants, caps and spend, the one charge transaction (under the heads
// row lock every replica takes: privacy filter, job limit, release, ledger row, stored
// response), and the hash-chained ledger.
#include "server/storage/postgres/pg_store.h"

#include <libpq-fe.h>

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/util/status_macros.h"
#include "server/storage/ledger_chain.h"
#include "server/storage/postgres/statement.h"
#include "server/storage/store_common.h"

namespace fairvault::server::storage {

using postgres::Params;
using postgres::Result;
using postgres::Conn;
using postgres::kLedgerCols;
using postgres::kLedgerCreatedCols;
using postgres::kJobCols;
using postgres::ReadSpend;
using postgres::ReadLedger;
using postgres::NotFoundIfEmpty;
using postgres::DatasetById;
using postgres::GrantIn;
using postgres::SpendIn;
using postgres::DatasetSpendIn;
using postgres::AdmissionInputs;
using postgres::Query;
using postgres::AppendLedger;
using postgres::LedgerHead;
using postgres::ReadLedgerHead;
using core::accounting::Spend;
using core::accounting::SpentEpsilonMicro;

// ---- grants, caps, spend ---------------------------------------------------------------------

absl::StatusOr<GrantRecord> PgStore::SetGrant(const GrantRecord& grant,
                                              const std::string& account_name,
                                              const std::string& dataset_name,
                                              const std::string& actor, int64_t now_micros) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  RETURN_IF_ERROR(c->InTransaction([&]() -> absl::Status {
    RETURN_IF_ERROR(c->LockHead("ledger"));
    // DeleteDataset holds the same lock: the dataset is there or gone for the whole grant.
    ASSIGN_OR_RETURN(Result d, c->Exec("SELECT id FROM datasets WHERE id=$1",
                                       Params().Int(grant.dataset_id)));
    if (d.rows() == 0) return DeletedWithItsDataset("the grant");
    RETURN_IF_ERROR(c->Run(
        "INSERT INTO grants(account_id, dataset_id, epsilon_micro, delta) VALUES($1,$2,$3,$4) "
        "ON CONFLICT(account_id, dataset_id) DO UPDATE SET "
        "epsilon_micro=excluded.epsilon_micro, delta=excluded.delta",
        Params()
            .Int(grant.account_id)
            .Int(grant.dataset_id)
            .Int(grant.epsilon_micro)
            .Double(grant.delta)));
    LedgerRow row = GrantLedgerRow(grant, account_name, dataset_name, actor, now_micros);
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
                             int64_t epsilon_micro, double delta, const std::string& actor,
                             int64_t now_micros) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  return c->InTransaction([&]() -> absl::Status {
    RETURN_IF_ERROR(c->LockHead("ledger"));
    ASSIGN_OR_RETURN(Result u,
                     c->Exec("UPDATE datasets SET cap_micro=$1, cap_delta=$2 WHERE id=$3",
                             Params().Int(epsilon_micro).Double(delta).Int(dataset_id)));
    if (u.changed() == 0) return DeletedWithItsDataset("the cap");
    LedgerRow row = CapLedgerRow(dataset_name, epsilon_micro, delta, actor, now_micros);
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


// ---- charges ---------------------------------------------------------------------------------

absl::StatusOr<StoredResponse> PgStore::GetStoredResponse(int64_t account_id,
                                                          const std::string& key) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  ASSIGN_OR_RETURN(Result r, c->Exec("SELECT request_kind, params_digest, ledger_seq, payload, "
                                     "error_code, error_message, pending FROM responses "
                                     "WHERE account_id=$1 AND idempotency_key=$2",
                                     Params().Int(account_id).Text(key)));
  RETURN_IF_ERROR(NotFoundIfEmpty(r, "no stored response"));
  return StoredResponse{r.Text(0, 0), r.Text(0, 1), r.Int(0, 2), r.Text(0, 3),
                        absl::Status(static_cast<absl::StatusCode>(r.Int(0, 4)), r.Text(0, 5)),
                        r.Int(0, 6) != 0};
}

// A transaction of its own after the charge's (it does not take the ledger head's lock, so
// no charge waits for it); the response's row lock orders concurrent finishes of one release,
// in any process.
absl::StatusOr<StoredResponse> PgStore::FinishRelease(int64_t account_id, const std::string& key,
                                                      const std::string& payload,
                                                      const absl::Status& failure,
                                                      std::optional<ArtifactRecord> artifact) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  StoredResponse stored;
  RETURN_IF_ERROR(c->InTransaction([&]() -> absl::Status {
    ASSIGN_OR_RETURN(
        Result r,
        c->Exec("SELECT r.request_kind, r.params_digest, r.ledger_seq, r.payload, r.error_code, "
                "r.error_message, r.pending, l.dataset_id, l.time_micros FROM responses r JOIN "
                "ledger l ON l.seq = r.ledger_seq WHERE r.account_id=$1 AND "
                "r.idempotency_key=$2 FOR UPDATE OF r",
                Params().Int(account_id).Text(key)));
    RETURN_IF_ERROR(NotFoundIfEmpty(r, "no stored response"));
    stored = StoredResponse{
        r.Text(0, 0), r.Text(0, 1), r.Int(0, 2), r.Text(0, 3),
        absl::Status(static_cast<absl::StatusCode>(r.Int(0, 4)), r.Text(0, 5)), r.Int(0, 6) != 0};
    if (!stored.pending) return absl::OkStatus();  // finished first by another call
    const int64_t dataset_id = r.Int(0, 7);
    // The dataset's row, key-share-locked against DeleteDataset (which locks it first): deleted
    // since the charge, it took its artifacts along and this one is not stored either.
    ASSIGN_OR_RETURN(Result dataset,
                     c->Exec("SELECT id FROM datasets WHERE id=$1 FOR KEY SHARE",
                             Params().Int(dataset_id)));
    RETURN_IF_ERROR(c->Run(
        "UPDATE responses SET payload=$1, error_code=$2, error_message=$3, pending=0 WHERE "
        "account_id=$4 AND idempotency_key=$5",
        Params()
            .Bytes(failure.ok() ? payload : std::string())
            .Int(static_cast<int64_t>(failure.code()))
            .Text(std::string(failure.message()))
            .Int(account_id)
            .Text(key)));
    if (artifact && failure.ok() && dataset.rows() > 0) {
      RETURN_IF_ERROR(c->Run(
          "INSERT INTO artifacts(id, account_id, dataset_id, ledger_seq, created_micros, "
          "payload) VALUES($1,$2,$3,$4,$5,$6)",
          Params()
              .Text(artifact->id)
              .Int(account_id)
              .Int(dataset_id)
              .Int(stored.ledger_seq)
              .Int(r.Int(0, 8))
              .Bytes(artifact->payload)));
    }
    stored.payload = failure.ok() ? payload : std::string();
    stored.failure = failure;
    stored.pending = false;
    return absl::OkStatus();
  }));
  return stored;
}

absl::StatusOr<ChargeOutcome> PgStore::Charge(const ChargeRequest& request, int64_t now_micros,
                                              const ChargeBody& body) {
  return batcher_.Charge(request, now_micros, body, [this](absl::Span<PendingCharge* const> batch) {
    absl::StatusOr<Borrowed> c = Borrow();
    if (!c.ok()) {
      for (PendingCharge* p : batch) p->outcome = c.status();
      return false;
    }
    Conn& conn = **c;
    return RunChargeBatch(
        batch, BatchOps{// Every charge on the database, from any process, waits here for the
                        // batch before it. BEGIN, the lock and each charge's savepoint go with
                        // the charge's first reads, in one round trip.
                        [&conn]() { return conn.DeferBeginAndLockLedgerHead(); },
                        [&conn]() { return conn.Defer("SAVEPOINT charge"); },
                        [&conn](const char* sql) { return conn.Run(sql); },
                        [&conn]() { return conn.InTransactionBlock(); },
                        [&conn](const PendingCharge& p, absl::Status* failure) {
                          absl::StatusOr<ChargeOutcome> outcome =
                              ChargeOne(conn, p.request, p.now_micros, p.body, failure);
                          // A failed charge's unsent writes go nowhere: its ROLLBACK TO
                          // comes next. A charge that succeeded sent them all.
                          if (!outcome.ok()) conn.DropDeferred();
                          return outcome;
                        }});
  });
}

void PgStore::SetChargeCommitObserver(std::function<void(int64_t charges)> observer) {
  batcher_.SetCommitObserver(std::move(observer));
}

// One charge of a batch, inside the batch's transaction, which holds the ledger head's lock.
absl::StatusOr<ChargeOutcome> PgStore::ChargeOne(Conn& conn, const ChargeRequest& request,
                                                 int64_t now_micros, const ChargeBody& body,
                                                 absl::Status* failure) {
  // 1. Replays return the stored bytes, charged once. What admission and the ledger row need
  // is read in the same round trip (with the batch's BEGIN and lock and this charge's
  // savepoint, deferred to it).
  std::vector<Query> reads;
  Params replay;
  replay.Int(request.account_id).Text(request.idempotency_key);
  reads.push_back(Query{"SELECT params_digest, payload, error_code, error_message, pending "
                        "FROM responses WHERE account_id=$1 AND idempotency_key=$2",
                        std::move(replay)});
  reads.push_back(postgres::AdmissionQuery(request.account_id, request.dataset_id));
  reads.push_back(postgres::LedgerHeadQuery());
  ASSIGN_OR_RETURN(std::vector<Result> read, conn.Pipeline(std::move(reads)));
  const Result& stored = read[0];
  if (stored.rows() > 0) {
    if (stored.Text(0, 0) != request.params_digest) {
      return IdempotencyKeyReused(request.idempotency_key);
    }
    RETURN_IF_ERROR(
        absl::Status(static_cast<absl::StatusCode>(stored.Int(0, 2)), stored.Text(0, 3)));
    return ChargeOutcome{stored.Text(0, 1), true, stored.Int(0, 4) != 0};
  }

  // 2. The privacy filter, on the declared cost only, and the job limit. Jobs are created
  // only by charges, which hold the lock: no other process adds one before this commits.
  AdmissionInputs in = postgres::ReadAdmission(read[1], request.account_id, request.dataset_id);
  ASSIGN_OR_RETURN(Spend spend, std::move(in.spend));
  ASSIGN_OR_RETURN(Admission admitted,
                   AdmitCharge(
                       request, std::move(in.grant), spend, std::move(in.dataset),
                       [&] { return DatasetSpendIn(conn, request.dataset_id); },
                       [&]() -> absl::StatusOr<int64_t> {
                         ASSIGN_OR_RETURN(
                             Result r,
                             conn.Exec("SELECT COUNT(*) FROM jobs WHERE state IN (1, 2)"));
                         return r.Int(0, 0);
                       }));

  // 3. Compute the release inside the transaction, then debit and store it together: the
  // writes go in one round trip, sent before this charge is done so that a failing one fails
  // this charge alone.
  const LedgerHead head = ReadLedgerHead(read[2]);
  const int64_t seq = head.seq + 1;
  ChargeResult result = RunChargeBody(body, seq, admitted.after, failure);
  LedgerRow row = ChargeLedgerRow(request, now_micros);
  RETURN_IF_ERROR(AppendLedger(conn, head, row, request.account_id, request.dataset_id));
  const Spend& after = admitted.after.spend;
  const std::string all = EncodeInt64s(after.rdp_all_nano);
  const std::string nonpure = EncodeInt64s(after.rdp_nonpure_nano);
  RETURN_IF_ERROR(conn.Defer(
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
      conn.Defer("INSERT INTO responses(account_id, idempotency_key, request_kind, params_digest, "
             "ledger_seq, payload, error_code, error_message, pending) "
             "VALUES($1,$2,$3,$4,$5,$6,$7,$8,$9)",
             Params()
                 .Int(request.account_id)
                 .Text(request.idempotency_key)
                 .Text(request.request_kind)
                 .Text(request.params_digest)
                 .Int(seq)
                 .Bytes(result.response_payload)
                 .Int(static_cast<int64_t>(failure->code()))
                 .Text(std::string(failure->message()))
                 .Int(result.pending && failure->ok() ? 1 : 0)));
  if (result.artifact) {
    const ArtifactRecord& a = *result.artifact;
    RETURN_IF_ERROR(
        conn.Defer("INSERT INTO artifacts(id, account_id, dataset_id, ledger_seq, "
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
    p.Text(j.validation_table_handle);
    RETURN_IF_ERROR(conn.Defer(absl::StrCat("INSERT INTO jobs(", kJobCols,
                                        ", validation_table_handle) VALUES($1,$2,$3,$4,$5,$6,$7,"
                                        "$8,$9,$10,$11,$12,0,$13,$14,0,0,0,'','','',0,$15)")
                               .c_str(),
                           p));
  }
  RETURN_IF_ERROR(conn.Flush());
  return ChargeOutcome{std::move(result.response_payload), false, result.pending};
}


namespace {

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
  absl::Status ForEachTreeNode(int level, const NodeFn& fn) override {
    int64_t from = 0;  // in pages, as the rows are read
    while (true) {
      ASSIGN_OR_RETURN(Result r, c_.Exec("SELECT idx, hash FROM merkle_nodes WHERE level=$1 AND "
                                         "idx >= $2 ORDER BY idx LIMIT 10000",
                                         Params().Int(level).Int(from)));
      if (r.rows() == 0) return absl::OkStatus();
      for (int i = 0; i < r.rows(); ++i) {
        RETURN_IF_ERROR(fn(r.Int(i, 0), r.Text(i, 1)));
        from = r.Int(i, 0) + 1;
      }
    }
  }

 private:
  Conn& c_;
};

}  // namespace

// ---- ledger ----------------------------------------------------------------------------------

absl::StatusOr<std::vector<LedgerRow>> PgStore::ListLedger(const LedgerFilter& filter) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  const ListingQuery q = ListingAfterCursor(filter, '$', /*by_dataset=*/true);
  ASSIGN_OR_RETURN(Result r, c->Exec(absl::StrCat("SELECT ", kLedgerCols, ", ", kLedgerCreatedCols,
                                                  " FROM ledger", q.sql)
                                         .c_str(),
                                     Params::Listing(q)));
  std::vector<LedgerRow> out;
  for (int i = 0; i < r.rows(); ++i) {
    out.push_back(ReadLedger(r, i));
    out.back().artifact_id = r.Text(i, 17);
    out.back().job_id = r.Text(i, 18);
  }
  return out;
}

absl::StatusOr<LedgerRow> PgStore::GetLedgerRow(int64_t seq) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  ASSIGN_OR_RETURN(Result r, c->Exec(absl::StrCat("SELECT ", kLedgerCols, ", ", kLedgerCreatedCols,
                                                  " FROM ledger WHERE seq = $1")
                                         .c_str(),
                                     Params().Int(seq)));
  if (r.rows() == 0) return absl::NotFoundError(absl::StrCat("the ledger has no row ", seq));
  LedgerRow row = ReadLedger(r, 0);
  row.artifact_id = r.Text(0, 17);
  row.job_id = r.Text(0, 18);
  return row;
}

// ---- transparency log ------------------------------------------------------------------------

absl::Status PgStore::ReadTree(const TreeFn& fn) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  return c->InTransaction([&]() -> absl::Status {
    // One snapshot: a row and its nodes commit together, so every node of the first `size`
    // leaves is in it.
    RETURN_IF_ERROR(c->Run("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY"));
    ASSIGN_OR_RETURN(Result head, c->Exec("SELECT COALESCE(MAX(seq), 0) FROM ledger"));
    return fn(head.Int(0, 0),
              [&](int level, int64_t idx) { return postgres::TreeNode(*c, level, idx); });
  });
}

namespace {
// The first row of `SELECT size, root, note, created_micros FROM checkpoints ...`.
CheckpointRecord ReadCheckpoint(const postgres::Result& r) {
  return CheckpointRecord{r.Int(0, 0), r.Text(0, 1), r.Text(0, 2), r.Int(0, 3)};
}
}  // namespace

absl::Status PgStore::PutCheckpoint(const CheckpointRecord& checkpoint) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  return c->Run(
      "INSERT INTO checkpoints(size, root, note, created_micros) VALUES($1,$2,$3,$4)",
      Params().Int(checkpoint.size).Bytes(checkpoint.root).Text(checkpoint.note).Int(
          checkpoint.created_micros));
}

absl::StatusOr<CheckpointRecord> PgStore::GetCheckpoint(int64_t size) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  ASSIGN_OR_RETURN(Result r, c->Exec("SELECT size, root, note, created_micros FROM checkpoints "
                                     "WHERE $1 = 0 OR size = $1 ORDER BY size DESC LIMIT 1",
                                     Params().Int(size)));
  if (r.rows() == 0) {
    return absl::NotFoundError(size == 0 ? std::string("no checkpoint has been signed yet")
                                         : absl::StrCat("no checkpoint of ", size,
                                                        " rows is stored"));
  }
  return ReadCheckpoint(r);
}

absl::StatusOr<CheckpointRecord> PgStore::CheckpointCovering(int64_t min_size) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  ASSIGN_OR_RETURN(Result r, c->Exec("SELECT size, root, note, created_micros FROM checkpoints "
                                     "WHERE size >= $1 ORDER BY size LIMIT 1",
                                     Params().Int(min_size)));
  if (r.rows() == 0) {
    return absl::NotFoundError(absl::StrCat("no checkpoint covers ", min_size, " rows yet"));
  }
  return ReadCheckpoint(r);
}

absl::Status PgStore::PutCosignature(const CosignatureRecord& c) {
  ASSIGN_OR_RETURN(Borrowed conn, Borrow());
  return conn->Run(
      "INSERT INTO cosignatures(size, witness, key_hash, line, created_micros) "
      "VALUES($1,$2,$3,$4,$5) ON CONFLICT (size, witness, key_hash) DO UPDATE SET "
      "line = EXCLUDED.line, created_micros = EXCLUDED.created_micros",
      Params().Int(c.size).Text(c.witness).Int(c.key_hash).Text(c.line).Int(c.created_micros));
}

absl::StatusOr<std::vector<CosignatureRecord>> PgStore::ListCosignatures(int64_t size) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  ASSIGN_OR_RETURN(Result r,
                   c->Exec("SELECT size, witness, key_hash, line, created_micros FROM "
                           "cosignatures WHERE size = $1 ORDER BY witness, key_hash",
                           Params().Int(size)));
  std::vector<CosignatureRecord> out;
  for (int i = 0; i < r.rows(); ++i) {
    out.push_back({r.Int(i, 0), r.Text(i, 1), r.Int(i, 2), r.Text(i, 3), r.Int(i, 4)});
  }
  return out;
}

absl::StatusOr<std::vector<int64_t>> PgStore::CosignedSizes(int64_t min_size, int64_t max_size,
                                                            int min_witnesses, bool newest_first,
                                                            int limit) {
  ASSIGN_OR_RETURN(Borrowed c, Borrow());
  ASSIGN_OR_RETURN(
      Result r,
      c->Exec(newest_first
                  ? "SELECT size FROM cosignatures WHERE size >= $1 AND ($2 = 0 OR size <= $2) "
                    "GROUP BY size HAVING COUNT(*) >= $3 ORDER BY size DESC LIMIT $4"
                  : "SELECT size FROM cosignatures WHERE size >= $1 AND ($2 = 0 OR size <= $2) "
                    "GROUP BY size HAVING COUNT(*) >= $3 ORDER BY size LIMIT $4",
              Params().Int(min_size).Int(max_size).Int(min_witnesses).Int(limit)));
  std::vector<int64_t> out;
  for (int i = 0; i < r.rows(); ++i) out.push_back(r.Int(i, 0));
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

}  // namespace fairvault::server::storage
