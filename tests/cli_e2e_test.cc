// The `fairvault` CLI against the real server binary, on what issue 12 §2-3 asks of it: an exit
// status per class of failure, --json errors as one JSON object on stderr with stdout clean,
// replays that say so (and fresh charges that do not), --dry-run that charges nothing and
// prices what the real call then charges, and counts with confidence intervals.
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "core/testing/files.h"
#include "absl/strings/numbers.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/vault_fixture.h"

#ifndef FAIRVAULT_CLI_BINARY
#error "FAIRVAULT_CLI_BINARY must name the fairvault binary"
#endif

namespace fairvault::testing {
namespace {

namespace v1 = ::fairvault::v1;
using ::testing::HasSubstr;
using ::testing::Not;

struct CliRun {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs the CLI with `args` (shell words), stdout and stderr apart.
CliRun Cli(const std::string& args) {
  static int calls = 0;
  const std::string err_path = (std::filesystem::temp_directory_path() /
                                absl::StrCat("fv-cli-e2e-", getpid(), "-", calls++, ".err"))
                                   .string();
  CliRun run;
  FILE* pipe = popen(
      (std::string(FAIRVAULT_CLI_BINARY) + " " + args + " 2>'" + err_path + "'").c_str(), "r");
  if (pipe == nullptr) return run;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) run.out.append(buf, n);
  const int status = pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.err = ReadFile(err_path);
  std::filesystem::remove(err_path);
  return run;
}

// Parses one JSON object; fails the test when it is not one.
google::protobuf::Struct Json(const std::string& text) {
  google::protobuf::Struct parsed;
  const auto status = google::protobuf::util::JsonStringToMessage(text, &parsed);
  EXPECT_TRUE(status.ok()) << status.ToString() << " in: " << text;
  return parsed;
}

const google::protobuf::Value& Field(const google::protobuf::Struct& s, const std::string& name) {
  static const google::protobuf::Value* missing = new google::protobuf::Value();
  auto it = s.fields().find(name);
  return it == s.fields().end() ? *missing : it->second;
}

// An integer field: protobuf's JSON writes int64 as a string.
int64_t Int(const google::protobuf::Value& v) {
  int64_t parsed = -1;
  if (v.kind_case() == google::protobuf::Value::kNumberValue)
    return static_cast<int64_t>(v.number_value());
  return absl::SimpleAtoi(v.string_value(), &parsed) ? parsed : -1;
}

// A loopback port nothing listens on (bound, then closed).
int ClosedPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

// "ledger seq: N" in a spending command's text output, or -1.
int64_t LedgerSeqIn(const std::string& out) {
  const size_t at = out.find("ledger seq: ");
  if (at == std::string::npos) return -1;
  int64_t seq = -1;
  const size_t begin = at + 12;
  if (!absl::SimpleAtoi(out.substr(begin, out.find('\n', begin) - begin), &seq)) return -1;
  return seq;
}

class CliEndToEndTest : public VaultFixture {
 protected:
  void SetUp() override { StartVault(MakePopulation(400, 12), /*epsilon=*/5, /*delta=*/0); }

  std::string As(const std::string& key) {
    return absl::StrCat("--server ", server_->target(), " --key ", key, " ");
  }
  std::string Company() { return As(company_key_); }

  v1::Budget Budget() {
    auto resp = company_->GetBudget();
    EXPECT_OK(resp);
    return resp.ok() && resp->budgets_size() == 1 ? resp->budgets(0) : v1::Budget();
  }
  // An equalized-odds post-processor `decide` can use (decision floor 0.1), fitted through the
  // CLI on the population's table; its artifact id.
  std::string FitDecidableEo() {
    CliRun fit = Cli(Company() + "postprocess eo --table " + table_handle_ +
                     " --prediction-column prediction --label-column label --attributes sex "
                     "--epsilon 1 --gamma 0.05 --decision-floor 0.1 --json");
    EXPECT_EQ(fit.exit_code, 0) << fit.err;
    return Field(Field(Json(fit.out), "artifact").struct_value(), "id").string_value();
  }
  int LedgerRows() {
    auto resp = auditor_->AuditorListLedger();
    EXPECT_OK(resp);
    return resp.ok() ? resp->entries_size() : -1;
  }
};

TEST_F(CliEndToEndTest, ExitStatusByClassOfFailure) {
  const std::string counts = absl::StrCat("counts --table ", table_handle_, " --attributes sex ");
  // 2: a command-line mistake, or a local file the CLI refuses before calling.
  CliRun r = Cli(Company() + counts + "--epsilon 1 --bogus-flag");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("unknown flag --bogus-flag"));
  r = Cli(Company() +
          "decide --artifact-id art_x --csv /nonexistent/rows.csv --key-column id "
          "--value-column p");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  // 3: a real overspend (the grant is 5).
  r = Cli(Company() + counts + "--epsilon 100");
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_THAT(r.err, HasSubstr("RESOURCE_EXHAUSTED"));
  EXPECT_EQ(r.out, "");
  // 4: a company calling a regulator command; a wrong key.
  r = Cli(Company() + "grant --company acme --dataset pop --epsilon 50");
  EXPECT_EQ(r.exit_code, 4) << r.err;
  EXPECT_THAT(r.err, HasSubstr("PERMISSION_DENIED"));
  std::string forged = company_key_;
  forged.back() = forged.back() == '0' ? '1' : '0';
  r = Cli(As(forged) + "budget");
  EXPECT_EQ(r.exit_code, 4) << r.err;
  EXPECT_THAT(r.err, HasSubstr("UNAUTHENTICATED"));
  // 5: an unknown artifact.
  r = Cli(Company() + "artifact get --id art_does_not_exist");
  EXPECT_EQ(r.exit_code, 5) << r.err;
  // 6: a server that is not there.
  r = Cli(absl::StrCat("--server 127.0.0.1:", ClosedPort(), " --key ", company_key_,
                       " --deadline 10 budget"));
  EXPECT_EQ(r.exit_code, 6) << r.err;
  EXPECT_THAT(r.err, HasSubstr("UNAVAILABLE"));
  // 1: anything else, e.g. the vault's INVALID_ARGUMENT for an unknown column.
  r = Cli(Company() + counts + "--epsilon 1 --columns zip");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("INVALID_ARGUMENT"));
  // Nothing above was charged.
  EXPECT_DOUBLE_EQ(Budget().epsilon_spent(), 0);
  // `health` keeps 0/1 for container health checks.
  r = Cli(absl::StrCat("health --server 127.0.0.1:", ClosedPort()));
  EXPECT_EQ(r.exit_code, 1) << r.err;
}

TEST_F(CliEndToEndTest, JsonErrorsAreOneObjectOnStderrAndStdoutStaysClean) {
  CliRun r = Cli(Company() + "--json counts --table " + table_handle_ + " --epsilon 100");
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.out, "");
  ASSERT_EQ(r.err.find('\n'), r.err.size() - 1) << "one line: " << r.err;
  const google::protobuf::Struct error = Field(Json(r.err), "error").struct_value();
  EXPECT_EQ(Field(error, "code").string_value(), "RESOURCE_EXHAUSTED");
  EXPECT_EQ(Field(error, "exit_code").number_value(), 3);
  EXPECT_EQ(Field(error, "class").string_value(), "budget");
  EXPECT_EQ(Field(error, "field").string_value(), "epsilon");
  EXPECT_TRUE(Field(error, "from_vault").bool_value());
  EXPECT_THAT(Field(error, "message").string_value(), HasSubstr("request costs epsilon=100"));

  // A usage error, --json after the command.
  r = Cli(Company() + "counts --table " + table_handle_ + " --epsilon -1 --json");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  const google::protobuf::Struct usage = Field(Json(r.err), "error").struct_value();
  EXPECT_EQ(Field(usage, "class").string_value(), "usage");
  EXPECT_EQ(Field(usage, "field").string_value(), "epsilon");
  EXPECT_FALSE(Field(usage, "from_vault").bool_value());

  // Not found, from the vault.
  r = Cli(Company() + "--json artifact get --id art_does_not_exist");
  EXPECT_EQ(r.exit_code, 5);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(Field(Field(Json(r.err), "error").struct_value(), "code").string_value(), "NOT_FOUND");
}

TEST_F(CliEndToEndTest, AReplaySaysSoAndAFreshChargeDoesNot) {
  const std::string counts = Company() + "counts --table " + table_handle_ +
                             " --columns region --attributes sex --epsilon 0.5 ";
  CliRun fresh = Cli(counts + "--idempotency-key cli-replay-1");
  ASSERT_EQ(fresh.exit_code, 0) << fresh.err;
  EXPECT_THAT(fresh.err, Not(HasSubstr("stored release")));
  const int64_t seq = LedgerSeqIn(fresh.out);
  ASSERT_GT(seq, 0) << fresh.out;
  // Confidence intervals on every cell.
  EXPECT_THAT(fresh.out, HasSubstr("CI_LOW"));
  EXPECT_THAT(fresh.out, HasSubstr("95% confidence interval"));

  CliRun again = Cli(counts + "--idempotency-key cli-replay-1");
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_THAT(again.err,
              HasSubstr(absl::StrCat("stored release from ledger seq ", seq,
                                     ", not charged again; balance shown is as of then")));
  EXPECT_THAT(again.err, HasSubstr("budget now on 'pop'"));
  EXPECT_EQ(again.out, fresh.out);  // stdout is the stored release, format unchanged
  EXPECT_DOUBLE_EQ(Budget().epsilon_spent(), 0.5);

  CliRun json = Cli(counts + "--idempotency-key cli-replay-1 --json");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_EQ(json.err, "");
  const google::protobuf::Struct replayed = Json(json.out);
  EXPECT_TRUE(Field(replayed, "replayed").bool_value());
  EXPECT_EQ(Field(replayed, "replayed_ledger_seq").number_value(), seq);
  EXPECT_EQ(Field(Field(replayed, "budget_now").struct_value(), "epsilon_spent").number_value(),
            0.5);
  EXPECT_EQ(Field(replayed, "cells").list_value().values_size(), 4);

  CliRun other = Cli(counts + "--idempotency-key cli-replay-2 --json");
  ASSERT_EQ(other.exit_code, 0) << other.err;
  const google::protobuf::Struct charged = Json(other.out);
  EXPECT_FALSE(Field(charged, "replayed").bool_value());
  EXPECT_EQ(Field(charged, "replayed_ledger_seq").number_value(), 0);
  EXPECT_DOUBLE_EQ(Budget().epsilon_spent(), 1.0);
}

// A call that ends before its answer (here its deadline passes during the statistical-parity
// LP, which the vault solves after the charge) with a key the CLI drew at random: the error
// names the key, and repeating the command with it returns the charged release, finished, with
// no second charge.
TEST_F(CliEndToEndTest, ACallCutOffAfterItsChargeNamesItsKeyWhichGetsTheOutcome) {
  // A score spread over every bin, so that the LP has work to do: 6 groups x 258 bins (the most
  // the LP's size limit allows them), 1.2 s alone on the reference machine, against the call's
  // 0.3 s deadline.
  const Population pop = MakePopulation(400, 12);
  const std::string csv = ::testing::TempDir() + "/fv-cut-scores.csv";
  std::string rows = "id,score\n";
  for (size_t i = 0; i < pop.keys.size(); ++i) {
    absl::StrAppend(&rows, pop.keys[i], ",", (i * 7919 % 400) / 400.0 + pop.sex[i] * 0.001, "\n");
  }
  std::ofstream(csv) << rows;
  CliRun upload = Cli(Company() + "table upload --dataset pop --csv " + csv +
                      " --key-column id --numeric score");
  ASSERT_EQ(upload.exit_code, 0) << upload.err;
  const std::string handle(absl::StripAsciiWhitespace(upload.out));  // the handle alone
  const std::string fit = "postprocess regression --table " + handle +
                          " --score-column score --lo 0 --hi 1 --bins 258 --alpha 0.1 "
                          "--solver lp --attributes sex,race ";
  CliRun cut = Cli(Company() + "--deadline 0.3 " + fit + "--epsilon 0.5");
  if (cut.exit_code == 0) GTEST_SKIP() << "the LP finished within the 0.3 s deadline here";
  ASSERT_EQ(cut.exit_code, 6) << cut.out << cut.err;
  EXPECT_THAT(cut.err, HasSubstr("DEADLINE_EXCEEDED"));
  const size_t at = cut.err.find("repeat the command with --idempotency-key ");
  ASSERT_NE(at, std::string::npos) << cut.err;
  const std::string tail = cut.err.substr(at + 42);
  const std::string key = tail.substr(0, tail.find(' '));
  ASSERT_TRUE(absl::StartsWith(key, "cli-")) << cut.err;
  // The vault charges a unary call whatever its deadline once the request is in: wait for the
  // charge (a loaded machine may still be receiving it).
  for (int i = 0; i < 100 && Budget().epsilon_spent() == 0; ++i) {
    absl::SleepFor(absl::Milliseconds(100));
  }
  if (Budget().epsilon_spent() == 0) GTEST_SKIP() << "the deadline passed before it was sent";
  EXPECT_DOUBLE_EQ(Budget().epsilon_spent(), 0.5);

  CliRun again = Cli(Company() + fit + "--epsilon 0.5 --idempotency-key " + key);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_THAT(again.err, HasSubstr("stored release from ledger seq"));
  EXPECT_THAT(again.out, HasSubstr("artifact"));
  EXPECT_DOUBLE_EQ(Budget().epsilon_spent(), 0.5);

  // A key the user gave is not repeated back; a refusal names none.
  CliRun given =
      Cli(Company() + "--deadline 0.3 " + fit + "--epsilon 0.5 --idempotency-key cli-given-1");
  EXPECT_EQ(given.exit_code, 6) << given.err;
  EXPECT_THAT(given.err, Not(HasSubstr("idempotency key:")));
  CliRun refused = Cli(Company() + fit + "--epsilon 100");
  EXPECT_EQ(refused.exit_code, 3) << refused.err;
  EXPECT_THAT(refused.err, Not(HasSubstr("idempotency key")));
}

// A charged call whose --out cannot be written: the error says the call succeeded and names
// the key that gets its outcome again, uncharged; a --dry-run names none.
TEST_F(CliEndToEndTest, AnUnwritableOutAfterTheChargeNamesTheKeyThatGetsItAgain) {
  const std::string counts = Company() + "counts --table " + table_handle_ +
                             " --columns region --attributes sex --epsilon 0.5 ";
  CliRun unwritable = Cli(counts + "--out /nonexistent-dir/cells.csv");
  ASSERT_EQ(unwritable.exit_code, 2) << unwritable.err;
  const std::string said = "the call itself succeeded and its outcome is stored: repeat the "
                           "command with --idempotency-key ";
  const size_t at = unwritable.err.find(said);
  ASSERT_NE(at, std::string::npos) << unwritable.err;
  const std::string tail = unwritable.err.substr(at + said.size());
  const std::string key = tail.substr(0, tail.find(' '));
  ASSERT_TRUE(absl::StartsWith(key, "cli-")) << unwritable.err;
  EXPECT_DOUBLE_EQ(Budget().epsilon_spent(), 0.5);

  const std::string out = ::testing::TempDir() + "/fv-cells-again.csv";
  CliRun again = Cli(counts + "--idempotency-key " + key + " --out " + out);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_THAT(again.err, HasSubstr("stored release from ledger seq"));
  EXPECT_THAT(ReadFile(out), HasSubstr("noisy_count"));
  EXPECT_DOUBLE_EQ(Budget().epsilon_spent(), 0.5);

  CliRun dry = Cli(counts + "--dry-run --out /nonexistent-dir/cells.csv");
  EXPECT_THAT(dry.err, Not(HasSubstr("idempotency-key")));
}

TEST_F(CliEndToEndTest, DryRunChargesNothingAndPricesWhatTheCallCharges) {
  const std::string counts = Company() + "counts --table " + table_handle_ +
                             " --columns region --attributes sex --epsilon 0.75 ";
  const v1::Budget before = Budget();
  const int rows_before = LedgerRows();

  CliRun dry = Cli(counts + "--dry-run --json");
  ASSERT_EQ(dry.exit_code, 0) << dry.err;
  const google::protobuf::Struct preview = Json(dry.out);
  const double priced = Field(Field(preview, "cost").struct_value(), "epsilon").number_value();
  EXPECT_DOUBLE_EQ(priced, 0.75);
  EXPECT_TRUE(Field(preview, "admitted").bool_value());
  EXPECT_EQ(Int(Field(preview, "rows")), 400);
  EXPECT_EQ(Int(Field(preview, "groups")), 2);
  CliRun text = Cli(counts + "--dry-run");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("would charge: epsilon 0.75"));
  EXPECT_THAT(text.out, HasSubstr("would be admitted now: yes"));
  // Other spending commands price too, and nothing is charged or written.
  CliRun eo = Cli(Company() + "postprocess eo --table " + table_handle_ +
                  " --prediction-column prediction --label-column label --attributes sex "
                  "--epsilon 1 --gamma 0.05 --dry-run");
  EXPECT_EQ(eo.exit_code, 0) << eo.err;
  EXPECT_THAT(eo.out, HasSubstr("would charge: epsilon 1"));
  EXPECT_EQ(Budget().epsilon_spent(), before.epsilon_spent());
  EXPECT_EQ(Budget().releases(), before.releases());
  EXPECT_EQ(LedgerRows(), rows_before);

  // The real call charges exactly what the preview said.
  CliRun real = Cli(counts + "--json");
  ASSERT_EQ(real.exit_code, 0) << real.err;
  const google::protobuf::Struct charge = Field(Json(real.out), "charge").struct_value();
  EXPECT_DOUBLE_EQ(Field(Field(charge, "cost").struct_value(), "epsilon").number_value(), priced);
  EXPECT_DOUBLE_EQ(Budget().epsilon_spent(), before.epsilon_spent() + priced);
  EXPECT_EQ(LedgerRows(), rows_before + 1);

  // A dry run that would overspend exits 3 and still charges nothing.
  CliRun refused = Cli(Company() + "counts --table " + table_handle_ + " --epsilon 100 --dry-run");
  EXPECT_EQ(refused.exit_code, 3) << refused.err;
  EXPECT_THAT(refused.out, HasSubstr("would be admitted now: NO"));
  EXPECT_EQ(LedgerRows(), rows_before + 1);
}

// `decide` streams: every row is checked before any call, the rows go out chunk by chunk
// (here 7 rows a call) with the decision appended, the file appears only once every call
// succeeded, and a second run returns the stored decisions.
TEST_F(CliEndToEndTest, DecideStreamsChunksAndChecksEveryRowFirst) {
  const Population pop = MakePopulation(400, 12);
  const std::string artifact_id = FitDecidableEo();
  ASSERT_FALSE(artifact_id.empty());

  const std::string dir = ::testing::TempDir();
  const std::string csv = dir + "/fv-decide-rows.csv", out = dir + "/fv-decided.csv";
  std::filesystem::remove(out);
  std::string rows = "id,prediction,note\n";
  for (int i = 0; i < 30; ++i) {
    absl::StrAppend(&rows, pop.keys[i], ",", pop.prediction[i], ",\"row, ", i, "\"\n");
  }
  std::ofstream(csv) << rows << pop.keys[30] << ",x,bad\n";  // the last row's value is no number
  const std::string decide = Company() + "decide --artifact-id " + artifact_id + " --csv " + csv +
                             " --key-column id --value-column prediction --chunk-rows 7 --out " +
                             out;
  const int log_rows = auditor_->AuditorListAccessLog()->entries_size();
  CliRun refused = Cli(decide);
  EXPECT_EQ(refused.exit_code, 2) << refused.err;
  EXPECT_THAT(refused.err, HasSubstr("fv-decide-rows.csv:32"));  // its line, before any call
  EXPECT_FALSE(std::filesystem::exists(out));
  EXPECT_EQ(auditor_->AuditorListAccessLog()->entries_size(), log_rows);
  // A number that is no prediction (the artifact is equalized odds): also refused before the
  // first call, which would charge the licence, though the first 4 chunks are good.
  const v1::Budget before = Budget();
  std::ofstream(csv) << rows << pop.keys[30] << ",2,bad\n";
  CliRun not_binary = Cli(decide);
  EXPECT_EQ(not_binary.exit_code, 2) << not_binary.err;
  EXPECT_THAT(not_binary.err, HasSubstr("fv-decide-rows.csv:32: column 'prediction' must be 0 "
                                        "or 1 (got '2')"));
  EXPECT_EQ(auditor_->AuditorListAccessLog()->entries_size(), log_rows);
  EXPECT_EQ(Budget().releases(), before.releases());

  std::ofstream(csv) << rows;
  CliRun first = Cli(decide);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_THAT(first.out, HasSubstr("decided 30 rows with artifact " + artifact_id + " in 5 call(s)"));
  EXPECT_THAT(first.out, HasSubstr("licence"));
  const std::string written = ReadFile(out);
  std::vector<std::string> lines = absl::StrSplit(written, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 31u) << written;
  EXPECT_EQ(lines[0], "id,prediction,note,decision");
  for (int i = 1; i <= 30; ++i) {
    EXPECT_TRUE(absl::EndsWith(lines[i], ",0") || absl::EndsWith(lines[i], ",1")) << lines[i];
    EXPECT_THAT(lines[i], HasSubstr(absl::StrCat("\"row, ", i - 1, "\"")));  // in file order
  }
  EXPECT_EQ(auditor_->AuditorListAccessLog()->entries_size(), log_rows + 5);

  CliRun second = Cli(decide);
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_THAT(second.out, HasSubstr("rows already decided by this artifact (stored decision "
                                    "returned): 30"));
  EXPECT_EQ(ReadFile(out), written);
  EXPECT_FALSE(std::filesystem::exists(out + ".partial"));
}

// `decide --table`: every row of an uploaded table, no key sent again, written as
// row,decision in table order; the same decisions as `decide --csv` gives for those subjects,
// and the stored ones on a second run.
TEST_F(CliEndToEndTest, DecideByTableWritesEveryTableRowsDecisionInOrder) {
  const Population pop = MakePopulation(400, 12);
  const std::string artifact_id = FitDecidableEo();
  ASSERT_FALSE(artifact_id.empty());
  const std::string dir = ::testing::TempDir();
  const std::string out = dir + "/fv-decided-table.csv";
  std::filesystem::remove(out);
  const std::string decide = Company() + "decide --artifact-id " + artifact_id + " --table " +
                             table_handle_ + " --value-column prediction";

  CliRun mixed = Cli(decide + " --key-column id");
  EXPECT_EQ(mixed.exit_code, 2) << mixed.err;
  EXPECT_THAT(mixed.err, HasSubstr("go with --csv"));
  CliRun too_big = Cli(decide + " --chunk-rows 4000001");
  EXPECT_EQ(too_big.exit_code, 2) << too_big.err;

  CliRun first = Cli(decide + " --chunk-rows 150 --out " + out);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_THAT(first.out, HasSubstr("decided 400 rows of table " + table_handle_ +
                                   " with artifact " + artifact_id + " in 3 call(s)"));
  const std::string written = ReadFile(out);
  std::vector<std::string> lines = absl::StrSplit(written, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 401u) << written;
  EXPECT_EQ(lines[0], "row,decision");
  for (int i = 1; i <= 400; ++i) {
    EXPECT_TRUE(lines[i] == absl::StrCat(i - 1, ",0") || lines[i] == absl::StrCat(i - 1, ",1"))
        << lines[i];
  }

  // The first 30 subjects by key: their stored decisions, as the table call made them.
  const std::string csv = dir + "/fv-decide-table-keys.csv", keyed = dir + "/fv-decided-keys.csv";
  std::string rows = "id,prediction\n";
  for (int i = 0; i < 30; ++i) absl::StrAppend(&rows, pop.keys[i], ",", pop.prediction[i], "\n");
  std::ofstream(csv) << rows;
  CliRun by_keys = Cli(Company() + "decide --artifact-id " + artifact_id + " --csv " + csv +
                       " --key-column id --value-column prediction --out " + keyed);
  ASSERT_EQ(by_keys.exit_code, 0) << by_keys.err;
  EXPECT_THAT(by_keys.out, HasSubstr("(stored decision returned): 30"));
  std::vector<std::string> keyed_lines = absl::StrSplit(ReadFile(keyed), '\n', absl::SkipEmpty());
  ASSERT_EQ(keyed_lines.size(), 31u);
  for (int i = 1; i <= 30; ++i) {
    EXPECT_EQ(keyed_lines[i].back(), lines[i].back()) << i;
  }

  CliRun second = Cli(decide + " --out " + out);
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_THAT(second.out, HasSubstr("in 1 call(s)"));
  EXPECT_THAT(second.out, HasSubstr("(stored decision returned): 400"));
  EXPECT_EQ(ReadFile(out), written);
}

}  // namespace
}  // namespace fairvault::testing
