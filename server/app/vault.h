// The vault's use-cases, free of gRPC types: the regulator's administration, the company's
// tables and private releases, and read-only views for auditors. Requests and responses are
// the fairvault.v1 messages; protected data stays inside and leaves only through a charged
// mechanism (see docs/privacy.md).
#ifndef FAIRVAULT_SERVER_APP_VAULT_H_
#define FAIRVAULT_SERVER_APP_VAULT_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/random/bit_gen_ref.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/accounting/accountant.h"
#include "core/dp/integer_noise.h"
#include "core/postprocess/equalized_odds.h"
#include "core/postprocess/statistical_parity.h"
#include "core/transparency/note.h"
#include "fairvault/v1/fairvault.pb.h"
#include "server/app/caller.h"
#include "server/app/chunk_source.h"
#include "server/app/company_table.h"
#include "server/app/finish_gate.h"
#include "server/util/clock.h"
#include "server/jobs/job_runner.h"
#include "server/app/postprocess/decision_table.h"
#include "server/metrics/metrics.h"
#include "server/app/subject_index.h"
#include "server/storage/records.pb.h"
#include "server/storage/store.h"

namespace fairvault::core::learn {
struct GameData;
struct ValidationRows;
}  // namespace fairvault::core::learn

namespace fairvault::server {

namespace v1 = ::fairvault::v1;

struct VaultOptions {
  // Upper bound on rows per imported batch or uploaded table.
  int64_t max_rows = 20'000'000;
  // Tables kept parsed in memory: at most this many, and evicted (least recently used first)
  // while their estimated bytes (parsed columns, joins, dictionaries) exceed the budget. The
  // table a request uses is kept whatever its size.
  int table_cache_size = 4;
  int64_t table_cache_bytes = int64_t{2} << 30;
  // Training jobs: worker threads, jobs queued or running at once in the store, whichever
  // process (replica) runs them (a submission beyond it is refused inside its charge
  // transaction, nothing charged; set it alike on every replica), rows x features of one job,
  // rounds of one job.
  int job_workers = 1;
  // How long a job's claim lasts unrenewed: a job whose process died is taken over by another
  // process (or the restarted one) after at most this long.
  int64_t job_lease_micros = 30'000'000;
  int max_pending_jobs = 16;
  // Post-processings after a charge (PreparedRelease::finish: LPs, the audits' bootstrap) that
  // run at once in this process; more wait for a slot, and retries of one release wait for
  // its finish.
  int max_concurrent_finishes = 2;
  int64_t max_job_cells = 200'000'000;
  int max_job_rounds = 100'000;
  // The operators' metrics (not owned; must outlive the vault), or null for none.
  Metrics* metrics = nullptr;
  // The transparency log's signing key (issue 25); none: no checkpoint is signed, and the
  // log's RPCs say so (the tree is kept all the same).
  std::optional<core::transparency::NoteSigner> log_signer;
  // The witnesses whose cosignatures the vault stores (cosignature/v1 keys), and how many of
  // them must cosign a checkpoint before receipts cite it (0: receipts cite any checkpoint).
  std::vector<core::transparency::NoteVerifier> witnesses;
  int witness_quorum = 0;
  absl::Status Validate() const;
};

// The most table rows one Decide by table_handle decides: 32 MB of outputs, within the server's
// 64 MiB message limit whatever the table's size (checked before anything is charged).
inline constexpr int64_t kMaxDecideTableRows = 4'000'000;
// How often a release redoes a table's join that imports keep making stale before it answers
// UNAVAILABLE.
inline constexpr int kJoinAttempts = 8;

// Joint groups over some of a dataset's attributes: code = mixed radix over the chosen
// attributes, first attribute most significant.
struct GroupSpec {
  std::vector<int> attribute_index;  // into the dataset's attributes
  std::vector<int> radix;            // category count of each chosen attribute
  int num_groups = 0;
  std::vector<std::string> group_labels;  // "Female" or "Female|White"
  std::vector<std::string> attributes;    // names of the chosen attributes
  // The joint group of row `subject` of an index.
  int GroupOf(const SubjectIndex& index, int64_t subject) const {
    int g = 0;
    for (size_t i = 0; i < attribute_index.size(); ++i) {
      g = g * radix[i] + index.Code(subject, attribute_index[i]);
    }
    return g;
  }
};

// Resolves attribute names (empty: all of them) against a dataset's attributes.
absl::StatusOr<GroupSpec> ResolveGroups(
    const std::vector<v1::Attribute>& all, const std::string& dataset_name,
    const google::protobuf::RepeatedPtrField<std::string>& names);

// A table joined with the vault: the rows whose keys are subjects, and each row's joint group.
struct JoinedRows : GroupSpec {
  std::vector<int64_t> table_rows;  // indices into the stored table
  std::vector<int> group;           // joint group code per used row
  int64_t dropped = 0;
  int64_t subjects = 0;  // subjects in the dataset's index when joined
};

class Vault {
 public:
  // `gen` is the secure generator in production; it must outlive the vault and be safe to
  // share across threads.
  Vault(storage::Store* store, const Clock* clock, absl::BitGenRef gen, VaultOptions options = {});

  // --- accounts and keys ---------------------------------------------------------------------
  // Creates an account of any role and returns its API key (shown once). Used by the
  // regulator's CreateAccount and by the server's bootstrap command.
  absl::StatusOr<v1::CreateAccountResponse> CreateAccountUnchecked(const std::string& name,
                                                                   storage::Role role);
  // The caller a bearer key belongs to; Unauthenticated for a malformed or wrong key.
  absl::StatusOr<Caller> Authenticate(const std::string& api_key);

  // --- regulator -----------------------------------------------------------------------------
  absl::StatusOr<v1::CreateDatasetResponse> CreateDataset(const Caller& caller,
                                                          const v1::CreateDatasetRequest& req);
  absl::StatusOr<v1::ListDatasetsResponse> ListDatasets(const Caller& caller);
  absl::StatusOr<v1::DeleteDatasetResponse> DeleteDataset(const Caller& caller,
                                                          const v1::DeleteDatasetRequest& req);
  // Reads the whole stream, validates it, and stores it only if it ended cleanly and the caller
  // is still live: a broken stream stores nothing.
  absl::StatusOr<v1::ImportAttributesResponse> ImportAttributes(
      const Caller& caller, const v1::ImportHeader& header,
      const ChunkSource<v1::SubjectRows>& stream);
  absl::StatusOr<v1::CreateAccountResponse> CreateAccount(const Caller& caller,
                                                          const v1::CreateAccountRequest& req);
  absl::StatusOr<v1::ListAccountsResponse> ListAccounts(const Caller& caller);
  absl::StatusOr<v1::GrantBudgetResponse> GrantBudget(const Caller& caller,
                                                      const v1::GrantBudgetRequest& req);
  absl::StatusOr<v1::SetDatasetCapResponse> SetDatasetCap(const Caller& caller,
                                                          const v1::SetDatasetCapRequest& req);
  absl::StatusOr<v1::VerifyLedgerResponse> VerifyLedger(const Caller& caller);

  // --- company -------------------------------------------------------------------------------
  // All or nothing, as ImportAttributes.
  absl::StatusOr<v1::UploadTableResponse> UploadTable(const Caller& caller,
                                                      const v1::TableHeader& header,
                                                      const ChunkSource<v1::TableChunk>& stream);
  absl::StatusOr<v1::NoisyCountsResponse> NoisyCounts(const Caller& caller,
                                                      const v1::NoisyCountsRequest& req);
  absl::StatusOr<v1::FitEqualizedOddsResponse> FitEqualizedOdds(
      const Caller& caller, const v1::FitEqualizedOddsRequest& req);
  absl::StatusOr<v1::FitStatisticalParityResponse> FitStatisticalParity(
      const Caller& caller, const v1::FitStatisticalParityRequest& req);
  // Equalized odds from scores (issue 8 §6; vault_eo_scores.cc).
  absl::StatusOr<v1::FitEqualizedOddsScoresResponse> FitEqualizedOddsScores(
      const Caller& caller, const v1::FitEqualizedOddsScoresRequest& req);
  absl::StatusOr<v1::AuditClassifierResponse> AuditClassifier(
      const Caller& caller, const v1::AuditClassifierRequest& req);
  absl::StatusOr<v1::AuditRegressorResponse> AuditRegressor(const Caller& caller,
                                                            const v1::AuditRegressorRequest& req);
  // Applies the caller's attribute-aware artifact to subjects in the vault; logged, not charged.
  absl::StatusOr<v1::DecideResponse> Decide(const Caller& caller, const v1::DecideRequest& req);
  // Fair models without the attribute (issue 9; vault_models.cc, vault_jobs.cc).
  absl::StatusOr<v1::BestResponseResponse> BestResponse(const Caller& caller,
                                                        const v1::BestResponseRequest& req);
  // The per-cell feature sums and counts of a least-squares game, released once (issue 22 §1):
  // BestResponse with their key (sums_key) is then post-processing (cell_sums.cc).
  absl::StatusOr<v1::CellSumsResponse> ReleaseCellSums(const Caller& caller,
                                                       const v1::CellSumsRequest& req);
  absl::StatusOr<v1::FitFairModelResponse> FitFairModel(const Caller& caller,
                                                        const v1::FitFairModelRequest& req);
  // Companies see their own jobs; auditors and the regulator see all.
  absl::StatusOr<v1::GetJobResponse> GetJob(const Caller& caller, const v1::GetJobRequest& req);
  absl::StatusOr<v1::ListJobsResponse> ListJobs(const Caller& caller,
                                                const v1::ListJobsRequest& req);
  // The owning company only.
  absl::StatusOr<v1::CancelJobResponse> CancelJob(const Caller& caller,
                                                  const v1::CancelJobRequest& req);
  // Starts the job workers (re-queueing jobs a previous process left unfinished). The server
  // calls it once after construction; tests that run jobs call it too.
  absl::Status StartJobs();

  // How many best-response games (XᵀX and its factorization) were built: the a-free part is
  // reused by the next BestResponse on the same table, rows, columns and preprocessing, whatever
  // its attributes and groups (which every call regroups). For tests.
  int64_t GamesBuilt() const;
  absl::StatusOr<v1::GetArtifactResponse> GetArtifact(const Caller& caller,
                                                      const v1::GetArtifactRequest& req);
  absl::StatusOr<v1::GetBudgetResponse> GetBudget(const Caller& caller,
                                                  const v1::GetBudgetRequest& req);
  // Companies see their own rows; auditors and the regulator see any.
  // Prices a spending request without charging it (docs/privacy.md, "Previews").
  absl::StatusOr<v1::PreviewReleaseResponse> PreviewRelease(const Caller& caller,
                                                            const v1::PreviewReleaseRequest& req);
  absl::StatusOr<v1::ListLedgerResponse> ListLedger(const Caller& caller,
                                                    const v1::ListLedgerRequest& req);

  // --- the transparency log (companies for their own rows, auditors and the regulator) -------
  absl::StatusOr<v1::GetCheckpointResponse> GetCheckpoint(const Caller& caller,
                                                          const v1::GetCheckpointRequest& req);
  absl::StatusOr<v1::GetReceiptResponse> GetReceipt(const Caller& caller,
                                                    const v1::GetReceiptRequest& req);
  absl::StatusOr<v1::GetConsistencyProofResponse> GetConsistencyProof(
      const Caller& caller, const v1::GetConsistencyProofRequest& req);
  // Stores the cosignatures of listed witnesses on a stored checkpoint (auditors).
  absl::StatusOr<v1::AddCosignatureResponse> AddCosignature(const Caller& caller,
                                                            const v1::AddCosignatureRequest& req);
  // Signs and stores a checkpoint of the whole ledger unless the latest stored one is of it
  // already; returns that latest checkpoint. FailedPrecondition without a log key.
  absl::StatusOr<storage::CheckpointRecord> CheckpointNow();
  // The checkpoint as served: its note with the stored cosignatures appended.
  absl::StatusOr<v1::Checkpoint> ServedCheckpoint(const storage::CheckpointRecord& record);
  // The smallest (or newest) stored checkpoint of at least `min_size` rows that the quorum of
  // listed witnesses has cosigned; FailedPrecondition if none.
  absl::StatusOr<storage::CheckpointRecord> WitnessedCheckpoint(int64_t min_size, bool newest);
  // The server's checkpointer, every second: signs a checkpoint when the ledger grew by
  // `every_rows` rows since the latest, or grew at all and the latest is `every_micros` old.
  // Returns whether it signed one.
  absl::StatusOr<bool> CheckpointIfDue(int64_t every_rows, int64_t every_micros);

  // --- auditor -------------------------------------------------------------------------------
  absl::StatusOr<v1::ListBudgetsResponse> ListBudgets(const Caller& caller,
                                                      const v1::ListBudgetsRequest& req);
  absl::StatusOr<v1::ListAccessLogResponse> ListAccessLog(const Caller& caller,
                                                          const v1::ListAccessLogRequest& req);

  // For tests: the gate of post-processing after charges, to see who waits in it.
  FinishGate& finish_gate_for_testing() { return finish_gate_; }

 private:
  struct IndexSlot {
    absl::Mutex mu;
    bool loaded ABSL_GUARDED_BY(mu) = false;
    std::unique_ptr<SubjectIndex> index ABSL_GUARDED_BY(mu);
  };
  // A company table kept in memory in compact form with what releases derive from it and
  // reuse: its join with the dataset's subject index (the keys are looked up once, not per
  // release, and not kept) and the dictionaries of the numeric columns releases cross.
  struct CachedTable {
    CachedTable(storage::TableRecord r, std::shared_ptr<const CompanyTable> t)
        : handle(r.handle), record(std::move(r)), table(std::move(t)) {}
    const std::string handle;
    // The store's record, payload cleared. Tables are never updated; they are removed when
    // they expire (purged) or with their dataset (whose read, on every call, then fails). So
    // until kTableRecordMarginMicros before expiry it stands in for reading the record again;
    // the margin covers clocks that differ between servers sharing one database, one of which
    // may purge the table by its own clock.
    const storage::TableRecord record;
    const std::shared_ptr<const CompanyTable> table;
    absl::Mutex mu;
    // Subject row of each table row (-1: not a subject), valid while the dataset's index has
    // `joined_subjects` subjects (imports only append, so a changed size means a stale join).
    std::shared_ptr<const std::vector<int32_t>> subject_of_row ABSL_GUARDED_BY(mu);
    int64_t joined_subjects ABSL_GUARDED_BY(mu) = -1;
    std::map<int, std::shared_ptr<const ColumnDictionary>> dictionaries ABSL_GUARDED_BY(mu);
    // The join's and the numeric dictionaries' arrays, kept up to date by whoever sets them
    // (read without `mu`, which a dictionary's build holds for long).
    std::atomic<int64_t> derived_bytes{0};
    // Sets the join (under `mu`), accounting for its bytes.
    void SetJoin(std::shared_ptr<const std::vector<int32_t>> join, int64_t subjects)
        ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
    int64_t Bytes() const { return table->Bytes() + derived_bytes.load(); }
  };
  // A company table resolved for a request: ownership and expiry checked, parsed.
  struct ResolvedTable {
    storage::TableRecord record;  // payload cleared
    storage::DatasetRecord dataset;
    std::vector<v1::Attribute> dataset_attributes;
    std::shared_ptr<const CompanyTable> table;
    std::shared_ptr<CachedTable> cached;  // holds `table`
  };
  // What a spending use-case hands to the common charge path.
  struct PreparedRelease {
    // A release of `req` (any request with an idempotency key and an epsilon) of this kind.
    template <typename Request>
    static PreparedRelease Of(std::string_view kind, const Request& req) {
      PreparedRelease release;
      release.request_kind = std::string(kind);
      release.idempotency_key = req.idempotency_key();
      release.request = &req;
      release.epsilon = req.epsilon();
      return release;
    }

    std::string request_kind;
    std::string idempotency_key;
    const google::protobuf::Message* request = nullptr;  // for the parameter digest
    int64_t dataset_id = 0;
    std::string dataset_name;
    double epsilon = 0;
    v1::NoiseKind noise = v1::NOISE_KIND_DISCRETE_LAPLACE;
    // The released integer vectors: each gets `share` of epsilon and noise calibrated to its
    // sensitivity (L1 for Laplace, L2 for Gaussian). Shares sum to 1; Gaussian releases have
    // exactly one part.
    struct Part {
      std::string name;
      double sensitivity = 0;
      double share = 1;
    };
    std::vector<Part> parts;
    // A pure epsilon-DP release without integer noise (parts empty): its mechanism's name.
    std::string mechanism;
    // A composition of several mechanisms whose cost the use-case computed with the
    // accountant (parts empty, mechanism set): charged as is, described by `composed_cost`
    // (delta: the grant's, at which the use-case calibrated).
    std::optional<core::accounting::PrivacyCost> composed;
    v1::Cost composed_cost;
    // Set by a fill that creates a training job: stored with the charge (ledger_seq filled in).
    std::optional<storage::JobRecord>* job_out = nullptr;
    // Set by ChargeAndRelease when it returns a response: whether it is one the store already
    // held under the key (a concurrent call, perhaps on another replica, charged it after this
    // call's Replay found nothing) rather than this call's own charge.
    bool* replayed_out = nullptr;
    // A release whose post-processing is long (an LP, a bootstrap): the fill stores the release
    // alone and returns no artifact; `finish` completes the response after the charge has
    // committed, outside the transaction every other charge waits for, and returns its
    // artifact (id, time and payload; the store adds account, dataset and ledger seq). It reads
    // only the response it is given and the request's parameters, never the data, so that a
    // retry after a crash (or a concurrent one) finishes the stored release the same way: its
    // output is post-processing of that release, whichever call stores it first.
    std::function<absl::StatusOr<std::optional<storage::ArtifactRecord>>(
        google::protobuf::Message* response)>
        finish;
    // Public sizes for a preview's accuracy: rows entering the release, protected groups.
    int64_t rows = 0;
    int64_t groups = 0;
    void SizesFrom(const JoinedRows& joined) {
      rows = static_cast<int64_t>(joined.table_rows.size());
      groups = joined.num_groups;
    }
  };
  using Noises = std::vector<std::unique_ptr<core::dp::IntegerNoise>>;
  // Fills a response (everything but `charge`) with the given noise, one per part; returns the
  // artifact to store with it, if any (none with PreparedRelease::finish). Runs inside the
  // charge transaction.
  template <typename Response>
  using ReleaseFill = std::function<absl::StatusOr<std::optional<storage::ArtifactRecord>>(
      const Noises& noises, int64_t ledger_seq, Response* response)>;

  // The stored response for (caller, key) if this is a replay; FailedPrecondition if the key
  // was used with other parameters. Checked before anything else so that a replay works even
  // after the table expired.
  template <typename Response>
  absl::StatusOr<std::optional<Response>> Replay(const Caller& caller,
                                                 const PreparedRelease& release);
  // A preview's answer, in place of a charge: cost, accuracy at the release's public sizes,
  // and what the privacy filter would say now (read-only). Returns the status that stops the
  // use-case (caller.outputs->priced tells PreviewRelease it is not an error).
  absl::Status Price(const Caller& caller, const PreparedRelease& release,
                     const storage::ChargeRequest& charge, const v1::Cost& cost);
  // A preview of a request whose key already holds a stored release (or failure).
  absl::Status PriceReplay(const Caller& caller, const PreparedRelease& release,
                           const storage::StoredResponse& stored, const v1::Cost& cost);
  // The one charge path: declared cost -> privacy filter -> release -> ledger + stored
  // response, atomically (storage::Store::Charge); then, for a release with a `finish`, its
  // post-processing and the finished response stored (FinishCharged).
  template <typename Response>
  absl::StatusOr<Response> ChargeAndRelease(const Caller& caller, const PreparedRelease& release,
                                            const ReleaseFill<Response>& fill);
  // Finishes a charged `pending` release (PreparedRelease::finish) and stores it; returns the
  // stored response (another call's, if it stored one first), or the charged failure stored.
  // Waits for the release's other finishes and a solve slot within `limit`: the caller's for
  // a retry, none for the call that charged (its finish runs whatever its client does).
  template <typename Response>
  absl::StatusOr<Response> FinishCharged(const Caller& caller, const PreparedRelease& release,
                                         Response pending, const WaitLimit& limit);

  absl::StatusOr<std::shared_ptr<IndexSlot>> LoadIndex(const storage::DatasetRecord& dataset);
  // `artifact_id`'s decisions by subject row of `slot`'s index, with every batch the store
  // holds (another process's included).
  absl::StatusOr<std::shared_ptr<DecisionTable>> Decisions(const std::string& artifact_id,
                                                           IndexSlot& slot)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(decide_mu_);
  absl::StatusOr<std::vector<v1::Attribute>> DatasetAttributes(
      const storage::DatasetRecord& dataset) const;
  // `allow_expired`: for a training job, whose table is kept until it finishes.
  absl::StatusOr<ResolvedTable> ResolveTable(const Caller& caller, const std::string& handle,
                                             bool allow_expired = false);
  // Keeps a table in the LRU table cache with its join and returns its entry.
  std::shared_ptr<CachedTable> CacheTable(storage::TableRecord record,
                                          std::shared_ptr<const CompanyTable> table,
                                          std::shared_ptr<const std::vector<int32_t>> join,
                                          int64_t joined_subjects);
  // Evicts least recently used tables, never `keep`, until the cache is within its table count
  // and byte budget, and reports its size to the metrics. Run whenever a cached table's bytes
  // grow: when it is cached, and when its join or a dictionary is (re)built.
  void TrimTableCache(const CachedTable* keep) ABSL_LOCKS_EXCLUDED(table_cache_mu_);
  void TrimTableCacheLocked(const CachedTable* keep) ABSL_EXCLUSIVE_LOCKS_REQUIRED(table_cache_mu_);
  // The dataset's subject count now.
  static int64_t IndexSize(IndexSlot& slot);
  // Appends the subject row of each key it is given (-1: not a subject) to *subject_of_row,
  // taking the index's read lock for each block of keys.
  static std::function<void(absl::Span<const absl::string_view>)> JoinInto(
      IndexSlot& slot, std::vector<int32_t>* subject_of_row);
  // Redoes a cached table's join, its keys read back from the store, if the dataset's index has
  // grown since it was made. Takes no lock across the read.
  absl::Status RefreshJoin(const ResolvedTable& table, IndexSlot& slot);
  // A cached table's join (the subject row of each table row, -1: not a subject) if it is
  // current for `index`, the dataset's index whose lock the caller holds; null if the index grew
  // since (then RefreshJoin again). DataLoss if the join does not cover the table.
  static absl::StatusOr<std::shared_ptr<const std::vector<int32_t>>> CurrentJoin(
      const ResolvedTable& table, const SubjectIndex& index);
  // The dictionary of column `column` of a resolved table (built on first use, then cached).
  std::shared_ptr<const ColumnDictionary> Dictionary(const ResolvedTable& table, int column);
  // A company's score column joined with the vault and binned on a public grid (the SP
  // post-processor and the regressor audit). Sets the release's dataset.
  struct ScoredRows {
    ResolvedTable table;
    JoinedRows joined;
    std::vector<double> scores;   // per joined row
    std::vector<int64_t> counts;  // exact (group, bin) histogram
    int64_t clipped = 0;          // scores outside [lo, hi]
  };
  // A company's 0/1 prediction and label columns joined with the vault, counted per (ŷ, group,
  // y) (the EO post-processor and the classifier audit). Sets the release's dataset and sizes.
  // A non-null `two_groups_needed` refuses fewer than two groups with that message, before the
  // columns' values are read.
  struct OutcomeRows {
    ResolvedTable table;
    JoinedRows joined;
    core::postprocess::EoCounts counts;  // exact
  };
  absl::StatusOr<OutcomeRows> LoadOutcomes(
      const Caller& caller, const std::string& handle, const std::string& prediction_column,
      const std::string& label_column,
      const google::protobuf::RepeatedPtrField<std::string>& attributes,
      v1::UnmatchedKeys unmatched, const char* two_groups_needed, PreparedRelease* release);
  absl::StatusOr<ScoredRows> LoadScores(
      const Caller& caller, const std::string& handle, const std::string& score_column,
      const google::protobuf::RepeatedPtrField<std::string>& attributes,
      v1::UnmatchedKeys unmatched, const core::postprocess::ScoreGrid& grid,
      PreparedRelease* release);
  // The artifact record and message, if the caller may read it.
  absl::StatusOr<v1::Artifact> LoadArtifact(const Caller& caller, const std::string& id);
  // `subject_limit` >= 0: subjects imported after the first `subject_limit` count as unmatched
  // (a training job re-run sees the vault as it was at submission).
  absl::StatusOr<JoinedRows> Join(const ResolvedTable& table,
                                  const google::protobuf::RepeatedPtrField<std::string>& attrs,
                                  v1::UnmatchedKeys unmatched, int64_t subject_limit = -1);
  absl::StatusOr<v1::Budget> BudgetView(int64_t account_id, const std::string& company,
                                        const storage::DatasetRecord& dataset);

  // Runs a claimed training job to its artifact (vault_models.cc): a function of the record
  // and stored data only.
  absl::StatusOr<storage::ArtifactRecord> RunJob(const storage::JobRecord& job,
                                                 JobControl& control);
  // The noisy group-label masses q̂ (cell 2a+y) of the caller's NoisyCounts release `key` over
  // [label_column] with the joined rows' attributes; InvalidArgument naming masses_key if it is
  // not such a release.
  absl::StatusOr<std::vector<double>> ReleasedMasses(const Caller& caller, const std::string& key,
                                                     const std::string& table_handle,
                                                     const std::string& label_column,
                                                     const JoinedRows& joined, double floor);
  // The a-free part of the least-squares game on the joined rows (XᵀX factorized, Xᵀ1{y}, the
  // feature grid): the last one when the table, rows, columns and preprocessing are the same
  // (whatever the groups), else built and kept for the next call (best_response.cc). Its
  // group-dependent fields are those of whichever call built it: a release regroups a copy.
  // `keep_rows`: the n x d matrix is needed (FTPL).
  absl::StatusOr<std::shared_ptr<const core::learn::GameData>> LeastSquaresGame(
      const ResolvedTable& table, const JoinedRows& joined,
      const google::protobuf::RepeatedPtrField<std::string>& feature_columns,
      const std::string& label_column, double clip_l1, bool intercept, bool keep_rows);
  // The managed selection's validation rows (FitFairModel's validation_table_handle): the
  // caller's table on `dataset_id`, joined with the request's attributes (the training join's
  // K groups), its feature columns preprocessed as the training rows' and its 0/1 labels.
  // InvalidArgument naming validation_table_handle, feature_columns or label_column otherwise:
  // FitFairModel calls it before the charge, RunJob again at the run (fit_fair_model.cc).
  absl::StatusOr<core::learn::ValidationRows> LoadValidationRows(
      const Caller& owner, const v1::FitFairModelRequest& req, int64_t dataset_id, int k,
      int64_t subject_limit, bool allow_expired);
  // BestResponse from a ReleaseCellSums release (sums_key): charged 0 (cell_sums.cc).
  absl::StatusOr<v1::BestResponseResponse> BestResponseFromSums(const Caller& caller,
                                                                const v1::BestResponseRequest& req);
  // Queues a job whose charge has committed (vault_jobs.cc); FitFairModel calls it after
  // ChargeAndRelease returns, never inside the charge (a worker could claim a job not yet
  // committed and find nothing).
  void SubmitJob(const std::string& job_id);

  storage::Store* store_;
  const Clock* clock_;
  absl::BitGenRef gen_;
  VaultOptions options_;
  FinishGate finish_gate_;

  absl::Mutex import_mu_;  // serialises imports (check-then-append on the index)
  absl::Mutex checkpoint_mu_;  // one signer at a time in this process
  absl::Mutex decide_mu_;  // serialises decisions (one per artifact and subject)
  // The decisions of the most recently used artifacts (at most kDecisionTables), each up to
  // date with the store once Decisions() has read its new batches.
  static constexpr size_t kDecisionTables = 8;
  std::list<std::pair<std::string, std::shared_ptr<DecisionTable>>> decision_tables_
      ABSL_GUARDED_BY(decide_mu_);
  // Keys Authenticate checked against the store, by the SHA-256 of the whole key, each with
  // its account as read and the time it was read, reused for kAccountReuseMicros: no call
  // changes or removes an account, so a busy caller's key costs one read a second instead of
  // one a call, and a hash overwritten in the database (the emergency revocation in
  // docs/operations.md) stops the key within that second on every server. Only a key that
  // checked out is kept, so any other key is checked against the store on every call, whoever
  // else used its account.
  static constexpr int64_t kAccountReuseMicros = 1'000'000;
  struct KnownAccount {
    storage::AccountRecord record;
    int64_t read_micros;
  };
  absl::Mutex accounts_mu_;
  absl::flat_hash_map<std::string, KnownAccount> accounts_ ABSL_GUARDED_BY(accounts_mu_);
  size_t accounts_sweep_at_ ABSL_GUARDED_BY(accounts_mu_) = 64;
  absl::Mutex index_mu_;
  std::map<int64_t, std::shared_ptr<IndexSlot>> indexes_ ABSL_GUARDED_BY(index_mu_);
  static constexpr int64_t kTableRecordMarginMicros = 300'000'000;  // CachedTable::record
  absl::Mutex table_cache_mu_;
  std::list<std::pair<std::string, std::shared_ptr<CachedTable>>> table_cache_
      ABSL_GUARDED_BY(table_cache_mu_);
  // The last best response's game data (vault_models.cc), reused by the next call on the same
  // rows and columns.
  struct GameCache;
  static std::shared_ptr<GameCache> NewGameCache();
  std::shared_ptr<GameCache> game_cache_ = NewGameCache();
  // Declared last: destroyed first, so its workers stop before what they use goes away.
  std::unique_ptr<JobRunner> jobs_;
};

}  // namespace fairvault::server

#endif  // FAIRVAULT_SERVER_APP_VAULT_H_
