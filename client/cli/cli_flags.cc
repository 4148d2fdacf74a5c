// Command-line flag parsing; see cli_flags.h.
#include "client/cli/cli_flags.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/util/decimal.h"

namespace fairvault::client::cli {
namespace {

constexpr char kUsagePayloadUrl[] = "type.fairvault/cli.usage";

const FlagSpec* FindSpec(absl::Span<const FlagSpec> specs, absl::string_view name) {
  for (const FlagSpec& spec : specs) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

absl::StatusOr<bool> ParseSwitch(absl::string_view name, absl::string_view value) {
  const std::string v = absl::AsciiStrToLower(value);
  if (v == "true" || v == "1" || v == "yes") return true;
  if (v == "false" || v == "0" || v == "no") return false;
  return UsageError(absl::StrCat("--", name, " is a switch: give it alone or as --", name,
                                 "=true|false (got '", value, "')"));
}

}  // namespace

absl::Status UsageError(absl::string_view message) {
  absl::Status status = absl::InvalidArgumentError(message);
  status.SetPayload(kUsagePayloadUrl, absl::Cord("1"));
  return status;
}

bool IsUsageError(const absl::Status& status) {
  return status.GetPayload(kUsagePayloadUrl).has_value();
}

bool ParsedFlags::Has(absl::string_view name) const { return values_.count(name) > 0; }

std::string ParsedFlags::Get(absl::string_view name, absl::string_view fallback) const {
  auto it = values_.find(name);
  if (it == values_.end() || it->second.empty()) return std::string(fallback);
  return it->second.back();
}

std::vector<std::string> ParsedFlags::GetAll(absl::string_view name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return {};
  return it->second;
}

std::vector<std::string> ParsedFlags::GetList(absl::string_view name) const {
  std::vector<std::string> items;
  for (const std::string& value : GetAll(name)) {
    for (absl::string_view item : absl::StrSplit(value, ',')) {
      item = absl::StripAsciiWhitespace(item);
      if (!item.empty()) items.emplace_back(item);
    }
  }
  return items;
}

absl::StatusOr<double> ParsedFlags::GetDouble(absl::string_view name, double fallback) const {
  if (!Has(name)) return fallback;
  const std::string text = Get(name);
  double value = 0;
  if (!core::ParseDecimal(text, &value) || !std::isfinite(value)) {
    return UsageError(absl::StrCat("--", name, " must be a finite number (got '", text, "')"));
  }
  return value;
}

absl::StatusOr<int64_t> ParsedFlags::GetInt(absl::string_view name, int64_t fallback) const {
  if (!Has(name)) return fallback;
  const std::string text = Get(name);
  int64_t value = 0;
  if (!absl::SimpleAtoi(text, &value)) {
    return UsageError(absl::StrCat("--", name, " must be an integer (got '", text, "')"));
  }
  return value;
}

bool ParsedFlags::GetBool(absl::string_view name) const {
  if (!Has(name)) return false;
  return Get(name) == "true";
}

absl::StatusOr<ParsedFlags> ParseFlags(absl::Span<const FlagSpec> specs,
                                       absl::Span<const std::string> args) {
  ParsedFlags parsed;
  // --help or -h anywhere asks for the usage, whatever else the line holds (an unknown flag,
  // a flag missing its value: `counts --epsilon --help`): no flag is then read at all.
  for (const std::string& arg : args) {
    if (arg == "--help" || arg == "-h") {
      parsed.help_ = true;
      return parsed;
    }
  }
  for (size_t i = 0; i < args.size(); ++i) {
    absl::string_view arg = args[i];
    if (!absl::StartsWith(arg, "--") || arg.size() == 2) {
      // A bare argument: the first positional flag not given yet.
      auto open = std::find_if(specs.begin(), specs.end(), [&parsed](const FlagSpec& spec) {
        return spec.positional && !spec.value_name.empty() && !parsed.Has(spec.name);
      });
      if (open != specs.end() && arg != "--") {
        parsed.values_[open->name].emplace_back(arg);
        continue;
      }
      return UsageError(
          absl::StrCat("unexpected argument '", arg, "' (every input is given as --flag value)"));
    }
    arg.remove_prefix(2);
    absl::string_view name = arg;
    std::optional<std::string> value;
    if (size_t eq = arg.find('='); eq != absl::string_view::npos) {
      name = arg.substr(0, eq);
      value = std::string(arg.substr(eq + 1));
    }
    const FlagSpec* spec = FindSpec(specs, name);
    if (spec == nullptr) return UsageError(absl::StrCat("unknown flag --", name));
    if (spec->value_name.empty()) {
      bool on = true;
      if (value.has_value()) {
        absl::StatusOr<bool> parsed_switch = ParseSwitch(name, *value);
        if (!parsed_switch.ok()) return parsed_switch.status();
        on = *parsed_switch;
      }
      value = on ? "true" : "false";
    } else if (!value.has_value()) {
      if (i + 1 >= args.size()) {
        return UsageError(absl::StrCat("--", name, " needs a value (", spec->value_name, ")"));
      }
      value = args[++i];
    }
    std::vector<std::string>& slot = parsed.values_[spec->name];
    if (!slot.empty() && !spec->repeated) {
      return UsageError(absl::StrCat("--", name, " given more than once"));
    }
    slot.push_back(*std::move(value));
  }
  if (!parsed.help_) {
    for (const FlagSpec& spec : specs) {
      if (spec.required && !parsed.Has(spec.name)) {
        return UsageError(absl::StrCat("missing required flag --", spec.name,
                                       spec.value_name.empty() ? "" : " ", spec.value_name));
      }
    }
  }
  return parsed;
}

std::string FormatFlagHelp(absl::Span<const FlagSpec> specs) {
  std::vector<std::string> left;
  size_t width = 0;
  for (const FlagSpec& spec : specs) {
    left.push_back(
        absl::StrCat("  --", spec.name, spec.value_name.empty() ? "" : " ", spec.value_name));
    width = std::max(width, left.back().size());
  }
  std::string out;
  for (size_t i = 0; i < specs.size(); ++i) {
    absl::StrAppend(&out, left[i], std::string(width + 3 - left[i].size(), ' '), specs[i].help,
                    specs[i].positional ? " (or bare, without --" + specs[i].name + ")" : "",
                    specs[i].required ? " (required)" : "",
                    specs[i].repeated ? " (repeatable)" : "", "\n");
  }
  return out;
}

}  // namespace fairvault::client::cli
