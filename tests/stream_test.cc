// End to end: client streams (ImportAttributes, UploadTable) against the real server binary are
// all or nothing. A malformed chunk in the middle, a cancelled call or a passed deadline stores
// nothing, and the same request sent again completes.
#include <sqlite3.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "core/testing/status_matchers.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/vault_fixture.h"

namespace fairvault::testing {
namespace {

namespace v1 = ::fairvault::v1;

#ifndef FAIRVAULT_CLI_BINARY
#error "FAIRVAULT_CLI_BINARY must name the fairvault binary"
#endif

struct CliResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

// Runs the CLI with `args` (shell words) and returns its exit code and output.
CliResult RunCli(const std::string& args) {
  CliResult result;
  FILE* pipe = popen((std::string(FAIRVAULT_CLI_BINARY) + " " + args + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) result.output.append(buf, n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

constexpr int kNewSubjects = 3000;
constexpr int kChunkRows = 1000;

class StreamTest : public VaultFixture {
 protected:
  void SetUp() override { StartVault(MakePopulation(500, 11), /*epsilon=*/5, /*delta=*/0); }

  // Rows of the subjects new0..new2999 with attributes (race, sex), `chunk` of three.
  static v1::SubjectRows NewRows(int chunk) {
    v1::SubjectRows rows;
    for (int i = chunk * kChunkRows; i < (chunk + 1) * kChunkRows; ++i) {
      rows.add_subject_keys(absl::StrCat("new", i));
      rows.add_categories(i % 3 == 0 ? "A" : "B");
      rows.add_categories(i % 2 == 0 ? "F" : "M");
    }
    return rows;
  }
  static v1::ImportHeader NewHeader() {
    v1::ImportHeader header;
    header.set_dataset("pop");
    header.set_batch_id("new-subjects");
    header.add_attributes("race");
    header.add_attributes("sex");
    return header;
  }
  // A raw call context with the regulator's or the company's key and a deadline.
  static std::unique_ptr<grpc::ClientContext> Context(const std::string& key,
                                                      std::chrono::milliseconds deadline) {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->AddMetadata("authorization", "Bearer " + key);
    ctx->set_deadline(std::chrono::system_clock::now() + deadline);
    return ctx;
  }
  std::shared_ptr<grpc::Channel> Channel() {
    return grpc::CreateChannel(server_->target(), grpc::InsecureChannelCredentials());
  }
  int64_t SubjectCount() {
    auto datasets = regulator_->ListDatasets();
    EXPECT_OK(datasets);
    return datasets->datasets(0).subject_count();
  }
  // Company tables stored in the server's database (read with SQLite beside the server).
  int64_t StoredTables() {
    sqlite3* db = nullptr;
    EXPECT_EQ(sqlite3_open_v2(server_->db_path().c_str(), &db, SQLITE_OPEN_READONLY, nullptr),
              SQLITE_OK);
    sqlite3_stmt* stmt = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db, "SELECT COUNT(*) FROM company_tables", -1, &stmt, nullptr),
              SQLITE_OK);
    EXPECT_EQ(sqlite3_step(stmt), SQLITE_ROW);
    const int64_t n = sqlite3_column_int64(stmt, 0);
    sqlite3_finalize(stmt);
    sqlite3_close(db);
    return n;
  }
  // An import stream on a raw stub, its header and first chunk written (`started` says whether
  // the server took them), for tests that break the stream in their own way.
  struct RawImport {
    std::unique_ptr<v1::RegulatorService::Stub> stub;
    std::unique_ptr<grpc::ClientContext> ctx;
    v1::ImportAttributesResponse response;
    std::unique_ptr<grpc::ClientWriter<v1::ImportAttributesRequest>> writer;
    bool started = false;
    bool Write(const v1::ImportAttributesRequest& message) { return writer->Write(message); }
  };
  std::unique_ptr<RawImport> StartImport(std::chrono::milliseconds deadline) {
    auto import = std::make_unique<RawImport>();
    import->stub = v1::RegulatorService::NewStub(Channel());
    import->ctx = Context(regulator_key_, deadline);
    import->writer = import->stub->ImportAttributes(import->ctx.get(), &import->response);
    v1::ImportAttributesRequest message;
    *message.mutable_header() = NewHeader();
    import->started = import->Write(message);
    *message.mutable_rows() = NewRows(0);
    import->started = import->started && import->Write(message);
    return import;
  }
  // The full import through the client library: the retry a user would run.
  void ImportCompletes() {
    const v1::SubjectRows all[] = {NewRows(0), NewRows(1), NewRows(2)};
    int next = 0;
    auto imported = regulator_->ImportAttributesStream(
        NewHeader(), [&](v1::SubjectRows* rows) -> absl::StatusOr<bool> {
          if (next == 3) return false;
          *rows = all[next++];
          return true;
        });
    ASSERT_OK(imported);
    EXPECT_FALSE(imported->replayed());
    EXPECT_EQ(imported->rows_imported(), 3 * kChunkRows);
    EXPECT_EQ(SubjectCount(), 500 + 3 * kChunkRows);
  }
  v1::TableHeader TableHeader() {
    v1::TableHeader header;
    header.set_dataset("pop");
    v1::ColumnSpec* spec = header.add_columns();
    spec->set_name("score");
    spec->set_type(v1::COLUMN_TYPE_CATEGORICAL);
    return header;
  }
  v1::TableChunk TableRows(int chunk) {
    v1::TableChunk rows;
    v1::ColumnValues* values = rows.add_columns();
    for (int i = chunk * 100; i < (chunk + 1) * 100; ++i) {
      rows.add_subject_keys(absl::StrCat("t", i));
      values->add_categorical(i % 2 ? "hi" : "lo");
    }
    return rows;
  }
};

TEST_F(StreamTest, MalformedChunkInTheMiddleOfAnImportStoresNothing) {
  auto import = StartImport(std::chrono::seconds(30));
  ASSERT_TRUE(import->started);
  auto& writer = import->writer;
  v1::ImportAttributesRequest message;
  // A category that is not UTF-8: the server cannot parse this chunk (proto3 strings).
  *message.mutable_rows() = NewRows(1);
  message.mutable_rows()->set_categories(7, "F\xE9");
  writer->Write(message);
  *message.mutable_rows() = NewRows(2);
  writer->Write(message);
  message.mutable_end()->set_chunks(3);
  message.mutable_end()->set_rows(3 * kChunkRows);
  writer->Write(message);
  writer->WritesDone();
  const grpc::Status status = writer->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_NE(status.error_message().find("chunk 2 (rows from 1001)"), std::string::npos)
      << status.error_message();
  EXPECT_EQ(SubjectCount(), 500);
  ImportCompletes();
}

TEST_F(StreamTest, StreamWithoutItsEndMessageStoresNothing) {
  // An older or broken client that half-closes without StreamEnd: nothing is stored.
  auto import = StartImport(std::chrono::seconds(30));
  ASSERT_TRUE(import->started);
  auto& writer = import->writer;
  v1::ImportAttributesRequest message;
  writer->WritesDone();
  const grpc::Status status = writer->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("without its end message"), std::string::npos);
  EXPECT_EQ(SubjectCount(), 500);
  ImportCompletes();
}

TEST_F(StreamTest, ASecondHeaderOrAnEndThatMiscountsStoresNothing) {
  for (const bool second_header : {true, false}) {
    SCOPED_TRACE(second_header);
    auto import = StartImport(std::chrono::seconds(30));
    ASSERT_TRUE(import->started);
    auto& writer = import->writer;
    v1::ImportAttributesRequest message;
    if (second_header) {
      *message.mutable_header() = NewHeader();
    } else {
      message.mutable_end()->set_chunks(1);
      message.mutable_end()->set_rows(kChunkRows + 1);  // one row more than was sent
    }
    writer->Write(message);
    writer->WritesDone();
    const grpc::Status status = writer->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(status.error_message().find(second_header ? "not a data chunk" : "received 1 chunks"),
              std::string::npos)
        << status.error_message();
    EXPECT_EQ(SubjectCount(), 500);
  }
  ImportCompletes();
}

TEST_F(StreamTest, CancelledImportStoresNothingAndTheRetryCompletes) {
  auto import = StartImport(std::chrono::seconds(30));
  ASSERT_TRUE(import->started);
  auto& writer = import->writer;
  v1::ImportAttributesRequest message;
  *message.mutable_rows() = NewRows(1);
  ASSERT_TRUE(writer->Write(message));
  import->ctx->TryCancel();  // Ctrl-C in the middle of the file
  EXPECT_EQ(writer->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_EQ(SubjectCount(), 500);
  ImportCompletes();
}

TEST_F(StreamTest, ClientLibraryCancelsWhenItsProducerFails) {
  int chunks = 0;
  auto failed = regulator_->ImportAttributesStream(
      NewHeader(), [&](v1::SubjectRows* rows) -> absl::StatusOr<bool> {
        if (chunks == 2) return absl::InvalidArgumentError("people.csv:2002: not UTF-8");
        *rows = NewRows(chunks++);
        return true;
      });
  EXPECT_THAT(failed, StatusIs(absl::StatusCode::kInvalidArgument, "people.csv:2002"));
  EXPECT_EQ(SubjectCount(), 500);
  ImportCompletes();
}

TEST_F(StreamTest, ImportPastItsDeadlineStoresNothing) {
  auto import = StartImport(std::chrono::milliseconds(300));
  ASSERT_TRUE(import->started);
  auto& writer = import->writer;
  v1::ImportAttributesRequest message;
  std::this_thread::sleep_for(std::chrono::milliseconds(800));  // a stalled client
  *message.mutable_rows() = NewRows(1);
  writer->Write(message);
  EXPECT_EQ(writer->Finish().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_EQ(SubjectCount(), 500);
  ImportCompletes();
}

TEST_F(StreamTest, ServerKilledInTheMiddleOfAnImportStoresNothingAndTheRetryCompletes) {
  auto import = StartImport(std::chrono::seconds(30));
  ASSERT_TRUE(import->started);
  v1::ImportAttributesRequest message;
  *message.mutable_rows() = NewRows(1);
  import->Write(message);
  ASSERT_OK(server_->Kill());  // kill -9 with two chunks received and no end message
  EXPECT_FALSE(import->writer->Finish().ok());
  ASSERT_OK(server_->Start());
  regulator_ = server_->Connect(regulator_key_);
  EXPECT_EQ(SubjectCount(), 500);
  ImportCompletes();
}

TEST_F(StreamTest, CancelledUploadStoresNoTableAndTheRetryCompletes) {
  const int64_t before = StoredTables();
  auto stub = v1::CompanyService::NewStub(Channel());
  auto ctx = Context(company_key_, std::chrono::seconds(30));
  v1::UploadTableResponse response;
  auto writer = stub->UploadTable(ctx.get(), &response);
  v1::UploadTableRequest message;
  *message.mutable_header() = TableHeader();
  ASSERT_TRUE(writer->Write(message));
  *message.mutable_chunk() = TableRows(0);
  ASSERT_TRUE(writer->Write(message));
  ctx->TryCancel();
  EXPECT_EQ(writer->Finish().error_code(), grpc::StatusCode::CANCELLED);

  // A malformed chunk in the middle of an upload, then the stream's end: refused.
  auto ctx2 = Context(company_key_, std::chrono::seconds(30));
  auto writer2 = stub->UploadTable(ctx2.get(), &response);
  *message.mutable_header() = TableHeader();
  ASSERT_TRUE(writer2->Write(message));
  *message.mutable_chunk() = TableRows(0);
  ASSERT_TRUE(writer2->Write(message));
  *message.mutable_chunk() = TableRows(1);
  message.mutable_chunk()->mutable_columns(0)->set_categorical(3, "\xC3\x28");
  writer2->Write(message);
  message.mutable_end()->set_chunks(2);
  message.mutable_end()->set_rows(200);
  writer2->Write(message);
  writer2->WritesDone();
  EXPECT_EQ(writer2->Finish().error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(StoredTables(), before);

  int next = 0;
  auto uploaded = company_->UploadTableStream(TableHeader(),
                                              [&](v1::TableChunk* chunk) -> absl::StatusOr<bool> {
                                                if (next == 2) return false;
                                                *chunk = TableRows(next++);
                                                return true;
                                              });
  ASSERT_OK(uploaded);
  EXPECT_EQ(uploaded->row_count(), 200);
  EXPECT_EQ(StoredTables(), before + 1);
}

TEST_F(StreamTest, CliRefusesAFileThatIsNotUtf8BeforeSendingAndTheFixedFileImports) {
  // A 3,000-row file whose row 2,002 has a Latin-1 'é': the CLI names the line and column and
  // sends nothing; the same command on the fixed file then imports every row.
  const std::string path = ::testing::TempDir() + "/stream_test_people.csv";
  auto write = [&](bool broken) {
    std::ofstream out(path, std::ios::trunc);
    out << "id,race,sex\n";
    for (int i = 0; i < 3000; ++i) {
      out << "cli" << i << "," << (i % 3 == 0 ? "A" : "B") << ","
          << (i == 2000 && broken ? "F\xE9" : (i % 2 == 0 ? "F" : "M")) << "\n";
    }
  };
  const std::string command =
      absl::StrCat("--server ", server_->target(), " --key ", regulator_key_,
                   " import --dataset pop --csv ", path, " --key-column id --attributes race,sex");
  write(/*broken=*/true);
  CliResult refused = RunCli(command);
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.output.find(path + ":2002: column 'sex' is not valid UTF-8"), std::string::npos)
      << refused.output;
  EXPECT_EQ(SubjectCount(), 500);

  write(/*broken=*/false);
  CliResult imported = RunCli(command);
  EXPECT_EQ(imported.exit_code, 0) << imported.output;
  EXPECT_NE(imported.output.find("rows imported: 3000 of 3000"), std::string::npos)
      << imported.output;
  EXPECT_EQ(SubjectCount(), 3500);
  // The same command again is a no-op.
  CliResult again = RunCli(command);
  EXPECT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("already imported with identical content"), std::string::npos);
  EXPECT_EQ(SubjectCount(), 3500);
}

TEST_F(StreamTest, HugeUnknownNamesComeBackAsInvalidArgument) {
  // A 20,000-character name must not turn the error into oversized trailers.
  v1::NoisyCountsRequest req;
  req.set_idempotency_key("huge-name");
  req.set_table_handle(table_handle_);
  req.add_columns(std::string(20000, 'c'));
  req.set_epsilon(1);
  EXPECT_THAT(company_->NoisyCounts(req), StatusIs(absl::StatusCode::kInvalidArgument, "columns"));
  req.clear_columns();
  req.add_attributes(std::string(20000, 'a'));
  EXPECT_THAT(company_->NoisyCounts(req),
              StatusIs(absl::StatusCode::kInvalidArgument, "attributes"));
  v1::GrantBudgetRequest grant;
  grant.set_company(std::string(20000, 'z'));
  grant.set_dataset("pop");
  grant.set_epsilon(1);
  EXPECT_THAT(regulator_->GrantBudget(grant), StatusIs(absl::StatusCode::kNotFound));
}

}  // namespace
}  // namespace fairvault::testing
