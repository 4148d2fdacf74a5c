// What an artifact has decided, by subject: the subject's row in the dataset's subject index
// indexes flat arrays of inputs and outputs, so that Decide looks a decision up in memory
// instead of by key in the database. The store keeps one batch per Decide call that decided
// someone new, in the packed form here (Encode): 20 bytes per decision, little-endian
// (uint32 subject row, float64 input, float64 output).
#ifndef FAIRVAULT_SERVER_APP_POSTPROCESS_DECISION_TABLE_H_
#define FAIRVAULT_SERVER_APP_POSTPROCESS_DECISION_TABLE_H_

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace fairvault::server {

class DecisionTable {
 public:
  struct Decision {
    int64_t subject = 0;  // row in the subject index
    double input = 0;     // the prediction, or the score's bin
    double output = 0;
  };

  bool Decided(int64_t subject) const {
    return subject >= 0 && subject < static_cast<int64_t>(output_.size()) &&
           !std::isnan(output_[subject]);
  }
  // Only for a decided subject.
  double Input(int64_t subject) const { return input_[subject]; }
  double Output(int64_t subject) const { return output_[subject]; }
  void Set(const Decision& d);

  // Stored batches read so far (the next one to store is batches() + 1).
  int64_t batches() const { return batches_; }
  // Applies stored batch number `batch` (the one after batches()). DataLoss if it is not a
  // whole number of records or a subject is decided twice.
  absl::Status ApplyBatch(int64_t batch, const std::string& payload);
  // Counts batch `batch` (just stored, its decisions already Set) as read.
  void MarkStored(int64_t batch) { batches_ = batch; }

  // The stored form of `decisions`.
  static std::string Encode(const std::vector<Decision>& decisions);
  // Memory held.
  int64_t Bytes() const { return static_cast<int64_t>(output_.capacity() * 2 * sizeof(double)); }

 private:
  std::vector<double> input_;
  std::vector<double> output_;  // NaN: not decided
  int64_t batches_ = 0;
};

}  // namespace fairvault::server

#endif  // FAIRVAULT_SERVER_APP_POSTPROCESS_DECISION_TABLE_H_
