// Reference LayerNorm, forward and backward: the definition, written to read like the seed page's
// four steps (mean, variance divided by N, normalise with eps inside the root, scale and shift),
// accumulating in higher precision (accumulate.hpp). It is the oracle for every faster kernel.
//
// x is [rows, dim], row-major. gamma, beta, mean, rstd, dgamma, dbeta may each be null.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/reference/accumulate.hpp"

namespace addnorm::reference {

// Mean and population variance of one row, two passes (never E[x^2] - E[x]^2, which cancels
// catastrophically when the mean is large compared with the spread).
template <class T>
struct RowMoments {
  Acc<T> mean;
  Acc<T> variance;
};
template <class T>
RowMoments<T> row_moments(const T* x, int64_t dim) {
  using A = Acc<T>;
  A sum = 0;
  for (int64_t i = 0; i < dim; ++i) sum += A(x[i]);
  const A mean = sum / A(dim);  // step 1: mean
  A squares = 0;
  for (int64_t i = 0; i < dim; ++i) {
    const A centred = A(x[i]) - mean;
    squares += centred * centred;
  }
  return {mean, squares / A(dim)};  // step 2: variance, divided by N (not N - 1)
}

template <class T>
void layer_norm_forward(const T* x, const T* gamma, const T* beta, T* y, T* mean_out, T* rstd_out,
                        int64_t rows, int64_t dim, double eps) {
  using A = Acc<T>;
  for (int64_t row = 0; row < rows; ++row) {
    const T* xr = x + row * dim;
    T* yr = y + row * dim;
    const RowMoments<T> m = row_moments(xr, dim);
    if (!std::isfinite(m.mean) || !std::isfinite(m.variance)) {
      // A NaN or Inf in the row poisons this row only.
      for (int64_t i = 0; i < dim; ++i) yr[i] = quiet_nan<T>();
      if (mean_out) mean_out[row] = quiet_nan<T>();
      if (rstd_out) rstd_out[row] = quiet_nan<T>();
      continue;
    }
    const A rstd = rstd_of(m.variance, A(eps));  // step 3: eps inside the root
    for (int64_t i = 0; i < dim; ++i) {
      A value = normalise(A(xr[i]) - m.mean, rstd);
      if (gamma) value *= A(gamma[i]);  // step 4: scale and shift
      if (beta) value += A(beta[i]);
      yr[i] = T(value);
    }
    if (mean_out) mean_out[row] = T(m.mean);
    if (rstd_out) rstd_out[row] = T(rstd);
  }
}

// Backward. With x_hat = (x - mean) * rstd and g = dy * gamma, the gradient is
//   dx = rstd * (g - mean(g) - x_hat * mean(g * x_hat))
// (the two means are the gradient through the row's mean and through its variance),
//   dgamma = sum over rows of dy * x_hat,   dbeta = sum over rows of dy.
// dh_next, when given, is added to dx before the single rounding (the fused pre-norm backward).
// saved_rstd, when given, replaces the recomputed 1/sqrt(var + eps); the mean is always
// recomputed exactly, because a float32 mean cannot centre a row whose mean dwarfs its spread.
// dx may be the same memory as x or dy (each row is read completely before it is written).
template <class T>
void layer_norm_backward(const T* dy, const T* x, const T* gamma, const T* saved_rstd,
                         const T* dh_next, T* dx, T* dgamma, T* dbeta, int64_t rows, int64_t dim,
                         double eps) {
  using A = Acc<T>;
  std::vector<A> dgamma_sum(dgamma ? static_cast<size_t>(dim) : 0, A(0));
  std::vector<A> dbeta_sum(dbeta ? static_cast<size_t>(dim) : 0, A(0));
  for (int64_t row = 0; row < rows; ++row) {
    const T* xr = x + row * dim;
    const T* dyr = dy + row * dim;
    const RowMoments<T> m = row_moments(xr, dim);
    const A rstd = saved_rstd ? A(saved_rstd[row]) : rstd_of(m.variance, A(eps));
    A mean_g = 0, mean_g_xhat = 0;
    for (int64_t i = 0; i < dim; ++i) {
      const A g = A(dyr[i]) * (gamma ? A(gamma[i]) : A(1));
      mean_g += g;
      mean_g_xhat += g * normalise(A(xr[i]) - m.mean, rstd);
    }
    mean_g /= A(dim);
    mean_g_xhat /= A(dim);
    for (int64_t i = 0; i < dim; ++i) {
      const A x_hat = normalise(A(xr[i]) - m.mean, rstd);
      const A dy_i = A(dyr[i]);
      if (dgamma) dgamma_sum[static_cast<size_t>(i)] += dy_i * x_hat;
      if (dbeta) dbeta_sum[static_cast<size_t>(i)] += dy_i;
      const A g = dy_i * (gamma ? A(gamma[i]) : A(1));
      A grad = rstd * (g - mean_g - x_hat * mean_g_xhat);
      if (dh_next) grad += A(dh_next[row * dim + i]);
      dx[row * dim + i] = T(grad);
    }
  }
  for (int64_t i = 0; i < dim; ++i) {
    if (dgamma) dgamma[i] = T(dgamma_sum[static_cast<size_t>(i)]);
    if (dbeta) dbeta[i] = T(dbeta_sum[static_cast<size_t>(i)]);
  }
}

}  // namespace addnorm::reference
