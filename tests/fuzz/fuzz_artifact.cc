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
//   * an accepted mixture or network applies as the server's own evaluation does: the same
//     preprocessed values, each component's decision (core::learn::Decide) and a network's class
//     probabilities (core::learn::Network, for the shapes its learners train), within a rounding
//     bound computed from the magnitudes (see "The server's own evaluation" below);
//   * an accepted equalized-odds artifact decides 0 or 1 for each of its groups and refuses an
//     unknown group with InvalidArgument.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "Eigen/Dense"
#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "client/apply/artifact_files.h"
#include "client/apply/model_apply.h"
#include "core/learn/fair_game.h"
#include "core/learn/game_data.h"
#include "core/learn/network.h"
#include "google/protobuf/util/json_util.h"
#include "tests/fuzz/fuzz_contract.h"

namespace {

using fairvault::fuzz::Fail;
namespace client = fairvault::client;
namespace learn = fairvault::core::learn;
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
  // Values that differ from column to column, so that a permutation or a dropped feature shows.
  for (double v : {0.75, 1e300}) {
    std::vector<double> row(width);
    for (size_t j = 0; j < width; ++j) row[j] = v * static_cast<double>(1 + j % 7) * (j % 3 ? 1 : -1);
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

// ---- The server's own evaluation of the same model ----------------------------------------
// What the server computes with a model it trained: the mixture learners' classifiers decide 1
// iff x·w > 0 (core::learn::Decide on the rows BuildFeatureMatrix preprocesses, the same values
// as BuildGameData's), and the stochastic learners' networks give class probabilities
// (core::learn::Network::ForwardRange). Eigen may add in another order than the applier's index
// order, so the two must agree within a rounding bound computed from the magnitudes involved
// (Higham's γ_n: a sum of n products in any order is off by at most γ_n · Σ|w||x|), propagated
// through the layers; a decision must agree wherever that bound cannot flip it. A model the
// server could not have produced (a network shape its learners do not train, a bias on the
// first layer) has no server evaluation to compare with.

constexpr double kUnit = 0x1p-53;  // unit roundoff of double
const double kSubnormal = std::numeric_limits<double>::denorm_min();

double Gamma(int64_t n) { return static_cast<double>(n) * kUnit / (1 - n * kUnit); }

// The test rows as the server reads a table's columns: one span per feature over every row.
struct ServerRows {
  std::vector<std::vector<double>> columns;
  std::vector<int64_t> rows;
  learn::RowMatrix x;  // BuildFeatureMatrix's result
};

ServerRows ServerFeatures(const v1::FairModel& model,
                                         const std::vector<std::vector<double>>& rows) {
  ServerRows out;
  const size_t width = rows[0].size();
  out.columns.assign(width, std::vector<double>(rows.size()));
  for (size_t i = 0; i < rows.size(); ++i) {
    for (size_t j = 0; j < width; ++j) out.columns[j][i] = rows[i][j];
    out.rows.push_back(static_cast<int64_t>(i));
  }
  learn::FeatureColumns features;
  for (const std::vector<double>& c : out.columns) features.columns.emplace_back(c);
  features.rows = out.rows;
  absl::StatusOr<learn::RowMatrix> x =
      learn::BuildFeatureMatrix(features, model.features().clip_l1(), model.features().intercept());
  if (!x.ok()) Fail("the server's preprocessing refused finite rows", x.status().ToString());
  out.x = *std::move(x);
  return out;
}

// The bound on |client − server| for each preprocessed value of `row` (both take the L1 norm
// of d values, divide and multiply once), after checking the two agree within it. Empty when
// the row's norm is too near overflow for a relative bound.
std::optional<Eigen::VectorXd> CheckPreprocessing(const client::FairModelApplier& applier,
                                                  const std::vector<double>& row,
                                                  const learn::RowMatrix& server, int64_t i) {
  double l1 = 0;
  for (double v : row) l1 += std::abs(v);
  if (!(l1 <= 0x1p1000)) return std::nullopt;
  absl::StatusOr<std::vector<double>> x = applier.Preprocess(row);
  if (!x.ok()) Fail("Preprocess refused a finite row", x.status().ToString());
  if (static_cast<Eigen::Index>(x->size()) != server.cols()) {
    Fail("the server's preprocessing", "has another width than the applier's");
  }
  Eigen::VectorXd bound(x->size());
  const double relative = 2 * Gamma(static_cast<int64_t>(row.size()) + 2);
  for (size_t j = 0; j < x->size(); ++j) {
    // A clipping scale clip_l1/‖x‖₁ below DBL_MIN is subnormal: off by up to one denorm_min.
    const double raw = j < row.size() ? std::abs(row[j]) : 0.0;
    bound(j) = relative * std::abs((*x)[j]) + kSubnormal + 2 * raw * kSubnormal;
    if (std::abs((*x)[j] - server(i, j)) > bound(j)) {
      Fail("the server preprocesses a row differently",
           absl::StrFormat("value %d: applier %.17g, server %.17g", j, (*x)[j], server(i, j)));
    }
  }
  return bound;
}

void CheckMixtureAgainstServer(const v1::FairModel& model, const client::FairModelApplier& applier,
                               const std::vector<std::vector<double>>& rows) {
  const ServerRows server = ServerFeatures(model, rows);
  learn::GameData data;  // what Decide reads: the preprocessed rows
  data.n = static_cast<int64_t>(rows.size());
  data.d = static_cast<int>(server.x.cols());
  data.x = std::make_shared<const Eigen::MatrixXd>(server.x);
  std::vector<std::optional<Eigen::VectorXd>> errors;  // each row's preprocessing bound
  for (size_t i = 0; i < rows.size(); ++i) {
    errors.push_back(CheckPreprocessing(applier, rows[i], server.x, static_cast<int64_t>(i)));
  }
  for (int c = 0; c < model.components_size(); ++c) {
    const auto& weights = model.components(c).weights();
    const Eigen::VectorXd w = Eigen::Map<const Eigen::VectorXd>(weights.data(), weights.size());
    const std::vector<uint8_t> decided = learn::Decide(data, w);
    if (decided.size() != rows.size()) Fail("the server's Decide", "gave no decision per row");
    // The component alone, as the applier decides it (one component: no draw).
    v1::FairModel alone;
    *alone.mutable_features() = model.features();
    *alone.add_components() = model.components(c);
    absl::StatusOr<client::FairModelApplier> one = client::FairModelApplier::Create(alone);
    if (!one.ok()) Fail("one component of an accepted mixture", one.status().ToString());
    for (size_t i = 0; i < rows.size(); ++i) {
      const std::optional<Eigen::VectorXd>& e0 = errors[i];
      if (!e0.has_value()) continue;
      // The margin's size and its rounding bound (from the server's values: within e0 of ours).
      const Eigen::VectorXd x = server.x.row(static_cast<Eigen::Index>(i)).transpose();
      const double margin = x.dot(w);
      const double bound = 4 * (2 * Gamma(w.size()) * x.cwiseAbs().dot(w.cwiseAbs()) +
                                w.cwiseAbs().dot(*e0) + 2 * w.size() * kSubnormal);
      if (!std::isfinite(bound) || std::abs(margin) <= bound) continue;  // may flip either way
      client::ModelRng gen(1);
      absl::StatusOr<client::ModelPrediction> p = one->Predict(rows[i], &gen);
      if (!p.ok()) Fail("a component refused a finite row", p.status().ToString());
      if (p->decision != decided[i]) {
        Fail("the server decides a component differently",
             absl::StrCat("component ", c, ", row ", i, ": applier ", p->decision, ", server ",
                          static_cast<int>(decided[i]), " (margin ", margin, ")"));
      }
    }
  }
}

// The network as the stochastic learners hold it, or nothing if they could not have trained
// this one: layers[0] without bias (the intercept input plays it), at most two hidden layers of
// at most 512 units, at most 64 logits.
std::optional<learn::Network> ServerNetwork(const v1::NeuralModel& network) {
  learn::NetworkShape shape;
  shape.inputs = network.layers(0).inputs();
  for (int l = 0; l + 1 < network.layers_size(); ++l) shape.hidden.push_back(network.layers(l).outputs());
  shape.outputs = network.layers(network.layers_size() - 1).outputs();
  if (!shape.Validate().ok()) return std::nullopt;
  for (double b : network.layers(0).bias()) {
    if (b != 0) return std::nullopt;
  }
  learn::Network net(shape);
  if (net.params().size() != shape.NumParams()) Fail("Network", "has another parameter count");
  // The learner's layout: each layer's weights (row-major), then its bias (none on layer 0).
  Eigen::Index at = 0;
  for (int l = 0; l < network.layers_size(); ++l) {
    const v1::DenseLayer& layer = network.layers(l);
    for (double v : layer.weights()) net.params()(at++) = v;
    if (shape.HasBias(l)) {
      for (int o = 0; o < layer.outputs(); ++o) {
        net.params()(at++) = layer.bias().empty() ? 0.0 : layer.bias(o);
      }
    }
  }
  // The layout filled above is the one Weights() reads (and the artifact writer,
  // server/app/models/stochastic_job.cc, reads through it): a check of this fuzzer's own
  // assumption, not of the writer.
  for (int l = 0; l < network.layers_size(); ++l) {
    const v1::DenseLayer& layer = network.layers(l);
    const auto w = net.Weights(l);
    for (int o = 0; o < layer.outputs(); ++o) {
      for (int in = 0; in < layer.inputs(); ++in) {
        if (w(o, in) != layer.weights(o * layer.inputs() + in)) {
          Fail("the server network's layout", "does not read back as the artifact");
        }
      }
    }
  }
  return net;
}

void CheckNetworkAgainstServer(const v1::FairModel& model, const client::FairModelApplier& applier,
                               const std::vector<std::vector<double>>& rows) {
  std::optional<learn::Network> net = ServerNetwork(model.network());
  if (!net.has_value()) return;
  const ServerRows server = ServerFeatures(model, rows);
  net->ForwardRange(server.x, 0, server.x.rows());
  const learn::RowMatrix& probabilities = net->probabilities();
  const int classes = net->shape().classes();
  for (size_t i = 0; i < rows.size(); ++i) {
    std::optional<Eigen::VectorXd> e = CheckPreprocessing(applier, rows[i], server.x, i);
    if (!e.has_value()) continue;
    absl::StatusOr<client::ModelPrediction> p = applier.Predict(rows[i], nullptr);
    if (!p.ok()) continue;  // a row whose activations overflow: the applier refuses it
    // Magnitudes of the absolute-value network bound |activations|; errors propagate through
    // |W| (ReLU is 1-Lipschitz) plus each layer's own rounding.
    Eigen::VectorXd magnitude = server.x.row(static_cast<Eigen::Index>(i)).transpose().cwiseAbs();
    for (int l = 0; l < net->shape().layers(); ++l) {
      const Eigen::MatrixXd w = net->Weights(l).cwiseAbs();
      Eigen::VectorXd next = w * magnitude;
      if (net->shape().HasBias(l)) next += net->Bias(l).cwiseAbs();
      const int terms = net->shape().LayerInputs(l) + 1;
      *e = w * *e + 2 * Gamma(terms) * next +
           Eigen::VectorXd::Constant(next.size(), 2 * terms * kSubnormal);
      magnitude = std::move(next);
    }
    const double logit_error = 4 * e->maxCoeff();
    if (!std::isfinite(logit_error)) continue;
    // Sigmoid and softmax move a probability by at most the logits' largest change; exp,
    // the sum and the division add a few roundings each.
    const double tolerance = logit_error + 8 * (classes + 4) * kUnit;
    std::vector<double> ours(classes);
    if (net->shape().outputs == 1) {
      ours = {1 - p->p_positive, p->p_positive};
    } else {
      ours = p->class_probabilities;
    }
    int top = 0;
    for (int k = 0; k < classes; ++k) {
      const double theirs = probabilities(static_cast<Eigen::Index>(i), k);
      if (!(std::abs(ours[k] - theirs) <= tolerance)) {
        Fail("the server's network gives another probability",
             absl::StrFormat("row %d, class index %d: applier %.17g, server %.17g (tolerance %g)", i,
                             k, ours[k], theirs, tolerance));
      }
      if (k > 0 && theirs > probabilities(static_cast<Eigen::Index>(i), top)) top = k;
    }
    double runner_up = 0;
    for (int k = 0; k < classes; ++k) {
      if (k != top) runner_up = std::max(runner_up, probabilities(static_cast<Eigen::Index>(i), k));
    }
    // The server's most probable class, where no rounding can change which one it is.
    if (probabilities(static_cast<Eigen::Index>(i), top) - runner_up > 2 * tolerance + 1e-12 &&
        p->decision != applier.classes()[top]) {
      Fail("the network decides against the server's most probable class",
           absl::StrCat("row ", i, ": applier ", p->decision, ", server class index ", top));
    }
  }
}

void CheckAgainstServer(const v1::FairModel& model, const client::FairModelApplier& applier) {
  const std::vector<std::vector<double>> rows = RowsFor(applier);
  if (applier.kind() == client::FairModelApplier::Kind::kMixture) {
    CheckMixtureAgainstServer(model, applier, rows);
  } else if (applier.is_network()) {
    CheckNetworkAgainstServer(model, applier, rows);
  }
}

void FuzzFairModel(absl::string_view file) {
  absl::StatusOr<v1::FairModel> model = client::ParseFairModelArtifact(file, "fuzz");
  if (!model.ok()) return ExpectRefusal(model.status(), "an unread file");
  absl::StatusOr<client::FairModelApplier> applier = client::FairModelApplier::Create(*model);
  if (!applier.ok()) return ExpectRefusal(applier.status(), "an invalid model");
  const std::string applied = Apply(*applier);
  CheckAgainstServer(*model, *applier);

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
