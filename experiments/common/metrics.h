// What the studies measure on test rows: a classifier's error and fairness violations, from hard
// decisions or from each row's probability of a positive decision, and their summaries over
// seeds.
#ifndef FAIRVAULT_EXPERIMENTS_COMMON_METRICS_H_
#define FAIRVAULT_EXPERIMENTS_COMMON_METRICS_H_

#include <string>
#include <vector>

namespace fairvault::experiments {

// Metrics of hard decisions pred[i] ∈ 0..classes-1 against labels y[i] and groups group[i]:
// error; demographic-parity violation, the largest |P(ŷ = c | g1) − P(ŷ = c | g2)| over predicted
// classes c and pairs of groups; equalized-odds violation, the same among the rows of each true
// label, largest over labels; and the rate of ŷ = 1. Groups without rows are skipped.
struct DecisionMetrics {
  double error = 0, dp_violation = 0, eo_violation = 0, positive_rate = 0;
};
DecisionMetrics ScoreDecisions(const std::vector<int>& pred, const std::vector<int>& y,
                               const std::vector<int>& group, int classes = 2);

// Test-set metrics of a randomized classifier from each row's probability of a positive
// decision p_i: expected error mean |p_i − y_i|, equalized-odds violation
// max_y |mean_{a=0,y} p − mean_{a=1,y} p| and demographic-parity violation
// |mean_{a=0} p − mean_{a=1} p| (two groups; for a 0/1 decision the max over ŷ of the gap).
struct Metrics {
  double error = 0, violation = 0;  // violation: equalized odds
  double dp_violation = 0;
};
Metrics ExpectedMetrics(const std::vector<double>& p, const std::vector<int>& y,
                        const std::vector<int>& group);

struct MeanStd {
  double mean = 0, std = 0;  // population std, as numpy's default
};
// Mean and population std of v (NaN and 0 when v is empty).
MeanStd Summarize(const std::vector<double>& v);
// "inf", or eps as absl::StrCat writes it.
std::string EpsilonText(double eps);

}  // namespace fairvault::experiments

#endif  // FAIRVAULT_EXPERIMENTS_COMMON_METRICS_H_
