// SQLite implementation of Store: one file, WAL journal, synchronous=FULL, one writing
// connection behind a mutex (SQLite has one writer anyway; the charge path must be serial),
// read-only ones for the reads a request makes before it charges and for listings, and a
// background checkpointer that keeps the write-ahead log (`<file>-wal`) bounded.
#ifndef FAIRVAULT_SERVER_STORAGE_SQLITE_SQLITE_STORE_H_
#define FAIRVAULT_SERVER_STORAGE_SQLITE_SQLITE_STORE_H_

#include <sqlite3.h>

#include <cstdint>
#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/storage/charge_batcher.h"
#include "server/storage/ledger_chain.h"
#include "server/storage/sqlite/statement.h"
#include "server/storage/store.h"

struct sqlite3;

namespace fairvault::server::storage {

namespace sqlite {
class StmtCache;  // statement.h
}  // namespace sqlite

class SqliteStore final : public Store {
 public:
  // The write-ahead log's bound (docs/operations.md, "The database file"). Commits append to
  // the log; a background connection copies it into the database file without blocking anyone
  // (a PASSIVE checkpoint) once a megabyte is new, or within a second of the last commit. Under
  // continuous commits the log is never fully copied while no commit is under way, so it never
  // restarts by itself: once it holds kWalCheckpointBytes, the checkpointer holds this store's
  // writes back, copies the rest and waits for readers to leave the log (a RESTART
  // checkpoint), so that the next commit writes the log again from its start. Should it fall
  // behind, the commit that brings the log to kWalLimitBytes does the same before it returns.
  // So, unless a reader keeps one snapshot open for longer than the checkpointer's busy timeout
  // (250 ms), `<file>-wal` stays under kWalLimitBytes plus the last transaction.
  //
  // The file is not emptied but rewritten in place: a commit that overwrites blocks the file
  // already has is synced with one write to the disk, while one that makes the file longer
  // must also write its inode (on ext4, about twice the time: bench/README.md). The commit
  // after a restart cuts a file longer than kWalKeptBytes back to it (`journal_size_limit`);
  // after a reader held the log back, the checkpoint that restarts it empties the file.
  static constexpr int64_t kWalCheckpointBytes = int64_t{16} << 20;
  static constexpr int64_t kWalKeptBytes = int64_t{32} << 20;
  static constexpr int64_t kWalLimitBytes = int64_t{64} << 20;

  struct Options {
    // Called by the checkpointer every 200 ms with the size of the
    // `-wal` file in bytes (the operators' gauge); from the checkpointer's thread, so it must
    // be thread-safe. Empty: not called.
    std::function<void(int64_t wal_bytes)> on_wal_bytes;
    // How long a connection waits for another process's hold on the database (a write, a
    // checkpoint) before the call fails with Unavailable ("retry shortly").
    int busy_millis = 10'000;
  };

  // Opens (creating if needed) the database at `path` and applies the schema.
  static absl::StatusOr<std::unique_ptr<SqliteStore>> Open(const std::string& path) {
    return Open(path, Options());
  }
  static absl::StatusOr<std::unique_ptr<SqliteStore>> Open(const std::string& path,
                                                           Options options);
  // A consistent copy of the database at `path` into the new file `out` with SQLite's online
  // backup API (safe while a server writes to `path`: the copy is one snapshot), then opens the
  // copy and verifies its ledger. AlreadyExists if `out` exists; DataLoss (and `out` removed) if
  // the copy's ledger does not verify. Returns the copy's verification.
  static absl::StatusOr<LedgerVerification> Backup(const std::string& path, const std::string& out);
  ~SqliteStore() override;

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
                                               std::optional<ArtifactRecord> artifact) override
      ABSL_LOCKS_EXCLUDED(mu_);
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

 private:
  SqliteStore(sqlite3* db, std::string path, Options options);
  // Copies committed WAL frames into the database file from a second connection, so that no
  // request pays for a checkpoint (SQLite's automatic one runs inside the commit that crosses
  // its threshold: 0.2-0.4 s after a 1M-row upload), and restarts the log when it grows past
  // kWalCheckpointBytes. Runs until the store is destroyed.
  void CheckpointLoop();
  // One round: a PASSIVE checkpoint, then a RESTART one (holding mu_) if the log is large
  // and `may_restart`. Nothing if no RESTART was needed; else whether it restarted the log
  // (false: not tried, or refused because a reader held the log for longer than the busy
  // timeout).
  // `empty`: a TRUNCATE checkpoint instead, which also empties the file.
  std::optional<bool> CheckpointRound(bool may_restart, bool empty) ABSL_LOCKS_EXCLUDED(mu_);
  // A RESTART checkpoint through `db` (TRUNCATE if `empty`), tried for 250 ms; SQLITE_BUSY if
  // a reader (or another checkpoint) kept the log that long.
  int Restart(sqlite3* db, bool empty);
  // SQLite's WAL hook on the serving connection (replaces its automatic checkpoint), called
  // after each commit, under mu_, with the log's length in frames: wakes the checkpointer once
  // the log reaches kWalCheckpointBytes, and at kWalLimitBytes restarts it itself.
  static int OnCommit(void* store, sqlite3* db, const char* name, int frames);
  // Also VerifyLedger's, before its snapshot. After a refusal (another process's snapshot),
  // not tried again for kMaxRestartBackoff.
  void RestartAfterCommit() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool CheckpointWanted() const ABSL_SHARED_LOCKS_REQUIRED(ckpt_mu_) { return stop_ || wanted_; }
  absl::StatusOr<TableRecord> ReadTable(const std::string& handle, bool with_payload);
  absl::Status Exec(const char* sql) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One statement, prepared once and kept in cache_ (a batch of charges runs the same few
  // transaction statements for every charge: SAVEPOINT, RELEASE, COMMIT).
  absl::Status ExecCached(const char* sql) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return sqlite::Stmt(*cache_, sql).Run();
  }
  // The tree node stored at (level, idx); NotFound if none.
  absl::StatusOr<std::string> TreeNodeLocked(int level, int64_t idx)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Adds the ledger row `seq` (hex hash, its predecessor's `prev_hash`) to the Merkle tree, in
  // the caller's transaction.
  absl::Status AppendTreeLeafLocked(int64_t seq, const std::string& prev_hash,
                                    const std::string& hash)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs `write` (its own autocommit statements) without syncing the log at its commit: for
  // writes a crash may lose harmlessly (job progress, lease renewals).
  absl::Status WithoutSyncLocked(const std::function<absl::Status()>& write)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status ApplySchema() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Migrate() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // These three read through `cache`: the serving connection's (under mu_) or a pooled
  // reader's.
  static absl::StatusOr<GrantRecord> GrantLocked(sqlite::StmtCache& cache, int64_t account_id,
                                                 int64_t dataset_id);
  static absl::StatusOr<core::accounting::Spend> SpendLocked(sqlite::StmtCache& cache,
                                                             int64_t account_id,
                                                             int64_t dataset_id);
  absl::StatusOr<core::accounting::Spend> DatasetSpendLocked(int64_t dataset_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static absl::StatusOr<DatasetRecord> DatasetLocked(sqlite::StmtCache& cache, const char* where,
                                                     int64_t id, const std::string& name);
  // Runs `read` (statements made from the cache it is given) on one of `pool`'s connections,
  // or on the serving connection under mu_ when it has none (an in-memory database).
  template <typename Read>
  auto ReadingFrom(sqlite::ReaderPool& pool, const Read& read) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    if (pool.empty()) {
      absl::MutexLock lock(&mu_);
      return sqlite::ReaderPool::ReadOn(*cache_, read);
    }
    return pool.Run(read);
  }
  // The reads a request makes before it charges.
  template <typename Read>
  auto Reading(const Read& read) {
    return ReadingFrom(readers_, read);
  }
  // Listings and the ledger's verification: reads that may take long.
  template <typename Read>
  auto Listing(const Read& read) {
    return ReadingFrom(listers_, read);
  }
  // Appends one row to the chain inside the caller's transaction; fills seq and hashes.
  absl::Status AppendLedgerLocked(LedgerRow& row, int64_t account_id, int64_t dataset_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<std::pair<int64_t, std::string>> LedgerHeadLocked()
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<JobRecord> JobLocked(const std::string& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // NotFound for an unknown job, FailedPrecondition (naming `action`) unless it is running
  // under `owner`'s lease.
  absl::Status RequireLeaseHolderLocked(const std::string& id, const std::string& owner,
                                        const char* action) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // One charge of a batch, inside the batch's transaction (RunChargeBatch).
  absl::StatusOr<ChargeOutcome> ChargeOneLocked(const ChargeRequest& request, int64_t now_micros,
                                                const ChargeBody& body, absl::Status* failure)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Charges wait here (not on mu_) to be committed together.
  ChargeBatcher batcher_;
  TreeFrontier tree_frontier_;
  absl::Mutex mu_;
  sqlite3* db_ ABSL_GUARDED_BY(mu_);
  // db_'s prepared statements, reused across calls.
  std::unique_ptr<sqlite::StmtCache> cache_ ABSL_GUARDED_BY(mu_);
  // Read-only connections (null pools, and reads go through db_, for an in-memory database).
  // In WAL mode each reads the last commit while a batch of charges holds mu_ through its
  // sync, instead of waiting for it. Each statement is its own read transaction (reset after
  // use), so it holds the log back from a checkpoint's restart only while it runs.
  // readers_ (kReaders) serve the reads a request makes before it charges (its account, a
  // stored response, a table, a dataset, a budget), side by side; listers_ (kListers) serve the
  // ledger, access-log and job listings (a page of up to 10,000 rows) and the ledger's
  // verification (one snapshot), so that however long those take, and however many wait for
  // one another, a request's reads never wait behind them.
  static constexpr int kReaders = 2;
  static constexpr int kListers = 1;
  sqlite::ReaderPool readers_;
  sqlite::ReaderPool listers_;
  // How many of this store's reads hold one snapshot open (VerifyLedger's, once it has begun):
  // no log restart is tried meanwhile (it could not finish before the snapshot ends).
  std::atomic<int> snapshots_{0};
  // The checkpointer skipped a restart for a snapshot (the log may have grown): its next
  // restart empties a file longer than kWalKeptBytes. The checkpointer's thread only.
  bool log_held_by_snapshot_ = false;
  const std::string path_;
  const Options options_;
  // Bytes of one log frame: the page size plus the frame header.
  int64_t frame_bytes_ = 0;
  // The background checkpointer's own connection (used by its thread only), or null when it
  // could not be opened (SQLite's automatic checkpoint then stays on).
  sqlite3* checkpoint_db_ = nullptr;
  bool checkpoint_failing_ = false;  // the last checkpoint failed (reported once)
  std::thread checkpointer_;
  // After a refused TRUNCATE, commits at kWalLimitBytes do not try again before this time (a
  // long reader must not stall every commit).
  absl::Time commit_restart_after_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Mutex ckpt_mu_;
  bool stop_ ABSL_GUARDED_BY(ckpt_mu_) = false;
  bool wanted_ ABSL_GUARDED_BY(ckpt_mu_) = false;  // a commit found the log large: a round now
  // The log's length in frames after the last commit (OnCommit sets it, the checkpointer reads).
  std::atomic<int64_t> log_frames_{0};
};

}  // namespace fairvault::server::storage

#endif  // FAIRVAULT_SERVER_STORAGE_SQLITE_SQLITE_STORE_H_
