// Reference GroupNorm, forward and backward: each sample's group of channels is one LayerNorm row
// (layer_norm.hpp's row_moments, the same two passes), scaled and shifted per channel. The oracle
// for the fast path (src/ops/cpu/group_norm_kernels.cpp) and the float64 op.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "ops/reference/accumulate.hpp"
#include "ops/reference/layer_norm.hpp"

namespace addnorm::reference {

// x as [batch, channels, spatial] with the channels in `groups` groups: row (n, g) is the
// contiguous run of channels_per_group * spatial values of sample n's group g.
struct GroupLayout {
  int64_t batch = 0;     // N
  int64_t channels = 0;  // C
  int64_t groups = 1;    // G, dividing C
  int64_t spatial = 1;   // the product of x's dims after the channel axis
  int64_t rows() const { return batch * groups; }
  int64_t elements() const { return batch * channels * spatial; }
  int64_t channels_per_group() const { return channels / groups; }
  int64_t dim() const { return channels_per_group() * spatial; }
  // The channel of element i of row `row`.
  int64_t channel(int64_t row, int64_t i) const {
    return (row % groups) * channels_per_group() + i / spatial;
  }
};

// Forward: LayerNorm of each row, with gamma and beta spread over the row (channel c's value at
// each of its positions), so the row is normalised, scaled and shifted exactly as layer_norm.hpp
// defines it.
template <class T>
void group_norm_forward(const T* x, const T* gamma, const T* beta, T* y, T* mean_out, T* rstd_out,
                        const GroupLayout& layout, double eps) {
  const int64_t dim = layout.dim();
  std::vector<T> row_gamma(gamma ? static_cast<size_t>(dim) : 0);
  std::vector<T> row_beta(beta ? static_cast<size_t>(dim) : 0);
  for (int64_t row = 0; row < layout.rows(); ++row) {
    for (int64_t i = 0; i < dim; ++i) {
      const int64_t c = layout.channel(row, i);
      if (gamma) row_gamma[static_cast<size_t>(i)] = gamma[c];
      if (beta) row_beta[static_cast<size_t>(i)] = beta[c];
    }
    layer_norm_forward(x + row * dim, gamma ? row_gamma.data() : nullptr,
                       beta ? row_beta.data() : nullptr, y + row * dim,
                       mean_out ? mean_out + row : nullptr, rstd_out ? rstd_out + row : nullptr, 1,
                       dim, eps);
  }
}

// Backward: LayerNorm's over each row with g = dy * gamma_c,
//   dx = rstd * (g - mean(g) - x_hat * mean(g * x_hat)),
// and the parameters' gradients summed per channel over samples and positions:
//   dgamma_c = sum dy * x_hat,  dbeta_c = sum dy.
template <class T>
void group_norm_backward(const T* dy, const T* x, const T* gamma, T* dx, T* dgamma, T* dbeta,
                         const GroupLayout& layout, double eps) {
  using A = Acc<T>;
  const int64_t dim = layout.dim();
  std::vector<A> dgamma_sum(static_cast<size_t>(layout.channels), A(0));
  std::vector<A> dbeta_sum(static_cast<size_t>(layout.channels), A(0));
  for (int64_t row = 0; row < layout.rows(); ++row) {
    const T* xr = x + row * dim;
    const T* dyr = dy + row * dim;
    const RowMoments<T> m = row_moments(xr, dim);
    const A rstd = rstd_of(m.variance, A(eps));
    A mean_g = 0, mean_g_xhat = 0;
    for (int64_t i = 0; i < dim; ++i) {
      const int64_t c = layout.channel(row, i);
      const A x_hat = normalise(A(xr[i]) - m.mean, rstd);
      const A g = A(dyr[i]) * (gamma ? A(gamma[c]) : A(1));
      mean_g += g;
      mean_g_xhat += g * x_hat;
      dgamma_sum[static_cast<size_t>(c)] += A(dyr[i]) * x_hat;
      dbeta_sum[static_cast<size_t>(c)] += A(dyr[i]);
    }
    mean_g /= A(dim);
    mean_g_xhat /= A(dim);
    // Element i reads only x[i] and dy[i] before dx[i] is written: dx may be x or dy.
    for (int64_t i = 0; i < dim; ++i) {
      const int64_t c = layout.channel(row, i);
      const A x_hat = normalise(A(xr[i]) - m.mean, rstd);
      const A g = A(dyr[i]) * (gamma ? A(gamma[c]) : A(1));
      dx[row * dim + i] = T(rstd * (g - mean_g - x_hat * mean_g_xhat));
    }
  }
  for (int64_t c = 0; c < layout.channels; ++c) {
    if (dgamma) dgamma[c] = T(dgamma_sum[static_cast<size_t>(c)]);
    if (dbeta) dbeta[c] = T(dbeta_sum[static_cast<size_t>(c)]);
  }
}

}  // namespace addnorm::reference
