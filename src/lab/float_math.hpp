// Small float64 helpers the experiments share: NumPy's mean and population std over a float32
// tensor, and the product x W that a float32 model computes with float64 accumulation.
#pragma once

#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "addnorm/tensor.hpp"

namespace addnorm::lab {

struct MeanStd {
  double mean = 0.0;
  double std = 0.0;
};

// np.mean and np.std (ddof = 0, centred on the mean first) of a list of values.
template <class T>
MeanStd mean_std_of(std::span<const T> values) {
  double sum = 0.0;
  for (T v : values) sum += static_cast<double>(v);
  const double mean = sum / static_cast<double>(values.size());
  double squares = 0.0;
  for (T v : values) {
    const double deviation = static_cast<double>(v) - mean;
    squares += deviation * deviation;
  }
  return {mean, std::sqrt(squares / static_cast<double>(values.size()))};
}

inline MeanStd mean_std_of(const Tensor& tensor) {
  return mean_std_of<float>(std::span<const float>(tensor.values()));
}

// A float32 tensor holding `values`, each rounded to float32.
inline Tensor to_tensor(std::span<const double> values, const Shape& shape) {
  std::vector<float> floats(values.begin(), values.end());
  return Tensor(shape, std::move(floats));
}

// x W for x of shape [rows, in] and W (float64, C order) of shape [in, out]. Every output sums
// x[in] * W[in, out] over `in` in ascending order in float64 and is stored in float32; the loop
// runs over `out` innermost so that it vectorises without changing that order.
inline Tensor times_matrix(const Tensor& x, std::span<const double> weight, int64_t out_dim) {
  const int64_t rows = x.shape()[0], in_dim = x.shape()[1];
  Tensor result(Shape{rows, out_dim});
  std::vector<double> sums(static_cast<size_t>(out_dim));
  for (int64_t row = 0; row < rows; ++row) {
    std::fill(sums.begin(), sums.end(), 0.0);
    for (int64_t in = 0; in < in_dim; ++in) {
      const double value = static_cast<double>(x[row * in_dim + in]);
      const double* weight_row = weight.data() + in * out_dim;
      for (int64_t out = 0; out < out_dim; ++out)
        sums[static_cast<size_t>(out)] += value * weight_row[out];
    }
    for (int64_t out = 0; out < out_dim; ++out) {
      result[row * out_dim + out] = static_cast<float>(sums[static_cast<size_t>(out)]);
    }
  }
  return result;
}

}  // namespace addnorm::lab
