// `fairvault`: the command-line client of the vault. Parses the command words and flags,
// runs one command, prints "error: <CODE>: <message>" and exits 1 on failure (2 on a
// command-line mistake).
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/cli_common.h"

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
  std::vector<Command> local = LocalCommands();
  for (Command& c : TrainCommands()) local.push_back(std::move(c));
  for (Command& c : ReportCommands()) local.push_back(std::move(c));
  return {{"Regulator", RegulatorCommands()},
          {"Company", std::move(company)},
          {"Auditor", AuditorCommands()},
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
            << FormatFlagHelp(ConnectionFlags())
            << "\nExit status: 0 ok, 1 error (\"error: <grpc code>: <message>\" on stderr), 2 "
               "usage error.\n";
}

void PrintCommandHelp(const Command& c) {
  std::cout << "usage: fairvault " << c.path << (c.flags.empty() ? "" : " [flags]") << "\n\n"
            << c.summary << "\n";
  if (!c.details.empty()) std::cout << "\n" << c.details << "\n";
  if (!c.flags.empty()) std::cout << "\nFlags:\n" << FormatFlagHelp(c.flags);
  if (c.remote) std::cout << "\nConnection flags:\n" << FormatFlagHelp(ConnectionFlags());
}

int Fail(const absl::Status& status, const std::string& help_hint) {
  if (IsUsageError(status)) {
    std::cerr << "error: usage: " << status.message() << "\n" << help_hint;
    return 2;
  }
  std::cerr << "error: " << absl::StatusCodeToString(status.code()) << ": " << status.message()
            << "\n";
  if (status.code() == absl::StatusCode::kUnavailable) {
    std::cerr << "(is the vault running? set --server or FAIRVAULT_SERVER; a TLS vault needs "
                 "--tls-ca)\n";
  } else if (status.code() == absl::StatusCode::kUnauthenticated) {
    std::cerr << "(check the API key: --key, --key-file or FAIRVAULT_API_KEY)\n";
  }
  return 1;
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
                  top_hint);
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
      return Fail(UsageError(absl::StrCat("unknown command '", args[i], "'")), top_hint);
    }
    // A group word alone ("dataset"): list its subcommands.
    const bool asked = i + 1 < args.size() && (args[i + 1] == "--help" || args[i + 1] == "-h");
    std::ostream& out = asked ? std::cout : std::cerr;
    if (!asked) {
      out << "error: usage: '" << args[i] << "' needs a subcommand"
          << (i + 1 < args.size() ? absl::StrCat(" (got '", args[i + 1], "')") : "") << "\n";
    }
    out << "subcommands of '" << args[i] << "':\n";
    for (const Command* c : in_group)
      out << "  fairvault " << c->path << "  — " << c->summary << "\n";
    return asked ? 0 : 2;
  }

  std::vector<std::string> rest = leading;
  rest.insert(rest.end(), args.begin() + static_cast<std::ptrdiff_t>(i + words), args.end());
  std::vector<FlagSpec> specs = command->flags;
  specs.insert(specs.end(), ConnectionFlags().begin(), ConnectionFlags().end());
  const std::string hint = absl::StrCat("run 'fairvault ", command->path, " --help' for usage\n");
  absl::StatusOr<ParsedFlags> parsed = ParseFlags(specs, rest);
  if (!parsed.ok()) return Fail(parsed.status(), hint);
  if (parsed->help()) {
    PrintCommandHelp(*command);
    return 0;
  }
  Context context(*std::move(parsed));
  absl::Status status = command->run(context);
  std::cout.flush();
  if (!status.ok()) return Fail(status, hint);
  return 0;
}

}  // namespace
}  // namespace fairvault::client::cli

int main(int argc, char** argv) {
  std::ios::sync_with_stdio(true);
  return fairvault::client::cli::Main(std::vector<std::string>(argv + 1, argv + argc));
}
