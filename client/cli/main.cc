// `fairvault`: the command-line client of the vault. Parses the command words and flags,
// runs one command, and on failure prints "error: <CODE>: <message>" (with --json: one JSON
// object) on stderr and exits with the status of its class (cli_exit.h).
#include <iostream>
#include <string>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/cli/cli_common.h"
#include "client/cli/cli_exit.h"

namespace fairvault::client::cli {
namespace {

struct Section {
  std::string title;
  std::vector<Command> commands;
};

std::vector<Section> AllSections() {
  std::vector<Command> company = CompanyCommands();
  for (Command& c : AuditCommands()) company.push_back(std::move(c));
  for (Command& c : DecideCommands()) company.push_back(std::move(c));
  for (Command& c : EoScoresCommands()) company.push_back(std::move(c));
  for (Command& c : ModelCommands()) company.push_back(std::move(c));
  for (Command& c : SweepCommands()) company.push_back(std::move(c));
  std::vector<Command> auditor = AuditorCommands();
  for (Command& c : ReportBudgetsCommands()) auditor.push_back(std::move(c));
  for (Command& c : TransparencyCommands()) auditor.push_back(std::move(c));
  std::vector<Command> local = LocalCommands();
  for (Command& c : TrainCommands()) local.push_back(std::move(c));
  for (Command& c : ReportCommands()) local.push_back(std::move(c));
  return {{"Regulator", RegulatorCommands()},
          {"Company", std::move(company)},
          {"Auditor", std::move(auditor)},
          {"Operations (no API key)", HealthCommands()},
          {"Local (no server)", std::move(local)}};
}

void PrintTopHelp(const std::vector<Section>& sections) {
  std::cout << "usage: fairvault [connection flags] COMMAND [flags]\n"
               "       fairvault COMMAND --help\n"
               "       fairvault --version\n\n"
               "A client of the fairvault privacy vault: the regulator holds protected\n"
               "attributes; companies get differentially private releases charged to a ledger.\n";
  for (const Section& s : sections) {
    std::cout << "\n" << s.title << ":\n";
    TextTable table({"", ""});
    for (const Command& c : s.commands) table.AddRow({"  " + c.path, c.summary});
    std::string rendered = table.Render();
    std::cout << rendered.substr(rendered.find('\n') + 1);
  }
  std::cout << "\nConnection flags (remote commands; also accepted after COMMAND):\n"
            << FormatFlagHelp(ConnectionFlags()) << "\nExit status:\n"
            << ExitStatusHelp();
}

void PrintCommandHelp(const Command& c) {
  std::cout << "usage: fairvault " << c.path << (c.flags.empty() ? "" : " [flags]") << "\n\n"
            << c.summary << "\n";
  if (!c.details.empty()) std::cout << "\n" << c.details << "\n";
  if (!c.flags.empty()) std::cout << "\nFlags:\n" << FormatFlagHelp(c.flags);
  if (c.remote) std::cout << "\nConnection flags:\n" << FormatFlagHelp(ConnectionFlags());
}

// True when the command line asks for JSON output (--json, or --json=true|1|yes; the last one
// counts), read from the raw words so that errors before or during flag parsing are JSON too.
bool WantsJson(const std::vector<std::string>& args) {
  bool json = false;
  for (const std::string& arg : args) {
    if (arg == "--json") {
      json = true;
    } else if (absl::StartsWith(arg, "--json=")) {
      const std::string value = absl::AsciiStrToLower(arg.substr(7));
      json = value == "true" || value == "1" || value == "yes";
    }
  }
  return json;
}

// Prints the error (text, or one JSON object with --json) on stderr and returns the exit
// status of its class. `binary_exit`: 1 for every failure but a usage error (`health`).
int Fail(const absl::Status& status, const std::string& help_hint, bool json,
         bool binary_exit = false) {
  int code = ExitCodeFor(status);
  // A probe's contract: 2 only for a command-line mistake, 1 for anything else (an unreadable
  // --tls-ca file too).
  if (binary_exit) code = IsUsageError(status) ? kExitUsage : kExitError;
  std::cout.flush();
  if (json) {
    std::cerr << ErrorJson(status, code);
  } else {
    std::cerr << ErrorText(status) << (IsUsageError(status) ? help_hint : "");
  }
  return code;
}

const FlagSpec* FindConnectionFlag(absl::string_view arg) {
  absl::string_view name = arg.substr(
      2, arg.find('=') == absl::string_view::npos ? absl::string_view::npos : arg.find('=') - 2);
  for (const FlagSpec& spec : ConnectionFlags()) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

int Main(const std::vector<std::string>& args) {
  const std::vector<Section> sections = AllSections();
  const std::string top_hint = "run 'fairvault --help' for the list of commands\n";
  const bool json = WantsJson(args);

  // Connection flags may come before the command words.
  std::vector<std::string> leading;
  size_t i = 0;
  for (; i < args.size() && absl::StartsWith(args[i], "-"); ++i) {
    if (args[i] == "--help" || args[i] == "-h") {
      PrintTopHelp(sections);
      return 0;
    }
    if (args[i] == "--version") {
      std::cout << "fairvault " << FAIRVAULT_VERSION << "\n";
      return 0;
    }
    const FlagSpec* spec = absl::StartsWith(args[i], "--") ? FindConnectionFlag(args[i]) : nullptr;
    if (spec == nullptr) {
      return Fail(UsageError(absl::StrCat("unknown flag ", args[i], " before the command")),
                  top_hint, json);
    }
    leading.push_back(args[i]);
    if (!spec->value_name.empty() && args[i].find('=') == std::string::npos &&
        i + 1 < args.size()) {
      leading.push_back(args[++i]);
    }
  }
  if (i == args.size() || args[i] == "help") {
    PrintTopHelp(sections);
    return i == args.size() ? 2 : 0;
  }

  const Command* command = nullptr;
  size_t words = 0;
  std::vector<const Command*> in_group;
  for (const Section& s : sections) {
    for (const Command& c : s.commands) {
      if (i + 1 < args.size() && c.path == args[i] + " " + args[i + 1]) {
        command = &c;
        words = 2;
      } else if (command == nullptr && c.path == args[i]) {
        command = &c;
        words = 1;
      }
      if (absl::StartsWith(c.path, args[i] + " ")) in_group.push_back(&c);
    }
  }
  if (command == nullptr || (words == 1 && !in_group.empty())) {
    if (in_group.empty()) {
      return Fail(UsageError(absl::StrCat("unknown command '", args[i], "'")), top_hint, json);
    }
    // A group word alone ("dataset"): list its subcommands.
    const bool asked = i + 1 < args.size() && (args[i + 1] == "--help" || args[i + 1] == "-h");
    std::string list =
        absl::StrCat("usage: fairvault ", args[i], " SUBCOMMAND [flags]\n", "       fairvault ",
                     args[i], " SUBCOMMAND --help\n\n", "subcommands of '", args[i], "':\n");
    for (const Command* c : in_group) {
      absl::StrAppend(&list, "  fairvault ", c->path, "  — ", c->summary, "\n");
    }
    if (asked) {
      std::cout << list;
      return 0;
    }
    return Fail(UsageError(absl::StrCat(
                    "'", args[i], "' needs a subcommand",
                    i + 1 < args.size() ? absl::StrCat(" (got '", args[i + 1], "')") : "")),
                list, json);
  }

  std::vector<std::string> rest = leading;
  rest.insert(rest.end(), args.begin() + static_cast<std::ptrdiff_t>(i + words), args.end());
  std::vector<FlagSpec> specs = command->flags;
  specs.insert(specs.end(), ConnectionFlags().begin(), ConnectionFlags().end());
  const std::string hint = absl::StrCat("run 'fairvault ", command->path, " --help' for usage\n");
  absl::StatusOr<ParsedFlags> parsed = ParseFlags(specs, rest);
  if (!parsed.ok()) return Fail(parsed.status(), hint, json, command->binary_exit);
  if (parsed->help()) {
    PrintCommandHelp(*command);
    return 0;
  }
  Context context(*std::move(parsed));
  absl::Status status = command->run(context);
  std::cout.flush();
  if (!status.ok()) {
    // A key the command drew at random (it takes --idempotency-key, which was not given) is
    // one the user never saw: the error names it where the call may have been charged.
    const bool takes_key = absl::c_any_of(
        command->flags, [](const FlagSpec& f) { return f.name == "idempotency-key"; });
    const std::string drawn = takes_key && !context.flags().Has("idempotency-key")
                                  ? SentIdempotencyKey(status)
                                  : std::string();
    return Fail(WithDrawnIdempotencyKey(std::move(status), drawn), hint, json,
                command->binary_exit);
  }
  return 0;
}

}  // namespace
}  // namespace fairvault::client::cli

int main(int argc, char** argv) {
  std::ios::sync_with_stdio(true);
  return fairvault::client::cli::Main(std::vector<std::string>(argv + 1, argv + argc));
}
