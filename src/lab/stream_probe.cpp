// Token cosine similarity and norm input/output sizes (see stream_probe.hpp).
#include "lab/stream_probe.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "addnorm/error.hpp"

namespace addnorm::lab {

double mean_token_cosine(const Tensor& x) {
  if (x.shape().rank() != 3) {
    throw Error("token cosine: x has shape " + x.shape().to_string() +
                ", expected [batch, seq, d]");
  }
  const int64_t batch = x.shape()[0], seq = x.shape()[1], dim = x.shape()[2];
  if (seq < 2) return std::numeric_limits<double>::quiet_NaN();
  double sum = 0.0;
  std::vector<double> norms(static_cast<size_t>(seq));
  for (int64_t b = 0; b < batch; ++b) {
    const float* tokens = x.data() + b * seq * dim;
    for (int64_t i = 0; i < seq; ++i) {
      double square = 0.0;
      for (int64_t k = 0; k < dim; ++k) square += double{tokens[i * dim + k]} * tokens[i * dim + k];
      norms[static_cast<size_t>(i)] = std::sqrt(square);
    }
    for (int64_t i = 0; i < seq; ++i) {
      for (int64_t j = i + 1; j < seq; ++j) {
        const double scale = norms[static_cast<size_t>(i)] * norms[static_cast<size_t>(j)];
        if (scale == 0.0) continue;
        double dot = 0.0;
        for (int64_t k = 0; k < dim; ++k) dot += double{tokens[i * dim + k]} * tokens[j * dim + k];
        sum += 2.0 * dot / scale;  // (i, j) and (j, i)
      }
    }
  }
  return sum / static_cast<double>(batch * seq * (seq - 1));
}

double mean_token_norm(const Tensor& x) {
  const int64_t dim = x.shape()[x.shape().rank() - 1];
  const int64_t rows = dim == 0 ? 0 : x.numel() / dim;
  double sum = 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    double square = 0.0;
    for (int64_t k = 0; k < dim; ++k) square += double{x[r * dim + k]} * x[r * dim + k];
    sum += std::sqrt(square);
  }
  return rows == 0 ? 0.0 : sum / static_cast<double>(rows);
}

double norm_input_token_norm(const nn::Norm& norm) {
  if (norm.type() == nn::NormType::batch_norm) return std::numeric_limits<double>::quiet_NaN();
  const std::optional<SavedStats> stats = norm.saved_stats();
  if (!stats) return std::numeric_limits<double>::quiet_NaN();
  const int64_t rows = stats->rstd.shape.numel();
  const bool centred = norm.type() == nn::NormType::layer_norm;
  const double dim = static_cast<double>(norm.dim()), eps = norm.eps();
  double sum = 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    const double rstd = stats->rstd.data[r];
    const double mean = centred ? double{stats->mean.data[r]} : 0.0;
    const double second_moment = std::max(0.0, 1.0 / (rstd * rstd) - eps) + mean * mean;
    sum += std::sqrt(dim * second_moment);
  }
  return rows == 0 ? 0.0 : sum / static_cast<double>(rows);
}

}  // namespace addnorm::lab
