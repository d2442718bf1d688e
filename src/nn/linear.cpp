// Linear through cblas_sgemm. Rows are every leading index of x; W is [out, in] (PyTorch).
#include "addnorm/nn/linear.hpp"

#include <algorithm>
#include <span>
#include <string>
#include <vector>

#include "addnorm/error.hpp"
#include "matmul.hpp"

namespace addnorm::nn {

void ensure_shape(Tensor& t, const Shape& shape) {
  if (!(t.shape() == shape)) t = Tensor(shape);
}

namespace {

Shape with_last(const Shape& shape, int64_t last) {
  std::vector<int64_t> dims(shape.dims().begin(), shape.dims().end());
  dims.back() = last;
  return Shape(std::span<const int64_t>(dims));
}

}  // namespace

Linear::Linear(const std::string& name, int64_t in_features, int64_t out_features, bool with_bias)
    : weight(name + ".weight", Shape{out_features, in_features}),
      bias(with_bias ? Parameter(name + ".bias", Shape{out_features}) : Parameter()),
      in_features_(in_features),
      out_features_(out_features),
      has_bias_(with_bias) {
  if (in_features < 1 || out_features < 1) {
    throw Error(name + ": in_features and out_features must be >= 1, got " +
                std::to_string(in_features) + " and " + std::to_string(out_features));
  }
}

void Linear::forward(const Tensor& x, Tensor& y) const {
  const Shape& shape = x.shape();
  if (shape.rank() < 1 || shape[shape.rank() - 1] != in_features_) {
    throw Error(weight.name + ": x has shape " + shape.to_string() + ", expected last dim " +
                std::to_string(in_features_));
  }
  const int64_t rows = x.numel() / in_features_;
  ensure_shape(y, with_last(shape, out_features_));
  float beta = 0.0f;
  if (has_bias_) {
    // Start every row at the bias and let sgemm add x W^T to it.
    for (int64_t row = 0; row < rows; ++row) {
      std::copy(bias.value.data(), bias.value.data() + out_features_,
                y.data() + row * out_features_);
    }
    beta = 1.0f;
  }
  if (rows == 0) return;
  detail::matmul(false, true, rows, out_features_, in_features_, 1.0f, x.data(), in_features_,
                 weight.value.data(), in_features_, beta, y.data(), out_features_);
}

void Linear::backward(const Tensor& x, const Tensor& dy, Tensor* dx) {
  const int64_t rows = x.numel() / in_features_;
  if (dy.numel() != rows * out_features_) {
    throw Error(weight.name + ": dy has shape " + dy.shape().to_string() +
                ", expected the forward output's shape");
  }
  if (rows == 0) return;
  const int64_t m = out_features_, n = in_features_, k = rows;
  // dW += dy^T x: [out, rows] x [rows, in].
  detail::matmul(true, false, m, n, k, 1.0f, dy.data(), m, x.data(), n, 1.0f, weight.grad.data(),
                 n);
  if (has_bias_) {
    // db += sum over rows of dy, row by row so the order never depends on threads.
    float* db = bias.grad.data();
    for (int64_t row = 0; row < rows; ++row) {
      const float* dy_row = dy.data() + row * out_features_;
      for (int64_t j = 0; j < out_features_; ++j) db[j] += dy_row[j];
    }
  }
  if (dx != nullptr) {
    ensure_shape(*dx, x.shape());
    // dx = dy W: [rows, out] x [out, in].
    detail::matmul(false, false, k, n, m, 1.0f, dy.data(), m, weight.value.data(), n, 0.0f,
                   dx->data(), n);
  }
}

ParameterList Linear::parameters() {
  ParameterList list{&weight};
  if (has_bias_) list.push_back(&bias);
  return list;
}

}  // namespace addnorm::nn
