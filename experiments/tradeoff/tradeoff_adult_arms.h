// tradeoff_adult's arms: the learners' schedule, the flags, the learner configurations (arms)
// of the sweep or of --validate's schedule variations, the train / evaluation split and the
// per-seed result rows.
#ifndef FAIRVAULT_EXPERIMENTS_TRADEOFF_TRADEOFF_ADULT_ARMS_H_
#define FAIRVAULT_EXPERIMENTS_TRADEOFF_TRADEOFF_ADULT_ARMS_H_

#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "experiments/common/datasets.h"
#include "experiments/common/metrics.h"
#include "experiments/common/vault_session.h"

#ifndef FAIRVAULT_SOURCE_DIR
#error "FAIRVAULT_SOURCE_DIR must be defined by the build"
#endif

namespace fairvault::experiments::tradeoff {

// The grant's δ (DP-FERMI and PF-LD add Gaussian noise).
inline constexpr double kDelta = 1e-5;
inline constexpr double kInf = std::numeric_limits<double>::infinity();

// DP-FERMI's and PF-LD's schedule and steps (FitFairModelRequest fields 19-31).
struct Schedule {
  int epochs = 300;
  int batch = 0;  // 0: all rows (full batch)
  double lr_theta = 1, lr_w = 0.1, w_radius = 5;
  double clip = 1;       // DP-FERMI: clip_theta = clip_w
  double pfld_clip = 5;  // PF-LD: C_p (clip_theta)
  double dual_lr = 0.1;

  std::string Describe(bool pfld) const {
    const std::string batch_text = batch == 0 ? "full batch" : absl::StrCat("batch ", batch);
    if (pfld) {
      return absl::StrFormat("%d epochs, %s, η_θ %g, C_p %g, dual step %g", epochs, batch_text,
                             lr_theta, pfld_clip, dual_lr);
    }
    return absl::StrFormat("%d epochs, %s, η_θ %g, η_w %g, W radius %g, clips %g", epochs,
                           batch_text, lr_theta, lr_w, w_radius, clip);
  }
};

struct Flags {
  std::string datasets = std::string(FAIRVAULT_SOURCE_DIR) + "/../shared/datasets";
  std::string out_dir = ".";
  int seeds = 5;
  std::vector<double> epsilons = {0.5, 1, 3, 9};
  std::vector<double> lambdas = {0, 1, 2.5, 5};
  Schedule schedule;
  int oracle_rounds = 0;  // 0: the vault's default (100)
  bool validate = false;
  double validation_share = 0.2;
  std::vector<std::string> variations;  // --validate: the variations to run (empty: all)
  bool quick = false;
  // Which flags were given (--validate keeps them and varies the rest).
  bool epsilons_given = false, lambdas_given = false, seeds_given = false;
};

enum class Method { kFermi, kPfld, kOracle, kPost, kBase };

// One learner configuration: a series of the sweep.
struct Arm {
  Method method;
  double lambda = 0;  // DP-FERMI's fairness weight
  Schedule schedule;
  std::string config;  // --validate: the variation's name
  std::string Series(int oracle_rounds) const {
    switch (method) {
      case Method::kFermi:
        return absl::StrCat("DP-FERMI λ=", lambda);
      case Method::kPfld:
        return "PF-LD";
      case Method::kOracle:
        return absl::StrCat("DP-oracle learner T=", oracle_rounds == 0 ? 100 : oracle_rounds);
      case Method::kPost:
        return "EO post-processor";
      case Method::kBase:
        break;
    }
    return "logistic regression (non-private)";
  }
  const char* Name() const {
    switch (method) {
      case Method::kFermi:
        return "dp_fermi";
      case Method::kPfld:
        return "pf_ld";
      case Method::kOracle:
        return "dp_oracle_learner";
      case Method::kPost:
        return "eo_postprocessor";
      case Method::kBase:
        break;
    }
    return "logistic_regression";
  }
};

struct Row {
  size_t arm = 0;
  double epsilon = 0;
  int seed = 0;
  Metrics m;
  double z = 0;        // DP-FERMI / PF-LD: the steps' noise multiplier from the charge
  double elapsed = 0;  // the job's own elapsed_seconds
};

// The evaluation: a company table on `train`, metrics on `eval` (adult.test, or the validation
// rows under --validate).
struct Split {
  LabeledRows train, eval;
  std::vector<std::string> train_keys;
  std::string eval_name;
};

// adult.data / adult.test, or under --validate a fixed shuffle of adult.data with the last
// --validation share held out; train_keys name the train rows' subjects.
absl::StatusOr<Split> MakeSplit(const AdultData& adult, const Flags& flags);

// The --validate variations: one change each from the flags' schedule, for DP-FERMI (at each
// λ), PF-LD or both.
struct Variation {
  std::string id, name;
  std::function<void(Schedule&)> change;
  bool fermi, pfld;
};

// Every known variation, in table order.
const std::vector<Variation>& Variations();

// The arms: the learners of the trade-off, or under --validate the variations of the schedule
// (one change at a time from --epochs ... --dual-lr) for DP-FERMI at each λ and PF-LD.
std::vector<Arm> MakeArms(const Flags& flags);

// The arms and the rows they gave.
struct Results {
  std::vector<Arm> arms;  // the flags' arms, then the references
  std::vector<Row> rows;
  size_t base_arm = 0, post_arm = 0;
  bool has_post = false;
};

}  // namespace fairvault::experiments::tradeoff

#endif  // FAIRVAULT_EXPERIMENTS_TRADEOFF_TRADEOFF_ADULT_ARMS_H_
