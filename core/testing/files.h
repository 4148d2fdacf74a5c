// Reading files in tests.
#ifndef FAIRVAULT_CORE_TESTING_FILES_H_
#define FAIRVAULT_CORE_TESTING_FILES_H_

#include <fstream>
#include <sstream>
#include <string>

namespace fairvault::testing {

// The file's bytes; "" when it cannot be read.
inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

}  // namespace fairvault::testing

#endif  // FAIRVAULT_CORE_TESTING_FILES_H_
