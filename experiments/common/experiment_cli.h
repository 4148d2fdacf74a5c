// The command-line shell every experiment shares: reading its flags one by one (a value, an
// integer, a comma-separated list of numbers, each with the same error messages in every
// program) and main()'s exit codes (2: bad flags, 1: the run failed, 0: done).
#ifndef FAIRVAULT_EXPERIMENTS_COMMON_EXPERIMENT_CLI_H_
#define FAIRVAULT_EXPERIMENTS_COMMON_EXPERIMENT_CLI_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace fairvault::experiments {

// A comma-separated list of finite numbers, each >= 0 or, if `positive`, > 0; `flag` names the
// list in the error ("--lambdas: comma-separated finite numbers >= 0").
absl::StatusOr<std::vector<double>> ParseNumberList(const std::string& flag,
                                                    const std::string& text, bool positive);

// Walks argv[1..argc-1]: `while (reader.Next())` visits each flag as arg(); the readers below
// consume the flag's value (the next argument). Not thread-safe; argv must outlive it.
class FlagReader {
 public:
  FlagReader(int argc, char** argv) : argc_(argc), argv_(argv) {}

  // Moves to the next flag; false when there is none.
  bool Next();
  const std::string& arg() const { return arg_; }

  // The flag's value; InvalidArgument "<flag> needs a value" at the end of argv.
  absl::StatusOr<std::string> Value();
  // An integer >= min ("<flag> must be an integer >= <min>").
  absl::Status Integer(int* out, int min);
  // An integer >= 1 ("<flag> must be a positive integer").
  absl::Status PositiveInteger(int* out);
  // ParseNumberList of the value.
  absl::Status NumberList(std::vector<double>* out, bool positive);
  // One number as ParseNumberList reads it ("<flag>: one number" for a list).
  absl::Status Number(double* out, bool positive);

 private:
  int argc_;
  char** argv_;
  int next_ = 1;
  std::string arg_;
};

// Every flag of argv into a default Flags: `--datasets DIR` (the flag every study has) into
// flags.datasets, each other one handed to `one(reader, flags)`, which consumes its value and
// returns true, or returns false for a flag it does not know ("unknown flag --x").
template <typename Flags, typename OneFlag>
absl::StatusOr<Flags> ReadFlags(int argc, char** argv, OneFlag one) {
  Flags flags;
  FlagReader reader(argc, argv);
  while (reader.Next()) {
    if (reader.arg() == "--datasets") {
      absl::StatusOr<std::string> dir = reader.Value();
      if (!dir.ok()) return dir.status();
      flags.datasets = *std::move(dir);
      continue;
    }
    absl::StatusOr<bool> known = one(reader, flags);
    if (!known.ok()) return known.status();
    if (!*known) return absl::InvalidArgumentError("unknown flag " + reader.arg());
  }
  return flags;
}

// True when --help or -h is among the arguments. Programs check it first and then only print
// their usage (PrintUsage): nothing is read, started or connected to.
bool HelpRequested(int argc, char** argv);
// Prints `usage` on stdout; returns main()'s exit status 0.
int PrintUsage(const char* usage);

// main()'s end: bad flags print their message and give 2; a failed run prints
// "<program>: <status>" and gives 1; otherwise 0. All on stderr.
int FlagsErrorExit(const absl::Status& status);
int RunExit(const char* program, const absl::Status& status);

// A study's main(): --help or -h prints `usage` and nothing else happens; otherwise
// parse(argc, argv), then run(flags), with the exit codes above.
template <typename ParseFn, typename RunFn>
int ExperimentMain(const char* program, const char* usage, int argc, char** argv, ParseFn parse,
                   RunFn run) {
  if (HelpRequested(argc, argv)) return PrintUsage(usage);
  const auto flags = parse(argc, argv);
  if (!flags.ok()) return FlagsErrorExit(flags.status());
  return RunExit(program, run(*flags));
}

}  // namespace fairvault::experiments

#endif  // FAIRVAULT_EXPERIMENTS_COMMON_EXPERIMENT_CLI_H_
