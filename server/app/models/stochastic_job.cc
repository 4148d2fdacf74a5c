#include "server/app/models/stochastic_job.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/accounting/subsampled_rdp.h"
#include "core/dp/integer_noise.h"
#include "core/util/status_macros.h"
#include "core/util/validate.h"

namespace fairvault::server {
namespace {

namespace accounting = core::accounting;
namespace learn = core::learn;

constexpr double kDefaultMarginalsShare = 0.1;
constexpr int kDefaultHiddenUnits = 32;
constexpr int kDefaultEpochs = 300;
// Larger than any table a job takes (max_job_cells): every step reads all the rows.
constexpr int kFullBatch = 1 << 30;

bool IsPfld(const v1::FitFairModelRequest& req) {
  return req.algorithm() == v1::FAIR_MODEL_ALGORITHM_PF_LD;
}

learn::Fairness FairnessOf(const v1::FitFairModelRequest& req) {
  switch (req.fairness()) {
    case v1::FAIRNESS_NOTION_EQUALIZED_ODDS:
      return learn::Fairness::kEqualizedOdds;
    case v1::FAIRNESS_NOTION_ACCURACY_PARITY:
      return learn::Fairness::kAccuracyParity;
    default:
      return learn::Fairness::kDemographicParity;
  }
}

learn::FermiOptions FermiOptionsOf(const v1::FitFairModelRequest& req) {
  learn::FermiOptions options;
  options.epochs = req.epochs();
  options.batch_size = req.batch_size();
  options.lr_theta = req.lr_theta();
  options.lr_w = req.lr_w();
  options.w_radius = req.w_radius();
  options.clip_theta = req.clip_theta();
  options.clip_w = req.clip_w();
  options.lambda = req.fairness_lambda();
  options.fairness = FairnessOf(req);
  return options;
}

learn::PfldOptions PfldOptionsOf(const v1::FitFairModelRequest& req) {
  learn::PfldOptions options;
  options.epochs = req.epochs();
  options.batch_size = req.batch_size();
  options.lr_theta = req.lr_theta();
  options.clip = req.clip_theta();
  options.dual_lr = req.dual_lr();
  options.target = req.gamma();
  options.fairness = FairnessOf(req);
  return options;
}

const char* NotionName(v1::FairnessNotion notion) {
  switch (notion) {
    case v1::FAIRNESS_NOTION_EQUALIZED_ODDS:
      return "equalized odds";
    case v1::FAIRNESS_NOTION_ACCURACY_PARITY:
      return "accuracy parity";
    default:
      return "demographic parity";
  }
}

const char* ModelName(v1::ModelFamily model) {
  switch (model) {
    case v1::MODEL_FAMILY_SOFTMAX_REGRESSION:
      return "softmax regression";
    case v1::MODEL_FAMILY_MLP:
      return "MLP";
    default:
      return "logistic regression";
  }
}

}  // namespace

bool IsStochasticAlgorithm(v1::FairModelAlgorithm algorithm) {
  return algorithm == v1::FAIR_MODEL_ALGORITHM_DP_FERMI ||
         algorithm == v1::FAIR_MODEL_ALGORITHM_PF_LD;
}

absl::Status FillStochasticDefaults(v1::FitFairModelRequest* req) {
  const bool pfld = IsPfld(*req);
  if (!v1::ModelFamily_IsValid(req->model())) {
    return absl::InvalidArgumentError(
        "model: use MODEL_FAMILY_LOGISTIC_REGRESSION (1), MODEL_FAMILY_SOFTMAX_REGRESSION (2) or "
        "MODEL_FAMILY_MLP (3)");
  }
  if (!v1::FairnessNotion_IsValid(req->fairness())) {
    return absl::InvalidArgumentError(
        "fairness: use FAIRNESS_NOTION_DEMOGRAPHIC_PARITY (1), FAIRNESS_NOTION_EQUALIZED_ODDS (2) "
        "or, for PF-LD, FAIRNESS_NOTION_ACCURACY_PARITY (3)");
  }
  if (req->model() == v1::MODEL_FAMILY_UNSPECIFIED) {
    req->set_model(v1::MODEL_FAMILY_LOGISTIC_REGRESSION);
  }
  if (req->fairness() == v1::FAIRNESS_NOTION_UNSPECIFIED) {
    req->set_fairness(v1::FAIRNESS_NOTION_DEMOGRAPHIC_PARITY);
  }
  if (req->model() == v1::MODEL_FAMILY_MLP) {
    if (req->hidden_units().empty()) req->add_hidden_units(kDefaultHiddenUnits);
  } else if (!req->hidden_units().empty()) {
    return absl::InvalidArgumentError(
        "hidden_units: only an MLP (model = MODEL_FAMILY_MLP) has hidden layers");
  }
  // The defaults (issue 22 §4) are the configuration experiments/tradeoff found on Adult's
  // validation rows: full batches (the accountant gives no subsampling amplification at small ε
  // with batches of 1,024, so each step might as well read every row), 300 epochs, η_θ = 1 on the
  // batch-mean gradient, PF-LD's C_p = 5, DP-FERMI's η_w = 0.1 and W radius 5. The papers'
  // schedules (batch 1,024, η_θ = 0.005, C_p = 10) were the worst there (0.24-0.33 error).
  if (req->epochs() == 0) req->set_epochs(kDefaultEpochs);
  if (req->batch_size() == 0) req->set_batch_size(kFullBatch);
  if (req->lr_theta() == 0) req->set_lr_theta(1);
  if (req->clip_theta() == 0) req->set_clip_theta(pfld ? 5 : 1);
  if (req->marginals_share() == 0) req->set_marginals_share(kDefaultMarginalsShare);
  if (pfld) {
    if (req->dual_lr() == 0) req->set_dual_lr(0.1);
  } else {
    if (req->lr_w() == 0) req->set_lr_w(0.1);
    if (req->w_radius() == 0) req->set_w_radius(5);
    if (req->clip_w() == 0) req->set_clip_w(1);
  }
  RETURN_IF_ERROR(core::ValidateInOpenRange(req->marginals_share(), 0, 1, "marginals_share"));
  RETURN_IF_ERROR(core::ValidateIsFiniteAndNonNegative(req->clip_l1(), "clip_l1"));
  RETURN_IF_ERROR(ShapeOf(*req, 1, 2).Validate());
  return pfld ? PfldOptionsOf(*req).Validate() : FermiOptionsOf(*req).Validate();
}

absl::Status ValidateStochasticStepScales(const v1::FitFairModelRequest& filled) {
  return IsPfld(filled) ? PfldOptionsOf(filled).ValidateStepScales()
                        : FermiOptionsOf(filled).ValidateStepScales();
}

int ClassesOf(const v1::FitFairModelRequest& req, int max_label) {
  if (req.model() == v1::MODEL_FAMILY_LOGISTIC_REGRESSION) return 2;
  return std::max(2, max_label + 1);
}

learn::NetworkShape ShapeOf(const v1::FitFairModelRequest& req, int inputs, int classes) {
  learn::NetworkShape shape;
  shape.inputs = inputs;
  shape.hidden.assign(req.hidden_units().begin(), req.hidden_units().end());
  shape.outputs = req.model() == v1::MODEL_FAMILY_SOFTMAX_REGRESSION ||
                          (req.model() == v1::MODEL_FAMILY_MLP && classes > 2)
                      ? classes
                      : 1;
  return shape;
}

absl::StatusOr<StochasticCharge> PlanStochasticJob(const v1::FitFairModelRequest& req, int64_t n,
                                                   int inputs, int classes, int k, double delta,
                                                   int64_t total_micro) {
  const bool pfld = IsPfld(req);
  const char* name = pfld ? "PF-LD" : "DP-FERMI";
  if (!(delta > 0)) {
    return absl::FailedPreconditionError(
        absl::StrCat(name,
                     " adds Gaussian noise and needs a grant with delta > 0; ask the regulator "
                     "for one"));
  }
  const learn::NetworkShape shape = ShapeOf(req, inputs, classes);
  StochasticCharge charge;
  charge.steps = learn::StochasticSteps(n, req.epochs(), req.batch_size());
  const int64_t batch = std::min<int64_t>(req.batch_size(), n);
  const double gamma = static_cast<double>(batch) / static_cast<double>(n);
  const double epsilon = accounting::MicroToEpsilon(total_micro);
  const double eps_marginals = req.marginals_share() * epsilon;
  const std::vector<double>& orders = accounting::RdpOrders();
  const std::vector<double> marginals = accounting::PureDpRdp(eps_marginals, orders);
  // DP-FERMI's step releases two vectors, each with std z × its sensitivity: together the RDP of
  // one Gaussian with sensitivity 1 and std z/√2. PF-LD's step releases one (std z), and each
  // epoch's dual step one more on all rows (no subsampling).
  const double step_sigma = pfld ? 1.0 : 1 / std::sqrt(2.0);
  const auto steps_curve = [&](double z) {
    return accounting::ComposeRdp(
        accounting::SubsampledGaussianRdp(1.0, z * step_sigma, gamma, orders), charge.steps);
  };
  const auto dual_curve = [&](double z) {
    return accounting::ComposeRdp(accounting::GaussianRdp(1.0, z, orders), req.epochs());
  };
  const auto total_curve = [&](double z) {
    std::vector<double> curve = steps_curve(z);
    const std::vector<double> dual = pfld ? dual_curve(z) : std::vector<double>(curve.size(), 0);
    for (size_t i = 0; i < curve.size(); ++i) curve[i] += dual[i] + marginals[i];
    return curve;
  };
  ASSIGN_OR_RETURN(const double z,
                   accounting::CalibrateMultiplier(total_curve, epsilon, delta, 1.0));
  charge.plan.set_epsilon_marginals(eps_marginals);
  charge.plan.set_noise_multiplier(z);
  charge.cost = accounting::RdpCurveCost(total_curve(z));
  // The sampler must take every std the job will draw (checked here, before the charge).
  if (pfld) {
    RETURN_IF_ERROR(learn::PlanPfld(shape, k, n, PfldOptionsOf(req), z).status());
  } else {
    RETURN_IF_ERROR(learn::PlanDpFermi(shape, k, n, FermiOptionsOf(req), z).status());
  }

  v1::Cost& d = charge.description;
  d.set_epsilon(epsilon);
  d.set_delta(delta);
  d.set_mechanism("discrete_gaussian");
  v1::Cost* m = d.add_parts();
  m->set_name("marginals");
  m->set_epsilon(eps_marginals);
  m->set_mechanism("discrete_laplace");
  m->set_noise_scale(2 / eps_marginals);
  m->set_sensitivity(2);
  // Each Gaussian part's own (epsilon, delta) alone; composed they spend at most `epsilon`.
  v1::Cost* s = d.add_parts();
  s->set_name(absl::StrCat("steps (", charge.steps, " x ", pfld ? 1 : 2, " releases, batches of ",
                           batch, " of ", n, " rows without replacement)"));
  s->set_epsilon(accounting::RdpToEpsilon(orders, steps_curve(z), delta));
  s->set_delta(delta);
  s->set_mechanism("discrete_gaussian");
  // The noise multiplier: each release's std over its L2 sensitivity (2 C + rounding).
  s->set_noise_scale(z);
  s->set_sensitivity(1);
  if (pfld) {
    v1::Cost* dual = d.add_parts();
    dual->set_name(absl::StrCat("dual steps (", req.epochs(), " x, all rows)"));
    dual->set_epsilon(accounting::RdpToEpsilon(orders, dual_curve(z), delta));
    dual->set_delta(delta);
    dual->set_mechanism("discrete_gaussian");
    dual->set_noise_scale(z);
    dual->set_sensitivity(1);
  }
  return charge;
}

absl::Status RunStochasticJob(const learn::StochasticData& data, const v1::FitFairModelRequest& req,
                              const storage::JobPlan& plan, absl::BitGenRef gen,
                              const learn::Progress& progress, v1::FairModel* model) {
  const bool pfld = IsPfld(req);
  const learn::Fairness fairness = FairnessOf(req);
  const int k = data.k;
  const int l = data.classes;
  const int64_t n = data.n();
  // 1. The marginals: the group counts (per label for equalized odds) with discrete Laplace
  // noise (L1 sensitivity 2), floored at one row: public constants from here on.
  ASSIGN_OR_RETURN(auto marginal_noise,
                   core::dp::MakeDiscreteLaplaceNoise(2 / plan.epsilon_marginals()));
  const int cells = learn::MarginalCells(fairness, k, l);
  std::vector<int64_t> counts(cells, 0);
  for (int64_t i = 0; i < n; ++i) {
    ++counts[learn::MarginalCell(fairness, k, data.y[i], data.group[i])];
  }
  std::vector<double> label_rows(l, 0);
  for (int y : data.y) label_rows[y] += 1;
  std::vector<double> released(cells), fractions(cells);
  for (int c = 0; c < cells; ++c) {
    released[c] =
        static_cast<double>(std::max<int64_t>(marginal_noise->AddNoise(counts[c], gen), 1));
    const double base = fairness == learn::Fairness::kEqualizedOdds
                            ? std::max(label_rows[c / k], 1.0)
                            : static_cast<double>(n);
    fractions[c] = released[c] / base;
  }
  // 2. The model and the training releases.
  learn::Network net(ShapeOf(req, static_cast<int>(data.x.cols()), l));
  net.Initialize(gen);
  const learn::NoiseFactory noise = [](double std_steps) {
    return core::dp::MakeDiscreteGaussianNoise(std_steps);
  };
  learn::StochasticTrace trace;
  if (pfld) {
    const learn::PfldOptions options = PfldOptionsOf(req);
    ASSIGN_OR_RETURN(const learn::PfldPlan noise_plan,
                     learn::PlanPfld(net.shape(), k, n, options, plan.noise_multiplier()));
    RETURN_IF_ERROR(
        learn::TrainPfld(data, released, options, noise_plan, noise, gen, progress, &net, &trace));
  } else {
    const learn::FermiOptions options = FermiOptionsOf(req);
    ASSIGN_OR_RETURN(const learn::FermiPlan noise_plan,
                     learn::PlanDpFermi(net.shape(), k, n, options, plan.noise_multiplier()));
    RETURN_IF_ERROR(learn::TrainDpFermi(data, fractions, options, noise_plan, noise, gen, progress,
                                        &net, &trace));
  }
  // 3. The artifact.
  model->set_algorithm(pfld ? "pf_ld" : "dp_fermi");
  model->set_fairness(req.fairness());
  v1::NeuralModel* network = model->mutable_network();
  for (int layer = 0; layer < net.shape().layers(); ++layer) {
    v1::DenseLayer* out = network->add_layers();
    out->set_inputs(net.shape().LayerInputs(layer));
    out->set_outputs(net.shape().LayerOutputs(layer));
    const auto weights = net.Weights(layer);
    for (Eigen::Index r = 0; r < weights.rows(); ++r) {
      for (Eigen::Index c = 0; c < weights.cols(); ++c) out->add_weights(weights(r, c));
    }
    const auto bias = net.Bias(layer);
    for (Eigen::Index r = 0; r < bias.size(); ++r) out->add_bias(bias(r));
  }
  for (int c = 0; c < l; ++c) network->add_classes(c);
  *model->mutable_released_marginals() = {fractions.begin(), fractions.end()};
  model->set_rounds(req.epochs());
  std::string note = absl::StrCat(
      pfld ? "PF-LD " : "DP-FERMI ", ModelName(req.model()), ", ", NotionName(req.fairness()),
      pfld ? "" : absl::StrCat(", lambda ", req.fairness_lambda()), ": ",
      learn::StochasticSteps(n, req.epochs(), req.batch_size()), " steps, noise multiplier ",
      plan.noise_multiplier());
  model->add_notes(note);
  if (pfld) {
    *model->mutable_noisy_violations() = {trace.violations.begin(), trace.violations.end()};
    model->add_notes(
        absl::StrCat("final multipliers (group-major): ", absl::StrJoin(trace.lambda, " ")));
  }
  return absl::OkStatus();
}

}  // namespace fairvault::server
