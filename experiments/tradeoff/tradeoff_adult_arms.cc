// tradeoff_adult's split, schedule variations and arms (tradeoff_adult_arms.h).
#include "experiments/tradeoff/tradeoff_adult_arms.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>

namespace fairvault::experiments::tradeoff {
namespace {

// The validation split: a fixed shuffle of adult.data, the last share of it held out.
constexpr uint64_t kValidationShuffleSeed = 20231123;

}  // namespace

absl::StatusOr<Split> MakeSplit(const AdultData& adult, const Flags& flags) {
  Split split;
  const auto n = static_cast<int>(adult.train.y.size());
  std::vector<int> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  if (!flags.validate) {
    split.train = adult.train;
    split.eval = adult.test;
    split.eval_name = "adult.test";
  } else {
    std::mt19937_64 shuffle(kValidationShuffleSeed);
    std::shuffle(order.begin(), order.end(), shuffle);
    const auto held = static_cast<size_t>(std::round(flags.validation_share * n));
    std::vector<int> train_idx(order.begin(), order.end() - static_cast<long>(held));
    std::vector<int> eval_idx(order.end() - static_cast<long>(held), order.end());
    std::sort(train_idx.begin(), train_idx.end());
    std::sort(eval_idx.begin(), eval_idx.end());
    split.train = TakeRows(adult.train, train_idx);
    split.eval = TakeRows(adult.train, eval_idx);
    order = train_idx;
    split.eval_name =
        absl::StrFormat("validation rows (%.0f%% of adult.data)", 100 * flags.validation_share);
  }
  for (size_t i = 0; i < split.train.y.size(); ++i) {
    split.train_keys.push_back(absl::StrCat("adult-", order[i]));
  }
  return split;
}

const std::vector<Variation>& Variations() {
  static const std::vector<Variation>* const kVariations = new std::vector<Variation>{
      {"chosen", "chosen", [](Schedule&) {}, true, true},
      {"lr_theta_div3", "η_θ ÷ 3", [](Schedule& s) { s.lr_theta /= 3; }, true, true},
      {"lr_theta_x3", "η_θ × 3", [](Schedule& s) { s.lr_theta *= 3; }, true, true},
      {"lr_w_div10", "η_w ÷ 10", [](Schedule& s) { s.lr_w /= 10; }, true, false},
      {"w_radius_1", "W radius 1", [](Schedule& s) { s.w_radius = 1; }, true, false},
      {"clips_x5", "clips × 5",
       [](Schedule& s) {
         s.clip *= 5;
         s.pfld_clip *= 5;
       },
       true, true},
      {"epochs_div3", "epochs ÷ 3", [](Schedule& s) { s.epochs = std::max(1, s.epochs / 3); }, true,
       true},
      {"batch_4096", "batch 4096", [](Schedule& s) { s.batch = 4096; }, true, true},
      {"dual_div10", "dual step ÷ 10", [](Schedule& s) { s.dual_lr /= 10; }, false, true},
      {"dual_x10", "dual step × 10", [](Schedule& s) { s.dual_lr *= 10; }, false, true},
      {"pfld_paper", "PF-LD paper C_p 10, η_θ 0.005, batch 1024",
       [](Schedule& s) {
         s.pfld_clip = 10;
         s.lr_theta = 0.005;
         s.batch = 1024;
       },
       false, true},
  };
  return *kVariations;
}

std::vector<Arm> MakeArms(const Flags& flags) {
  std::vector<Arm> arms;
  const Schedule& base = flags.schedule;
  auto add_stochastic = [&](const Schedule& s, const std::string& config, bool fermi, bool pfld) {
    if (fermi) {
      for (double lambda : flags.lambdas) arms.push_back({Method::kFermi, lambda, s, config});
    }
    if (pfld) arms.push_back({Method::kPfld, 0, s, config});
  };
  if (!flags.validate) {
    add_stochastic(base, "", true, true);
    arms.push_back({Method::kOracle, 0, base, ""});
    arms.push_back({Method::kPost, 0, base, ""});
    return arms;
  }
  for (const Variation& v : Variations()) {
    if (!flags.variations.empty() && std::find(flags.variations.begin(), flags.variations.end(),
                                               v.id) == flags.variations.end()) {
      continue;
    }
    Schedule s = base;
    v.change(s);
    add_stochastic(s, v.name, v.fermi, v.pfld);
  }
  return arms;
}

}  // namespace fairvault::experiments::tradeoff
