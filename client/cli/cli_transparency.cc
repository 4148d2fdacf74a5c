// The transparency log from the CLI (issue 25): signed checkpoints, receipts for releases, and
// consistency between two checkpoints. Verification needs only the vault's verifier key
// (--log-key or $FAIRVAULT_LOG_KEY, given out of band by the operator): the vault is not
// trusted to check itself.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "client/cli/cli_common.h"
#include "client/lib/csv.h"
#include "client/lib/ledger_check.h"
#include "client/lib/receipts.h"
#include "client/report/report_budgets_html.h"
#include "core/util/status_macros.h"
#include "core/util/decimal.h"
#include "core/util/truncate.h"

namespace fairvault::client::cli {
namespace {

namespace tlog = core::transparency;

FlagSpec LogKeyFlag(bool required) {
  return {"log-key", "KEY",
          "the vault's verifier key \"ORIGIN+HASH+BASE64\", or a file holding it (default "
          "$FAIRVAULT_LOG_KEY)",
          required};
}

FlagSpec AuditorFlag() {
  return {"auditor", "", "through the auditor service (auditors and the regulator)"};
}

// The verifier key from --log-key (a key, or a file holding one) or $FAIRVAULT_LOG_KEY;
// nullopt if neither is set.
// A verifier key given as flag `name`'s `value`: the key itself, or a file holding it.
absl::StatusOr<tlog::NoteVerifier> KeyOrFile(absl::string_view name, const std::string& value) {
  absl::StatusOr<std::string> file = ReadFileToString(value);
  absl::StatusOr<tlog::NoteVerifier> key = tlog::NoteVerifier::Parse(file.ok() ? *file : value);
  if (!key.ok()) {
    return UsageError(absl::StrCat("--", name, ": neither a verifier key nor a file holding one (",
                                   key.status().message(), ")"));
  }
  return key;
}

absl::StatusOr<std::optional<tlog::NoteVerifier>> LogKey(const ParsedFlags& flags) {
  std::string value = flags.Get("log-key");
  if (value.empty()) {
    const char* env = std::getenv("FAIRVAULT_LOG_KEY");
    if (env == nullptr || *env == '\0') return std::nullopt;
    value = env;
  }
  ASSIGN_OR_RETURN(tlog::NoteVerifier key, KeyOrFile("log-key", value));
  return std::optional<tlog::NoteVerifier>(std::move(key));
}

// The vault's previous verifier key from flag `name` (a key or a file holding one), for a
// checkpoint kept before the vault rotated its log key; nullopt when the flag is absent.
absl::StatusOr<std::optional<tlog::NoteVerifier>> PreviousKey(const ParsedFlags& flags,
                                                              absl::string_view name) {
  if (!flags.Has(name)) return std::nullopt;
  ASSIGN_OR_RETURN(tlog::NoteVerifier key, KeyOrFile(name, flags.Get(name)));
  return std::optional<tlog::NoteVerifier>(std::move(key));
}

FlagSpec PreviousKeyFlag(const std::string& name, const std::string& what) {
  return {name, "KEY",
          absl::StrCat("the vault's verifier key that signed ", what,
                       ", when the vault has rotated its log key since (then --log-key is the "
                       "new one)")};
}

absl::StatusOr<tlog::NoteVerifier> RequiredLogKey(const ParsedFlags& flags) {
  ASSIGN_OR_RETURN(std::optional<tlog::NoteVerifier> key, LogKey(flags));
  if (!key.has_value()) {
    return UsageError(
        "--log-key is required (or $FAIRVAULT_LOG_KEY): the vault's verifier key, from its "
        "operator (fairvault-server log-key)");
  }
  return *std::move(key);
}

FlagSpec WitnessFlag() {
  return {"witness", "KEY",
          "a witness's verifier key (cosignature/v1), or a file of them one per line; repeat "
          "for several",
          false, true};
}

FlagSpec QuorumFlag() {
  return {"quorum", "N", "how many of the --witness keys must have cosigned (default: all)"};
}

// The witness keys given with --witness (keys, or files of them); empty if none.
absl::StatusOr<std::vector<tlog::NoteVerifier>> WitnessKeys(const ParsedFlags& flags) {
  std::vector<tlog::NoteVerifier> out;
  for (const std::string& value : flags.GetAll("witness")) {
    absl::StatusOr<std::string> file = ReadFileToString(value);
    absl::StatusOr<std::vector<tlog::NoteVerifier>> keys =
        ParseWitnessKeys(file.ok() ? *file : value);
    if (!keys.ok()) {
      return UsageError(absl::StrCat("--witness ", file.ok() ? value + ": " : std::string(),
                                     keys.status().message()));
    }
    for (tlog::NoteVerifier& k : *keys) {
      for (const tlog::NoteVerifier& earlier : out) {
        if (earlier.name == k.name || earlier.public_key == k.public_key) {
          return UsageError(absl::StrCat("--witness: '", k.name,
                                         "' is given twice (by name or key): each witness counts "
                                         "once toward --quorum"));
        }
      }
      out.push_back(std::move(k));
    }
  }
  return out;
}

// With --witness: checks the note's cosignatures against them and the quorum, and says so.
absl::Status CheckWitnesses(const ParsedFlags& flags, const std::string& note) {
  ASSIGN_OR_RETURN(std::vector<tlog::NoteVerifier> witnesses, WitnessKeys(flags));
  if (witnesses.empty()) {
    if (flags.Has("quorum")) return UsageError("--quorum goes with --witness");
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(const int64_t quorum,
                   flags.GetInt("quorum", static_cast<int64_t>(witnesses.size())));
  if (quorum < 1 || quorum > static_cast<int64_t>(witnesses.size())) {
    return UsageError(absl::StrCat("--quorum must be 1..", witnesses.size(),
                                   " (the witnesses given)"));
  }
  absl::StatusOr<std::vector<std::string>> cosigned =
      VerifyCosignatures(note, witnesses, static_cast<int>(quorum));
  if (!cosigned.ok()) {
    return absl::DataLossError(
        absl::StrCat("witnesses NOT verified: ", cosigned.status().message()));
  }
  std::cerr << "cosigned by " << absl::StrJoin(*cosigned, ", ") << " (quorum " << quorum
            << " of " << witnesses.size() << "): verified\n";
  return absl::OkStatus();
}

// A failed check, as the CLI reports a ledger that does not verify (exit status 1).
absl::Status NotVerified(const absl::Status& status, absl::string_view what) {
  if (status.ok()) return status;
  return absl::DataLossError(absl::StrCat(what, " NOT verified: ", status.message()));
}

absl::Status LogCheckpoint(Context& ctx) {
  const ParsedFlags& flags = ctx.flags();
  ASSIGN_OR_RETURN(const int64_t size, flags.GetInt("size", 0));
  if (size < 0) return UsageError("--size must be >= 1 (or absent: the whole ledger)");
  ASSIGN_OR_RETURN(std::optional<tlog::NoteVerifier> key, LogKey(flags));
  ASSIGN_OR_RETURN(Client * client, ctx.client());
  v1::GetCheckpointRequest req;
  req.set_size(size);
  req.set_witnessed(flags.GetBool("witnessed"));
  if (req.witnessed() && size != 0) return UsageError("--witnessed goes without --size");
  ASSIGN_OR_RETURN(v1::GetCheckpointResponse resp,
                   client->GetCheckpoint(req, flags.GetBool("auditor")));
  if (key.has_value()) {
    absl::StatusOr<tlog::Checkpoint> opened = OpenCheckpoint(resp.checkpoint().note(), *key);
    RETURN_IF_ERROR(NotVerified(opened.status(), "checkpoint"));
    if (size != 0 && opened->size != size) {
      return absl::DataLossError(absl::StrCat("checkpoint NOT verified: asked for ", size,
                                              " rows, the signed note says ", opened->size));
    }
    std::cerr << "checkpoint of " << opened->size << " rows, signed by " << key->name
              << ": signature verified";
    if (resp.checkpoint().cosignatures() > 0) {
      std::cerr << " (" << resp.checkpoint().cosignatures() << " witness cosignatures)";
    }
    std::cerr << "\n";
    RETURN_IF_ERROR(CheckWitnesses(flags, resp.checkpoint().note()));
  } else {
    std::cerr << "not verified (no --log-key); the vault says its key is "
              << resp.verifier_key() << " — take the key from the operator, not from here\n";
  }
  if (flags.Has("out")) {
    RETURN_IF_ERROR(WriteStringToFile(flags.Get("out"), resp.checkpoint().note()));
    std::cerr << "written to " << flags.Get("out") << "\n";
  }
  if (ctx.json()) {
    PrintJson(resp);
  } else if (!flags.Has("out")) {
    std::cout << resp.checkpoint().note();
  }
  return absl::OkStatus();
}

absl::Status PrintVerified(const v1::Receipt& receipt, const tlog::Checkpoint& checkpoint,
                           const tlog::NoteVerifier& key) {
  const v1::LedgerEntry& e = receipt.entry();
  std::cout << "receipt verified: ledger row " << e.seq() << " (" << e.kind();
  if (!e.request_kind().empty()) std::cout << " " << e.request_kind();
  std::cout << ", " << e.account() << ", " << e.dataset() << ", epsilon " << Num(e.epsilon())
            << ", delta " << Num(e.delta()) << ", key " << e.idempotency_key()
            << ") is leaf " << receipt.leaf_index() << " of the tree of " << checkpoint.size
            << " rows with root " << absl::BytesToHexString(checkpoint.root.substr(0, 8))
            << "..., signed by " << key.name << "\n";
  return absl::OkStatus();
}

// The row a receipt must be for: --seq, or --idempotency-key of --account (keys are per company,
// so a receipt found by one proves the release is yours only if its row names your account).
struct RowAskedFor {
  int64_t seq = 0;
  std::string key, account;

  static absl::StatusOr<RowAskedFor> FromFlags(const ParsedFlags& flags) {
    RowAskedFor row;
    ASSIGN_OR_RETURN(row.seq, flags.GetInt("seq", 0));
    if (row.seq < 0) return UsageError("--seq must be >= 1");
    row.key = flags.Get("idempotency-key");
    row.account = flags.Get("account");
    return row;
  }
  // A valid receipt of another row proves nothing about this release.
  absl::Status Check(const v1::LedgerEntry& entry) const {
    if ((seq != 0 && entry.seq() != seq) ||
        (!key.empty() && (entry.idempotency_key() != key || entry.kind() != "charge")) ||
        (!account.empty() && entry.account() != account)) {
      return absl::DataLossError(absl::StrCat(
          "receipt NOT verified: it is for ledger row ", entry.seq(), " (",
          core::Truncated(entry.kind()), ", account '", core::Truncated(entry.account()),
          "', key '", core::Truncated(entry.idempotency_key()), "'), not the row asked for"));
    }
    return absl::OkStatus();
  }
};

absl::Status KeyNeedsAccount(const RowAskedFor& row) {
  if (!row.key.empty() && row.account.empty()) {
    return UsageError(
        "--idempotency-key with --log-key needs --account NAME (your account's name): another "
        "company's row can have the same key");
  }
  return absl::OkStatus();
}

absl::Status ReceiptGet(Context& ctx) {
  const ParsedFlags& flags = ctx.flags();
  ASSIGN_OR_RETURN(const RowAskedFor asked, RowAskedFor::FromFlags(flags));
  if ((asked.seq != 0) == !asked.key.empty()) {
    return UsageError("give one of --seq N and --idempotency-key KEY");
  }
  ASSIGN_OR_RETURN(std::optional<tlog::NoteVerifier> log_key, LogKey(flags));
  if (!log_key.has_value() && flags.Has("witness")) {
    return UsageError("--witness needs --log-key: cosignatures are checked on a verified receipt");
  }
  if (log_key.has_value()) RETURN_IF_ERROR(KeyNeedsAccount(asked));
  ASSIGN_OR_RETURN(Client * client, ctx.client());
  v1::GetReceiptRequest req;
  req.set_seq(asked.seq);
  req.set_idempotency_key(asked.key);
  ASSIGN_OR_RETURN(v1::GetReceiptResponse resp, client->GetReceipt(req, flags.GetBool("auditor")));
  RETURN_IF_ERROR(asked.Check(resp.receipt().entry()));
  const std::string json = ToJson(resp.receipt());
  if (flags.Has("out")) {
    RETURN_IF_ERROR(WriteStringToFile(flags.Get("out"), json));
    std::cerr << "receipt for ledger row " << resp.receipt().entry().seq() << " written to "
              << flags.Get("out") << "\n";
  } else {
    std::cout << json;
  }
  if (log_key.has_value()) {
    absl::StatusOr<tlog::Checkpoint> checkpoint = VerifyReceipt(resp.receipt(), *log_key);
    RETURN_IF_ERROR(NotVerified(checkpoint.status(), "receipt"));
    RETURN_IF_ERROR(CheckWitnesses(flags, resp.receipt().checkpoint().note()));
    if (flags.Has("out")) return PrintVerified(resp.receipt(), *checkpoint, *log_key);
    std::cerr << "receipt verified against " << log_key->name << "\n";
  }
  return absl::OkStatus();
}

absl::Status ReceiptVerify(Context& ctx) {
  const ParsedFlags& flags = ctx.flags();
  ASSIGN_OR_RETURN(tlog::NoteVerifier key, RequiredLogKey(flags));
  ASSIGN_OR_RETURN(const RowAskedFor asked, RowAskedFor::FromFlags(flags));
  RETURN_IF_ERROR(KeyNeedsAccount(asked));
  ASSIGN_OR_RETURN(std::string text, ReadFileToString(flags.Get("receipt")));
  v1::Receipt receipt;
  RETURN_IF_ERROR(FromJson(text, flags.Get("receipt"), receipt));
  RETURN_IF_ERROR(asked.Check(receipt.entry()));
  absl::StatusOr<tlog::Checkpoint> checkpoint = VerifyReceipt(receipt, key);
  RETURN_IF_ERROR(NotVerified(checkpoint.status(), "receipt"));
  RETURN_IF_ERROR(CheckWitnesses(flags, receipt.checkpoint().note()));
  return PrintVerified(receipt, *checkpoint, key);
}

// Verifies every receipt given and sums their charge rows per company and dataset; with
// --report-csv, checks that the report's charges are exactly those rows (same seq, company,
// dataset, epsilon, delta), so that its per-company sums are the sums of rows with receipts.
absl::Status ReceiptSum(Context& ctx) {
  const ParsedFlags& flags = ctx.flags();
  ASSIGN_OR_RETURN(tlog::NoteVerifier key, RequiredLogKey(flags));
  struct Sum {
    int64_t charges = 0;
    double epsilon = 0, delta = 0;
  };
  std::map<std::pair<std::string, std::string>, Sum> sums;
  std::map<int64_t, v1::LedgerEntry> rows;  // the charges, by seq
  std::map<int64_t, std::string> row_hashes;  // every row, by seq
  std::map<int64_t, std::string> prev_hashes;  // every row's predecessor's hash, by seq
  std::map<int64_t, std::string> roots;  // every checkpoint cited, by size
  for (const std::string& path : flags.GetAll("receipt")) {
    ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
    v1::Receipt receipt;
    RETURN_IF_ERROR(FromJson(text, path, receipt));
    absl::StatusOr<tlog::Checkpoint> checkpoint = VerifyReceipt(receipt, key);
    RETURN_IF_ERROR(NotVerified(checkpoint.status(), absl::StrCat("receipt ", path)));
    RETURN_IF_ERROR(CheckWitnesses(flags, receipt.checkpoint().note()));
    const v1::LedgerEntry& e = receipt.entry();
    // Two signed views of one row, or of one tree size: the vault forked its log.
    auto [hash, new_row] = row_hashes.emplace(e.seq(), e.hash());
    auto [root, new_size] = roots.emplace(checkpoint->size, checkpoint->root);
    if (hash->second != e.hash() || root->second != checkpoint->root) {
      return absl::DataLossError(absl::StrCat(
          "SPLIT VIEW: ", path, " and an earlier receipt were both signed by ", key.name,
          " but show ", hash->second != e.hash() ? absl::StrCat("ledger row ", e.seq())
                                                 : absl::StrCat("the tree of ", checkpoint->size,
                                                                " rows"),
          " differently: keep both receipts, they prove the fork"));
    }
    prev_hashes.emplace(e.seq(), e.prev_hash());
    if (e.kind() != "charge" || !new_row) continue;  // grants, caps, the same receipt twice
    rows[e.seq()] = e;
  }
  // Receipts of adjacent rows, perhaps cited by checkpoints of different sizes, must be one
  // chain: each row's hash covers its predecessor's. (Rows further apart are tied together only
  // by a consistency proof between their checkpoints, or by witnesses that checked one.)
  for (const auto& [seq, prev_hash] : prev_hashes) {
    auto before = row_hashes.find(seq - 1);
    if (before != row_hashes.end() && before->second != prev_hash) {
      return absl::DataLossError(absl::StrCat(
          "SPLIT VIEW: ledger row ", seq, " follows a row ", seq - 1,
          " other than the one receipted here (its prev_hash differs from that row's hash), both "
          "signed by ", key.name, ": keep both receipts, they prove the fork"));
    }
  }
  for (const auto& [seq, e] : rows) {  // in ledger order, as the report lists them
    Sum& s = sums[{e.account(), e.dataset()}];
    ++s.charges;
    s.epsilon += e.epsilon();
    s.delta += e.delta();
  }
  std::cout << "company,dataset,charges,epsilon_sum,delta_sum (" << rows.size()
            << " charge rows with verified receipts)\n";
  for (const auto& [who, s] : sums) {
    std::cout << who.first << "," << who.second << "," << s.charges << "," << Num(s.epsilon)
              << "," << Num(s.delta) << "\n";
  }
  if (!flags.Has("report-csv")) return absl::OkStatus();
  ASSIGN_OR_RETURN(CsvTable csv, ReadCsvFile(flags.Get("report-csv")));
  ASSIGN_OR_RETURN(size_t seq_col, csv.ColumnIndex("seq"));
  ASSIGN_OR_RETURN(size_t company_col, csv.ColumnIndex("company"));
  ASSIGN_OR_RETURN(size_t dataset_col, csv.ColumnIndex("dataset"));
  ASSIGN_OR_RETURN(size_t epsilon_col, csv.ColumnIndex("epsilon"));
  ASSIGN_OR_RETURN(size_t delta_col, csv.ColumnIndex("delta"));
  // `report budgets --csv` writes text a spreadsheet would run as a formula with an apostrophe
  // in front: the name is what follows it.
  auto unquoted = [](const std::string& v) {
    return v.size() > 1 && v[0] == '\'' && std::string("=+-@\t\r").find(v[1]) != std::string::npos
               ? v.substr(1)
               : v;
  };
  std::vector<std::string> problems, unreceipted;
  std::map<std::pair<std::string, std::string>, Sum> reported;
  std::set<int64_t> seen;
  for (size_t i = 0; i < csv.rows.size(); ++i) {
    std::vector<std::string> r = csv.rows[i];
    r[company_col] = unquoted(r[company_col]);
    r[dataset_col] = unquoted(r[dataset_col]);
    int64_t seq = 0;
    double epsilon = 0, delta = 0;
    if (!absl::SimpleAtoi(r[seq_col], &seq) || !core::ParseDecimal(r[epsilon_col], &epsilon) ||
        !core::ParseDecimal(r[delta_col], &delta)) {
      return UsageError(absl::StrCat("--report-csv line ", csv.row_lines[i],
                                     ": seq, epsilon or delta is not a number"));
    }
    if (!seen.insert(seq).second) {
      problems.push_back(absl::StrCat("ledger row ", seq, " is listed twice in the report"));
      continue;
    }
    Sum& s = reported[{r[company_col], r[dataset_col]}];
    ++s.charges;
    s.epsilon += epsilon;
    s.delta += delta;
    auto it = rows.find(seq);
    if (it == rows.end()) {
      unreceipted.push_back(absl::StrCat(seq));
      continue;
    }
    const v1::LedgerEntry& e = it->second;
    if (e.account() != r[company_col] || e.dataset() != r[dataset_col] ||
        e.epsilon() != epsilon || e.delta() != delta) {
      problems.push_back(absl::StrCat("ledger row ", seq, ": the report says ", r[company_col],
                                      "/", r[dataset_col], " epsilon ", r[epsilon_col],
                                      " delta ", r[delta_col], ", its receipt ", e.account(),
                                      "/", e.dataset(), " epsilon ", Num(e.epsilon()),
                                      " delta ", Num(e.delta())));
    }
  }
  // A receipted charge the report leaves out.
  for (const auto& [seq, e] : rows) {
    if (!seen.count(seq)) {
      problems.push_back(absl::StrCat("ledger row ", seq, " (", e.account(), "/", e.dataset(),
                                      ") has a receipt but is missing from the report"));
    }
  }
  // And the sums themselves (equal whenever the rows are, up to the order of the additions).
  auto close = [](double a, double b) { return std::abs(a - b) <= 1e-12 * std::max(1.0, std::abs(a)); };
  for (const auto& [who, s] : reported) {
    auto it = sums.find(who);
    if (it == sums.end() || it->second.charges != s.charges ||
        !close(it->second.epsilon, s.epsilon) || !close(it->second.delta, s.delta)) {
      problems.push_back(absl::StrCat("the report's sums for ", who.first, "/", who.second,
                                      " are not the receipts'"));
    }
  }
  if (!unreceipted.empty()) {
    problems.push_back(absl::StrCat(
        unreceipted.size(), " charge(s) of the report have no receipt here (seq ",
        absl::StrJoin(unreceipted.begin(),
                      unreceipted.begin() + std::min<size_t>(unreceipted.size(), 10), ", "),
        unreceipted.size() > 10 ? ", ..." : "", "): their sums cannot be vouched for"));
  }
  if (!problems.empty()) {
    return absl::DataLossError(absl::StrCat("the report does NOT match the receipts: ",
                                            absl::StrJoin(problems, "; ")));
  }
  std::cout << "the report's " << seen.size()
            << " charges are exactly the receipted rows: its sums per company and dataset are "
               "the sums of verified ledger rows\n";
  return absl::OkStatus();
}

absl::Status WitnessKey(Context& ctx) {
  const ParsedFlags& flags = ctx.flags();
  const std::string name = flags.Get("name");
  if (absl::Status valid = tlog::ValidKeyName(name); !valid.ok()) {
    return UsageError(absl::StrCat("--name: ", valid.message()));
  }
  ASSIGN_OR_RETURN(tlog::NoteSigner signer,
                   tlog::NoteSigner::Generate(name, tlog::KeyType::kCosignatureV1));
  const std::string out = flags.Get("out");
  if (absl::Status created = CreateNewPrivateFile(out); !created.ok()) {
    return UsageError(absl::StrCat("--out: ", created.message()));
  }
  RETURN_IF_ERROR(WriteStringToFile(out, signer.EncodedSecret() + "\n"));
  std::cerr << "witness key created in " << out
            << " (mode 0600); its verifier key, for the vault's operator (serve --witnesses) "
               "and anyone checking cosignatures:\n";
  std::cout << signer.verifier().Encoded() << "\n";
  return absl::OkStatus();
}

// Replaces `path` with `content` so that a crash leaves the old or the new file, never a
// torn one, and the new one survives a power loss once this returns (fsync of the file and of
// its directory).
absl::Status ReplaceDurably(const std::string& path, const std::string& content) {
  const std::string tmp = path + ".tmp";
  RETURN_IF_ERROR(WriteStringToFile(tmp, content));
  const int fd = open(tmp.c_str(), O_RDONLY | O_CLOEXEC);
  const bool synced = fd >= 0 && fsync(fd) == 0;
  if (fd >= 0) close(fd);
  if (!synced || std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::DataLossError(absl::StrCat("cannot replace ", path, " durably"));
  }
  std::string dir = std::filesystem::path(path).parent_path().string();
  const int dir_fd = open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  const bool dir_synced = dir_fd >= 0 && fsync(dir_fd) == 0;
  if (dir_fd >= 0) close(dir_fd);
  if (!dir_synced) {
    return absl::DataLossError(absl::StrCat("cannot make the new ", path, " durable (fsync of "
                                            "its directory failed): nothing was sent"));
  }
  return absl::OkStatus();
}

// Keeps what a witness found: both signed checkpoints, which together prove the vault showed
// two histories (appended: earlier evidence stays).
absl::Status SplitView(const std::string& state_path, const std::string& kept,
                       const std::string& served, const std::string& why) {
  const std::string evidence = state_path + ".split-view";
  std::ofstream out(evidence, std::ios::app);
  out << "# " << FormatUnixMicros(absl::ToUnixMicros(absl::Now())) << ": " << why
      << "\n# the checkpoint this witness cosigned before:\n" << kept
      << "# the checkpoint the vault serves now:\n" << served;
  out.close();
  if (!out) return absl::DataLossError(absl::StrCat("cannot write the evidence to ", evidence));
  return absl::DataLossError(absl::StrCat(
      "SPLIT VIEW: ", why, ". Not cosigned. Both signed checkpoints are in ", evidence,
      ": report them to the regulator"));
}

absl::Status WitnessCosign(Context& ctx) {
  const ParsedFlags& flags = ctx.flags();
  ASSIGN_OR_RETURN(tlog::NoteVerifier log_key, RequiredLogKey(flags));
  ASSIGN_OR_RETURN(std::string secret, ReadFileToString(flags.Get("witness-key")));
  absl::StatusOr<tlog::NoteSigner> signer = tlog::NoteSigner::Parse(secret);
  if (!signer.ok() || signer->verifier().type != tlog::KeyType::kCosignatureV1) {
    // The key's text is a secret: only what is wrong with it is said.
    return UsageError(absl::StrCat(
        "--witness-key ", flags.Get("witness-key"), ": not a witness key (",
        signer.ok() ? "a note key, not a cosignature/v1 one" : signer.status().message(),
        "); make one with `fairvault witness key`"));
  }
  const std::string state = flags.Get("state");
  // One run at a time per state file, for the whole run: two overlapping runs could otherwise
  // each check a different history against the same kept checkpoint and cosign both.
  const std::string lock_path = state + ".lock";
  const int lock_fd = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock_fd < 0) return UsageError(absl::StrCat("--state: cannot open ", lock_path));
  absl::Cleanup close_lock = [lock_fd] { close(lock_fd); };
  if (flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
    return absl::UnavailableError(absl::StrCat(
        "another `witness cosign` holds ", lock_path, ": one run at a time per --state"));
  }
  // Only a state file that does not exist starts a witness, and only with --init: an unreadable
  // one (permissions, an unmounted disk, a typo) must not make the witness trust anything.
  struct stat st;
  const bool exists = stat(state.c_str(), &st) == 0;
  if (!exists && errno != ENOENT) {
    return UsageError(absl::StrCat("--state ", state, ": cannot be read (", strerror(errno), ")"));
  }
  if (!exists && !flags.GetBool("init")) {
    return UsageError(absl::StrCat(
        "--state ", state, " does not exist: pass --init to start this witness (it then trusts "
        "the vault's current checkpoint, so compare it with one obtained another way)"));
  }
  if (exists && flags.GetBool("init")) {
    return UsageError(absl::StrCat("--init, but --state ", state,
                                   " exists: this witness has cosigned before"));
  }
  absl::StatusOr<std::string> kept =
      exists ? ReadFileToString(state) : absl::StatusOr<std::string>(absl::NotFoundError(""));
  if (exists && !kept.ok()) return kept.status();
  ASSIGN_OR_RETURN(std::optional<tlog::NoteVerifier> previous_key,
                   PreviousKey(flags, "previous-log-key"));
  std::optional<tlog::Checkpoint> kept_checkpoint;
  const tlog::NoteVerifier* kept_verifier = nullptr;  // null: the current key signed it
  if (kept.ok()) {
    absl::StatusOr<tlog::Checkpoint> opened = OpenCheckpoint(*kept, log_key);
    if (!opened.ok() && previous_key.has_value()) {
      opened = OpenCheckpoint(*kept, *previous_key);
      if (opened.ok()) kept_verifier = &*previous_key;
    }
    if (!opened.ok()) {
      return UsageError(absl::StrCat("--state ", state, ": ", opened.status().message()));
    }
    kept_checkpoint = *opened;
  }
  ASSIGN_OR_RETURN(Client * client, ctx.client());
  ASSIGN_OR_RETURN(v1::GetCheckpointResponse latest,
                   client->GetCheckpoint(v1::GetCheckpointRequest(), /*auditor=*/true));
  const std::string& served = latest.checkpoint().note();
  absl::StatusOr<tlog::Checkpoint> now = OpenCheckpoint(served, log_key);
  RETURN_IF_ERROR(NotVerified(now.status(), "checkpoint"));
  if (now->size == 0 && (!kept_checkpoint.has_value() || kept_checkpoint->size == 0)) {
    std::cout << "the ledger is empty: nothing to cosign yet\n";
    return absl::OkStatus();
  }
  if (kept_checkpoint.has_value() && kept_checkpoint->size > 0) {
    if (now->size < kept_checkpoint->size) {
      return SplitView(state, *kept, served,
                       absl::StrCat("the vault serves a tree of ", now->size,
                                    " rows, smaller than the ", kept_checkpoint->size,
                                    " rows this witness cosigned (a rollback or a fork)"));
    }
    if (now->size == kept_checkpoint->size && now->root != kept_checkpoint->root) {
      return SplitView(state, *kept, served,
                       absl::StrCat("two checkpoints of ", now->size,
                                    " rows with different roots"));
    }
    if (now->size > kept_checkpoint->size) {
      v1::GetConsistencyProofRequest req;
      req.set_from_size(kept_checkpoint->size);
      req.set_to_size(now->size);
      ASSIGN_OR_RETURN(v1::GetConsistencyProofResponse proof,
                       client->GetConsistencyProof(req, /*auditor=*/true));
      absl::Status consistent =
          VerifyConsistency(*kept, served, proof.proof(), log_key, kept_verifier);
      if (!consistent.ok()) {
        return SplitView(state, *kept, served,
                         absl::StrCat("the tree of ", now->size, " rows does not extend the "
                                      "one of ", kept_checkpoint->size,
                                      " rows this witness cosigned (", consistent.message(), ")"));
      }
    }
  }
  // Only the vault's signature and this witness's go back: other witnesses speak for themselves.
  ASSIGN_OR_RETURN(tlog::SignatureLine vault_line, tlog::VerifiedSignature(served, log_key));
  ASSIGN_OR_RETURN(std::string cosigned,
                   tlog::SignNote(absl::StrCat(tlog::CheckpointText(*now), "\n",
                                               tlog::SignatureLineText(vault_line)),
                                  *signer));
  // The witness is bound by what it signs: the new checkpoint is kept, durably, before it is
  // sent.
  RETURN_IF_ERROR(ReplaceDurably(state, served));
  v1::AddCosignatureRequest req;
  req.set_note(cosigned);
  ASSIGN_OR_RETURN(v1::AddCosignatureResponse resp, client->AddCosignature(req));
  std::cout << "cosigned the checkpoint of " << now->size << " rows (root "
            << absl::BytesToHexString(now->root.substr(0, 8)) << "...)";
  if (kept_checkpoint.has_value()) {
    std::cout << ", consistent with the " << kept_checkpoint->size << " rows cosigned before";
  }
  std::cout << "; the vault now serves it with " << resp.checkpoint().cosignatures()
            << " witness cosignature(s)\n";
  return absl::OkStatus();
}

absl::Status AuditorConsistency(Context& ctx) {
  const ParsedFlags& flags = ctx.flags();
  ASSIGN_OR_RETURN(tlog::NoteVerifier key, RequiredLogKey(flags));
  ASSIGN_OR_RETURN(std::optional<tlog::NoteVerifier> from_key,
                   PreviousKey(flags, "from-log-key"));
  const tlog::NoteVerifier* from_verifier = from_key.has_value() ? &*from_key : nullptr;
  ASSIGN_OR_RETURN(std::string from_note, ReadFileToString(flags.Get("from")));
  absl::StatusOr<tlog::Checkpoint> from = OpenCheckpoint(from_note, from_key.value_or(key));
  RETURN_IF_ERROR(NotVerified(from.status(), "--from checkpoint"));
  // The later checkpoint: --to, or the vault's latest (signed now if the ledger grew).
  std::string to_note;
  ASSIGN_OR_RETURN(Client * client, ctx.client());
  if (flags.Has("to")) {
    ASSIGN_OR_RETURN(to_note, ReadFileToString(flags.Get("to")));
  } else {
    ASSIGN_OR_RETURN(v1::GetCheckpointResponse latest,
                     client->GetCheckpoint(v1::GetCheckpointRequest(), /*auditor=*/true));
    to_note = latest.checkpoint().note();
  }
  absl::StatusOr<tlog::Checkpoint> to = OpenCheckpoint(to_note, key);
  RETURN_IF_ERROR(NotVerified(to.status(), flags.Has("to") ? "--to checkpoint" : "checkpoint"));
  if (to->size == from->size) {
    RETURN_IF_ERROR(NotVerified(VerifyConsistency(from_note, to_note, {}, key, from_verifier),
                                "consistency"));
    std::cout << "consistent: the same tree of " << from->size << " rows\n";
    return absl::OkStatus();
  }
  if (to->size < from->size) {
    // A signed log that shrank was rolled back or forked: evidence, not a usage error.
    if (!flags.Has("to")) std::cerr << "the vault's latest signed checkpoint:\n" << to_note;
    return absl::DataLossError(absl::StrCat(
        "NOT consistent: the later checkpoint (", to->size, " rows) is smaller than --from (",
        from->size, " rows): if it is the later one, the vault rolled its ledger back. Keep "
        "both signed notes: together they prove it (if --from and --to were swapped, exchange "
        "them)"));
  }
  v1::GetConsistencyProofRequest req;
  req.set_from_size(from->size);
  req.set_to_size(to->size);
  ASSIGN_OR_RETURN(v1::GetConsistencyProofResponse resp,
                   client->GetConsistencyProof(req, /*auditor=*/true));
  // The proof is checked against the notes this auditor holds: the --from file (never the
  // vault's copy of it), and --to when given.
  absl::Status consistent =
      VerifyConsistency(from_note, to_note, resp.proof(), key, from_verifier);
  if (!consistent.ok()) {
    return absl::DataLossError(absl::StrCat(
        "NOT consistent: ", consistent.message(),
        ". Keep both checkpoints: together they prove the vault rewrote its ledger"));
  }
  std::cout << "consistent: the signed log of " << to->size << " rows extends the one of "
            << from->size << " rows (" << resp.proof_size() << " proof hashes, RFC 9162)";
  if (from_key.has_value()) {
    std::cout << ", across the key rotation from " << from_key->name << " to " << key.name;
  }
  std::cout << "\n";
  if (flags.Has("save")) {
    RETURN_IF_ERROR(WriteStringToFile(flags.Get("save"), to_note));
    std::cout << "the checkpoint of " << to->size << " rows is saved in " << flags.Get("save")
              << ": pass it as --from next time\n";
  }
  return absl::OkStatus();
}

// `log rotation`: the new log key, from a rotation note the old key (and the new) signed.
absl::Status LogRotation(Context& ctx) {
  const ParsedFlags& flags = ctx.flags();
  ASSIGN_OR_RETURN(const tlog::NoteVerifier old_key,
                   KeyOrFile("previous-log-key", flags.Get("previous-log-key")));
  absl::StatusOr<std::string> note = ReadFileToString(flags.Get("rotation"));
  if (!note.ok()) return UsageError(absl::StrCat("--rotation: ", note.status().message()));
  absl::StatusOr<tlog::NoteVerifier> new_key = tlog::OpenRotation(*note, old_key);
  if (!new_key.ok()) {
    return absl::DataLossError(absl::StrCat("NOT a rotation endorsed by ", old_key.name, ": ",
                                            new_key.status().message()));
  }
  std::cerr << "the log key " << old_key.name << " handed over to " << new_key->name
            << " (both signed the rotation); its verifier key:\n";
  std::cout << new_key->Encoded() << "\n";
  return absl::OkStatus();
}

}  // namespace

std::vector<FlagSpec> CheckpointCheckFlags() {
  return {LogKeyFlag(false),  // with --witness: the latest checkpoint the vault's quorum cosigned
          {"kept", "FILE",
           "a signed checkpoint you kept: the latest is proved to extend it, then replaces it "
           "(needs --log-key; created if missing)"},
          WitnessFlag(), QuorumFlag()};
}

namespace {

// The vault's latest signed checkpoint checked as far as the flags allow (see
// CheckLatestCheckpoint), without the ledger.
absl::StatusOr<report::CheckpointCheck> CheckSignedCheckpoint(const ParsedFlags& flags,
                                                              Client* client) {
  report::CheckpointCheck check;
  ASSIGN_OR_RETURN(std::optional<tlog::NoteVerifier> key, LogKey(flags));
  if (flags.Has("kept") && !key.has_value()) {
    return UsageError("--kept needs --log-key: a kept checkpoint is checked with the key");
  }
  ASSIGN_OR_RETURN(std::vector<tlog::NoteVerifier> witnesses, WitnessKeys(flags));
  // With witnesses, the report cites the latest checkpoint the vault's quorum cosigned (a vault
  // with no quorum of its own: the latest), and checks the cosignatures itself.
  v1::GetCheckpointRequest req;
  req.set_witnessed(!witnesses.empty());
  absl::StatusOr<v1::GetCheckpointResponse> latest = client->GetCheckpoint(req, true);
  if (req.witnessed() && absl::IsFailedPrecondition(latest.status())) {
    latest = client->GetCheckpoint(v1::GetCheckpointRequest(), /*auditor=*/true);
  }
  if (absl::IsFailedPrecondition(latest.status())) {  // the vault signs no checkpoints
    // Asked to check one, none is a failure: a vault restored from an older backup and started
    // without its log key would otherwise pass every check it was asked for.
    if (key.has_value() || !witnesses.empty() || flags.Has("kept")) {
      check.ok = false;
      check.signature =
          "NOT verified: the vault serves no signed checkpoint, though --log-key, --kept or "
          "--witness asked for one to be checked";
    }
    return check;
  }
  RETURN_IF_ERROR(latest.status());
  const v1::Checkpoint& served = latest->checkpoint();
  check.present = true;
  check.size = served.size();
  check.root_hex = absl::BytesToHexString(served.root_hash());
  check.origin = served.origin();
  check.cosignatures = served.cosignatures();
  check.note = served.note();
  if (key.has_value()) {
    absl::StatusOr<tlog::Checkpoint> opened = OpenCheckpoint(served.note(), *key);
    check.signature = opened.ok() ? absl::StrCat("verified with ", key->name)
                                  : absl::StrCat("NOT verified: ", opened.status().message());
    check.ok = opened.ok();
  }
  // What is shown is what the note states (and the key or the witnesses signed): the
  // response's own size and root fields are not signed.
  if (key.has_value() || !witnesses.empty()) {
    absl::StatusOr<tlog::SplitNote> split = tlog::ParseNote(served.note());
    absl::StatusOr<tlog::Checkpoint> stated =
        split.ok() ? tlog::ParseCheckpointText(split->text) : split.status();
    if (!stated.ok() || stated->size != served.size() || stated->root != served.root_hash()) {
      check.signature = absl::StrCat("NOT verified: the response says ", served.size(),
                                     " rows and root ", check.root_hex,
                                     " but its note does not");
      check.ok = false;
    } else {
      check.size = stated->size;
      check.root_hex = absl::BytesToHexString(stated->root);
    }
  }
  if (!witnesses.empty()) {
    ASSIGN_OR_RETURN(const int64_t quorum,
                     flags.GetInt("quorum", static_cast<int64_t>(witnesses.size())));
    if (quorum < 1 || quorum > static_cast<int64_t>(witnesses.size())) {
      return UsageError(absl::StrCat("--quorum must be 1..", witnesses.size()));
    }
    absl::StatusOr<std::vector<std::string>> cosigned =
        VerifyCosignatures(served.note(), witnesses, static_cast<int>(quorum));
    check.witnesses = cosigned.ok()
                          ? absl::StrCat("cosigned by ", absl::StrJoin(*cosigned, ", "),
                                         " (quorum ", quorum, " of ", witnesses.size(), ")")
                          : absl::StrCat("NOT verified: ", cosigned.status().message());
    check.ok = check.ok && cosigned.ok();
  } else if (flags.Has("quorum")) {
    return UsageError("--quorum goes with --witness");
  }
  if (!flags.Has("kept") || !check.ok) return check;
  const std::string kept_path = flags.Get("kept");
  absl::StatusOr<std::string> kept = ReadFileToString(kept_path);
  if (!kept.ok()) {
    check.consistency = absl::StrCat("no checkpoint was kept in ", kept_path,
                                     " before: this one is kept there now");
    RETURN_IF_ERROR(WriteStringToFile(kept_path, served.note()));
    return check;
  }
  absl::StatusOr<tlog::Checkpoint> from = OpenCheckpoint(*kept, *key);
  if (!from.ok()) {
    return UsageError(absl::StrCat("--kept ", kept_path, ": ", from.status().message()));
  }
  google::protobuf::RepeatedPtrField<std::string> proof;
  if (from->size < served.size()) {
    v1::GetConsistencyProofRequest req;
    req.set_from_size(from->size);
    req.set_to_size(served.size());
    ASSIGN_OR_RETURN(v1::GetConsistencyProofResponse resp,
                     client->GetConsistencyProof(req, /*auditor=*/true));
    proof = resp.proof();
  }
  absl::Status consistent = VerifyConsistency(*kept, served.note(), proof, *key);
  if (!consistent.ok()) {
    check.ok = false;
    check.consistency = absl::StrCat("NOT consistent with the kept checkpoint of ", from->size,
                                     " rows: ", consistent.message(), ". Keep both notes: ",
                                     kept_path, " is left as it was");
    return check;
  }
  check.consistency = absl::StrCat("consistent with the kept checkpoint of ", from->size,
                                   " rows (", proof.size(),
                                   " proof hashes, RFC 9162); kept in ", kept_path, " now");
  RETURN_IF_ERROR(WriteStringToFile(kept_path, served.note()));
  return check;
}

// Every ledger row as the vault lists it (with its canonical encoding), checked here against
// the signed checkpoint `check` verified (client/lib/ledger_check.h), and the vault's budgets
// against the rows, read when the ledger held exactly the rows listed. Fills check->ledger; a
// finding sets check->ok to false. With `verified`, the vault's own VerifyLedger answer must
// agree with the rows (its head among them). `kept`: the rows and budgets checked.
absl::Status CheckListedLedger(const tlog::NoteVerifier& key, Client* client,
                               const v1::VerifyLedgerResponse* verified,
                               report::CheckpointCheck* check, CheckedLedger* kept) {
  ASSIGN_OR_RETURN(tlog::Checkpoint checkpoint, OpenCheckpoint(check->note, key));
  LedgerCheck ledger(checkpoint);
  if (verified != nullptr && verified->ok()) {
    ledger.ExpectHead(verified->rows_checked(), verified->head_hash());
  }
  v1::ListLedgerRequest req;
  req.set_limit(10000);
  req.set_with_canonical(true);
  absl::Status found;
  v1::ListBudgetsResponse budgets;
  // Lists rows to the end, reads the budgets, then asks for a row after the last: none means
  // the budgets were read when the ledger held exactly these rows (every grant, cap and charge
  // writes one). A ledger that keeps growing is read on, up to five times.
  bool quiet = false;
  for (int attempt = 0; attempt < 5 && found.ok() && !quiet; ++attempt) {
    if (attempt > 0) absl::SleepFor(absl::Milliseconds(200) * (1 << (attempt - 1)));
    while (found.ok()) {
      ASSIGN_OR_RETURN(const v1::ListLedgerResponse page, client->AuditorListLedger(req));
      if (page.entries().empty()) break;
      for (const v1::LedgerEntry& e : page.entries()) {
        found = ledger.Add(e);
        if (!found.ok()) break;
        if (kept != nullptr) kept->entries.push_back(e);
      }
      req.set_after_seq(page.entries(page.entries_size() - 1).seq());
    }
    if (!found.ok()) break;
    ASSIGN_OR_RETURN(budgets, client->AuditorListBudgets(v1::ListBudgetsRequest()));
    v1::ListLedgerRequest next = req;
    next.set_limit(1);
    ASSIGN_OR_RETURN(const v1::ListLedgerResponse after, client->AuditorListLedger(next));
    quiet = after.entries().empty();
  }
  if (found.ok()) found = ledger.Finish();
  if (found.ok() && !quiet) {
    // Not a finding: the rows verified, but the budgets could not be read against them.
    check->ok = false;
    check->ledger = absl::StrCat(
        "INCONCLUSIVE (not a finding): the ", ledger.rows(),
        " rows listed verified, but the ledger grew during each of 5 reads of the budgets "
        "(over 3 s), so they could not be compared with the rows: run again when the ledger "
        "is quieter");
    return absl::OkStatus();
  }
  if (found.ok()) found = ledger.CompareBudgets(budgets);
  if (!found.ok()) {
    check->ok = false;
    check->ledger = absl::StrCat("NOT verified: ", found.message());
    return absl::OkStatus();
  }
  check->ledger = absl::StrCat(
      "checked here: the ", ledger.rows(), " rows listed hash to their hashes and chain (head ",
      ledger.head_hash(), "), the first ", checkpoint.size,
      " are the signed tree, and none of their ", ledger.charges(),
      " charges took a company past its grant or a dataset past its cap; the vault's ",
      budgets.budgets_size(), " grants and caps (ListBudgets) are the rows' composition");
  for (const std::string& again : ledger.recreated()) absl::StrAppend(&check->ledger, "; ", again);
  if (kept != nullptr) {
    kept->budgets = std::move(budgets);
    kept->complete = true;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<report::CheckpointCheck> CheckLatestCheckpoint(
    const ParsedFlags& flags, Client* client, const v1::VerifyLedgerResponse* verified,
    CheckedLedger* checked) {
  ASSIGN_OR_RETURN(report::CheckpointCheck check, CheckSignedCheckpoint(flags, client));
  ASSIGN_OR_RETURN(std::optional<tlog::NoteVerifier> key, LogKey(flags));
  if (key.has_value() && check.present && check.ok) {
    RETURN_IF_ERROR(CheckListedLedger(*key, client, verified, &check, checked));
  }
  return check;
}

std::string FormatCheckpointCheck(const report::CheckpointCheck& check) {
  if (!check.present) {
    return check.ok ? "checkpoint: none (the vault signs no checkpoints)\n"
                    : absl::StrCat("checkpoint: none; ", check.signature, "\n");
  }
  std::string out = absl::StrCat("checkpoint: ", check.size, " rows, root ",
                                 check.root_hex.substr(0, 16), "..., ", check.cosignatures,
                                 " witness cosignature(s)");
  for (const std::string* part : {&check.signature, &check.witnesses, &check.consistency}) {
    if (!part->empty()) absl::StrAppend(&out, "; ", *part);
  }
  absl::StrAppend(&out, "\n");
  if (!check.ledger.empty()) absl::StrAppend(&out, "ledger: ", check.ledger, "\n");
  return out;
}

std::vector<Command> TransparencyCommands() {
  return {
      {"log checkpoint",
       "a signed checkpoint of the ledger's Merkle tree (any role)",
       "Without --size: a checkpoint of the whole ledger as it stands (signed now if the ledger "
       "grew). With --log-key the signature is checked. Keep checkpoints: `auditor consistency` "
       "proves a later one extends them.",
       {{"size", "N", "the stored checkpoint of exactly N rows"},
        {"out", "FILE", "write the signed note to FILE"},
        {"witnessed", "", "the latest checkpoint the vault's quorum of witnesses cosigned"},
        LogKeyFlag(false),
        WitnessFlag(),
        QuorumFlag(),
        AuditorFlag()},
       true,
       LogCheckpoint},
      {"receipt get",
       "a receipt proving a release's ledger row is in a signed checkpoint",
       "Companies ask for their own rows, by --idempotency-key (a replayed release's receipt is "
       "its original row's) or --seq; auditors for any row by --seq, with --auditor. The receipt "
       "(JSON) goes to --out or stdout; with --log-key it is verified as `receipt verify` does.",
       {{"seq", "N", "the ledger row"},
        {"idempotency-key", "KEY", "your release's idempotency key"},
        {"account", "NAME",
         "your account's name: the row must be that account's (needed with --idempotency-key "
         "and --log-key)"},
        {"out", "FILE", "write the receipt (JSON) to FILE"},
        LogKeyFlag(false),
        WitnessFlag(),
        QuorumFlag(),
        AuditorFlag()},
       true,
       ReceiptGet},
      {"receipt verify",
       "verify a receipt offline with the vault's verifier key",
       "Checks that the row's canonical encoding hashes to its hash and says what the row says, "
       "that the inclusion proof leads from the row to the checkpoint's root (RFC 9162), and "
       "that the checkpoint is signed by the key. Exit status 1 if anything fails.",
       {{"receipt", "FILE", "the receipt (JSON, from `receipt get`)", true, false, true},
        {"seq", "N", "the receipt must be for this ledger row"},
        {"idempotency-key", "KEY", "the receipt must be for this release of --account"},
        {"account", "NAME", "the account the row must name (needed with --idempotency-key)"},
        LogKeyFlag(true),
        WitnessFlag(),
        QuorumFlag()},
       false,
       ReceiptVerify},
      {"receipt sum",
       "verify many receipts, sum their charges per company and dataset, and check a budgets "
       "report against them",
       "Every --receipt is verified as `receipt verify` does (with --witness, its checkpoint's "
       "cosignatures too), then its charge rows are summed (count, epsilon, delta) per company "
       "and dataset. With --report-csv (from `report budgets --csv`), the report's charges must "
       "be exactly the receipted rows, with the same company, dataset, epsilon and delta: then "
       "the report's sums are sums of rows the vault signed. Exit status 1 otherwise.",
       {{"receipt", "FILE", "a receipt (JSON, from `receipt get`); repeat for each", true, true},
        {"report-csv", "FILE", "the charges CSV of a budgets report to check"},
        LogKeyFlag(true),
        WitnessFlag(),
        QuorumFlag()},
       false,
       ReceiptSum},
      {"witness key",
       "make a witness's cosigning key (cosignature/v1, Ed25519)",
       "Writes the secret key to the new file --out (mode 0600) and prints its verifier key: "
       "give that to the vault's operator (serve --witnesses) and to whoever checks receipts.",
       {{"name", "NAME", "the witness's name, e.g. auditor.example.org/witness", true},
        {"out", "FILE", "the new key file", true}},
       false,
       WitnessKey},
      {"witness cosign",
       "check the vault's latest checkpoint against the last one you cosigned, then cosign it "
       "(auditor)",
       "Fetches the latest checkpoint, checks the vault's signature and that it extends the "
       "checkpoint kept in --state (a consistency proof, RFC 9162), cosigns it (C2SP "
       "tlog-cosignature v1), keeps it in --state and sends the cosignature to the vault. A "
       "smaller tree, a different root at the same size or a failed proof is a split view: "
       "nothing is cosigned, both checkpoints go to STATE.split-view, exit status 1.",
       {{"witness-key", "FILE", "the witness's secret key (from `witness key`)", true},
        {"state", "FILE", "the last checkpoint this witness cosigned", true},
        {"init", "", "the first run: --state does not exist yet, and the vault's current "
                     "checkpoint is trusted"},
        PreviousKeyFlag("previous-log-key", "the checkpoint in --state"),
        LogKeyFlag(true)},
       true,
       WitnessCosign},
      {"log rotation",
       "take the vault's new log key from a rotation the old key endorsed (anyone)",
       "Checks that the note names the old key (--previous-log-key, the verifier key you\n"
       "already trust) and a new one, and that both signed it (the operator makes it with\n"
       "fairvault-server log-key --key NEW --endorse-with OLD); then prints the new verifier\n"
       "key, to use as --log-key from now on (and the old one as --from-log-key or\n"
       "--previous-log-key for checkpoints it signed). Exit status 1 if it does not verify.",
       {{"rotation", "FILE", "the rotation note the operator published", true},
        {"previous-log-key", "KEY", "the verifier key being replaced (the key or a file)", true}},
       false,
       LogRotation},
      {"auditor consistency",
       "prove that the vault's ledger extends a checkpoint you kept (auditor, regulator)",
       "Fetches a consistency proof from the checkpoint in --from to the one in --to (or to a "
       "new one of the whole ledger) and checks it with the verifier key. A failure means the "
       "vault rewrote or forked its ledger: keep both checkpoints as evidence. --save keeps "
       "the newer checkpoint for the next run.",
       {{"from", "FILE", "a signed checkpoint you kept", true},
        {"to", "FILE", "a later signed checkpoint (default: a new one of the whole ledger)"},
        {"save", "FILE", "write the newer checkpoint to FILE"},
        PreviousKeyFlag("from-log-key", "--from"),
        LogKeyFlag(true)},
       true,
       AuditorConsistency},
  };
}

}  // namespace fairvault::client::cli
