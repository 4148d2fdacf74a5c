// The transparency log end to end (issue 25): a real server signs checkpoints with the key
// bootstrap made; a company's receipt verifies offline through the real CLI with only the
// verifier key, and an edited one does not; a replayed release's receipt is its original row's;
// an auditor proves a later checkpoint extends one it kept; and two vaults that serve different
// ledgers under one key (a fork, a split view) are caught.
#include <sqlite3.h>
#include <sys/wait.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "google/protobuf/util/json_util.h"
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

CliResult RunCommand(const std::string& command) {
  CliResult result;
  FILE* pipe = popen(absl::StrCat(command, " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) result.out.append(buf, n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

CliResult RunCli(const std::string& args) {
  return RunCommand(absl::StrCat(FAIRVAULT_CLI_BINARY, " ", args));
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

  // The operator rotates the log key: the server restarts signing with `signer`.
  void RestartWithLogKey(const tlog::NoteSigner& signer) {
    ASSERT_OK(server_->Stop());
    std::filesystem::copy_file(server_->db_path() + ".log-key",
                               server_->db_path() + ".log-key-before",
                               std::filesystem::copy_options::overwrite_existing);
    std::ofstream(server_->db_path() + ".log-key", std::ios::trunc) << signer.EncodedSecret()
                                                                    << "\n";
    ASSERT_OK(server_->Start());
    company_ = server_->Connect(company_key_);
    auditor_ = server_->Connect(auditor_key_);
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
  const std::string get = absl::StrCat("receipt get --idempotency-key release-1 --out ", file,
                                       " --log-key ", key_file_);
  CliResult got = RunCli(Company(absl::StrCat(get, " --account acme")));
  ASSERT_EQ(got.exit_code, 0) << got.out;
  EXPECT_THAT(got.out, HasSubstr(absl::StrCat("receipt verified: ledger row ", seq)));
  // Keys are per company: a receipt found by one is checked against the account it names, so
  // a vault answering with another company's row under the same key is caught. Without the
  // caller's account name there is nothing to check it against: a usage error.
  CliResult no_account = RunCli(Company(get));
  EXPECT_EQ(no_account.exit_code, 2) << no_account.out;
  EXPECT_THAT(no_account.out, HasSubstr("--account"));
  CliResult other_account = RunCli(Company(absl::StrCat(get, " --account beta")));
  EXPECT_EQ(other_account.exit_code, 1) << other_account.out;
  EXPECT_THAT(other_account.out, HasSubstr("account 'acme'"));
  EXPECT_THAT(other_account.out, HasSubstr("not the row asked for"));
  // Witnesses are checked on a verified receipt only.
  CliResult unverified_witness = RunCli(Company(absl::StrCat(
      "receipt get --idempotency-key release-1 --account acme --witness ", key_file_)));
  EXPECT_EQ(unverified_witness.exit_code, 2) << unverified_witness.out;
  EXPECT_THAT(unverified_witness.out, HasSubstr("--witness needs --log-key"));
  CliResult verified = RunCli(absl::StrCat("receipt verify ", file, " --log-key ",
                                           verifier_.Encoded()));
  EXPECT_EQ(verified.exit_code, 0) << verified.out;
  // Offline too, the receipt is checked against the release it should prove: the key and the
  // account, or the row.
  const std::string verify = absl::StrCat("receipt verify ", file, " --log-key ", key_file_);
  EXPECT_EQ(RunCli(verify + " --idempotency-key release-1 --account acme").exit_code, 0);
  EXPECT_EQ(RunCli(absl::StrCat(verify, " --seq ", seq)).exit_code, 0);
  CliResult other_release = RunCli(verify + " --idempotency-key release-2 --account acme");
  EXPECT_EQ(other_release.exit_code, 1) << other_release.out;
  EXPECT_THAT(other_release.out, HasSubstr("not the row asked for"));
  EXPECT_EQ(RunCli(verify + " --idempotency-key release-1 --account beta").exit_code, 1);
  EXPECT_EQ(RunCli(verify + " --idempotency-key release-1").exit_code, 2);

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

// `auditor verify --log-key`: every row the vault lists, checked by the client against the
// signed checkpoint (each row's hash, the chain, the tree, grants and caps, the budgets); an
// edited row is found by the client itself, not only by the vault's own verification.
TEST_F(TransparencyTest, AnAuditorChecksEveryListedRowAgainstTheSignedCheckpoint) {
  Count("checked-1");
  const int64_t edited_seq = Count("checked-2");
  Count("checked-3");
  const std::string kept = server_->db_path() + ".verify.kept";  // unique to this run
  CliResult checked = RunCli(Auditor(absl::StrCat("auditor verify --log-key ", key_file_,
                                                  " --kept ", kept)));
  ASSERT_EQ(checked.exit_code, 0) << checked.out;
  auto rows = auditor_->AuditorListLedger(v1::ListLedgerRequest());
  ASSERT_OK(rows);
  const int64_t n = rows->entries_size();
  EXPECT_THAT(checked.out, HasSubstr(absl::StrCat("ledger: checked here: the ", n,
                                                  " rows listed hash to their hashes and chain")));
  EXPECT_THAT(checked.out, HasSubstr(absl::StrCat("the first ", n, " are the signed tree")));
  EXPECT_THAT(checked.out, HasSubstr("none of their 3 charges took a company past its grant"));
  EXPECT_THAT(checked.out, HasSubstr("grants and caps (ListBudgets) are the rows' composition"));
  EXPECT_THAT(checked.out, HasSubstr("no checkpoint was kept"));
  // Canonical encodings only when asked for.
  EXPECT_TRUE(rows->entries(0).canonical().empty());
  CliResult json = RunCli(Auditor(absl::StrCat("--json auditor verify --log-key ", key_file_,
                                               " --kept ", kept)));
  ASSERT_EQ(json.exit_code, 0) << json.out;
  EXPECT_THAT(json.out, HasSubstr("\"vault\""));
  EXPECT_THAT(json.out, HasSubstr("consistent with the kept checkpoint"));
  EXPECT_THAT(json.out, HasSubstr("\"ledger\": \"checked here"));
  // Without a key nothing is checked here, as before.
  CliResult plain = RunCli(Auditor("auditor verify"));
  ASSERT_EQ(plain.exit_code, 0) << plain.out;
  EXPECT_THAT(plain.out, ::testing::Not(HasSubstr("checked here")));

  // The operator halves a charge's epsilon in the database. The row no longer hashes to its
  // hash: the client says so of the row it was shown.
  ASSERT_OK(server_->Stop());
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(server_->db_path().c_str(), &db), SQLITE_OK);
    char* error = nullptr;
    const std::string sql = absl::StrCat(
        "DROP TRIGGER ledger_no_update; UPDATE ledger SET epsilon = epsilon / 2 WHERE seq = ",
        edited_seq, ";");
    EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error), SQLITE_OK)
        << (error ? error : "");
    sqlite3_free(error);
    sqlite3_close(db);
  }
  ASSERT_OK(server_->Start());
  CliResult edited = RunCli(Auditor(absl::StrCat("auditor verify --log-key ", key_file_)));
  EXPECT_EQ(edited.exit_code, 1) << edited.out;
  EXPECT_THAT(edited.out, HasSubstr(absl::StrCat("ledger: NOT verified: ledger row ", edited_seq,
                                                 ": its encoding does not hash to its hash")));
  // The budgets report says the same on its page.
  CliResult report = RunCli(Auditor(absl::StrCat("report budgets --out ", dir_,
                                                 "/edited.html --log-key ", key_file_)));
  EXPECT_EQ(report.exit_code, 1) << report.out;
  EXPECT_THAT(ReadAll(dir_ + "/edited.html"),
              HasSubstr(absl::StrCat("NOT verified: ledger row ", edited_seq)));
}

// `report budgets --log-key --company`: the page is drawn from the rows the check read,
// filtered in the client as the vault filters them: another company's rows and budgets, and
// the dataset's cap, are left out.
TEST_F(TransparencyTest, ACheckedBudgetsReportKeepsItsFilters) {
  Count("filtered-1");
  v1::CreateAccountRequest acct;
  acct.set_name("globex");
  acct.set_role(v1::ROLE_COMPANY);
  auto globex_key = regulator_->CreateAccount(acct);
  ASSERT_OK(globex_key);
  v1::GrantBudgetRequest grant;
  grant.set_company("globex");
  grant.set_dataset("pop");
  grant.set_epsilon(5);
  ASSERT_OK(regulator_->GrantBudget(grant));
  v1::SetDatasetCapRequest cap;
  cap.set_dataset("pop");
  cap.set_epsilon(500);
  ASSERT_OK(regulator_->SetDatasetCap(cap));
  const std::string csv = dir_ + "/filtered.csv";
  const std::string page = server_->db_path() + ".filtered.html";
  CliResult report = RunCli(Auditor(absl::StrCat("report budgets --out ", page, " --csv ", csv,
                                                 " --company acme --log-key ", key_file_)));
  ASSERT_EQ(report.exit_code, 0) << report.out;
  EXPECT_THAT(report.out, HasSubstr("ledger: checked here"));
  EXPECT_THAT(report.out, HasSubstr("1 grants and caps"));  // acme's grant only
  const std::string charges = ReadAll(csv);
  EXPECT_THAT(charges, HasSubstr("filtered-1"));
  EXPECT_THAT(charges, ::testing::Not(HasSubstr("globex")));
  const std::string html = ReadAll(page);
  EXPECT_THAT(html, ::testing::Not(HasSubstr("globex")));
  EXPECT_THAT(html, ::testing::Not(HasSubstr("cap (all companies)")));
  EXPECT_THAT(html, HasSubstr("checked here: the "));
}

// A busy, honest vault is never reported as a finding: while a company charges as fast as it
// can, the check either passes or says INCONCLUSIVE (the budgets could not be read against the
// rows), never "NOT verified".
TEST_F(TransparencyTest, ABusyLedgerIsNeverAFinding) {
  std::atomic<bool> stop{false};
  std::atomic<int> charged{0};
  std::thread busy([&] {
    auto company = server_->Connect(company_key_);
    for (int i = 0; !stop && i < 2000; ++i) {
      v1::NoisyCountsRequest req;
      req.set_table_handle(table_handle_);
      req.add_columns("region");
      req.set_epsilon(0.001);
      req.set_idempotency_key(absl::StrCat("busy-", i));
      if (company->NoisyCounts(req).ok()) ++charged;
    }
  });
  while (charged < 20) absl::SleepFor(absl::Milliseconds(10));
  const int before = charged;
  CliResult checked = RunCli(Auditor(absl::StrCat("auditor verify --log-key ", key_file_)));
  const int during = charged - before;
  stop = true;
  busy.join();
  EXPECT_THAT(checked.out, ::testing::Not(HasSubstr("NOT verified")))
      << during << " charges during the check\n" << checked.out;
  if (checked.exit_code != 0) {
    EXPECT_EQ(checked.exit_code, 1) << checked.out;
    EXPECT_THAT(checked.out, HasSubstr("INCONCLUSIVE (not a finding)"));
  } else {
    EXPECT_THAT(checked.out, HasSubstr("ledger: checked here"));
  }
  // Quiet again: it passes.
  CliResult quiet = RunCli(Auditor(absl::StrCat("auditor verify --log-key ", key_file_)));
  EXPECT_EQ(quiet.exit_code, 0) << quiet.out;
}

TEST_F(TransparencyTest, ConsistencyIsProvedAcrossAKeyRotation) {
  Count("before-rotation");
  const std::string kept = dir_ + "/kept-old-key.note";
  ASSERT_EQ(RunCli(Auditor(absl::StrCat("log checkpoint --auditor --out ", kept, " --log-key ",
                                        key_file_)))
                .exit_code,
            0);
  // The operator rotates the log key (a new origin), as docs/operations.md says.
  auto rotated = tlog::NoteSigner::Generate("fairvault/ledger-2");
  ASSERT_OK(rotated);
  ASSERT_NO_FATAL_FAILURE(RestartWithLogKey(*rotated));
  Count("after-rotation");
  const std::string new_key = rotated->verifier().Encoded();
  // With the new key alone the kept checkpoint cannot be opened; with the old one for it, the
  // new checkpoint is proved to extend it.
  CliResult new_only = RunCli(Auditor(absl::StrCat("auditor consistency --from ", kept,
                                                   " --log-key ", new_key)));
  EXPECT_EQ(new_only.exit_code, 1) << new_only.out;
  EXPECT_THAT(new_only.out, HasSubstr("no signature by 'fairvault/ledger-2'"));
  CliResult across = RunCli(Auditor(absl::StrCat("auditor consistency --from ", kept,
                                                 " --from-log-key ", key_file_, " --log-key ",
                                                 new_key, " --save ", dir_, "/kept-new.note")));
  ASSERT_EQ(across.exit_code, 0) << across.out;
  EXPECT_THAT(across.out, HasSubstr("across the key rotation from fairvault/ledger to "
                                    "fairvault/ledger-2"));
  auto saved = client::OpenCheckpoint(ReadAll(dir_ + "/kept-new.note"), rotated->verifier());
  ASSERT_OK(saved);

  // The old key endorses the new one (fairvault-server log-key --endorse-with): whoever holds
  // only the old verifier key takes the new one from the note; a note the old key did not sign,
  // or that names another new key, does not pass.
  const std::string new_key_file = server_->db_path() + ".log-key";  // the new secret key
  const std::string old_key_file = server_->db_path() + ".log-key-before";
  const std::string rotation = server_->db_path() + ".rotation.note";
  CliResult endorsed = RunCommand(absl::StrCat(FAIRVAULT_SERVER_BINARY, " log-key --key ",
                                               new_key_file, " --endorse-with ", old_key_file,
                                               " > ", rotation));
  ASSERT_EQ(endorsed.exit_code, 0) << endorsed.out;
  CliResult taken = RunCli(absl::StrCat("log rotation --rotation ", rotation,
                                        " --previous-log-key ", key_file_));
  ASSERT_EQ(taken.exit_code, 0) << taken.out;
  EXPECT_THAT(taken.out, HasSubstr(new_key));
  EXPECT_THAT(taken.out, HasSubstr("handed over to fairvault/ledger-2"));
  // Checked with a key that is not the one replaced.
  CliResult wrong = RunCli(absl::StrCat("log rotation --rotation ", rotation,
                                        " --previous-log-key ", new_key));
  EXPECT_EQ(wrong.exit_code, 1) << wrong.out;
  EXPECT_THAT(wrong.out, HasSubstr("NOT a rotation endorsed by fairvault/ledger-2"));
  // The new key swapped for a stranger's: the signatures no longer verify.
  auto stranger = tlog::NoteSigner::Generate("fairvault/ledger-2");
  ASSERT_OK(stranger);
  std::string forged = ReadAll(rotation);
  forged.replace(forged.find(new_key), new_key.size(), stranger->verifier().Encoded());
  std::ofstream(rotation + ".forged") << forged;
  CliResult swapped = RunCli(absl::StrCat("log rotation --rotation ", rotation,
                                          ".forged --previous-log-key ", key_file_));
  EXPECT_EQ(swapped.exit_code, 1) << swapped.out;
  EXPECT_THAT(swapped.out, HasSubstr("NOT a rotation endorsed by fairvault/ledger"));
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

  // Receipts from the two views, given together to `receipt sum`: caught as a split view.
  for (const bool fork_side : {false, true}) {
    v1::GetReceiptRequest req;
    req.set_seq(ours->checkpoint().size());
    auto receipt = (fork_side ? fork_auditor : auditor_)->GetReceipt(req, true);
    ASSERT_OK(receipt);
    std::string json;
    ASSERT_TRUE(google::protobuf::util::MessageToJsonString(receipt->receipt(), &json).ok());
    std::ofstream(absl::StrCat(dir_, fork_side ? "/theirs" : "/ours", ".json")) << json;
  }
  CliResult summed = RunCli(absl::StrCat("receipt sum --log-key ", key_file_, " --receipt ", dir_,
                                         "/ours.json --receipt ", dir_, "/theirs.json"));
  EXPECT_EQ(summed.exit_code, 1) << summed.out;
  EXPECT_THAT(summed.out, HasSubstr("SPLIT VIEW"));

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

  // Receipts of adjacent rows from the two views, cited by checkpoints of different sizes: the
  // fork's next row does not follow our last one (its prev_hash is another row's hash).
  v1::GetReceiptRequest next;
  next.set_seq(ours->checkpoint().size() + 1);
  auto fork_next = fork_auditor->GetReceipt(next, true);
  ASSERT_OK(fork_next);
  std::string json;
  ASSERT_TRUE(google::protobuf::util::MessageToJsonString(fork_next->receipt(), &json).ok());
  std::ofstream(dir_ + "/theirs-next.json") << json;
  CliResult chained = RunCli(absl::StrCat("receipt sum --log-key ", key_file_, " --receipt ",
                                          dir_, "/ours.json --receipt ", dir_,
                                          "/theirs-next.json"));
  EXPECT_EQ(chained.exit_code, 1) << chained.out;
  EXPECT_THAT(chained.out, HasSubstr("SPLIT VIEW"));
  EXPECT_THAT(chained.out, HasSubstr("prev_hash"));
  // Each alone is a valid receipt.
  CliResult alone = RunCli(absl::StrCat("receipt sum --log-key ", key_file_, " --receipt ", dir_,
                                        "/theirs-next.json"));
  EXPECT_EQ(alone.exit_code, 0) << alone.out;

  // An auditor who kept the fork's longer checkpoint is then shown ours, which is shorter: a
  // rollback, reported as evidence (exit status 1), not as arguments to swap.
  auto fork_later = fork_auditor->GetCheckpoint(v1::GetCheckpointRequest(), true);
  ASSERT_OK(fork_later);
  ASSERT_GT(fork_later->checkpoint().size(), ours->checkpoint().size());
  std::ofstream(dir_ + "/later.note") << fork_later->checkpoint().note();
  for (const std::string& to : {std::string(""), absl::StrCat(" --to ", dir_, "/ours.note")}) {
    CliResult rolled_back = RunCli(Auditor(absl::StrCat(
        "auditor consistency --from ", dir_, "/later.note --log-key ", key_file_, to)));
    EXPECT_EQ(rolled_back.exit_code, 1) << to << rolled_back.out;
    EXPECT_THAT(rolled_back.out, HasSubstr("NOT consistent"));
    EXPECT_THAT(rolled_back.out, HasSubstr("rolled its ledger back"));
  }
  EXPECT_OK(fork.Stop());
}

// A vault with two witnesses and a quorum of two: receipts cite only checkpoints both cosigned.
class WitnessTest : public TransparencyTest {
 protected:
  void SetUp() override {
    db_ = TempDatabasePath("witness");
    wdir_ = db_ + "-witnesses";
    std::filesystem::remove_all(wdir_);
    std::filesystem::create_directories(wdir_);
    std::string keys;
    for (const char* name : {"w1", "w2", "w3"}) {
      CliResult made = RunCli(absl::StrCat("witness key --name ", name, ".example/witness --out ",
                                           wdir_, "/", name, ".key"));
      ASSERT_EQ(made.exit_code, 0) << made.out;
      // stderr (a note) then stdout (the verifier key) on the last line.
      const std::string out(absl::StripTrailingAsciiWhitespace(made.out));
      const std::string key = out.substr(out.rfind('\n') + 1);
      verifier_keys_[name] = key;
      if (std::string(name) != "w3") absl::StrAppend(&keys, key, "\n");
    }
    witnesses_file_ = wdir_ + "/witnesses";
    std::ofstream(witnesses_file_) << "# the vault's witnesses\n" << keys;
    serve_flags_ = {"--witnesses", witnesses_file_, "--witness-quorum", "2"};
    TransparencyTest::SetUp();
  }

  // A witness run; the first one of a witness starts it (--init).
  CliResult Cosign(const std::string& name) {
    const std::string state = absl::StrCat(wdir_, "/", name, ".state");
    return RunCli(Auditor(absl::StrCat("witness cosign --witness-key ", wdir_, "/", name,
                                       ".key --state ", state, " --log-key ", key_file_,
                                       std::filesystem::exists(state) ? "" : " --init")));
  }

  // A checkpoint of `size` rows with root `root`, signed with the vault's own key: what a
  // vault showing this witness another history would have served it.
  std::string ForgedCheckpoint(int64_t size, const std::string& root) {
    auto signer = tlog::NoteSigner::Parse(ReadAll(server_->db_path() + ".log-key"));
    EXPECT_OK(signer);
    auto note = tlog::SignNote(tlog::CheckpointText({signer->name(), size, root, {}}), *signer);
    EXPECT_OK(note);
    return note.ok() ? *note : "";
  }

  std::string wdir_, witnesses_file_;
  std::map<std::string, std::string> verifier_keys_;
};

TEST_F(WitnessTest, ReceiptsWaitForTheQuorumAndVerifyWithIt) {
  Count("r1");
  // A witness starts only when told to: a missing state file is not a first run by itself.
  CliResult uninit = RunCli(Auditor(absl::StrCat(
      "witness cosign --witness-key ", wdir_, "/w1.key --state ", wdir_, "/w1.state --log-key ",
      key_file_)));
  EXPECT_EQ(uninit.exit_code, 2) << uninit.out;
  EXPECT_THAT(uninit.out, HasSubstr("pass --init"));
  v1::GetReceiptRequest req;
  req.set_idempotency_key("r1");
  auto refused = company_->GetReceipt(req, false).status();
  EXPECT_TRUE(absl::IsFailedPrecondition(refused)) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("cosigned by 2 of this vault's 2 witnesses"));

  CliResult first = Cosign("w1");
  ASSERT_EQ(first.exit_code, 0) << first.out;
  EXPECT_THAT(first.out, HasSubstr("1 witness cosignature(s)"));
  EXPECT_TRUE(absl::IsFailedPrecondition(company_->GetReceipt(req, false).status()));
  CliResult second = Cosign("w2");
  ASSERT_EQ(second.exit_code, 0) << second.out;
  EXPECT_THAT(second.out, HasSubstr("2 witness cosignature(s)"));

  // The receipt now cites the witnessed checkpoint; both cosignatures verify offline.
  const std::string file = wdir_ + "/receipt.json";
  CliResult got = RunCli(Company(absl::StrCat("receipt get --idempotency-key r1 --account acme --out ", file,
                                              " --log-key ", key_file_, " --witness ",
                                              witnesses_file_)));
  ASSERT_EQ(got.exit_code, 0) << got.out;
  EXPECT_THAT(got.out, HasSubstr("cosigned by w1.example/witness, w2.example/witness (quorum 2 "
                                 "of 2): verified"));
  // A witness that never cosigned does not count; a quorum of one of the two that did holds.
  CliResult absent = RunCli(absl::StrCat("receipt verify ", file, " --log-key ", key_file_,
                                         " --witness ", verifier_keys_["w3"]));
  EXPECT_EQ(absent.exit_code, 1) << absent.out;
  EXPECT_THAT(absent.out, HasSubstr("fewer than the quorum of 1 (missing: w3.example/witness)"));
  CliResult one = RunCli(absl::StrCat("receipt verify ", file, " --log-key ", key_file_,
                                      " --witness ", verifier_keys_["w3"], " --witness ",
                                      verifier_keys_["w1"], " --quorum 1"));
  EXPECT_EQ(one.exit_code, 0) << one.out;
  // One witness given twice does not make a quorum of two.
  CliResult twice = RunCli(absl::StrCat("receipt verify ", file, " --log-key ", key_file_,
                                        " --witness ", verifier_keys_["w1"], " --witness ",
                                        verifier_keys_["w1"], " --quorum 2"));
  EXPECT_EQ(twice.exit_code, 2) << twice.out;
  EXPECT_THAT(twice.out, HasSubstr("given twice"));
  // A cosignature altered in the receipt is caught, naming the witness.
  std::string text = ReadAll(file);
  const size_t at = text.find("w2.example/witness ");
  ASSERT_NE(at, std::string::npos) << text;
  char& c = text[at + std::string("w2.example/witness ").size() + 20];
  c = c == 'A' ? 'B' : 'A';
  std::ofstream(wdir_ + "/altered.json") << text;
  CliResult altered = RunCli(absl::StrCat("receipt verify ", wdir_, "/altered.json --log-key ",
                                          key_file_, " --witness ", witnesses_file_));
  EXPECT_EQ(altered.exit_code, 1) << altered.out;
  EXPECT_THAT(altered.out, HasSubstr("the cosignature of witness 'w2.example/witness' does not "
                                     "verify"));
  auto ckpt = client::OpenCheckpoint(
      company_->GetReceipt(req, false)->receipt().checkpoint().note(), verifier_);
  ASSERT_OK(ckpt);
  v1::GetCheckpointRequest witnessed;
  witnessed.set_witnessed(true);
  auto latest = auditor_->GetCheckpoint(witnessed, true);
  ASSERT_OK(latest);
  EXPECT_EQ(latest->checkpoint().cosignatures(), 2);
  EXPECT_EQ(latest->checkpoint().size(), ckpt->size);

  // More rows: a witness proves the new tree extends the one it cosigned before.
  Count("r2");
  CliResult again = Cosign("w1");
  ASSERT_EQ(again.exit_code, 0) << again.out;
  EXPECT_THAT(again.out, HasSubstr(absl::StrCat("consistent with the ", ckpt->size,
                                                " rows cosigned before")));
}

TEST_F(WitnessTest, AWitnessRefusesASplitViewAndKeepsTheEvidence) {
  Count("r1");
  auto latest = auditor_->GetCheckpoint(v1::GetCheckpointRequest(), true);
  ASSERT_OK(latest);
  const int64_t size = latest->checkpoint().size();
  const std::string state = wdir_ + "/w1.state";
  const struct {
    int64_t size;
    const char* why;
  } cases[] = {{size, "two checkpoints of"},
               {size - 1, "does not extend"},
               {size + 5, "smaller than the"}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.why);
    std::ofstream(state) << ForgedCheckpoint(c.size, tlog::LeafHash("another history"));
    std::filesystem::remove(state + ".split-view");
    CliResult split = Cosign("w1");
    EXPECT_EQ(split.exit_code, 1) << split.out;
    EXPECT_THAT(split.out, HasSubstr("SPLIT VIEW"));
    EXPECT_THAT(split.out, HasSubstr(c.why));
    const std::string evidence = ReadAll(state + ".split-view");
    EXPECT_THAT(evidence, HasSubstr(latest->checkpoint().note()));
    EXPECT_THAT(evidence, HasSubstr(tlog::CheckpointText(
                              {verifier_.name, c.size, tlog::LeafHash("another history"), {}})));
  }
  // Nothing was cosigned.
  v1::GetCheckpointRequest exact;
  exact.set_size(size);
  auto after = auditor_->GetCheckpoint(exact, true);
  ASSERT_OK(after);
  EXPECT_EQ(after->checkpoint().cosignatures(), 0);
}

TEST_F(WitnessTest, TheVaultStoresOnlyListedWitnessesValidCosignatures) {
  Count("r1");
  auto latest = auditor_->GetCheckpoint(v1::GetCheckpointRequest(), true);
  ASSERT_OK(latest);
  const std::string note = latest->checkpoint().note();
  auto w3 = tlog::NoteSigner::Parse(ReadAll(wdir_ + "/w3.key"));
  auto w1 = tlog::NoteSigner::Parse(ReadAll(wdir_ + "/w1.key"));
  ASSERT_OK(w3);
  ASSERT_OK(w1);
  v1::AddCosignatureRequest req;
  req.set_note(*tlog::SignNote(note, *w3));
  auto unlisted = auditor_->AddCosignature(req).status();
  EXPECT_TRUE(absl::IsInvalidArgument(unlisted)) << unlisted;
  EXPECT_THAT(unlisted.message(), HasSubstr("no cosignature line by a witness this vault lists"));
  // A listed witness's line over another text: refused, nothing stored.
  auto split = tlog::ParseNote(*tlog::SignNote(note, *w1));
  ASSERT_OK(split);
  auto other = tlog::SignNote("something else\n", *w1);
  ASSERT_OK(other);
  auto other_split = tlog::ParseNote(*other);
  ASSERT_OK(other_split);
  req.set_note(split->text + "\n" + tlog::SignatureLineText(other_split->signatures[0]));
  auto forged = auditor_->AddCosignature(req).status();
  EXPECT_TRUE(absl::IsInvalidArgument(forged)) << forged;
  EXPECT_THAT(forged.message(), HasSubstr("does not verify"));
  // Another checkpoint text of a stored size: not this vault's.
  req.set_note(ForgedCheckpoint(latest->checkpoint().size(), tlog::LeafHash("x")));
  req.set_note(*tlog::SignNote(req.note(), *w1));
  auto foreign = auditor_->AddCosignature(req).status();
  EXPECT_TRUE(absl::IsInvalidArgument(foreign)) << foreign;
  EXPECT_THAT(foreign.message(), HasSubstr("not this vault's"));
  // Two lines of one witness, or a note far larger than a cosigned checkpoint: refused whole.
  auto once = tlog::SignNote(note, *w1);
  ASSERT_OK(once);
  auto twice_split = tlog::ParseNote(*once);
  ASSERT_OK(twice_split);
  req.set_note(*once + tlog::SignatureLineText(twice_split->signatures.back()));
  auto doubled = auditor_->AddCosignature(req).status();
  EXPECT_TRUE(absl::IsInvalidArgument(doubled)) << doubled;
  EXPECT_THAT(doubled.message(), HasSubstr("more than one line"));
  std::string huge = *once;
  for (int i = 0; i < 2000; ++i) huge += tlog::SignatureLineText(twice_split->signatures.back());
  req.set_note(huge);
  auto too_big = auditor_->AddCosignature(req).status();
  EXPECT_TRUE(absl::IsInvalidArgument(too_big)) << too_big;
  EXPECT_THAT(too_big.message(), HasSubstr("at most"));
  // Companies do not cosign.
  req.set_note(*tlog::SignNote(note, *w1));
  EXPECT_TRUE(absl::IsPermissionDenied(company_->AddCosignature(req).status()));
  auto stored = auditor_->AddCosignature(req);
  ASSERT_OK(stored);
  EXPECT_EQ(stored->checkpoint().cosignatures(), 1);
  EXPECT_EQ(stored->witnesses_size(), 1);
}

TEST_F(WitnessTest, AWitnessFollowsAKeyRotationOnlyWithThePreviousKey) {
  Count("r1");
  ASSERT_EQ(Cosign("w1").exit_code, 0);
  const std::string old_key = verifier_.Encoded();
  const std::string state = wdir_ + "/w1.state";
  auto kept = client::OpenCheckpoint(ReadAll(state), verifier_);
  ASSERT_OK(kept);
  // An old-key checkpoint of another history, kept aside: it must not pass across the rotation.
  const std::string forged = wdir_ + "/forged-old.note";
  std::ofstream(forged) << ForgedCheckpoint(kept->size, tlog::LeafHash("other history"));

  auto rotated = tlog::NoteSigner::Generate("fairvault/ledger-2");
  ASSERT_OK(rotated);
  ASSERT_NO_FATAL_FAILURE(RestartWithLogKey(*rotated));
  Count("r2");
  const std::string new_key_file = wdir_ + "/new.pub";
  std::ofstream(new_key_file) << rotated->verifier().Encoded() << "\n";
  const std::string run = absl::StrCat("witness cosign --witness-key ", wdir_, "/w1.key --state ",
                                       state, " --log-key ", new_key_file);
  // The kept checkpoint is under the old key: without it the witness cannot check, and stops.
  CliResult without = RunCli(Auditor(run));
  EXPECT_EQ(without.exit_code, 2) << without.out;
  EXPECT_THAT(without.out, HasSubstr("no signature by 'fairvault/ledger-2'"));
  CliResult with = RunCli(Auditor(absl::StrCat(run, " --previous-log-key ", old_key)));
  ASSERT_EQ(with.exit_code, 0) << with.out;
  EXPECT_THAT(with.out, HasSubstr(absl::StrCat("consistent with the ", kept->size,
                                               " rows cosigned before")));
  // An old-key checkpoint of another tree is not extended by the new one.
  CliResult other = RunCli(Auditor(absl::StrCat("auditor consistency --from ", forged,
                                                " --from-log-key ", old_key, " --log-key ",
                                                new_key_file)));
  EXPECT_EQ(other.exit_code, 1) << other.out;
  EXPECT_THAT(other.out, HasSubstr("NOT consistent"));
}

TEST_F(WitnessTest, ReportBudgetsShowsTheLatestCheckpointAndItsConsistencyWithTheKeptOne) {
  Count("r1");
  ASSERT_EQ(Cosign("w1").exit_code, 0);
  ASSERT_EQ(Cosign("w2").exit_code, 0);
  const std::string kept = wdir_ + "/auditor.kept", page = wdir_ + "/budgets.html";
  const std::string report = absl::StrCat("report budgets --out ", page, " --log-key ", key_file_,
                                          " --kept ", kept, " --witness ", witnesses_file_);
  CliResult first = RunCli(Auditor(report));
  ASSERT_EQ(first.exit_code, 0) << first.out;
  EXPECT_THAT(first.out, HasSubstr("no checkpoint was kept"));
  EXPECT_THAT(ReadAll(page), HasSubstr("<b id=\"checkpoint-status\">verified</b>"));
  auto kept_first = client::OpenCheckpoint(ReadAll(kept), verifier_);
  ASSERT_OK(kept_first);

  // A new row and a witness run later: consistent with the kept checkpoint, which moves on.
  Count("r2");
  ASSERT_EQ(Cosign("w1").exit_code, 0);
  ASSERT_EQ(Cosign("w2").exit_code, 0);
  CliResult second = RunCli(Auditor(report));
  ASSERT_EQ(second.exit_code, 0) << second.out;
  EXPECT_THAT(second.out, HasSubstr(absl::StrCat("consistent with the kept checkpoint of ",
                                                 kept_first->size, " rows")));
  EXPECT_THAT(second.out, HasSubstr("cosigned by w1.example/witness, w2.example/witness"));
  const std::string html = ReadAll(page);
  EXPECT_THAT(html, HasSubstr("<td id=\"checkpoint-consistency\">consistent with the kept"));
  auto kept_second = client::OpenCheckpoint(ReadAll(kept), verifier_);
  ASSERT_OK(kept_second);
  EXPECT_GT(kept_second->size, kept_first->size);

  // The auditor kept a checkpoint of another history: the page says FAILED, exit status 1, and
  // the kept note stays as evidence.
  const std::string forged = ForgedCheckpoint(kept_second->size, tlog::LeafHash("rewritten"));
  std::ofstream(kept) << forged;
  CliResult third = RunCli(Auditor(report));
  EXPECT_EQ(third.exit_code, 1) << third.out;
  EXPECT_THAT(third.out, HasSubstr("NOT consistent with the kept checkpoint"));
  EXPECT_THAT(ReadAll(page), HasSubstr("<b id=\"checkpoint-status\">FAILED</b>"));
  EXPECT_EQ(ReadAll(kept), forged);
}

// Go's golang.org/x/mod/sumdb/note and sumdb/tlog (tests/interop/tlog_verify.go), an
// implementation that shares nothing with the vault's, check its checkpoints and proofs: every
// row's inclusion in the signed tree its receipt cites (a checkpoint is kept after each new row,
// so up to 24 rows each is cited in the tree it completed), and consistency between every pair
// of trees of those sizes; an altered proof or note is refused by it too.
TEST_F(TransparencyTest, AnIndependentGoVerifierAgrees) {
#ifndef FAIRVAULT_GO_VERIFIER
  if (std::getenv("FAIRVAULT_REQUIRE_GO") != nullptr) {
    FAIL() << "FAIRVAULT_REQUIRE_GO is set but transparency_test was built without the Go "
              "verifier (apt install golang-go golang-golang-x-mod-dev, then re-run cmake)";
  }
  GTEST_SKIP() << "go or golang-golang-x-mod-dev missing (deploy/test.sh installs them)";
#else
  auto go = [](const std::string& args) {
    return RunCommand(absl::StrCat(FAIRVAULT_GO_VERIFIER, " ", args));
  };
  // Checkpoints of every size from the seeding's rows up, one new row each.
  std::map<int64_t, std::string> notes;
  auto keep = [&]() {
    auto c = auditor_->GetCheckpoint(v1::GetCheckpointRequest(), true);
    EXPECT_OK(c);
    const std::string path = absl::StrCat(dir_, "/go-", c->checkpoint().size(), ".note");
    std::ofstream(path) << c->checkpoint().note();
    notes[c->checkpoint().size()] = path;
  };
  keep();
  while (notes.rbegin()->first < 24) {
    Count(absl::StrCat("go-", notes.size()));
    keep();
  }
  int receipts = 0, consistencies = 0;
  for (int64_t seq = 1; seq <= notes.rbegin()->first; ++seq) {
    v1::GetReceiptRequest req;
    req.set_seq(seq);
    auto receipt = auditor_->GetReceipt(req, true);
    ASSERT_OK(receipt);
    const v1::Receipt& r = receipt->receipt();
    const std::string path = absl::StrCat(dir_, "/go-receipt-", seq, ".note");
    std::ofstream(path) << r.checkpoint().note();
    std::string args = absl::StrCat("receipt ", verifier_.Encoded(), " ", path, " ",
                                    r.leaf_index(), " ", r.entry().hash());
    for (const std::string& h : r.inclusion_proof()) {
      absl::StrAppend(&args, " ", absl::Base64Escape(h));
    }
    CliResult ok = go(args);
    ASSERT_EQ(ok.exit_code, 0) << args << "\n" << ok.out;
    ++receipts;
    if (!r.inclusion_proof().empty()) {
      std::string bad = args;
      const size_t at = bad.rfind(' ') + 1;
      bad[at] = bad[at] == 'A' ? 'B' : 'A';
      EXPECT_EQ(go(bad).exit_code, 1) << "an altered inclusion proof";
    }
  }
  for (const auto& [size, path] : notes) {
    for (const auto& [later, later_path] : notes) {
      if (later < size) continue;
      v1::GetConsistencyProofRequest req;
      req.set_from_size(size);
      req.set_to_size(later);
      auto proof = auditor_->GetConsistencyProof(req, true);
      ASSERT_OK(proof);
      std::string args = absl::StrCat("consistency ", verifier_.Encoded(), " ", path, " ",
                                      later_path);
      for (const std::string& h : proof->proof()) absl::StrAppend(&args, " ", absl::Base64Escape(h));
      CliResult ok = go(args);
      ASSERT_EQ(ok.exit_code, 0) << args << "\n" << ok.out;
      ++consistencies;
    }
  }
  // A note whose size was edited fails the Go signature check.
  std::string edited = ReadAll(notes.rbegin()->second);
  edited.replace(edited.find('\n') + 1, 2, "99");
  std::ofstream(dir_ + "/go-edited.note") << edited;
  CliResult refused = go(absl::StrCat("consistency ", verifier_.Encoded(), " ",
                                      notes.begin()->second, " ", dir_, "/go-edited.note"));
  EXPECT_EQ(refused.exit_code, 1) << refused.out;
  EXPECT_THAT(refused.out, HasSubstr("does not verify"));
  std::printf("Go's sumdb/tlog verified %d inclusion proofs and %d consistency proofs\n",
              receipts, consistencies);
#endif
}

TEST_F(TransparencyTest, ABudgetsReportIsCheckedAgainstTheReceiptsOfItsRows) {
  Count("sum-1");
  Count("sum-2");
  std::vector<std::string> files;
  for (const char* key : {"sum-1", "sum-2"}) {
    files.push_back(absl::StrCat(dir_, "/", key, ".json"));
    CliResult got = RunCli(Company(absl::StrCat("receipt get --idempotency-key ", key,
                                                " --out ", files.back())));
    ASSERT_EQ(got.exit_code, 0) << got.out;
  }
  const std::string csv = dir_ + "/charges.csv";
  CliResult report = RunCli(Auditor(absl::StrCat("report budgets --out ", dir_,
                                                 "/budgets.html --csv ", csv)));
  ASSERT_EQ(report.exit_code, 0) << report.out;
  const std::string sum = absl::StrCat("receipt sum --log-key ", key_file_, " --receipt ",
                                       files[0], " --report-csv ", csv);
  CliResult both = RunCli(absl::StrCat(sum, " --receipt ", files[1]));
  ASSERT_EQ(both.exit_code, 0) << both.out;
  EXPECT_THAT(both.out, HasSubstr("acme,pop,2,0.5,0"));
  EXPECT_THAT(both.out, HasSubstr("exactly the receipted rows"));
  // A charge of the report without a receipt here cannot be vouched for.
  CliResult one = RunCli(sum);
  EXPECT_EQ(one.exit_code, 1) << one.out;
  EXPECT_THAT(one.out, HasSubstr("1 charge(s) of the report have no receipt"));
  // A report that understates a charge's epsilon.
  std::string text = ReadAll(csv);
  const size_t at = text.find(",0.25,");
  ASSERT_NE(at, std::string::npos) << text;
  text.replace(at, 6, ",0.125,");
  std::ofstream(dir_ + "/understated.csv") << text;
  CliResult understated = RunCli(absl::StrCat("receipt sum --log-key ", key_file_, " --receipt ",
                                              files[0], " --receipt ", files[1],
                                              " --report-csv ", dir_, "/understated.csv"));
  EXPECT_EQ(understated.exit_code, 1) << understated.out;
  EXPECT_THAT(understated.out, HasSubstr("the report says acme/pop epsilon 0.125"));
  // A report that lists a receipted charge twice.
  const std::string original = ReadAll(csv);
  const size_t second_line = original.find('\n') + 1;
  const std::string row = original.substr(second_line, original.find('\n', second_line) + 1 -
                                                           second_line);
  std::ofstream(dir_ + "/doubled.csv") << original << row;
  CliResult doubled = RunCli(absl::StrCat("receipt sum --log-key ", key_file_, " --receipt ",
                                          files[0], " --receipt ", files[1], " --report-csv ",
                                          dir_, "/doubled.csv"));
  EXPECT_EQ(doubled.exit_code, 1) << doubled.out;
  EXPECT_THAT(doubled.out, HasSubstr("is listed twice in the report"));
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
  // A budgets report asked to check no checkpoint says there is none; asked to check one (a
  // vault restored from an older backup and started without its key), it fails.
  const std::string report = absl::StrCat("--server ", keyless.target(), " --key ", *key,
                                          " report budgets --out ", dir_, "/keyless.html");
  CliResult unchecked = RunCli(report);
  EXPECT_EQ(unchecked.exit_code, 0) << unchecked.out;
  EXPECT_THAT(unchecked.out, HasSubstr("checkpoint: none (the vault signs no checkpoints)"));
  for (const std::string& flags : {absl::StrCat(" --log-key ", key_file_),
                                  absl::StrCat(" --log-key ", key_file_, " --kept ", dir_,
                                               "/keyless.kept")}) {
    CliResult checked = RunCli(report + flags);
    EXPECT_EQ(checked.exit_code, 1) << flags << checked.out;
    EXPECT_THAT(checked.out, HasSubstr("serves no signed checkpoint"));
    EXPECT_THAT(ReadAll(dir_ + "/keyless.html"), HasSubstr("<b id=\"checkpoint-status\">FAILED</b>"));
  }
  EXPECT_OK(keyless.Stop());
}

}  // namespace
}  // namespace fairvault::testing
