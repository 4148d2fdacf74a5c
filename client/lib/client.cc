// gRPC plumbing behind fairvault::client::Client: channel, per-call context, stream chunking.
// Over 500 lines as one file: one short method per RPC of the three services, all on the same call
// and stream conventions kept here once.
#include "client/lib/client.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "core/util/status_macros.h"

namespace fairvault::client {
namespace {

constexpr char kFromVaultPayload[] = "type.fairvault/client.from-vault";
constexpr char kReplayedPayload[] = "type.fairvault/client.replayed-ledger-seq";
constexpr char kSentKeyPayload[] = "type.fairvault/client.sent-idempotency-key";

// Whether a request type carries an idempotency key (the spending requests).
template <typename Req, typename = void>
struct HasIdempotencyKey : std::false_type {};
template <typename Req>
struct HasIdempotencyKey<Req, std::void_t<decltype(std::declval<const Req&>().idempotency_key())>>
    : std::true_type {};

// The replayed ledger seq in a finished call's trailing metadata, or 0 (absent or malformed).
int64_t ReplayedSeqOf(const grpc::ClientContext& context) {
  const auto& trailers = context.GetServerTrailingMetadata();
  auto it = trailers.find(kReplayedLedgerSeqMetadata);
  if (it == trailers.end()) return 0;
  int64_t seq = 0;
  if (!absl::SimpleAtoi(absl::string_view(it->second.data(), it->second.size()), &seq) || seq < 0) {
    return 0;
  }
  return seq;
}

// gRPC's size limit on one message, RESOURCE_EXHAUSTED like an overspend though no budget
// refusal: "Sent message larger than max (X vs. Y)" (or "Received"); newer gRPC names the side
// first ("CLIENT: Sent ..."). Any text naming the limit counts, parsed as far as it goes.
struct TooLarge {
  enum class Side { kUnnamed, kClient, kServer } side = Side::kUnnamed;
  bool sent = false;
  uint64_t bytes = 0;  // X, or 0 when not given
};
std::optional<TooLarge> TooLargeOf(const grpc::Status& status) {
  if (status.error_code() != grpc::StatusCode::RESOURCE_EXHAUSTED) return std::nullopt;
  const std::string text = status.error_message();  // returned by value
  if (!absl::StrContains(text, "message larger than max")) return std::nullopt;
  absl::string_view message = text;
  TooLarge too_large;
  if (absl::ConsumePrefix(&message, "CLIENT: ")) {
    too_large.side = TooLarge::Side::kClient;
  } else if (absl::ConsumePrefix(&message, "SERVER: ")) {
    too_large.side = TooLarge::Side::kServer;
  }
  too_large.sent = absl::ConsumePrefix(&message, "Sent ");
  if (absl::ConsumePrefix(&message, "message larger than max (")) {
    const size_t space = message.find(' ');
    if (space == absl::string_view::npos ||
        !absl::SimpleAtoi(message.substr(0, space), &too_large.bytes)) {
      too_large.bytes = 0;
    }
  }
  return too_large;
}

// Whether the limit refused the request itself before the vault ran it: this client's send, or
// the server's receive; without a named side, a send of exactly the request's size.
bool RequestRefused(const TooLarge& too_large, uint64_t request_bytes) {
  switch (too_large.side) {
    case TooLarge::Side::kClient:
      return too_large.sent;
    case TooLarge::Side::kServer:
      return !too_large.sent;
    case TooLarge::Side::kUnnamed:
      return too_large.sent && too_large.bytes == request_bytes;
  }
  return false;
}

// A message over the limit that nothing was charged for: this client's own request, refused
// before it left, or a message of a stream (which stores nothing unless whole).
absl::Status NotSentTooLarge(const grpc::Status& status, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(
      status.error_message(), ": one message is larger than gRPC's limit; send fewer rows per "
      "message (--chunk-rows, or chunk_rows= in Python); nothing was ", what));
}

// Calls a unary stub method and converts the outcome. A replay in the trailing metadata goes
// to `info` (if any) and onto a failed call's status, as does a spending request's key.
template <typename Stub, typename Req, typename Resp>
absl::StatusOr<Resp> CallUnary(
    Stub* stub, grpc::Status (Stub::*method)(grpc::ClientContext*, const Req&, Resp*),
    grpc::ClientContext* context, const Req& request, CallInfo* info = nullptr) {
  Resp response;
  grpc::Status status = (stub->*method)(context, request, &response);
  const int64_t replayed = ReplayedSeqOf(*context);
  if (info != nullptr) {
    *info = CallInfo();
    info->replayed_ledger_seq = replayed;
  }
  if (!status.ok()) {
    if (const std::optional<TooLarge> too_large = TooLargeOf(status);
        too_large.has_value() && RequestRefused(*too_large, request.ByteSizeLong())) {
      return NotSentTooLarge(status, "charged (the request was refused before the vault ran it)");
    }
    absl::Status converted = FromGrpcStatus(status);
    if (replayed > 0) converted.SetPayload(kReplayedPayload, absl::Cord(absl::StrCat(replayed)));
    if constexpr (HasIdempotencyKey<Req>::value) {
      if (!request.idempotency_key().empty()) {
        converted.SetPayload(kSentKeyPayload, absl::Cord(request.idempotency_key()));
      }
    }
    return converted;
  }
  return response;
}

// Streams `header`, the chunks of `next` and a StreamEnd over `writer`, then returns the
// server's answer (`response`, filled in by Finish). A producer error cancels the call, so the
// server stores nothing; a failed Write means the server ended the call, and Finish says why.
template <typename Request, typename Response, typename Header, typename Chunk>
absl::StatusOr<Response> StreamChunks(grpc::ClientContext& context,
                                      grpc::ClientWriter<Request>& writer, Response& response,
                                      const Header& header, Header* (Request::*mutable_header)(),
                                      Chunk* (Request::*mutable_chunk)(),
                                      const ChunkProducer<Chunk>& next, int64_t* rows_sent) {
  Request message;
  *(message.*mutable_header)() = header;
  bool ok = writer.Write(message);
  int64_t chunks = 0;
  *rows_sent = 0;
  while (ok) {
    message.Clear();
    Chunk* chunk = (message.*mutable_chunk)();
    absl::StatusOr<bool> more = next(chunk);
    if (!more.ok()) {
      context.TryCancel();
      writer.Finish();
      return more.status();
    }
    if (!*more) break;
    ++chunks;
    *rows_sent += chunk->subject_keys_size();
    ok = writer.Write(message);
  }
  if (ok) {
    message.Clear();
    message.mutable_end()->set_chunks(chunks);
    message.mutable_end()->set_rows(*rows_sent);
    ok = writer.Write(message);
  }
  if (ok) writer.WritesDone();
  grpc::Status status = writer.Finish();
  if (TooLargeOf(status).has_value()) return NotSentTooLarge(status, "stored or charged");
  if (!status.ok()) return FromGrpcStatus(status);
  if (!ok) {
    return absl::UnavailableError(
        "the server closed the upload stream before all rows were sent; nothing was stored, "
        "retry the upload");
  }
  return response;
}

// Fills chunks of at most `chunk_rows` rows from in-memory rows [0, total): `fill(begin, end,
// chunk)` copies one range.
template <typename Chunk, typename Fill>
ChunkProducer<Chunk> RangeProducer(size_t total, size_t chunk_rows, Fill fill) {
  auto begin = std::make_shared<size_t>(0);
  return [=](Chunk* chunk) -> absl::StatusOr<bool> {
    if (*begin >= total) return false;
    const size_t end = std::min(total, *begin + chunk_rows);
    fill(*begin, end, chunk);
    *begin = end;
    return true;
  };
}

absl::Status RowCountMismatch(int64_t stored, int64_t sent) {
  return absl::DataLossError(absl::StrCat("the server reports ", stored,
                                          " rows stored but the client sent ", sent,
                                          "; do not use the result, report this"));
}

}  // namespace

absl::Status ClientOptions::Validate() const {
  if (target.empty()) return absl::InvalidArgumentError("target must not be empty");
  if (!std::isfinite(deadline_seconds) || deadline_seconds <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("deadline_seconds must be finite and > 0 (got ", deadline_seconds, ")"));
  }
  if (max_message_bytes <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_message_bytes must be > 0 (got ", max_message_bytes, ")"));
  }
  for (char c : api_key) {
    if (c <= ' ' || c > '~') {
      return absl::InvalidArgumentError(
          "api_key must be printable ASCII without spaces (check for a stray newline in the "
          "key file)");
    }
  }
  return absl::OkStatus();
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  // gRPC's size limit on a message the call did not know to be its own request (an answer too
  // large for a limit, after the vault ran the call): no budget refusal, and the outcome is
  // unknown, so UNKNOWN, which a spending call treats as perhaps charged.
  absl::Status converted =
      TooLargeOf(status).has_value()
          ? absl::UnknownError(absl::StrCat(
                status.error_message(), ": a message was larger than gRPC's limit (this "
                "client's or the vault's) after the call was sent, so the vault may have charged "
                "it; repeat with the same idempotency key (a replay charges nothing) and a larger "
                "limit"))
          // gRPC and Abseil share the canonical code numbering 0..16.
          : absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                         status.error_message());
  converted.SetPayload(kFromVaultPayload, absl::Cord("1"));
  return converted;
}

absl::Status WithMessage(const absl::Status& status, absl::string_view message) {
  absl::Status out(status.code(), message);
  status.ForEachPayload(
      [&out](absl::string_view url, const absl::Cord& payload) { out.SetPayload(url, payload); });
  return out;
}

bool IsFromVault(const absl::Status& status) {
  return status.GetPayload(kFromVaultPayload).has_value();
}

std::string SentIdempotencyKey(const absl::Status& status) {
  const auto payload = status.GetPayload(kSentKeyPayload);
  return payload.has_value() ? std::string(*payload) : std::string();
}

int64_t ReplayedLedgerSeq(const absl::Status& status) {
  const auto payload = status.GetPayload(kReplayedPayload);
  int64_t seq = 0;
  if (!payload.has_value() || !absl::SimpleAtoi(std::string(*payload), &seq)) return 0;
  return seq;
}

Client::Client(std::shared_ptr<grpc::Channel> channel, const ClientOptions& options)
    : options_(options),
      channel_(std::move(channel)),
      regulator_(v1::RegulatorService::NewStub(channel_)),
      company_(v1::CompanyService::NewStub(channel_)),
      auditor_(v1::AuditorService::NewStub(channel_)),
      health_(grpc::health::v1::Health::NewStub(channel_)) {}

absl::StatusOr<std::unique_ptr<Client>> Client::Create(const ClientOptions& options) {
  absl::Status valid = options.Validate();
  if (!valid.ok()) return valid;
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(options.max_message_bytes);
  args.SetMaxSendMessageSize(options.max_message_bytes);
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  if (options.root_cert_pem.empty()) {
    credentials = grpc::InsecureChannelCredentials();
  } else {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = options.root_cert_pem;
    credentials = grpc::SslCredentials(ssl);
    if (!options.tls_server_name_override.empty()) {
      args.SetSslTargetNameOverride(options.tls_server_name_override);
    }
  }
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateCustomChannel(options.target, credentials, args);
  if (channel == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot create a channel to '", options.target, "'"));
  }
  return std::unique_ptr<Client>(new Client(std::move(channel), options));
}

absl::StatusOr<std::unique_ptr<Client>> Client::CreateWithChannel(
    std::shared_ptr<grpc::Channel> channel, const ClientOptions& options) {
  absl::Status valid = options.Validate();
  if (!valid.ok()) return valid;
  if (channel == nullptr) return absl::InvalidArgumentError("channel must not be null");
  return std::unique_ptr<Client>(new Client(std::move(channel), options));
}

std::unique_ptr<grpc::ClientContext> Client::NewContext() const {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() +
                        std::chrono::duration_cast<std::chrono::system_clock::duration>(
                            std::chrono::duration<double>(options_.deadline_seconds)));
  if (!options_.api_key.empty()) {
    context->AddMetadata("authorization", absl::StrCat("Bearer ", options_.api_key));
  }
  return context;
}

// ----- RegulatorService -----

absl::StatusOr<v1::CreateDatasetResponse> Client::CreateDataset(
    const v1::CreateDatasetRequest& req) {
  return CallUnary(regulator_.get(), &v1::RegulatorService::Stub::CreateDataset, NewContext().get(),
                   req);
}

absl::StatusOr<v1::ListDatasetsResponse> Client::ListDatasets(const v1::ListDatasetsRequest& req) {
  return CallUnary(regulator_.get(), &v1::RegulatorService::Stub::ListDatasets, NewContext().get(),
                   req);
}

absl::StatusOr<v1::DeleteDatasetResponse> Client::DeleteDataset(
    const v1::DeleteDatasetRequest& req) {
  return CallUnary(regulator_.get(), &v1::RegulatorService::Stub::DeleteDataset, NewContext().get(),
                   req);
}

absl::StatusOr<v1::ImportAttributesResponse> Client::ImportAttributes(
    const v1::ImportHeader& header, const std::vector<std::string>& keys,
    const std::vector<std::string>& categories_row_major, size_t chunk_rows) {
  const size_t width = static_cast<size_t>(header.attributes_size());
  if (chunk_rows == 0) return absl::InvalidArgumentError("chunk_rows must be > 0");
  if (width == 0) {
    return absl::InvalidArgumentError("the import header must name at least one attribute");
  }
  if (categories_row_major.size() != keys.size() * width) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expected ", keys.size(), " keys x ", width, " attributes = ", keys.size() * width,
        " category labels, got ", categories_row_major.size()));
  }
  return ImportAttributesStream(
      header, RangeProducer<v1::SubjectRows>(
                  keys.size(), chunk_rows, [&](size_t begin, size_t end, v1::SubjectRows* rows) {
                    rows->mutable_subject_keys()->Reserve(static_cast<int>(end - begin));
                    rows->mutable_categories()->Reserve(static_cast<int>((end - begin) * width));
                    for (size_t i = begin; i < end; ++i) {
                      rows->add_subject_keys(keys[i]);
                      for (size_t a = 0; a < width; ++a) {
                        rows->add_categories(categories_row_major[i * width + a]);
                      }
                    }
                  }));
}

absl::StatusOr<v1::ImportAttributesResponse> Client::ImportAttributesStream(
    const v1::ImportHeader& header, const ChunkProducer<v1::SubjectRows>& next) {
  std::unique_ptr<grpc::ClientContext> context = NewContext();
  v1::ImportAttributesResponse response;
  std::unique_ptr<grpc::ClientWriter<v1::ImportAttributesRequest>> writer =
      regulator_->ImportAttributes(context.get(), &response);
  int64_t sent = 0;
  absl::StatusOr<v1::ImportAttributesResponse> result = StreamChunks(
      *context, *writer, response, header, &v1::ImportAttributesRequest::mutable_header,
      &v1::ImportAttributesRequest::mutable_rows, next, &sent);
  if (result.ok() && !result->replayed() && result->rows_imported() != sent) {
    return RowCountMismatch(result->rows_imported(), sent);
  }
  return result;
}

absl::StatusOr<v1::CreateAccountResponse> Client::CreateAccount(
    const v1::CreateAccountRequest& req) {
  return CallUnary(regulator_.get(), &v1::RegulatorService::Stub::CreateAccount, NewContext().get(),
                   req);
}

absl::StatusOr<v1::ListAccountsResponse> Client::ListAccounts(const v1::ListAccountsRequest& req) {
  return CallUnary(regulator_.get(), &v1::RegulatorService::Stub::ListAccounts, NewContext().get(),
                   req);
}

absl::StatusOr<v1::GrantBudgetResponse> Client::GrantBudget(const v1::GrantBudgetRequest& req) {
  return CallUnary(regulator_.get(), &v1::RegulatorService::Stub::GrantBudget, NewContext().get(),
                   req);
}

absl::StatusOr<v1::SetDatasetCapResponse> Client::SetDatasetCap(
    const v1::SetDatasetCapRequest& req) {
  return CallUnary(regulator_.get(), &v1::RegulatorService::Stub::SetDatasetCap, NewContext().get(),
                   req);
}

absl::StatusOr<v1::VerifyLedgerResponse> Client::VerifyLedger(const v1::VerifyLedgerRequest& req) {
  return CallUnary(regulator_.get(), &v1::RegulatorService::Stub::VerifyLedger, NewContext().get(),
                   req);
}

// ----- CompanyService -----

absl::StatusOr<v1::UploadTableResponse> Client::UploadTable(
    const v1::TableHeader& header, const std::vector<std::string>& keys,
    const std::vector<v1::ColumnValues>& columns, size_t chunk_rows) {
  if (chunk_rows == 0) return absl::InvalidArgumentError("chunk_rows must be > 0");
  if (columns.size() != static_cast<size_t>(header.columns_size())) {
    return absl::InvalidArgumentError(absl::StrCat("the header declares ", header.columns_size(),
                                                   " columns but ", columns.size(), " were given"));
  }
  for (size_t c = 0; c < columns.size(); ++c) {
    const v1::ColumnSpec& spec = header.columns(static_cast<int>(c));
    const bool numeric = spec.type() == v1::COLUMN_TYPE_NUMERIC;
    if (!numeric && spec.type() != v1::COLUMN_TYPE_CATEGORICAL) {
      return absl::InvalidArgumentError(
          absl::StrCat("column '", spec.name(), "' must be numeric or categorical"));
    }
    const size_t have = numeric ? columns[c].numeric_size() : columns[c].categorical_size();
    const size_t other = numeric ? columns[c].categorical_size() : columns[c].numeric_size();
    if (have != keys.size() || other != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "column '", spec.name(), "' (", numeric ? "numeric" : "categorical", ") must have ",
          keys.size(), " ", numeric ? "numeric" : "categorical", " values, one per key (got ", have,
          ", plus ", other, " of the other kind)"));
    }
  }
  return UploadTableStream(
      header, RangeProducer<v1::TableChunk>(
                  keys.size(), chunk_rows, [&](size_t begin, size_t end, v1::TableChunk* chunk) {
                    const int n = static_cast<int>(end - begin);
                    chunk->mutable_subject_keys()->Reserve(n);
                    for (size_t i = begin; i < end; ++i) chunk->add_subject_keys(keys[i]);
                    for (size_t c = 0; c < columns.size(); ++c) {
                      const v1::ColumnValues& column = columns[c];
                      v1::ColumnValues* slice = chunk->add_columns();
                      if (header.columns(static_cast<int>(c)).type() == v1::COLUMN_TYPE_NUMERIC) {
                        slice->mutable_numeric()->Add(column.numeric().begin() + begin,
                                                      column.numeric().begin() + end);
                      } else {
                        slice->mutable_categorical()->Reserve(n);
                        for (size_t i = begin; i < end; ++i) {
                          slice->add_categorical(column.categorical(i));
                        }
                      }
                    }
                  }));
}

absl::StatusOr<v1::UploadTableResponse> Client::UploadTableStream(
    const v1::TableHeader& header, const ChunkProducer<v1::TableChunk>& next) {
  std::unique_ptr<grpc::ClientContext> context = NewContext();
  v1::UploadTableResponse response;
  std::unique_ptr<grpc::ClientWriter<v1::UploadTableRequest>> writer =
      company_->UploadTable(context.get(), &response);
  int64_t sent = 0;
  absl::StatusOr<v1::UploadTableResponse> result =
      StreamChunks(*context, *writer, response, header, &v1::UploadTableRequest::mutable_header,
                   &v1::UploadTableRequest::mutable_chunk, next, &sent);
  if (result.ok() && result->row_count() != sent) {
    return RowCountMismatch(result->row_count(), sent);
  }
  return result;
}

absl::StatusOr<v1::NoisyCountsResponse> Client::NoisyCounts(const v1::NoisyCountsRequest& req,
                                                            CallInfo* info) {
  return CallUnary(company_.get(), &v1::CompanyService::Stub::NoisyCounts, NewContext().get(), req,
                   info);
}

absl::StatusOr<v1::FitEqualizedOddsResponse> Client::FitEqualizedOddsPostProcessor(
    const v1::FitEqualizedOddsRequest& req, CallInfo* info) {
  return CallUnary(company_.get(), &v1::CompanyService::Stub::FitEqualizedOddsPostProcessor,
                   NewContext().get(), req, info);
}

absl::StatusOr<v1::FitStatisticalParityResponse> Client::FitStatisticalParityPostProcessor(
    const v1::FitStatisticalParityRequest& req, CallInfo* info) {
  return CallUnary(company_.get(), &v1::CompanyService::Stub::FitStatisticalParityPostProcessor,
                   NewContext().get(), req, info);
}
absl::StatusOr<v1::FitEqualizedOddsScoresResponse> Client::FitEqualizedOddsScoresPostProcessor(
    const v1::FitEqualizedOddsScoresRequest& req, CallInfo* info) {
  return CallUnary(company_.get(), &v1::CompanyService::Stub::FitEqualizedOddsScoresPostProcessor,
                   NewContext().get(), req, info);
}

absl::StatusOr<v1::AuditClassifierResponse> Client::AuditClassifier(
    const v1::AuditClassifierRequest& req, CallInfo* info) {
  return CallUnary(company_.get(), &v1::CompanyService::Stub::AuditClassifier, NewContext().get(),
                   req, info);
}

absl::StatusOr<v1::AuditRegressorResponse> Client::AuditRegressor(
    const v1::AuditRegressorRequest& req, CallInfo* info) {
  return CallUnary(company_.get(), &v1::CompanyService::Stub::AuditRegressor, NewContext().get(),
                   req, info);
}

absl::StatusOr<v1::DecideResponse> Client::Decide(const v1::DecideRequest& req) {
  return CallUnary(company_.get(), &v1::CompanyService::Stub::Decide, NewContext().get(), req);
}

absl::StatusOr<DecideResult> Client::DecideInChunks(const std::string& artifact_id,
                                                    const std::vector<std::string>& keys,
                                                    const std::vector<double>& values,
                                                    size_t chunk_rows) {
  if (chunk_rows == 0) return absl::InvalidArgumentError("chunk_rows must be > 0");
  if (keys.empty() || keys.size() != values.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("send one value per subject key, at least one row (got ", keys.size(),
                     " keys and ", values.size(), " values)"));
  }
  std::vector<double> outputs;
  outputs.reserve(keys.size());
  size_t begin = 0;
  ASSIGN_OR_RETURN(
      DecideResult result,
      DecideStream(
          artifact_id,
          [&](v1::DecideRequest* req) -> absl::StatusOr<bool> {
            if (begin == keys.size()) return false;
            const size_t end = std::min(keys.size(), begin + chunk_rows);
            req->mutable_subject_keys()->Reserve(static_cast<int>(end - begin));
            for (size_t i = begin; i < end; ++i) req->add_subject_keys(keys[i]);
            req->mutable_values()->Add(values.begin() + begin, values.begin() + end);
            begin = end;
            return true;
          },
          [&](const v1::DecideResponse& resp) {
            outputs.insert(outputs.end(), resp.outputs().begin(), resp.outputs().end());
            return absl::OkStatus();
          }));
  result.outputs = std::move(outputs);
  return result;
}

absl::StatusOr<DecideResult> Client::DecideTable(const std::string& artifact_id,
                                                 const std::string& table_handle,
                                                 const std::string& value_column,
                                                 size_t chunk_rows) {
  std::vector<double> outputs;
  ASSIGN_OR_RETURN(DecideResult result,
                   DecideTableStream(artifact_id, table_handle, value_column, chunk_rows,
                                     [&](const v1::DecideResponse& resp, int64_t) {
                                       if (outputs.empty()) outputs.reserve(resp.table_rows());
                                       outputs.insert(outputs.end(), resp.outputs().begin(),
                                                      resp.outputs().end());
                                       return absl::OkStatus();
                                     }));
  result.outputs = std::move(outputs);
  return result;
}

absl::StatusOr<DecideResult> Client::DecideTableStream(
    const std::string& artifact_id, const std::string& table_handle,
    const std::string& value_column, size_t chunk_rows,
    const std::function<absl::Status(const v1::DecideResponse&, int64_t first_row)>& take) {
  if (chunk_rows == 0 || chunk_rows > kDecideTableChunkRows) {
    return absl::InvalidArgumentError(absl::StrCat("chunk_rows must be in 1..",
                                                   kDecideTableChunkRows, " (got ", chunk_rows, ")"));
  }
  if (table_handle.empty()) return absl::InvalidArgumentError("table_handle must be set");
  int64_t next_row = 0;
  int64_t table_rows = -1;  // known after the first call
  return DecideStream(
      artifact_id,
      [&](v1::DecideRequest* req) -> absl::StatusOr<bool> {
        if (table_rows >= 0 && next_row >= table_rows) return false;
        req->set_table_handle(table_handle);
        req->set_value_column(value_column);
        req->set_first_row(next_row);
        req->set_row_count(static_cast<int64_t>(chunk_rows));
        return true;
      },
      [&](const v1::DecideResponse& resp) -> absl::Status {
        RETURN_IF_ERROR(take(resp, next_row));
        table_rows = resp.table_rows();
        next_row += resp.outputs_size();
        return absl::OkStatus();
      });
}

absl::StatusOr<DecideResult> Client::DecideStream(
    const std::string& artifact_id,
    const std::function<absl::StatusOr<bool>(v1::DecideRequest*)>& next,
    const std::function<absl::Status(const v1::DecideResponse&)>& take) {
  DecideResult result;
  v1::DecideRequest req;
  req.set_artifact_id(artifact_id);
  int64_t done = 0;  // rows answered by the earlier calls
  while (true) {
    req.clear_subject_keys();
    req.clear_values();
    ASSIGN_OR_RETURN(const bool more, next(&req));
    if (!more) break;
    // A call by table answers up to row_count rows (fewer at the table's end).
    const bool by_table = !req.table_handle().empty();
    const int64_t rows = by_table ? req.row_count() : req.subject_keys_size();
    absl::StatusOr<v1::DecideResponse> resp = Decide(req);
    if (!resp.ok()) {
      if (done == 0) return resp.status();
      // The earlier calls were answered and logged: say so, so that a retry can resume.
      return WithMessage(
          resp.status(),
          absl::StrCat("rows ", done, "..", done + rows - 1, ": ", resp.status().message(),
                       " (rows 0..", done - 1, " were already decided in ",
                       result.access_log_seqs.size(), " call(s), access-log seqs ",
                       result.access_log_seqs.front(), "..", result.access_log_seqs.back(), ")"));
    }
    if (by_table ? resp->outputs_size() < 1 || (rows > 0 && resp->outputs_size() > rows)
                 : resp->outputs_size() != rows) {
      return absl::InternalError(absl::StrCat("the vault answered ", resp->outputs_size(),
                                              " outputs for ", rows, " rows"));
    }
    RETURN_IF_ERROR(take(*resp));
    done += resp->outputs_size();
    result.decision_log_ratio_bound =
        std::max(result.decision_log_ratio_bound, resp->decision_log_ratio_bound());
    result.access_log_seqs.push_back(resp->access_log_seq());
    result.licence = resp->charge();
    result.licence_charged = result.licence_charged || resp->licence_charged();
    result.rows_already_decided += resp->rows_already_decided();
  }
  return result;
}

absl::StatusOr<v1::BestResponseResponse> Client::BestResponse(const v1::BestResponseRequest& req,
                                                              CallInfo* info) {
  return CallUnary(company_.get(), &v1::CompanyService::Stub::BestResponse, NewContext().get(), req,
                   info);
}

absl::StatusOr<v1::CellSumsResponse> Client::ReleaseCellSums(const v1::CellSumsRequest& req,
                                                              CallInfo* info) {
  return CallUnary(company_.get(), &v1::CompanyService::Stub::ReleaseCellSums, NewContext().get(),
                   req, info);
}

absl::StatusOr<v1::FitFairModelResponse> Client::FitFairModel(const v1::FitFairModelRequest& req,
                                                              CallInfo* info) {
  return CallUnary(company_.get(), &v1::CompanyService::Stub::FitFairModel, NewContext().get(), req,
                   info);
}

absl::StatusOr<v1::GetJobResponse> Client::GetJob(const v1::GetJobRequest& req) {
  return CallUnary(company_.get(), &v1::CompanyService::Stub::GetJob, NewContext().get(), req);
}

absl::StatusOr<v1::ListJobsResponse> Client::ListJobs(const v1::ListJobsRequest& req) {
  return CallUnary(company_.get(), &v1::CompanyService::Stub::ListJobs, NewContext().get(), req);
}

absl::StatusOr<v1::CancelJobResponse> Client::CancelJob(const v1::CancelJobRequest& req) {
  return CallUnary(company_.get(), &v1::CompanyService::Stub::CancelJob, NewContext().get(), req);
}

absl::StatusOr<v1::GetArtifactResponse> Client::GetArtifact(const v1::GetArtifactRequest& req) {
  return CallUnary(company_.get(), &v1::CompanyService::Stub::GetArtifact, NewContext().get(), req);
}

absl::StatusOr<v1::GetBudgetResponse> Client::GetBudget(const v1::GetBudgetRequest& req) {
  return CallUnary(company_.get(), &v1::CompanyService::Stub::GetBudget, NewContext().get(), req);
}

absl::StatusOr<v1::ListLedgerResponse> Client::ListLedger(const v1::ListLedgerRequest& req) {
  return CallUnary(company_.get(), &v1::CompanyService::Stub::ListLedger, NewContext().get(), req);
}

absl::StatusOr<v1::PreviewReleaseResponse> Client::PreviewRelease(
    const v1::PreviewReleaseRequest& req) {
  return CallUnary(company_.get(), &v1::CompanyService::Stub::PreviewRelease, NewContext().get(),
                   req);
}

// ----- AuditorService -----

absl::StatusOr<v1::ListLedgerResponse> Client::AuditorListLedger(const v1::ListLedgerRequest& req) {
  return CallUnary(auditor_.get(), &v1::AuditorService::Stub::ListLedger, NewContext().get(), req);
}

absl::StatusOr<v1::ListBudgetsResponse> Client::AuditorListBudgets(
    const v1::ListBudgetsRequest& req) {
  return CallUnary(auditor_.get(), &v1::AuditorService::Stub::ListBudgets, NewContext().get(), req);
}

absl::StatusOr<v1::VerifyLedgerResponse> Client::AuditorVerifyLedger(
    const v1::VerifyLedgerRequest& req) {
  return CallUnary(auditor_.get(), &v1::AuditorService::Stub::VerifyLedger, NewContext().get(),
                   req);
}

absl::StatusOr<v1::ListAccessLogResponse> Client::AuditorListAccessLog(
    const v1::ListAccessLogRequest& req) {
  return CallUnary(auditor_.get(), &v1::AuditorService::Stub::ListAccessLog, NewContext().get(),
                   req);
}

absl::StatusOr<v1::GetCheckpointResponse> Client::GetCheckpoint(
    const v1::GetCheckpointRequest& req, bool auditor) {
  return auditor ? CallUnary(auditor_.get(), &v1::AuditorService::Stub::GetCheckpoint,
                             NewContext().get(), req)
                 : CallUnary(company_.get(), &v1::CompanyService::Stub::GetCheckpoint,
                             NewContext().get(), req);
}

absl::StatusOr<v1::GetReceiptResponse> Client::GetReceipt(const v1::GetReceiptRequest& req,
                                                          bool auditor) {
  return auditor ? CallUnary(auditor_.get(), &v1::AuditorService::Stub::GetReceipt,
                             NewContext().get(), req)
                 : CallUnary(company_.get(), &v1::CompanyService::Stub::GetReceipt,
                             NewContext().get(), req);
}

absl::StatusOr<v1::GetConsistencyProofResponse> Client::GetConsistencyProof(
    const v1::GetConsistencyProofRequest& req, bool auditor) {
  return auditor ? CallUnary(auditor_.get(), &v1::AuditorService::Stub::GetConsistencyProof,
                             NewContext().get(), req)
                 : CallUnary(company_.get(), &v1::CompanyService::Stub::GetConsistencyProof,
                             NewContext().get(), req);
}

absl::StatusOr<v1::AddCosignatureResponse> Client::AddCosignature(
    const v1::AddCosignatureRequest& req) {
  return CallUnary(auditor_.get(), &v1::AuditorService::Stub::AddCosignature, NewContext().get(),
                   req);
}

absl::StatusOr<v1::GetJobResponse> Client::AuditorGetJob(const v1::GetJobRequest& req) {
  return CallUnary(auditor_.get(), &v1::AuditorService::Stub::GetJob, NewContext().get(), req);
}

absl::StatusOr<v1::ListJobsResponse> Client::AuditorListJobs(const v1::ListJobsRequest& req) {
  return CallUnary(auditor_.get(), &v1::AuditorService::Stub::ListJobs, NewContext().get(), req);
}

// ----- grpc.health.v1.Health -----

absl::StatusOr<grpc::health::v1::HealthCheckResponse::ServingStatus> Client::CheckHealth(
    const std::string& service) {
  grpc::health::v1::HealthCheckRequest req;
  req.set_service(service);
  absl::StatusOr<grpc::health::v1::HealthCheckResponse> resp =
      CallUnary(health_.get(), &grpc::health::v1::Health::Stub::Check, NewContext().get(), req);
  if (!resp.ok()) return resp.status();
  return resp->status();
}

}  // namespace fairvault::client
