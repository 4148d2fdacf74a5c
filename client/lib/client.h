// The C++ client a company (or the regulator, or an auditor) links: one method per RPC of
// fairvault.v1, each returning absl::StatusOr, plus chunking helpers for the two uploads.
#ifndef FAIRVAULT_CLIENT_LIB_CLIENT_H_
#define FAIRVAULT_CLIENT_LIB_CLIENT_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "fairvault/v1/auditor.grpc.pb.h"
#include "fairvault/v1/company.grpc.pb.h"
#include "fairvault/v1/fairvault.pb.h"
#include "fairvault/v1/regulator.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace fairvault::client {

namespace v1 = ::fairvault::v1;

struct ClientOptions {
  // gRPC target, e.g. "127.0.0.1:50051" or "dns:///vault.example:443".
  std::string target = "127.0.0.1:50051";
  // Bearer API key ("fv_..."), sent as "authorization: Bearer <key>" on every call. May be
  // empty only for calls the server lets through unauthenticated (none today).
  std::string api_key;
  // Per-call deadline in seconds (finite, > 0). Uploads of large tables need minutes.
  double deadline_seconds = 600;
  // Largest message sent or received, in bytes (> 0).
  int max_message_bytes = 64 << 20;
  // PEM root certificates: non-empty selects TLS with these roots; empty means an insecure
  // (plaintext) channel, fine on loopback or inside a private network only.
  std::string root_cert_pem;
  // With TLS: override the name checked against the server certificate (tests, IP targets).
  std::string tls_server_name_override;

  absl::Status Validate() const;
};

// The one mapping from gRPC status to absl::Status: same code (the numeric values agree),
// same message, marked as the vault's (IsFromVault).
absl::Status FromGrpcStatus(const grpc::Status& status);
// True when `status` is an RPC's status (the vault's answer, or gRPC's own: UNAVAILABLE,
// DEADLINE_EXCEEDED), false when the client library or the caller made it (local input).
bool IsFromVault(const absl::Status& status);
// `status` with another message, keeping its code and payloads (IsFromVault, replays).
absl::Status WithMessage(const absl::Status& status, absl::string_view message);

// The trailing metadata entry a replayed spending response carries (proto `Charge`): the
// ledger seq of the original release, in decimal.
inline constexpr char kReplayedLedgerSeqMetadata[] = "fairvault-replayed-ledger-seq";

// What a spending call's trailing metadata said, beside its response.
struct CallInfo {
  // The ledger seq of the stored release (or stored failure) the vault returned again for a
  // reused idempotency key: nothing was charged by this call, and the response's
  // charge.budget_after is as of that seq. 0 for a fresh call.
  int64_t replayed_ledger_seq = 0;
};
// The replayed ledger seq a failed spending call's status carries (the vault returned a
// stored failure again, charging nothing), or 0.
int64_t ReplayedLedgerSeq(const absl::Status& status);
// The idempotency key a failed spending call was sent with ("" for a call that sends none):
// after a failure that may have come after the charge, the key that gets its outcome.
std::string SentIdempotencyKey(const absl::Status& status);

// Rows per Decide call used by Client::DecideInChunks unless told otherwise: about 15 MB of
// request with 64-character pseudonyms, well under the default message limit.
inline constexpr size_t kDecideChunkRows = 200000;
// Table rows per Decide call by table_handle (Client::DecideTable): the server's limit, 32 MB
// of outputs and no keys.
inline constexpr size_t kDecideTableChunkRows = 4000000;

// The outcome of Client::DecideInChunks: the calls' outputs concatenated.
struct DecideResult {
  // One post-processed output per input row, in input order.
  std::vector<double> outputs;
  // The largest decision_log_ratio_bound any call reported (all calls read the same artifact,
  // so they agree); +inf when some output is possible for one group and not another.
  double decision_log_ratio_bound = 0;
  // The access-log row of each call, in call order.
  std::vector<int64_t> access_log_seqs;
  // The artifact's decision licence (charged once, on its first Decide).
  v1::Charge licence;
  // Whether one of these calls charged it (false: an earlier Decide had).
  bool licence_charged = false;
  // Rows whose subject had already been decided by the artifact (stored decision returned).
  int64_t rows_already_decided = 0;
};

// The next chunk of a streamed upload: fills `chunk` and returns true, returns false after the
// last chunk, or an error. An error cancels the call, so the server stores nothing.
template <typename Chunk>
using ChunkProducer = std::function<absl::StatusOr<bool>(Chunk*)>;

// A connection to the vault. Thread-safe: calls may run concurrently from many threads.
class Client {
 public:
  // Validates the options and creates the channel (connection happens lazily on the first
  // call; an unreachable server shows up as UNAVAILABLE then).
  static absl::StatusOr<std::unique_ptr<Client>> Create(const ClientOptions& options);
  // Uses an existing channel (e.g. a server's InProcessChannel in tests); the options'
  // target and credentials are ignored.
  static absl::StatusOr<std::unique_ptr<Client>> CreateWithChannel(
      std::shared_ptr<grpc::Channel> channel, const ClientOptions& options);

  // --- RegulatorService (regulator role) ---
  absl::StatusOr<v1::CreateDatasetResponse> CreateDataset(const v1::CreateDatasetRequest& req);
  absl::StatusOr<v1::ListDatasetsResponse> ListDatasets(const v1::ListDatasetsRequest& req = {});
  absl::StatusOr<v1::DeleteDatasetResponse> DeleteDataset(const v1::DeleteDatasetRequest& req);
  // Streams the header, then rows in chunks of at most `chunk_rows` subjects:
  // `categories_row_major` holds keys.size() × header.attributes_size() labels, row by row.
  // InvalidArgument (before anything is sent) on a size mismatch or chunk_rows == 0.
  absl::StatusOr<v1::ImportAttributesResponse> ImportAttributes(
      const v1::ImportHeader& header, const std::vector<std::string>& keys,
      const std::vector<std::string>& categories_row_major, size_t chunk_rows = 20000);
  // Streams the header, the chunks `next` produces (any size; the rows of a chunk), then the
  // StreamEnd with the counts sent. All or nothing on the server: an error from `next`, a
  // cancelled call or a passed deadline stores nothing, and the same call can be repeated.
  // DataLoss if the server reports storing a different number of rows than were sent.
  absl::StatusOr<v1::ImportAttributesResponse> ImportAttributesStream(
      const v1::ImportHeader& header, const ChunkProducer<v1::SubjectRows>& next);
  absl::StatusOr<v1::CreateAccountResponse> CreateAccount(const v1::CreateAccountRequest& req);
  absl::StatusOr<v1::ListAccountsResponse> ListAccounts(const v1::ListAccountsRequest& req = {});
  absl::StatusOr<v1::GrantBudgetResponse> GrantBudget(const v1::GrantBudgetRequest& req);
  absl::StatusOr<v1::SetDatasetCapResponse> SetDatasetCap(const v1::SetDatasetCapRequest& req);
  absl::StatusOr<v1::VerifyLedgerResponse> VerifyLedger(const v1::VerifyLedgerRequest& req = {});

  // --- CompanyService (company role) ---
  // Spending calls take an optional `info`, filled in on success and on failure (a replay is
  // also marked on a failed call's status: ReplayedLedgerSeq).

  // Streams the header, then chunks of at most `chunk_rows` rows; each chunk carries that
  // row range of every column. `columns[c]` holds column c of header.columns(): `numeric`
  // values for numeric columns, `categorical` for categorical ones, keys.size() of them.
  // InvalidArgument (before anything is sent) on a count or type mismatch.
  absl::StatusOr<v1::UploadTableResponse> UploadTable(const v1::TableHeader& header,
                                                      const std::vector<std::string>& keys,
                                                      const std::vector<v1::ColumnValues>& columns,
                                                      size_t chunk_rows = 20000);
  // Streams a table chunk by chunk, as ImportAttributesStream.
  absl::StatusOr<v1::UploadTableResponse> UploadTableStream(
      const v1::TableHeader& header, const ChunkProducer<v1::TableChunk>& next);
  absl::StatusOr<v1::NoisyCountsResponse> NoisyCounts(const v1::NoisyCountsRequest& req,
                                                      CallInfo* info = nullptr);
  absl::StatusOr<v1::FitEqualizedOddsResponse> FitEqualizedOddsPostProcessor(
      const v1::FitEqualizedOddsRequest& req, CallInfo* info = nullptr);
  absl::StatusOr<v1::FitStatisticalParityResponse> FitStatisticalParityPostProcessor(
      const v1::FitStatisticalParityRequest& req, CallInfo* info = nullptr);
  absl::StatusOr<v1::FitEqualizedOddsScoresResponse> FitEqualizedOddsScoresPostProcessor(
      const v1::FitEqualizedOddsScoresRequest& req, CallInfo* info = nullptr);
  // One spending call each: a whole fairness report as one composed release.
  absl::StatusOr<v1::AuditClassifierResponse> AuditClassifier(const v1::AuditClassifierRequest& req,
                                                              CallInfo* info = nullptr);
  absl::StatusOr<v1::AuditRegressorResponse> AuditRegressor(const v1::AuditRegressorRequest& req,
                                                            CallInfo* info = nullptr);
  // One Decide call as is (the server caps the rows per call; see DecideInChunks).
  absl::StatusOr<v1::DecideResponse> Decide(const v1::DecideRequest& req);
  // Decisions for any number of rows: consecutive calls of at most `chunk_rows` rows each,
  // outputs concatenated in row order. Every call is one access-log row on the server.
  // InvalidArgument (before anything is sent) when keys and values differ in length, there
  // are no rows, or chunk_rows == 0. If a later call fails, the error keeps its code and says
  // how many rows were already decided (and logged) by the earlier calls.
  absl::StatusOr<DecideResult> DecideInChunks(const std::string& artifact_id,
                                              const std::vector<std::string>& keys,
                                              const std::vector<double>& values,
                                              size_t chunk_rows = kDecideChunkRows);
  // Decisions for every row of a table the caller uploaded against the artifact's dataset, the
  // inputs read from its numeric column `value_column`: consecutive calls by table_handle of at
  // most `chunk_rows` rows (at most kDecideTableChunkRows), outputs in table row order. No key
  // is sent: the vault joined them at upload. Errors as DecideInChunks's.
  absl::StatusOr<DecideResult> DecideTable(const std::string& artifact_id,
                                           const std::string& table_handle,
                                           const std::string& value_column,
                                           size_t chunk_rows = kDecideTableChunkRows);
  // The same in bounded memory: `take` receives each call's response with the table row its
  // first output belongs to; the result's `outputs` stay empty.
  absl::StatusOr<DecideResult> DecideTableStream(
      const std::string& artifact_id, const std::string& table_handle,
      const std::string& value_column, size_t chunk_rows,
      const std::function<absl::Status(const v1::DecideResponse&, int64_t first_row)>& take);
  // The same in bounded memory: `next` fills each call's subject_keys and values, or its
  // table_handle, value_column, first_row and row_count (it returns false when there are no
  // more rows), `take` receives each call's response in order. The
  // result's `outputs` stay empty. If a later call fails, the error says as DecideInChunks's.
  absl::StatusOr<DecideResult> DecideStream(
      const std::string& artifact_id,
      const std::function<absl::StatusOr<bool>(v1::DecideRequest*)>& next,
      const std::function<absl::Status(const v1::DecideResponse&)>& take);
  // A private best response to the auditor's λ: one charged release, a FairModel artifact.
  absl::StatusOr<v1::BestResponseResponse> BestResponse(const v1::BestResponseRequest& req,
                                                        CallInfo* info = nullptr);
  // The per-cell feature sums of a least-squares game, one charged release; BestResponse with
  // its key as sums_key is then free.
  absl::StatusOr<v1::CellSumsResponse> ReleaseCellSums(const v1::CellSumsRequest& req,
                                                       CallInfo* info = nullptr);
  // Submits a managed learner: charged at submission; returns the QUEUED job (poll GetJob).
  absl::StatusOr<v1::FitFairModelResponse> FitFairModel(const v1::FitFairModelRequest& req,
                                                        CallInfo* info = nullptr);
  // The caller's own training jobs.
  absl::StatusOr<v1::GetJobResponse> GetJob(const v1::GetJobRequest& req);
  absl::StatusOr<v1::ListJobsResponse> ListJobs(const v1::ListJobsRequest& req = {});
  // Stops a queued or running job of the caller's; its charge stays.
  absl::StatusOr<v1::CancelJobResponse> CancelJob(const v1::CancelJobRequest& req);
  absl::StatusOr<v1::GetArtifactResponse> GetArtifact(const v1::GetArtifactRequest& req);
  absl::StatusOr<v1::GetBudgetResponse> GetBudget(const v1::GetBudgetRequest& req = {});
  // The caller's own ledger rows.
  absl::StatusOr<v1::ListLedgerResponse> ListLedger(const v1::ListLedgerRequest& req = {});
  // What a spending request would charge and how noisy it would be; charges nothing.
  absl::StatusOr<v1::PreviewReleaseResponse> PreviewRelease(const v1::PreviewReleaseRequest& req);

  // --- AuditorService (auditor and regulator roles) ---
  absl::StatusOr<v1::ListLedgerResponse> AuditorListLedger(const v1::ListLedgerRequest& req = {});
  absl::StatusOr<v1::ListBudgetsResponse> AuditorListBudgets(
      const v1::ListBudgetsRequest& req = {});
  absl::StatusOr<v1::VerifyLedgerResponse> AuditorVerifyLedger(
      const v1::VerifyLedgerRequest& req = {});
  // Every Decide call of every company (or one, with req.company), oldest first.
  absl::StatusOr<v1::ListAccessLogResponse> AuditorListAccessLog(
      const v1::ListAccessLogRequest& req = {});
  // Any company's training job, and every company's jobs (or one, with req.company), newest
  // first.
  absl::StatusOr<v1::GetJobResponse> AuditorGetJob(const v1::GetJobRequest& req);
  absl::StatusOr<v1::ListJobsResponse> AuditorListJobs(const v1::ListJobsRequest& req = {});

  // --- the transparency log, through CompanyService or (auditor = true) AuditorService ---
  absl::StatusOr<v1::GetCheckpointResponse> GetCheckpoint(const v1::GetCheckpointRequest& req,
                                                          bool auditor);
  absl::StatusOr<v1::GetReceiptResponse> GetReceipt(const v1::GetReceiptRequest& req,
                                                    bool auditor);
  absl::StatusOr<v1::GetConsistencyProofResponse> GetConsistencyProof(
      const v1::GetConsistencyProofRequest& req, bool auditor);
  absl::StatusOr<v1::AddCosignatureResponse> AddCosignature(const v1::AddCosignatureRequest& req);

  // The gRPC target this client connects to (as given in the options).
  const std::string& target() const { return options_.target; }

  // --- grpc.health.v1.Health (the standard health protocol; no API key needed) ---
  // The serving status of `service`: "" asks about the server as a whole, and the vault also
  // answers for each of its services by full name ("fairvault.v1.CompanyService"). NotFound
  // when the server does not know the name, Unavailable when it cannot be reached.
  absl::StatusOr<grpc::health::v1::HealthCheckResponse::ServingStatus> CheckHealth(
      const std::string& service = "");

 private:
  Client(std::shared_ptr<grpc::Channel> channel, const ClientOptions& options);
  // A context carrying the deadline and the authorization metadata.
  std::unique_ptr<grpc::ClientContext> NewContext() const;

  ClientOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::RegulatorService::Stub> regulator_;
  std::unique_ptr<v1::CompanyService::Stub> company_;
  std::unique_ptr<v1::AuditorService::Stub> auditor_;
  std::unique_ptr<grpc::health::v1::Health::Stub> health_;
};

}  // namespace fairvault::client

#endif  // FAIRVAULT_CLIENT_LIB_CLIENT_H_
