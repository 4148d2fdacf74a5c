// Thin handlers: each authenticates, calls one use-case and maps the status.
#include "server/grpc/services.h"

#include <chrono>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/util/status_macros.h"
#include "server/grpc/message_stream.h"
#include "server/grpc/status.h"

namespace fairvault::server {
namespace {

// Runs `use_case(caller)` for an authenticated caller and moves its result into `resp`.
template <typename Response, typename UseCase>
absl::Status Run(Vault& vault, grpc::ServerContext* ctx, Response* resp, UseCase use_case) {
  absl::StatusOr<Caller> caller = AuthenticateCall(vault, *ctx);
  if (!caller.ok()) return caller.status();
  caller->wait_limit.deadline = absl::FromChrono(ctx->deadline());
  caller->wait_limit.cancelled = [ctx] { return ctx->IsCancelled(); };
  absl::StatusOr<Response> result = use_case(*caller);
  if (!result.ok()) return result.status();
  *resp = *std::move(result);
  return absl::OkStatus();
}

template <typename Response, typename UseCase>
grpc::Status Handle(Vault& vault, grpc::ServerContext* ctx, Response* resp, UseCase use_case) {
  return ToGrpcStatus(Run(vault, ctx, resp, std::move(use_case)));
}

// As Handle, for a spending call of request kind `kind`: a failure the charge path did not
// count (a charge, a replay or the privacy filter's refusal) is a refusal by its code, counted
// here for the operators' metrics.
// A replayed response (or stored failure) says so in trailing metadata, outside the stored
// bytes.
template <typename Response, typename UseCase>
grpc::Status HandleSpending(Vault& vault, Metrics* metrics, const char* kind,
                            grpc::ServerContext* ctx, Response* resp, UseCase use_case) {
  CallOutputs outputs;
  absl::Status status = Run(vault, ctx, resp, [&](const Caller& c) {
    Caller with_outputs = c;
    with_outputs.outputs = &outputs;
    return use_case(with_outputs);
  });
  if (metrics != nullptr && !status.ok() && !IsCounted(status)) {
    metrics->RecordRefusal(kind, RefusalFromCode(status.code()));
  }
  if (outputs.replayed_ledger_seq) {
    ctx->AddTrailingMetadata(kReplayedLedgerSeqMetadata,
                             absl::StrCat(*outputs.replayed_ledger_seq));
  }
  return ToGrpcStatus(status);
}

// Why a live call's stream stopped early, as the status the call ends with.
absl::Status StoppedEarly(const grpc::ServerContext& ctx, absl::string_view what) {
  if (ctx.deadline() <= std::chrono::system_clock::now()) {
    return absl::DeadlineExceededError(
        absl::StrCat("the call's deadline passed while ", what, "; nothing was stored"));
  }
  if (ctx.IsCancelled()) {
    return absl::CancelledError(
        absl::StrCat("the client cancelled the call while ", what, "; nothing was stored"));
  }
  return absl::OkStatus();
}

// The handler's side of a MessageStream: its reader, and its context's early stop.
template <typename Request, typename Chunk>
MessageStream<Request, Chunk> StreamOf(grpc::ServerContext* ctx,
                                       grpc::ServerReader<Request>* reader,
                                       bool (Request::*has)() const, Chunk* (Request::*mutable_chunk)()) {
  return MessageStream<Request, Chunk>(
      [reader](Request* message) { return reader->Read(message); },
      [ctx](absl::string_view what) { return StoppedEarly(*ctx, what); }, has, mutable_chunk);
}

}  // namespace

absl::StatusOr<Caller> AuthenticateCall(Vault& vault, const grpc::ServerContext& context) {
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  if (it == metadata.end()) {
    return absl::UnauthenticatedError(
        "missing API key; send metadata 'authorization: Bearer <key>'");
  }
  std::string value(it->second.data(), it->second.size());
  constexpr absl::string_view kBearer = "Bearer ";
  if (!absl::StartsWith(value, kBearer)) {
    return absl::UnauthenticatedError("authorization metadata must be 'Bearer <key>'");
  }
  return vault.Authenticate(value.substr(kBearer.size()));
}

// ---- regulator ---------------------------------------------------------------------------------

grpc::Status RegulatorServiceImpl::CreateDataset(grpc::ServerContext* ctx,
                                                 const v1::CreateDatasetRequest* req,
                                                 v1::CreateDatasetResponse* resp) {
  return Handle(*vault_, ctx, resp,
                [&](const Caller& c) { return vault_->CreateDataset(c, *req); });
}
grpc::Status RegulatorServiceImpl::ListDatasets(grpc::ServerContext* ctx,
                                                const v1::ListDatasetsRequest*,
                                                v1::ListDatasetsResponse* resp) {
  return Handle(*vault_, ctx, resp, [&](const Caller& c) { return vault_->ListDatasets(c); });
}
grpc::Status RegulatorServiceImpl::DeleteDataset(grpc::ServerContext* ctx,
                                                 const v1::DeleteDatasetRequest* req,
                                                 v1::DeleteDatasetResponse* resp) {
  return Handle(*vault_, ctx, resp,
                [&](const Caller& c) { return vault_->DeleteDataset(c, *req); });
}
grpc::Status RegulatorServiceImpl::ImportAttributes(
    grpc::ServerContext* ctx, grpc::ServerReader<v1::ImportAttributesRequest>* reader,
    v1::ImportAttributesResponse* resp) {
  return Handle(
      *vault_, ctx, resp, [&](const Caller& c) -> absl::StatusOr<v1::ImportAttributesResponse> {
        using Request = v1::ImportAttributesRequest;
        auto stream = StreamOf(ctx, reader, &Request::has_rows, &Request::mutable_rows);
        v1::ImportHeader header;
        RETURN_IF_ERROR(stream.ReadHeader(&header, &Request::has_header, &Request::mutable_header));
        return vault_->ImportAttributes(c, header, stream.Source());
      });
}
grpc::Status RegulatorServiceImpl::CreateAccount(grpc::ServerContext* ctx,
                                                 const v1::CreateAccountRequest* req,
                                                 v1::CreateAccountResponse* resp) {
  return Handle(*vault_, ctx, resp,
                [&](const Caller& c) { return vault_->CreateAccount(c, *req); });
}
grpc::Status RegulatorServiceImpl::ListAccounts(grpc::ServerContext* ctx,
                                                const v1::ListAccountsRequest*,
                                                v1::ListAccountsResponse* resp) {
  return Handle(*vault_, ctx, resp, [&](const Caller& c) { return vault_->ListAccounts(c); });
}
grpc::Status RegulatorServiceImpl::GrantBudget(grpc::ServerContext* ctx,
                                               const v1::GrantBudgetRequest* req,
                                               v1::GrantBudgetResponse* resp) {
  return Handle(*vault_, ctx, resp, [&](const Caller& c) { return vault_->GrantBudget(c, *req); });
}
grpc::Status RegulatorServiceImpl::SetDatasetCap(grpc::ServerContext* ctx,
                                                 const v1::SetDatasetCapRequest* req,
                                                 v1::SetDatasetCapResponse* resp) {
  return Handle(*vault_, ctx, resp,
                [&](const Caller& c) { return vault_->SetDatasetCap(c, *req); });
}
grpc::Status RegulatorServiceImpl::VerifyLedger(grpc::ServerContext* ctx,
                                                const v1::VerifyLedgerRequest*,
                                                v1::VerifyLedgerResponse* resp) {
  return Handle(*vault_, ctx, resp, [&](const Caller& c) { return vault_->VerifyLedger(c); });
}

// ---- company -----------------------------------------------------------------------------------

grpc::Status CompanyServiceImpl::UploadTable(grpc::ServerContext* ctx,
                                             grpc::ServerReader<v1::UploadTableRequest>* reader,
                                             v1::UploadTableResponse* resp) {
  return Handle(
      *vault_, ctx, resp, [&](const Caller& c) -> absl::StatusOr<v1::UploadTableResponse> {
        using Request = v1::UploadTableRequest;
        auto stream = StreamOf(ctx, reader, &Request::has_chunk, &Request::mutable_chunk);
        v1::TableHeader header;
        RETURN_IF_ERROR(stream.ReadHeader(&header, &Request::has_header, &Request::mutable_header));
        return vault_->UploadTable(c, header, stream.Source());
      });
}
grpc::Status CompanyServiceImpl::NoisyCounts(grpc::ServerContext* ctx,
                                             const v1::NoisyCountsRequest* req,
                                             v1::NoisyCountsResponse* resp) {
  return HandleSpending(*vault_, metrics_, "NoisyCounts", ctx, resp,
                        [&](const Caller& c) { return vault_->NoisyCounts(c, *req); });
}
grpc::Status CompanyServiceImpl::FitEqualizedOddsPostProcessor(
    grpc::ServerContext* ctx, const v1::FitEqualizedOddsRequest* req,
    v1::FitEqualizedOddsResponse* resp) {
  return HandleSpending(*vault_, metrics_, "FitEqualizedOddsPostProcessor", ctx, resp,
                        [&](const Caller& c) { return vault_->FitEqualizedOdds(c, *req); });
}
grpc::Status CompanyServiceImpl::FitStatisticalParityPostProcessor(
    grpc::ServerContext* ctx, const v1::FitStatisticalParityRequest* req,
    v1::FitStatisticalParityResponse* resp) {
  return HandleSpending(*vault_, metrics_, "FitStatisticalParityPostProcessor", ctx, resp,
                        [&](const Caller& c) { return vault_->FitStatisticalParity(c, *req); });
}
grpc::Status CompanyServiceImpl::FitEqualizedOddsScoresPostProcessor(
    grpc::ServerContext* ctx, const v1::FitEqualizedOddsScoresRequest* req,
    v1::FitEqualizedOddsScoresResponse* resp) {
  return HandleSpending(*vault_, metrics_, "FitEqualizedOddsScoresPostProcessor", ctx, resp,
                        [&](const Caller& c) { return vault_->FitEqualizedOddsScores(c, *req); });
}
grpc::Status CompanyServiceImpl::AuditClassifier(grpc::ServerContext* ctx,
                                                 const v1::AuditClassifierRequest* req,
                                                 v1::AuditClassifierResponse* resp) {
  return HandleSpending(*vault_, metrics_, "AuditClassifier", ctx, resp,
                        [&](const Caller& c) { return vault_->AuditClassifier(c, *req); });
}
grpc::Status CompanyServiceImpl::AuditRegressor(grpc::ServerContext* ctx,
                                                const v1::AuditRegressorRequest* req,
                                                v1::AuditRegressorResponse* resp) {
  return HandleSpending(*vault_, metrics_, "AuditRegressor", ctx, resp,
                        [&](const Caller& c) { return vault_->AuditRegressor(c, *req); });
}
grpc::Status CompanyServiceImpl::Decide(grpc::ServerContext* ctx, const v1::DecideRequest* req,
                                        v1::DecideResponse* resp) {
  return Handle(*vault_, ctx, resp, [&](const Caller& c) { return vault_->Decide(c, *req); });
}
grpc::Status CompanyServiceImpl::BestResponse(grpc::ServerContext* ctx,
                                              const v1::BestResponseRequest* req,
                                              v1::BestResponseResponse* resp) {
  return HandleSpending(*vault_, metrics_, "BestResponse", ctx, resp,
                        [&](const Caller& c) { return vault_->BestResponse(c, *req); });
}
grpc::Status CompanyServiceImpl::ReleaseCellSums(grpc::ServerContext* ctx,
                                                 const v1::CellSumsRequest* req,
                                                 v1::CellSumsResponse* resp) {
  return HandleSpending(*vault_, metrics_, "CellSums", ctx, resp,
                        [&](const Caller& c) { return vault_->ReleaseCellSums(c, *req); });
}
grpc::Status CompanyServiceImpl::FitFairModel(grpc::ServerContext* ctx,
                                              const v1::FitFairModelRequest* req,
                                              v1::FitFairModelResponse* resp) {
  return HandleSpending(*vault_, metrics_, "FitFairModel", ctx, resp,
                        [&](const Caller& c) { return vault_->FitFairModel(c, *req); });
}
// As ListLedger: CompanyService shows the caller's own jobs, AuditorService every company's.
grpc::Status CompanyServiceImpl::GetJob(grpc::ServerContext* ctx, const v1::GetJobRequest* req,
                                        v1::GetJobResponse* resp) {
  return Handle(*vault_, ctx, resp, [&](const Caller& c) -> absl::StatusOr<v1::GetJobResponse> {
    if (c.role != storage::Role::kCompany) {
      return absl::PermissionDeniedError("use AuditorService.GetJob for all companies' jobs");
    }
    return vault_->GetJob(c, *req);
  });
}
grpc::Status CompanyServiceImpl::ListJobs(grpc::ServerContext* ctx, const v1::ListJobsRequest* req,
                                          v1::ListJobsResponse* resp) {
  return Handle(*vault_, ctx, resp, [&](const Caller& c) -> absl::StatusOr<v1::ListJobsResponse> {
    if (c.role != storage::Role::kCompany) {
      return absl::PermissionDeniedError("use AuditorService.ListJobs for all companies' jobs");
    }
    return vault_->ListJobs(c, *req);
  });
}
grpc::Status CompanyServiceImpl::CancelJob(grpc::ServerContext* ctx,
                                           const v1::CancelJobRequest* req,
                                           v1::CancelJobResponse* resp) {
  return Handle(*vault_, ctx, resp, [&](const Caller& c) { return vault_->CancelJob(c, *req); });
}
grpc::Status CompanyServiceImpl::GetArtifact(grpc::ServerContext* ctx,
                                             const v1::GetArtifactRequest* req,
                                             v1::GetArtifactResponse* resp) {
  return Handle(*vault_, ctx, resp, [&](const Caller& c) { return vault_->GetArtifact(c, *req); });
}
grpc::Status CompanyServiceImpl::GetBudget(grpc::ServerContext* ctx,
                                           const v1::GetBudgetRequest* req,
                                           v1::GetBudgetResponse* resp) {
  return Handle(*vault_, ctx, resp, [&](const Caller& c) { return vault_->GetBudget(c, *req); });
}
grpc::Status CompanyServiceImpl::PreviewRelease(grpc::ServerContext* ctx,
                                                const v1::PreviewReleaseRequest* req,
                                                v1::PreviewReleaseResponse* resp) {
  return Handle(*vault_, ctx, resp,
                [&](const Caller& c) { return vault_->PreviewRelease(c, *req); });
}
grpc::Status CompanyServiceImpl::ListLedger(grpc::ServerContext* ctx,
                                            const v1::ListLedgerRequest* req,
                                            v1::ListLedgerResponse* resp) {
  return Handle(*vault_, ctx, resp, [&](const Caller& c) -> absl::StatusOr<v1::ListLedgerResponse> {
    if (c.role != storage::Role::kCompany) {
      return absl::PermissionDeniedError("use AuditorService.ListLedger for all companies' rows");
    }
    return vault_->ListLedger(c, *req);
  });
}

grpc::Status CompanyServiceImpl::GetCheckpoint(grpc::ServerContext* ctx,
                                       const v1::GetCheckpointRequest* req,
                                       v1::GetCheckpointResponse* resp) {
  return Handle(*vault_, ctx, resp,
                [&](const Caller& c) -> absl::StatusOr<v1::GetCheckpointResponse> {
                  if (c.role != storage::Role::kCompany) {
      return absl::PermissionDeniedError("auditors and the regulator use AuditorService");
    }
                  return vault_->GetCheckpoint(c, *req);
                });
}
grpc::Status CompanyServiceImpl::GetReceipt(grpc::ServerContext* ctx, const v1::GetReceiptRequest* req,
                                    v1::GetReceiptResponse* resp) {
  return Handle(*vault_, ctx, resp, [&](const Caller& c) -> absl::StatusOr<v1::GetReceiptResponse> {
    if (c.role != storage::Role::kCompany) {
      return absl::PermissionDeniedError("auditors and the regulator use AuditorService");
    }
    return vault_->GetReceipt(c, *req);
  });
}
grpc::Status CompanyServiceImpl::GetConsistencyProof(grpc::ServerContext* ctx,
                                             const v1::GetConsistencyProofRequest* req,
                                             v1::GetConsistencyProofResponse* resp) {
  return Handle(*vault_, ctx, resp,
                [&](const Caller& c) -> absl::StatusOr<v1::GetConsistencyProofResponse> {
                  if (c.role != storage::Role::kCompany) {
      return absl::PermissionDeniedError("auditors and the regulator use AuditorService");
    }
                  return vault_->GetConsistencyProof(c, *req);
                });
}

// ---- auditor -----------------------------------------------------------------------------------

grpc::Status AuditorServiceImpl::ListLedger(grpc::ServerContext* ctx,
                                            const v1::ListLedgerRequest* req,
                                            v1::ListLedgerResponse* resp) {
  return Handle(*vault_, ctx, resp, [&](const Caller& c) -> absl::StatusOr<v1::ListLedgerResponse> {
    if (c.role == storage::Role::kCompany) {
      return absl::PermissionDeniedError(
          "AuditorService is for auditors and the regulator; companies use "
          "CompanyService.ListLedger");
    }
    return vault_->ListLedger(c, *req);
  });
}
grpc::Status AuditorServiceImpl::ListBudgets(grpc::ServerContext* ctx,
                                             const v1::ListBudgetsRequest* req,
                                             v1::ListBudgetsResponse* resp) {
  return Handle(*vault_, ctx, resp, [&](const Caller& c) { return vault_->ListBudgets(c, *req); });
}
grpc::Status AuditorServiceImpl::VerifyLedger(grpc::ServerContext* ctx,
                                              const v1::VerifyLedgerRequest*,
                                              v1::VerifyLedgerResponse* resp) {
  return Handle(*vault_, ctx, resp, [&](const Caller& c) { return vault_->VerifyLedger(c); });
}

grpc::Status AuditorServiceImpl::ListAccessLog(grpc::ServerContext* ctx,
                                               const v1::ListAccessLogRequest* req,
                                               v1::ListAccessLogResponse* resp) {
  return Handle(*vault_, ctx, resp,
                [&](const Caller& c) { return vault_->ListAccessLog(c, *req); });
}

grpc::Status AuditorServiceImpl::GetJob(grpc::ServerContext* ctx, const v1::GetJobRequest* req,
                                        v1::GetJobResponse* resp) {
  return Handle(*vault_, ctx, resp, [&](const Caller& c) -> absl::StatusOr<v1::GetJobResponse> {
    if (c.role == storage::Role::kCompany) {
      return absl::PermissionDeniedError(
          "AuditorService is for auditors and the regulator; companies use "
          "CompanyService.GetJob");
    }
    return vault_->GetJob(c, *req);
  });
}
grpc::Status AuditorServiceImpl::ListJobs(grpc::ServerContext* ctx, const v1::ListJobsRequest* req,
                                          v1::ListJobsResponse* resp) {
  return Handle(*vault_, ctx, resp, [&](const Caller& c) -> absl::StatusOr<v1::ListJobsResponse> {
    if (c.role == storage::Role::kCompany) {
      return absl::PermissionDeniedError(
          "AuditorService is for auditors and the regulator; companies use "
          "CompanyService.ListJobs");
    }
    return vault_->ListJobs(c, *req);
  });
}

grpc::Status AuditorServiceImpl::GetCheckpoint(grpc::ServerContext* ctx,
                                       const v1::GetCheckpointRequest* req,
                                       v1::GetCheckpointResponse* resp) {
  return Handle(*vault_, ctx, resp,
                [&](const Caller& c) -> absl::StatusOr<v1::GetCheckpointResponse> {
                  if (c.role == storage::Role::kCompany) {
      return absl::PermissionDeniedError("companies use CompanyService");
    }
                  return vault_->GetCheckpoint(c, *req);
                });
}
grpc::Status AuditorServiceImpl::AddCosignature(grpc::ServerContext* ctx,
                                                const v1::AddCosignatureRequest* req,
                                                v1::AddCosignatureResponse* resp) {
  return Handle(*vault_, ctx, resp,
                [&](const Caller& c) -> absl::StatusOr<v1::AddCosignatureResponse> {
                  if (c.role == storage::Role::kCompany) {
                    return absl::PermissionDeniedError(
                        "witnesses cosign through an auditor's account (AuditorService)");
                  }
                  return vault_->AddCosignature(c, *req);
                });
}
grpc::Status AuditorServiceImpl::GetReceipt(grpc::ServerContext* ctx, const v1::GetReceiptRequest* req,
                                    v1::GetReceiptResponse* resp) {
  return Handle(*vault_, ctx, resp, [&](const Caller& c) -> absl::StatusOr<v1::GetReceiptResponse> {
    if (c.role == storage::Role::kCompany) {
      return absl::PermissionDeniedError("companies use CompanyService");
    }
    return vault_->GetReceipt(c, *req);
  });
}
grpc::Status AuditorServiceImpl::GetConsistencyProof(grpc::ServerContext* ctx,
                                             const v1::GetConsistencyProofRequest* req,
                                             v1::GetConsistencyProofResponse* resp) {
  return Handle(*vault_, ctx, resp,
                [&](const Caller& c) -> absl::StatusOr<v1::GetConsistencyProofResponse> {
                  if (c.role == storage::Role::kCompany) {
      return absl::PermissionDeniedError("companies use CompanyService");
    }
                  return vault_->GetConsistencyProof(c, *req);
                });
}

}  // namespace fairvault::server
