#include "server/app/models/models_internal.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "core/util/status_macros.h"
#include "core/util/validate.h"
#include "server/app/vault_internal.h"

namespace fairvault::server::models_internal {

namespace learn = core::learn;

absl::StatusOr<double> ValidateGameRequest(const v1::BestResponseRequest& req) {
  RETURN_IF_ERROR(
      internal::ValidateColumns(req.feature_columns(), "feature_columns", 1, kMaxFeatures));
  if (req.label_column().empty()) return absl::InvalidArgumentError("label_column must be set");
  RETURN_IF_ERROR(core::ValidateIsFiniteAndPositive(req.lambda_bound(), "lambda_bound"));
  RETURN_IF_ERROR(core::ValidateIsFiniteAndNonNegative(req.gamma(), "gamma"));
  RETURN_IF_ERROR(core::ValidateIsFiniteAndNonNegative(req.clip_l1(), "clip_l1"));
  const double mass_floor = req.mass_floor() == 0 ? 1 : req.mass_floor();
  if (!(mass_floor >= 1) || !std::isfinite(mass_floor)) {
    return absl::InvalidArgumentError("mass_floor must be finite and >= 1 (0 means 1)");
  }
  double lambda_l1 = 0;
  for (double l : req.lambda()) {
    if (!std::isfinite(l) || l < 0) {
      return absl::InvalidArgumentError("lambda: every entry must be finite and >= 0");
    }
    lambda_l1 += l;
  }
  if (lambda_l1 > req.lambda_bound() * (1 + 1e-12)) {
    return absl::InvalidArgumentError(absl::StrCat("lambda: its L1 norm ", lambda_l1,
                                                   " exceeds lambda_bound ", req.lambda_bound()));
  }
  return mass_floor;
}

learn::NoiseFactory Borrow(const core::dp::IntegerNoise& noise, double planned_scale) {
  class Borrowed : public core::dp::IntegerNoise {
   public:
    explicit Borrowed(const core::dp::IntegerNoise& n) : n_(n) {}
    int64_t AddNoise(int64_t v, absl::BitGenRef gen) const override { return n_.AddNoise(v, gen); }
    std::string Name() const override { return n_.Name(); }
    double Scale() const override { return n_.Scale(); }
    int64_t HalfWidth(double confidence) const override { return n_.HalfWidth(confidence); }

   private:
    const core::dp::IntegerNoise& n_;
  };
  return [&noise,
          planned_scale](double scale) -> absl::StatusOr<std::unique_ptr<core::dp::IntegerNoise>> {
    if (scale != planned_scale) {
      return absl::InternalError("a best response asked for another noise than it was charged");
    }
    return std::make_unique<Borrowed>(noise);
  };
}

learn::NoiseFactory SecureLaplace() {
  return [](double scale) { return core::dp::MakeDiscreteLaplaceNoise(scale); };
}

learn::Oracle OracleOf(v1::BestResponseOracle oracle) {
  return oracle == v1::BEST_RESPONSE_ORACLE_FTPL ? learn::Oracle::kFtpl
                                                 : learn::Oracle::kLeastSquares;
}

std::string SeedBytes(const core::ChaCha20Stream::Key& key) {
  std::string out(32, '\0');
  std::memcpy(out.data(), key.data(), 32);
  return out;
}

core::ChaCha20Stream::Key KeyOf(const std::string& seed) {
  core::ChaCha20Stream::Key key{};
  std::memcpy(key.data(), seed.data(), std::min<size_t>(seed.size(), 32));
  return key;
}

void SetFeatures(const google::protobuf::RepeatedPtrField<std::string>& columns, double clip_l1,
                 bool intercept, v1::FairModel* model) {
  v1::FeaturePreprocessing* f = model->mutable_features();
  *f->mutable_feature_columns() = columns;
  f->set_clip_l1(clip_l1);
  f->set_intercept(intercept);
}

void AddComponent(const Eigen::VectorXd& w, v1::FairModel* model) {
  v1::LinearClassifier* c = model->add_components();
  c->mutable_weights()->Reserve(static_cast<int>(w.size()));
  for (Eigen::Index j = 0; j < w.size(); ++j) c->add_weights(w(j));
}

learn::LearnerOptions LearnerOptionsOf(const v1::FitFairModelRequest& req) {
  learn::LearnerOptions options;
  options.rounds = req.rounds();
  options.lambda_bound = req.lambda_bound();
  options.learning_rate = req.learning_rate();
  options.gamma = req.gamma();
  options.mass_floor = req.mass_floor();
  options.oracle = req.algorithm() == v1::FAIR_MODEL_ALGORITHM_PRIVATE_FAIR_NR
                       ? learn::Oracle::kFtpl
                       : learn::Oracle::kLeastSquares;
  return options;
}

absl::Status CheckGameIsSolvable(const learn::GameData& game) {
  RETURN_IF_ERROR(learn::CheckFeatureScale(game.max_row_l1));
  if (!game.gram.solve(game.xt_label0).allFinite() ||
      !game.gram.solve(game.xt_label1).allFinite()) {
    return absl::InvalidArgumentError(
        "feature_columns: the least-squares system of these features has no finite solution; "
        "rescale the features or set clip_l1");
  }
  return absl::OkStatus();
}

absl::StatusOr<GameInputs> LoadGameInputs(
    const CompanyTable& table, const std::vector<int64_t>& rows,
    const google::protobuf::RepeatedPtrField<std::string>& feature_columns,
    const std::string& label_column) {
  GameInputs in;
  if (!label_column.empty()) {
    ASSIGN_OR_RETURN(int label, internal::ColumnIndex(table, label_column, "label_column"));
    ASSIGN_OR_RETURN(in.labels, internal::BinaryColumn(table, label, rows, "label_column"));
  }
  for (const std::string& name : feature_columns) {
    ASSIGN_OR_RETURN(int c, internal::ColumnIndex(table, name, "feature_columns"));
    ASSIGN_OR_RETURN(const absl::Span<const double> values,
                     internal::NumericValues(table, c, "feature_columns"));
    in.features.columns.push_back(values);
  }
  in.features.rows = rows;
  return in;
}

}  // namespace fairvault::server::models_internal
