// `fairvault sweep` against the real server through the real CLI binary: one CSV row per ε with
// plausible numbers, the privacy cost charged exactly once (a re-run with the same --run-id
// replays, charges nothing and writes the same CSV), the up-front budget refusal, --dry-run, and
// `report sweep` rendering the result. Both measurements: evaluation groups the analyst holds
// (sweep eo) and a charged private audit (sweep model).
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/testing/files.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/vault_fixture.h"

#ifndef FAIRVAULT_CLI_BINARY
#error "FAIRVAULT_CLI_BINARY must name the fairvault binary"
#endif

namespace fairvault::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

struct CliResult {
  int exit_code = -1;
  std::string out;  // stdout and stderr
};

std::vector<std::vector<std::string>> CsvRecords(const std::string& csv) {
  std::vector<std::vector<std::string>> records;
  for (absl::string_view line : absl::StrSplit(csv, '\n', absl::SkipEmpty())) {
    records.push_back(absl::StrSplit(line, ','));
  }
  return records;
}

class SweepCliTest : public VaultFixture {
 protected:
  void SetUp() override {
    population_ = MakePopulation(4000, 11);
    StartVault(population_, 30, 1e-6);
    std::string pattern = (std::filesystem::temp_directory_path() / "fv-sweep-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    // The held-out split: the last 1,000 subjects (in the vault, so that an audit can join
    // them), with the company's prediction and label, and sex as an evaluation group.
    std::string csv = "key,prediction,label,sex\n";
    for (size_t i = 3000; i < population_.keys.size(); ++i) {
      absl::StrAppend(&csv, population_.keys[i], ",", population_.prediction[i], ",",
                      population_.label[i], ",", population_.sex[i] ? "M" : "F", "\n");
    }
    holdout_ = dir_ + "/holdout.csv";
    std::ofstream(holdout_) << csv;
  }
  void TearDown() override {
    if (!dir_.empty() && !HasFailure()) std::filesystem::remove_all(dir_);
    VaultFixture::TearDown();
  }

  CliResult Cli(const std::string& args) {
    CliResult result;
    const std::string command = absl::StrCat(FAIRVAULT_CLI_BINARY, " --server ", server_->target(),
                                             " --key ", company_key_, " ", args, " 2>&1");
    FILE* pipe = popen(command.c_str(), "r");
    if (pipe == nullptr) return result;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) result.out.append(buf, n);
    const int status = pclose(pipe);
    result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return result;
  }

  double Spent() {
    auto budget = company_->GetBudget();
    EXPECT_OK(budget);
    return budget.ok() && budget->budgets_size() > 0 ? budget->budgets(0).epsilon_spent() : -1;
  }
  int Charges() {
    auto ledger = company_->ListLedger();
    EXPECT_OK(ledger);
    int n = 0;
    if (ledger.ok()) {
      for (const auto& e : ledger->entries()) n += e.kind() == "charge";
    }
    return n;
  }

  std::string EoSweep(const std::string& run_id, const std::string& epsilons,
                      const std::string& extra = "", const std::string& gamma = "0.02") {
    return absl::StrCat("sweep eo --dataset pop --table ", table_handle_,
                        " --prediction-column prediction --label-column label --attributes sex"
                        " --gamma ", gamma, " --epsilons ",
                        epsilons, " --run-id ", run_id, " --holdout ", holdout_,
                        " --group-column sex --out ", dir_, "/", run_id, ".csv ", extra);
  }

  Population population_;
  std::string dir_, holdout_;
};

TEST_F(SweepCliTest, EoSweepWithEvaluationGroupsWritesOneRowPerEpsilonAndReplays) {
  const CliResult first = Cli(EoSweep("run-eo", "0.5,1,2"));
  ASSERT_EQ(first.exit_code, 0) << first.out;
  // The plan and its cost are printed before anything runs.
  EXPECT_THAT(first.out, HasSubstr("privacy cost: epsilon 3.5 in all"));
  EXPECT_THAT(first.out, HasSubstr("budget left on 'pop': epsilon 30"));
  EXPECT_THAT(first.out, HasSubstr("(no charge)"));
  EXPECT_DOUBLE_EQ(Spent(), 3.5);
  EXPECT_EQ(Charges(), 3);

  const std::string csv_path = dir_ + "/run-eo.csv";
  const std::string csv = ReadFile(csv_path);
  const auto records = CsvRecords(csv);
  ASSERT_EQ(records.size(), 1u + 3 + 2) << csv;  // the header, 3 points, 2 references
  EXPECT_THAT(records[0], ElementsAre("series", "epsilon", "error", "violation", "lambda",
                                      "cost_epsilon", "artifact", "kind", "dataset", "company",
                                      "run_id", "measure", "holdout", "group_column"));
  // What the sweep is, on every row: dataset, company, run id, the measure, hold-out, groups.
  EXPECT_THAT(std::vector<std::string>(records[1].begin() + 8, records[1].end()),
              ElementsAre("pop", "acme", "run-eo", "equalized odds (measured with the "
                          "hold-out's groups)", holdout_, "sex"));
  // The references, measured on the hold-out without a charge: the constant classifier
  // (violation 0) and the model before post-processing (~17% error, a real EO gap).
  EXPECT_THAT(std::vector<std::string>(records[4].begin(), records[4].begin() + 8),
              ElementsAre(::testing::StartsWith("constant classifier ("), "inf",
                          ::testing::_, "0.000000", "", "0", "", "baseline"));
  EXPECT_EQ(records[5][0], "model before post-processing");
  EXPECT_GT(std::atof(records[5][3].c_str()), 0.1) << csv;
  // The points: error and EO violation of the post-processed predictions.
  for (size_t r = 1; r <= 3; ++r) {
    EXPECT_EQ(records[r][0], "eo post-processor gamma=0.02");
    const double error = std::atof(records[r][2].c_str());
    const double violation = std::atof(records[r][3].c_str());
    // The raw model errs on ~17% of rows; post-processing for equalized odds costs some accuracy
    // but a fitted post-processor never does worse than a coin.
    EXPECT_GT(error, 0.05) << csv;
    EXPECT_LT(error, 0.45) << csv;
    EXPECT_GE(violation, 0) << csv;
    EXPECT_LT(violation, 0.3) << csv;
    EXPECT_EQ(records[r][5], records[r][1]);  // cost = the fit's epsilon, no audit
    EXPECT_EQ(records[r][6].rfind("art_", 0), 0u) << records[r][6];
  }
  EXPECT_THAT(std::vector<std::string>({records[1][1], records[2][1], records[3][1]}),
              ElementsAre("0.5", "1", "2"));

  // A re-run with the same run id replays every release: nothing charged, the same CSV.
  const CliResult again = Cli(EoSweep("run-eo", "0.5,1,2"));
  ASSERT_EQ(again.exit_code, 0) << again.out;
  EXPECT_THAT(again.out, HasSubstr("3.5 of it already charged under run id 'run-eo'"));
  EXPECT_THAT(again.out, HasSubstr("0 to charge now"));
  EXPECT_DOUBLE_EQ(Spent(), 3.5);
  EXPECT_EQ(Charges(), 3);
  EXPECT_EQ(ReadFile(csv_path), csv);

  // The keys follow the content: the same run id with another --gamma is another request
  // at each point (a new key, charged), not a refusal; its first point's key differs.
  const CliResult changed = Cli(EoSweep("run-eo", "0.5,1,2", "", "0.05"));
  ASSERT_EQ(changed.exit_code, 0) << changed.out;
  EXPECT_THAT(changed.out, HasSubstr("privacy cost: epsilon 3.5 in all"));
  EXPECT_THAT(changed.out, Not(HasSubstr("already charged")));
  EXPECT_DOUBLE_EQ(Spent(), 7);
  EXPECT_EQ(Charges(), 6);

  // `report sweep` draws it: one mark per point.
  const std::string html = dir_ + "/sweep.html";
  const CliResult report =
      Cli(absl::StrCat("report sweep --csv ", csv_path, " --out ", html, " --log-x"));
  ASSERT_EQ(report.exit_code, 0) << report.out;
  EXPECT_THAT(report.out, HasSubstr("(3 points, log x axis)"));
  const std::string page = ReadFile(html);
  size_t marks = 0;
  for (size_t at = page.find("class=\"mark\""); at != std::string::npos;
       at = page.find("class=\"mark\"", at + 1)) {
    ++marks;
  }
  EXPECT_EQ(marks, 3u);
}

TEST_F(SweepCliTest, RefusesUpFrontWhenTheBudgetIsTooSmallAndDryRunChargesNothing) {
  const CliResult refused = Cli(EoSweep("run-big", "10,25"));
  EXPECT_NE(refused.exit_code, 0) << refused.out;
  EXPECT_THAT(refused.out, HasSubstr("privacy cost: epsilon 35 in all"));
  EXPECT_THAT(refused.out, HasSubstr("would charge epsilon 35 but only 30 is left on 'pop'"));
  EXPECT_EQ(Charges(), 0);
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/run-big.csv"));

  const CliResult dry = Cli(EoSweep("run-dry", "1,2", "--dry-run"));
  EXPECT_EQ(dry.exit_code, 0) << dry.out;
  EXPECT_THAT(dry.out, HasSubstr("privacy cost: epsilon 3 in all"));
  EXPECT_EQ(Charges(), 0);
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/run-dry.csv"));

  // Without evaluation groups an equalized-odds post-processor cannot be applied locally.
  const CliResult no_groups =
      Cli(absl::StrCat("sweep eo --dataset pop --table ", table_handle_,
                       " --prediction-column prediction --label-column label --gamma 0.02"
                       " --epsilons 1 --run-id x --holdout ",
                       holdout_, " --audit-epsilon 0.5 --key-column key --out ", dir_, "/x.csv"));
  EXPECT_EQ(no_groups.exit_code, 2) << no_groups.out;
  EXPECT_THAT(no_groups.out, HasSubstr("does not hold"));
  EXPECT_EQ(Charges(), 0);
}

TEST_F(SweepCliTest, ModelSweepMeasuredByAPrivateAuditChargesTheAuditsOnce) {
  const std::string args = absl::StrCat(
      "sweep model --dataset pop --table ", table_handle_,
      " --algorithm dp_oracle_learner --features prediction --label label --attributes sex"
      " --gamma 0.02 --rounds 20 --epsilons 1,3 --run-id run-model --holdout ",
      holdout_, " --key-column key --audit-epsilon 0.5 --out ", dir_, "/model.csv");
  const CliResult first = Cli(args);
  ASSERT_EQ(first.exit_code, 0) << first.out;
  EXPECT_THAT(first.out, HasSubstr("by a private audit per point (epsilon 0.5 each, charged)"));
  EXPECT_THAT(first.out, HasSubstr("privacy cost: epsilon 5 in all"));
  // The ledger composes the four releases (Rényi accounting at the grant's delta can make the
  // spend smaller than the plain sum the plan states as an upper bound).
  const double spent = Spent();
  EXPECT_LE(spent, 5 + 1e-9);
  EXPECT_GT(spent, 3);
  EXPECT_EQ(Charges(), 4);  // two fits, two audits

  const std::string csv = ReadFile(dir_ + "/model.csv");
  const auto records = CsvRecords(csv);
  ASSERT_EQ(records.size(), 1u + 2 + 1) << csv;  // the constant classifier only: no groups
  EXPECT_THAT(records[0], ElementsAre("series", "epsilon", "error", "violation", "violation_lo",
                                      "violation_hi", "lambda", "cost_epsilon", "artifact", "kind",
                                      "dataset", "company", "run_id", "measure", "holdout",
                                      "group_column"));
  EXPECT_EQ(records[3][9], "baseline");
  EXPECT_EQ(records[1][13], "equalized odds (a private audit per point at epsilon 0.5)");
  for (size_t r = 1; r <= 2; ++r) {
    EXPECT_EQ(records[r][0], "dp_oracle_learner");
    const double error = std::atof(records[r][2].c_str());
    const double violation = std::atof(records[r][3].c_str());
    const double lo = std::atof(records[r][4].c_str());
    const double hi = std::atof(records[r][5].c_str());
    EXPECT_GT(error, 0.05) << csv;
    EXPECT_LT(error, 0.5) << csv;
    // The audit's interval covers its estimate and lies in [0, 1].
    EXPECT_LE(lo, violation) << csv;
    EXPECT_LE(violation, hi) << csv;
    EXPECT_GE(lo, 0) << csv;
    EXPECT_LE(hi, 1) << csv;
  }
  EXPECT_EQ(records[1][7], "1.5");
  EXPECT_EQ(records[2][7], "3.5");
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/model.csv.state"));

  // The re-run replays the fits (the same jobs and models) and the audits (the same uploaded
  // table, from model.csv.state): nothing more is charged and the CSV is the same.
  const CliResult again = Cli(args);
  ASSERT_EQ(again.exit_code, 0) << again.out;
  EXPECT_THAT(again.out, HasSubstr("0 to charge now"));
  EXPECT_DOUBLE_EQ(Spent(), spent);
  EXPECT_EQ(Charges(), 4);
  EXPECT_EQ(ReadFile(dir_ + "/model.csv"), csv);

  const CliResult report =
      Cli(absl::StrCat("report sweep --csv ", dir_, "/model.csv --out ", dir_, "/model.html"));
  ASSERT_EQ(report.exit_code, 0) << report.out;
  EXPECT_THAT(report.out, HasSubstr("(2 points)"));
  // The page says what the sweep is, what it cost in all, and draws the reference.
  const std::string page = ReadFile(dir_ + "/model.html");
  EXPECT_THAT(page, HasSubstr("<th>run id</th><td>run-model</td>"));
  EXPECT_THAT(page, HasSubstr("<th>company</th><td>acme</td>"));
  EXPECT_THAT(page, HasSubstr("total cost \u03b5: <b>5</b>"));
  EXPECT_THAT(page, HasSubstr("class=\"baseline\""));
}

}  // namespace
// `report audit` with the company's key: the provenance is the charge's ledger row, and a
// file whose charge is not that row's (another release's seq, edited numbers) is refused.
TEST_F(SweepCliTest, AuditProvenanceIsTheChargesLedgerRowAndAForgedFileIsRefused) {
  ASSERT_EQ(Cli(absl::StrCat("counts --table ", table_handle_,
                             " --attributes sex --epsilon 0.25 --idempotency-key first"))
                .exit_code,
            0);
  const std::string audit = dir_ + "/audit.json";
  const CliResult audited = Cli(absl::StrCat(
      "audit classifier --table ", table_handle_, " --prediction-column prediction "
      "--label-column label --attributes sex --epsilon 0.5 --idempotency-key my-audit --out ",
      audit));
  ASSERT_EQ(audited.exit_code, 0) << audited.out;
  const std::string page = dir_ + "/audit.html";
  const CliResult rendered = Cli(absl::StrCat("report audit --audit ", audit, " --table ",
                                              table_handle_, " --out ", page));
  ASSERT_EQ(rendered.exit_code, 0) << rendered.out;
  const std::string html = ReadFile(page);
  EXPECT_THAT(html, HasSubstr("<th>company</th><td>acme</td>"));
  EXPECT_THAT(html, HasSubstr("<th>idempotency key</th><td>my-audit</td>"));
  EXPECT_THAT(html, HasSubstr("<th>request</th><td>AuditClassifier</td>"));
  EXPECT_THAT(html, HasSubstr(absl::StrCat("<th>table</th><td>", table_handle_, "</td>")));
  // The same file pointing at the counts' ledger row: refused, naming why.
  std::string json = ReadFile(audit);
  const std::string field = "\"ledger_seq\": \"";
  const size_t at = json.find(field);
  ASSERT_NE(at, std::string::npos) << json;
  const size_t begin = at + field.size(), end = json.find('"', begin);
  json.replace(begin, end - begin, "1");  // the counts' row
  const std::string forged = dir_ + "/forged.json";
  std::ofstream(forged) << json;
  const CliResult refused =
      Cli(absl::StrCat("report audit --audit ", forged, " --out ", dir_, "/forged.html"));
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_THAT(refused.out, HasSubstr("is not this audit's charge"));
  EXPECT_THAT(refused.out, HasSubstr("not of AuditClassifier"));
}

}  // namespace fairvault::testing
