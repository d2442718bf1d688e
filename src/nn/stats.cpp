// activation_stats: float64 sums in index order.
#include "addnorm/nn/stats.hpp"

#include <algorithm>
#include <cmath>

namespace addnorm::nn {

ActivationStats activation_stats(ConstView x) {
  ActivationStats stats;
  const int64_t count = x.numel();
  if (count == 0 || x.shape.rank() == 0) return stats;
  const int64_t dim = x.shape[x.shape.rank() - 1];
  const int64_t rows = dim == 0 ? 0 : count / dim;
  double sum = 0, sum_squares = 0, token_norms = 0, max_abs = 0;
  for (int64_t row = 0; row < rows; ++row) {
    double row_squares = 0;
    for (int64_t j = 0; j < dim; ++j) {
      const double value = x.data[row * dim + j];
      sum += value;
      row_squares += value * value;
      max_abs = std::isnan(value) ? value : std::max(max_abs, std::fabs(value));
    }
    sum_squares += row_squares;
    token_norms += std::sqrt(row_squares);
  }
  const auto n = static_cast<double>(count);
  stats.mean = sum / n;
  // The spread from centred values (a second pass) so a large mean does not cancel it away.
  double centred = 0;
  for (int64_t i = 0; i < count; ++i) {
    const double deviation = x.data[i] - stats.mean;
    centred += deviation * deviation;
  }
  stats.std = std::sqrt(centred / n);
  stats.rms = std::sqrt(sum_squares / n);
  stats.mean_token_norm = rows == 0 ? 0 : token_norms / static_cast<double>(rows);
  stats.max_abs = max_abs;
  return stats;
}

}  // namespace addnorm::nn
