// Decimal numbers from text, for what people type and files hold: no hexadecimal.
#ifndef FAIRVAULT_CORE_UTIL_DECIMAL_H_
#define FAIRVAULT_CORE_UTIL_DECIMAL_H_

#include <charconv>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/string_view.h"

namespace fairvault::core {

// What absl::SimpleAtod reads (surrounding spaces, a leading '+', "inf" and "nan") but decimal
// only: SimpleAtod (and Abseil's from_chars, whatever the format asked) also takes hexadecimal
// ("0x10" is 16), which an epsilon typed or a CSV cell written by a person never means; the
// standard library's from_chars does not. False for anything else, and for a value out of
// range (when false, *value may have been written).
inline bool ParseDecimal(absl::string_view text, double* value) {
  text = absl::StripAsciiWhitespace(text);
  if (text.size() > 1 && text[0] == '+' && text[1] != '-' && text[1] != '+') text.remove_prefix(1);
  const char* end = text.data() + text.size();
  const std::from_chars_result read =
      std::from_chars(text.data(), end, *value, std::chars_format::general);
  return !text.empty() && read.ec == std::errc() && read.ptr == end;
}

}  // namespace fairvault::core

#endif  // FAIRVAULT_CORE_UTIL_DECIMAL_H_
