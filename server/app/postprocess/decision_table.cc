// Packed decision batches and the in-memory table they fill.
#include "server/app/postprocess/decision_table.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"

namespace fairvault::server {

namespace {

constexpr size_t kRecordBytes = 4 + 8 + 8;

void PutLittleEndian(uint64_t v, int bytes, char* out) {
  for (int b = 0; b < bytes; ++b) out[b] = static_cast<char>((v >> (8 * b)) & 0xff);
}

uint64_t GetLittleEndian(const char* in, int bytes) {
  uint64_t v = 0;
  for (int b = bytes - 1; b >= 0; --b) v = (v << 8) | static_cast<unsigned char>(in[b]);
  return v;
}

uint64_t Bits(double d) {
  uint64_t v;
  std::memcpy(&v, &d, sizeof v);
  return v;
}

double FromBits(uint64_t v) {
  double d;
  std::memcpy(&d, &v, sizeof d);
  return d;
}

}  // namespace

void DecisionTable::Set(const Decision& d) {
  if (d.subject >= static_cast<int64_t>(output_.size())) {
    // Grown geometrically: the dataset's index only grows.
    const size_t size = std::max<size_t>(d.subject + 1, output_.size() * 3 / 2);
    input_.resize(size, 0);
    output_.resize(size, std::numeric_limits<double>::quiet_NaN());
  }
  input_[d.subject] = d.input;
  output_[d.subject] = d.output;
}

absl::Status DecisionTable::ApplyBatch(int64_t batch, const std::string& payload) {
  if (batch != batches_ + 1 || payload.size() % kRecordBytes != 0) {
    return absl::DataLossError(absl::StrCat("stored decision batch ", batch, " is corrupt"));
  }
  for (size_t at = 0; at < payload.size(); at += kRecordBytes) {
    const char* p = payload.data() + at;
    const Decision d{static_cast<int64_t>(GetLittleEndian(p, 4)),
                     FromBits(GetLittleEndian(p + 4, 8)), FromBits(GetLittleEndian(p + 12, 8))};
    if (Decided(d.subject) || std::isnan(d.output)) {
      return absl::DataLossError(absl::StrCat("stored decision batch ", batch, " is corrupt"));
    }
    Set(d);
  }
  batches_ = batch;
  return absl::OkStatus();
}

std::string DecisionTable::Encode(const std::vector<Decision>& decisions) {
  std::string out(decisions.size() * kRecordBytes, '\0');
  char* p = out.data();
  for (const Decision& d : decisions) {
    PutLittleEndian(static_cast<uint64_t>(d.subject), 4, p);
    PutLittleEndian(Bits(d.input), 8, p + 4);
    PutLittleEndian(Bits(d.output), 8, p + 12);
    p += kRecordBytes;
  }
  return out;
}

}  // namespace fairvault::server
