#include "server/app/models/reductions_job.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/accounting/subsampled_rdp.h"
#include "core/dp/integer_noise.h"
#include "core/learn/reductions.h"
#include "core/learn/selection.h"
#include "core/util/status_macros.h"
#include "core/util/validate.h"
#include "server/app/models/models_internal.h"

namespace fairvault::server {
namespace {

namespace accounting = core::accounting;
namespace learn = core::learn;

constexpr int kDefaultRounds = 100;
constexpr double kDefaultBound = 0.01;
constexpr double kDefaultLambdaBound = 100;
constexpr double kDefaultEta0 = 2;  // η = 2 / B, as Fairlearn
constexpr double kDefaultMassesShare = 0.05;
constexpr double kDefaultSumsShare = 0.45;
// The managed selection's defaults, and how its share of epsilon splits.
// (Measured in experiments/learners: with 20 candidates and 0.5 of a 0.2 share the mechanism's
// choice was nearly uniform on 30 % validation splits; fewer candidates and most of a larger
// share for the mechanism itself are what it needs.)
constexpr double kDefaultSelectionShare = 0.3;
constexpr double kDefaultSelectionPenalty = 2;
constexpr int kDefaultSelectionCandidates = 8;
constexpr double kSelectionCountsPart = 0.2;
constexpr double kSelectionMechanismPart = 0.7;
constexpr double kSelectionScorePart = 0.1;
// What a job may hold: the T best responses (T x d doubles) and the final LP's matrix
// ((constraints + 1) x T entries), checked before the charge.
constexpr double kMaxRoundWeights = 50'000'000;
constexpr double kMaxMixtureEntries = 20'000'000;

learn::ReductionOptions OptionsOf(const v1::FitFairModelRequest& req) {
  learn::ReductionOptions options;
  options.constraint = req.fairness() == v1::FAIRNESS_NOTION_DEMOGRAPHIC_PARITY
                           ? learn::ReductionConstraint::kDemographicParity
                           : learn::ReductionConstraint::kEqualizedOdds;
  options.rounds = req.rounds();
  options.bound = req.gamma();
  options.lambda_bound = req.lambda_bound();
  options.learning_rate = req.learning_rate();
  options.mass_floor = req.mass_floor();
  options.mixture = req.mixture() == v1::FINAL_MIXTURE_AVERAGE ? learn::FinalMixture::kAverage
                                                               : learn::FinalMixture::kLinearProgram;
  if (req.mixture() == v1::FINAL_MIXTURE_CANDIDATES) {
    options.mixture = learn::FinalMixture::kCandidates;
  }
  // The selection's candidates come after the rounds; the rounds' own mixture is not used.
  if (req.mixture() == v1::FINAL_MIXTURE_SELECTED) options.mixture = learn::FinalMixture::kAverage;
  return options;
}

}  // namespace

learn::SelectionOptions SelectionOptionsOf(const v1::FitFairModelRequest& req) {
  learn::SelectionOptions options;
  options.constraint = req.fairness() == v1::FAIRNESS_NOTION_DEMOGRAPHIC_PARITY
                           ? learn::ReductionConstraint::kDemographicParity
                           : learn::ReductionConstraint::kEqualizedOdds;
  options.target = req.selection_target();
  options.penalty = req.selection_penalty();
  options.candidates = req.selection_candidates();
  return options;
}

absl::Status FillReductionDefaults(int max_rounds, v1::FitFairModelRequest* req) {
  if (req->fairness() == v1::FAIRNESS_NOTION_UNSPECIFIED) {
    req->set_fairness(v1::FAIRNESS_NOTION_EQUALIZED_ODDS);
  }
  if (req->fairness() != v1::FAIRNESS_NOTION_EQUALIZED_ODDS &&
      req->fairness() != v1::FAIRNESS_NOTION_DEMOGRAPHIC_PARITY) {
    return absl::InvalidArgumentError(
        "fairness: exponentiated gradient takes FAIRNESS_NOTION_EQUALIZED_ODDS (2) or "
        "FAIRNESS_NOTION_DEMOGRAPHIC_PARITY (1)");
  }
  if (!v1::FinalMixture_IsValid(req->mixture())) {
    return absl::InvalidArgumentError(
        "mixture: use FINAL_MIXTURE_LINEAR_PROGRAM (1), FINAL_MIXTURE_AVERAGE (2), "
        "FINAL_MIXTURE_CANDIDATES (3) or FINAL_MIXTURE_SELECTED (4)");
  }
  const bool validation = !req->validation_table_handle().empty();
  if (req->mixture() == v1::FINAL_MIXTURE_UNSPECIFIED) {
    req->set_mixture(validation ? v1::FINAL_MIXTURE_SELECTED : v1::FINAL_MIXTURE_CANDIDATES);
  }
  if ((req->mixture() == v1::FINAL_MIXTURE_SELECTED) != validation) {
    return absl::InvalidArgumentError(
        validation ? "validation_table_handle: only the managed selection reads validation rows; "
                     "leave mixture unset or use FINAL_MIXTURE_SELECTED (4)"
                   : "validation_table_handle: FINAL_MIXTURE_SELECTED chooses among candidates "
                     "on your validation rows; upload them and pass the table's handle");
  }
  if (validation) {
    if (req->selection_share() == 0) req->set_selection_share(kDefaultSelectionShare);
    if (req->selection_penalty() == 0) req->set_selection_penalty(kDefaultSelectionPenalty);
    if (req->selection_candidates() == 0) {
      req->set_selection_candidates(kDefaultSelectionCandidates);
    }
    RETURN_IF_ERROR(core::ValidateInOpenRange(req->selection_share(), 0, 1, "selection_share"));
    RETURN_IF_ERROR(SelectionOptionsOf(*req).Validate());
  } else if (req->selection_share() != 0 || req->selection_penalty() != 0 ||
             req->selection_target() != 0 || req->selection_candidates() != 0) {
    return absl::InvalidArgumentError(
        "selection_*: the selection's parameters need validation_table_handle (the managed "
        "selection); drop them or pass the validation table");
  }
  if (req->rounds() == 0) req->set_rounds(kDefaultRounds);
  if (req->rounds() < 1 || req->rounds() > max_rounds) {
    return absl::InvalidArgumentError(absl::StrCat("rounds must be in 1..", max_rounds,
                                                   " (0 means ", kDefaultRounds, ")"));
  }
  if (req->gamma() == 0) req->set_gamma(kDefaultBound);
  if (req->lambda_bound() == 0) req->set_lambda_bound(kDefaultLambdaBound);
  RETURN_IF_ERROR(core::ValidateIsFiniteAndPositive(req->lambda_bound(), "lambda_bound"));
  if (req->learning_rate() == 0) req->set_learning_rate(kDefaultEta0 / req->lambda_bound());
  if (req->masses_share() == 0) req->set_masses_share(kDefaultMassesShare);
  if (req->sums_share() == 0) req->set_sums_share(kDefaultSumsShare);
  if (req->mass_floor() == 0) req->set_mass_floor(1);
  RETURN_IF_ERROR(core::ValidateInOpenRange(req->masses_share(), 0, 1, "masses_share"));
  RETURN_IF_ERROR(core::ValidateInOpenRange(req->sums_share(), 0, 1, "sums_share"));
  if (!(req->masses_share() + req->sums_share() + req->selection_share() < 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "masses_share + sums_share", validation ? " + selection_share" : "",
        " must be below 1 (got ", req->masses_share() + req->sums_share() + req->selection_share(),
        "): the rest of epsilon pays for the rounds"));
  }
  RETURN_IF_ERROR(core::ValidateIsFiniteAndNonNegative(req->clip_l1(), "clip_l1"));
  return OptionsOf(*req).Validate();
}

absl::StatusOr<ReductionCharge> PlanReductionsJob(const v1::FitFairModelRequest& req, int64_t n,
                                                  int d, int k, double delta,
                                                  int64_t total_micro) {
  (void)n;
  const int64_t constraints = learn::ReductionConstraintCount(
      req.fairness() == v1::FAIRNESS_NOTION_DEMOGRAPHIC_PARITY
          ? learn::ReductionConstraint::kDemographicParity
          : learn::ReductionConstraint::kEqualizedOdds,
      k);
  // T responses (or 8 candidates) and the constant classifier.
  const double held = static_cast<double>(req.rounds()) + 1;
  if (held * d > kMaxRoundWeights || held * (constraints + 1) > kMaxMixtureEntries) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rounds: ", req.rounds(), " rounds of ", d, " weights and ", constraints,
        " constraints exceed what a job holds (rounds x features <= ", kMaxRoundWeights,
        ", rounds x (constraints + 1) <= ", kMaxMixtureEntries, "); use fewer rounds"));
  }
  const double epsilon = accounting::MicroToEpsilon(total_micro);
  const double eps_masses = req.masses_share() * epsilon;
  const double eps_sums = req.sums_share() * epsilon;
  const int64_t rounds = req.rounds();
  const double l1 = learn::CellReleaseL1Factor(k);
  const double l2 = learn::CellReleaseL2Factor(k);
  // The samplers must take every scale, whatever the features' steps turn out to be.
  if (!core::dp::MakeDiscreteLaplaceNoise(l1 / eps_masses).ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "masses_share: the counts' epsilon ", eps_masses, " is too small for the sampler"));
  }
  if (!core::dp::MakeDiscreteLaplaceNoise(l1 * learn::MaxRowStepsBound(d) / eps_sums).ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sums_share: the feature sums' epsilon ", eps_sums, " is too small for the sampler"));
  }
  // With candidates: their M releases after the T rounds.
  const bool with_candidates = req.mixture() == v1::FINAL_MIXTURE_CANDIDATES;
  const int64_t candidates = with_candidates ? learn::CandidateCount() : 0;
  ReductionCharge charge;
  charge.plan.set_groups(k);
  charge.plan.set_epsilon_masses(eps_masses);
  charge.plan.set_epsilon_sums(eps_sums);
  // The managed selection's three pure releases.
  const bool selected = req.mixture() == v1::FINAL_MIXTURE_SELECTED;
  const double eps_selection = selected ? req.selection_share() * epsilon : 0;
  const double eps_vcounts = kSelectionCountsPart * eps_selection;
  const double eps_em = kSelectionMechanismPart * eps_selection;
  const double eps_score = kSelectionScorePart * eps_selection;
  if (selected) {
    if (!core::dp::MakeDiscreteLaplaceNoise(l1 / eps_vcounts).ok() ||
        !core::dp::MakeDiscreteLaplaceNoise(l1 / eps_score).ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "selection_share: the selection's epsilon ", eps_selection,
          " is too small for the sampler; raise it or epsilon"));
    }
    // SampleExponentialMechanism's β = ε/(2(Δ/g + 1)) with Δ/g in (2^19, 2^20], as a
    // rational over 2^40, must be in [2^-40, 1] whatever M turns out to be.
    if (eps_em < 2 * (std::ldexp(1.0, 20) + 1) / std::ldexp(1.0, 40) ||
        eps_em > 2 * (std::ldexp(1.0, 19) + 1)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "selection_share: the exponential mechanism's epsilon ", eps_em,
          " is outside what its exact sampler represents; change selection_share or epsilon"));
    }
    charge.plan.set_epsilon_min(eps_vcounts);
    charge.plan.set_epsilon_select(eps_em);
    charge.plan.set_epsilon_score(eps_score);
  }

  // Pure rounds: the largest per-round epsilon that fits (basic or RDP composition).
  std::vector<accounting::PureDpRepetition> fixed = {{eps_masses, 1}, {eps_sums, 1}};
  if (selected) {
    fixed.push_back({eps_vcounts, 1});
    fixed.push_back({eps_em, 1});
    fixed.push_back({eps_score, 1});
  }
  auto per_round =
      accounting::CalibrateRepeatedPureDp(total_micro, delta, fixed, rounds + candidates);
  if (!per_round.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "masses_share + sums_share (", req.masses_share() + req.sums_share(),
        ") leave too little of epsilon ", epsilon, " for ", rounds,
        " rounds; lower the shares or the rounds, or raise epsilon"));
  }
  const double laplace_scale = l1 / *per_round;
  // Gaussian rounds (delta > 0): one multiplier z from the accountant. Without candidates every
  // round's std is z·L2; with them the rounds and the candidates each take half of the Gaussian
  // RDP: the T rounds' std is z·L2·√T and the M candidates' z·L2·√M (each half composes to the
  // RDP of one Gaussian of std z over sensitivity 1).
  const std::vector<double>& orders = accounting::RdpOrders();
  std::vector<double> fixed_curve = accounting::PureDpRdp(eps_masses, orders);
  for (size_t f = 1; f < fixed.size(); ++f) {
    const std::vector<double> curve = accounting::PureDpRdp(fixed[f].epsilon, orders);
    for (size_t i = 0; i < orders.size(); ++i) fixed_curve[i] += curve[i];
  }
  const double round_factor = with_candidates ? std::sqrt(static_cast<double>(rounds)) : 1.0;
  const double candidate_factor = std::sqrt(static_cast<double>(candidates));
  const auto rounds_curve = [&](double z) {
    return accounting::ComposeRdp(accounting::GaussianRdp(1.0, z * round_factor, orders),
                                  rounds);
  };
  const auto candidates_curve = [&](double z) {
    return with_candidates ? accounting::ComposeRdp(
                                 accounting::GaussianRdp(1.0, z * candidate_factor, orders),
                                 candidates)
                           : std::vector<double>(orders.size(), 0.0);
  };
  const auto total_curve = [&](double z) {
    std::vector<double> curve = rounds_curve(z);
    const std::vector<double> last = candidates_curve(z);
    for (size_t i = 0; i < curve.size(); ++i) curve[i] += fixed_curve[i] + last[i];
    return curve;
  };
  double z = 0;
  if (delta > 0) {
    auto calibrated = accounting::CalibrateMultiplier(total_curve, epsilon, delta, 1.0);
    if (calibrated.ok()) z = *calibrated;
  }
  // Gaussian where it is tighter (the smaller standard deviation of one round's noise) and the
  // sampler takes it; else the discrete Laplace, whose sampler goes further.
  charge.gaussian = z > 0 && z * l2 * round_factor < std::sqrt(2.0) * laplace_scale &&
                    core::dp::MakeDiscreteGaussianNoise(z * l2 * round_factor).ok() &&
                    (!with_candidates ||
                     core::dp::MakeDiscreteGaussianNoise(z * l2 * candidate_factor).ok());
  v1::Cost& description = charge.description;
  description.set_epsilon(epsilon);
  description.set_mechanism(charge.gaussian ? "discrete_gaussian" : "discrete_laplace");
  const auto add_part = [&](const std::string& name, const char* mechanism, double part_epsilon,
                            double part_delta, double scale, double sensitivity) {
    v1::Cost* part = description.add_parts();
    part->set_name(name);
    part->set_epsilon(part_epsilon);
    part->set_delta(part_delta);
    part->set_mechanism(mechanism);
    part->set_noise_scale(scale);
    part->set_sensitivity(sensitivity);
  };
  add_part("masses (group-label counts)", "discrete_laplace", eps_masses, 0, l1 / eps_masses, l1);
  // In units of the largest preprocessed row's L1 norm (the company's, public): the noise on
  // each released sum is this scale times that norm.
  add_part("feature_sums (per cell, in units of the largest row's L1 norm)", "discrete_laplace",
           eps_sums, 0, l1 / eps_sums, l1);
  if (selected) {
    add_part("selection: validation counts", "discrete_laplace", eps_vcounts, 0, l1 / eps_vcounts,
             l1);
    // Its sensitivity, 2·penalty/M, depends on the released M: described per unit.
    add_part("selection: exponential mechanism (sensitivity 2 x penalty / M)",
             "exponential_mechanism", eps_em, 0, 0, 0);
    add_part("selection: the chosen model's positives", "discrete_laplace", eps_score, 0,
             l1 / eps_score, l1);
  }
  if (charge.gaussian) {
    const double sigma = z * l2 * round_factor;
    charge.plan.set_round_gaussian(true);
    charge.plan.set_round_noise(sigma);
    charge.cost = accounting::RdpCurveCost(total_curve(z));
    description.set_delta(delta);
    add_part(absl::StrCat("positives (", rounds, " x)"), "discrete_gaussian",
             accounting::RdpToEpsilon(orders, rounds_curve(z), delta), delta, sigma, l2);
    if (with_candidates) {
      charge.plan.set_candidate_noise(z * l2 * candidate_factor);
      add_part(absl::StrCat("candidates' positives (", candidates, " x)"), "discrete_gaussian",
               accounting::RdpToEpsilon(orders, candidates_curve(z), delta), delta,
               z * l2 * candidate_factor, l2);
    }
  } else {
    if (!core::dp::MakeDiscreteLaplaceNoise(laplace_scale).ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rounds: ", rounds, " rounds at epsilon ", epsilon,
          " leave too little per round for the sampler; use fewer rounds or more epsilon"));
    }
    charge.plan.set_round_gaussian(false);
    charge.plan.set_round_noise(laplace_scale);
    charge.plan.set_candidate_noise(with_candidates ? laplace_scale : 0);
    std::vector<accounting::PureDpRepetition> all = fixed;
    all.push_back({*per_round, rounds + candidates});
    charge.cost = accounting::ComposedPureDpCost(all);
    accounting::Spend alone;
    alone.Add(charge.cost);
    description.set_delta(
        delta > 0 && accounting::SpentEpsilonMicro(alone, delta) < alone.pure_micro ? delta : 0);
    add_part(absl::StrCat("positives (", rounds, " x)"), "discrete_laplace", *per_round, 0,
             laplace_scale, l1);
    if (with_candidates) {
      add_part(absl::StrCat("candidates' positives (", candidates, " x)"), "discrete_laplace",
               *per_round, 0, laplace_scale, l1);
    }
  }
  return charge;
}

absl::Status RunReductionsJob(const learn::GameData& data, const v1::FitFairModelRequest& req,
                              const storage::JobPlan& plan,
                              const learn::ValidationRows* validation, absl::BitGenRef gen,
                              const std::function<bool(int64_t, int64_t)>& progress,
                              v1::FairModel* model) {
  const bool selected = req.mixture() == v1::FINAL_MIXTURE_SELECTED;
  if (selected != (validation != nullptr)) {
    return absl::InternalError("the managed selection needs its validation rows");
  }
  if (plan.groups() != data.k) {
    return absl::InternalError(absl::StrCat("the job's noise was planned for ", plan.groups(),
                                            " groups, not ", data.k));
  }
  const double l1 = learn::CellReleaseL1Factor(data.k);
  ASSIGN_OR_RETURN(auto counts, core::dp::MakeDiscreteLaplaceNoise(l1 / plan.epsilon_masses()));
  ASSIGN_OR_RETURN(auto sums, core::dp::MakeDiscreteLaplaceNoise(
                                  l1 * static_cast<double>(data.max_row_steps) /
                                  plan.epsilon_sums()));
  const auto make = [&](double scale) {
    return plan.round_gaussian() ? core::dp::MakeDiscreteGaussianNoise(scale)
                                 : core::dp::MakeDiscreteLaplaceNoise(scale);
  };
  ASSIGN_OR_RETURN(std::unique_ptr<core::dp::IntegerNoise> positives, make(plan.round_noise()));
  std::unique_ptr<core::dp::IntegerNoise> candidates;
  if (req.mixture() == v1::FINAL_MIXTURE_CANDIDATES) {
    ASSIGN_OR_RETURN(candidates, make(plan.candidate_noise()));
  }
  learn::ReductionOptions options = OptionsOf(req);
  options.intercept_column = req.no_intercept() ? -1 : data.d - 1;
  ASSIGN_OR_RETURN(learn::ReductionResult result,
                   learn::RunReductionsLearner(
                       data, options,
                       {counts.get(), sums.get(), positives.get(), candidates.get()}, gen,
                       progress));
  model->set_algorithm("exponentiated_gradient");
  model->set_fairness(req.fairness());
  model->set_rounds(req.rounds());
  *model->mutable_lambda_average() = {result.lambda_average.begin(), result.lambda_average.end()};
  if (selected) {
    ASSIGN_OR_RETURN(auto validation_counts, core::dp::MakeDiscreteLaplaceNoise(
                                                 l1 / plan.epsilon_min()));
    ASSIGN_OR_RETURN(auto score, core::dp::MakeDiscreteLaplaceNoise(l1 / plan.epsilon_score()));
    learn::SelectionOptions selection = SelectionOptionsOf(req);
    selection.intercept_column = req.no_intercept() ? -1 : data.d - 1;
    ASSIGN_OR_RETURN(
        const learn::SelectionResult chosen,
        learn::RunSelection(data, result.cells, result.lambda_average, *validation, selection,
                            {validation_counts.get(), score.get(), plan.epsilon_select()}, gen));
    if (progress) progress(req.rounds() + 1, req.rounds() + 1);
    models_internal::AddComponent(chosen.weights[chosen.chosen], model);
    model->add_component_weights(1);
    v1::ModelSelection* out = model->mutable_selection();
    *out->mutable_scales() = {chosen.scales.begin(), chosen.scales.end()};
    *out->mutable_validation_errors() = {chosen.errors.begin(), chosen.errors.end()};
    *out->mutable_validation_positive_rates() = {chosen.positive_rates.begin(),
                                                 chosen.positive_rates.end()};
    out->set_chosen(chosen.chosen);
    *out->mutable_eligible() = {chosen.eligible.begin(), chosen.eligible.end()};
    out->set_target(selection.target);
    out->set_penalty(selection.penalty);
    out->set_floor(chosen.floor);
    out->set_utility_sensitivity(chosen.sensitivity);
    out->set_noisy_gap(chosen.noisy_gap);
    out->set_validation_rows(static_cast<int64_t>(validation->y.size()));
    *out->mutable_noisy_validation_counts() = {chosen.noisy_counts.begin(),
                                               chosen.noisy_counts.end()};
    model->add_notes(absl::StrCat(
        "exponentiated gradient, ",
        req.fairness() == v1::FAIRNESS_NOTION_DEMOGRAPHIC_PARITY ? "demographic parity"
                                                                 : "equalized odds",
        ": ", req.rounds(), " rounds, then the managed selection chose candidate ", chosen.chosen,
        " (", chosen.scales[chosen.chosen], " x the average lambda) of ", chosen.scales.size(),
        " on ", validation->y.size(), " validation rows by error + ", selection.penalty,
        " x max(0, gap - ", selection.target, "): validation error ",
        chosen.errors[chosen.chosen], " (public), gap ", chosen.noisy_gap,
        " (noisy; rates floored at M = ", chosen.floor, ")"));
    return absl::OkStatus();
  }
  for (size_t c = 0; c < result.components.size(); ++c) {
    models_internal::AddComponent(result.components[c], model);
    model->add_component_weights(result.weights[c]);
  }
  *model->mutable_noisy_violations() = {result.violations.begin(), result.violations.end()};
  double largest = 0;
  for (double v : result.violations) largest = std::max(largest, v + req.gamma());
  int support = 0;
  for (double w : result.weights) support += w > 0;
  model->add_notes(absl::StrCat(
      "exponentiated gradient, ",
      req.fairness() == v1::FAIRNESS_NOTION_DEMOGRAPHIC_PARITY ? "demographic parity"
                                                               : "equalized odds",
      " within ", req.gamma(), ": ", req.rounds(), " rounds, ", result.distinct_responses,
      " distinct best responses; the ",
      req.mixture() == v1::FINAL_MIXTURE_AVERAGE
          ? "average"
          : (req.mixture() == v1::FINAL_MIXTURE_CANDIDATES ? "linear program's mixture of the "
                                                             "candidates"
                                                           : "linear program's mixture"),
      " of ", support, " has training error ", result.training_error,
      " and largest released moment ", largest, " (noisy; the bound is ", req.gamma(), ")"));
  return absl::OkStatus();
}

}  // namespace fairvault::server
