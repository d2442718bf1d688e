// BatchNorm on float64 views (addnorm/float64.hpp): the float32 op's checks (op_checks.hpp),
// then the reference kernels, channel by channel.
#include <cmath>

#include "addnorm/float64.hpp"
#include "ops/empty_batch.hpp"
#include "ops/op_checks.hpp"
#include "ops/reference/batch_norm.hpp"

namespace addnorm::float64 {

namespace {

using Wide = reference::Acc<double>;

template <class View>
auto data_or_null(const std::optional<View>& view) {
  return view ? view->data : nullptr;
}

// Inference mode's constant 1 / sqrt(running_var + eps) for channel c.
Wide running_rstd(const RunningStats& running, int64_t c, double eps) {
  return reference::inference_rstd_of(Wide(running.var.data[c]), Wide(eps));
}

}  // namespace

void batch_norm(ConstView x, MutableView y, const BatchNormOptions& options,
                std::optional<RunningStats> running, std::optional<NormStats> batch_stats) {
  const reference::BatchLayout layout =
      detail::check_batch_norm<double>(x, y, options, running, batch_stats);
  // An empty batch leaves the running statistics as they are.
  if (detail::empty_statistics(layout.elements(), options.training ? batch_stats : std::nullopt,
                               layout.channels)) {
    return;
  }
  const double eps = detail::channel_eps(options);
  for (int64_t c = 0; c < layout.channels; ++c) {
    Wide mean = 0, rstd = 0;
    if (options.training) {
      const auto moments = reference::channel_moments(x.data, layout, c);
      mean = moments.mean;
      rstd = reference::rstd_of(moments.variance, Wide(eps));
      if (running) {
        reference::update_running(running->mean.data[c], running->var.data[c], moments.mean,
                                  moments.variance, layout.per_channel(), Wide(options.momentum),
                                  options.convention);
      }
      if (batch_stats) {
        batch_stats->mean.data[c] = double(mean);
        batch_stats->rstd.data[c] = double(rstd);
      }
    } else {
      mean = running->mean.data[c];
      rstd = running_rstd(*running, c, eps);
    }
    reference::normalise_channel<double>(x.data, data_or_null(options.gamma),
                                         data_or_null(options.beta), y.data, layout, c, mean, rstd);
  }
}

void batch_norm_backward(ConstView dy, ConstView x, const BatchNormGrads& grads,
                         const BatchNormOptions& options, std::optional<RunningStats> running) {
  const reference::BatchLayout layout =
      detail::check_batch_norm_backward<double>(dy, x, grads, options, running);
  if (detail::empty_gradients(layout.elements(), grads, layout.channels)) return;
  const double* gamma = data_or_null(options.gamma);
  double* dgamma = data_or_null(grads.dgamma);
  double* dbeta = data_or_null(grads.dbeta);
  const double eps = detail::channel_eps(options);
  for (int64_t c = 0; c < layout.channels; ++c) {
    if (options.training) {
      reference::batch_norm_backward_channel<double>(dy.data, x.data, gamma, grads.dx.data, dgamma,
                                                     dbeta, layout, c, eps);
    } else {
      reference::batch_norm_eval_backward_channel<double>(
          dy.data, x.data, gamma, grads.dx.data, dgamma, dbeta, layout, c, running->mean.data[c],
          running_rstd(*running, c, eps));
    }
  }
}

}  // namespace addnorm::float64
