// Small helpers the tour's sections share: moving values between float64 vectors (what the
// sections report) and float32 Tensors (what the ops take), and NumPy's mean and std.
#pragma once

#include <cmath>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "addnorm/tensor.hpp"

#include "lab/float_math.hpp"

namespace addnorm::tour {

// A float32 tensor holding `values` (each rounded to float32) with the given shape.
inline Tensor to_tensor(std::span<const double> values, const Shape& shape) {
  std::vector<float> floats;
  floats.reserve(values.size());
  for (double v : values) floats.push_back(static_cast<float>(v));
  return Tensor(shape, std::move(floats));
}

// A tensor's float32 values widened exactly to float64.
inline std::vector<double> to_doubles(const Tensor& tensor) {
  return {tensor.values().begin(), tensor.values().end()};
}

// np.mean: the sum divided by the count.
inline double mean_of(std::span<const double> values) {
  double sum = 0.0;
  for (double v : values) sum += v;
  return sum / static_cast<double>(values.size());
}

// np.var with its default ddof = 0: the population variance, centred on the mean first.
inline double variance_of(std::span<const double> values) {
  const double mean = mean_of(values);
  double sum = 0.0;
  for (double v : values) sum += (v - mean) * (v - mean);
  return sum / static_cast<double>(values.size());
}

inline double std_of(std::span<const double> values) {
  return std::sqrt(variance_of(values));
}

// x W (accumulated in float64, stored in float32) is lab::times_matrix (lab/float_math.hpp).
using lab::times_matrix;

// Column `col` of a rows x cols C-order matrix.
inline std::vector<double> column_of(std::span<const double> matrix, int64_t rows, int64_t cols,
                                     int64_t col) {
  std::vector<double> column;
  for (int64_t row = 0; row < rows; ++row)
    column.push_back(matrix[static_cast<size_t>(row * cols + col)]);
  return column;
}

// Row `row` of a rows x cols C-order matrix.
inline std::vector<double> row_of(std::span<const double> matrix, int64_t cols, int64_t row) {
  const auto begin = matrix.begin() + row * cols;
  return {begin, begin + cols};
}

}  // namespace addnorm::tour
