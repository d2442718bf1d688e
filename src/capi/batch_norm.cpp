// BatchNorm through the C ABI. x, y, dy and dx may be of any storage type (one per call, as the
// C++ op checks), gamma and beta of any; the running and batch statistics and dgamma/dbeta are
// float32 (or float64 with float64 x), read with exact<T>.
#include "addnorm/addnorm.h"
#include "capi/library.hpp"
#include "capi/status.hpp"
#include "capi/tensors.hpp"

using namespace addnorm;
using namespace addnorm::capi;

namespace {

template <class T>
BasicBatchNormOptions<T> batch_norm_options(const addnorm_tensor* gamma, const addnorm_tensor* beta,
                                            int32_t training, double eps, int32_t channels_last) {
  BasicBatchNormOptions<T> options{norm_options<T>(NormKind::layer_norm, gamma, beta, 0, eps)};
  options.training = training != 0;
  options.channels_last = channels_last != 0;
  return options;
}

template <class T>
std::optional<BasicRunningStats<T>> running_stats(const addnorm_tensor* running_mean,
                                                  const addnorm_tensor* running_var) {
  expect_pair("running_mean", running_mean, "running_var", running_var);
  if (running_mean == nullptr) return std::nullopt;
  return BasicRunningStats<T>{exact<T>("running_mean", running_mean),
                              exact<T>("running_var", running_var)};
}

}  // namespace

extern "C" {

addnorm_status addnorm_batch_norm(const addnorm_tensor* x, const addnorm_tensor* gamma,
                                  const addnorm_tensor* beta, int32_t training, double momentum,
                                  int32_t convention, double eps, int32_t channels_last,
                                  const addnorm_tensor* running_mean,
                                  const addnorm_tensor* running_var, const addnorm_tensor* y,
                                  const addnorm_tensor* batch_mean,
                                  const addnorm_tensor* batch_rstd) {
  return guarded([&] {
    by_element_type("x", x, [&](auto zero) {
      using T = decltype(zero);
      const NormConst<T> x_view = input<T>("x", x);
      BasicBatchNormOptions<T> options =
          batch_norm_options<T>(gamma, beta, training, eps, channels_last);
      options.momentum = momentum_as<T>(momentum);
      options.convention = momentum_convention(convention);
      const auto running = running_stats<T>(running_mean, running_var);
      const NormMutable<T> y_view = output<T>("y", y);
      expect_pair("batch_mean", batch_mean, "batch_rstd", batch_rstd);
      std::optional<BasicNormStats<T>> batch_stats;
      if (batch_mean != nullptr) {
        batch_stats = BasicNormStats<T>{exact<T>("batch_mean", batch_mean),
                                        exact<T>("batch_rstd", batch_rstd)};
      }
      library::batch_norm(x_view, y_view, options, running, batch_stats);
    });
  });
}

addnorm_status addnorm_batch_norm_backward(const addnorm_tensor* dy, const addnorm_tensor* x,
                                           const addnorm_tensor* gamma, const addnorm_tensor* beta,
                                           int32_t training, double eps, int32_t channels_last,
                                           const addnorm_tensor* running_mean,
                                           const addnorm_tensor* running_var,
                                           const addnorm_tensor* dx, const addnorm_tensor* dgamma,
                                           const addnorm_tensor* dbeta) {
  return guarded([&] {
    by_element_type("x", x, [&](auto zero) {
      using T = decltype(zero);
      const NormConst<T> dy_view = input<T>("dy", dy);
      const NormConst<T> x_view = input<T>("x", x);
      const BasicBatchNormOptions<T> options =
          batch_norm_options<T>(gamma, beta, training, eps, channels_last);
      const auto running = running_stats<T>(running_mean, running_var);
      const BasicBatchNormGrads<T> grads{output<T>("dx", dx), optional_exact<T>("dgamma", dgamma),
                                         optional_exact<T>("dbeta", dbeta)};
      library::batch_norm_backward(dy_view, x_view, grads, options, running);
    });
  });
}

}  // extern "C"
