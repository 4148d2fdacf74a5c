// tradeoff_adult's outputs: the per-seed CSV, the `fairvault report sweep` CSVs (mean over
// seeds with a 95% t-interval) and the markdown tables of the trade-off and of --validate.
#ifndef FAIRVAULT_EXPERIMENTS_TRADEOFF_TRADEOFF_ADULT_REPORT_H_
#define FAIRVAULT_EXPERIMENTS_TRADEOFF_TRADEOFF_ADULT_REPORT_H_

#include <string>

#include "experiments/tradeoff/tradeoff_adult_arms.h"

namespace fairvault::experiments::tradeoff {

// One line per row: method, series, config, ε, seed, metrics, z, job time.
std::string PerSeedCsv(const Results& res, const Flags& flags);

// The `fairvault report sweep` input: per series and ε the mean over seeds, with the 95%
// t-interval of the mean where there are several seeds; violation = DP (dp) or EO (!dp).
std::string SweepCsv(const Results& res, const Flags& flags, bool dp);

// The trade-off table: per arm and ε, mean ± std over seeds; `seconds` is the total run time.
std::string TradeoffMarkdown(const Split& split, const Flags& flags, const Results& res,
                             double seconds);

// --validate's table: per variation and ε, validation error / DP violation (means).
std::string ValidationMarkdown(const Split& split, const Flags& flags, const Results& res,
                               double seconds);

}  // namespace fairvault::experiments::tradeoff

#endif  // FAIRVAULT_EXPERIMENTS_TRADEOFF_TRADEOFF_ADULT_REPORT_H_
