// PostgreSQL implementation of Store (libpq), for several vault processes (replicas) sharing
// one database. Every ledger append — grants, caps and charges — first locks the one 'ledger'
// row of the `heads` table (SELECT ... FOR UPDATE), so appends are serial across processes: the
// hash chain cannot fork, and the privacy filter's reads of grants and spend, the debit, the
// ledger row and the stored response commit in one READ COMMITTED transaction that no other
// charge interleaves with. A lost connection or a restarting server is reported as
// Unavailable (retryable; its transaction was rolled back by the server) with a message that
// names nothing about the database; libpq's own text goes to the server's log (stderr),
// without the password.
#ifndef FAIRVAULT_SERVER_STORAGE_POSTGRES_PG_STORE_H_
#define FAIRVAULT_SERVER_STORAGE_POSTGRES_PG_STORE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/storage/charge_batcher.h"
#include "server/storage/ledger_chain.h"
#include "server/storage/store.h"

struct pg_conn;

namespace fairvault::server::storage {

// True for a --db value that names a PostgreSQL database (a postgresql:// or postgres:// URI).
bool IsPostgresUri(const std::string& db);

// `conninfo` (a libpq connection URI or key=value string) with its secrets, if it has any,
// replaced by "********": the userinfo password of a URI, and the value of every keyword libpq
// itself hides (`password`, `sslpassword`) as a query parameter (its name possibly
// percent-encoded) or a `keyword=` pair. A placeholder instead of the text unless libpq parses
// it, that hides every secret libpq reads, and libpq reads no part of it as a port that is not a
// number or a user or host holding '@', '?' or '=' (a password with an unencoded '/', '@' or
// '?', taken for something else): PgStore::Open refuses those. For anything printed or logged.
std::string RedactedConnInfo(const std::string& conninfo);

// What a migration from SQLite copied.
struct ImportReport {
  LedgerVerification source;            // the SQLite vault's ledger, verified before the copy
  LedgerVerification copy;              // the PostgreSQL copy's, verified after it
  std::map<std::string, int64_t> rows;  // rows copied per table
};

class PgStore final : public Store {
 public:
  // Connects with the libpq connection URI or string `conninfo` (up to `pool_size`
  // connections, opened as needed) and brings the schema to the current version (under an
  // advisory lock: replicas starting together apply it once).
  static absl::StatusOr<std::unique_ptr<PgStore>> Open(const std::string& conninfo,
                                                       int pool_size = 8);
  ~PgStore() override;

  // Copies the SQLite vault at `sqlite_path` into this database, which must hold no vault yet
  // (FailedPrecondition otherwise), in one transaction: every table row for row, ids and seqs
  // kept. Refuses (copying nothing) unless the source's ledger verifies; after the copy the
  // copy's ledger must verify with the source's head hash (DataLoss otherwise: a server was
  // writing to the file). Stop the SQLite server first.
  absl::StatusOr<ImportReport> ImportSqlite(const std::string& sqlite_path);

  absl::StatusOr<AccountRecord> CreateAccount(AccountRecord account) override;
  absl::StatusOr<AccountRecord> GetAccountById(int64_t id) override;
  absl::StatusOr<AccountRecord> GetAccountByName(const std::string& name) override;
  absl::StatusOr<std::vector<AccountRecord>> ListAccounts() override;

  absl::StatusOr<DatasetRecord> CreateDataset(DatasetRecord dataset) override;
  absl::StatusOr<DatasetRecord> GetDataset(const std::string& name) override;
  absl::StatusOr<DatasetRecord> GetDatasetById(int64_t id) override;
  absl::StatusOr<std::vector<DatasetRecord>> ListDatasets() override;
  absl::Status DeleteDataset(int64_t dataset_id) override;

  absl::StatusOr<std::string> GetBatchDigest(int64_t dataset_id,
                                             const std::string& batch_id) override;
  absl::Status PutSubjectBatch(int64_t dataset_id, const std::string& batch_id,
                               const std::string& digest, int64_t expected_subject_count,
                               int64_t rows, const std::string& payload) override;
  absl::Status ForEachSubjectBatch(
      int64_t dataset_id, const std::function<absl::Status(const std::string&)>& fn) override;

  absl::StatusOr<GrantRecord> SetGrant(const GrantRecord& grant, const std::string& account_name,
                                       const std::string& dataset_name, const std::string& actor,
                                       int64_t now_micros) override;
  absl::StatusOr<std::vector<GrantRecord>> ListGrants() override;
  absl::Status SetCap(int64_t dataset_id, const std::string& dataset_name, int64_t epsilon_micro,
                      double delta, const std::string& actor, int64_t now_micros) override;
  absl::StatusOr<BudgetState> GetBudget(int64_t account_id, int64_t dataset_id) override;
  absl::StatusOr<core::accounting::Spend> GetDatasetSpend(int64_t dataset_id) override;

  absl::Status PutTable(const TableRecord& table) override;
  absl::StatusOr<TableRecord> GetTable(const std::string& handle) override;
  absl::StatusOr<TableRecord> GetTableInfo(const std::string& handle) override;
  absl::StatusOr<int64_t> PurgeExpiredTables(int64_t now_micros) override;

  absl::StatusOr<StoredResponse> GetStoredResponse(int64_t account_id,
                                                   const std::string& key) override;
  absl::StatusOr<StoredResponse> FinishRelease(int64_t account_id, const std::string& key,
                                               const std::string& payload,
                                               const absl::Status& failure,
                                               std::optional<ArtifactRecord> artifact) override;
  absl::StatusOr<ChargeOutcome> Charge(const ChargeRequest& request, int64_t now_micros,
                                       const ChargeBody& body) override;
  void SetChargeCommitObserver(std::function<void(int64_t charges)> observer) override;
  absl::StatusOr<ArtifactRecord> GetArtifact(const std::string& id) override;
  absl::StatusOr<JobRecord> GetJob(const std::string& id) override;
  absl::StatusOr<std::vector<JobRecord>> ListJobs(const JobFilter& filter) override;
  absl::StatusOr<std::vector<JobRecord>> ListUnfinishedJobs() override;
  absl::StatusOr<JobRecord> StartJob(const std::string& id, const JobLease& lease) override;
  absl::Status RenewJobLease(const std::string& id, const JobLease& lease) override;
  absl::Status UpdateJobProgress(const std::string& id, const std::string& owner, int64_t done,
                                 int64_t total) override;
  absl::Status FinishJob(const std::string& id, const std::string& owner,
                         const ArtifactRecord& artifact, int64_t now_micros) override;
  absl::Status FailJob(const std::string& id, const std::string& owner, const std::string& error,
                       int64_t now_micros) override;
  absl::StatusOr<JobRecord> CancelJob(const std::string& id, int64_t now_micros) override;

  absl::StatusOr<std::vector<AccessLogRow>> ListAccessLog(const LedgerFilter& filter) override;
  absl::Status ForEachDecisionBatch(
      const std::string& artifact_id, int64_t after_batch,
      const std::function<absl::Status(int64_t batch, const std::string& payload)>& fn) override;
  absl::Status ForEachKeyedDecision(
      const std::string& artifact_id,
      const std::function<absl::Status(const DecisionRow&)>& fn) override;
  absl::StatusOr<int64_t> RecordDecisionBatch(const std::string& artifact_id, int64_t batch,
                                              const std::string& payload,
                                              const AccessLogRow& log) override;

  absl::StatusOr<std::vector<LedgerRow>> ListLedger(const LedgerFilter& filter) override;
  absl::StatusOr<LedgerVerification> VerifyLedger() override;
  absl::StatusOr<LedgerRow> GetLedgerRow(int64_t seq) override;
  absl::Status ReadTree(const TreeFn& fn) override;
  absl::Status PutCheckpoint(const CheckpointRecord& checkpoint) override;
  absl::StatusOr<CheckpointRecord> GetCheckpoint(int64_t size) override;
  absl::StatusOr<CheckpointRecord> CheckpointCovering(int64_t min_size) override;
  absl::Status PutCosignature(const CosignatureRecord& cosignature) override;
  absl::StatusOr<std::vector<CosignatureRecord>> ListCosignatures(int64_t size) override;
  absl::StatusOr<std::vector<int64_t>> CosignedSizes(int64_t min_size, int64_t max_size,
                                                     int min_witnesses, bool newest_first,
                                                     int limit) override;

  class Conn;  // one libpq connection (pg_store.cc)

 private:
  PgStore(std::string conninfo, int pool_size);
  absl::StatusOr<TableRecord> ReadTable(const std::string& handle, bool with_payload);
  // DatabaseUnavailable() for the caller; libpq's `detail` to the server's log (stderr),
  // without the password, one line per change of the failure and at most one a second while
  // it repeats.
  absl::Status Unavailable(const std::string& detail) ABSL_LOCKS_EXCLUDED(log_mu_);
  // After failures: one line saying the database answers again.
  void Reconnected() ABSL_LOCKS_EXCLUDED(log_mu_);
  // A connection from the pool (opened or re-opened as needed), returned to it by the deleter.
  struct Release {
    PgStore* store;
    void operator()(Conn* conn) const;
  };
  using Borrowed = std::unique_ptr<Conn, Release>;
  absl::StatusOr<Borrowed> Borrow();
  static absl::StatusOr<ChargeOutcome> ChargeOne(Conn& conn, const ChargeRequest& request,
                                                 int64_t now_micros, const ChargeBody& body,
                                                 absl::Status* failure);

  // Charges wait here to be committed together, one transaction per batch.
  ChargeBatcher batcher_;
  // The Merkle tree's right edge after this process's last ledger row (TreeFrontier).
  TreeFrontier tree_frontier_;

  const std::string conninfo_;
  const int pool_size_;
  absl::Mutex mu_;
  std::vector<std::unique_ptr<Conn>> idle_ ABSL_GUARDED_BY(mu_);
  int open_ ABSL_GUARDED_BY(mu_) = 0;  // connections in existence (idle or borrowed)
  absl::Mutex log_mu_;
  std::string last_logged_ ABSL_GUARDED_BY(log_mu_);  // empty: not failing
  absl::Time last_logged_at_ ABSL_GUARDED_BY(log_mu_) = absl::InfinitePast();
  int64_t unlogged_ ABSL_GUARDED_BY(log_mu_) = 0;  // repeats since the last line
};

}  // namespace fairvault::server::storage

#endif  // FAIRVAULT_SERVER_STORAGE_POSTGRES_PG_STORE_H_
