// Triviality of a model's decisions on the company's rows.
#include "client/apply/model_quality.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace fairvault::client {
namespace {

// The most frequent key of `counts` (the smallest on ties) and its count.
std::pair<int64_t, int64_t> Mode(const std::map<int64_t, int64_t>& counts) {
  std::pair<int64_t, int64_t> best{0, -1};
  for (const auto& [key, count] : counts) {
    if (count > best.second) best = {key, count};
  }
  return best;
}

std::string Percent(int64_t part, int64_t whole) {
  return absl::StrFormat("%.1f%%", 100.0 * static_cast<double>(part) / static_cast<double>(whole));
}

}  // namespace

int64_t DecisionTally::rows() const {
  int64_t n = 0;
  for (const auto& [decision, count] : decisions_) n += count;
  return n;
}

int64_t DecisionTally::constant_errors() const {
  int64_t n = 0;
  for (const auto& [label, count] : labels_) n += count;
  return labels_.empty() ? 0 : n - Mode(labels_).second;
}

std::string DescribeErrors(const DecisionTally& tally) {
  const int64_t n = tally.rows();
  if (!tally.has_labels() || n == 0) return "";
  return absl::StrCat("error on these rows: ", Percent(tally.errors(), n),
                      " (the constant classifier deciding ", Mode(tally.labels()).first, ": ",
                      Percent(tally.constant_errors(), n), ")\n");
}

std::string TrivialModelWarning(const DecisionTally& tally) {
  const int64_t n = tally.rows();
  if (n == 0) return "";
  const auto [mode, count] = Mode(tally.decisions());
  if (static_cast<double>(count) >= kTrivialShare * static_cast<double>(n)) {
    return absl::StrCat("warning: the model decides ", mode, " for ", Percent(count, n),
                        " of these rows: it is (nearly) a constant classifier. Its fairness "
                        "comes from deciding alike for everyone; try a smaller fairness "
                        "weight or a larger epsilon\n");
  }
  if (tally.has_labels() && tally.errors() > tally.constant_errors()) {
    return absl::StrCat("warning: the model errs on ", Percent(tally.errors(), n),
                        " of these rows, more than the constant classifier deciding ",
                        Mode(tally.labels()).first, " (", Percent(tally.constant_errors(), n),
                        "): it is worse than deciding alike for everyone\n");
  }
  return "";
}

}  // namespace fairvault::client
