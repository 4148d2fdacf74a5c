// The abstract store behind the vault: accounts, datasets, subjects, grants, tables, the
// hash-chained ledger, stored responses and artifacts. SQLite is one implementation
// (sqlite_store.h), PostgreSQL another (pg_store.h), which several vault processes share.
// Every method is thread-safe.
#ifndef FAIRVAULT_SERVER_STORAGE_STORE_H_
#define FAIRVAULT_SERVER_STORAGE_STORE_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/accounting/accountant.h"
#include "core/transparency/merkle.h"

namespace fairvault::server::storage {

enum class Role { kRegulator = 1, kCompany = 2, kAuditor = 3 };

struct AccountRecord {
  int64_t id = 0;
  std::string name;
  Role role = Role::kCompany;
  std::string key_salt;  // raw bytes
  std::string key_hash;  // raw SHA-256(salt || secret)
  int64_t created_micros = 0;
};

struct DatasetRecord {
  int64_t id = 0;
  std::string name;
  std::string attributes;  // serialized storage::DatasetAttributes
  int64_t created_micros = 0;
  int64_t subject_count = 0;
  std::optional<int64_t> cap_micro;  // dataset-wide cap, if set
  double cap_delta = 0;
};

struct GrantRecord {
  int64_t account_id = 0;
  int64_t dataset_id = 0;
  int64_t epsilon_micro = 0;
  double delta = 0;
};

struct TableRecord {
  std::string handle;
  int64_t account_id = 0;
  int64_t dataset_id = 0;
  int64_t rows = 0;
  int64_t expires_micros = 0;
  std::string payload;  // serialized storage::StoredTable
};

struct StoredResponse {
  std::string request_kind;
  std::string params_digest;
  int64_t ledger_seq = 0;
  std::string payload;  // the serialized response, returned as is on replay
  // A release whose computation failed after its noise was drawn: charged, and its failure
  // is what a replay returns.
  absl::Status failure;
  // The charged release before its post-processing (ChargeResult::pending): `payload` holds
  // the release; FinishRelease stores the finished response in its place.
  bool pending = false;
};

// One decision the vault made with an artifact: the input (a 0/1 prediction or a score bin)
// and the output returned.
struct DecisionRow {
  std::string subject_key;
  double input = 0;
  double output = 0;
};

struct ArtifactRecord {
  std::string id;
  int64_t account_id = 0;
  int64_t dataset_id = 0;
  int64_t ledger_seq = 0;
  int64_t created_micros = 0;
  std::string payload;  // serialized v1::Artifact
};

struct LedgerRow {
  int64_t seq = 0;
  int64_t time_micros = 0;
  std::string kind;  // "grant", "cap", "charge"
  std::string account;
  std::string dataset;
  std::string request_kind;
  std::string idempotency_key;
  double epsilon = 0;
  double delta = 0;
  std::string mechanism;
  std::optional<int64_t> pure_micro;  // charges: the pure epsilon, if any
  std::vector<int64_t> rdp_nano;      // charges: the RDP curve
  std::string prev_hash;              // hex
  std::string hash;                   // hex
  // Grants and caps: the regulator account that set them (schema version 6; empty on rows
  // written before, whose hash did not cover it). Covered by the hash when not empty.
  std::string actor;
  // Read with the row, not stored in it nor covered by its hash: the artifact and the job
  // that the charge created (empty if none), looked up by ledger seq.
  std::string artifact_id;
  std::string job_id;
  // Read with the row: the ids it refers to, which its hash covers (LedgerRowEncoding).
  int64_t account_id = 0;
  int64_t dataset_id = 0;
};

// A signed checkpoint of the ledger's Merkle tree (issue 25): the tree of the first `size`
// rows, its root hash (raw 32 bytes) and the signed note that states both.
struct CheckpointRecord {
  int64_t size = 0;
  std::string root;
  std::string note;
  int64_t created_micros = 0;
};

// A witness's cosignature of a stored checkpoint (issue 25): the signature line it added to
// the checkpoint's note (C2SP tlog-cosignature), checked by the vault before it is stored.
struct CosignatureRecord {
  int64_t size = 0;       // the checkpoint's tree size
  std::string witness;    // the witness key's name
  int64_t key_hash = 0;   // its 32-bit key hash
  std::string line;       // "— <name> <base64>\n"
  int64_t created_micros = 0;
};

// One Decide call, as the auditor sees it.
struct AccessLogRow {
  int64_t seq = 0;
  int64_t time_micros = 0;
  std::string account;
  std::string dataset;
  std::string artifact_id;
  int64_t rows = 0;           // rows in the call
  int64_t new_decisions = 0;  // of which newly decided; -1: logged before this was recorded
};

struct LedgerFilter {
  std::optional<std::string> account;
  std::optional<std::string> dataset;
  int64_t after_seq = 0;
  int limit = 1000;
};

struct LedgerVerification {
  bool ok = true;
  int64_t rows_checked = 0;
  int64_t first_bad_seq = 0;
  std::string message;
  std::string head_hash;
};

// A spending request as the privacy filter sees it: only declared, data-independent facts.
struct ChargeRequest {
  int64_t account_id = 0;
  std::string account_name;
  int64_t dataset_id = 0;
  std::string dataset_name;
  std::string request_kind;
  std::string idempotency_key;
  std::string params_digest;
  core::accounting::PrivacyCost cost;
  double epsilon = 0;  // for the ledger row
  double delta = 0;
  std::string mechanism;
  // Set when the charge creates a training job (FitFairModel): the most jobs that may be
  // unfinished (queued or running) at once in the store, whichever process created or runs
  // them. The charge that would exceed it is refused inside the charge transaction.
  std::optional<int64_t> job_limit;
};

// The budget state as seen inside a charge.
struct BudgetState {
  GrantRecord grant;
  core::accounting::Spend spend;  // this company on this dataset
  int64_t spent_micro = 0;        // SpentEpsilonMicro(spend, grant.delta)
};

enum class JobState { kQueued = 1, kRunning = 2, kSucceeded = 3, kFailed = 4, kCancelled = 5 };

// A training job (issue 9 §4): created by the charge that pays for it, then run by the job
// runner. Everything it computes is a function of this record and stored data, so a re-run
// after a crash produces the same artifact.
struct JobRecord {
  std::string id;  // "job_" + 32 hex
  int64_t account_id = 0;
  int64_t dataset_id = 0;
  int64_t ledger_seq = 0;
  std::string idempotency_key;
  std::string table_handle;   // the table stays (is not purged) while the job is unfinished
  // A second table the job reads (the managed selection's validation rows; empty if none):
  // kept like table_handle. Written at submission only (not read back into records).
  std::string validation_table_handle;
  int32_t algorithm = 0;      // v1::FairModelAlgorithm
  std::string request;        // serialized v1::FitFairModelRequest
  std::string plan;           // serialized noise plan (use-case specific), fixed at submission
  std::string seed;           // 32 bytes: key of the job's ChaCha20 randomness, drawn at submission
  int64_t subject_limit = 0;  // subjects in the dataset at submission: the job joins only these
  JobState state = JobState::kQueued;
  int64_t done = 0;
  int64_t total = 0;
  int64_t submitted_micros = 0;
  int64_t started_micros = 0;   // start of the current (or last) attempt; 0 if never started
  int64_t finished_micros = 0;  // 0 while unfinished
  int32_t attempts = 0;         // times a runner started it
  // The runner holding it while running (replicas share the store): its owner id and the
  // wall-clock time its lease ends. Another runner may take over a job whose lease ended.
  std::string lease_owner;
  int64_t lease_expires_micros = 0;
  std::string artifact_id;  // when succeeded
  std::string error;        // when failed or cancelled
};

// A runner's claim on a running job: who holds it, when it asks, and until when.
struct JobLease {
  std::string owner;
  int64_t now_micros = 0;
  int64_t expires_micros = 0;
};

struct JobFilter {
  std::optional<int64_t> account_id;
  std::optional<int64_t> dataset_id;
  int limit = 100;  // newest first
};

// What a computation run inside a charge produces.
struct ChargeResult {
  std::string response_payload;
  std::optional<ArtifactRecord> artifact;
  // A job to create with the charge (its ledger_seq is the charge's).
  std::optional<JobRecord> job;
  // The payload is the charged release alone: its post-processing (a long solve) runs after
  // the commit, outside the transaction that every other charge waits for, and FinishRelease
  // stores the finished response (and its artifact). No artifact or job with it.
  bool pending = false;
};

struct ChargeOutcome {
  std::string response_payload;
  bool replayed = false;
  // The payload is a charged release still to be finished (ChargeResult::pending).
  bool pending = false;
};

// Runs inside the charge transaction once the filter admitted the cost: receives the new
// ledger sequence number and the budget after the charge; returns the response to store.
using ChargeBody =
    std::function<absl::StatusOr<ChargeResult>(int64_t ledger_seq, const BudgetState& after)>;

class Store {
 public:
  virtual ~Store() = default;

  // Accounts. AlreadyExists for a taken name.
  virtual absl::StatusOr<AccountRecord> CreateAccount(AccountRecord account) = 0;
  virtual absl::StatusOr<AccountRecord> GetAccountById(int64_t id) = 0;
  virtual absl::StatusOr<AccountRecord> GetAccountByName(const std::string& name) = 0;
  virtual absl::StatusOr<std::vector<AccountRecord>> ListAccounts() = 0;

  // Datasets. Deleting removes subjects, tables, artifacts, grants and spend totals; ledger
  // rows stay.
  virtual absl::StatusOr<DatasetRecord> CreateDataset(DatasetRecord dataset) = 0;
  virtual absl::StatusOr<DatasetRecord> GetDataset(const std::string& name) = 0;
  virtual absl::StatusOr<DatasetRecord> GetDatasetById(int64_t id) = 0;
  virtual absl::StatusOr<std::vector<DatasetRecord>> ListDatasets() = 0;
  virtual absl::Status DeleteDataset(int64_t dataset_id) = 0;

  // Subject batches. The digest of a stored batch (NotFound if none).
  virtual absl::StatusOr<std::string> GetBatchDigest(int64_t dataset_id,
                                                     const std::string& batch_id) = 0;
  // Stores a batch and adds `rows` to the dataset's subject count, atomically, if the count is
  // still `expected_subject_count` (what the importer checked the batch's keys against);
  // Aborted otherwise (another process imported meanwhile), storing nothing.
  virtual absl::Status PutSubjectBatch(int64_t dataset_id, const std::string& batch_id,
                                       const std::string& digest, int64_t expected_subject_count,
                                       int64_t rows, const std::string& payload) = 0;
  // Every batch payload of a dataset, in import order.
  virtual absl::Status ForEachSubjectBatch(
      int64_t dataset_id, const std::function<absl::Status(const std::string&)>& fn) = 0;

  // Grants and caps; each change appends a ledger row naming `actor`, the regulator account
  // that made it.
  virtual absl::StatusOr<GrantRecord> SetGrant(const GrantRecord& grant,
                                               const std::string& account_name,
                                               const std::string& dataset_name,
                                               const std::string& actor,
                                               int64_t now_micros) = 0;
  virtual absl::StatusOr<std::vector<GrantRecord>> ListGrants() = 0;
  virtual absl::Status SetCap(int64_t dataset_id, const std::string& dataset_name,
                              int64_t epsilon_micro, double delta, const std::string& actor,
                              int64_t now_micros) = 0;
  // Budget of one company on one dataset (NotFound without a grant).
  virtual absl::StatusOr<BudgetState> GetBudget(int64_t account_id, int64_t dataset_id) = 0;
  // Composed spend of all companies on a dataset.
  virtual absl::StatusOr<core::accounting::Spend> GetDatasetSpend(int64_t dataset_id) = 0;

  // Company tables. NotFound, nothing stored, if the table's dataset no longer exists (deleted
  // after the caller read it): a deleted dataset leaves no table behind.
  virtual absl::Status PutTable(const TableRecord& table) = 0;
  virtual absl::StatusOr<TableRecord> GetTable(const std::string& handle) = 0;
  // The same record without its payload (which can be hundreds of megabytes): for a table the
  // caller already holds parsed.
  virtual absl::StatusOr<TableRecord> GetTableInfo(const std::string& handle) = 0;
  // Removes tables whose expiry is before now; returns how many.
  virtual absl::StatusOr<int64_t> PurgeExpiredTables(int64_t now_micros) = 0;

  // Idempotency: the stored response of (account, key), NotFound if none.
  virtual absl::StatusOr<StoredResponse> GetStoredResponse(int64_t account_id,
                                                           const std::string& key) = 0;

  // The privacy filter, debit and stored response in one transaction:
  // - if (account, key) already has a stored response: returns it (replayed) when the digest
  //   matches, FailedPrecondition otherwise; nothing is charged;
  // - NotFound/FailedPrecondition without a grant; ResourceExhausted (with the budget left)
  //   when the cost does not fit the grant or the dataset cap — decided on the declared cost
  //   alone, before `body` runs;
  // - otherwise runs `body`, appends the charge to the ledger, updates the spend totals,
  //   stores the response (and artifact) and commits. If `body` fails its noise has been
  //   drawn, so the charge is kept and the failure is stored and returned (a replay returns
  //   the same failure): a failure that depends on the noisy data cannot be retried for free.
  // Concurrent charges are committed together (group commit, charge_batcher.h): one
  // transaction and one sync for all of them, each charge in its own savepoint and in queue
  // order, each caller answered after the commit.
  virtual absl::StatusOr<ChargeOutcome> Charge(const ChargeRequest& request, int64_t now_micros,
                                               const ChargeBody& body) = 0;
  // Stores the finished response of a pending release (ChargeResult::pending) in place of the
  // release, with its artifact (account, dataset, ledger seq and creation time taken from the
  // charge's own rows; not kept if the dataset was deleted since), or `failure` (a charged
  // failure) instead, in one transaction. The first finish stored wins: a release already
  // finished is returned as stored and `artifact` is not kept. Returns the stored response.
  // NotFound if (account, key) charged nothing.
  virtual absl::StatusOr<StoredResponse> FinishRelease(int64_t account_id, const std::string& key,
                                                       const std::string& payload,
                                                       const absl::Status& failure,
                                                       std::optional<ArtifactRecord> artifact) = 0;
  // Called after each committed transaction of charges with how many it held (group commit:
  // several concurrent charges share one transaction and one sync).
  virtual void SetChargeCommitObserver(std::function<void(int64_t charges)> observer) = 0;

  virtual absl::StatusOr<ArtifactRecord> GetArtifact(const std::string& id) = 0;

  // Training jobs (created only by Charge). NotFound for an unknown id.
  virtual absl::StatusOr<JobRecord> GetJob(const std::string& id) = 0;
  virtual absl::StatusOr<std::vector<JobRecord>> ListJobs(const JobFilter& filter) = 0;
  // Queued and running jobs, oldest first.
  virtual absl::StatusOr<std::vector<JobRecord>> ListUnfinishedJobs() = 0;
  // Claims a job for `lease.owner` until `lease.expires_micros`: a queued job, or a running
  // one whose lease ended before `lease.now_micros` (its runner died: another replica or the
  // next process takes it over and runs it again from the same stored randomness). Running,
  // attempts + 1, started_micros = now, progress reset. Returns the updated record;
  // FailedPrecondition if it is not claimable (held, cancelled or finished).
  virtual absl::StatusOr<JobRecord> StartJob(const std::string& id, const JobLease& lease) = 0;
  // Extends the lease of a job `lease.owner` holds; FailedPrecondition if it holds it no more
  // (the job was cancelled, or taken over after the lease ended).
  virtual absl::Status RenewJobLease(const std::string& id, const JobLease& lease) = 0;
  // Progress of a running job (ignored unless running under `owner`).
  virtual absl::Status UpdateJobProgress(const std::string& id, const std::string& owner,
                                         int64_t done, int64_t total) = 0;
  // A running job's artifact and its state succeeded, in one transaction; FailedPrecondition
  // (nothing stored) unless the job is running under `owner` (cancelled or taken over);
  // NotFound if the job went with its dataset (the artifact is not stored).
  virtual absl::Status FinishJob(const std::string& id, const std::string& owner,
                                 const ArtifactRecord& artifact, int64_t now_micros) = 0;
  // A running job failed: state failed with `error`; FailedPrecondition unless running under
  // `owner`.
  virtual absl::Status FailJob(const std::string& id, const std::string& owner,
                               const std::string& error, int64_t now_micros) = 0;
  // Queued or running -> cancelled; returns the record (unchanged if already finished).
  virtual absl::StatusOr<JobRecord> CancelJob(const std::string& id, int64_t now_micros) = 0;

  // Access log of decisions (append-only). Rows with seq > filter.after_seq (account filter
  // optional), oldest first.
  virtual absl::StatusOr<std::vector<AccessLogRow>> ListAccessLog(const LedgerFilter& filter) = 0;

  // An artifact's decisions, stored as numbered batches (1, 2, ...), one per Decide call that
  // decided someone new; each payload is opaque here (the vault packs its subjects' index rows,
  // inputs and outputs: server/app/postprocess/decision_table.h). Calls `fn` on each batch
  // numbered above `after_batch`, in order.
  virtual absl::Status ForEachDecisionBatch(
      const std::string& artifact_id, int64_t after_batch,
      const std::function<absl::Status(int64_t batch, const std::string& payload)>& fn) = 0;
  // Decisions stored one row per subject key before schema version 7 (read-only now).
  virtual absl::Status ForEachKeyedDecision(
      const std::string& artifact_id, const std::function<absl::Status(const DecisionRow&)>& fn) = 0;
  // Appends the call's access-log row and, unless `payload` is empty, decision batch `batch`
  // of the artifact, in one transaction; returns the log row's seq. Neither is stored without
  // the other. Aborted if batch `batch` exists (another process decided meanwhile: reread);
  // NotFound if the artifact no longer exists (deleted with its dataset during the call).
  virtual absl::StatusOr<int64_t> RecordDecisionBatch(const std::string& artifact_id,
                                                      int64_t batch, const std::string& payload,
                                                      const AccessLogRow& log) = 0;

  // Ledger.
  virtual absl::StatusOr<std::vector<LedgerRow>> ListLedger(const LedgerFilter& filter) = 0;
  // Recomputes the hash chain and the spend totals from the ledger rows.
  virtual absl::StatusOr<LedgerVerification> VerifyLedger() = 0;
  // One ledger row; NotFound if there is none with that seq.
  virtual absl::StatusOr<LedgerRow> GetLedgerRow(int64_t seq) = 0;

  // The transparency log (issue 25). Every ledger row is a leaf of a Merkle tree (leaf i is
  // the row with seq i + 1), extended inside the transaction that appends the row.
  using TreeFn = std::function<absl::Status(int64_t size, core::transparency::NodeReader read)>;
  // Runs `fn` on one consistent view of the tree: its size (the ledger's rows) and a reader of
  // its stored complete subtrees.
  virtual absl::Status ReadTree(const TreeFn& fn) = 0;
  // Stores a signed checkpoint. AlreadyExists if one of that size is stored (it stays).
  virtual absl::Status PutCheckpoint(const CheckpointRecord& checkpoint) = 0;
  // The stored checkpoint of `size` (0: the latest); NotFound if none.
  virtual absl::StatusOr<CheckpointRecord> GetCheckpoint(int64_t size) = 0;
  // The smallest stored checkpoint of at least `min_size` rows; NotFound if none.
  virtual absl::StatusOr<CheckpointRecord> CheckpointCovering(int64_t min_size) = 0;
  // Stores a witness's cosignature of the checkpoint of `size` rows, replacing the same
  // witness key's earlier cosignature of that size (a fresher timestamp).
  virtual absl::Status PutCosignature(const CosignatureRecord& cosignature) = 0;
  // The cosignatures of the checkpoint of `size` rows, by witness name.
  virtual absl::StatusOr<std::vector<CosignatureRecord>> ListCosignatures(int64_t size) = 0;
  // Sizes in [min_size, max_size] (max_size 0: no bound) of checkpoints with at least
  // `min_witnesses` cosignatures, ascending (or newest first), at most `limit` of them.
  virtual absl::StatusOr<std::vector<int64_t>> CosignedSizes(int64_t min_size, int64_t max_size,
                                                             int min_witnesses, bool newest_first,
                                                             int limit) = 0;
};

}  // namespace fairvault::server::storage

#endif  // FAIRVAULT_SERVER_STORAGE_STORE_H_
