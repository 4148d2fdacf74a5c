// Exact confidence intervals for a rate x / (x + y) whose two counts were released with
// discrete Laplace noise: test inversion over the public noise distribution, combined with a
// Clopper–Pearson interval for the sampling error. Post-processing of the noisy release only.
#ifndef FAIRVAULT_CORE_FAIRNESS_COUNT_INTERVAL_H_
#define FAIRVAULT_CORE_FAIRNESS_COUNT_INTERVAL_H_

#include <cstdint>

namespace fairvault::core::fairness {

// Regularised incomplete beta function I_x(a, b) for a, b > 0 and x in [0, 1].
double RegularizedIncompleteBeta(double a, double b, double x);

struct RateBounds {
  double lo = 0;
  double hi = 1;
};

// The Clopper–Pearson interval for a binomial proportion from `successes` out of `trials`
// (0 <= successes <= trials), two-sided at level 1 − alpha: P(p in it) >= 1 − alpha for every
// p and trials. [0, 1] when trials == 0.
RateBounds ClopperPearson(int64_t successes, int64_t trials, double alpha);

// The noise on one released count that enters a rate: the sum of `cells` independent discrete
// Laplace draws of scale t (P(z) ∝ exp(−|z|/t)); cells is 1 (a single cell) or 2 (the sum of
// two cells). Scale 0 means no noise.
struct CountNoise {
  double laplace_scale = 0;
  int cells = 1;
};

// P(|Z1| + |Z2| <= radius) for Z1, Z2 independent with the distribution of `noise`: the
// probability that the L1 ball of that radius around the true count pair contains the
// released pair. Closed form, O(1).
double NoisePairCoverage(const CountNoise& noise, int64_t radius);

// The smallest radius r >= 0 with NoisePairCoverage(noise, r) >= level (level in (0, 1)):
// {(x, y) in N² : |x − x̃| + |y − ỹ| <= r} is then an exact level-`level` confidence set for
// the true counts, whatever they are. 0 without noise.
int64_t NoisePairRadius(const CountNoise& noise, double level);

// Interval for a rate x / (x + y) from the released counts (x̃, ỹ) (any sign):
//   the union of ClopperPearson(x, x + y, sampling_alpha) over every (x, y) in N² with
//   |x − x̃| + |y − ỹ| <= radius.
// It contains every plug-in rate x / (x + y) of the set, so with radius from
// NoisePairRadius(noise, c1) it covers the rows' empirical rate with probability >= c1, and
// the population rate (rows drawn i.i.d.) with probability >= c1 · (1 − sampling_alpha): the
// noise is independent of the data. [0, 1] when the set is empty (the release is implausible
// for every count pair) or holds a pair with x + y = 0 next to others, as an empty group has
// no rate. Never a single point: every Clopper–Pearson interval with trials >= 1 has positive
// width. O(min(radius, 64)) incomplete-beta inversions.
RateBounds RateInterval(int64_t noisy_x, int64_t noisy_y, int64_t radius, double sampling_alpha);

}  // namespace fairvault::core::fairness

#endif  // FAIRVAULT_CORE_FAIRNESS_COUNT_INTERVAL_H_
