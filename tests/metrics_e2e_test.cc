// The operators' metrics end to end (issue 11 §4): the real server with --metrics-listen on a
// loopback port, scraped with a plain HTTP GET. Releases, a replay, refusals and a job move the
// counters by exactly what was done; and no subject key, attribute or column value, name,
// handle or key ever appears in the metrics or in the server's log.
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "core/testing/files.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/testing/status_matchers.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/impl/codegen/client_unary_call.h"
#include "gtest/gtest.h"
#include "tests/metrics_scrape.h"
#include "tests/vault_fixture.h"

namespace fairvault::testing {
namespace {

namespace v1 = ::fairvault::v1;

constexpr char kCounts[] = "/fairvault.v1.CompanyService/NoisyCounts";

std::string Requests(const char* method, const char* code) {
  return absl::StrCat("fairvault_grpc_requests_total{code=\"", code, "\",method=\"", method, "\"}");
}
std::string Charges(const char* kind) {
  return absl::StrCat("fairvault_charges_total{kind=\"", kind, "\",outcome=\"released\"}");
}
std::string Refusals(const char* kind, const char* reason) {
  return absl::StrCat("fairvault_refusals_total{kind=\"", kind, "\",reason=\"", reason, "\"}");
}

// The sum of every sample of a metric (all label sets).
double Total(const std::string& text, const std::string& name) {
  std::istringstream lines(text);
  std::string line;
  double sum = 0;
  while (std::getline(lines, line)) {
    if (absl::StartsWith(line, absl::StrCat(name, "{")) ||
        absl::StartsWith(line, absl::StrCat(name, " "))) {
      sum += std::strtod(line.c_str() + line.rfind(' ') + 1, nullptr);
    }
  }
  return sum;
}

// One unary call by full method name with an empty request (a valid health check for service
// "", or any name a client chooses); the response is read into an empty message.
grpc::Status CallRaw(const std::string& target, const std::string& method) {
  auto channel = grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  grpc::internal::RpcMethod rpc(method.c_str(), grpc::internal::RpcMethod::NORMAL_RPC, channel);
  grpc::ClientContext ctx;
  v1::ListDatasetsRequest req;
  v1::ListDatasetsRequest resp;  // no fields: any response parses
  return grpc::internal::BlockingUnaryCall(channel.get(), rpc, &ctx, req, &resp);
}

class MetricsEndToEndTest : public VaultFixture {
 protected:
  void StartWithMetrics(const Population& population, double epsilon, double delta) {
    serve_flags_ = {"--metrics-listen", "127.0.0.1:0"};
    StartVault(population, epsilon, delta);
  }

  std::string Scrape() {
    auto got = HttpGet(server_->metrics_port(), "/metrics");
    EXPECT_OK(got);
    if (!got.ok()) return "";
    EXPECT_EQ(got->status, 200);
    return got->body;
  }

  v1::NoisyCountsRequest Counts(const std::string& key, double epsilon) {
    v1::NoisyCountsRequest req;
    req.set_idempotency_key(key);
    req.set_table_handle(table_handle_);
    req.add_columns("region");
    req.add_attributes("sex");
    req.set_epsilon(epsilon);
    return req;
  }

  // Submits an exponential-mechanism job on the fixture's table and waits for it; returns the
  // number of GetJob calls it took.
  int RunJob(client::Client& company, const std::string& table, const std::string& key,
             const std::string& label, const std::vector<std::string>& hypotheses) {
    v1::FitFairModelRequest req;
    req.set_idempotency_key(key);
    req.set_table_handle(table);
    req.set_algorithm(v1::FAIR_MODEL_ALGORITHM_EXPONENTIAL_MECHANISM);
    req.set_label_column(label);
    for (const auto& h : hypotheses) req.add_hypothesis_columns(h);
    req.set_em_delta(0.01);
    req.set_epsilon(1);
    auto submitted = company.FitFairModel(req);
    EXPECT_OK(submitted);
    if (!submitted.ok()) return 0;
    v1::GetJobRequest get;
    get.set_job_id(submitted->job().id());
    for (int polls = 1; polls < 6000; ++polls) {
      auto job = company.GetJob(get);
      EXPECT_OK(job);
      if (!job.ok()) return polls;
      if (job->job().state() == v1::JOB_STATE_SUCCEEDED) return polls;
      EXPECT_TRUE(job->job().state() == v1::JOB_STATE_QUEUED ||
                  job->job().state() == v1::JOB_STATE_RUNNING)
          << job->job().error();
      absl::SleepFor(absl::Milliseconds(10));
    }
    ADD_FAILURE() << "the job did not finish";
    return 0;
  }

  // Scrapes until the server's job runner is idle (the store records a job's end before its
  // worker counts it).
  std::string ScrapeIdle() {
    std::string text;
    for (int i = 0; i < 500; ++i) {
      text = Scrape();
      if (SampleValue(text, "fairvault_jobs_running") == 0 &&
          SampleValue(text, "fairvault_jobs_queued") == 0) {
        break;
      }
      absl::SleepFor(absl::Milliseconds(10));
    }
    return text;
  }
};

TEST_F(MetricsEndToEndTest, CountersMoveByExactlyWhatWasDone) {
  ASSERT_NO_FATAL_FAILURE(StartWithMetrics(MakePopulation(3000, 11), /*epsilon=*/5, 1e-6));
  ASSERT_GT(server_->metrics_port(), 0);
  ASSERT_NE(server_->metrics_port(), server_->port());
  const std::string before = Scrape();
  // Scraping is not a gRPC call and counts nothing.
  EXPECT_EQ(Total(Scrape(), "fairvault_grpc_requests_total"),
            Total(before, "fairvault_grpc_requests_total"));

  ASSERT_OK(company_->NoisyCounts(Counts("c1", 1)));  // charge
  ASSERT_OK(company_->NoisyCounts(Counts("c2", 1)));  // charge
  ASSERT_OK(company_->NoisyCounts(Counts("c1", 1)));  // replay
  const int polls = RunJob(*company_, table_handle_, "job-1", "label", {"prediction", "label"});
  // Spent 3 of the grant's 5; a cap of 3.5 leaves 0.5 across all companies.
  v1::SetDatasetCapRequest cap;
  cap.set_dataset("pop");
  cap.set_epsilon(3.5);
  cap.set_delta(1e-6);
  ASSERT_OK(regulator_->SetDatasetCap(cap));
  EXPECT_THAT(company_->NoisyCounts(Counts("c3", 1)),
              StatusIs(absl::StatusCode::kResourceExhausted, "dataset-wide cap"));
  EXPECT_THAT(company_->NoisyCounts(Counts("c4", 10)),
              StatusIs(absl::StatusCode::kResourceExhausted, "grant"));
  EXPECT_THAT(company_->NoisyCounts(Counts("c5", -1)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(server_->Connect("")->NoisyCounts(Counts("c6", 1)),
              StatusIs(absl::StatusCode::kUnauthenticated));
  EXPECT_THAT(regulator_->NoisyCounts(Counts("c7", 1)),
              StatusIs(absl::StatusCode::kPermissionDenied));
  // The health service is counted too, under its own method name.
  EXPECT_TRUE(CallRaw(server_->target(), "/grpc.health.v1.Health/Check").ok());

  const std::string after = ScrapeIdle();
  auto delta = [&](const std::string& series) {
    return SampleValue(after, series) - SampleValue(before, series);
  };
  EXPECT_EQ(delta(Requests(kCounts, "OK")), 3) << after;
  EXPECT_EQ(delta(Requests(kCounts, "RESOURCE_EXHAUSTED")), 2);
  EXPECT_EQ(delta(Requests(kCounts, "INVALID_ARGUMENT")), 1);
  EXPECT_EQ(delta(Requests(kCounts, "UNAUTHENTICATED")), 1);
  EXPECT_EQ(delta(Requests(kCounts, "PERMISSION_DENIED")), 1);
  EXPECT_EQ(delta(Requests("/fairvault.v1.CompanyService/FitFairModel", "OK")), 1);
  EXPECT_EQ(delta(Requests("/fairvault.v1.CompanyService/GetJob", "OK")), polls);
  EXPECT_EQ(delta(Requests("/fairvault.v1.RegulatorService/SetDatasetCap", "OK")), 1);
  EXPECT_EQ(delta(Requests("/grpc.health.v1.Health/Check", "OK")), 1);
  EXPECT_EQ(delta(absl::StrCat("fairvault_grpc_request_duration_seconds_count{code=\"OK\","
                               "method=\"",
                               kCounts, "\"}")),
            3);
  EXPECT_EQ(delta(Charges("NoisyCounts")), 2);
  EXPECT_EQ(delta(Charges("FitFairModel")), 1);
  EXPECT_EQ(Total(after, "fairvault_charges_total") - Total(before, "fairvault_charges_total"), 3);
  EXPECT_EQ(delta("fairvault_replays_total{kind=\"NoisyCounts\"}"), 1);
  EXPECT_EQ(Total(after, "fairvault_replays_total") - Total(before, "fairvault_replays_total"), 1);
  EXPECT_EQ(delta(Refusals("NoisyCounts", "cap_exhausted")), 1);
  EXPECT_EQ(delta(Refusals("NoisyCounts", "budget_exhausted")), 1);
  EXPECT_EQ(delta(Refusals("NoisyCounts", "invalid_argument")), 1);
  EXPECT_EQ(delta(Refusals("NoisyCounts", "unauthenticated")), 1);
  EXPECT_EQ(delta(Refusals("NoisyCounts", "permission_denied")), 1);
  EXPECT_EQ(Total(after, "fairvault_refusals_total") - Total(before, "fairvault_refusals_total"),
            5);
  EXPECT_EQ(delta("fairvault_jobs_finished_total{state=\"succeeded\"}"), 1);
  EXPECT_EQ(SampleValue(after, "fairvault_jobs_running"), 0);
  // The ledger agrees: three charges.
  auto ledger = company_->ListLedger();
  ASSERT_OK(ledger);
  int charges = 0;
  for (const auto& row : ledger->entries()) charges += row.kind() == "charge";
  EXPECT_EQ(charges, 3);
}

// The SQLite store's checkpointer reports the size of the write-ahead log (every 200 ms): the
// fixture's imports, upload and grants are in it, within the log's bound.
TEST_F(MetricsEndToEndTest, TheSqliteLogsSizeIsAGauge) {
  ASSERT_NO_FATAL_FAILURE(StartWithMetrics(MakePopulation(3000, 11), /*epsilon=*/5, 1e-6));
  ASSERT_OK(company_->NoisyCounts(Counts("c1", 1)));
  double wal = 0;
  for (int i = 0; i < 250 && wal <= 0; ++i) {
    wal = SampleValue(Scrape(), "fairvault_sqlite_wal_bytes");
    if (wal <= 0) absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_GT(wal, 0);
  EXPECT_LE(wal, 65 << 20);  // docs/operations.md: 64 MiB plus the last transaction
}

// Without --metrics-listen the server prints no metrics line and opens no second port; a bad
// address stops it with a usage error.
TEST(MetricsServeFlagTest, OffByDefaultAndBadAddressesAreUsageErrors) {
  ServerProcess plain(TempDatabasePath("metrics-off"));
  ASSERT_OK(plain.Start());
  EXPECT_EQ(plain.metrics_port(), 0);
  ASSERT_OK(plain.Stop());

  const std::string db = TempDatabasePath("metrics-bad");
  const std::string command = absl::StrCat(FAIRVAULT_SERVER_BINARY, " serve --db ", db,
                                           " --listen 127.0.0.1:0 --metrics-listen localhost:1");
  EXPECT_EQ(WEXITSTATUS(system((command + " >/dev/null 2>&1").c_str())), 2);
  unlink(db.c_str());
}

// ---- no leak -----------------------------------------------------------------------------------

// A vault whose subjects, categories, company columns and names are all distinctive strings;
// everything a regulator and a company do with it, right and wrong; then neither /metrics nor
// anything the server wrote on stdout or stderr contains any of them. The same search finds
// the strings the server does print (a positive control), so it would find a leak.
TEST(MetricsNoLeakTest, NoDataOrNameAppearsInMetricsOrLog) {
  const std::string log_path = TempDatabasePath("metrics-log") + ".log";
  ServerProcess server(TempDatabasePath("metrics-leak"));
  auto regulator_key = server.Bootstrap("regulator");
  ASSERT_OK(regulator_key);
  server.set_serve_flags({"--metrics-listen", "127.0.0.1:0"});
  server.set_log_path(log_path);
  ASSERT_OK(server.Start());
  auto regulator = server.Connect(*regulator_key);

  // Secrets: every string below must stay out of the metrics and the log.
  std::vector<std::string> secrets = {"subj-7f3a9",        "CategoryZebra",       "CategoryOkapi",
                                      "ColValueNarwhal",   "ColValueAxolotl",     "colnamequetzal",
                                      "dsleakmarmoset",    "acctleakpangolin",    "attrleakibis",
                                      "idemkeyleakwombat", "ColNameMissingWalrus"};
  const int n = 400;
  std::vector<std::string> keys;
  std::vector<std::string> categories;
  for (int i = 0; i < n; ++i) {
    keys.push_back(absl::StrCat("subj-7f3a9-", i));
    categories.push_back(i % 3 == 0 ? "CategoryZebra" : "CategoryOkapi");
  }
  v1::CreateDatasetRequest dataset;
  dataset.set_name("dsleakmarmoset");
  v1::Attribute* attribute = dataset.add_attributes();
  attribute->set_name("attrleakibis");
  attribute->add_categories("CategoryZebra");
  attribute->add_categories("CategoryOkapi");
  ASSERT_OK(regulator->CreateDataset(dataset));
  v1::ImportHeader header;
  header.set_dataset("dsleakmarmoset");
  header.set_batch_id("batch-subj-7f3a9");
  header.add_attributes("attrleakibis");
  ASSERT_OK(regulator->ImportAttributes(header, keys, categories, 100));
  // A category the attribute does not have, and a repeated key: refused imports.
  EXPECT_FALSE(
      regulator->ImportAttributes(header, {"subj-7f3a9-x"}, {"CategoryZebraNope"}, 100).ok());
  header.set_batch_id("batch-2");
  EXPECT_FALSE(regulator->ImportAttributes(header, {"subj-7f3a9-1"}, {"CategoryZebra"}, 100).ok());

  v1::CreateAccountRequest account;
  account.set_name("acctleakpangolin");
  account.set_role(v1::ROLE_COMPANY);
  auto created = regulator->CreateAccount(account);
  ASSERT_OK(created);
  secrets.push_back(created->api_key());
  auto company = server.Connect(created->api_key());
  v1::GrantBudgetRequest grant;
  grant.set_company("acctleakpangolin");
  grant.set_dataset("dsleakmarmoset");
  grant.set_epsilon(20);
  ASSERT_OK(regulator->GrantBudget(grant));

  // The company's table: a categorical column of distinctive values, a prediction and a label.
  v1::TableHeader table;
  table.set_dataset("dsleakmarmoset");
  for (auto [name, type] : {std::pair{"colnamequetzal", v1::COLUMN_TYPE_CATEGORICAL},
                            std::pair{"prediction", v1::COLUMN_TYPE_NUMERIC},
                            std::pair{"label", v1::COLUMN_TYPE_NUMERIC},
                            std::pair{"skewlabel", v1::COLUMN_TYPE_NUMERIC}}) {
    v1::ColumnSpec* c = table.add_columns();
    c->set_name(name);
    c->set_type(type);
  }
  std::vector<v1::ColumnValues> columns(4);
  for (int i = 0; i < n; ++i) {
    columns[0].add_categorical(i % 2 ? "ColValueNarwhal" : "ColValueAxolotl");
    columns[1].add_numeric(i % 5 < 2);
    columns[2].add_numeric(i % 7 < 3);
    // Label 1 on 2 of the Zebra rows (i % 3 == 0) and on every other Okapi row: the public
    // sizes (135 label-1 rows over two groups: at most 67 in the smaller) admit an
    // exponential-mechanism job whose released M the data then puts below 1.
    columns[3].add_numeric(i % 3 == 0 ? (i < 6 ? 1 : 0) : (i % 2));
  }
  auto uploaded = company->UploadTable(table, keys, columns, 100);
  ASSERT_OK(uploaded);
  const std::string handle = uploaded->table_handle();
  secrets.push_back(handle);

  // Releases, a replay, refusals and bad requests that echo the data back to the caller.
  v1::NoisyCountsRequest counts;
  counts.set_idempotency_key("idemkeyleakwombat");
  counts.set_table_handle(handle);
  counts.add_columns("colnamequetzal");
  counts.set_epsilon(0.5);
  auto released = company->NoisyCounts(counts);
  ASSERT_OK(released);
  ASSERT_OK(company->NoisyCounts(counts));  // replay
  counts.set_idempotency_key("idemkeyleakwombat-2");
  counts.set_epsilon(100);
  EXPECT_THAT(company->NoisyCounts(counts), StatusIs(absl::StatusCode::kResourceExhausted));
  counts.clear_columns();
  counts.add_columns("ColNameMissingWalrus");
  EXPECT_THAT(company->NoisyCounts(counts), StatusIs(absl::StatusCode::kInvalidArgument));
  counts.set_table_handle("tbl-subj-7f3a9-unknown");
  EXPECT_FALSE(company->NoisyCounts(counts).ok());
  v1::FitEqualizedOddsRequest eo;
  eo.set_idempotency_key("idemkeyleakwombat-eo");
  eo.set_table_handle(handle);
  eo.set_prediction_column("prediction");
  eo.set_label_column("label");
  eo.set_epsilon(1);
  eo.set_gamma(0.2);
  eo.set_decision_floor(0.05);
  auto fitted = company->FitEqualizedOddsPostProcessor(eo);
  ASSERT_OK(fitted);
  // Decisions, including a key the vault does not hold and a malformed request.
  v1::DecideRequest decide;
  decide.set_artifact_id(fitted->artifact().id());
  for (int i = 0; i < 20; ++i) {
    decide.add_subject_keys(keys[i]);
    decide.add_values(i % 2);
  }
  EXPECT_OK(company->Decide(decide));
  decide.add_subject_keys("subj-7f3a9-not-in-vault");
  decide.add_values(1);
  (void)company->Decide(decide);
  decide.add_subject_keys("subj-7f3a9-0");  // values and keys differ in length
  EXPECT_FALSE(company->Decide(decide).ok());
  // A job that runs, and one that fails (the data's smallest group of label-1 rows is too small
  // for the exponential mechanism's released M; public sizes allowed it, so it is charged).
  v1::FitFairModelRequest job;
  job.set_idempotency_key("idemkeyleakwombat-job");
  job.set_table_handle(handle);
  job.set_algorithm(v1::FAIR_MODEL_ALGORITHM_EXPONENTIAL_MECHANISM);
  job.set_label_column("label");
  job.add_hypothesis_columns("prediction");
  job.add_hypothesis_columns("label");
  job.set_em_delta(0.01);
  job.set_epsilon(1);
  auto submitted = company->FitFairModel(job);
  ASSERT_OK(submitted);
  job.set_idempotency_key("idemkeyleakwombat-job-2");
  job.set_label_column("skewlabel");
  job.clear_hypothesis_columns();
  job.add_hypothesis_columns("prediction");
  job.add_hypothesis_columns("skewlabel");
  // Shift ln(1e9)/0.35 = 59.2 < 67 − 1: admitted; M ≈ 2 − 59.2 + noise of scale 2.9, above 1
  // with probability about e^-20.
  job.set_em_delta(1e-9);
  job.set_epsilon(0.7);
  auto failing = company->FitFairModel(job);
  ASSERT_OK(failing);
  for (const auto& id : {submitted->job().id(), failing->job().id()}) {
    v1::GetJobRequest get;
    get.set_job_id(id);
    for (int i = 0; i < 3000; ++i) {
      auto state = company->GetJob(get);
      ASSERT_OK(state);
      if (state->job().state() != v1::JOB_STATE_QUEUED &&
          state->job().state() != v1::JOB_STATE_RUNNING) {
        break;
      }
      absl::SleepFor(absl::Milliseconds(10));
    }
  }
  // A wrong key built from a subject key, a method name with one in it, and a metrics path.
  EXPECT_THAT(server.Connect("fv_1_subj-7f3a9-as-key")->GetBudget(),
              StatusIs(absl::StatusCode::kUnauthenticated));
  EXPECT_EQ(CallRaw(server.target(), "/fairvault.v1.CompanyService/subj-7f3a9-method").error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
  auto not_found = HttpGet(server.metrics_port(), "/subj-7f3a9-path");
  ASSERT_OK(not_found);
  EXPECT_EQ(not_found->status, 404);

  auto scraped = HttpGet(server.metrics_port(), "/metrics");
  ASSERT_OK(scraped);
  const std::string metrics = scraped->body;
  ASSERT_OK(server.Stop());
  const std::string log = ReadFile(log_path);
  unlink(log_path.c_str());

  // Positive controls: the search finds what the server does print and count.
  EXPECT_TRUE(absl::StrContains(log, "fairvault-server listening on port")) << log;
  EXPECT_TRUE(absl::StrContains(log, "fairvault-server metrics on port")) << log;
  EXPECT_TRUE(absl::StrContains(log, "shutting down")) << log;
  EXPECT_TRUE(absl::StrContains(metrics, "fairvault_charges_total{kind=\"NoisyCounts\""));
  EXPECT_EQ(SampleValue(metrics, Charges("FitEqualizedOddsPostProcessor")), 1);
  EXPECT_EQ(SampleValue(metrics, Charges("DecisionLicence")), 1);
  EXPECT_EQ(SampleValue(metrics, "fairvault_jobs_finished_total{state=\"succeeded\"}") +
                SampleValue(metrics, "fairvault_jobs_finished_total{state=\"failed\"}"),
            2);
  EXPECT_EQ(SampleValue(metrics,
                        "fairvault_grpc_requests_total{code=\"UNIMPLEMENTED\","
                        "method=\"unknown\"}"),
            1)
      << metrics;
  for (const std::string& secret : secrets) {
    EXPECT_FALSE(absl::StrContains(metrics, secret)) << secret << " in /metrics:\n" << metrics;
    EXPECT_FALSE(absl::StrContains(log, secret)) << secret << " in the log:\n" << log;
  }
}

}  // namespace
}  // namespace fairvault::testing
