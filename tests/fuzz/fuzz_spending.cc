// Fuzzes the request validation of every spending RPC, through the use-cases (server/app) on the
// real SQLite store of fuzz_vault.h. The input's first byte picks the RPC, the rest is its
// request's protobuf bytes (a string field "T" names the company's table, "A" its equalized-odds
// artifact). Whatever the request:
//   * a refusal has a status a caller can act on (never Internal, DataLoss or Unknown) and
//     charges nothing: no ledger row, no stored response, the spend unchanged;
//   * an accepted request charges at most once (one ledger row and one release in the spend;
//     none for a replay or a repeated decision);
//   * PreviewRelease never charges, accepted or not.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <utility>
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

// What a charge changes: ledger rows, stored responses, releases counted in the spend, the
// pure epsilon spent (micro).
std::vector<int64_t> Ledger(FuzzVault& world) {
  return {world.Count("SELECT count(*) FROM ledger"), world.Count("SELECT count(*) FROM responses"),
          world.Count("SELECT coalesce(sum(releases), 0) FROM spend"),
          world.Count("SELECT coalesce(sum(pure_micro), 0) FROM spend")};
}

// Requests parsed and accepted per RPC, printed when the run ends (a run whose every request is
// refused tests only refusals: the summary shows it).
std::vector<std::pair<int64_t, int64_t>>& Tally() {
  static auto* tally = new std::vector<std::pair<int64_t, int64_t>>(Targets().size());
  return *tally;
}

void PrintTally() {
  std::fprintf(stderr, "fuzz_spending: requests accepted / parsed:");
  for (size_t i = 0; i < Targets().size(); ++i) {
    std::fprintf(stderr, " %s %lld/%lld", Targets()[i].name,
                 static_cast<long long>(Tally()[i].second), static_cast<long long>(Tally()[i].first));
  }
  std::fprintf(stderr, "\n");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > 8 * 1024) return 0;
  FuzzVault& world = FuzzVault::Get();
  static const bool summary_registered = std::atexit(PrintTally) == 0;
  (void)summary_registered;
  const size_t index = data[0] % Targets().size();
  const Target& target = Targets()[index];
  const std::vector<int64_t> before = Ledger(world);
  bool parsed = false;
  const absl::Status status = target.call(data + 1, size - 1, &parsed);
  if (!parsed) return 0;
  ++Tally()[index].first;
  if (status.ok()) ++Tally()[index].second;
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
  } else if (after[2] - before[2] != after[0] - before[0]) {
    // Each ledger row is one release in the spend: none without a row, one per row.
    Fail("the spend's releases", absl::StrCat(what, ": ", after[2] - before[2],
                                              " releases for ", after[0] - before[0], " rows"));
  }
  // The grant stays whole from input to input (a run that spent it would only test refusals),
  // and queued jobs, which count against the company's job limit, go.
  if (after[2] != before[2]) world.Exec("DELETE FROM spend; DELETE FROM jobs");
  return 0;
}
