// What every fuzz target does when an input breaks its contract: say which and stop, so that
// libFuzzer keeps the input (deploy/fuzz.sh reports it).
#ifndef FAIRVAULT_TESTS_FUZZ_FUZZ_CONTRACT_H_
#define FAIRVAULT_TESTS_FUZZ_FUZZ_CONTRACT_H_

#include <cstdio>
#include <cstdlib>
#include <string>

namespace fairvault::fuzz {

[[noreturn]] inline void Fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "contract broken: %s: %s\n", what, detail.substr(0, 2000).c_str());
  std::abort();
}

}  // namespace fairvault::fuzz

#endif  // FAIRVAULT_TESTS_FUZZ_FUZZ_CONTRACT_H_
