// Flag parsing for the `fairvault` command line: `--name value`, `--name=value` and boolean
// switches, declared per subcommand so each one has its own --help.
#ifndef FAIRVAULT_CLIENT_CLI_CLI_FLAGS_H_
#define FAIRVAULT_CLIENT_CLI_CLI_FLAGS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace fairvault::client::cli {

struct FlagSpec {
  std::string name;        // without the leading "--"
  std::string value_name;  // shown in help, e.g. "EPS"; empty makes a boolean switch
  std::string help;
  bool required = false;
  bool repeated = false;  // may be given more than once
  // May also be given as a bare argument (`job status JOB` for `--job JOB`): bare arguments
  // fill the positional flags not yet given, in spec order. Needs a value_name.
  bool positional = false;
};

// The flags of one command line, as strings until a typed getter reads them.
class ParsedFlags {
 public:
  bool Has(absl::string_view name) const;
  // The (last) value of a flag, or `fallback` when absent.
  std::string Get(absl::string_view name, absl::string_view fallback = "") const;
  // Every occurrence, in order.
  std::vector<std::string> GetAll(absl::string_view name) const;
  // Every occurrence split on commas, whitespace-trimmed, empty items dropped:
  // `--columns a,b --columns c` gives {a, b, c}.
  std::vector<std::string> GetList(absl::string_view name) const;
  // Typed values; a usage error names the flag when the text is not a (finite) number.
  absl::StatusOr<double> GetDouble(absl::string_view name, double fallback) const;
  absl::StatusOr<int64_t> GetInt(absl::string_view name, int64_t fallback) const;
  // A switch: true when given (`--yes`, `--yes=true`), false when absent or `--yes=false`.
  bool GetBool(absl::string_view name) const;
  // True when --help or -h was given anywhere: no other flag is then parsed or checked.
  bool help() const { return help_; }

 private:
  friend absl::StatusOr<ParsedFlags> ParseFlags(absl::Span<const FlagSpec>,
                                                absl::Span<const std::string>);
  std::map<std::string, std::vector<std::string>, std::less<>> values_;
  bool help_ = false;
};

// Parses `args` (everything after the command words) against `specs`. Usage errors (see
// UsageError) for unknown flags, missing values, a bare argument with no positional flag left
// to fill, a non-repeated flag given twice, a bad switch value or a missing required flag.
absl::StatusOr<ParsedFlags> ParseFlags(absl::Span<const FlagSpec> specs,
                                       absl::Span<const std::string> args);

// "  --name VALUE   help (required)" lines, aligned.
std::string FormatFlagHelp(absl::Span<const FlagSpec> specs);

// An InvalidArgument status marked as a command-line mistake (main exits 2 on it).
absl::Status UsageError(absl::string_view message);
bool IsUsageError(const absl::Status& status);

}  // namespace fairvault::client::cli

#endif  // FAIRVAULT_CLIENT_CLI_CLI_FLAGS_H_
