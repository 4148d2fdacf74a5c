// Fuzzes reading an artifact file back and applying it locally (client/apply: what `predict
// --artifact-file` and `apply-eo --artifact` do with a file someone else may have written). The
// input's first byte picks the kind (even: a fair model, JSON or binary protobuf; odd: an
// equalized-odds post-processor, JSON), the rest is the file. Whatever it is:
//   * a file that is not an artifact of that kind, or a model that fails validation, is refused
//     with InvalidArgument and a message;
//   * an accepted fair model applies to fixed rows within its contract: p_positive in [0, 1]
//     (a mixture's exactly k/m or its weights' sum), a decision among its classes that the same
//     seed repeats, a network's class probabilities summing to 1, and a refusal of a row only as
//     InvalidArgument; written back as binary protobuf and as JSON it reads and applies the same;
//   * an accepted equalized-odds artifact decides 0 or 1 for each of its groups and refuses an
//     unknown group with InvalidArgument.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "client/apply/artifact_files.h"
#include "client/apply/model_apply.h"
#include "google/protobuf/util/json_util.h"
#include "tests/fuzz/fuzz_contract.h"

namespace {

using fairvault::fuzz::Fail;
namespace client = fairvault::client;
namespace v1 = fairvault::v1;

void ExpectRefusal(const absl::Status& status, const char* what) {
  if (status.code() != absl::StatusCode::kInvalidArgument || status.message().empty()) {
    Fail(what, status.ToString());
  }
}

// The rows every accepted model is applied to: ordinary, zero, negative and huge values (for a
// hypothesis column, its 0/1 values).
std::vector<std::vector<double>> RowsFor(const client::FairModelApplier& applier) {
  const size_t width = applier.input_columns().size();
  if (applier.is_hypothesis()) return {{0.0}, {1.0}};
  std::vector<std::vector<double>> rows;
  for (double v : {0.0, 1.0, -0.5, 3.25, 1e300, -1e-300}) {
    std::vector<double> row(width);
    for (size_t j = 0; j < width; ++j) row[j] = j % 2 == 0 ? v : -v / 2;
    rows.push_back(std::move(row));
  }
  return rows;
}

// What one row gives, as comparable values (bit patterns of the probabilities).
std::string Outcome(const client::FairModelApplier& applier, const std::vector<double>& row,
                    uint64_t seed) {
  client::ModelRng gen(seed);
  absl::StatusOr<client::ModelPrediction> drawn = applier.Predict(row, &gen);
  absl::StatusOr<client::ModelPrediction> plain = applier.Predict(row, nullptr);
  if (drawn.ok() != plain.ok()) Fail("Predict", "refuses a row with a generator and not without");
  if (!drawn.ok()) {
    ExpectRefusal(drawn.status(), "a row refused other than as InvalidArgument");
    return absl::StrCat("refused: ", drawn.status().message());
  }
  const client::ModelPrediction& p = *drawn;
  const std::vector<int>& classes = applier.classes();
  bool known = false;
  for (int c : classes) known |= c == p.decision;
  if (!known) Fail("a decision outside the model's classes", absl::StrCat(p.decision));
  if (applier.is_multiclass()) {
    if (p.class_probabilities.size() != classes.size()) Fail("class_probabilities", "size");
    double total = 0;
    for (double q : p.class_probabilities) {
      if (!(q >= 0 && q <= 1)) Fail("a class probability outside [0, 1]", absl::StrCat(q));
      total += q;
    }
    if (std::abs(total - 1) > 1e-9) Fail("class probabilities sum to", absl::StrCat(total));
  } else {
    if (!(p.p_positive >= 0 && p.p_positive <= 1)) {
      Fail("p_positive outside [0, 1]", absl::StrCat(p.p_positive));
    }
    if (std::memcmp(&p.p_positive, &plain->p_positive, sizeof(double)) != 0) {
      Fail("p_positive", "depends on the generator");
    }
    if ((p.p_positive == 0 && p.decision != 0) || (p.p_positive == 1 && p.decision != 1)) {
      Fail("a decision against a certain probability", absl::StrCat(p.p_positive));
    }
    if (applier.kind() == client::FairModelApplier::Kind::kMixture &&
        applier.num_components() > 0 && plain->decision != -1) {
      Fail("a mixture decided without a generator", "");
    }
  }
  if (applier.is_network() && plain->decision != p.decision) {
    Fail("a network's decision", "depends on the generator");
  }
  std::string out = absl::StrCat(p.decision);
  for (double q : p.class_probabilities) absl::StrAppend(&out, ",", q);
  uint64_t bits;
  std::memcpy(&bits, &p.p_positive, sizeof bits);
  absl::StrAppend(&out, ";", bits);
  return out;
}

std::string Apply(const client::FairModelApplier& applier) {
  std::string all;
  for (const std::vector<double>& row : RowsFor(applier)) {
    const std::string once = Outcome(applier, row, 7);
    if (Outcome(applier, row, 7) != once) Fail("the same seed", "gave another decision");
    absl::StrAppend(&all, once, "|");
  }
  return all;
}

void FuzzFairModel(absl::string_view file) {
  absl::StatusOr<v1::FairModel> model = client::ParseFairModelArtifact(file, "fuzz");
  if (!model.ok()) return ExpectRefusal(model.status(), "an unread file");
  absl::StatusOr<client::FairModelApplier> applier = client::FairModelApplier::Create(*model);
  if (!applier.ok()) return ExpectRefusal(applier.status(), "an invalid model");
  const std::string applied = Apply(*applier);

  // Written back as `artifact get --out` writes it (JSON) and as binary, it reads the same.
  v1::Artifact artifact;
  *artifact.mutable_fair_model() = *model;
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  if (!google::protobuf::util::MessageToJsonString(artifact, &json, options).ok()) {
    // JSON has no NaN or infinities for weights; Create refuses those, so this cannot happen.
    Fail("an accepted model", "does not print as JSON");
  }
  for (const std::string& again : {json, artifact.SerializeAsString()}) {
    absl::StatusOr<v1::FairModel> reread = client::ParseFairModelArtifact(again, "again");
    if (!reread.ok()) Fail("an accepted model written back", reread.status().ToString());
    absl::StatusOr<client::FairModelApplier> twin = client::FairModelApplier::Create(*reread);
    if (!twin.ok()) Fail("an accepted model read back", twin.status().ToString());
    if (Apply(*twin) != applied) Fail("an accepted model read back", "applies differently");
  }
}

void FuzzEqualizedOdds(absl::string_view file) {
  absl::StatusOr<client::EqualizedOddsApplier> applier =
      client::ParseEqualizedOddsArtifact(file, "fuzz");
  if (!applier.ok()) return ExpectRefusal(applier.status(), "an unread EO file");
  absl::BitGen gen;  // decisions are coins; only their range is checked
  for (const std::string& group : applier->groups()) {
    for (int input = 0; input < 2; ++input) {
      absl::StatusOr<int> d = applier->takes_scores()
                                  ? applier->DecideScore(input == 0 ? -1e308 : 0.5, group, gen)
                                  : applier->Decide(input, group, gen);
      if (!d.ok()) Fail("a known group refused", d.status().ToString());
      if (*d != 0 && *d != 1) Fail("a decision that is not 0 or 1", absl::StrCat(*d));
    }
  }
  const std::string unknown = absl::StrCat("\x01", "not a group of ", applier->groups().size());
  absl::StatusOr<int> d = applier->takes_scores() ? applier->DecideScore(0.5, unknown, gen)
                                                  : applier->Decide(1, unknown, gen);
  if (d.ok()) Fail("an unknown group", "was decided");
  ExpectRefusal(d.status(), "an unknown group refused other than as InvalidArgument");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > 64 * 1024) return 0;
  const absl::string_view file(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) {
    FuzzFairModel(file);
  } else {
    FuzzEqualizedOdds(file);
  }
  return 0;
}
