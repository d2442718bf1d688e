#include "ops/cpu/batch_norm_kernels.hpp"

#include <cmath>
#include <limits>

#include "ops/cpu/threading.hpp"

namespace addnorm::cpu {

namespace {

// Per-channel float64 accumulators for `count` quantities, one set per fixed chunk of the batch.
// Each chunk sums its samples in order; chunks are added in chunk order by total().
class ChannelPartials {
 public:
  ChannelPartials(int64_t chunks, int64_t channels, int count)
      : chunks_(chunks), channels_(channels), count_(count),
        values_(static_cast<size_t>(chunks * channels * count), 0.0) {}

  double* chunk(int64_t index, int quantity) {
    return values_.data() + (index * count_ + quantity) * channels_;
  }
  double total(int quantity, int64_t channel) const {
    double sum = 0;
    for (int64_t index = 0; index < chunks_; ++index) {
      sum += values_[static_cast<size_t>((index * count_ + quantity) * channels_ + channel)];
    }
    return sum;
  }

 private:
  int64_t chunks_, channels_;
  int count_;
  std::vector<double> values_;
};

// The first sample of each channel: the shift that keeps one-pass variances exact.
std::vector<double> channel_shifts(const float* x, const BatchShape& shape) {
  std::vector<double> shifts(static_cast<size_t>(shape.channels));
  for (int64_t c = 0; c < shape.channels; ++c) shifts[c] = x[c * shape.length];
  return shifts;
}

// Runs body(chunk, n) for every sample n, chunk by chunk, chunks spread over threads.
template <class Body>
void for_each_sample(const BatchShape& shape, int64_t chunks, const Body& body) {
  parallel_chunks(chunks, shape.batch, shape.channels * shape.length,
                  [&](int64_t chunk, int64_t begin, int64_t end) {
                    for (int64_t n = begin; n < end; ++n) body(chunk, n);
                  });
}

}  // namespace

// sums[c] += x[c * length + l] - shift[c] and squares[c] += its square, for one sample.
// restrict-qualified and branch-free so the compiler vectorises it across channels (length 1)
// or along the length.
void accumulate_sample(const float* __restrict sample, const double* __restrict shifts,
                       double* __restrict sums, double* __restrict squares, int64_t channels,
                       int64_t length) {
  if (length == 1) {
    for (int64_t c = 0; c < channels; ++c) {
      const double d = static_cast<double>(sample[c]) - shifts[c];
      sums[c] += d;
      squares[c] += d * d;
    }
    return;
  }
  for (int64_t c = 0; c < channels; ++c) {
    double sum = 0, square = 0;
    for (int64_t l = 0; l < length; ++l) {
      const double d = static_cast<double>(sample[c * length + l]) - shifts[c];
      sum += d;
      square += d * d;
    }
    sums[c] += sum;
    squares[c] += square;
  }
}

void batch_statistics(const float* x, const BatchShape& shape, ChannelStats& stats) {
  const int64_t chunks = reduction_chunks(shape.batch);
  const std::vector<double> shifts = channel_shifts(x, shape);
  ChannelPartials partials(chunks, shape.channels, 2);
  for_each_sample(shape, chunks, [&](int64_t chunk, int64_t n) {
    accumulate_sample(x + n * shape.channels * shape.length, shifts.data(),
                      partials.chunk(chunk, 0), partials.chunk(chunk, 1), shape.channels,
                      shape.length);
  });
  const double count = static_cast<double>(shape.batch * shape.length);
  stats.mean.assign(static_cast<size_t>(shape.channels), 0.0);
  stats.variance.assign(static_cast<size_t>(shape.channels), 0.0);
  for (int64_t c = 0; c < shape.channels; ++c) {
    const double mean_shifted = partials.total(0, c) / count;
    const double variance = partials.total(1, c) / count - mean_shifted * mean_shifted;
    stats.mean[c] = shifts[c] + mean_shifted;
    stats.variance[c] = variance < 0 ? 0.0 : variance;  // NaN stays NaN
  }
}

void batch_normalise(const float* x, const double* mean, const double* rstd, const float* gamma,
                     const float* beta, float* y, const BatchShape& shape) {
  // Per-channel constants, so the inner loop is branch-free: a channel with a non-finite mean
  // or rstd gets a NaN centre (its outputs become NaN), and an infinite rstd from a
  // zero-variance channel with eps = 0 becomes 0 (its centred values are all exactly 0).
  const auto channels = static_cast<size_t>(shape.channels);
  std::vector<double> centre(channels), scale(channels);
  std::vector<float> weight(channels, 1.0f), shift(channels, 0.0f);
  for (size_t c = 0; c < channels; ++c) {
    const bool finite = std::isfinite(mean[c]) && !std::isnan(rstd[c]);
    centre[c] = finite ? mean[c] : std::numeric_limits<double>::quiet_NaN();
    scale[c] = std::isinf(rstd[c]) ? 0.0 : rstd[c];
    if (gamma) weight[c] = gamma[c];
    if (beta) shift[c] = beta[c];
  }
  const int64_t sample_size = shape.channels * shape.length;
  parallel_rows(shape.batch, sample_size, [&](int64_t begin, int64_t end) {
    const double* __restrict centre_p = centre.data();
    const double* __restrict scale_p = scale.data();
    const float* __restrict weight_p = weight.data();
    const float* __restrict shift_p = shift.data();
    for (int64_t n = begin; n < end; ++n) {
      const float* __restrict in = x + n * sample_size;
      float* __restrict out = y + n * sample_size;
      for (int64_t c = 0; c < shape.channels; ++c) {
        for (int64_t l = 0; l < shape.length; ++l) {
          const int64_t at = c * shape.length + l;
          const auto x_hat =
              static_cast<float>((static_cast<double>(in[at]) - centre_p[c]) * scale_p[c]);
          out[at] = std::fma(x_hat, weight_p[c], shift_p[c]);
        }
      }
    }
  });
}

void batch_norm_backward_training(const float* dy, const float* x, const float* gamma,
                                  float* dx, float* dgamma, float* dbeta, const BatchShape& shape,
                                  double eps) {
  // Pass 1: per channel, with d = x - shift: sum(d), sum(d^2), sum(dy), sum(dy * d).
  const int64_t chunks = reduction_chunks(shape.batch);
  const std::vector<double> shifts = channel_shifts(x, shape);
  const int64_t sample_size = shape.channels * shape.length;
  ChannelPartials partials(chunks, shape.channels, 4);
  for_each_sample(shape, chunks, [&](int64_t chunk, int64_t n) {
    double* sum_d = partials.chunk(chunk, 0);
    double* sum_d2 = partials.chunk(chunk, 1);
    double* sum_dy = partials.chunk(chunk, 2);
    double* sum_dy_d = partials.chunk(chunk, 3);
    for (int64_t c = 0; c < shape.channels; ++c) {
      for (int64_t l = 0; l < shape.length; ++l) {
        const int64_t at = n * sample_size + c * shape.length + l;
        const double d = static_cast<double>(x[at]) - shifts[c];
        const double g = static_cast<double>(dy[at]);
        sum_d[c] += d;
        sum_d2[c] += d * d;
        sum_dy[c] += g;
        sum_dy_d[c] += g * d;
      }
    }
  });
  // Per channel: dx = rstd * gamma * (dy - mean(dy) - x_hat * mean(dy * x_hat)).
  const double count = static_cast<double>(shape.batch * shape.length);
  std::vector<double> mean(static_cast<size_t>(shape.channels)), rstd(mean.size()),
      mean_dy(mean.size()), mean_dy_xhat(mean.size());
  for (int64_t c = 0; c < shape.channels; ++c) {
    const double mean_shifted = partials.total(0, c) / count;
    const double variance =
        partials.total(1, c) / count - mean_shifted * mean_shifted;
    mean[c] = shifts[c] + mean_shifted;
    rstd[c] = 1.0 / std::sqrt((variance < 0 ? 0.0 : variance) + eps);
    const double total_dy = partials.total(2, c);
    const double total_dy_xhat = rstd[c] * (partials.total(3, c) - mean_shifted * total_dy);
    mean_dy[c] = total_dy / count;
    mean_dy_xhat[c] = total_dy_xhat / count;
    if (dgamma) dgamma[c] = static_cast<float>(total_dy_xhat);
    if (dbeta) dbeta[c] = static_cast<float>(total_dy);
  }
  // Pass 2: dx. Each element is read before it is written, so dx may be dy or x.
  parallel_rows(shape.batch, sample_size, [&](int64_t begin, int64_t end) {
    for (int64_t n = begin; n < end; ++n) {
      for (int64_t c = 0; c < shape.channels; ++c) {
        const double scale = (gamma ? static_cast<double>(gamma[c]) : 1.0) * rstd[c];
        for (int64_t l = 0; l < shape.length; ++l) {
          const int64_t at = n * sample_size + c * shape.length + l;
          const double x_hat = (static_cast<double>(x[at]) - mean[c]) * rstd[c];
          dx[at] = static_cast<float>(
              scale * (static_cast<double>(dy[at]) - mean_dy[c] - x_hat * mean_dy_xhat[c]));
        }
      }
    }
  });
}

void batch_norm_backward_inference(const float* dy, const float* x, const float* gamma,
                                   const double* mean, const double* rstd, float* dx,
                                   float* dgamma, float* dbeta, const BatchShape& shape) {
  const int64_t chunks = reduction_chunks(shape.batch);
  const int64_t sample_size = shape.channels * shape.length;
  ChannelPartials partials(chunks, shape.channels, 2);
  for_each_sample(shape, chunks, [&](int64_t chunk, int64_t n) {
    double* sum_dy = partials.chunk(chunk, 0);
    double* sum_dy_xhat = partials.chunk(chunk, 1);
    for (int64_t c = 0; c < shape.channels; ++c) {
      const double scale = (gamma ? static_cast<double>(gamma[c]) : 1.0) * rstd[c];
      for (int64_t l = 0; l < shape.length; ++l) {
        const int64_t at = n * sample_size + c * shape.length + l;
        const double g = static_cast<double>(dy[at]);
        const double centred = static_cast<double>(x[at]) - mean[c];
        sum_dy[c] += g;
        sum_dy_xhat[c] += g * (centred == 0 ? 0.0 : centred * rstd[c]);
        dx[at] = static_cast<float>(g * scale);
      }
    }
  });
  for (int64_t c = 0; c < shape.channels; ++c) {
    if (dgamma) dgamma[c] = static_cast<float>(partials.total(1, c));
    if (dbeta) dbeta[c] = static_cast<float>(partials.total(0, c));
  }
}

}  // namespace addnorm::cpu
