// What the studies measure; see metrics.h.
#include "experiments/common/metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace fairvault::experiments {

DecisionMetrics ScoreDecisions(const std::vector<int>& pred, const std::vector<int>& y,
                               const std::vector<int>& group, int classes) {
  DecisionMetrics m;
  int k = 0;
  for (int g : group) k = std::max(k, g + 1);
  // count[b][g][c]: rows of block b (0: all rows; 1 + label: the rows of that label) in group g
  // predicted c; rows[b][g] the block's rows in group g.
  const auto blocks = static_cast<size_t>(classes) + 1;
  std::vector<std::vector<std::vector<double>>> count(
      blocks, std::vector<std::vector<double>>(static_cast<size_t>(k),
                                               std::vector<double>(static_cast<size_t>(classes))));
  std::vector<std::vector<double>> rows(blocks, std::vector<double>(static_cast<size_t>(k)));
  for (size_t i = 0; i < pred.size(); ++i) {
    m.error += pred[i] != y[i];
    m.positive_rate += pred[i] == 1;
    const auto g = static_cast<size_t>(group[i]);
    for (size_t b : {size_t{0}, static_cast<size_t>(y[i]) + 1}) {
      count[b][g][static_cast<size_t>(pred[i])] += 1;
      rows[b][g] += 1;
    }
  }
  const double n = std::max<double>(1, static_cast<double>(pred.size()));
  m.error /= n;
  m.positive_rate /= n;
  for (size_t b = 0; b < blocks; ++b) {
    double gap = 0;
    for (size_t c = 0; c < static_cast<size_t>(classes); ++c) {
      double lo = 1, hi = 0;
      for (size_t g = 0; g < static_cast<size_t>(k); ++g) {
        if (rows[b][g] == 0) continue;
        const double rate = count[b][g][c] / rows[b][g];
        lo = std::min(lo, rate);
        hi = std::max(hi, rate);
      }
      gap = std::max(gap, hi - lo);
    }
    if (b == 0) {
      m.dp_violation = gap;
    } else {
      m.eo_violation = std::max(m.eo_violation, gap);
    }
  }
  return m;
}

Metrics ExpectedMetrics(const std::vector<double>& p, const std::vector<int>& y,
                        const std::vector<int>& group) {
  Metrics m;
  double sum[2][2] = {{0, 0}, {0, 0}}, count[2][2] = {{0, 0}, {0, 0}};
  for (size_t i = 0; i < p.size(); ++i) {
    m.error += std::abs(p[i] - y[i]);
    sum[group[i]][y[i]] += p[i];
    count[group[i]][y[i]] += 1;
  }
  m.error /= static_cast<double>(p.size());
  const double rows0 = count[0][0] + count[0][1], rows1 = count[1][0] + count[1][1];
  if (rows0 > 0 && rows1 > 0) {
    m.dp_violation = std::abs((sum[0][0] + sum[0][1]) / rows0 - (sum[1][0] + sum[1][1]) / rows1);
  }
  for (int label = 0; label < 2; ++label) {
    if (count[0][label] == 0 || count[1][label] == 0) continue;
    m.violation = std::max(
        m.violation, std::abs(sum[0][label] / count[0][label] - sum[1][label] / count[1][label]));
  }
  return m;
}

MeanStd Summarize(const std::vector<double>& v) {
  MeanStd s;
  if (v.empty()) return {std::numeric_limits<double>::quiet_NaN(), 0};
  for (double x : v) s.mean += x;
  s.mean /= static_cast<double>(v.size());
  for (double x : v) s.std += (x - s.mean) * (x - s.mean);
  s.std = std::sqrt(s.std / static_cast<double>(v.size()));
  return s;
}

std::string EpsilonText(double eps) { return std::isinf(eps) ? "inf" : absl::StrCat(eps); }

}  // namespace fairvault::experiments
