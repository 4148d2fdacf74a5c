// Echoing a caller's value back in an error message, at a bounded length: a 20,000-character
// name must not turn the error into an oversized gRPC trailer (which the client would see as
// RESOURCE_EXHAUSTED, the budget code); and without control characters, which would reach a
// terminal or a log line as they are (an escape sequence, a forged line).
#ifndef FAIRVAULT_CORE_UTIL_TRUNCATE_H_
#define FAIRVAULT_CORE_UTIL_TRUNCATE_H_

#include <cstddef>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace fairvault::core {

// Longest user value echoed in an error message, in bytes.
inline constexpr size_t kMaxEchoBytes = 64;

// `value` itself if at most `max_bytes` long; otherwise its first bytes (not cutting a UTF-8
// sequence) followed by "...(N bytes)". Control characters are shown escaped: below 0x20 and
// 0x7F as \xNN, the C1 controls U+0080..U+009F as \u00NN, and a backslash as \\.
inline std::string Truncated(absl::string_view value, size_t max_bytes = kMaxEchoBytes) {
  size_t cut = value.size();
  if (cut > max_bytes) {
    cut = max_bytes;
    // Back up over UTF-8 continuation bytes so that the prefix stays well-formed.
    while (cut > 0 && (static_cast<unsigned char>(value[cut]) & 0xC0) == 0x80) --cut;
  }
  std::string out;
  out.reserve(cut);
  const absl::string_view shown = value.substr(0, cut);
  for (size_t i = 0; i < shown.size(); ++i) {
    const auto byte = static_cast<unsigned char>(shown[i]);
    if (byte < 0x20 || byte == 0x7F) {
      absl::StrAppend(&out, "\\x", absl::Hex(byte, absl::kZeroPad2));
    } else if (byte == '\\') {  // so that "\x1b" in a value is not read as an escape shown
      out += "\\\\";
    } else if (byte == 0xC2 && i + 1 < shown.size() &&
               static_cast<unsigned char>(shown[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(shown[i + 1]) <= 0x9F) {
      // U+0080..U+009F, the C1 controls (U+009B is a terminal's CSI).
      absl::StrAppend(&out, "\\u00", absl::Hex(static_cast<unsigned char>(shown[++i]),
                                               absl::kZeroPad2));
    } else {
      out.push_back(shown[i]);
    }
  }
  if (cut < value.size()) absl::StrAppend(&out, "...(", value.size(), " bytes)");
  return out;
}

}  // namespace fairvault::core

#endif  // FAIRVAULT_CORE_UTIL_TRUNCATE_H_
