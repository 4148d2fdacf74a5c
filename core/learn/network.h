// The models the stochastic fair learners (DP-FERMI, PF-LD) train: logistic regression, softmax
// regression and small ReLU MLPs, as one feed-forward network over the preprocessed features
// (intercept included as the last input). The artifact form is v1::NeuralModel.
//
// What the learners need from a model, for a batch of rows at once (blocked matrix products, no
// per-row allocation):
//   - the class probabilities F (B × classes; binary: F = (1 − σ(z), σ(z)) from one logit z);
//   - the summed gradient of Σ_i [ℓ_CE(y_i) + g_i · F_i] for cotangents g on the probabilities
//     (the company's own terms: exact, no noise);
//   - the sum of per-row gradients of h_i · F_i, each row's gradient first clipped to L2 norm C
//     (the protected-attribute terms, which then get noise). Per-row norms come in closed form
//     from the layers' deltas and inputs (‖δ_i‖·‖h_i‖ per weight matrix, Goodfellow's trick), so
//     per-row gradients are never materialised.
#ifndef FAIRVAULT_CORE_LEARN_NETWORK_H_
#define FAIRVAULT_CORE_LEARN_NETWORK_H_

#include <cstdint>
#include <vector>

#include "Eigen/Dense"
#include "absl/random/bit_gen_ref.h"
#include "absl/status/status.h"
#include "absl/types/span.h"

namespace fairvault::core::learn {

// The most classes a model predicts.
inline constexpr int kMaxClasses = 64;

using RowMatrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

struct NetworkShape {
  int inputs = 0;           // d, intercept included
  std::vector<int> hidden;  // ReLU layer widths: 0, 1 or 2 entries
  int outputs = 1;          // 1: binary (one logit, sigmoid); l >= 2: softmax over l classes

  int classes() const { return outputs == 1 ? 2 : outputs; }
  int layers() const { return static_cast<int>(hidden.size()) + 1; }
  int LayerInputs(int layer) const { return layer == 0 ? inputs : hidden[layer - 1]; }
  int LayerOutputs(int layer) const { return layer + 1 < layers() ? hidden[layer] : outputs; }
  // The first layer has no bias (the intercept input plays it); later layers have one.
  bool HasBias(int layer) const { return layer > 0; }
  int64_t NumParams() const;
  absl::Status Validate() const;
};

class Network {
 public:
  explicit Network(NetworkShape shape);

  const NetworkShape& shape() const { return shape_; }
  Eigen::VectorXd& params() { return params_; }
  const Eigen::VectorXd& params() const { return params_; }
  // Layer `l`'s weights (outputs × inputs, row-major) and bias (empty for layer 0) in params().
  Eigen::Map<const RowMatrix> Weights(int layer) const;
  Eigen::Map<const Eigen::VectorXd> Bias(int layer) const;

  // Linear models start at 0 (deterministic); MLPs get He-uniform weights from `gen` and zero
  // biases (the model, not the data: no privacy cost).
  void Initialize(absl::BitGenRef gen);

  // Forward pass on rows `rows` of x (n × inputs). Keeps the batch's activations for Backward.
  void Forward(const RowMatrix& x, absl::Span<const int64_t> rows);
  // The forward pass on rows [start, start + count) of x (for full-data passes in blocks).
  void ForwardRange(const RowMatrix& x, int64_t start, int64_t count);
  // The last Forward's probabilities, B × classes.
  const RowMatrix& probabilities() const { return probabilities_; }

  // Adds to *exact the gradient of Σ_i [cross-entropy(F_i, labels[i]) (if labels non-empty) +
  // exact_cot.row(i) · F_i] over the last Forward's rows.
  void AddExactGradient(const RowMatrix& exact_cot, absl::Span<const int> labels,
                        Eigen::VectorXd* exact);
  // Sets *clipped to Σ_i clip_C(∇_θ (private_cot.row(i) · F_i)): each row's gradient scaled to
  // L2 norm <= clip; a row whose norm overflows (not finite) contributes 0. Returns the number
  // of rows whose gradient was scaled or dropped (diagnostics).
  int64_t ClippedGradientSum(const RowMatrix& private_cot, double clip, Eigen::VectorXd* clipped);

 private:
  // Cotangents on the probabilities -> on the logits (softmax / sigmoid Jacobian), into
  // deltas_.back().
  void LogitCotangent(const RowMatrix& cot);
  // Backpropagates deltas_.back() to every layer's delta (deltas_[l], B × outputs of l).
  void BackpropDeltas();
  // Σ_l grad W_l = δ_lᵀ H_l (and bias Σ δ_l), each row i weighted by scale(i), into *out.
  void AccumulateGradient(const Eigen::VectorXd* scale, Eigen::VectorXd* out) const;

  NetworkShape shape_;
  Eigen::VectorXd params_;
  std::vector<int64_t> offsets_;  // per layer: start of weights; bias follows the weights
  // Per layer l: its input activations H_l (B × inputs of l; H_0 is the gathered batch) and
  // its pre-activation outputs; deltas_ the cotangents on those outputs.
  std::vector<RowMatrix> inputs_;
  std::vector<RowMatrix> outputs_;
  std::vector<RowMatrix> deltas_;
  RowMatrix probabilities_;
  Eigen::VectorXd row_scale_;
  Eigen::VectorXd row_norm2_;
};

}  // namespace fairvault::core::learn

#endif  // FAIRVAULT_CORE_LEARN_NETWORK_H_
