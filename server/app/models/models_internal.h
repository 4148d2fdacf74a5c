// What the fair-model use-cases share (best_response.cc, fit_fair_model.cc, run_job.cc): the
// limits, the company's features read in place, the noise factories, the artifact's parts.
// Not part of the vault's interface.
#ifndef FAIRVAULT_SERVER_APP_MODELS_MODELS_INTERNAL_H_
#define FAIRVAULT_SERVER_APP_MODELS_MODELS_INTERNAL_H_

#include <string>
#include <vector>

#include "Eigen/Dense"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/dp/integer_noise.h"
#include "core/learn/fair_game.h"
#include "core/learn/game_data.h"
#include "core/random/chacha20_stream.h"
#include "fairvault/v1/fairvault.pb.h"
#include "server/app/company_table.h"
#include "server/storage/records.pb.h"

namespace fairvault::server::models_internal {

inline constexpr int kMaxFeatures = 1000;
inline constexpr char kZeroGammaNote[] =
    "gamma = 0 asks for exact equalized odds, which no differentially private learner can "
    "guarantee (Cummings et al. 2019, Thm 1): the model is fair only up to the noise";


// Borrows a noise the charge path made (its scale fixed before the charge) as the factory the
// core expects, checking that the core asks for that very scale.
// A best response's game parameters, from the request alone (BestResponse, with or without a
// sums_key): feature and label columns, lambda_bound, gamma, clip_l1, mass_floor (0 means 1),
// λ's entries and its L1 norm against lambda_bound. Returns the mass floor.
absl::StatusOr<double> ValidateGameRequest(const v1::BestResponseRequest& req);

core::learn::NoiseFactory Borrow(const core::dp::IntegerNoise& noise, double planned_scale);
// Discrete Laplace noise of any scale, on the generator passed to it.
core::learn::NoiseFactory SecureLaplace();

core::learn::Oracle OracleOf(v1::BestResponseOracle oracle);

// A job's 32-byte seed and its ChaCha20 key.
std::string SeedBytes(const core::ChaCha20Stream::Key& key);
core::ChaCha20Stream::Key KeyOf(const std::string& seed);

// The artifact's preprocessing and one linear component.
void SetFeatures(const google::protobuf::RepeatedPtrField<std::string>& columns, double clip_l1,
                 bool intercept, v1::FairModel* model);
void AddComponent(const Eigen::VectorXd& w, v1::FairModel* model);

core::learn::LearnerOptions LearnerOptionsOf(const v1::FitFairModelRequest& req);

// A best response's game that public inputs show cannot be solved (features out of scale, a
// singular or non-finite system) is refused before the charge rather than failed in it.
absl::Status CheckGameIsSolvable(const core::learn::GameData& game);

// The company's features over the joined rows, read in place from the stored table (no copies:
// valid while `table` and `rows` live), and its 0/1 labels (if `label_column` is not empty): its
// own, public data.
struct GameInputs {
  core::learn::FeatureColumns features;
  std::vector<int> labels;
};
absl::StatusOr<GameInputs> LoadGameInputs(
    const CompanyTable& table, const std::vector<int64_t>& rows,
    const google::protobuf::RepeatedPtrField<std::string>& feature_columns,
    const std::string& label_column);

}  // namespace fairvault::server::models_internal

#endif  // FAIRVAULT_SERVER_APP_MODELS_MODELS_INTERNAL_H_
