// LayerNorm, RMSNorm and GroupNorm through the C ABI. Each view is built in argument order
// before the op is called, so a call with several bad arguments always names the same one.
#include "addnorm/addnorm.h"
#include "capi/library.hpp"
#include "capi/status.hpp"
#include "capi/tensors.hpp"

using namespace addnorm;
using namespace addnorm::capi;

namespace {

// GroupNorm's options in the C ABI's argument order: gamma and beta (null: absent), eps
// (negative: the default).
template <class T>
BasicGroupNormOptions<T> group_norm_options(int64_t num_groups, const addnorm_tensor* gamma,
                                            const addnorm_tensor* beta, double eps) {
  return {norm_options<T>(NormKind::layer_norm, gamma, beta, 0, eps), num_groups};
}

}  // namespace

extern "C" {

addnorm_status addnorm_layer_norm(const addnorm_tensor* x, int32_t normalized_ndim,
                                  const addnorm_tensor* gamma, const addnorm_tensor* beta,
                                  double eps, const addnorm_tensor* y, const addnorm_tensor* mean,
                                  const addnorm_tensor* rstd) {
  return guarded([&] {
    by_element_type("x", x, [&](auto zero) {
      using T = decltype(zero);
      const NormConst<T> x_view = input<T>("x", x);
      const Shape normalized_shape = trailing_dims("x", x_view.shape, normalized_ndim);
      const auto options = norm_options<T>(NormKind::layer_norm, gamma, beta, 0, eps);
      const NormMutable<T> y_view = output<T>("y", y);
      const auto stats = stats_out<T>(mean, rstd);
      library::layer_norm(x_view, normalized_shape, y_view, options, stats);
    });
  });
}

addnorm_status addnorm_layer_norm_backward(const addnorm_tensor* dy, const addnorm_tensor* x,
                                           int32_t normalized_ndim, const addnorm_tensor* gamma,
                                           const addnorm_tensor* beta, double eps,
                                           const addnorm_tensor* saved_mean,
                                           const addnorm_tensor* saved_rstd,
                                           const addnorm_tensor* dx, const addnorm_tensor* dgamma,
                                           const addnorm_tensor* dbeta) {
  return guarded([&] {
    by_element_type("x", x, [&](auto zero) {
      using T = decltype(zero);
      const NormConst<T> dy_view = input<T>("dy", dy);
      const NormConst<T> x_view = input<T>("x", x);
      const Shape normalized_shape = trailing_dims("x", x_view.shape, normalized_ndim);
      const auto options = norm_options<T>(NormKind::layer_norm, gamma, beta, 0, eps);
      const auto saved = stats_in<T>(saved_mean, saved_rstd);
      const BasicLayerNormGrads<T> grads{output<T>("dx", dx), optional_exact<T>("dgamma", dgamma),
                                         optional_exact<T>("dbeta", dbeta)};
      library::layer_norm_backward(dy_view, x_view, normalized_shape, grads, options, saved);
    });
  });
}

addnorm_status addnorm_rms_norm(const addnorm_tensor* x, int32_t normalized_ndim,
                                const addnorm_tensor* gamma, int32_t zero_centered_gamma,
                                double eps, const addnorm_tensor* y, const addnorm_tensor* rstd) {
  return guarded([&] {
    by_element_type("x", x, [&](auto zero) {
      using T = decltype(zero);
      const NormConst<T> x_view = input<T>("x", x);
      const Shape normalized_shape = trailing_dims("x", x_view.shape, normalized_ndim);
      const auto options =
          norm_options<T>(NormKind::rms_norm, gamma, nullptr, zero_centered_gamma, eps);
      const NormMutable<T> y_view = output<T>("y", y);
      const auto rstd_view = optional_exact<T>("rstd", rstd);
      library::rms_norm(x_view, normalized_shape, y_view, options, rstd_view);
    });
  });
}

addnorm_status addnorm_rms_norm_backward(const addnorm_tensor* dy, const addnorm_tensor* x,
                                         int32_t normalized_ndim, const addnorm_tensor* gamma,
                                         int32_t zero_centered_gamma, double eps,
                                         const addnorm_tensor* saved_rstd, const addnorm_tensor* dx,
                                         const addnorm_tensor* dgamma) {
  return guarded([&] {
    by_element_type("x", x, [&](auto zero) {
      using T = decltype(zero);
      const NormConst<T> dy_view = input<T>("dy", dy);
      const NormConst<T> x_view = input<T>("x", x);
      const Shape normalized_shape = trailing_dims("x", x_view.shape, normalized_ndim);
      const auto options =
          norm_options<T>(NormKind::rms_norm, gamma, nullptr, zero_centered_gamma, eps);
      const auto saved = optional_exact<const T>("saved_rstd", saved_rstd);
      const BasicRmsNormGrads<T> grads{output<T>("dx", dx), optional_exact<T>("dgamma", dgamma)};
      library::rms_norm_backward(dy_view, x_view, normalized_shape, grads, options, saved);
    });
  });
}

addnorm_status addnorm_group_norm(const addnorm_tensor* x, int64_t num_groups,
                                  const addnorm_tensor* gamma, const addnorm_tensor* beta,
                                  double eps, const addnorm_tensor* y, const addnorm_tensor* mean,
                                  const addnorm_tensor* rstd) {
  return guarded([&] {
    by_element_type("x", x, [&](auto zero) {
      using T = decltype(zero);
      const NormConst<T> x_view = input<T>("x", x);
      const auto options = group_norm_options<T>(num_groups, gamma, beta, eps);
      const NormMutable<T> y_view = output<T>("y", y);
      const auto stats = stats_out<T>(mean, rstd);
      library::group_norm(x_view, y_view, options, stats);
    });
  });
}

addnorm_status addnorm_group_norm_backward(const addnorm_tensor* dy, const addnorm_tensor* x,
                                           int64_t num_groups, const addnorm_tensor* gamma,
                                           const addnorm_tensor* beta, double eps,
                                           const addnorm_tensor* dx, const addnorm_tensor* dgamma,
                                           const addnorm_tensor* dbeta) {
  return guarded([&] {
    by_element_type("x", x, [&](auto zero) {
      using T = decltype(zero);
      const NormConst<T> dy_view = input<T>("dy", dy);
      const NormConst<T> x_view = input<T>("x", x);
      const auto options = group_norm_options<T>(num_groups, gamma, beta, eps);
      const BasicGroupNormGrads<T> grads{output<T>("dx", dx), optional_exact<T>("dgamma", dgamma),
                                         optional_exact<T>("dbeta", dbeta)};
      library::group_norm_backward(dy_view, x_view, grads, options);
    });
  });
}

}  // extern "C"
