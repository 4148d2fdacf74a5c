// Fuzzes the request validation of every spending RPC, through the use-cases (server/app) on the
// real SQLite store of fuzz_vault.h. The input's first byte picks the RPC, the rest is its
// request's protobuf bytes (a string field "T" names the company's table, "A" its equalized-odds
// artifact). Whatever the request:
//   * a refusal has a status a caller can act on (never Internal, DataLoss or Unknown) and
//     charges nothing: no ledger row, no stored response, the spend unchanged;
//   * an accepted request charges at most once (one ledger row; none for a replay, a repeated
//     decision or a preview);
//   * PreviewRelease never charges, accepted or not.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/fuzz/fuzz_vault.h"

namespace {

using fairvault::fuzz::ExpectActionable;
using fairvault::fuzz::Fail;
using fairvault::fuzz::FuzzVault;
namespace server = fairvault::server;
namespace v1 = fairvault::v1;

// Parses the request, puts the world's names in and calls the use-case as the company.
template <typename Request, typename Response>
std::function<absl::Status(const uint8_t*, size_t, bool*)> Rpc(
    absl::StatusOr<Response> (server::Vault::*method)(const server::Caller&, const Request&)) {
  return [method](const uint8_t* data, size_t size, bool* parsed) -> absl::Status {
    Request req;
    *parsed = req.ParseFromArray(data, static_cast<int>(size));
    if (!*parsed) return absl::OkStatus();
    FuzzVault& world = FuzzVault::Get();
    world.Substitute(req);
    return ((world.vault()).*method)(world.company(), req).status();
  };
}

struct Target {
  const char* name;
  std::function<absl::Status(const uint8_t*, size_t, bool*)> call;
  bool free;  // never charges
};

const std::vector<Target>& Targets() {
  using V = server::Vault;
  static const auto* targets = new std::vector<Target>{
      {"NoisyCounts", Rpc(&V::NoisyCounts), false},
      {"FitEqualizedOdds", Rpc(&V::FitEqualizedOdds), false},
      {"FitStatisticalParity", Rpc(&V::FitStatisticalParity), false},
      {"FitEqualizedOddsScores", Rpc(&V::FitEqualizedOddsScores), false},
      {"AuditClassifier", Rpc(&V::AuditClassifier), false},
      {"AuditRegressor", Rpc(&V::AuditRegressor), false},
      {"Decide", Rpc(&V::Decide), false},
      {"BestResponse", Rpc(&V::BestResponse), false},
      {"ReleaseCellSums", Rpc(&V::ReleaseCellSums), false},
      {"FitFairModel", Rpc(&V::FitFairModel), false},
      {"PreviewRelease", Rpc(&V::PreviewRelease), true},
  };
  return *targets;
}

// What a charge changes.
std::vector<int64_t> Ledger(FuzzVault& world) {
  return {world.Count("SELECT count(*) FROM ledger"), world.Count("SELECT count(*) FROM responses"),
          world.Count("SELECT coalesce(sum(releases) * 1000003 + sum(pure_micro), 0) FROM spend")};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > 8 * 1024) return 0;
  FuzzVault& world = FuzzVault::Get();
  const Target& target = Targets()[data[0] % Targets().size()];
  const std::vector<int64_t> before = Ledger(world);
  bool parsed = false;
  const absl::Status status = target.call(data + 1, size - 1, &parsed);
  if (!parsed) return 0;
  const std::vector<int64_t> after = Ledger(world);
  const std::string what = absl::StrCat(target.name, ": ", status.ToString());
  if (std::getenv("FAIRVAULT_FUZZ_VERBOSE") != nullptr) {  // what each input did, and its cost
    std::fprintf(stderr, "%s; ledger rows %+lld\n", what.substr(0, 300).c_str(),
                 static_cast<long long>(after[0] - before[0]));
  }
  if (!status.ok()) {
    ExpectActionable(status, absl::StrCat(target.name, ": a refusal").c_str());
    if (after != before) Fail("a refusal charged", what);
  } else if (target.free ? after != before : after[0] - before[0] > 1) {
    Fail(target.free ? "a preview charged" : "one request charged twice", what);
  }
  // Queued jobs count against the company's job limit: a long run would refuse every fit.
  world.Exec("DELETE FROM jobs");
  return 0;
}
