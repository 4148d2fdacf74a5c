// Test helpers for the metrics endpoint: a plain HTTP/1.0 GET over a loopback socket (no HTTP
// library, so the test sees exactly the bytes the server sends) and a reader for one sample of
// the Prometheus text format.
#ifndef FAIRVAULT_TESTS_METRICS_SCRAPE_H_
#define FAIRVAULT_TESTS_METRICS_SCRAPE_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <sstream>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace fairvault::testing {

struct HttpResponse {
  int status = 0;
  std::string body;
};

// GET `path` from 127.0.0.1:`port`.
inline absl::StatusOr<HttpResponse> HttpGet(int port, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::InternalError("socket failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return absl::UnavailableError(absl::StrCat("cannot connect to port ", port));
  }
  const std::string request = absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
  if (write(fd, request.data(), request.size()) != static_cast<ssize_t>(request.size())) {
    close(fd);
    return absl::InternalError("short write");
  }
  std::string raw;
  char buf[8192];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) raw.append(buf, n);
  close(fd);
  // "HTTP/1.1 200 OK\r\n...headers...\r\n\r\nbody"
  const size_t end = raw.find("\r\n\r\n");
  int status = 0;
  if (raw.rfind("HTTP/1.", 0) != 0 || end == std::string::npos || raw.size() < 12 ||
      !absl::SimpleAtoi(raw.substr(9, 3), &status)) {
    return absl::DataLossError(absl::StrCat("not an HTTP response: '", raw.substr(0, 80), "'"));
  }
  return HttpResponse{status, raw.substr(end + 4)};
}

// The value of the sample whose name and labels are exactly `series` (as the text format
// writes them, e.g. `fairvault_charges_total{kind="NoisyCounts",outcome="released"}`); 0 if
// the series is absent, as Prometheus treats a counter not yet created.
inline double SampleValue(const std::string& text, const std::string& series) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.size() > series.size() && line.compare(0, series.size(), series) == 0 &&
        line[series.size()] == ' ') {
      return std::strtod(line.c_str() + series.size() + 1, nullptr);
    }
  }
  return 0;
}

}  // namespace fairvault::testing

#endif  // FAIRVAULT_TESTS_METRICS_SCRAPE_H_
