// Tests for the privacy accountant: published conversion vectors, the pure-DP (randomized
// response), Laplace and Gaussian curves, exact integer composition and merging, the
// min-of-bounds spend, and Gaussian calibration.
// Over 500 lines as one file: the curves, composition and calibration are checked against each
// other.
#include "core/accounting/accountant.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "core/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fairvault::core::accounting {
namespace {

using ::fairvault::testing::StatusIs;

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr double kInf = std::numeric_limits<double>::infinity();

std::vector<double> Scaled(std::vector<double> v, double factor) {
  for (double& x : v) x *= factor;
  return v;
}

// ---------------------------------------------------------------------------------------
// Orders

TEST(RdpOrdersTest, GridIsPinned) {
  const std::vector<double>& orders = RdpOrders();
  // Stored curves are indexed by position: these pins catch any edit to the grid.
  ASSERT_EQ(orders.size(), 177u);
  EXPECT_EQ(orders[0], 1.1);
  EXPECT_EQ(orders[1], 1.2);
  EXPECT_EQ(orders[98], 10.9);
  EXPECT_EQ(orders[99], 11.0);
  EXPECT_EQ(orders[151], 63.0);
  EXPECT_EQ(orders[152], 64.0);
  EXPECT_EQ(orders[153], 80.0);
  EXPECT_EQ(orders[156], 128.0);
  EXPECT_EQ(orders[175], 3584.0);
  EXPECT_EQ(orders[176], 4096.0);
  EXPECT_TRUE(std::is_sorted(orders.begin(), orders.end()));
  EXPECT_EQ(std::adjacent_find(orders.begin(), orders.end()), orders.end());
  EXPECT_EQ(&RdpOrders(), &orders);  // one shared instance
}

// ---------------------------------------------------------------------------------------
// Conversion to (epsilon, delta): vectors from ALGORITHMS.md §0.

TEST(RdpToEpsilonTest, GaussianFineGridVector) {
  std::vector<double> orders;
  for (int i = 1; i <= 98999; ++i) orders.push_back((1000 + i) / 1000.0);  // 1.001..99.999
  ASSERT_EQ(orders.front(), 1.001);
  ASSERT_EQ(orders.back(), 99.999);
  const double eps = RdpToEpsilon(orders, GaussianRdp(1.0, 4.530877117, orders), 1e-6);
  EXPECT_NEAR(eps, 1.0000000003, 1e-6 * 1.0000000003);
}

TEST(RdpToEpsilonTest, ConstantCurveVector) {
  std::vector<double> orders;
  for (int a = 2; a <= 32; ++a) orders.push_back(a);
  const std::vector<double> rdp(orders.size(), 1.1);
  EXPECT_NEAR(RdpToEpsilon(orders, rdp, 1e-5), 1.32783806176, 1e-6 * 1.32783806176);
}

TEST(RdpToEpsilonTest, NonPositiveOrNanDeltaIsInfinite) {
  const std::vector<double> orders = {2, 3};
  const std::vector<double> rdp = {0.1, 0.2};
  EXPECT_EQ(RdpToEpsilon(orders, rdp, 0), kInf);
  EXPECT_EQ(RdpToEpsilon(orders, rdp, -1e-6), kInf);
  EXPECT_EQ(RdpToEpsilon(orders, rdp, std::nan("")), kInf);
}

TEST(RdpToEpsilonTest, NoFiniteOrderIsInfinite) {
  const std::vector<double> orders = {2, 3};
  EXPECT_EQ(RdpToEpsilon(orders, std::vector<double>{kInf, kInf}, 1e-6), kInf);
  EXPECT_EQ(RdpToEpsilon({}, {}, 1e-6), kInf);
}

TEST(RdpToEpsilonTest, InfiniteOrderIsSkippedNotPropagated) {
  const std::vector<double> orders = {2, 3, 4};
  const std::vector<double> finite_only = {3};
  const double expected = RdpToEpsilon(finite_only, std::vector<double>{0.5}, 1e-6);
  EXPECT_TRUE(std::isfinite(expected));
  EXPECT_EQ(RdpToEpsilon(orders, std::vector<double>{kInf, 0.5, kInf}, 1e-6), expected);
}

TEST(RdpToEpsilonTest, TakesTheMinimumOverOrders) {
  const std::vector<double> orders = {2, 8};
  const std::vector<double> rdp = {0.05, 0.2};
  // Candidates computed by hand from the formula; a = 8 wins.
  const auto candidate = [](long double a, long double r, long double d) {
    return r + std::log1p(-1 / a) - std::log(d * a) / (a - 1);
  };
  const long double c2 = candidate(2, 0.05L, 1e-6L);
  const long double c8 = candidate(8, 0.2L, 1e-6L);
  ASSERT_LT(c8, c2);
  EXPECT_NEAR(RdpToEpsilon(orders, rdp, 1e-6), static_cast<double>(c8), 1e-12);
}

TEST(RdpToEpsilonTest, ClampsAtZero) {
  // A large delta makes every candidate negative.
  const std::vector<double> orders = {2, 3};
  EXPECT_EQ(RdpToEpsilon(orders, std::vector<double>{0, 0}, 0.9), 0.0);
}

// ---------------------------------------------------------------------------------------
// Curves

// D_a(P || Q) for randomized response, P = (e^eps, 1) / (1 + e^eps), Q = (1, e^eps) / (1 + e^eps),
// from the definition log(sum_y P_y^a Q_y^(1-a)) / (a-1), in long double. The two terms are
// summed in log space so that large orders do not overflow. This is also exactly the discrete
// Laplace with a unit shift: its privacy loss is +eps for x <= 0 and -eps for x >= 1.
long double RandomizedResponseDivergence(long double eps, long double a) {
  const long double log_hi = eps - std::log1p(std::exp(eps));  // log(e^eps / (1 + e^eps))
  const long double log_lo = -std::log1p(std::exp(eps));       // log(1 / (1 + e^eps))
  const long double t1 = a * log_hi + (1 - a) * log_lo;
  const long double t2 = a * log_lo + (1 - a) * log_hi;
  const long double top = std::max(t1, t2);
  return (top + std::log1p(std::exp(std::min(t1, t2) - top))) / (a - 1);
}

TEST(PureDpRdpTest, MatchesHandComputedValues) {
  // At order 2 the curve is log((e^{2 eps} + e^{-eps}) / (1 + e^eps)); with eps = ln 2 that is
  // log((4 + 1/2) / 3) = log(3/2). At order 3, eps = ln 3: log((27 + 1/9) / 4) / 2 = log(61/9) / 2.
  EXPECT_NEAR(PureDpRdp(std::log(2.0), std::vector<double>{2.0})[0], std::log(1.5), 1e-15);
  EXPECT_NEAR(PureDpRdp(std::log(3.0), std::vector<double>{3.0})[0], std::log(61.0 / 9) / 2, 1e-15);
}

TEST(PureDpRdpTest, IsTheRandomizedResponseDivergence) {
  for (double eps : {0.01, 0.1, 0.5, 1.0, 5.0}) {
    for (double a : {1.1, 1.5, 2.0, 3.0, 10.0, 64.0}) {
      const double expected = static_cast<double>(RandomizedResponseDivergence(eps, a));
      EXPECT_NEAR(PureDpRdp(eps, std::vector<double>{a})[0], expected, 1e-12 * expected)
          << "eps " << eps << " order " << a;
    }
  }
}

TEST(PureDpRdpTest, DominatesTheContinuousLaplaceCurve) {
  // Randomized response is the worst epsilon-DP mechanism, so its curve lies on or above the
  // Laplace curve at every order; the gap is what the ledger used to undercharge.
  for (double eps : {1e-3, 0.01, 0.1, 1.0, 5.0, 10.0}) {
    const std::vector<double> rr = PureDpRdp(eps, RdpOrders());
    const std::vector<double> laplace = LaplaceRdp(eps, RdpOrders());
    for (size_t i = 0; i < rr.size(); ++i) {
      EXPECT_GE(rr[i], laplace[i]) << "eps " << eps << " order " << RdpOrders()[i];
    }
  }
  // At order 2 the gap is about eps^3 / 3 for small eps; at eps = 5 it is 0.825 at order 1.1.
  EXPECT_GT(PureDpRdp(5.0, RdpOrders())[0] - LaplaceRdp(5.0, RdpOrders())[0], 0.5);
}

TEST(PureDpRdpTest, TendsToEpsilonAtLargeOrdersWithoutOverflow) {
  for (double eps : {0.1, 1.0, 3.0}) {
    const double r = PureDpRdp(eps, std::vector<double>{1e6})[0];
    EXPECT_LE(r, eps);
    // eps - log1p(e^{-eps}) / (a-1) + (a tiny positive term) for large a.
    EXPECT_NEAR(r, eps - std::log1p(std::exp(-eps)) / (1e6 - 1), 1e-12) << "eps " << eps;
  }
  for (double eps : {1000.0, 1e6}) {
    const double r = PureDpRdp(eps, std::vector<double>{4096.0})[0];
    EXPECT_TRUE(std::isfinite(r));
    EXPECT_LE(r, eps);
    EXPECT_GT(r, eps * (1 - 1e-12));
  }
}

TEST(PureDpRdpTest, TendsToKlDivergenceNearOrderOne) {
  // The limit at a -> 1 is the KL divergence of randomized response, eps tanh(eps/2).
  for (double eps : {0.1, 1.0, 3.0}) {
    const double r = PureDpRdp(eps, std::vector<double>{1.000001})[0];
    EXPECT_NEAR(r, eps * std::tanh(eps / 2), 1e-5 * eps) << "eps " << eps;
    EXPECT_LT(r, eps);
  }
}

TEST(PureDpRdpTest, IsAboutOrderTimesHalfEpsilonSquaredForSmallEpsilon) {
  // No cancellation at tiny eps: the value keeps full relative precision, near a eps^2 / 2
  // (relative corrections are O((a eps)^2)).
  for (double a : {1.1, 2.0, 10.0, 100.0}) {
    const double eps = 1e-6;
    const double r = PureDpRdp(eps, std::vector<double>{a})[0];
    EXPECT_NEAR(r, a * eps * eps / 2, 1e-6 * a * eps * eps) << "order " << a;
  }
}

TEST(PureDpRdpTest, NonDecreasingInOrderAndBoundedByEpsilon) {
  for (double eps : {1e-6, 0.01, 0.1, 1.0, 10.0, 1e6}) {
    const std::vector<double> r = PureDpRdp(eps, RdpOrders());
    ASSERT_EQ(r.size(), RdpOrders().size());
    EXPECT_TRUE(std::is_sorted(r.begin(), r.end())) << "eps " << eps;
    EXPECT_GT(r.front(), 0.0) << "eps " << eps;
    EXPECT_LE(r.back(), eps);
  }
}

TEST(LaplaceRdpTest, MatchesClosedFormAtOrderTwo) {
  // At order 2 the formula reduces to log((2 e^eps + e^{-2 eps}) / 3).
  for (double eps : {0.01, 0.1, 1.0, 5.0}) {
    const long double e = eps;
    const long double expected = std::log((2 * std::exp(e) + std::exp(-2 * e)) / 3);
    EXPECT_NEAR(LaplaceRdp(eps, std::vector<double>{2.0})[0], static_cast<double>(expected), 1e-15)
        << "eps " << eps;
  }
}

TEST(LaplaceRdpTest, MatchesNumericalRenyiDivergence) {
  // log(integral p^a q^(1-a)) / (a-1) for Lap(0,1) vs Lap(0.5,1), a = 3, by quadrature at 40 digits
  // (mpmath) - independent of the closed form.
  EXPECT_NEAR(LaplaceRdp(0.5, std::vector<double>{3.0})[0], 0.27122643230725676, 1e-15);
}

TEST(LaplaceRdpTest, TendsToEpsilonAtLargeOrders) {
  for (double eps : {0.1, 1.0, 3.0}) {
    const double r = LaplaceRdp(eps, std::vector<double>{1e6})[0];
    EXPECT_LE(r, eps);
    EXPECT_GT(r, eps - 1e-5) << "eps " << eps;  // eps + log(1/2)/(a-1) for large a
  }
  // No overflow for large a * eps: finite, at most eps, and within log(2)/(a-1) of it.
  const double r = LaplaceRdp(1000.0, std::vector<double>{4096.0})[0];
  EXPECT_TRUE(std::isfinite(r));
  EXPECT_LE(r, 1000.0);
  EXPECT_GT(r, 1000.0 - 1e-3);
}

TEST(LaplaceRdpTest, TendsToKlDivergenceNearOrderOne) {
  // The limit at a -> 1 is the KL divergence eps + e^{-eps} - 1, well below eps.
  for (double eps : {0.1, 1.0, 3.0}) {
    const double r = LaplaceRdp(eps, std::vector<double>{1.000001})[0];
    const double kl = eps + std::expm1(-eps);
    EXPECT_NEAR(r, kl, 1e-5 * eps) << "eps " << eps;
    EXPECT_LT(r, eps);
    EXPECT_GE(r, 0.0);
  }
}

TEST(LaplaceRdpTest, NonDecreasingInOrderAndBoundedByEpsilon) {
  for (double eps : {1e-6, 0.01, 0.1, 1.0, 10.0, 1e6}) {
    const std::vector<double> r = LaplaceRdp(eps, RdpOrders());
    ASSERT_EQ(r.size(), RdpOrders().size());
    EXPECT_TRUE(std::is_sorted(r.begin(), r.end())) << "eps " << eps;
    EXPECT_GE(r.front(), 0.0);
    EXPECT_LE(r.back(), eps);
    EXPECT_GT(r.back(), 0.0);
  }
}

TEST(GaussianRdpTest, IsOrderTimesHalfSquaredRatio) {
  const std::vector<double> r = GaussianRdp(2.0, 4.0, std::vector<double>{1.5, 3.0, 100.0});
  EXPECT_DOUBLE_EQ(r[0], 1.5 * 4.0 / 32.0);
  EXPECT_DOUBLE_EQ(r[1], 3.0 * 4.0 / 32.0);
  EXPECT_DOUBLE_EQ(r[2], 100.0 * 4.0 / 32.0);
  // Large sensitivity and sigma: the ratio, not sensitivity^2, is what must stay finite.
  EXPECT_DOUBLE_EQ(GaussianRdp(1e200, 1e200, std::vector<double>{2.0})[0], 1.0);
}

// ---------------------------------------------------------------------------------------
// EpsilonToMicro

TEST(EpsilonToMicroTest, RoundsToNearestMicro) {
  EXPECT_EQ(*EpsilonToMicro(0.1), 100000);
  EXPECT_EQ(*EpsilonToMicro(1.0), 1000000);
  EXPECT_EQ(*EpsilonToMicro(1.0000004), 1000000);
  EXPECT_EQ(*EpsilonToMicro(1.0000006), 1000001);
  EXPECT_EQ(*EpsilonToMicro(1e-6), 1);
  EXPECT_EQ(*EpsilonToMicro(6e-7), 1);
  EXPECT_EQ(*EpsilonToMicro(1e6), 1000000000000);
}

TEST(EpsilonToMicroTest, RejectsBadEpsilon) {
  for (double eps : {0.0, -1.0, std::nan(""), kInf, -kInf, 4e-7, 1e6 + 1, 1e300}) {
    EXPECT_THAT(EpsilonToMicro(eps), StatusIs(absl::StatusCode::kInvalidArgument, "epsilon"))
        << "eps " << eps;
  }
  EXPECT_THAT(EpsilonToMicro(-1.0),
              StatusIs(absl::StatusCode::kInvalidArgument, "must be finite and > 0 (got -1)"));
}

// ---------------------------------------------------------------------------------------
// Costs

TEST(PrivacyCostTest, PureDpCostIsPureWithCeiledRandomizedResponseCurve) {
  const PrivacyCost cost = PureDpCost(100000);
  ASSERT_TRUE(cost.pure_epsilon_micro.has_value());
  EXPECT_EQ(*cost.pure_epsilon_micro, 100000);
  const std::vector<double> rdp = PureDpRdp(0.1, RdpOrders());
  ASSERT_EQ(cost.rdp_nano.size(), rdp.size());
  for (size_t i = 0; i < rdp.size(); ++i) {
    EXPECT_GE(static_cast<double>(cost.rdp_nano[i]), rdp[i] * 1e9) << i;  // rounded up
    EXPECT_LT(static_cast<double>(cost.rdp_nano[i]), rdp[i] * 1e9 + 1) << i;
  }
}

TEST(PrivacyCostTest, LaplaceCostIsThePureDpCost) {
  for (int64_t micro : {int64_t{1}, int64_t{100000}, int64_t{5000000}, int64_t{1000000000000}}) {
    const PrivacyCost laplace = LaplaceCost(micro);
    const PrivacyCost pure = PureDpCost(micro);
    EXPECT_EQ(laplace.pure_epsilon_micro, pure.pure_epsilon_micro) << micro;
    EXPECT_EQ(laplace.rdp_nano, pure.rdp_nano) << micro;
  }
}

TEST(PrivacyCostTest, DiscreteLaplaceChargeBoundsRandomizedResponse) {
  // The discrete Laplace's privacy loss for a unit shift is two-point, as for randomized
  // response; the charged curve must be at least that divergence at every order (the
  // continuous-Laplace curve is not: it undercharged by up to 0.83 per release at eps = 5).
  for (int64_t micro : {int64_t{100000}, int64_t{1000000}, int64_t{5000000}}) {
    const PrivacyCost cost = LaplaceCost(micro);
    const long double eps = MicroToEpsilon(micro);
    for (size_t i = 0; i < RdpOrders().size(); ++i) {
      const long double exact = RandomizedResponseDivergence(eps, RdpOrders()[i]);
      EXPECT_GE(static_cast<long double>(cost.rdp_nano[i]), exact * 1e9L * (1 - 1e-13L))
          << "eps " << static_cast<double>(eps) << " order " << RdpOrders()[i];
    }
  }
}

TEST(PrivacyCostTest, GaussianCostHasNoPureValue) {
  const PrivacyCost cost = GaussianCost(1.0, 2.0);
  EXPECT_FALSE(cost.pure_epsilon_micro.has_value());
  const std::vector<double>& orders = RdpOrders();
  ASSERT_EQ(cost.rdp_nano.size(), orders.size());
  // 2.0 * 1 / 8 = 0.25 exactly.
  EXPECT_EQ(cost.rdp_nano[9], 250000000);  // order 2.0
  ASSERT_EQ(orders[9], 2.0);
  for (size_t i = 0; i < orders.size(); ++i) {
    EXPECT_GE(static_cast<double>(cost.rdp_nano[i]), orders[i] / 8 * 1e9) << i;
  }
}

TEST(PrivacyCostTest, TinySigmaSaturatesInsteadOfOverflowing) {
  const PrivacyCost cost = GaussianCost(1.0, 1e-300);
  for (int64_t v : cost.rdp_nano) EXPECT_EQ(v, kMax);
  Spend spend;
  spend.Add(cost);
  spend.Add(cost);  // saturating, not wrapping to negative
  for (int64_t v : spend.rdp_all_nano) EXPECT_EQ(v, kMax);
  EXPECT_EQ(SpentEpsilonMicro(spend, 1e-6), kMax);
}

TEST(PrivacyCostTest, MalformedParametersAreChargedAsUnbounded) {
  for (const PrivacyCost& cost :
       {LaplaceCost(0), LaplaceCost(-5), PureDpCost(0), GaussianCost(-1.0, 1.0),
        GaussianCost(1.0, 0.0), GaussianCost(std::nan(""), 1.0)}) {
    Spend spend;
    spend.Add(cost);
    EXPECT_EQ(SpentEpsilonMicro(spend, 1e-6), kMax);
  }
}

// ---------------------------------------------------------------------------------------
// Composition

TEST(SpendTest, EmptySpendIsZero) {
  EXPECT_EQ(SpentEpsilonMicro(Spend(), 1e-6), 0);
  EXPECT_EQ(SpentEpsilonMicro(Spend(), 0), 0);
}

TEST(SpendTest, TenTimesPointOneSpendsExactlyOne) {
  Spend spend;
  for (int i = 0; i < 10; ++i) spend.Add(LaplaceCost(*EpsilonToMicro(0.1)));
  EXPECT_EQ(spend.releases, 10);
  EXPECT_EQ(spend.pure_micro, 1000000);
  EXPECT_EQ(SpentEpsilonMicro(spend, 0),
            1000000);  // pure composition needs no delta
  // At delta 1e-9 the RDP bound (about 1.0012) loses, and the pure sum is exact.
  EXPECT_EQ(SpentEpsilonMicro(spend, 1e-9), 1000000);
}

TEST(SpendTest, TenTimesPointOneMayCostLessThanOneViaRdp) {
  // At delta 1e-6 the RDP conversion of the ten curves is about 0.99937, a valid and smaller bound,
  // so the spend is below the pure sum (never above it: a grant of 1 admits all ten).
  Spend spend;
  for (int i = 0; i < 10; ++i) spend.Add(LaplaceCost(100000));
  const double rdp_only = RdpToEpsilon(RdpOrders(), Scaled(PureDpRdp(0.1, RdpOrders()), 10), 1e-6);
  ASSERT_LT(rdp_only, 1.0);
  const int64_t spent = SpentEpsilonMicro(spend, 1e-6);
  EXPECT_LT(spent, 1000000);
  EXPECT_GE(spent, std::ceil(rdp_only * 1e6));
  EXPECT_LE(spent, std::ceil((rdp_only + 1e-8) * 1e6));  // 10 nano-units of rounding per order
}

TEST(SpendTest, AddSumsCurvesExactly) {
  const PrivacyCost a = LaplaceCost(300000);
  const PrivacyCost b = GaussianCost(1.0, 3.0);
  Spend spend;
  spend.Add(a);
  spend.Add(b);
  spend.Add(b);
  ASSERT_EQ(spend.rdp_all_nano.size(), RdpOrders().size());
  ASSERT_EQ(spend.rdp_nonpure_nano.size(), RdpOrders().size());
  for (size_t i = 0; i < RdpOrders().size(); ++i) {
    EXPECT_EQ(spend.rdp_all_nano[i], a.rdp_nano[i] + 2 * b.rdp_nano[i]);
    EXPECT_EQ(spend.rdp_nonpure_nano[i], 2 * b.rdp_nano[i]);
  }
  EXPECT_EQ(spend.pure_micro, 300000);
  EXPECT_EQ(spend.releases, 3);
}

TEST(SpendTest, CompositionIsOrderIndependent) {
  const std::vector<PrivacyCost> costs = {LaplaceCost(100000), GaussianCost(1.0, 5.0),
                                          LaplaceCost(250000), GaussianCost(1.4142, 2.5),
                                          LaplaceCost(1)};
  Spend forward;
  for (const PrivacyCost& c : costs) forward.Add(c);
  Spend backward;
  for (auto it = costs.rbegin(); it != costs.rend(); ++it) backward.Add(*it);
  EXPECT_EQ(forward, backward);
  EXPECT_EQ(SpentEpsilonMicro(forward, 1e-6), SpentEpsilonMicro(backward, 1e-6));
}

TEST(SpendTest, EqualityComparesEveryField) {
  Spend base;
  base.Add(LaplaceCost(100000));
  base.Add(GaussianCost(1.0, 4.0));
  EXPECT_EQ(base, base);
  EXPECT_FALSE(base == Spend());

  Spend other = base;
  other.releases++;
  EXPECT_FALSE(base == other);
  other = base;
  other.pure_micro++;
  EXPECT_FALSE(base == other);
  other = base;
  other.rdp_all_nano[3]++;
  EXPECT_FALSE(base == other);
  other = base;
  other.rdp_nonpure_nano[3]++;
  EXPECT_FALSE(base == other);
}

TEST(SpendTest, EmptyCurveEqualsZeroCurve) {
  Spend zeros;
  zeros.rdp_all_nano.assign(RdpOrders().size(), 0);
  zeros.rdp_nonpure_nano.assign(RdpOrders().size(), 0);
  EXPECT_EQ(Spend(), zeros);
  zeros.rdp_all_nano[0] = 1;
  EXPECT_FALSE(Spend() == zeros);
}

TEST(SpendTest, MergeEqualsAddingEveryCost) {
  const std::vector<PrivacyCost> first = {LaplaceCost(100000), GaussianCost(1.0, 5.0)};
  const std::vector<PrivacyCost> second = {LaplaceCost(250000), GaussianCost(1.4142, 2.5),
                                           LaplaceCost(1)};
  Spend a, b, all;
  for (const PrivacyCost& c : first) {
    a.Add(c);
    all.Add(c);
  }
  for (const PrivacyCost& c : second) {
    b.Add(c);
    all.Add(c);
  }
  Spend merged = a;
  merged.Merge(b);
  EXPECT_EQ(merged, all);
  Spend reversed = b;
  reversed.Merge(a);
  EXPECT_EQ(reversed, all);
  EXPECT_EQ(SpentEpsilonMicro(merged, 1e-6), SpentEpsilonMicro(all, 1e-6));

  Spend empty;
  empty.Merge(a);
  EXPECT_EQ(empty, a);
  Spend unchanged = a;
  unchanged.Merge(Spend());
  EXPECT_EQ(unchanged, a);
}

TEST(SpendTest, MergeSaturatesInsteadOfWrapping) {
  // Two spends near INT64_MAX: a plain sum wraps negative, which converts to a spend of 0 and would
  // let a dataset-wide cap admit anything.
  Spend near_max;
  near_max.releases = kMax - 3;
  near_max.pure_micro = kMax - 5;
  near_max.rdp_all_nano.assign(RdpOrders().size(), kMax - 7);
  near_max.rdp_nonpure_nano.assign(RdpOrders().size(), kMax - 11);
  Spend merged = near_max;
  merged.Merge(near_max);
  EXPECT_EQ(merged.releases, kMax);
  EXPECT_EQ(merged.pure_micro, kMax);
  for (int64_t v : merged.rdp_all_nano) EXPECT_EQ(v, kMax);
  for (int64_t v : merged.rdp_nonpure_nano) EXPECT_EQ(v, kMax);
  EXPECT_EQ(SpentEpsilonMicro(merged, 1e-6), kMax);
  EXPECT_EQ(SpentEpsilonMicro(merged, 0), kMax);
}

TEST(SpendTest, MergedSpendIsNeverBelowEitherPart) {
  // Realistic near-overflow: a tiny-sigma Gaussian has a moderate curve at low orders but one near
  // 2^62 nano-units at the top orders. Merging two such spends must saturate the top orders (they
  // drop out of the conversion) while the low orders still give a huge, finite bound.
  Spend one;
  one.Add(GaussianCost(1.0, 6.4e-4));
  ASSERT_GT(one.rdp_all_nano.back(), kMax / 2);
  ASSERT_LT(one.rdp_all_nano.back(), kMax);
  Spend merged = one;
  merged.Merge(one);
  merged.Merge(one);
  for (int64_t v : merged.rdp_all_nano) EXPECT_GE(v, 0);
  EXPECT_EQ(merged.rdp_all_nano.back(), kMax);
  const int64_t single = SpentEpsilonMicro(one, 1e-6);
  const int64_t triple = SpentEpsilonMicro(merged, 1e-6);
  EXPECT_GT(single, 1'000'000'000'000);  // above 1e6 epsilon
  EXPECT_GT(triple, 2 * single);
  Spend added;
  for (int i = 0; i < 3; ++i) added.Add(GaussianCost(1.0, 6.4e-4));
  EXPECT_EQ(merged, added);
}

TEST(SpendTest, MergeTreatsMissingOrNegativeEntriesAsUnknown) {
  Spend base;
  base.Add(LaplaceCost(100000));
  // A curve shorter than the grid (e.g. decoded from a damaged row) and negative entries are
  // unknown: those orders saturate, and a negative count or pure sum saturates too.
  Spend damaged;
  damaged.releases = 1;
  damaged.pure_micro = -1;
  damaged.rdp_all_nano.assign(RdpOrders().size() - 1, 1000);
  damaged.rdp_all_nano[0] = -5;
  damaged.rdp_nonpure_nano.assign(RdpOrders().size(), 0);
  Spend merged = base;
  merged.Merge(damaged);
  EXPECT_EQ(merged.releases, 2);
  EXPECT_EQ(merged.pure_micro, kMax);
  ASSERT_EQ(merged.rdp_all_nano.size(), RdpOrders().size());
  EXPECT_EQ(merged.rdp_all_nano[0], kMax);
  EXPECT_EQ(merged.rdp_all_nano[1], base.rdp_all_nano[1] + 1000);
  EXPECT_EQ(merged.rdp_all_nano.back(), kMax);
  // Our own negative entries are unknown as well, even if the other side adds a positive amount.
  Spend negative_self;
  negative_self.rdp_all_nano.assign(RdpOrders().size(), -100);
  negative_self.Merge(base);
  for (int64_t v : negative_self.rdp_all_nano) EXPECT_EQ(v, kMax);
}

TEST(SpendTest, ZeroSensitivityGaussianAddsNothing) {
  Spend spend;
  for (int i = 0; i < 10; ++i) spend.Add(LaplaceCost(100000));
  spend.Add(GaussianCost(0.0, 1.0));
  // Converting the all-zero non-pure curve would add about 0.0028 at delta 1e-9.
  EXPECT_EQ(SpentEpsilonMicro(spend, 1e-9), 1000000);
}

TEST(SpentEpsilonTest, ManySmallLaplaceReleasesUseRdpBound) {
  Spend spend;
  for (int i = 0; i < 1000; ++i) spend.Add(LaplaceCost(10000));  // 1000 x 0.01
  ASSERT_EQ(spend.pure_micro, 10000000);
  const int64_t spent = SpentEpsilonMicro(spend, 1e-6);
  // Independently: convert 1000 x the real-valued pure-DP curve (about 1.4685); nano rounding of
  // the stored curve may add at most 1000 nano-units per order.
  const double expected =
      RdpToEpsilon(RdpOrders(), Scaled(PureDpRdp(0.01, RdpOrders()), 1000), 1e-6);
  EXPECT_LT(expected, 2.0);  // far below the pure sum of 10
  // ... and never below the conversion of the (invalid) continuous-Laplace curve.
  EXPECT_GT(expected, RdpToEpsilon(RdpOrders(), Scaled(LaplaceRdp(0.01, RdpOrders()), 1000), 1e-6));
  EXPECT_GE(spent, std::ceil(expected * 1e6));
  EXPECT_LE(spent, std::ceil((expected + 1e-6) * 1e6));
}

TEST(SpentEpsilonTest, FewLaplaceReleasesUsePureSum) {
  Spend spend;
  spend.Add(LaplaceCost(500000));
  spend.Add(LaplaceCost(500000));
  // The RDP bound alone is about 1.00087: the pure sum is smaller and exact.
  const double rdp_only = RdpToEpsilon(RdpOrders(), Scaled(PureDpRdp(0.5, RdpOrders()), 2), 1e-6);
  ASSERT_GT(rdp_only, 1.0);
  EXPECT_EQ(SpentEpsilonMicro(spend, 1e-6), 1000000);
}

TEST(SpentEpsilonTest, MixedSpendIsTheSmallerOfBothBounds) {
  // One tiny Laplace next to one Gaussian: the spend is the smaller of (a) the conversion of the
  // summed curves and (b) the pure value plus the Gaussian's conversion, recomputed here from the
  // real-valued curves.
  const double sigma = 6.0;
  Spend spend;
  spend.Add(LaplaceCost(1000));
  spend.Add(GaussianCost(1.0, sigma));
  const std::vector<double>& orders = RdpOrders();
  const std::vector<double> gauss = GaussianRdp(1.0, sigma, orders);
  std::vector<double> all = PureDpRdp(0.001, orders);
  for (size_t i = 0; i < all.size(); ++i) all[i] += gauss[i];
  const double bound_a = RdpToEpsilon(orders, all, 1e-6);
  const double bound_b = 0.001 + RdpToEpsilon(orders, gauss, 1e-6);
  const double expected = std::min(bound_a, bound_b);
  const int64_t spent = SpentEpsilonMicro(spend, 1e-6);
  EXPECT_GE(spent, std::floor(expected * 1e6));
  EXPECT_LE(spent, std::ceil(expected * 1e6) + 1);
}

TEST(SpentEpsilonTest, LargeEpsilonReleasesSpendEssentiallyThePureSum) {
  // 20 releases at eps = 5: randomized response shows the composition costs essentially 100 at
  // delta 1e-5 (the RDP bound on the grid is about 100.0005, so the exact pure sum wins). The
  // continuous-Laplace curve claimed 99.31, which no valid accountant can certify for the discrete
  // Laplace.
  Spend spend;
  for (int i = 0; i < 20; ++i) spend.Add(LaplaceCost(5'000'000));
  const int64_t spent = SpentEpsilonMicro(spend, 1e-5);
  EXPECT_GE(spent, 99'990'000);
  EXPECT_LE(spent, 100'000'000);  // never above the pure sum
  const double rdp_only = RdpToEpsilon(RdpOrders(), Scaled(PureDpRdp(5.0, RdpOrders()), 20), 1e-5);
  EXPECT_GT(rdp_only, 99.99);
}

TEST(SpentEpsilonTest, GaussianWithZeroDeltaIsUnbounded) {
  Spend spend;
  spend.Add(GaussianCost(1.0, 10.0));
  EXPECT_EQ(SpentEpsilonMicro(spend, 0), kMax);
  spend.Add(LaplaceCost(100000));  // a pure release cannot rescue it
  EXPECT_EQ(SpentEpsilonMicro(spend, 0), kMax);
  EXPECT_LT(SpentEpsilonMicro(spend, 1e-6), kMax);
}

TEST(SpentEpsilonTest, IsNonIncreasingInDelta) {
  Spend spend;
  spend.Add(GaussianCost(1.0, 3.0));
  int64_t previous = kMax;
  for (double delta : {1e-12, 1e-9, 1e-6, 1e-3}) {
    const int64_t spent = SpentEpsilonMicro(spend, delta);
    EXPECT_LT(spent, previous) << "delta " << delta;
    previous = spent;
  }
}

// The conversion keeps each order's terms for the last delta a thread used, and each thread's
// recent pure curves: whatever came before on a thread, a value is the one a fresh thread
// computes, and the direct conversion of the curve.
TEST(SpentEpsilonTest, IsTheSameWhateverTheThreadComputedBefore) {
  Spend spend;
  spend.Add(GaussianCost(1.0, 3.0));
  spend.Add(PureDpCost(250'000));
  const double deltas[] = {1e-6, 1e-9, 1e-6, 0.25, 1e-9, 0, 1e-6};
  std::vector<int64_t> here;
  for (double delta : deltas) here.push_back(SpentEpsilonMicro(spend, delta));
  for (size_t i = 0; i < std::size(deltas); ++i) {
    int64_t fresh = -1;
    std::thread([&] { fresh = SpentEpsilonMicro(spend, deltas[i]); }).join();
    EXPECT_EQ(here[i], fresh) << "delta " << deltas[i];
    if (deltas[i] == 0) continue;
    std::vector<double> all(spend.rdp_all_nano.size());
    for (size_t k = 0; k < all.size(); ++k) all[k] = spend.rdp_all_nano[k] / 1e9;
    EXPECT_LE(here[i], static_cast<int64_t>(
                           std::ceil(RdpToEpsilon(RdpOrders(), all, deltas[i]) * 1e6)))
        << "delta " << deltas[i];
  }
  EXPECT_EQ(here[0], here[2]);
  EXPECT_LT(here[0], here[1]);  // a smaller delta costs more: the terms were not reused
}

TEST(PrivacyCostTest, PureCurvesAreTheSameWhateverTheThreadComputedBefore) {
  // More epsilons than a thread keeps, then the first again.
  std::vector<PrivacyCost> first;
  for (int64_t e = 1; e <= 200; ++e) first.push_back(PureDpCost(e * 1'000));
  for (int64_t e = 1; e <= 200; ++e) {
    const PrivacyCost again = PureDpCost(e * 1'000);
    PrivacyCost fresh;
    std::thread([&] { fresh = PureDpCost(e * 1'000); }).join();
    EXPECT_EQ(again.rdp_nano, first[e - 1].rdp_nano) << e;
    EXPECT_EQ(again.rdp_nano, fresh.rdp_nano) << e;
    EXPECT_EQ(again.pure_epsilon_micro, e * 1'000);
  }
  EXPECT_NE(first[0].rdp_nano, first[1].rdp_nano);
}

// ---------------------------------------------------------------------------------------
// Gaussian calibration

double GaussianEpsilonOnGrid(double sensitivity, double sigma, double delta) {
  return RdpToEpsilon(RdpOrders(), GaussianRdp(sensitivity, sigma, RdpOrders()), delta);
}

TEST(CalibrateGaussianSigmaTest, ReturnsSmallestSafeSigma) {
  struct Case {
    double epsilon, delta, sensitivity;
  };
  for (const Case& c :
       {Case{1.0, 1e-6, 1.0}, Case{0.1, 1e-6, 1.0}, Case{0.01, 1e-9, 1.0},
        Case{3.0, 1e-5, 1.4142135623730951}, Case{50.0, 1e-6, 2.0}, Case{0.5, 0.1, 1e-3}}) {
    absl::StatusOr<double> sigma = CalibrateGaussianSigma(c.epsilon, c.delta, c.sensitivity);
    ASSERT_OK(sigma);
    EXPECT_LE(GaussianEpsilonOnGrid(c.sensitivity, *sigma, c.delta), c.epsilon)
        << "epsilon " << c.epsilon;
    EXPECT_GT(GaussianEpsilonOnGrid(c.sensitivity, *sigma * (1 - 1e-6), c.delta), c.epsilon)
        << "epsilon " << c.epsilon;
  }
}

TEST(CalibrateGaussianSigmaTest, AgreesWithTheFineGridVector) {
  // On the fine grid sigma 4.530877117 gives epsilon 1 at delta 1e-6. The ledger's grid is coarser,
  // so it needs a sigma at least that large, and (the optimum near order 25 being on the integer
  // part of the grid) barely larger.
  absl::StatusOr<double> sigma = CalibrateGaussianSigma(1.0, 1e-6, 1.0);
  ASSERT_OK(sigma);
  EXPECT_GE(*sigma, 4.530877117 * (1 - 1e-9));
  EXPECT_LE(*sigma, 4.5309);
}

TEST(CalibrateGaussianSigmaTest, ScalesLinearlyWithSensitivity) {
  absl::StatusOr<double> one = CalibrateGaussianSigma(0.7, 1e-6, 1.0);
  absl::StatusOr<double> three = CalibrateGaussianSigma(0.7, 1e-6, 3.0);
  ASSERT_OK(one);
  ASSERT_OK(three);
  EXPECT_NEAR(*three / *one, 3.0, 3.0 * 3e-9);
}

TEST(CalibrateGaussianSigmaTest, RejectsBadInputs) {
  constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;
  EXPECT_THAT(CalibrateGaussianSigma(0, 1e-6, 1), StatusIs(kInvalid, "epsilon"));
  EXPECT_THAT(CalibrateGaussianSigma(-1, 1e-6, 1), StatusIs(kInvalid, "epsilon"));
  EXPECT_THAT(CalibrateGaussianSigma(kInf, 1e-6, 1), StatusIs(kInvalid, "epsilon"));
  EXPECT_THAT(CalibrateGaussianSigma(std::nan(""), 1e-6, 1), StatusIs(kInvalid, "epsilon"));
  EXPECT_THAT(CalibrateGaussianSigma(1, 0, 1), StatusIs(kInvalid, "delta"));
  EXPECT_THAT(CalibrateGaussianSigma(1, 1, 1), StatusIs(kInvalid, "delta"));
  EXPECT_THAT(CalibrateGaussianSigma(1, -1e-6, 1), StatusIs(kInvalid, "delta"));
  EXPECT_THAT(CalibrateGaussianSigma(1, std::nan(""), 1), StatusIs(kInvalid, "delta"));
  EXPECT_THAT(CalibrateGaussianSigma(1, 1e-6, 0), StatusIs(kInvalid, "sensitivity"));
  EXPECT_THAT(CalibrateGaussianSigma(1, 1e-6, -2), StatusIs(kInvalid, "sensitivity"));
  EXPECT_THAT(CalibrateGaussianSigma(1, 1e-6, kInf), StatusIs(kInvalid, "sensitivity"));
}

TEST(CalibrateGaussianSigmaTest, RejectsEpsilonBelowTheGridFloor) {
  // With no noise cost at all the conversion at delta 1e-6 is about 0.0011 on this grid.
  EXPECT_THAT(CalibrateGaussianSigma(1e-4, 1e-6, 1.0),
              StatusIs(absl::StatusCode::kInvalidArgument, "raise epsilon or delta"));
}

}  // namespace
}  // namespace fairvault::core::accounting
