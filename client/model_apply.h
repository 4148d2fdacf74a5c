// Applying a fair model (v1::FairModel, issue 9) to the company's own rows, locally: no vault
// call and no protected attribute. The artifact format is documented in docs/api.md, "Model
// artifact format (FairModel)"; this is its reference implementation.
#ifndef FAIRVAULT_CLIENT_MODEL_APPLY_H_
#define FAIRVAULT_CLIENT_MODEL_APPLY_H_

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
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
  // Probability of a positive decision: the fraction of the mixture's components deciding 1
  // (exact: k/m), or the hypothesis column's 0/1 value.
  double p_positive = 0;
  // The decision: 0 or 1; -1 when only the probability was asked for (no draw made).
  int decision = -1;
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

// A validated FairModel, ready to apply. Immutable after Create; thread-safe for const use
// (each thread passes its own generator).
class FairModelApplier {
 public:
  // InvalidArgument, saying what is wrong, unless exactly one of `components` (non-empty) and
  // `hypothesis_column` (non-empty) is set; for a mixture also unless features.feature_columns
  // is non-empty without empty names, features.clip_l1 is finite and >= 0, and every
  // component has exactly feature_columns + (intercept ? 1 : 0) weights, all finite.
  static absl::StatusOr<FairModelApplier> Create(const v1::FairModel& model);

  // The columns a row must provide, in the order Predict takes their values: the feature
  // columns for a mixture, the hypothesis column alone otherwise.
  const std::vector<std::string>& input_columns() const { return input_columns_; }
  bool is_hypothesis() const { return hypothesis_; }
  // Number of linear classifiers (0 for a hypothesis-column model).
  size_t num_components() const { return weights_.size(); }

  // The vector the classifiers weigh, from the raw feature values (one per feature column, in
  // order): x; if clip_l1 > 0 and ‖x‖₁ > clip_l1, x · (clip_l1/‖x‖₁); then 1 appended if the
  // model has an intercept. InvalidArgument for a hypothesis model, a wrong count or a
  // non-finite value.
  absl::StatusOr<std::vector<double>> Preprocess(absl::Span<const double> features) const;

  // One row: `inputs` holds the values of input_columns() in order (finite; for a hypothesis
  // model 0 or 1). Component c decides 1 iff Σ_j w_cj·x_j > 0 (summed in index order).
  // With `gen` null no draw is made and decision is -1; otherwise the decision is a uniformly
  // drawn component's (DrawComponent, one draw per row for a mixture of two or more
  // components; none for one component or a hypothesis model).
  absl::StatusOr<ModelPrediction> Predict(absl::Span<const double> inputs, ModelRng* gen) const;

 private:
  FairModelApplier() = default;
  bool hypothesis_ = false;
  bool intercept_ = false;
  double clip_l1_ = 0;
  std::vector<std::string> input_columns_;
  std::vector<std::vector<double>> weights_;
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
  // Predicts one data row (`fields` as wide as the header; `line` for errors).
  // InvalidArgument "<source>:<line>: column 'c': ..." for a value that is not a finite
  // number (for a hypothesis column: not 0 or 1).
  absl::StatusOr<ModelPrediction> Predict(const std::vector<std::string>& fields, int64_t line,
                                          ModelRng* gen);

 private:
  FairModelRowReader(const FairModelApplier& applier, std::string source)
      : applier_(&applier), source_(std::move(source)) {}
  const FairModelApplier* applier_;
  std::string source_;
  std::vector<size_t> indices_;
  std::vector<double> values_;
};

}  // namespace fairvault::client

#endif  // FAIRVAULT_CLIENT_MODEL_APPLY_H_
