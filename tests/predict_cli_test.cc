// `fairvault predict` through the real binary on artifact files (no vault call): the output
// columns and values for a one-logit network, a softmax network and a linear mixture, with and
// without --proba-only; and `train-logreg --keep-features` on the UCI Adult files as published.
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/testing/files.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#ifndef FAIRVAULT_CLI_BINARY
#error "FAIRVAULT_CLI_BINARY must name the fairvault binary"
#endif

namespace {

using ::fairvault::testing::ReadFile;

using ::testing::HasSubstr;

struct CliResult {
  int exit_code = -1;
  std::string output;  // stdout only
};

// Runs the CLI with `args` (shell words); stderr (the summary) goes to `stderr_path`.
CliResult RunCli(const std::string& args, const std::string& stderr_path) {
  CliResult result;
  const std::string command =
      std::string(FAIRVAULT_CLI_BINARY) + " " + args + " 2>'" + stderr_path + "'";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) result.output.append(buf, n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

// The CSV's lines split at commas (no quoting in these outputs).
std::vector<std::vector<std::string>> Records(const std::string& csv) {
  std::vector<std::vector<std::string>> records;
  std::istringstream lines(csv);
  std::string line;
  while (std::getline(lines, line)) {
    std::vector<std::string>& fields = records.emplace_back();
    std::istringstream cells(line);
    std::string cell;
    while (std::getline(cells, cell, ',')) fields.push_back(cell);
  }
  return records;
}

// Field `column` of data row `row` as a number (exp() may differ in the last bit between
// libms, so probabilities are compared within 1e-15).
double Number(const std::vector<std::vector<std::string>>& records, size_t row, size_t column) {
  return std::strtod(records.at(row + 1).at(column).c_str(), nullptr);
}

class PredictCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (std::filesystem::temp_directory_path() / "fv-predict-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  std::string Write(const std::string& name, const std::string& content) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << content;
    return path;
  }
  // `fairvault predict` on `model` (JSON) and `csv`, with extra flags; stdout, exit code 0.
  std::string Predict(const std::string& model, const std::string& csv, const std::string& flags) {
    const std::string model_path = Write("model.json", model);
    const std::string csv_path = Write("rows.csv", csv);
    const CliResult r = RunCli("predict --artifact-file '" + model_path + "' --csv '" + csv_path +
                                   "' --key-column id " + flags,
                               dir_ + "/stderr.txt");
    EXPECT_EQ(r.exit_code, 0) << r.output << ReadFile(dir_ + "/stderr.txt");
    return r.output;
  }
  std::string Summary() { return ReadFile(dir_ + "/stderr.txt"); }

  std::string dir_;
};

// z = 2·relu(a − b + 0.5) − relu(a + b − 1) − 1 (model_apply_test's MLP).
constexpr char kMlp[] = R"({"fair_model": {"algorithm": "dp_fermi",
  "features": {"feature_columns": ["a", "b"], "intercept": true},
  "network": {"layers": [
    {"inputs": 3, "outputs": 2, "weights": [1, -1, 0, 1, 1, -1], "bias": [0.5, 0]},
    {"inputs": 2, "outputs": 1, "weights": [2, -1], "bias": [-1]}], "classes": [0, 1]}}})";

// Logits (a, b − 1, 1) for classes 0, 1, 2.
constexpr char kSoftmax[] = R"({"fair_model": {"algorithm": "pf_ld",
  "features": {"feature_columns": ["a", "b"], "intercept": true},
  "network": {"layers": [{"inputs": 3, "outputs": 3, "weights": [1, 0, 0, 0, 1, 0, 0, 0, 1],
                          "bias": [0, -1, 0]}], "classes": [0, 1, 2]}}})";

constexpr char kRows[] = "id,a,b,y\nk0,2,0,1\nk1,1,3,0\nk2,0,0,0\n";

constexpr double kTol = 1e-15;
using ::testing::DoubleNear;
using ::testing::ElementsAre;

TEST_F(PredictCliTest, OneLogitNetworkWritesPPositiveAndADeterministicDecision) {
  // z = 3, -4 (a ReLU clips), 0 (a ReLU clips; 0 decides 0): sigmoid by hand.
  const auto records = Records(Predict(kMlp, kRows, "--keep-columns y"));
  ASSERT_EQ(records.size(), 4u);
  EXPECT_THAT(records[0], ElementsAre("id", "p_positive", "decision", "y"));
  EXPECT_THAT(Number(records, 0, 1), DoubleNear(0.9525741268224334, kTol));
  EXPECT_THAT(Number(records, 1, 1), DoubleNear(0.01798620996209156, kTol));
  EXPECT_THAT(records[3], ElementsAre("k2", "0.5", "0", "0"));
  EXPECT_EQ(records[1][2] + records[2][2] + records[3][2], "100");
  EXPECT_EQ(records[1][3] + records[2][3] + records[3][3], "100");
  EXPECT_THAT(Summary(), HasSubstr("network 3 -> 2 -> 1, one logit, sigmoid"));
  EXPECT_THAT(Summary(), HasSubstr("positive decisions: 1"));
  EXPECT_THAT(Summary(), HasSubstr("decisions are deterministic"));
  // The same decisions whatever the seed: none is drawn.
  EXPECT_EQ(Predict(kMlp, kRows, "--seed 1"), Predict(kMlp, kRows, "--seed 2"));
  const auto proba = Records(Predict(kMlp, kRows, "--proba-only"));
  ASSERT_EQ(proba.size(), 4u);
  EXPECT_THAT(proba[0], ElementsAre("id", "p_positive"));
  EXPECT_THAT(proba[3], ElementsAre("k2", "0.5"));
}

TEST_F(PredictCliTest, SoftmaxNetworkWritesOneColumnPerClassAndTheClass) {
  // z = (2, -1, 1), (1, 2, 1), (0, -1, 1).
  const auto records = Records(Predict(kSoftmax, kRows, "--keep-columns y"));
  ASSERT_EQ(records.size(), 4u);
  EXPECT_THAT(records[0], ElementsAre("id", "p_0", "p_1", "p_2", "decision", "y"));
  for (size_t row = 1; row < records.size(); ++row) ASSERT_EQ(records[row].size(), 6u);
  // The largest logit's class: 0, 1, 2.
  EXPECT_EQ(records[1][4] + records[2][4] + records[3][4], "012");
  EXPECT_EQ(records[1][5] + records[2][5] + records[3][5], "100");
  // (1, 2, 1): softmax (e, e², e)/(2e + e²).
  EXPECT_THAT(Number(records, 1, 1), DoubleNear(0.21194155761708544, kTol));
  EXPECT_THAT(Number(records, 1, 2), DoubleNear(0.5761168847658291, kTol));
  EXPECT_THAT(Number(records, 1, 3), DoubleNear(0.21194155761708544, kTol));
  EXPECT_THAT(Summary(), HasSubstr("network 3 -> 3, 3 classes, softmax"));
  EXPECT_THAT(Summary(), HasSubstr("class 2: mean p"));
  const auto proba = Records(Predict(kSoftmax, kRows, "--proba-only"));
  ASSERT_EQ(proba.size(), 4u);
  EXPECT_THAT(proba[0], ElementsAre("id", "p_0", "p_1", "p_2"));
  EXPECT_EQ(proba[2][0], "k1");
  EXPECT_THAT(Number(proba, 1, 2), DoubleNear(0.5761168847658291, kTol));
}

TEST_F(PredictCliTest, MixtureColumnsAreUnchanged) {
  constexpr char kMixture[] = R"({"fair_model": {"algorithm": "dp_oracle_learner",
    "features": {"feature_columns": ["a"], "intercept": true},
    "components": [{"weights": [1, 0]}, {"weights": [1, -2]}, {"weights": [-1, 0]}]}})";
  // a = 2: (1, 0, 0) -> 1/3; a = 1: 1/3; a = 0: 0.
  const std::string out = Predict(kMixture, kRows, "--proba-only");
  EXPECT_EQ(out, "id,p_positive\nk0,0.3333333333333333\nk1,0.3333333333333333\nk2,0\n");
}

// Issue 22 §5: a model that decides alike for everyone, or worse than doing so, is named.
TEST_F(PredictCliTest, TrivialModelsAreWarnedAbout) {
  // z = a - 10 < 0 on every row: decides 0 for all three.
  constexpr char kConstant[] = R"({"fair_model": {"algorithm": "pf_ld",
    "features": {"feature_columns": ["a"], "intercept": true},
    "network": {"layers": [{"inputs": 2, "outputs": 1, "weights": [1, -10], "bias": [0]}],
                "classes": [0, 1]}}})";
  Predict(kConstant, kRows, "");
  EXPECT_THAT(Summary(), HasSubstr("warning: the model decides 0 for 100.0% of these rows"));
  // kMlp decides 1, 0, 0 where y is 1, 0, 0: no error, the constant classifier errs on 1 of 3.
  Predict(kMlp, kRows, "--label-column y");
  EXPECT_THAT(Summary(), HasSubstr("error on these rows: 0.0% (the constant classifier "
                                   "deciding 0: 33.3%)"));
  EXPECT_THAT(Summary(), Not(HasSubstr("warning")));
  // Against flipped labels it errs on every row, more than the constant classifier.
  Predict(kMlp, "id,a,b,y\nk0,2,0,0\nk1,1,3,1\nk2,0,0,1\n", "--label-column y");
  EXPECT_THAT(Summary(), HasSubstr("warning: the model errs on 100.0% of these rows, more than "
                                   "the constant classifier deciding 1 (33.3%)"));
  // Labels must be integers; decisions are needed.
  const std::string model_path = Write("mlp.json", kMlp);
  const std::string csv_path = Write("bad.csv", "id,a,b,y\nk0,2,0,yes\n");
  const CliResult bad =
      RunCli("predict --artifact-file '" + model_path + "' --csv '" + csv_path +
                 "' --key-column id --label-column y",
             dir_ + "/stderr.txt");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_THAT(Summary(), HasSubstr(":2: --label-column 'y' must hold integer class labels"));
  const CliResult proba =
      RunCli("predict --artifact-file '" + model_path + "' --csv '" + csv_path +
                 "' --key-column id --label-column y --proba-only",
             dir_ + "/stderr.txt");
  EXPECT_NE(proba.exit_code, 0);
  EXPECT_THAT(Summary(), HasSubstr("--label-column needs decisions"));
}

TEST_F(PredictCliTest, InvalidNetworkIsRefusedNamingTheField) {
  const std::string model_path = Write(
      "bad.json", R"({"fair_model": {"features": {"feature_columns": ["a"], "intercept": true},
      "network": {"layers": [{"inputs": 2, "outputs": 3, "weights": [1, 1, 1, 1, 1, 1]}],
                  "classes": [0, 1]}}})");
  const std::string csv_path = Write("rows.csv", kRows);
  const CliResult r = RunCli(
      "predict --artifact-file '" + model_path + "' --csv '" + csv_path + "' --key-column id",
      dir_ + "/stderr.txt");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(r.output, "");
  EXPECT_THAT(Summary(), HasSubstr("network.classes has 2 entries"));
}

// `train-logreg --keep-features` writes the encoded features (the company's input to a fair
// learner), and reads the UCI Adult files as published (no header row).
TEST_F(PredictCliTest, TrainLogregKeepsTheEncodedFeaturesOfHeaderlessAdultFiles) {
  std::string train, test = "|1x3 Cross validator\n";
  const char* work[] = {"Private", "State-gov", "Self-emp"};
  for (int i = 0; i < 30; ++i) {
    const bool rich = i % 3 == 0;
    train += std::to_string(20 + i) + ", " + work[i % 3] + ", 1000" + std::to_string(i) +
             ", HS-grad, 9, Never-married, Sales, Own-child, White, " +
             (i % 2 ? "Male" : "Female") + ", 0, 0, " + std::to_string(rich ? 60 : 30) +
             ", United-States, " + (rich ? ">50K" : "<=50K") + "\n";
  }
  test += "40, Without-pay, 12345, HS-grad, 9, Never-married, Sales, Own-child, White, Male, 0, 0, "
          "60, United-States, >50K.\n";
  const std::string train_path = Write("adult.data", train);
  const std::string test_path = Write("adult.test", test);
  const std::string features = " --label-column Y --positive-label '>50K,>50K.' "
                               "--numeric age,hours-per-week --categorical workclass ";
  CliResult r = RunCli("train-logreg --csv '" + train_path + "'" + features +
                           "--keep-features --out '" + dir_ + "/train.csv'",
                       dir_ + "/stderr.txt");
  ASSERT_EQ(r.exit_code, 0) << r.output << Summary();
  EXPECT_THAT(Summary(), HasSubstr("adult.data has no header row"));
  auto records = Records(ReadFile(dir_ + "/train.csv"));
  ASSERT_EQ(records.size(), 31u);  // every line of the file is a row: none was a header
  EXPECT_THAT(records[0], ::testing::ElementsAre("key", "prediction", "label", "age_z",
                                                 "hours-per-week_z", "workclass=Private",
                                                 "workclass=Self-emp", "workclass=State-gov"));
  double age_sum = 0;
  for (size_t row = 0; row < 30; ++row) {
    age_sum += Number(records, row, 3);
    double one_hot = 0;
    for (size_t c = 5; c < 8; ++c) one_hot += Number(records, row, c);
    EXPECT_EQ(one_hot, 1) << row;
  }
  EXPECT_NEAR(age_sum / 30, 0, 1e-12);  // standardised on the training rows
  // The test file: its comment line skipped, encoded with the training rows' encoder (an
  // unseen category is all zeros).
  r = RunCli("train-logreg --csv '" + train_path + "' --test-csv '" + test_path + "'" + features +
                 "--keep-features --out '" + dir_ + "/test.csv'",
             dir_ + "/stderr.txt");
  ASSERT_EQ(r.exit_code, 0) << r.output << Summary();
  records = Records(ReadFile(dir_ + "/test.csv"));
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[1][2], "1");  // ">50K." is a positive label
  for (size_t c = 5; c < 8; ++c) EXPECT_EQ(Number(records, 0, c), 0) << c;
  EXPECT_GT(Number(records, 0, 3), 0);  // age 40 is above the training mean (34.5)
}

}  // namespace
