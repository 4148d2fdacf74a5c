// Empirical privacy audit of the DP-FERMI training job (FitFairModel,
// FAIR_MODEL_ALGORITHM_DP_FERMI) on neighbouring vault datasets: "pop" and "pop-neighbour" hold the
// same subjects and the same company table and differ only in subject 0's sex (replace-one on a).
// The released weights of many jobs on each give, for events fixed in advance, Clopper-Pearson
// lower bounds on the ε the job really has.
//
// Why the table looks the way it does. The artifact holds θ only; a enters θ through the
// a-dependent ψ gradient 2 p̂_a^{-1/2}(W[a][1] − W[a][0]) σ'(θ·x_i) x_i, i.e. through the dual
// variable W, which starts at 0 and is not released. So:
// - a column "g" = +G on the other F subjects (label 1) and −G on the M subjects (label 0)
//   saturates σ(θ·x) on both groups at the first step (loss only: W = 0); from then on each W
//   ascent step pushes W[F][1] − W[F][0] up and W[M][1] − W[M][0] down;
// - a column "probe", nonzero on subject 0 only, carries subject 0's a-dependent θ gradient in
//   a coordinate of its own: from the third step on it is clipped to +C_θ in one group and −C_θ
//   in the other, the full 2 C_θ the noise is calibrated to, always in the same direction;
// - full batches (no subsampling), a tiny lr_θ (σ'(θ·x_0) stays at 1/4, so the clip binds and
//   the probe's loss term is a constant shift) and λ = 40 (the signal dominates that shift).
// The released θ_probe is then, up to small W-noise effects, its noise-free value plus the sum
// of the steps' θ noises: a Gaussian shift between the neighbours of about (T − 2)/(z √T)
// standard deviations for T steps of multiplier z.
//
// What the audit can and cannot see. The charge composes two releases per step (the θ and W
// sums); the artifact shows θ only, and the first two steps carry no signal (W = 0, then a W
// difference that is pure noise). The observable shift is therefore at most (T − 2)/T/√2 of the
// composed one, and a Gaussian mechanism's (ε, δ = 1e-5) lives in tails that 2 × 800 jobs
// cannot reach (no event frequency here can certify more than ln(800/9) ≈ 4.5). Hence:
// - the plain check (bound <= declared ε) can only fail for a gross leak;
// - a sharper check per event: the charged multiplier z makes the steps μ-GDP with
//   μ = √(2T)/z (each release shifts by <= 1/z of its std; Gaussian composition; the discrete
//   Gaussian at ~2^16 grid steps per std has the continuous one's privacy profile up to
//   negligible terms), after the marginals' pure ε_m, so every event obeys
//   P[E|D] <= e^{ε_m} Φ(Φ^{-1}(P[E|D']) + μ) (the Gaussian trade-off curve is concave); checked
//   with the Clopper-Pearson bounds.
// Simulated on the previous DP-FERMI core code with other seeds (2 × 800 runs): the bound is
// 0.80-0.98 for the declared noise; with half the noise 1.9-2.3, which neither check refutes
// (the sharper one allows ≈ 3.5 on the tail events); with a quarter of it the sharper check
// fails about half the time, with a sixth of it or none always (the midpoint events).
// Statistical: the fixture's generator is seeded (job keys, hence all noise, are reproducible);
// the tolerances are stated per assertion.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <limits>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/testing/clopper_pearson.h"
#include "server/app/vault_test_fixture.h"

namespace fairvault::server::testing {
namespace {

using ::fairvault::testing::ClopperPearsonLower;
using ::fairvault::testing::ClopperPearsonUpper;
using ::fairvault::testing::Phi;
using ::fairvault::testing::PhiInverse;

constexpr int kSubjects = 100;
constexpr double kG = 1000;     // |g| on every subject but 0
constexpr double kProbe = 10;   // subject 0's probe value: 2 p̂^{-1/2}·0.5·(1/4)·10 > C_θ = 1
constexpr int kEpochs = 40;     // full batches: 40 steps
constexpr double kLambda = 40;  // fairness weight λ
constexpr double kLrTheta = 2e-5;
constexpr double kLrW = 0.0125;  // λ·lr_w = 0.5: W settles within a few steps, no overshoot
constexpr double kDelta = 1e-5;  // the grant's δ (DP-FERMI needs δ > 0)
constexpr int kProbeIndex = 1;   // feature columns {g, probe}, no intercept

// The released linear weights of a DP-FERMI artifact: the logistic regression's single layer
// (NeuralModel, outputs × inputs row-major: one output) or, in the older artifact form, the one
// linear component.
std::vector<double> ReleasedWeights(const v1::FairModel& model) {
  if (model.network().layers_size() > 0) {
    const auto& w = model.network().layers(0).weights();
    return {w.begin(), w.end()};
  }
  if (model.components_size() > 0) {
    const auto& w = model.components(0).weights();
    return {w.begin(), w.end()};
  }
  return {};
}

// One event E, favouring `favoured` (its frequency there bounded from below) against `other`.
struct EventResult {
  int favoured_hits = 0, other_hits = 0;
  double lower_bound = 0;    // log((CP_lower(E|favoured) − δ) / CP_upper(E|other))
  double gdp_allowance = 0;  // log of the largest ratio the declared noise allows at CP_upper
};

EventResult AuditEvent(int favoured_hits, int other_hits, int runs, double alpha, double mu,
                       double epsilon_marginals) {
  EventResult r;
  r.favoured_hits = favoured_hits;
  r.other_hits = other_hits;
  const double lower = ClopperPearsonLower(favoured_hits, runs, alpha);
  const double upper = ClopperPearsonUpper(other_hits, runs, alpha);
  r.lower_bound = std::log(std::max(lower - kDelta, 1e-300) / upper);
  r.gdp_allowance = epsilon_marginals + std::log(Phi(PhiInverse(upper) + mu) / upper);
  return r;
}

class FermiPrivacyAudit : public VaultTest {
 protected:
  void SetUp() override {
    VaultTest::SetUp();
    if (HasFatalFailure()) return;
    ASSERT_OK(vault_->StartJobs());
  }

  // The neighbour dataset (subject 0 is `first_sex`), a δ > 0 grant for acme on it, and acme's
  // table: g = +G (F, i > 0) / −G (M), probe = K on subject 0 only, label = 1 on F subjects
  // (subject 0 included), 0 on M subjects. Identical on both neighbours.
  std::string MakeDataset(const std::string& name, const std::string& first_sex) {
    MakeNeighbourDataset(name, first_sex, kSubjects, kDelta);
    v1::TableHeader table;
    table.set_dataset(name);
    for (const char* column : {"g", "probe", "label"}) {
      v1::ColumnSpec* c = table.add_columns();
      c->set_name(column);
      c->set_type(v1::COLUMN_TYPE_NUMERIC);
    }
    v1::TableChunk chunk;
    std::vector<v1::ColumnValues*> cols;
    for (int c = 0; c < 3; ++c) cols.push_back(chunk.add_columns());
    for (int i = 0; i < kSubjects; ++i) {
      chunk.add_subject_keys(absl::StrCat("p", i));
      cols[0]->add_numeric(i == 0 ? 0 : (i % 2 == 0 ? kG : -kG));
      cols[1]->add_numeric(i == 0 ? kProbe : 0);
      cols[2]->add_numeric(i % 2 == 0 ? 1 : 0);
    }
    auto uploaded = Upload(acme_, table, {chunk});
    EXPECT_OK(uploaded);
    return uploaded.ok() ? uploaded->table_handle() : "";
  }

  // Submits one DP-FERMI job at `epsilon`, waits for it and returns the released weights
  // (empty on failure); *submission gets the submission's response (job and charge).
  std::vector<double> RunJob(const std::string& handle, const std::string& key, double epsilon,
                             v1::FitFairModelResponse* submission = nullptr) {
    v1::FitFairModelRequest req;
    req.set_idempotency_key(key);
    req.set_table_handle(handle);
    req.set_algorithm(v1::FAIR_MODEL_ALGORITHM_DP_FERMI);
    req.add_feature_columns("g");
    req.add_feature_columns("probe");
    req.set_label_column("label");
    req.set_no_intercept(true);
    req.set_epsilon(epsilon);
    req.set_epochs(kEpochs);
    req.set_batch_size(kSubjects);
    req.set_lr_theta(kLrTheta);
    req.set_lr_w(kLrW);
    req.set_w_radius(1);
    req.set_clip_theta(1);
    req.set_clip_w(1);
    req.set_fairness_lambda(kLambda);
    auto model = FitAndWait(acme_, req, submission);
    EXPECT_OK(model);
    if (!model.ok()) return {};
    return ReleasedWeights(*model);
  }
};

// 2 x 800 jobs at ε = 8 (δ = 1e-5 grant; marginals 0.8; T = 40 full-batch steps). ε = 8 rather
// than 2-4: at ε = 4 the same design certifies only 0.1-0.33 (simulated), too close to 0 for a
// power check, while the plain check could fail there only for a release with next to no noise
// (at ε = 8 not at all: the bound cannot exceed ≈ 4.5; see the top). Four events on
// t = (θ_probe − θ_D)/(θ_D' − θ_D) (D centred near 0, D' near 1): the tails {t <= 1/2 − s}
// (favours D) and {t >= 1/2 + s} (favours D'), s the predicted std of t from the charged
// multiplier (the most informative cuts at the declared noise), and the halves {t <= 1/2},
// {t > 1/2} (so that a release with far less noise than declared cannot slip between the tails).
// Eight Clopper-Pearson bounds at alpha = 1e-3/8 each (Bonferroni): a correct mechanism fails a
// privacy check with probability below 1e-3. Power: the bound must reach 0.6 (≈ 8% of the
// steps' 7.2; simulated 0.80-0.98, sd ≈ 0.06: ~4 sd of margin): the audit would refute any claim
// of ε <= 0.6 for this release, and a job whose probe signal got lost would fail it.
TEST_F(FermiPrivacyAudit, DpFermiEmpiricalEpsilonStaysBelowTheDeclaredEpsilon) {
  constexpr int kRuns = 800;
  constexpr double kEpsilon = 8;
  constexpr double kAlpha = 1e-3 / 8;
  const std::string d = MakeDataset("pop", "F");
  const std::string d_prime = MakeDataset("pop-neighbour", "M");
  ASSERT_FALSE(d.empty());
  ASSERT_FALSE(d_prime.empty());

  // The noise-free weights: one job each at ε = 1e5 (a multiplier ~1/300 of the audited one:
  // repeated runs move θ_probe by < 1% of the gap between the neighbours; the marginals' discrete
  // Laplace scale is 2e-4). They fix the events' direction and scale.
  v1::FitFairModelResponse exact_submission;
  const std::vector<double> exact_d = RunJob(d, "exact-d", 1e5, &exact_submission);
  const std::vector<double> exact_dp = RunJob(d_prime, "exact-dp", 1e5);
  ASSERT_GT(exact_d.size(), kProbeIndex);
  ASSERT_GT(exact_dp.size(), kProbeIndex);
  const double theta_d = exact_d[kProbeIndex];
  const double theta_dp = exact_dp[kProbeIndex];
  std::cout << "noise-free theta_probe: D " << theta_d << ", D' " << theta_dp << " (multiplier "
            << exact_submission.charge().cost().parts(1).noise_scale() << ")\n";
  // Subject 0's group flips its clipped gradient between +C_θ and −C_θ on 38 of the 40 steps.
  ASSERT_GT(std::abs(theta_dp - theta_d), 10 * kLrTheta * kLambda / kSubjects);

  v1::FitFairModelResponse submission;
  auto statistics = [&](const std::string& handle, const std::string& tag) {
    std::vector<double> out;
    for (int run = 0; run < kRuns; ++run) {
      const std::vector<double> w =
          RunJob(handle, absl::StrCat(tag, "-", run), kEpsilon, &submission);
      if (w.size() <= kProbeIndex) return out;
      out.push_back((w[kProbeIndex] - theta_d) / (theta_dp - theta_d));
    }
    return out;
  };
  const auto start = std::chrono::steady_clock::now();
  const std::vector<double> t = statistics(d, "d");
  const std::vector<double> t_prime = statistics(d_prime, "dp");
  ASSERT_EQ(t.size(), kRuns);
  ASSERT_EQ(t_prime.size(), kRuns);
  std::cout << "jobs: " << 2 * kRuns << " in "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()
            << " s\n";

  // The declared noise, from the charge: parts {marginals, steps}; the steps' multiplier z.
  const v1::Cost& cost = submission.charge().cost();
  ASSERT_EQ(cost.parts_size(), 2);
  const double epsilon_marginals = cost.parts(0).epsilon();
  const double z = cost.parts(1).noise_scale();
  const int64_t steps = submission.job().total();
  ASSERT_EQ(steps, kEpochs);
  ASSERT_GT(z, 0);
  // Two Gaussian releases per step, each of L2 shift <= 1/z standard deviations.
  const double mu = std::sqrt(2.0 * static_cast<double>(steps)) / z;
  // Predicted std of t: the θ noise of T steps (std z·2C_θ each, scaled by lr_θ·λ/n) over the
  // noise-free gap.
  const double spread =
      kLrTheta * kLambda / kSubjects * 2 * z * std::sqrt(steps) / std::abs(theta_dp - theta_d);

  int low_d = 0, low_dp = 0, high_d = 0, high_dp = 0, half_d = 0, half_dp = 0;
  for (double x : t) {
    low_d += x <= 0.5 - spread;
    high_d += x >= 0.5 + spread;
    half_d += x <= 0.5;
  }
  for (double x : t_prime) {
    low_dp += x <= 0.5 - spread;
    high_dp += x >= 0.5 + spread;
    half_dp += x <= 0.5;
  }
  const std::vector<std::pair<std::string, EventResult>> events = {
      {"t <= 1/2 - s", AuditEvent(low_d, low_dp, kRuns, kAlpha, mu, epsilon_marginals)},
      {"t >= 1/2 + s", AuditEvent(high_dp, high_d, kRuns, kAlpha, mu, epsilon_marginals)},
      {"t <= 1/2", AuditEvent(half_d, half_dp, kRuns, kAlpha, mu, epsilon_marginals)},
      {"t > 1/2",
       AuditEvent(kRuns - half_dp, kRuns - half_d, kRuns, kAlpha, mu, epsilon_marginals)},
  };
  std::cout << "declared: epsilon " << kEpsilon << " (marginals " << epsilon_marginals
            << "), multiplier z " << z << " over " << steps << " steps, mu " << mu
            << "; s = " << spread << "\n";
  double bound = -std::numeric_limits<double>::infinity();
  for (const auto& [name, e] : events) {
    std::cout << "event " << name << ": " << e.favoured_hits << " vs " << e.other_hits
              << " -> lower bound " << e.lower_bound << " (allowed by the declared noise "
              << e.gdp_allowance << ")\n";
    EXPECT_LE(e.lower_bound, e.gdp_allowance) << name;
    bound = std::max(bound, e.lower_bound);
  }
  RecordProperty("empirical_epsilon_lower_bound", std::to_string(bound));
  std::cout << "DP-FERMI: empirical epsilon lower bound " << bound << " vs declared " << kEpsilon
            << "\n";
  EXPECT_LE(bound, kEpsilon);
  EXPECT_GE(bound, 0.6);
}

}  // namespace
}  // namespace fairvault::server::testing
