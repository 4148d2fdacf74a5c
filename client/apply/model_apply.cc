// Local application of a FairModel; see model_apply.h and docs/api.md.
#include "client/apply/model_apply.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/lib/csv.h"
#include "core/util/decimal.h"

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

namespace {

// "[a, b, c]" for error messages.
template <typename Container>
std::string Bracketed(const Container& values) {
  return absl::StrCat("[", absl::StrJoin(values, ", "), "]");
}

// InvalidArgument naming `field`[j] for the first entry that is NaN or infinite.
absl::Status CheckFinite(const google::protobuf::RepeatedField<double>& values,
                         absl::string_view field) {
  for (int j = 0; j < values.size(); ++j) {
    if (!std::isfinite(values[j])) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, "[", j, "] is not finite (", values[j], ")"));
    }
  }
  return absl::OkStatus();
}

// What mixtures and networks share: the feature columns and the clipping bound.
absl::Status CheckFeatures(const v1::FeaturePreprocessing& features, absl::string_view model) {
  if (features.feature_columns().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the model's features.feature_columns is empty: a ", model, " needs its feature columns"));
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
  return absl::OkStatus();
}

// "2 features + intercept" / "2 features, no intercept": what a first input count is made of.
std::string FeatureCount(const v1::FeaturePreprocessing& features) {
  return absl::StrCat(features.feature_columns_size(), " features",
                      features.intercept() ? " + intercept" : ", no intercept");
}

}  // namespace

absl::StatusOr<FairModelApplier> FairModelApplier::Create(const v1::FairModel& model) {
  const bool has_components = model.components_size() > 0;
  const bool has_hypothesis = !model.hypothesis_column().empty();
  const bool has_network = model.has_network();
  if (has_components + has_hypothesis + has_network != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a fair model needs exactly one of components (a mixture of linear classifiers), "
        "hypothesis_column and network (a neural model) (got ",
        model.components_size(), " components, hypothesis_column '", model.hypothesis_column(),
        "' and ", has_network ? "a network" : "no network", ")"));
  }
  FairModelApplier applier;
  if (has_hypothesis) {
    applier.kind_ = Kind::kHypothesis;
    applier.input_columns_ = {model.hypothesis_column()};
    return applier;
  }
  const v1::FeaturePreprocessing& features = model.features();
  const int expected = features.feature_columns_size() + (features.intercept() ? 1 : 0);
  if (has_components) {
    absl::Status status = CheckFeatures(features, "linear model");
    if (!status.ok()) return status;
    for (int c = 0; c < model.components_size(); ++c) {
      const v1::LinearClassifier& component = model.components(c);
      if (component.weights_size() != expected) {
        return absl::InvalidArgumentError(
            absl::StrCat("components[", c, "] has ", component.weights_size(),
                         " weights; expected ", expected, " (", FeatureCount(features), ")"));
      }
      status = CheckFinite(component.weights(), absl::StrCat("components[", c, "].weights"));
      if (!status.ok()) return status;
      applier.weights_.emplace_back(component.weights().begin(), component.weights().end());
    }
    if (!model.component_weights().empty()) {
      if (model.component_weights_size() != model.components_size()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "component_weights has ", model.component_weights_size(), " entries; expected none ",
            "(a uniform mixture) or one per component (", model.components_size(), ")"));
      }
      double total = 0;
      for (int c = 0; c < model.component_weights_size(); ++c) {
        const double w = model.component_weights(c);
        if (!(w >= 0) || !std::isfinite(w)) {
          return absl::InvalidArgumentError(absl::StrCat(
              "component_weights[", c, "] must be finite and >= 0 (got ", w, ")"));
        }
        total += w;
        applier.mixture_weights_.push_back(w);
        applier.cumulative_.push_back(total);
      }
      if (!(std::abs(total - 1) <= 1e-9)) {
        return absl::InvalidArgumentError(
            absl::StrCat("component_weights must sum to 1 (got ", total, ")"));
      }
    }
  } else {
    absl::Status status = CheckFeatures(features, "network");
    if (!status.ok()) return status;
    const v1::NeuralModel& network = model.network();
    if (network.layers().empty()) {
      return absl::InvalidArgumentError(
          "network.layers is empty: a network needs at least one layer (the last gives the "
          "logits)");
    }
    applier.kind_ = Kind::kNetwork;
    int64_t inputs = expected;  // what the next layer must take
    for (int l = 0; l < network.layers_size(); ++l) {
      const v1::DenseLayer& layer = network.layers(l);
      const std::string name = absl::StrCat("network.layers[", l, "]");
      if (layer.inputs() != inputs) {
        return absl::InvalidArgumentError(absl::StrCat(
            name, ".inputs is ", layer.inputs(), "; expected ", inputs, " (",
            l == 0 ? FeatureCount(features) : absl::StrCat("layers[", l - 1, "].outputs"), ")"));
      }
      if (layer.outputs() < 1) {
        return absl::InvalidArgumentError(
            absl::StrCat(name, ".outputs must be >= 1 (got ", layer.outputs(), ")"));
      }
      const int64_t weights = static_cast<int64_t>(layer.inputs()) * layer.outputs();
      if (layer.weights_size() != weights) {
        return absl::InvalidArgumentError(absl::StrCat(
            name, ".weights has ", layer.weights_size(), " entries; expected outputs × inputs = ",
            layer.outputs(), " × ", layer.inputs(), " = ", weights, " (row-major)"));
      }
      status = CheckFinite(layer.weights(), absl::StrCat(name, ".weights"));
      if (!status.ok()) return status;
      if (!layer.bias().empty() && layer.bias_size() != layer.outputs()) {
        return absl::InvalidArgumentError(
            absl::StrCat(name, ".bias has ", layer.bias_size(),
                         " entries; expected none or outputs = ", layer.outputs()));
      }
      status = CheckFinite(layer.bias(), absl::StrCat(name, ".bias"));
      if (!status.ok()) return status;
      Layer& stored = applier.layers_.emplace_back();
      stored.inputs = layer.inputs();
      stored.outputs = layer.outputs();
      stored.weights.assign(layer.weights().begin(), layer.weights().end());
      stored.bias.assign(layer.bias().begin(), layer.bias().end());
      stored.bias.resize(stored.outputs, 0.0);
      applier.max_width_ =
          std::max<size_t>(applier.max_width_, std::max(stored.inputs, stored.outputs));
      inputs = layer.outputs();
    }
    const int logits = network.layers(network.layers_size() - 1).outputs();
    const std::vector<int> classes(network.classes().begin(), network.classes().end());
    if (logits == 1) {
      if (!classes.empty() && classes != std::vector<int>{0, 1}) {
        return absl::InvalidArgumentError(
            absl::StrCat("network.classes must be empty or [0, 1] for a network with one logit "
                         "(binary; got ",
                         Bracketed(classes), ")"));
      }
    } else {
      if (static_cast<int>(classes.size()) != logits) {
        return absl::InvalidArgumentError(absl::StrCat("network.classes has ", classes.size(),
                                                       " entries; the last layer (network.layers[",
                                                       network.layers_size() - 1, "]) has ", logits,
                                                       " outputs: expected one class per logit"));
      }
      for (size_t k = 0; k < classes.size(); ++k) {
        if (std::find(classes.begin(), classes.begin() + k, classes[k]) != classes.begin() + k) {
          return absl::InvalidArgumentError(absl::StrCat("network.classes[", k, "] repeats class ",
                                                         classes[k], " (", Bracketed(classes),
                                                         ")"));
        }
      }
      applier.classes_ = classes;
      applier.multiclass_ = true;
    }
  }
  applier.input_columns_.assign(features.feature_columns().begin(),
                                features.feature_columns().end());
  applier.clip_l1_ = features.clip_l1();
  applier.intercept_ = features.intercept();
  return applier;
}

std::vector<std::pair<int, int>> FairModelApplier::layer_shapes() const {
  std::vector<std::pair<int, int>> shapes;
  for (const Layer& layer : layers_) shapes.emplace_back(layer.inputs, layer.outputs);
  return shapes;
}

absl::Status FairModelApplier::PreprocessInto(absl::Span<const double> features,
                                              std::vector<double>& x) const {
  if (kind_ == Kind::kHypothesis) {
    return absl::InvalidArgumentError("a hypothesis-column model has no feature preprocessing");
  }
  if (features.size() != input_columns_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected ", input_columns_.size(), " feature values, got ", features.size()));
  }
  x.assign(features.begin(), features.end());
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
  return absl::OkStatus();
}

absl::StatusOr<std::vector<double>> FairModelApplier::Preprocess(
    absl::Span<const double> features) const {
  std::vector<double> x;
  absl::Status status = PreprocessInto(features, x);
  if (!status.ok()) return status;
  return x;
}

absl::Status FairModelApplier::PredictNetwork(ModelWorkspace& workspace,
                                              ModelPrediction& out) const {
  // Activations ping-pong between two buffers of the widest layer's size.
  workspace.in_.reserve(max_width_);
  workspace.out_.reserve(max_width_);
  const std::vector<double>* input = &workspace.x_;
  std::vector<double>* output = &workspace.out_;
  std::vector<double>* spare = &workspace.in_;
  for (size_t l = 0; l < layers_.size(); ++l) {
    const Layer& layer = layers_[l];
    const bool last = l + 1 == layers_.size();
    output->resize(layer.outputs);
    const double* w = layer.weights.data();
    for (int o = 0; o < layer.outputs; ++o, w += layer.inputs) {
      // Σ_i W[o][i]·x_i in index order, then + b[o] (docs/api.md fixes this order).
      double s = 0;
      for (int i = 0; i < layer.inputs; ++i) s += w[i] * (*input)[i];
      s += layer.bias[o];
      if (!std::isfinite(s)) {
        return absl::InvalidArgumentError(
            absl::StrCat("the network overflowed on this row: layers[", l, "] output ", o, " is ",
                         s, " (the feature values are too large for the weights)"));
      }
      (*output)[o] = last || s > 0 ? s : 0.0;  // ReLU after every layer but the last
    }
    input = output;
    std::swap(output, spare);
  }
  const std::vector<double>& z = *input;
  if (!multiclass_) {
    // 1/(1+e^{-z}) without overflow: for z < 0 the equal e^z/(1+e^z).
    const double e = std::exp(-std::abs(z[0]));
    out.p_positive = z[0] >= 0 ? 1 / (1 + e) : e / (1 + e);
    out.decision = z[0] > 0 ? 1 : 0;
    out.class_probabilities.clear();
    return absl::OkStatus();
  }
  size_t best = 0;  // the first largest logit
  for (size_t k = 1; k < z.size(); ++k) {
    if (z[k] > z[best]) best = k;
  }
  out.class_probabilities.resize(z.size());
  double sum = 0;
  for (size_t k = 0; k < z.size(); ++k) {
    out.class_probabilities[k] = std::exp(z[k] - z[best]);  // <= 1, and 1 at the largest
    sum += out.class_probabilities[k];
  }
  for (double& p : out.class_probabilities) p /= sum;
  out.p_positive = std::numeric_limits<double>::quiet_NaN();
  out.decision = classes_[best];
  return absl::OkStatus();
}

absl::Status FairModelApplier::Predict(absl::Span<const double> inputs, ModelRng* gen,
                                       ModelWorkspace& workspace, ModelPrediction& out) const {
  out.decision = -1;
  out.class_probabilities.clear();
  if (kind_ == Kind::kHypothesis) {
    if (inputs.size() != 1 || (inputs[0] != 0 && inputs[0] != 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("hypothesis column '", input_columns_[0], "' must be 0 or 1",
                       inputs.size() == 1 ? absl::StrCat(" (got ", inputs[0], ")") : ""));
    }
    out.p_positive = inputs[0];
    if (gen != nullptr) out.decision = static_cast<int>(inputs[0]);
    return absl::OkStatus();
  }
  absl::Status status = PreprocessInto(inputs, workspace.x_);
  if (!status.ok()) return status;
  if (kind_ == Kind::kNetwork) return PredictNetwork(workspace, out);
  // Each component's decision; the count of 1s gives the probability exactly (k/m).
  const std::vector<double>& x = workspace.x_;
  std::vector<int>& decisions = workspace.decisions_;
  decisions.resize(weights_.size());
  size_t positives = 0;
  double weighted = 0;  // Σ of the weights of the components deciding 1, in index order
  for (size_t c = 0; c < weights_.size(); ++c) {
    double score = 0;
    for (size_t j = 0; j < x.size(); ++j) score += weights_[c][j] * x[j];
    decisions[c] = score > 0 ? 1 : 0;
    positives += decisions[c];
    if (!mixture_weights_.empty() && decisions[c] == 1) weighted += mixture_weights_[c];
  }
  out.p_positive = mixture_weights_.empty()
                       ? static_cast<double>(positives) / static_cast<double>(weights_.size())
                       : std::min(1.0, weighted);
  if (gen != nullptr) {
    if (weights_.size() == 1) {
      out.decision = decisions[0];
    } else if (mixture_weights_.empty()) {
      out.decision = decisions[DrawComponent(weights_.size(), *gen)];
    } else {
      out.decision = decisions[DrawWeightedComponent(cumulative_, *gen)];
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ModelPrediction> FairModelApplier::Predict(absl::Span<const double> inputs,
                                                          ModelRng* gen) const {
  ModelWorkspace workspace;
  ModelPrediction out;
  absl::Status status = Predict(inputs, gen, workspace, out);
  if (!status.ok()) return status;
  return out;
}

size_t DrawWeightedComponent(absl::Span<const double> cumulative, ModelRng& gen) {
  const double u = static_cast<double>(DrawComponent(uint64_t{1} << 53, gen)) * 0x1p-53;
  for (size_t c = 0; c + 1 < cumulative.size(); ++c) {
    if (u < cumulative[c]) return c;
  }
  return cumulative.size() - 1;
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

absl::StatusOr<const ModelPrediction*> FairModelRowReader::Predict(
    const std::vector<std::string>& fields, int64_t line, ModelRng* gen) {
  for (size_t i = 0; i < indices_.size(); ++i) {
    const std::string& text = fields[indices_[i]];
    double value = 0;
    if (!core::ParseDecimal(text, &value) || !std::isfinite(value)) {
      return absl::InvalidArgumentError(absl::StrCat(source_, ":", line, ": column '",
                                                     applier_->input_columns()[i],
                                                     "': not a finite number ('", text, "')"));
    }
    values_[i] = value;
  }
  absl::Status status = applier_->Predict(values_, gen, workspace_, prediction_);
  if (!status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(source_, ":", line, ": ", status.message()));
  }
  return &prediction_;
}

}  // namespace fairvault::client
