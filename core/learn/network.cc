#include "core/learn/network.h"

#include <algorithm>
#include <cmath>

#include "absl/random/distributions.h"
#include "absl/strings/str_cat.h"

namespace fairvault::core::learn {
namespace {

constexpr int kMaxHiddenLayers = 2;
constexpr int kMaxWidth = 512;

double Sigmoid(double z) {
  return z >= 0 ? 1 / (1 + std::exp(-z)) : std::exp(z) / (1 + std::exp(z));
}

}  // namespace

int64_t NetworkShape::NumParams() const {
  int64_t total = 0;
  for (int l = 0; l < layers(); ++l) {
    total += static_cast<int64_t>(LayerInputs(l)) * LayerOutputs(l);
    if (HasBias(l)) total += LayerOutputs(l);
  }
  return total;
}

absl::Status NetworkShape::Validate() const {
  if (inputs < 1) return absl::InvalidArgumentError("a model needs at least one input");
  if (static_cast<int>(hidden.size()) > kMaxHiddenLayers) {
    return absl::InvalidArgumentError(
        absl::StrCat("hidden_units: at most ", kMaxHiddenLayers, " hidden layers"));
  }
  for (int h : hidden) {
    if (h < 1 || h > kMaxWidth) {
      return absl::InvalidArgumentError(
          absl::StrCat("hidden_units: each width must be in 1..", kMaxWidth, " (got ", h, ")"));
    }
  }
  if (outputs < 1 || outputs > kMaxClasses) {
    return absl::InvalidArgumentError(
        absl::StrCat("a model has 1 (binary) to ", kMaxClasses, " outputs (got ", outputs, ")"));
  }
  return absl::OkStatus();
}

Network::Network(NetworkShape shape) : shape_(std::move(shape)) {
  int64_t offset = 0;
  for (int l = 0; l < shape_.layers(); ++l) {
    offsets_.push_back(offset);
    offset += static_cast<int64_t>(shape_.LayerInputs(l)) * shape_.LayerOutputs(l);
    if (shape_.HasBias(l)) offset += shape_.LayerOutputs(l);
  }
  params_.setZero(offset);
  inputs_.resize(shape_.layers());
  outputs_.resize(shape_.layers());
  deltas_.resize(shape_.layers());
}

Eigen::Map<const RowMatrix> Network::Weights(int layer) const {
  return Eigen::Map<const RowMatrix>(params_.data() + offsets_[layer], shape_.LayerOutputs(layer),
                                     shape_.LayerInputs(layer));
}

Eigen::Map<const Eigen::VectorXd> Network::Bias(int layer) const {
  const int64_t weights =
      static_cast<int64_t>(shape_.LayerOutputs(layer)) * shape_.LayerInputs(layer);
  return Eigen::Map<const Eigen::VectorXd>(params_.data() + offsets_[layer] + weights,
                                           shape_.HasBias(layer) ? shape_.LayerOutputs(layer) : 0);
}

void Network::Initialize(absl::BitGenRef gen) {
  params_.setZero();
  if (shape_.hidden.empty()) return;
  for (int l = 0; l < shape_.layers(); ++l) {
    const double limit = std::sqrt(6.0 / shape_.LayerInputs(l));
    const int64_t count = static_cast<int64_t>(shape_.LayerInputs(l)) * shape_.LayerOutputs(l);
    for (int64_t j = 0; j < count; ++j) {
      params_(offsets_[l] + j) = absl::Uniform<double>(gen, -limit, limit);
    }
  }
}

void Network::Forward(const RowMatrix& x, absl::Span<const int64_t> rows) {
  RowMatrix& h = inputs_[0];
  h.resize(static_cast<Eigen::Index>(rows.size()), shape_.inputs);
  for (size_t i = 0; i < rows.size(); ++i) h.row(static_cast<Eigen::Index>(i)) = x.row(rows[i]);
  ForwardRange(h, 0, h.rows());
}

void Network::ForwardRange(const RowMatrix& x, int64_t start, int64_t count) {
  if (&x != &inputs_[0]) inputs_[0] = x.middleRows(start, count);
  const Eigen::Index b = inputs_[0].rows();
  for (int l = 0; l < shape_.layers(); ++l) {
    RowMatrix& z = outputs_[l];
    z.resize(b, shape_.LayerOutputs(l));
    z.noalias() = inputs_[l] * Weights(l).transpose();
    if (shape_.HasBias(l)) z.rowwise() += Bias(l).transpose();
    if (l + 1 < shape_.layers()) inputs_[l + 1] = z.cwiseMax(0.0);
  }
  const RowMatrix& logits = outputs_.back();
  probabilities_.resize(b, shape_.classes());
  if (shape_.outputs == 1) {
    for (Eigen::Index i = 0; i < b; ++i) {
      const double s = Sigmoid(logits(i, 0));
      probabilities_(i, 0) = 1 - s;
      probabilities_(i, 1) = s;
    }
  } else {
    for (Eigen::Index i = 0; i < b; ++i) {
      const double top = logits.row(i).maxCoeff();
      probabilities_.row(i) = (logits.row(i).array() - top).exp();
      probabilities_.row(i) /= probabilities_.row(i).sum();
    }
  }
}

void Network::LogitCotangent(const RowMatrix& cot) {
  const Eigen::Index b = probabilities_.rows();
  RowMatrix& dz = deltas_.back();
  dz.resize(b, shape_.outputs);
  if (shape_.outputs == 1) {
    for (Eigen::Index i = 0; i < b; ++i) {
      const double s = probabilities_(i, 1);
      dz(i, 0) = s * (1 - s) * (cot(i, 1) - cot(i, 0));
    }
  } else {
    for (Eigen::Index i = 0; i < b; ++i) {
      const double mean = cot.row(i).dot(probabilities_.row(i));
      dz.row(i) = probabilities_.row(i).array() * (cot.row(i).array() - mean);
    }
  }
}

void Network::BackpropDeltas() {
  for (int l = shape_.layers() - 1; l >= 1; --l) {
    RowMatrix& below = deltas_[l - 1];
    below.noalias() = deltas_[l] * Weights(l);
    below.array() *= (outputs_[l - 1].array() > 0).cast<double>();
  }
}

void Network::AccumulateGradient(const Eigen::VectorXd* scale, Eigen::VectorXd* out) const {
  for (int l = 0; l < shape_.layers(); ++l) {
    const int rows = shape_.LayerOutputs(l), cols = shape_.LayerInputs(l);
    Eigen::Map<RowMatrix> grad(out->data() + offsets_[l], rows, cols);
    if (scale == nullptr) {
      grad.noalias() += deltas_[l].transpose() * inputs_[l];
    } else {
      grad.noalias() +=
          (deltas_[l].array().colwise() * scale->array()).matrix().transpose() * inputs_[l];
    }
    if (shape_.HasBias(l)) {
      Eigen::Map<Eigen::VectorXd> bias(
          out->data() + offsets_[l] + static_cast<int64_t>(rows) * cols, rows);
      if (scale == nullptr) {
        bias += deltas_[l].colwise().sum().transpose();
      } else {
        bias += deltas_[l].transpose() * *scale;
      }
    }
  }
}

void Network::AddExactGradient(const RowMatrix& exact_cot, absl::Span<const int> labels,
                               Eigen::VectorXd* exact) {
  LogitCotangent(exact_cot);
  RowMatrix& dz = deltas_.back();
  if (!labels.empty()) {
    // Cross-entropy's gradient on the logits: F − onehot(y) (binary: σ − y).
    for (Eigen::Index i = 0; i < dz.rows(); ++i) {
      if (shape_.outputs == 1) {
        dz(i, 0) += probabilities_(i, 1) - labels[i];
      } else {
        dz.row(i) += probabilities_.row(i);
        dz(i, labels[i]) -= 1;
      }
    }
  }
  BackpropDeltas();
  AccumulateGradient(nullptr, exact);
}

int64_t Network::ClippedGradientSum(const RowMatrix& private_cot, double clip,
                                    Eigen::VectorXd* clipped) {
  LogitCotangent(private_cot);
  BackpropDeltas();
  const Eigen::Index b = probabilities_.rows();
  row_norm2_.setZero(b);
  for (int l = 0; l < shape_.layers(); ++l) {
    Eigen::VectorXd input_norm2 = inputs_[l].rowwise().squaredNorm();
    if (shape_.HasBias(l)) input_norm2.array() += 1;
    row_norm2_.array() += deltas_[l].rowwise().squaredNorm().array() * input_norm2.array();
  }
  row_scale_.resize(b);
  int64_t scaled = 0;
  bool dropped = false;
  for (Eigen::Index i = 0; i < b; ++i) {
    const double norm = std::sqrt(row_norm2_(i));
    if (!std::isfinite(norm)) {
      // An overflowing row contributes nothing (norm 0 <= clip), so the sum stays finite and
      // within the sensitivity whatever the row's group: no failure can depend on it.
      row_scale_(i) = 0;
      dropped = true;
      ++scaled;
    } else {
      // min(1, clip/norm) without a branch on the norm: the same work for every row.
      row_scale_(i) = clip / std::max(norm, clip);
      scaled += norm > clip ? 1 : 0;
    }
  }
  if (dropped) {
    for (int l = 0; l < shape_.layers(); ++l) {
      for (Eigen::Index i = 0; i < b; ++i) {
        if (row_scale_(i) == 0) deltas_[l].row(i).setZero();
      }
      inputs_[l] = inputs_[l].unaryExpr([](double v) { return std::isfinite(v) ? v : 0.0; });
    }
  }
  clipped->setZero(params_.size());
  AccumulateGradient(&row_scale_, clipped);
  return scaled;
}

}  // namespace fairvault::core::learn
