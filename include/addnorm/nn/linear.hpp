// Linear layer y = x W^T + b, with W stored [out, in] as in PyTorch, through cblas_sgemm.
#pragma once

#include <cstdint>
#include <string>

#include "addnorm/nn/parameter.hpp"
#include "addnorm/tensor.hpp"

namespace addnorm::nn {

class Linear {
 public:
  // Weights start at zero; the owner initialises them (see init.hpp).
  Linear(const std::string& name, int64_t in_features, int64_t out_features, bool with_bias = true);

  int64_t in_features() const { return in_features_; }
  int64_t out_features() const { return out_features_; }

  // x: [..., in] -> y: [..., out]. y is reshaped (reallocated) only when its shape differs.
  void forward(const Tensor& x, Tensor& y) const;
  // Accumulates dW += dy^T x and db += sum_rows dy; writes dx = dy W when dx is not null.
  void backward(const Tensor& x, const Tensor& dy, Tensor* dx);

  ParameterList parameters();

  Parameter weight;  // [out, in]
  Parameter bias;    // [out]; empty (rank 0, no values) when the layer has no bias

 private:
  int64_t in_features_;
  int64_t out_features_;
  bool has_bias_;
};

// Reshapes t to `shape` (zero-filled) unless it already has that shape.
void ensure_shape(Tensor& t, const Shape& shape);

}  // namespace addnorm::nn
