// gRPC service implementations: authenticate -> use-case -> status. No logic lives here.
#ifndef FAIRVAULT_SERVER_GRPC_SERVICES_H_
#define FAIRVAULT_SERVER_GRPC_SERVICES_H_

#include "absl/status/statusor.h"
#include "fairvault/v1/auditor.grpc.pb.h"
#include "fairvault/v1/company.grpc.pb.h"
#include "fairvault/v1/regulator.grpc.pb.h"
#include "server/metrics/metrics.h"
#include "server/app/vault.h"

namespace fairvault::server {

// Trailing metadata on a replayed spending response: the original ledger seq (decimal).
inline constexpr char kReplayedLedgerSeqMetadata[] = "fairvault-replayed-ledger-seq";

// The caller behind a call's bearer key ("authorization: Bearer fv_..."). The only place
// that reads credentials.
absl::StatusOr<Caller> AuthenticateCall(Vault& vault, const grpc::ServerContext& context);

class RegulatorServiceImpl final : public v1::RegulatorService::Service {
 public:
  explicit RegulatorServiceImpl(Vault* vault) : vault_(vault) {}
  grpc::Status CreateDataset(grpc::ServerContext* ctx, const v1::CreateDatasetRequest* req,
                             v1::CreateDatasetResponse* resp) override;
  grpc::Status ListDatasets(grpc::ServerContext* ctx, const v1::ListDatasetsRequest* req,
                            v1::ListDatasetsResponse* resp) override;
  grpc::Status DeleteDataset(grpc::ServerContext* ctx, const v1::DeleteDatasetRequest* req,
                             v1::DeleteDatasetResponse* resp) override;
  grpc::Status ImportAttributes(grpc::ServerContext* ctx,
                                grpc::ServerReader<v1::ImportAttributesRequest>* reader,
                                v1::ImportAttributesResponse* resp) override;
  grpc::Status CreateAccount(grpc::ServerContext* ctx, const v1::CreateAccountRequest* req,
                             v1::CreateAccountResponse* resp) override;
  grpc::Status ListAccounts(grpc::ServerContext* ctx, const v1::ListAccountsRequest* req,
                            v1::ListAccountsResponse* resp) override;
  grpc::Status GrantBudget(grpc::ServerContext* ctx, const v1::GrantBudgetRequest* req,
                           v1::GrantBudgetResponse* resp) override;
  grpc::Status SetDatasetCap(grpc::ServerContext* ctx, const v1::SetDatasetCapRequest* req,
                             v1::SetDatasetCapResponse* resp) override;
  grpc::Status VerifyLedger(grpc::ServerContext* ctx, const v1::VerifyLedgerRequest* req,
                            v1::VerifyLedgerResponse* resp) override;

 private:
  Vault* vault_;
};

class CompanyServiceImpl final : public v1::CompanyService::Service {
 public:
  // `metrics` (may be null) counts the spending calls' refusals.
  explicit CompanyServiceImpl(Vault* vault, Metrics* metrics = nullptr)
      : vault_(vault), metrics_(metrics) {}
  grpc::Status UploadTable(grpc::ServerContext* ctx,
                           grpc::ServerReader<v1::UploadTableRequest>* reader,
                           v1::UploadTableResponse* resp) override;
  grpc::Status NoisyCounts(grpc::ServerContext* ctx, const v1::NoisyCountsRequest* req,
                           v1::NoisyCountsResponse* resp) override;
  grpc::Status FitEqualizedOddsPostProcessor(grpc::ServerContext* ctx,
                                             const v1::FitEqualizedOddsRequest* req,
                                             v1::FitEqualizedOddsResponse* resp) override;
  grpc::Status FitStatisticalParityPostProcessor(grpc::ServerContext* ctx,
                                                 const v1::FitStatisticalParityRequest* req,
                                                 v1::FitStatisticalParityResponse* resp) override;
  grpc::Status FitEqualizedOddsScoresPostProcessor(
      grpc::ServerContext* ctx, const v1::FitEqualizedOddsScoresRequest* req,
      v1::FitEqualizedOddsScoresResponse* resp) override;
  grpc::Status AuditClassifier(grpc::ServerContext* ctx, const v1::AuditClassifierRequest* req,
                               v1::AuditClassifierResponse* resp) override;
  grpc::Status AuditRegressor(grpc::ServerContext* ctx, const v1::AuditRegressorRequest* req,
                              v1::AuditRegressorResponse* resp) override;
  grpc::Status Decide(grpc::ServerContext* ctx, const v1::DecideRequest* req,
                      v1::DecideResponse* resp) override;
  grpc::Status BestResponse(grpc::ServerContext* ctx, const v1::BestResponseRequest* req,
                            v1::BestResponseResponse* resp) override;
  grpc::Status ReleaseCellSums(grpc::ServerContext* ctx, const v1::CellSumsRequest* req,
                               v1::CellSumsResponse* resp) override;
  grpc::Status FitFairModel(grpc::ServerContext* ctx, const v1::FitFairModelRequest* req,
                            v1::FitFairModelResponse* resp) override;
  grpc::Status GetJob(grpc::ServerContext* ctx, const v1::GetJobRequest* req,
                      v1::GetJobResponse* resp) override;
  grpc::Status ListJobs(grpc::ServerContext* ctx, const v1::ListJobsRequest* req,
                        v1::ListJobsResponse* resp) override;
  grpc::Status CancelJob(grpc::ServerContext* ctx, const v1::CancelJobRequest* req,
                         v1::CancelJobResponse* resp) override;
  grpc::Status GetArtifact(grpc::ServerContext* ctx, const v1::GetArtifactRequest* req,
                           v1::GetArtifactResponse* resp) override;
  grpc::Status GetBudget(grpc::ServerContext* ctx, const v1::GetBudgetRequest* req,
                         v1::GetBudgetResponse* resp) override;
  grpc::Status ListLedger(grpc::ServerContext* ctx, const v1::ListLedgerRequest* req,
                          v1::ListLedgerResponse* resp) override;
  grpc::Status GetCheckpoint(grpc::ServerContext* ctx, const v1::GetCheckpointRequest* req,
                            v1::GetCheckpointResponse* resp) override;
  grpc::Status GetReceipt(grpc::ServerContext* ctx, const v1::GetReceiptRequest* req,
                          v1::GetReceiptResponse* resp) override;
  grpc::Status GetConsistencyProof(grpc::ServerContext* ctx,
                                   const v1::GetConsistencyProofRequest* req,
                                   v1::GetConsistencyProofResponse* resp) override;
  grpc::Status PreviewRelease(grpc::ServerContext* ctx, const v1::PreviewReleaseRequest* req,
                              v1::PreviewReleaseResponse* resp) override;

 private:
  Vault* vault_;
  Metrics* metrics_;
};

class AuditorServiceImpl final : public v1::AuditorService::Service {
 public:
  explicit AuditorServiceImpl(Vault* vault) : vault_(vault) {}
  grpc::Status ListLedger(grpc::ServerContext* ctx, const v1::ListLedgerRequest* req,
                          v1::ListLedgerResponse* resp) override;
  grpc::Status GetCheckpoint(grpc::ServerContext* ctx, const v1::GetCheckpointRequest* req,
                            v1::GetCheckpointResponse* resp) override;
  grpc::Status GetReceipt(grpc::ServerContext* ctx, const v1::GetReceiptRequest* req,
                          v1::GetReceiptResponse* resp) override;
  grpc::Status GetConsistencyProof(grpc::ServerContext* ctx,
                                   const v1::GetConsistencyProofRequest* req,
                                   v1::GetConsistencyProofResponse* resp) override;
  grpc::Status AddCosignature(grpc::ServerContext* ctx, const v1::AddCosignatureRequest* req,
                              v1::AddCosignatureResponse* resp) override;
  grpc::Status ListBudgets(grpc::ServerContext* ctx, const v1::ListBudgetsRequest* req,
                           v1::ListBudgetsResponse* resp) override;
  grpc::Status VerifyLedger(grpc::ServerContext* ctx, const v1::VerifyLedgerRequest* req,
                            v1::VerifyLedgerResponse* resp) override;
  grpc::Status ListAccessLog(grpc::ServerContext* ctx, const v1::ListAccessLogRequest* req,
                             v1::ListAccessLogResponse* resp) override;
  grpc::Status GetJob(grpc::ServerContext* ctx, const v1::GetJobRequest* req,
                      v1::GetJobResponse* resp) override;
  grpc::Status ListJobs(grpc::ServerContext* ctx, const v1::ListJobsRequest* req,
                        v1::ListJobsResponse* resp) override;

 private:
  Vault* vault_;
};

}  // namespace fairvault::server

#endif  // FAIRVAULT_SERVER_GRPC_SERVICES_H_
