// Exit statuses and error output of the `fairvault` CLI; see cli_exit.h.
#include "client/cli/cli_exit.h"

#include <cstdint>

#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/cli/cli_flags.h"
#include "client/lib/client.h"

namespace fairvault::client::cli {
namespace {

constexpr char kDrawnKeyPayload[] = "fairvault.cli/drawn-idempotency-key";

std::string DrawnKey(const absl::Status& status) {
  const auto payload = status.GetPayload(kDrawnKeyPayload);
  return payload.has_value() ? std::string(*payload) : std::string();
}

// A proto field path at the start of `text`: [a-z][a-z0-9_]* segments joined by '.', each
// optionally indexed ("groups[2]"). Returns its length, or 0.
size_t FieldPathLength(absl::string_view text) {
  size_t i = 0;
  while (true) {
    if (i >= text.size() || !absl::ascii_islower(static_cast<unsigned char>(text[i]))) return 0;
    while (i < text.size() &&
           (absl::ascii_islower(static_cast<unsigned char>(text[i])) ||
            absl::ascii_isdigit(static_cast<unsigned char>(text[i])) || text[i] == '_')) {
      ++i;
    }
    if (i < text.size() && text[i] == '[') {
      size_t j = i + 1;
      while (j < text.size() && absl::ascii_isdigit(static_cast<unsigned char>(text[j]))) ++j;
      if (j == i + 1 || j >= text.size() || text[j] != ']') return 0;
      i = j + 1;
    }
    if (i < text.size() && text[i] == '.') {
      ++i;
      continue;
    }
    return i;
  }
}

// The length of one UTF-8 sequence at the start of `s`, or 0 when it is not valid there.
size_t Utf8SequenceLength(absl::string_view s) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char c = byte(0);
  size_t n = 0;
  uint32_t min = 0;
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) {
    n = 2;
    min = 0x80;
  } else if ((c & 0xF0) == 0xE0) {
    n = 3;
    min = 0x800;
  } else if ((c & 0xF8) == 0xF0) {
    n = 4;
    min = 0x10000;
  } else {
    return 0;
  }
  if (s.size() < n) return 0;
  uint32_t code = c & (0x7F >> n);
  for (size_t i = 1; i < n; ++i) {
    if ((byte(i) & 0xC0) != 0x80) return 0;
    code = (code << 6) | (byte(i) & 0x3F);
  }
  if (code < min || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return 0;
  return n;
}

std::string Hint(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kUnavailable:
      return IsFromVault(status) ? "is the vault running? set --server or FAIRVAULT_SERVER; a TLS "
                                   "vault needs --tls-ca"
                                 : "";
    case absl::StatusCode::kUnauthenticated:
      return "check the API key: --key, --key-file or FAIRVAULT_API_KEY";
    case absl::StatusCode::kResourceExhausted:
      return IsFromVault(status) && absl::StartsWith(status.message(), "request costs ")
                 ? "refused: nothing was charged; `fairvault budget` shows what is left, and "
                   "--dry-run prices a request before sending it"
                 : "";
    default:
      return "";
  }
}

std::string DrawnKeyNote(const std::string& key) {
  return absl::StrCat("idempotency key: ", key,
                      " (if the vault charged this call before it failed, repeat the command "
                      "with --idempotency-key ",
                      key, " to get its outcome without a second charge)");
}

std::string ReplayNote(int64_t seq) {
  return absl::StrCat("stored failure from ledger seq ", seq,
                      ": this idempotency key's first call was charged and failed; this call "
                      "returned that outcome again and was not charged again");
}

}  // namespace

absl::Status WithDrawnIdempotencyKey(absl::Status status, const std::string& key) {
  if (key.empty() || status.ok() || IsUsageError(status) || ReplayedLedgerSeq(status) > 0) {
    return status;
  }
  switch (status.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kCancelled:
    case absl::StatusCode::kUnknown:
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kDataLoss:
      status.SetPayload(kDrawnKeyPayload, absl::Cord(key));
      return status;
    default:
      return status;
  }
}

int ExitCodeFor(const absl::Status& status) {
  if (status.ok()) return kExitOk;
  if (IsUsageError(status)) return kExitUsage;
  const absl::StatusCode code = status.code();
  if (!IsFromVault(status)) {
    // The CLI's own checks of its input (files, CSV fields, keys) before any call.
    switch (code) {
      case absl::StatusCode::kInvalidArgument:
      case absl::StatusCode::kNotFound:
      case absl::StatusCode::kFailedPrecondition:
      case absl::StatusCode::kAlreadyExists:
      case absl::StatusCode::kOutOfRange:
      case absl::StatusCode::kPermissionDenied:
        return kExitUsage;
      default:
        break;
    }
  }
  switch (code) {
    case absl::StatusCode::kResourceExhausted:
      return kExitBudget;
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kUnauthenticated:
      return kExitPermission;
    case absl::StatusCode::kNotFound:
      return kExitNotFound;
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
      return kExitUnavailable;
    default:
      return kExitError;
  }
}

std::string ExitClassName(int exit_code) {
  switch (exit_code) {
    case kExitOk:
      return "ok";
    case kExitUsage:
      return "usage";
    case kExitBudget:
      return "budget";
    case kExitPermission:
      return "permission";
    case kExitNotFound:
      return "not_found";
    case kExitUnavailable:
      return "unavailable";
    default:
      return "error";
  }
}

std::string ExitStatusHelp() {
  return "  0  ok\n"
         "  1  any other error (the vault's INVALID_ARGUMENT, FAILED_PRECONDITION, INTERNAL, ...;\n"
         "     a failed training job; a ledger that does not verify)\n"
         "  2  usage: bad or missing flags, no API key, or a local file the CLI refused\n"
         "  3  refused for budget (RESOURCE_EXHAUSTED: grant, dataset cap, decision licence;\n"
         "     job queue full); a --dry-run that would be refused\n"
         "  4  permission (PERMISSION_DENIED, UNAUTHENTICATED)\n"
         "  5  not found (NOT_FOUND: dataset, table handle, artifact, job, grant)\n"
         "  6  unavailable (UNAVAILABLE, DEADLINE_EXCEEDED; job wait --timeout): retry later\n"
         "  `health` exits 0 when SERVING and 1 otherwise (2 on a usage error).\n"
         "Errors go to stderr as \"error: <CODE>: <message>\"; with --json as one line of JSON,\n"
         "  {\"error\": {code, exit_code, class, message, from_vault, [field,]\n"
         "             [replayed, replayed_ledger_seq,] [idempotency_key,] [hint]}}\n"
         "  A spending call sent with a random key (no --idempotency-key) that ends in an\n"
         "  error after which it may have been charged prints that key: repeat the command\n"
         "  with it to get the outcome without a second charge.\n";
}

std::string FieldOf(const absl::Status& status) {
  absl::string_view message = status.message();
  if (IsUsageError(status)) {
    if (!absl::StartsWith(message, "--")) return "";
    size_t end = 2;
    while (end < message.size() &&
           (absl::ascii_isalnum(static_cast<unsigned char>(message[end])) || message[end] == '-')) {
      ++end;
    }
    return std::string(message.substr(2, end - 2));
  }
  if (status.code() == absl::StatusCode::kResourceExhausted &&
      absl::StartsWith(message, "request costs epsilon=")) {
    return "epsilon";
  }
  // Only a refused request names its field first; an INTERNAL "glpk: ..." names a component.
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kAlreadyExists:
      break;
    default:
      return "";
  }
  const size_t length = FieldPathLength(message);
  if (length == 0) return "";
  absl::string_view rest = message.substr(length);
  if (absl::StartsWith(rest, ": ") || absl::StartsWith(rest, " must ")) {
    return std::string(message.substr(0, length));
  }
  return "";
}

std::string JsonString(absl::string_view text) {
  std::string out = "\"";
  size_t i = 0;
  while (i < text.size()) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7F) {
      absl::StrAppendFormat(&out, "\\u%04x", c);
    } else if (c >= 0x80) {
      const size_t n = Utf8SequenceLength(text.substr(i));
      if (n == 0) {
        out += "\\ufffd";
      } else {
        out.append(text.data() + i, n);
        i += n;
        continue;
      }
    } else {
      out.push_back(static_cast<char>(c));
    }
    ++i;
  }
  out.push_back('"');
  return out;
}

std::string ErrorJson(const absl::Status& status, int exit_code) {
  std::string out = absl::StrCat(
      "{\"error\":{\"code\":", JsonString(absl::StatusCodeToString(status.code())),
      ",\"exit_code\":", exit_code, ",\"class\":", JsonString(ExitClassName(exit_code)),
      ",\"message\":", JsonString(status.message()),
      ",\"from_vault\":", IsFromVault(status) ? "true" : "false");
  const std::string field = FieldOf(status);
  if (!field.empty()) absl::StrAppend(&out, ",\"field\":", JsonString(field));
  if (const int64_t seq = ReplayedLedgerSeq(status); seq > 0) {
    absl::StrAppend(&out, ",\"replayed\":true,\"replayed_ledger_seq\":", seq);
  }
  if (const std::string key = DrawnKey(status); !key.empty()) {
    absl::StrAppend(&out, ",\"idempotency_key\":", JsonString(key));
  }
  const std::string hint = Hint(status);
  if (!hint.empty()) absl::StrAppend(&out, ",\"hint\":", JsonString(hint));
  out += "}}\n";
  return out;
}

std::string ErrorText(const absl::Status& status) {
  std::string out = IsUsageError(status)
                        ? absl::StrCat("error: usage: ", status.message(), "\n")
                        : absl::StrCat("error: ", absl::StatusCodeToString(status.code()), ": ",
                                       status.message(), "\n");
  if (const int64_t seq = ReplayedLedgerSeq(status); seq > 0) {
    absl::StrAppend(&out, ReplayNote(seq), "\n");
  }
  if (const std::string key = DrawnKey(status); !key.empty()) {
    absl::StrAppend(&out, DrawnKeyNote(key), "\n");
  }
  const std::string hint = Hint(status);
  if (!hint.empty()) absl::StrAppend(&out, "(", hint, ")\n");
  return out;
}

}  // namespace fairvault::client::cli
