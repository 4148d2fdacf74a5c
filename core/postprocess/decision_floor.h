// The smallest positive decision floor a post-processor accepts (equalized odds, equalized odds
// from scores, statistical parity): it keeps every decision probability at least 1e-6, so Decide
// draws exactly and with the same work for every group (core/dp SampleBernoulli takes every
// p >= 2^-73; SampleFairScore every row whose entries are within 2^63 of each other in ratio,
// >= floor/k with k <= kMaxBins).
#ifndef FAIRVAULT_CORE_POSTPROCESS_DECISION_FLOOR_H_
#define FAIRVAULT_CORE_POSTPROCESS_DECISION_FLOOR_H_

namespace fairvault::core::postprocess {

inline constexpr double kMinDecisionFloor = 1e-6;

}  // namespace fairvault::core::postprocess

#endif  // FAIRVAULT_CORE_POSTPROCESS_DECISION_FLOOR_H_
