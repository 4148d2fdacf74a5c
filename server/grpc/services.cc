// Thin handlers: each authenticates, calls one use-case and maps the status.
#include "server/grpc/services.h"

#include "absl/strings/match.h"
#include "server/grpc/status.h"

namespace fairvault::server {
namespace {

// Runs `use_case(caller)` for an authenticated caller and moves its result into `resp`.
template <typename Response, typename UseCase>
grpc::Status Handle(Vault& vault, grpc::ServerContext* ctx, Response* resp, UseCase use_case) {
  absl::StatusOr<Caller> caller = AuthenticateCall(vault, *ctx);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  absl::StatusOr<Response> result = use_case(*caller);
  if (!result.ok()) return ToGrpcStatus(result.status());
  *resp = *std::move(result);
  return grpc::Status::OK;
}

// Reads the header of a client stream, then hands the rest to the use-case chunk by chunk.
template <typename Request, typename Header, typename Chunk>
absl::Status ReadHeader(grpc::ServerReader<Request>* reader, Header* header,
                        const Header& (Request::*get)() const, bool (Request::*has)() const) {
  Request first;
  if (!reader->Read(&first) || !(first.*has)()) {
    return absl::InvalidArgumentError("the stream must start with a header message");
  }
  *header = (first.*get)();
  return absl::OkStatus();
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
        v1::ImportHeader header;
        absl::Status s = ReadHeader<v1::ImportAttributesRequest, v1::ImportHeader, v1::SubjectRows>(
            reader, &header, &v1::ImportAttributesRequest::header,
            &v1::ImportAttributesRequest::has_header);
        if (!s.ok()) return s;
        v1::ImportAttributesRequest msg;
        return vault_->ImportAttributes(c, header, [&](v1::SubjectRows* rows) {
          while (reader->Read(&msg)) {
            if (msg.has_rows()) {
              rows->Swap(msg.mutable_rows());
              return true;
            }
          }
          return false;
        });
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
        v1::TableHeader header;
        absl::Status s = ReadHeader<v1::UploadTableRequest, v1::TableHeader, v1::TableChunk>(
            reader, &header, &v1::UploadTableRequest::header, &v1::UploadTableRequest::has_header);
        if (!s.ok()) return s;
        v1::UploadTableRequest msg;
        return vault_->UploadTable(c, header, [&](v1::TableChunk* chunk) {
          while (reader->Read(&msg)) {
            if (msg.has_chunk()) {
              chunk->Swap(msg.mutable_chunk());
              return true;
            }
          }
          return false;
        });
      });
}
grpc::Status CompanyServiceImpl::NoisyCounts(grpc::ServerContext* ctx,
                                             const v1::NoisyCountsRequest* req,
                                             v1::NoisyCountsResponse* resp) {
  return Handle(*vault_, ctx, resp, [&](const Caller& c) { return vault_->NoisyCounts(c, *req); });
}
grpc::Status CompanyServiceImpl::FitEqualizedOddsPostProcessor(
    grpc::ServerContext* ctx, const v1::FitEqualizedOddsRequest* req,
    v1::FitEqualizedOddsResponse* resp) {
  return Handle(*vault_, ctx, resp,
                [&](const Caller& c) { return vault_->FitEqualizedOdds(c, *req); });
}
grpc::Status CompanyServiceImpl::FitStatisticalParityPostProcessor(
    grpc::ServerContext* ctx, const v1::FitStatisticalParityRequest* req,
    v1::FitStatisticalParityResponse* resp) {
  return Handle(*vault_, ctx, resp,
                [&](const Caller& c) { return vault_->FitStatisticalParity(c, *req); });
}
grpc::Status CompanyServiceImpl::FitEqualizedOddsScoresPostProcessor(
    grpc::ServerContext* ctx, const v1::FitEqualizedOddsScoresRequest* req,
    v1::FitEqualizedOddsScoresResponse* resp) {
  return Handle(*vault_, ctx, resp,
                [&](const Caller& c) { return vault_->FitEqualizedOddsScores(c, *req); });
}
grpc::Status CompanyServiceImpl::AuditClassifier(grpc::ServerContext* ctx,
                                                 const v1::AuditClassifierRequest* req,
                                                 v1::AuditClassifierResponse* resp) {
  return Handle(*vault_, ctx, resp,
                [&](const Caller& c) { return vault_->AuditClassifier(c, *req); });
}
grpc::Status CompanyServiceImpl::AuditRegressor(grpc::ServerContext* ctx,
                                                const v1::AuditRegressorRequest* req,
                                                v1::AuditRegressorResponse* resp) {
  return Handle(*vault_, ctx, resp,
                [&](const Caller& c) { return vault_->AuditRegressor(c, *req); });
}
grpc::Status CompanyServiceImpl::Decide(grpc::ServerContext* ctx, const v1::DecideRequest* req,
                                        v1::DecideResponse* resp) {
  return Handle(*vault_, ctx, resp, [&](const Caller& c) { return vault_->Decide(c, *req); });
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

}  // namespace fairvault::server
