// Reference RMSNorm, forward and backward: LayerNorm without the mean subtraction and without
// beta, as the seed page's class writes it: y = gamma * x / sqrt(mean(x^2) + eps).
// With zero_centred_gamma the scale is (1 + gamma), so a zero-initialised gamma is the identity.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/reference/accumulate.hpp"

namespace addnorm::reference {

template <class T>
Acc<T> mean_square(const T* x, int64_t dim) {
  using A = Acc<T>;
  A squares = 0;
  for (int64_t i = 0; i < dim; ++i) squares += A(x[i]) * A(x[i]);
  return squares / A(dim);
}

template <class T>
Acc<T> rms_scale(const T* gamma, bool zero_centred_gamma, int64_t i) {
  using A = Acc<T>;
  if (!gamma) return A(1);
  return zero_centred_gamma ? A(1) + A(gamma[i]) : A(gamma[i]);
}

template <class T>
void rms_norm_forward(const T* x, const T* gamma, bool zero_centred_gamma, T* y, T* rstd_out,
                      int64_t rows, int64_t dim, double eps) {
  using A = Acc<T>;
  for (int64_t row = 0; row < rows; ++row) {
    const T* xr = x + row * dim;
    T* yr = y + row * dim;
    const A ms = mean_square(xr, dim);
    if (!std::isfinite(ms)) {
      for (int64_t i = 0; i < dim; ++i) yr[i] = quiet_nan<T>();
      if (rstd_out) rstd_out[row] = quiet_nan<T>();
      continue;
    }
    const A rstd = rstd_of(ms, A(eps));
    for (int64_t i = 0; i < dim; ++i) {
      yr[i] = T(normalise(A(xr[i]), rstd) * rms_scale(gamma, zero_centred_gamma, i));
    }
    if (rstd_out) rstd_out[row] = T(rstd);
  }
}

// Backward. With x_hat = x * rstd and g = dy * scale:
//   dx = rstd * (g - x_hat * mean(g * x_hat)),   dgamma = sum over rows of dy * x_hat
// (the same for zero-centred gamma, since d(1 + gamma)/dgamma = 1).
// dh_next, when given, is added to dx before rounding; dx may be the same memory as x or dy.
template <class T>
void rms_norm_backward(const T* dy, const T* x, const T* gamma, bool zero_centred_gamma,
                       const T* saved_rstd, const T* dh_next, T* dx, T* dgamma, int64_t rows,
                       int64_t dim, double eps) {
  using A = Acc<T>;
  std::vector<A> dgamma_sum(dgamma ? static_cast<size_t>(dim) : 0, A(0));
  for (int64_t row = 0; row < rows; ++row) {
    const T* xr = x + row * dim;
    const T* dyr = dy + row * dim;
    const A rstd = saved_rstd ? A(saved_rstd[row]) : rstd_of(mean_square(xr, dim), A(eps));
    A mean_g_xhat = 0;
    for (int64_t i = 0; i < dim; ++i) {
      mean_g_xhat +=
          A(dyr[i]) * rms_scale(gamma, zero_centred_gamma, i) * normalise(A(xr[i]), rstd);
    }
    mean_g_xhat /= A(dim);
    for (int64_t i = 0; i < dim; ++i) {
      const A x_hat = normalise(A(xr[i]), rstd);
      const A dy_i = A(dyr[i]);
      if (dgamma) dgamma_sum[static_cast<size_t>(i)] += dy_i * x_hat;
      A grad = rstd * (dy_i * rms_scale(gamma, zero_centred_gamma, i) - x_hat * mean_g_xhat);
      if (dh_next) grad += A(dh_next[row * dim + i]);
      dx[row * dim + i] = T(grad);
    }
  }
  for (int64_t i = 0; i < dim; ++i) {
    if (dgamma) dgamma[i] = T(dgamma_sum[static_cast<size_t>(i)]);
  }
}

}  // namespace addnorm::reference
