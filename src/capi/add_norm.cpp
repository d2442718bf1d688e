// The fused pre-norm and post-norm Add & Norm through the C ABI.
#include "addnorm/addnorm.h"
#include "capi/library.hpp"
#include "capi/status.hpp"
#include "capi/tensors.hpp"

using namespace addnorm;
using namespace addnorm::capi;

namespace {

// RMSNorm keeps no mean. The C++ ops ignore one passed with it; here it is refused, since a
// caller who passes a buffer expects it written.
void refuse_rms_mean(NormKind norm, const char* name, const addnorm_tensor* mean) {
  if (!norm_traits(norm).centres) expect_absent(name, mean, "with ADDNORM_RMS_NORM (no mean)");
}

template <class T>
std::optional<BasicNormStats<T>> fused_stats_out(NormKind norm, const addnorm_tensor* mean,
                                                 const addnorm_tensor* rstd) {
  refuse_rms_mean(norm, "mean", mean);
  if (norm_traits(norm).centres) return stats_out<T>(mean, rstd);
  if (rstd == nullptr) return std::nullopt;
  return BasicNormStats<T>{{}, exact<T>("rstd", rstd)};
}

template <class T>
std::optional<BasicSavedStats<T>> fused_stats_in(NormKind norm, const addnorm_tensor* mean,
                                                 const addnorm_tensor* rstd) {
  refuse_rms_mean(norm, "saved_mean", mean);
  if (norm_traits(norm).centres) return stats_in<T>(mean, rstd);
  if (rstd == nullptr) return std::nullopt;
  return BasicSavedStats<T>{{}, exact<const T>("saved_rstd", rstd)};
}

template <class T>
BasicDropoutOptions<T> dropout_options(double p, uint64_t seed, uint64_t offset) {
  return {dropout_p_as<T>(p), seed, offset};
}

}  // namespace

extern "C" {

addnorm_status addnorm_add_norm_pre(const addnorm_tensor* x, const addnorm_tensor* r,
                                    int32_t normalized_ndim, int32_t norm,
                                    const addnorm_tensor* gamma, const addnorm_tensor* beta,
                                    int32_t zero_centered_gamma, double eps,
                                    const addnorm_tensor* h, const addnorm_tensor* y,
                                    const addnorm_tensor* mean, const addnorm_tensor* rstd) {
  return guarded([&] {
    by_element_type("x", x, [&](auto zero) {
      using T = decltype(zero);
      const NormConst<T> x_view = input<T>("x", x);
      const NormConst<T> r_view = input<T>("r", r);
      const Shape normalized_shape = trailing_dims("x", x_view.shape, normalized_ndim);
      const auto options = norm_options<T>(norm_kind(norm), gamma, beta, zero_centered_gamma, eps);
      const NormMutable<T> h_view = output<T>("h", h);
      const NormMutable<T> y_view = output<T>("y", y);
      const auto stats = fused_stats_out<T>(*options.norm, mean, rstd);
      library::add_norm_pre(x_view, r_view, normalized_shape, h_view, y_view, options, stats);
    });
  });
}

addnorm_status addnorm_add_norm_pre_backward(
    const addnorm_tensor* dy, const addnorm_tensor* dh_next, const addnorm_tensor* h,
    int32_t normalized_ndim, int32_t norm, const addnorm_tensor* gamma, const addnorm_tensor* beta,
    int32_t zero_centered_gamma, double eps, const addnorm_tensor* saved_mean,
    const addnorm_tensor* saved_rstd, const addnorm_tensor* dh, const addnorm_tensor* dgamma,
    const addnorm_tensor* dbeta) {
  return guarded([&] {
    by_element_type("h", h, [&](auto zero) {
      using T = decltype(zero);
      const NormConst<T> dy_view = input<T>("dy", dy);
      const auto dh_next_view = optional_input<T>("dh_next", dh_next);
      const NormConst<T> h_view = input<T>("h", h);
      const Shape normalized_shape = trailing_dims("h", h_view.shape, normalized_ndim);
      const auto options = norm_options<T>(norm_kind(norm), gamma, beta, zero_centered_gamma, eps);
      const auto saved = fused_stats_in<T>(*options.norm, saved_mean, saved_rstd);
      const BasicAddNormPreGrads<T> grads{output<T>("dh", dh), optional_exact<T>("dgamma", dgamma),
                                          optional_exact<T>("dbeta", dbeta)};
      library::add_norm_pre_backward(dy_view, dh_next_view, h_view, normalized_shape, grads,
                                     options, saved);
    });
  });
}

addnorm_status addnorm_add_norm_post(const addnorm_tensor* x, const addnorm_tensor* s,
                                     int32_t normalized_ndim, int32_t norm,
                                     const addnorm_tensor* gamma, const addnorm_tensor* beta,
                                     int32_t zero_centered_gamma, double eps, double p,
                                     uint64_t seed, uint64_t offset, const addnorm_tensor* y,
                                     const addnorm_tensor* mean, const addnorm_tensor* rstd) {
  return guarded([&] {
    by_element_type("x", x, [&](auto zero) {
      using T = decltype(zero);
      const NormConst<T> x_view = input<T>("x", x);
      const NormConst<T> s_view = input<T>("s", s);
      const Shape normalized_shape = trailing_dims("x", x_view.shape, normalized_ndim);
      const auto options = norm_options<T>(norm_kind(norm), gamma, beta, zero_centered_gamma, eps);
      const NormMutable<T> y_view = output<T>("y", y);
      const auto stats = fused_stats_out<T>(*options.norm, mean, rstd);
      library::add_norm_post(x_view, s_view, normalized_shape, y_view, options,
                             dropout_options<T>(p, seed, offset), stats);
    });
  });
}

addnorm_status addnorm_add_norm_post_backward(
    const addnorm_tensor* dy, const addnorm_tensor* x, const addnorm_tensor* s,
    int32_t normalized_ndim, int32_t norm, const addnorm_tensor* gamma, const addnorm_tensor* beta,
    int32_t zero_centered_gamma, double eps, double p, uint64_t seed, uint64_t offset,
    const addnorm_tensor* saved_mean, const addnorm_tensor* saved_rstd, const addnorm_tensor* dx,
    const addnorm_tensor* ds, const addnorm_tensor* dgamma, const addnorm_tensor* dbeta) {
  return guarded([&] {
    by_element_type("x", x, [&](auto zero) {
      using T = decltype(zero);
      const NormConst<T> dy_view = input<T>("dy", dy);
      const NormConst<T> x_view = input<T>("x", x);
      const NormConst<T> s_view = input<T>("s", s);
      const Shape normalized_shape = trailing_dims("x", x_view.shape, normalized_ndim);
      const auto options = norm_options<T>(norm_kind(norm), gamma, beta, zero_centered_gamma, eps);
      const auto saved = fused_stats_in<T>(*options.norm, saved_mean, saved_rstd);
      const BasicAddNormPostGrads<T> grads{output<T>("dx", dx), output<T>("ds", ds),
                                           optional_exact<T>("dgamma", dgamma),
                                           optional_exact<T>("dbeta", dbeta)};
      library::add_norm_post_backward(dy_view, x_view, s_view, normalized_shape, grads, options,
                                      dropout_options<T>(p, seed, offset), saved);
    });
  });
}

}  // extern "C"
