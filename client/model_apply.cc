// Local application of a FairModel; see model_apply.h and docs/api.md.
#include "client/model_apply.h"

#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/csv.h"

namespace fairvault::client {

uint64_t DrawComponent(uint64_t m, ModelRng& gen) {
  // 2^64 mod m, computed without 128-bit arithmetic: (2^64 - m) mod m.
  const uint64_t excess = (0 - m) % m;
  const uint64_t limit = std::numeric_limits<uint64_t>::max() - excess;  // 2^64 - excess - 1
  while (true) {
    const uint64_t r = gen();
    if (r <= limit) return r % m;
  }
}

absl::StatusOr<FairModelApplier> FairModelApplier::Create(const v1::FairModel& model) {
  const bool has_components = model.components_size() > 0;
  const bool has_hypothesis = !model.hypothesis_column().empty();
  if (has_components == has_hypothesis) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a fair model needs exactly one of components (a mixture of linear classifiers) and "
        "hypothesis_column (got ",
        model.components_size(), " components and hypothesis_column '", model.hypothesis_column(),
        "')"));
  }
  FairModelApplier applier;
  if (has_hypothesis) {
    applier.hypothesis_ = true;
    applier.input_columns_ = {model.hypothesis_column()};
    return applier;
  }
  const v1::FeaturePreprocessing& features = model.features();
  if (features.feature_columns().empty()) {
    return absl::InvalidArgumentError(
        "the model's features.feature_columns is empty: a linear model needs its feature columns");
  }
  for (int j = 0; j < features.feature_columns_size(); ++j) {
    if (features.feature_columns(j).empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("features.feature_columns[", j, "] is an empty column name"));
    }
  }
  if (!std::isfinite(features.clip_l1()) || features.clip_l1() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "features.clip_l1 must be finite and >= 0 (0: no clipping; got ", features.clip_l1(), ")"));
  }
  const int expected = features.feature_columns_size() + (features.intercept() ? 1 : 0);
  for (int c = 0; c < model.components_size(); ++c) {
    const v1::LinearClassifier& component = model.components(c);
    if (component.weights_size() != expected) {
      return absl::InvalidArgumentError(
          absl::StrCat("components[", c, "] has ", component.weights_size(), " weights; expected ",
                       expected, " (", features.feature_columns_size(), " features",
                       features.intercept() ? " + intercept" : ", no intercept", ")"));
    }
    for (int j = 0; j < component.weights_size(); ++j) {
      if (!std::isfinite(component.weights(j))) {
        return absl::InvalidArgumentError(absl::StrCat(
            "components[", c, "].weights[", j, "] is not finite (", component.weights(j), ")"));
      }
    }
    applier.weights_.emplace_back(component.weights().begin(), component.weights().end());
  }
  applier.input_columns_.assign(features.feature_columns().begin(),
                                features.feature_columns().end());
  applier.clip_l1_ = features.clip_l1();
  applier.intercept_ = features.intercept();
  return applier;
}

absl::StatusOr<std::vector<double>> FairModelApplier::Preprocess(
    absl::Span<const double> features) const {
  if (hypothesis_) {
    return absl::InvalidArgumentError("a hypothesis-column model has no feature preprocessing");
  }
  if (features.size() != input_columns_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected ", input_columns_.size(), " feature values, got ", features.size()));
  }
  std::vector<double> x(features.begin(), features.end());
  double l1 = 0;
  for (size_t j = 0; j < x.size(); ++j) {
    if (!std::isfinite(x[j])) {
      return absl::InvalidArgumentError(
          absl::StrCat("feature '", input_columns_[j], "' is not finite (", x[j], ")"));
    }
    l1 += std::abs(x[j]);
  }
  if (clip_l1_ > 0 && l1 > clip_l1_) {
    const double scale = clip_l1_ / l1;
    for (double& v : x) v *= scale;
  }
  if (intercept_) x.push_back(1.0);
  return x;
}

absl::StatusOr<ModelPrediction> FairModelApplier::Predict(absl::Span<const double> inputs,
                                                          ModelRng* gen) const {
  ModelPrediction out;
  if (hypothesis_) {
    if (inputs.size() != 1 || (inputs[0] != 0 && inputs[0] != 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("hypothesis column '", input_columns_[0], "' must be 0 or 1",
                       inputs.size() == 1 ? absl::StrCat(" (got ", inputs[0], ")") : ""));
    }
    out.p_positive = inputs[0];
    if (gen != nullptr) out.decision = static_cast<int>(inputs[0]);
    return out;
  }
  absl::StatusOr<std::vector<double>> x = Preprocess(inputs);
  if (!x.ok()) return x.status();
  // Each component's decision; the count of 1s gives the probability exactly (k/m).
  std::vector<int> decisions(weights_.size());
  size_t positives = 0;
  for (size_t c = 0; c < weights_.size(); ++c) {
    double score = 0;
    for (size_t j = 0; j < x->size(); ++j) score += weights_[c][j] * (*x)[j];
    decisions[c] = score > 0 ? 1 : 0;
    positives += decisions[c];
  }
  out.p_positive = static_cast<double>(positives) / static_cast<double>(weights_.size());
  if (gen != nullptr) {
    out.decision =
        weights_.size() == 1 ? decisions[0] : decisions[DrawComponent(weights_.size(), *gen)];
  }
  return out;
}

absl::StatusOr<FairModelRowReader> FairModelRowReader::Bind(const FairModelApplier& applier,
                                                            const std::vector<std::string>& header,
                                                            absl::string_view source) {
  FairModelRowReader reader(applier, std::string(source));
  for (const std::string& column : applier.input_columns()) {
    absl::StatusOr<size_t> index = ColumnIndexIn(header, column);
    if (!index.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": the model needs column '", column,
                                                     "': ", index.status().message()));
    }
    reader.indices_.push_back(*index);
  }
  reader.values_.resize(reader.indices_.size());
  return reader;
}

absl::StatusOr<ModelPrediction> FairModelRowReader::Predict(const std::vector<std::string>& fields,
                                                            int64_t line, ModelRng* gen) {
  for (size_t i = 0; i < indices_.size(); ++i) {
    const std::string& text = fields[indices_[i]];
    double value = 0;
    if (!absl::SimpleAtod(text, &value) || !std::isfinite(value)) {
      return absl::InvalidArgumentError(absl::StrCat(source_, ":", line, ": column '",
                                                     applier_->input_columns()[i],
                                                     "': not a finite number ('", text, "')"));
    }
    values_[i] = value;
  }
  absl::StatusOr<ModelPrediction> prediction = applier_->Predict(values_, gen);
  if (!prediction.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source_, ":", line, ": ", prediction.status().message()));
  }
  return prediction;
}

}  // namespace fairvault::client
