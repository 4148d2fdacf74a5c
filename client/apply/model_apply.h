// Applying a fair model (v1::FairModel, issue 9) to the company's own rows, locally: no vault
// call and no protected attribute. The artifact format is documented in docs/api.md, "Model
// artifact format (FairModel)"; this is its reference implementation.
#ifndef FAIRVAULT_CLIENT_APPLY_MODEL_APPLY_H_
#define FAIRVAULT_CLIENT_APPLY_MODEL_APPLY_H_

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "fairvault/v1/fairvault.pb.h"

namespace fairvault::client {

namespace v1 = ::fairvault::v1;

// What a model says about one row.
struct ModelPrediction {
  // Probability of a positive decision, for the binary models: the fraction of the mixture's
  // components deciding 1 (exact: k/m), the hypothesis column's 0/1 value, or a one-logit
  // network's sigmoid. NaN for a network with several logits (see class_probabilities).
  double p_positive = 0;
  // The decision: 0 or 1 for the binary models; the class value (classes()[k]) for a network
  // with several logits. A mixture or hypothesis model gives -1 when only the probability was
  // asked for (gen null: no draw made); a network always decides (deterministically).
  int decision = -1;
  // A network with several logits: the softmax probability of classes()[k] at index k
  // (always filled, also without a decision). Empty for every other model.
  std::vector<double> class_probabilities;
};

// The generator a mixture's decisions draw their component from. The company's own
// randomness, not a privacy mechanism (the model is already a DP release; how the company
// randomises between its components does not touch the vault's data), so a seeded
// std::mt19937_64 is right here: the same seed gives the same decisions on every platform
// (the standard fixes its output sequence).
using ModelRng = std::mt19937_64;

// Index in [0, m) drawn uniformly from `gen`: one 64-bit output r, rejected (and redrawn)
// while r >= 2^64 - (2^64 mod m), then r mod m. Spelled out rather than
// std::uniform_int_distribution, whose algorithm differs between standard libraries, so that
// decisions are reproducible given the seed in any language. m must be >= 1.
uint64_t DrawComponent(uint64_t m, ModelRng& gen);

// Index drawn with the weights whose running sums (in index order, the last about 1) are
// `cumulative`: u = DrawComponent(2^53, gen) · 2^-53, then the first c with u < cumulative[c]
// (the last index if none). Reproducible in any language with IEEE doubles.
size_t DrawWeightedComponent(absl::Span<const double> cumulative, ModelRng& gen);

// Buffers that Predict reuses from row to row, so that applying a model allocates nothing
// per row once they have grown to the model's widths. Opaque; one per thread.
class ModelWorkspace {
 private:
  friend class FairModelApplier;
  std::vector<double> x_;         // the preprocessed row
  std::vector<double> in_, out_;  // a network's activations, layer to layer
  std::vector<int> decisions_;    // a mixture's component decisions
};

// A validated FairModel, ready to apply. Immutable after Create; thread-safe for const use
// (each thread passes its own generator and workspace).
class FairModelApplier {
 public:
  enum class Kind { kMixture, kHypothesis, kNetwork };

  // InvalidArgument, naming the field and saying what is wrong, unless exactly one of
  // `components` (non-empty), `hypothesis_column` (non-empty) and `network` is set.
  // A mixture or network also needs features.feature_columns non-empty without empty names
  // and features.clip_l1 finite and >= 0. A mixture: every component has exactly
  // feature_columns + (intercept ? 1 : 0) weights, all finite. A network: at least one layer;
  // every layer has inputs >= 1, outputs >= 1, inputs × outputs finite weights and a bias
  // empty or `outputs` long and finite; layers[0].inputs = feature_columns + (intercept ? 1 :
  // 0) and layers[i].inputs = layers[i-1].outputs; the last layer has 1 output (classes
  // empty or [0, 1]) or l >= 2 outputs and exactly l distinct classes.
  static absl::StatusOr<FairModelApplier> Create(const v1::FairModel& model);

  // The columns a row must provide, in the order Predict takes their values: the feature
  // columns for a mixture or network, the hypothesis column alone otherwise.
  const std::vector<std::string>& input_columns() const { return input_columns_; }
  Kind kind() const { return kind_; }
  bool is_hypothesis() const { return kind_ == Kind::kHypothesis; }
  bool is_network() const { return kind_ == Kind::kNetwork; }
  // Number of linear classifiers (0 for a hypothesis-column or network model).
  size_t num_components() const { return weights_.size(); }
  // A network: its layers' (inputs, outputs), in order. Empty for other models.
  std::vector<std::pair<int, int>> layer_shapes() const;
  // The class values of the decisions: {0, 1} for every binary model (a one-logit network
  // included); a network with several logits: its `classes`, whose order the logits and
  // ModelPrediction::class_probabilities follow.
  const std::vector<int>& classes() const { return classes_; }
  // True for a network with several logits (softmax): predictions carry class_probabilities
  // and p_positive is NaN.
  bool is_multiclass() const { return multiclass_; }

  // The vector the classifiers or the network's first layer weigh, from the raw feature
  // values (one per feature column, in order): x; if clip_l1 > 0 and ‖x‖₁ > clip_l1,
  // x · (clip_l1/‖x‖₁); then 1 appended if the model has an intercept. InvalidArgument for a
  // hypothesis model, a wrong count or a non-finite value.
  absl::StatusOr<std::vector<double>> Preprocess(absl::Span<const double> features) const;

  // One row: `inputs` holds the values of input_columns() in order (finite; for a hypothesis
  // model 0 or 1).
  // - Mixture: component c decides 1 iff Σ_j w_cj·x_j > 0 (summed in index order); p_positive
  //   is the fraction of components deciding 1 or, with component_weights, the sum of their
  //   weights (in index order, at most 1). With `gen` null no draw is made and decision is -1;
  //   otherwise the decision is a drawn component's (DrawComponent uniformly, or
  //   DrawWeightedComponent with component_weights; one draw per row for a mixture of two or
  //   more components, none for one component).
  // - Hypothesis column: p_positive is the value; the decision too unless `gen` is null.
  // - Network: the forward pass in double (docs/api.md gives the exact order of operations).
  //   One logit z: p_positive = 1/(1+e^{-z}) (evaluated without overflow), decision 1 iff
  //   z > 0. Several: class_probabilities = softmax(z) (shifted by max z), decision the class
  //   of the largest logit, the first on ties. The decision is deterministic: set whether or
  //   not `gen` is null, which is never drawn from. InvalidArgument when a layer's output
  //   overflows (is not finite) on this row.
  // Reuses `workspace` and `out` (its class_probabilities' capacity): with both kept across
  // rows nothing is allocated per row.
  absl::Status Predict(absl::Span<const double> inputs, ModelRng* gen, ModelWorkspace& workspace,
                       ModelPrediction& out) const;
  // The same, with a fresh workspace and prediction (allocates; convenient for a few rows).
  absl::StatusOr<ModelPrediction> Predict(absl::Span<const double> inputs, ModelRng* gen) const;

 private:
  struct Layer {
    int inputs = 0;
    int outputs = 0;
    std::vector<double> weights;  // row-major outputs × inputs
    std::vector<double> bias;     // `outputs` long (zeros when the artifact had none)
  };
  FairModelApplier() = default;
  // Preprocess into `x` (resized; its capacity reused).
  absl::Status PreprocessInto(absl::Span<const double> features, std::vector<double>& x) const;
  absl::Status PredictNetwork(ModelWorkspace& workspace, ModelPrediction& out) const;

  Kind kind_ = Kind::kMixture;
  bool multiclass_ = false;
  bool intercept_ = false;
  double clip_l1_ = 0;
  std::vector<std::string> input_columns_;
  std::vector<int> classes_ = {0, 1};
  std::vector<std::vector<double>> weights_;
  // The mixture's component_weights and their running sums; empty for a uniform mixture.
  std::vector<double> mixture_weights_;
  std::vector<double> cumulative_;
  std::vector<Layer> layers_;
  size_t max_width_ = 0;  // the widest layer input or output of a network
};

// A model bound to a CSV header: reads a row's input columns by position. Keeps a pointer to
// the applier, which must outlive it. Not thread-safe (one per thread).
class FairModelRowReader {
 public:
  // InvalidArgument naming `source` and the missing column (and listing the header) when one
  // of the model's input columns is not in `header`.
  static absl::StatusOr<FairModelRowReader> Bind(const FairModelApplier& applier,
                                                 const std::vector<std::string>& header,
                                                 absl::string_view source);
  // Predicts one data row (`fields` as wide as the header; `line` for errors) into the
  // reader's own prediction, returned; it is overwritten by the next call (no allocation per
  // row). InvalidArgument "<source>:<line>: column 'c': ..." for a value that is not a finite
  // number (for a hypothesis column: not 0 or 1), "<source>:<line>: ..." for a row the model
  // refuses (e.g. a network logit that overflowed).
  absl::StatusOr<const ModelPrediction*> Predict(const std::vector<std::string>& fields,
                                                 int64_t line, ModelRng* gen);

 private:
  FairModelRowReader(const FairModelApplier& applier, std::string source)
      : applier_(&applier), source_(std::move(source)) {}
  const FairModelApplier* applier_;
  std::string source_;
  std::vector<size_t> indices_;
  std::vector<double> values_;
  ModelWorkspace workspace_;
  ModelPrediction prediction_;
};

}  // namespace fairvault::client

#endif  // FAIRVAULT_CLIENT_APPLY_MODEL_APPLY_H_
