#include "server/app/fermi_job.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/accounting/subsampled_rdp.h"
#include "core/dp/integer_noise.h"
#include "core/util/status_macros.h"
#include "core/util/validate.h"

namespace fairvault::server {
namespace {

namespace accounting = core::accounting;
namespace learn = core::learn;

constexpr double kDefaultMarginalsShare = 0.1;

}  // namespace

absl::Status FillFermiDefaults(v1::FitFairModelRequest* req) {
  if (req->epochs() == 0) req->set_epochs(200);
  if (req->batch_size() == 0) req->set_batch_size(1024);
  if (req->lr_theta() == 0) req->set_lr_theta(0.005);
  if (req->lr_w() == 0) req->set_lr_w(0.01);
  if (req->w_radius() == 0) req->set_w_radius(1);
  if (req->clip_theta() == 0) req->set_clip_theta(1);
  if (req->clip_w() == 0) req->set_clip_w(1);
  if (req->marginals_share() == 0) req->set_marginals_share(kDefaultMarginalsShare);
  RETURN_IF_ERROR(core::ValidateInOpenRange(req->marginals_share(), 0, 1, "marginals_share"));
  RETURN_IF_ERROR(core::ValidateIsFiniteAndNonNegative(req->clip_l1(), "clip_l1"));
  return FermiOptionsOf(*req).Validate();
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
  return options;
}

absl::StatusOr<FermiCharge> PlanFermiJob(const v1::FitFairModelRequest& req, int64_t n,
                                         double delta, int64_t total_micro) {
  if (!(delta > 0)) {
    return absl::FailedPreconditionError(
        "DP-FERMI adds Gaussian noise and needs a grant with delta > 0; ask the regulator for "
        "one");
  }
  const learn::FermiOptions options = FermiOptionsOf(req);
  FermiCharge charge;
  charge.steps = learn::FermiSteps(n, options);
  const int64_t batch = std::min<int64_t>(options.batch_size, n);
  const double gamma = static_cast<double>(batch) / static_cast<double>(n);
  const double epsilon = accounting::MicroToEpsilon(total_micro);
  const double eps_marginals = req.marginals_share() * epsilon;
  // A step releases two vectors, each with Gaussian std z × its sensitivity: together the RDP
  // of one Gaussian with sensitivity 1 and std σ = z/√2. σ is calibrated on the steps' share;
  // adding the marginals' pure curve (<= eps_marginals at every order) keeps the conversion
  // within the total.
  ASSIGN_OR_RETURN(const double sigma,
                   accounting::CalibrateSubsampledGaussianSigma(epsilon - eps_marginals, delta, 1.0,
                                                                gamma, charge.steps));
  charge.plan.set_epsilon_marginals(eps_marginals);
  charge.plan.set_noise_multiplier(std::sqrt(2.0) * sigma);
  const std::vector<double>& orders = accounting::RdpOrders();
  std::vector<double> curve = accounting::ComposeRdp(
      accounting::SubsampledGaussianRdp(1.0, sigma, gamma, orders), charge.steps);
  const std::vector<double> marginals = accounting::PureDpRdp(eps_marginals, orders);
  for (size_t i = 0; i < curve.size(); ++i) curve[i] += marginals[i];
  charge.cost = accounting::RdpCurveCost(curve);

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
  v1::Cost* s = d.add_parts();
  s->set_name(absl::StrCat("steps (", charge.steps, " x, batches of ", batch, " of ", n,
                           " rows without replacement)"));
  s->set_epsilon(epsilon - eps_marginals);
  s->set_delta(delta);
  s->set_mechanism("discrete_gaussian");
  // The noise multiplier: each step's std over its L2 sensitivity (2 C + rounding).
  s->set_noise_scale(charge.plan.noise_multiplier());
  s->set_sensitivity(1);
  return charge;
}

absl::Status RunFermiJob(const learn::GameData& data, const v1::FitFairModelRequest& req,
                         const storage::JobPlan& plan, absl::BitGenRef gen,
                         const std::function<bool(int64_t, int64_t)>& progress,
                         v1::FairModel* model) {
  // 1. The marginals p̂_a: the group counts with discrete Laplace noise (L1 sensitivity 2),
  // floored at one row: public constants from here on.
  ASSIGN_OR_RETURN(auto marginal_noise,
                   core::dp::MakeDiscreteLaplaceNoise(2 / plan.epsilon_marginals()));
  std::vector<int64_t> counts(data.k, 0);
  for (int a : data.group) ++counts[a];
  learn::FermiData fermi;
  fermi.k = data.k;
  fermi.x = data.x;
  fermi.y = data.y;
  fermi.group = data.group;
  for (int a = 0; a < data.k; ++a) {
    const int64_t noisy = std::max<int64_t>(marginal_noise->AddNoise(counts[a], gen), 1);
    fermi.marginals.push_back(static_cast<double>(noisy) / static_cast<double>(data.n));
  }
  // 2. The steps.
  const learn::FermiOptions options = FermiOptionsOf(req);
  ASSIGN_OR_RETURN(const learn::FermiNoisePlan noise,
                   learn::PlanFermiNoise(data.d, data.k, options, plan.noise_multiplier()));
  ASSIGN_OR_RETURN(auto noise_theta, core::dp::MakeDiscreteGaussianNoise(noise.std_theta_steps));
  ASSIGN_OR_RETURN(auto noise_w, core::dp::MakeDiscreteGaussianNoise(noise.std_w_steps));
  ASSIGN_OR_RETURN(
      Eigen::VectorXd theta,
      learn::TrainDpFermiLogistic(fermi, options, noise, *noise_theta, *noise_w, gen, progress));
  model->set_algorithm("dp_fermi");
  v1::LinearClassifier* c = model->add_components();
  for (Eigen::Index j = 0; j < theta.size(); ++j) c->add_weights(theta(j));
  model->set_rounds(req.epochs());
  std::string note =
      absl::StrCat("DP-FERMI logistic regression, demographic parity, lambda ",
                   req.fairness_lambda(), ": ", learn::FermiSteps(data.n, options),
                   " steps, noise multiplier ", plan.noise_multiplier(), ", released marginals");
  for (double p : fermi.marginals) absl::StrAppend(&note, " ", p);
  model->add_notes(note);
  return absl::OkStatus();
}

}  // namespace fairvault::server
