// Flag reading and exit codes shared by the experiments (experiment_cli.h).
#include "experiments/common/experiment_cli.h"

#include <cmath>
#include <cstdio>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/util/status_macros.h"

namespace fairvault::experiments {

absl::StatusOr<std::vector<double>> ParseNumberList(const std::string& flag,
                                                    const std::string& text, bool positive) {
  std::vector<double> out;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    double x = 0;
    if (!absl::SimpleAtod(part, &x) || !std::isfinite(x) || x < 0 || (positive && x == 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, ": comma-separated finite numbers", positive ? " > 0" : " >= 0"));
    }
    out.push_back(x);
  }
  return out;
}

bool FlagReader::Next() {
  if (next_ >= argc_) return false;
  arg_ = argv_[next_++];
  return true;
}

absl::StatusOr<std::string> FlagReader::Value() {
  if (next_ >= argc_) return absl::InvalidArgumentError(absl::StrCat(arg_, " needs a value"));
  return std::string(argv_[next_++]);
}

absl::Status FlagReader::Integer(int* out, int min) {
  ASSIGN_OR_RETURN(std::string v, Value());
  if (!absl::SimpleAtoi(v, out) || *out < min) {
    return absl::InvalidArgumentError(absl::StrCat(arg_, " must be an integer >= ", min));
  }
  return absl::OkStatus();
}

absl::Status FlagReader::PositiveInteger(int* out) {
  ASSIGN_OR_RETURN(std::string v, Value());
  int n = 0;
  if (!absl::SimpleAtoi(v, &n) || n < 1) {
    return absl::InvalidArgumentError(absl::StrCat(arg_, " must be a positive integer"));
  }
  *out = n;
  return absl::OkStatus();
}

absl::Status FlagReader::NumberList(std::vector<double>* out, bool positive) {
  ASSIGN_OR_RETURN(std::string v, Value());
  ASSIGN_OR_RETURN(*out, ParseNumberList(arg_, v, positive));
  return absl::OkStatus();
}

absl::Status FlagReader::Number(double* out, bool positive) {
  std::vector<double> v;
  RETURN_IF_ERROR(NumberList(&v, positive));
  if (v.size() != 1) return absl::InvalidArgumentError(absl::StrCat(arg_, ": one number"));
  *out = v[0];
  return absl::OkStatus();
}

bool HelpRequested(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") return true;
  }
  return false;
}

int PrintUsage(const char* usage) {
  std::fputs(usage, stdout);
  return 0;
}

int FlagsErrorExit(const absl::Status& status) {
  std::fprintf(stderr, "%s (see --help)\n", std::string(status.message()).c_str());
  return 2;
}

int RunExit(const char* program, const absl::Status& status) {
  if (!status.ok()) {
    std::fprintf(stderr, "%s: %s\n", program, status.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace fairvault::experiments
