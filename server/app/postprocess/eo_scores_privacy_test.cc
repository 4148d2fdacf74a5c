// Empirical privacy audit of FitEqualizedOddsScoresPostProcessor on neighbouring vault datasets
// (replace-one on a: "pop" and "pop-neighbour" hold the same subjects and the same company
// table, and differ only in subject 0's sex). Each dataset is fitted many times through the
// vault's charge path; an event on the released artifact that separates the two as much as the
// mechanism allows gives, with Clopper-Pearson bounds, a lower confidence bound on the ε the
// release actually has. It must stay below the declared ε, and (so that the audit has power)
// come reasonably close to it: a release with half the noise (L1 sensitivity taken as 1) would
// push the bound above the declared ε.
#include <cmath>
#include <iostream>
#include <string>
#include <vector>

#include "core/testing/clopper_pearson.h"
#include "server/app/vault_test_fixture.h"

namespace fairvault::server::testing {
namespace {

constexpr int kSubjects = 40;
constexpr int kBins = 4;
constexpr double kEpsilon = 2;
constexpr int kRuns = 2000;  // fits per dataset

using ::fairvault::testing::ClopperPearsonLower;
using ::fairvault::testing::ClopperPearsonUpper;

TEST(ClopperPearsonTest, BoundsBracketTheEstimate) {
  EXPECT_NEAR(ClopperPearsonLower(50, 100, 0.025), 0.398, 2e-3);  // the textbook 95% interval
  EXPECT_NEAR(ClopperPearsonUpper(50, 100, 0.025), 0.602, 2e-3);
}

class EoScoresPrivacyAudit : public VaultTest {
 protected:
  // Creates a dataset whose subjects p0..p39 have sex F for even i, M for odd i, except that
  // subject 0 is `first_sex`; grants acme on it and uploads the company's table.
  std::string MakeDataset(const std::string& name, const std::string& first_sex) {
    MakeNeighbourDataset(name, first_sex, kSubjects);

    v1::TableHeader table;
    table.set_dataset(name);
    for (const char* column : {"score", "label"}) {
      v1::ColumnSpec* c = table.add_columns();
      c->set_name(column);
      c->set_type(v1::COLUMN_TYPE_NUMERIC);
    }
    v1::TableChunk chunk;
    v1::ColumnValues* score = chunk.add_columns();
    v1::ColumnValues* label = chunk.add_columns();
    for (int i = 0; i < kSubjects; ++i) {
      chunk.add_subject_keys(absl::StrCat("p", i));
      const int y = i == 0 ? 1 : (i / 2) % 2;
      label->add_numeric(y);
      // Subject 0: label 1, top bin. Others spread over the bins.
      score->add_numeric(i == 0 ? 0.95 : 0.05 + 0.25 * (i % kBins));
    }
    auto uploaded = Upload(acme_, table, {chunk});
    EXPECT_OK(uploaded);
    return uploaded.ok() ? uploaded->table_handle() : "";
  }

  // The released difference noisy_counts_label1[F][top] − noisy_counts_label1[M][top] over
  // kRuns fits (fresh idempotency keys, so fresh noise each time).
  std::vector<int64_t> Statistics(const std::string& handle, const std::string& tag) {
    std::vector<int64_t> out;
    for (int run = 0; run < kRuns; ++run) {
      v1::FitEqualizedOddsScoresRequest req;
      req.set_idempotency_key(absl::StrCat(tag, "-", run));
      req.set_table_handle(handle);
      req.set_score_column("score");
      req.set_label_column("label");
      req.set_lo(0);
      req.set_hi(1);
      req.set_bins(kBins);
      req.set_epsilon(kEpsilon);
      req.set_gamma(0.05);
      req.set_decision_floor(0.1);
      auto resp = vault_->FitEqualizedOddsScores(acme_, req);
      EXPECT_OK(resp);
      if (!resp.ok()) return out;
      const auto& eo = resp->artifact().equalized_odds_scores();
      out.push_back(eo.groups(0).noisy_counts_label1(kBins - 1) -
                    eo.groups(1).noisy_counts_label1(kBins - 1));
    }
    return out;
  }
};

// Statistical: fixed seed (the fixture's mt19937_64); two events, each side bounded at
// alpha = 1e-3 / 4 (Bonferroni), so a correct mechanism fails the upper check with probability
// below 1e-3. The power check (bound >= 1) fails for a correct mechanism only if both events'
// frequencies fall more than ~4 standard deviations short (true log-ratio 1.475 at ε = 2).
TEST_F(EoScoresPrivacyAudit, EmpiricalEpsilonStaysBelowTheDeclaredEpsilon) {
  const std::string d = MakeDataset("pop", "F");
  const std::string d_prime = MakeDataset("pop-neighbour", "M");
  ASSERT_FALSE(d.empty());
  ASSERT_FALSE(d_prime.empty());
  const std::vector<int64_t> t = Statistics(d, "d");
  const std::vector<int64_t> t_prime = Statistics(d_prime, "dp");
  ASSERT_EQ(t.size(), kRuns);
  ASSERT_EQ(t_prime.size(), kRuns);

  // The exact difference on D (on D' it is 2 lower): subject 0 is the only label-1 row in the
  // top bin of F's side... computed from the table rather than assumed.
  int64_t exact = 0;
  for (int i = 0; i < kSubjects; ++i) {
    const int y = i == 0 ? 1 : (i / 2) % 2;
    const bool top = i == 0 || i % kBins == kBins - 1;
    if (y != 1 || !top) continue;
    exact += (i == 0 || i % 2 == 0) ? 1 : -1;
  }
  // Events fixed in advance: {T >= exact + 1} favours D, {T <= exact − 3} favours D'.
  auto count = [](const std::vector<int64_t>& v, auto pred) {
    int n = 0;
    for (int64_t x : v) n += pred(x) ? 1 : 0;
    return n;
  };
  const auto high = [&](int64_t x) { return x >= exact + 1; };
  const auto low = [&](int64_t x) { return x <= exact - 3; };
  const double alpha = 1e-3 / 4;
  const double eps_high = std::log(ClopperPearsonLower(count(t, high), kRuns, alpha) /
                                   ClopperPearsonUpper(count(t_prime, high), kRuns, alpha));
  const double eps_low = std::log(ClopperPearsonLower(count(t_prime, low), kRuns, alpha) /
                                  ClopperPearsonUpper(count(t, low), kRuns, alpha));
  const double eps_lower_bound = std::max(eps_high, eps_low);
  RecordProperty("empirical_epsilon_lower_bound", std::to_string(eps_lower_bound));
  std::cout << "empirical epsilon lower bound " << eps_lower_bound << " (events: " << eps_high
            << ", " << eps_low << ") vs declared " << kEpsilon << "\n";
  EXPECT_LE(eps_lower_bound, kEpsilon);
  EXPECT_GE(eps_lower_bound, 1.0);
  // Every fit was charged: kRuns releases of ε on each dataset.
  for (const char* name : {"pop", "pop-neighbour"}) {
    v1::GetBudgetRequest budget;
    budget.set_dataset(name);
    auto resp = vault_->GetBudget(acme_, budget);
    ASSERT_OK(resp);
    ASSERT_EQ(resp->budgets_size(), 1);
    EXPECT_EQ(resp->budgets(0).releases(), kRuns);
    EXPECT_NEAR(resp->budgets(0).epsilon_spent(), kRuns * kEpsilon, 1e-6);
  }
}

}  // namespace
}  // namespace fairvault::server::testing
