// String helpers for tests.
#ifndef FAIRVAULT_CORE_TESTING_STRINGS_H_
#define FAIRVAULT_CORE_TESTING_STRINGS_H_

#include <string>

namespace fairvault::testing {

// How many times `needle` (non-empty) occurs in `haystack`, without overlaps.
inline int Count(const std::string& haystack, const std::string& needle) {
  int n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos;
       at = haystack.find(needle, at + needle.size())) {
    ++n;
  }
  return n;
}

}  // namespace fairvault::testing

#endif  // FAIRVAULT_CORE_TESTING_STRINGS_H_
