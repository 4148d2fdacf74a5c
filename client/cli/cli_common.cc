// Shared CLI plumbing and output formatting; see cli_common.h.
#include "client/cli/cli_common.h"

#include <cmath>
#include <cstdlib>
#include <iostream>
#include <limits>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "client/lib/pseudonymise.h"
#include "core/random/secure_bitgen.h"
#include "core/util/truncate.h"
#include "google/protobuf/util/json_util.h"
#include "core/util/decimal.h"

namespace fairvault::client::cli {

const std::vector<FlagSpec>& ConnectionFlags() {
  static const auto* flags = new std::vector<FlagSpec>{
      {"server", "HOST:PORT", "vault address (env FAIRVAULT_SERVER; default 127.0.0.1:50051)"},
      {"key", "KEY", "API key (env FAIRVAULT_API_KEY)"},
      {"key-file", "FILE", "read the API key from FILE (first line)"},
      {"tls-ca", "PEM", "use TLS, trusting the root certificates in this PEM file"},
      {"tls-server-name", "NAME", "with --tls-ca: name to check in the server certificate"},
      {"deadline", "SECONDS", "per-call deadline (default 600)"},
      {"json", "", "print responses as JSON (protobuf field names) instead of tables"},
  };
  return *flags;
}

namespace {

}  // namespace

bool HasApiKey(const ParsedFlags& flags) {
  const char* env_key = std::getenv("FAIRVAULT_API_KEY");
  return flags.Has("key") || flags.Has("key-file") || (env_key != nullptr && *env_key != '\0');
}

namespace {

// --key, --key-file (first line) or FAIRVAULT_API_KEY; a usage error when none is given.
absl::StatusOr<std::string> ApiKey(const ParsedFlags& flags) {
  std::string api_key;
  if (flags.Has("key")) {
    api_key = flags.Get("key");
  } else if (flags.Has("key-file")) {
    absl::StatusOr<std::string> content = ReadFileToString(flags.Get("key-file"));
    if (!content.ok()) return content.status();
    absl::string_view key = *content;
    key = key.substr(0, key.find('\n'));
    api_key = std::string(absl::StripAsciiWhitespace(key));
  } else if (const char* env_key = std::getenv("FAIRVAULT_API_KEY"); env_key != nullptr) {
    api_key = env_key;
  }
  if (api_key.empty()) {
    return UsageError("no API key: pass --key KEY or --key-file FILE, or set FAIRVAULT_API_KEY");
  }
  return api_key;
}

}  // namespace

absl::StatusOr<Client*> Context::client() {
  return Connect(/*with_key=*/true, ClientOptions().deadline_seconds);
}

absl::StatusOr<Client*> Context::keyless_client(double default_deadline_seconds) {
  return Connect(/*with_key=*/false, default_deadline_seconds);
}

absl::StatusOr<Client*> Context::Connect(bool with_key, double default_deadline_seconds) {
  if (client_ != nullptr) return client_.get();
  ClientOptions options;
  const char* env_server = std::getenv("FAIRVAULT_SERVER");
  options.target = flags_.Get(
      "server", env_server != nullptr && *env_server != '\0' ? env_server : "127.0.0.1:50051");
  if (with_key) {
    absl::StatusOr<std::string> key = ApiKey(flags_);
    if (!key.ok()) return key.status();
    options.api_key = *std::move(key);
  }
  absl::StatusOr<double> deadline = flags_.GetDouble("deadline", default_deadline_seconds);
  if (!deadline.ok()) return deadline.status();
  options.deadline_seconds = *deadline;
  if (flags_.Has("tls-ca")) {
    absl::StatusOr<std::string> pem = ReadFileToString(flags_.Get("tls-ca"));
    if (!pem.ok()) return pem.status();
    options.root_cert_pem = *std::move(pem);
    options.tls_server_name_override = flags_.Get("tls-server-name");
  }
  absl::StatusOr<std::unique_ptr<Client>> created = Client::Create(options);
  if (!created.ok()) return created.status();
  client_ = *std::move(created);
  return client_.get();
}

FlagSpec IdempotencyFlag() {
  return {"idempotency-key", "KEY",
          "1..128 characters; reusing a key replays the stored release (default: random)"};
}

FlagSpec DropUnmatchedFlag() {
  return {"drop-unmatched", "", "drop table rows whose key is not in the vault (default: refuse)"};
}

FlagSpec AttributesFlag() {
  return {"attributes", "ATTR,...", "protected attributes forming groups (default: all)", false,
          true};
}

v1::UnmatchedKeys Unmatched(const ParsedFlags& flags) {
  return flags.GetBool("drop-unmatched") ? v1::UNMATCHED_KEYS_DROP : v1::UNMATCHED_KEYS_REJECT;
}

std::string IdempotencyKey(const ParsedFlags& flags) {
  return flags.Has("idempotency-key") ? flags.Get("idempotency-key") : RandomIdempotencyKey();
}

std::string ReplayHint(const std::string& key) {
  return absl::StrCat("idempotency key: ", key,
                      " (a call with the same key returns this same release and charges "
                      "nothing)\n");
}

std::string DecideHint(const std::string& artifact_id, double decision_log_ratio_bound,
                       const std::string& value_name, bool applicable_locally) {
  if (!std::isfinite(decision_log_ratio_bound)) {
    return absl::StrCat(
        "decide: not usable with this artifact (its decision log-ratio bound is inf: some output "
        "would reveal a group); ",
        applicable_locally ? "apply it where the groups are known (fairvault apply-eo), or " : "",
        "refit with --decision-floor > 0 to use decide\n");
  }
  return absl::StrCat("decide with: fairvault decide --artifact-id ", artifact_id,
                      " --csv FILE --key-column COL --value-column ", value_name,
                      "\n  (the first decide with this artifact charges its decision licence, "
                      "epsilon = ",
                      decision_log_ratio_bound, "; later ones charge nothing)\n");
}

std::vector<FlagSpec> ScoreGridFlags() {
  return {{"lo", "LO", "lower end of the public score range (finite)", true},
          {"hi", "HI", "upper end of the public score range (finite, > LO)", true},
          {"bins", "K", "number of equal-width bins on [LO, HI] (1 to 1000)", true}};
}

absl::StatusOr<ScoreGrid> ReadScoreGrid(const ParsedFlags& flags) {
  ScoreGrid grid;
  absl::StatusOr<double> lo = flags.GetDouble("lo", 0);
  if (!lo.ok()) return lo.status();
  absl::StatusOr<double> hi = flags.GetDouble("hi", 0);
  if (!hi.ok()) return hi.status();
  absl::StatusOr<int64_t> bins = flags.GetInt("bins", 0);
  if (!bins.ok()) return bins.status();
  if (!(*lo < *hi)) {
    return UsageError(absl::StrCat("--lo must be below --hi (got [", flags.Get("lo"), ", ",
                                   flags.Get("hi"), "])"));
  }
  if (*bins < 1 || *bins > std::numeric_limits<int32_t>::max()) {
    return UsageError(absl::StrCat("--bins must be >= 1 (got ", flags.Get("bins"), ")"));
  }
  grid.lo = *lo;
  grid.hi = *hi;
  grid.bins = static_cast<int32_t>(*bins);
  return grid;
}

std::string TextTable::Render() const {
  std::vector<size_t> widths(header_.size(), 0);
  auto measure = [&widths](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size() && i < widths.size(); ++i) {
      widths[i] = std::max(widths[i], row[i].size());
    }
  };
  measure(header_);
  for (const auto& row : rows_) measure(row);
  auto render = [&widths](const std::vector<std::string>& row) {
    std::string line;
    for (size_t i = 0; i < widths.size(); ++i) {
      const std::string cell = i < row.size() ? row[i] : "";
      absl::StrAppend(&line, cell);
      if (i + 1 < widths.size()) line.append(widths[i] - cell.size() + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    return line + "\n";
  };
  std::string out = render(header_);
  for (const auto& row : rows_) out += render(row);
  return out;
}

std::string ToJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  std::string json;
  // Printing a valid message cannot fail short of a protobuf bug; show it if it does.
  auto status = google::protobuf::util::MessageToJsonString(message, &json, options);
  if (!status.ok()) return absl::StrCat("{\"error\": \"", status.ToString(), "\"}\n");
  return json;
}

void PrintJson(const google::protobuf::Message& message) { std::cout << ToJson(message); }

bool IsJsonPath(absl::string_view path) { return absl::EndsWithIgnoreCase(path, ".json"); }

std::string Num(double value) { return absl::StrFormat("%.6g", value); }

std::string FormatUnixSeconds(int64_t seconds) {
  if (seconds == 0) return "-";
  return absl::FormatTime("%Y-%m-%d %H:%M:%SZ", absl::FromUnixSeconds(seconds),
                          absl::UTCTimeZone());
}

std::string FormatUnixMicros(int64_t micros) {
  if (micros == 0) return "-";
  return absl::FormatTime("%Y-%m-%d %H:%M:%E3SZ", absl::FromUnixMicros(micros),
                          absl::UTCTimeZone());
}

std::string RoleName(v1::Role role) {
  switch (role) {
    case v1::ROLE_REGULATOR:
      return "regulator";
    case v1::ROLE_COMPANY:
      return "company";
    case v1::ROLE_AUDITOR:
      return "auditor";
    default:
      return "unspecified";
  }
}

absl::StatusOr<KeyColumn> KeyColumn::Resolve(const std::vector<std::string>& header,
                                             absl::string_view source, absl::string_view key_column,
                                             absl::string_view secret) {
  KeyColumn keys;
  keys.source_ = std::string(source);
  keys.name_ = std::string(key_column);
  keys.secret_ = std::string(secret);
  keys.by_row_ = key_column == "@row";
  if (!keys.by_row_) {
    absl::StatusOr<size_t> index = ColumnIndexIn(header, key_column);
    if (!index.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": ", index.status().message(), "; or use --key-column @row"));
    }
    keys.index_ = *index;
  }
  return keys;
}

absl::StatusOr<std::string> KeyColumn::Next(const std::vector<std::string>& fields, int64_t line,
                                            bool pseudonymise) {
  const int64_t row = row_++;
  std::string key = by_row_ ? absl::StrCat("row-", row) : fields[index_];
  if (key.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source_, ":", line, ": empty subject key in column '", name_, "'"));
  }
  if (!secret_.empty()) {
    return pseudonymise ? Pseudonymise(secret_, key) : key;
  }
  if (key.size() > 128) {
    return absl::InvalidArgumentError(
        absl::StrCat(source_, ":", line, ": subject key is ", key.size(),
                     " bytes; keys are 1..128 bytes (pseudonymise with --hmac-secret-file)"));
  }
  return key;
}

absl::StatusOr<std::vector<std::string>> SubjectKeys(const CsvTable& table,
                                                     absl::string_view source,
                                                     absl::string_view key_column,
                                                     absl::string_view secret, bool allow_repeats) {
  absl::StatusOr<KeyColumn> column = KeyColumn::Resolve(table.header, source, key_column, secret);
  if (!column.ok()) return column.status();
  std::vector<std::string> keys;
  keys.reserve(table.rows.size());
  absl::flat_hash_map<std::string, size_t> seen;
  for (size_t i = 0; i < table.rows.size(); ++i) {
    const int64_t line = table.row_lines[i];
    absl::StatusOr<std::string> key = column->Next(table.rows[i], line);
    if (!key.ok()) return key.status();
    keys.push_back(*std::move(key));
    if (allow_repeats) continue;
    auto [it, inserted] = seen.emplace(keys[i], i);
    if (!inserted) {
      return absl::InvalidArgumentError(absl::StrCat(
          source, ":", line, ": repeats the subject key of line ", table.row_lines[it->second]));
    }
  }
  return keys;
}

absl::StatusOr<std::string> OptionalSecret(const ParsedFlags& flags) {
  if (!flags.Has("hmac-secret-file")) return std::string();
  return ReadSecretFile(flags.Get("hmac-secret-file"));
}

absl::StatusOr<double> ParseNumber(absl::string_view text, absl::string_view source, int64_t line,
                                   absl::string_view column) {
  double value = 0;
  if (!core::ParseDecimal(text, &value) || !std::isfinite(value)) {
    return absl::InvalidArgumentError(absl::StrCat(source, ":", line, ": column '", column,
                                                   "' must be a finite number (got '",
                                                   core::Truncated(text), "')"));
  }
  return value;
}

absl::StatusOr<double> ParseCell(const CsvTable& table, absl::string_view source, size_t row,
                                 size_t column) {
  return ParseNumber(table.rows[row][column], source, table.row_lines[row], table.header[column]);
}

absl::StatusOr<int> ParseBinaryCell(const CsvTable& table, absl::string_view source, size_t row,
                                    size_t column) {
  absl::StatusOr<double> value = ParseCell(table, source, row, column);
  if (value.ok() && *value != 0.0 && *value != 1.0) {
    return absl::InvalidArgumentError(absl::StrCat(source, ":", table.row_lines[row], ": column '",
                                                   table.header[column], "' must be 0 or 1 (got '",
                                                   table.rows[row][column], "')"));
  }
  if (!value.ok()) return value.status();
  return *value == 1.0 ? 1 : 0;
}

absl::StatusOr<std::vector<std::string>> GroupLabels(const CsvTable& table,
                                                     const std::vector<std::string>& names) {
  std::vector<size_t> indices;
  for (const std::string& name : names) {
    absl::StatusOr<size_t> index = table.ColumnIndex(name);
    if (!index.ok()) return index.status();
    indices.push_back(*index);
  }
  std::vector<std::string> labels;
  labels.reserve(table.rows.size());
  for (const auto& row : table.rows) {
    std::string label;
    for (size_t k = 0; k < indices.size(); ++k) {
      if (k > 0) label.push_back('|');
      label += row[indices[k]];
    }
    labels.push_back(std::move(label));
  }
  return labels;
}

std::string RandomIdempotencyKey() {
  core::SecureBitGen gen;
  const uint64_t words[2] = {gen(), gen()};
  return absl::StrCat("cli-", absl::BytesToHexString(absl::string_view(
                                  reinterpret_cast<const char*>(words), sizeof(words))));
}

absl::StatusOr<double> RequiredEpsilon(const ParsedFlags& flags) {
  absl::StatusOr<double> epsilon = flags.GetDouble("epsilon", 0);
  if (!epsilon.ok()) return epsilon.status();
  if (*epsilon <= 0) {
    return UsageError(absl::StrCat("--epsilon must be > 0 (got ", flags.Get("epsilon"), ")"));
  }
  return *epsilon;
}

}  // namespace fairvault::client::cli
