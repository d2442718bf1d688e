// Reference BatchNorm over channel axis 1 of x viewed as [batch, channels, length] (length 1 for
// (N, C) input): the house table's "normalise each column over the batch", one channel at a time.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "addnorm/ops.hpp"
#include "ops/reference/accumulate.hpp"

namespace addnorm::reference {

struct BatchLayout {
  int64_t batch = 0;     // N
  int64_t channels = 0;  // C
  int64_t length = 1;    // L, 1 for (N, C)
  int64_t per_channel() const { return batch * length; }
  int64_t elements() const { return per_channel() * channels; }
  int64_t index(int64_t n, int64_t c, int64_t l) const { return (n * channels + c) * length + l; }
};

// Mean and biased (population) variance of one channel, two passes.
template <class T>
struct ChannelMoments {
  Acc<T> mean;
  Acc<T> variance;
};
template <class T>
ChannelMoments<T> channel_moments(const T* x, const BatchLayout& layout, int64_t c) {
  using A = Acc<T>;
  A sum = 0;
  for (int64_t n = 0; n < layout.batch; ++n)
    for (int64_t l = 0; l < layout.length; ++l) sum += A(x[layout.index(n, c, l)]);
  const A count = A(layout.per_channel());
  const A mean = sum / count;
  A squares = 0;
  for (int64_t n = 0; n < layout.batch; ++n) {
    for (int64_t l = 0; l < layout.length; ++l) {
      const A centred = A(x[layout.index(n, c, l)]) - mean;
      squares += centred * centred;
    }
  }
  return {mean, squares / count};
}

// A value of the accumulation type rounded once into T, saturating to +-inf beyond T's range: a
// momentum outside [0, 1] extrapolates, and can leave float32's range (a plain conversion of
// such a double would be undefined behaviour).
template <class T, class A>
T rounded_into(A value) {
  if (std::fabs(value) > A(std::numeric_limits<T>::max())) {
    return std::copysign(std::numeric_limits<T>::infinity(), T(value > 0 ? 1 : -1));
  }
  return T(value);
}

// The running-statistics update after a training batch of `count` values per channel, in the
// accumulation type, rounded once into the statistics' own type.
template <class T>
void update_running(T& running_mean, T& running_var, Acc<T> batch_mean, Acc<T> batch_var,
                    int64_t count, Acc<T> momentum, MomentumConvention convention) {
  using A = Acc<T>;
  if (convention == MomentumConvention::pytorch) {
    // PyTorch: momentum weights the new batch; the stored variance is unbiased (n / (n - 1)).
    const A unbiased = batch_var * A(count) / A(count - 1);
    running_mean = rounded_into<T>((1 - momentum) * A(running_mean) + momentum * batch_mean);
    running_var = rounded_into<T>((1 - momentum) * A(running_var) + momentum * unbiased);
  } else {
    // ONNX: momentum weights the old value; the stored variance is the biased batch variance.
    running_mean = rounded_into<T>(momentum * A(running_mean) + (1 - momentum) * batch_mean);
    running_var = rounded_into<T>(momentum * A(running_var) + (1 - momentum) * batch_var);
  }
}

// Normalises channel c with the given statistics: y = (x - mean) * rstd * gamma + beta.
template <class T>
void normalise_channel(const T* x, const T* gamma, const T* beta, T* y, const BatchLayout& layout,
                       int64_t c, Acc<T> mean, Acc<T> rstd) {
  using A = Acc<T>;
  // An infinite rstd is a zero-variance channel with eps = 0 (rstd_of): its centred values are
  // all exactly 0, and normalise gives them x_hat = 0 (y = beta), as the fast kernels do.
  const bool finite = std::isfinite(mean) && !std::isnan(rstd);
  for (int64_t n = 0; n < layout.batch; ++n) {
    for (int64_t l = 0; l < layout.length; ++l) {
      const int64_t at = layout.index(n, c, l);
      if (!finite) {
        y[at] = quiet_nan<T>();
        continue;
      }
      A value = normalise(A(x[at]) - mean, rstd);
      if (gamma) value *= A(gamma[c]);
      if (beta) value += A(beta[c]);
      y[at] = T(value);
    }
  }
}

// Training-mode backward for channel c (batch statistics recomputed from x). With
// x_hat = (x - mean) * rstd and g = dy * gamma, summing over the channel's N * L values:
//   dx = rstd * (g - mean(g) - x_hat * mean(g * x_hat)),  dgamma = sum dy * x_hat,  dbeta = sum dy.
template <class T>
void batch_norm_backward_channel(const T* dy, const T* x, const T* gamma, T* dx, T* dgamma,
                                 T* dbeta, const BatchLayout& layout, int64_t c, double eps) {
  using A = Acc<T>;
  const ChannelMoments<T> m = channel_moments(x, layout, c);
  const A rstd = rstd_of(m.variance, A(eps));
  const A scale = gamma ? A(gamma[c]) : A(1);
  A sum_dy = 0, sum_dy_xhat = 0;
  for (int64_t n = 0; n < layout.batch; ++n) {
    for (int64_t l = 0; l < layout.length; ++l) {
      const int64_t at = layout.index(n, c, l);
      sum_dy += A(dy[at]);
      sum_dy_xhat += A(dy[at]) * normalise(A(x[at]) - m.mean, rstd);
    }
  }
  const A count = A(layout.per_channel());
  const A mean_g = scale * sum_dy / count;
  const A mean_g_xhat = scale * sum_dy_xhat / count;
  for (int64_t n = 0; n < layout.batch; ++n) {
    for (int64_t l = 0; l < layout.length; ++l) {
      const int64_t at = layout.index(n, c, l);
      const A x_hat = normalise(A(x[at]) - m.mean, rstd);
      dx[at] = T(rstd * (A(dy[at]) * scale - mean_g - x_hat * mean_g_xhat));
    }
  }
  if (dgamma) dgamma[c] = T(sum_dy_xhat);
  if (dbeta) dbeta[c] = T(sum_dy);
}

// Inference-mode backward for channel c: the running statistics are constants, so
//   dx = dy * gamma * rstd,  dgamma = sum dy * x_hat,  dbeta = sum dy.
template <class T>
void batch_norm_eval_backward_channel(const T* dy, const T* x, const T* gamma, T* dx, T* dgamma,
                                      T* dbeta, const BatchLayout& layout, int64_t c,
                                      Acc<T> running_mean, Acc<T> rstd) {
  using A = Acc<T>;
  const A scale = gamma ? A(gamma[c]) : A(1);
  A sum_dy = 0, sum_dy_xhat = 0;
  for (int64_t n = 0; n < layout.batch; ++n) {
    for (int64_t l = 0; l < layout.length; ++l) {
      const int64_t at = layout.index(n, c, l);
      const A dy_at = A(dy[at]);
      sum_dy += dy_at;
      sum_dy_xhat += dy_at * normalise(A(x[at]) - running_mean, rstd);
      dx[at] = T(dy_at * scale * rstd);
    }
  }
  if (dgamma) dgamma[c] = T(sum_dy_xhat);
  if (dbeta) dbeta[c] = T(sum_dy);
}

}  // namespace addnorm::reference
