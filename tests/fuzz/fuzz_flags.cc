// Fuzzes the CLI's flag parser (client/cli/cli_flags): arguments are the input split at NUL
// bytes. Whatever they are, ParseFlags either refuses them with a usage error (exit status 2)
// or gives flags that are all declared, each given once unless repeatable, every required one
// present (or --help given), and typed getters that answer without crashing.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "client/cli/cli_flags.h"
#include "tests/fuzz/fuzz_contract.h"

using fairvault::fuzz::Fail;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fairvault::client::cli;
  static const std::vector<FlagSpec> kSpecs = {
      {"job", "JOB", "the job", false, false, true},
      {"epsilon", "EPS", "privacy cost", true},
      {"columns", "COL,...", "columns", false, true},
      {"dry-run", "", "price only"},
      {"limit", "N", "rows"},
      {"out", "FILE", "output", false, false, true},
  };
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> args = absl::StrSplit(text, '\0');
  absl::StatusOr<ParsedFlags> flags = ParseFlags(kSpecs, args);
  if (!flags.ok()) {
    if (!IsUsageError(flags.status()) || flags.status().message().empty()) {
      Fail("a refusal that is not a usage error", flags.status().ToString());
    }
    return 0;
  }
  if (flags->help()) return 0;
  if (!flags->Has("epsilon")) Fail("a required flag missing", "epsilon");
  for (const FlagSpec& spec : kSpecs) {
    const std::vector<std::string> all = flags->GetAll(spec.name);
    if (!spec.repeated && all.size() > 1) Fail("a flag given twice", spec.name);
    if (flags->Has(spec.name) != !all.empty()) Fail("Has and GetAll disagree", spec.name);
    (void)flags->GetList(spec.name);
    (void)flags->GetDouble(spec.name, 0);
    (void)flags->GetInt(spec.name, 0);
  }
  (void)flags->GetBool("dry-run");
  if (flags->Has("nonexistent")) Fail("an undeclared flag", "nonexistent");
  return 0;
}
