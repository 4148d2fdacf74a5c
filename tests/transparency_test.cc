// The transparency log end to end (issue 25): a real server signs checkpoints with the key
// bootstrap made; a company's receipt verifies offline through the real CLI with only the
// verifier key, and an edited one does not; a replayed release's receipt is its original row's;
// an auditor proves a later checkpoint extends one it kept; and two vaults that serve different
// ledgers under one key (a fork, a split view) are caught.
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "client/lib/receipts.h"
#include "core/testing/status_matchers.h"
#include "core/transparency/note.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/vault_fixture.h"

#ifndef FAIRVAULT_CLI_BINARY
#error "FAIRVAULT_CLI_BINARY must name the fairvault binary"
#endif

namespace fairvault::testing {
namespace {

using ::testing::HasSubstr;
namespace tlog = core::transparency;

struct CliResult {
  int exit_code = -1;
  std::string out;
};

CliResult RunCli(const std::string& args) {
  CliResult result;
  FILE* pipe = popen(absl::StrCat(FAIRVAULT_CLI_BINARY, " ", args, " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) result.out.append(buf, n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class TransparencyTest : public VaultFixture {
 protected:
  void SetUp() override {
    StartVault(MakePopulation(600, 5), 50, 0);
    auto signer = tlog::NoteSigner::Parse(ReadAll(server_->db_path() + ".log-key"));
    ASSERT_OK(signer);
    verifier_ = signer->verifier();
    dir_ = std::filesystem::path(server_->db_path()).parent_path().string();
    key_file_ = server_->db_path() + ".pub";
    std::ofstream(key_file_) << verifier_.Encoded() << "\n";
  }

  // A charged release of the company under `key`; its ledger seq.
  int64_t Count(const std::string& key) {
    v1::NoisyCountsRequest req;
    req.set_table_handle(table_handle_);
    req.add_columns("region");
    req.set_epsilon(0.25);
    req.set_idempotency_key(key);
    auto resp = company_->NoisyCounts(req);
    EXPECT_OK(resp);
    return resp.ok() ? resp->charge().ledger_seq() : -1;
  }

  std::string Company(const std::string& args) {
    return absl::StrCat("--server ", server_->target(), " --key ", company_key_, " ", args);
  }
  std::string Auditor(const std::string& args) {
    return absl::StrCat("--server ", server_->target(), " --key ", auditor_key_, " ", args);
  }

  tlog::NoteVerifier verifier_;
  std::string dir_, key_file_;
};

TEST_F(TransparencyTest, AReceiptVerifiesOfflineAndAnEditedOneDoesNot) {
  const int64_t seq = Count("release-1");
  Count("release-2");
  v1::GetReceiptRequest req;
  req.set_idempotency_key("release-1");
  auto receipt = company_->GetReceipt(req, /*auditor=*/false);
  ASSERT_OK(receipt);
  EXPECT_EQ(receipt->receipt().entry().seq(), seq);
  auto checkpoint = client::VerifyReceipt(receipt->receipt(), verifier_);
  ASSERT_OK(checkpoint);
  EXPECT_GE(checkpoint->size, seq);

  // The same through the CLI: fetched, written, verified with nothing but the key.
  const std::string file = dir_ + "/receipt.json";
  CliResult got = RunCli(Company(absl::StrCat("receipt get --idempotency-key release-1 --out ",
                                              file, " --log-key ", key_file_)));
  ASSERT_EQ(got.exit_code, 0) << got.out;
  EXPECT_THAT(got.out, HasSubstr(absl::StrCat("receipt verified: ledger row ", seq)));
  CliResult verified = RunCli(absl::StrCat("receipt verify ", file, " --log-key ",
                                           verifier_.Encoded()));
  EXPECT_EQ(verified.exit_code, 0) << verified.out;

  // The operator lowers the row's epsilon after the fact: the receipt no longer verifies.
  const std::string text = ReadAll(file);
  ASSERT_THAT(text, HasSubstr("\"epsilon\": 0.25"));
  std::ofstream(dir_ + "/edited.json") << absl::StrReplaceAll(text, {{"\"epsilon\": 0.25",
                                                                      "\"epsilon\": 0.125"}});
  CliResult edited = RunCli(absl::StrCat("receipt verify ", dir_, "/edited.json --log-key ",
                                         key_file_));
  EXPECT_EQ(edited.exit_code, 1) << edited.out;
  EXPECT_THAT(edited.out, HasSubstr("NOT verified"));
  EXPECT_THAT(edited.out, HasSubstr("epsilon"));

  // Signed by another key: refused, naming the key.
  auto other = tlog::NoteSigner::Generate("fairvault/ledger");
  ASSERT_OK(other);
  CliResult wrong_key = RunCli(absl::StrCat("receipt verify ", file, " --log-key ",
                                            other->verifier().Encoded()));
  EXPECT_EQ(wrong_key.exit_code, 1) << wrong_key.out;
  EXPECT_THAT(wrong_key.out, HasSubstr("no signature by"));
}

TEST_F(TransparencyTest, AReplayedReleasesReceiptIsItsOriginalRows) {
  const int64_t seq = Count("once");
  EXPECT_EQ(Count("once"), seq);  // replayed: the same row
  v1::GetReceiptRequest by_key;
  by_key.set_idempotency_key("once");
  auto receipt = company_->GetReceipt(by_key, false);
  ASSERT_OK(receipt);
  EXPECT_EQ(receipt->receipt().entry().seq(), seq);
  // Another company's row, or no row at all, reads the same to a company.
  v1::GetReceiptRequest grant_row;
  grant_row.set_seq(seq + 100);
  EXPECT_TRUE(absl::IsNotFound(company_->GetReceipt(grant_row, false).status()));
  // An auditor asks by seq for any row.
  v1::GetReceiptRequest by_seq;
  by_seq.set_seq(seq);
  auto audited = auditor_->GetReceipt(by_seq, /*auditor=*/true);
  ASSERT_OK(audited);
  EXPECT_OK(client::VerifyReceipt(audited->receipt(), verifier_).status());
}

TEST_F(TransparencyTest, AnAuditorProvesTheLedgerExtendsACheckpointItKept) {
  Count("a");
  const std::string kept = dir_ + "/kept.note";
  CliResult first = RunCli(Auditor(absl::StrCat("log checkpoint --auditor --out ", kept,
                                                " --log-key ", key_file_)));
  ASSERT_EQ(first.exit_code, 0) << first.out;
  EXPECT_THAT(first.out, HasSubstr("signature verified"));
  Count("b");
  Count("c");
  const std::string next = dir_ + "/next.note";
  CliResult consistent = RunCli(Auditor(absl::StrCat("auditor consistency --from ", kept,
                                                     " --save ", next, " --log-key ", key_file_)));
  ASSERT_EQ(consistent.exit_code, 0) << consistent.out;
  EXPECT_THAT(consistent.out, HasSubstr("consistent: the signed log of"));
  auto from = client::OpenCheckpoint(ReadAll(kept), verifier_);
  auto to = client::OpenCheckpoint(ReadAll(next), verifier_);
  ASSERT_OK(from);
  ASSERT_OK(to);
  EXPECT_EQ(to->size, from->size + 2);
}

TEST_F(TransparencyTest, AForkedLogUnderOneKeyIsCaught) {
  // A second vault signing with the same key, as an operator who shows two auditors two
  // different ledgers would run.
  ServerProcess fork(server_->db_path() + "-fork.db");
  auto fork_regulator_key = fork.Bootstrap("regulator");
  ASSERT_OK(fork_regulator_key);
  std::ofstream(fork.db_path() + ".log-key") << ReadAll(server_->db_path() + ".log-key");
  ASSERT_OK(fork.Start());
  auto fork_regulator = fork.Connect(*fork_regulator_key);
  SeededVault seeded;
  ASSERT_NO_FATAL_FAILURE(SeedVault(
      *fork_regulator, [&](const std::string& key) { return fork.Connect(key); },
      MakePopulation(600, 5), 50, 0, SeedNames{}, &seeded));
  auto fork_auditor = fork.Connect(seeded.auditor_key);

  // Both ledgers hold the same number of rows (each vault's seeding), with different content.
  auto ours = auditor_->GetCheckpoint(v1::GetCheckpointRequest(), true);
  auto theirs = fork_auditor->GetCheckpoint(v1::GetCheckpointRequest(), true);
  ASSERT_OK(ours);
  ASSERT_OK(theirs);
  ASSERT_EQ(ours->checkpoint().size(), theirs->checkpoint().size());
  ASSERT_NE(ours->checkpoint().root_hash(), theirs->checkpoint().root_hash());
  std::ofstream(dir_ + "/ours.note") << ours->checkpoint().note();
  std::ofstream(dir_ + "/theirs.note") << theirs->checkpoint().note();

  // Two signed checkpoints of one size with different roots: a split view.
  CliResult split = RunCli(Auditor(absl::StrCat("auditor consistency --from ", dir_,
                                                "/ours.note --to ", dir_,
                                                "/theirs.note --log-key ", key_file_)));
  EXPECT_EQ(split.exit_code, 1) << split.out;
  EXPECT_THAT(split.out, HasSubstr("split view"));

  // A later checkpoint of the fork is no extension of the checkpoint the first auditor kept.
  v1::NoisyCountsRequest req;
  req.set_table_handle(seeded.table_handle);
  req.add_columns("region");
  req.set_epsilon(0.25);
  req.set_idempotency_key("fork-1");
  ASSERT_OK(fork.Connect(seeded.company_key)->NoisyCounts(req));
  CliResult forked = RunCli(absl::StrCat("--server ", fork.target(), " --key ", seeded.auditor_key,
                                         " auditor consistency --from ", dir_,
                                         "/ours.note --log-key ", key_file_));
  EXPECT_EQ(forked.exit_code, 1) << forked.out;
  EXPECT_THAT(forked.out, HasSubstr("NOT consistent"));
  EXPECT_OK(fork.Stop());
}

TEST_F(TransparencyTest, AVaultWithoutALogKeySaysSo) {
  ServerProcess keyless(server_->db_path() + "-keyless.db");
  auto key = keyless.Bootstrap("regulator");
  ASSERT_OK(key);
  std::filesystem::remove(keyless.db_path() + ".log-key");
  ASSERT_OK(keyless.Start());
  auto status = keyless.Connect(*key)->GetCheckpoint(v1::GetCheckpointRequest(), true).status();
  EXPECT_TRUE(absl::IsFailedPrecondition(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("log key"));
  EXPECT_OK(keyless.Stop());
}

}  // namespace
}  // namespace fairvault::testing
