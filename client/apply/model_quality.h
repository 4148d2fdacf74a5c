// Whether a returned model is trivial, judged on the company's own rows without the vault
// (issue 22 §5): the share of each decided class, and with the company's labels the error
// beside the constant classifier's. `fairvault predict --label-column` prints it; the Python
// client's fairvault.models.trivial_model_warning says the same in the same words.
#ifndef FAIRVAULT_CLIENT_APPLY_MODEL_QUALITY_H_
#define FAIRVAULT_CLIENT_APPLY_MODEL_QUALITY_H_

#include <cstdint>
#include <map>
#include <string>

namespace fairvault::client {

// A model decides one class for (nearly) everyone when that class has at least this share of
// the rows' decisions.
inline constexpr double kTrivialShare = 0.99;

// Decisions (and labels) counted row by row.
class DecisionTally {
 public:
  void Add(int64_t decision) { ++decisions_[decision]; }
  void Add(int64_t decision, int64_t label) {
    Add(decision);
    ++labels_[label];
    errors_ += decision != label ? 1 : 0;
  }

  int64_t rows() const;
  bool has_labels() const { return !labels_.empty(); }
  // Rows whose decision differs from their label.
  int64_t errors() const { return errors_; }
  // Errors of the constant classifier deciding the most frequent label.
  int64_t constant_errors() const;
  const std::map<int64_t, int64_t>& decisions() const { return decisions_; }
  const std::map<int64_t, int64_t>& labels() const { return labels_; }

 private:
  std::map<int64_t, int64_t> decisions_, labels_;
  int64_t errors_ = 0;
};

// With labels, one line: "error on these rows: E (the constant classifier deciding C: E0)";
// "" without labels or rows.
std::string DescribeErrors(const DecisionTally& tally);

// A warning, or "" when none applies: the model decides one class for at least kTrivialShare of
// the rows, or (with labels) errs more often than the constant classifier.
std::string TrivialModelWarning(const DecisionTally& tally);

}  // namespace fairvault::client

#endif  // FAIRVAULT_CLIENT_APPLY_MODEL_QUALITY_H_
