// BatchNorm's public entry points: validate every argument, then normalise channel by channel.
#include <cmath>

#include "addnorm/error.hpp"
#include "addnorm/ops.hpp"
#include "ops/cpu/batch_norm_kernels.hpp"
#include "ops/cpu/scratch.hpp"
#include "ops/op_checks.hpp"
#include "ops/reference/batch_norm.hpp"

namespace addnorm {

namespace {

// Inference mode's constants: the running mean, and 1 / sqrt(running_var + eps).
void running_constants(const RunningStats& running, float eps, int64_t channels, double* mean,
                       double* rstd) {
  for (int64_t c = 0; c < channels; ++c) {
    mean[c] = running.mean.data[c];
    rstd[c] = 1.0 / std::sqrt(double(running.var.data[c]) + double(eps));
  }
}

}  // namespace

void batch_norm(ConstView x, MutableView y, const BatchNormOptions& options,
                std::optional<RunningStats> running, std::optional<NormStats> batch_stats) {
  const reference::BatchLayout layout =
      detail::check_batch_norm(x, y, options, running, batch_stats);
  const cpu::BatchShape shape{layout.batch, layout.channels, layout.length};
  const int64_t channels = layout.channels;
  cpu::Scratch scratch;
  double* mean = scratch.take<double>(channels);
  double* rstd = scratch.take<double>(channels);
  // The spread that decides whether a channel fits float32 lanes: the batch's variance in
  // training, the running variance (the spread x is assumed to have) in inference.
  double* variance = scratch.take<double>(channels);
  if (options.training) {
    cpu::batch_statistics(x.data, shape, mean, variance);
    for (int64_t c = 0; c < channels; ++c) {
      rstd[c] = 1.0 / std::sqrt(variance[c] + double(options.eps));
      if (running) {
        reference::update_running(running->mean.data[c], running->var.data[c], mean[c], variance[c],
                                  layout.per_channel(), double(options.momentum),
                                  options.convention);
      }
      if (batch_stats) {
        batch_stats->mean.data[c] = static_cast<float>(mean[c]);
        batch_stats->rstd.data[c] = static_cast<float>(rstd[c]);
      }
    }
  } else {
    running_constants(*running, options.eps, channels, mean, rstd);
    for (int64_t c = 0; c < channels; ++c) variance[c] = running->var.data[c];
  }
  cpu::batch_normalise(x.data, mean, rstd, variance, options.gamma ? options.gamma->data : nullptr,
                       options.beta ? options.beta->data : nullptr, y.data, shape);
}

void batch_norm_backward(ConstView dy, ConstView x, const BatchNormGrads& grads,
                         const BatchNormOptions& options, std::optional<RunningStats> running) {
  const reference::BatchLayout layout =
      detail::check_batch_norm_backward(dy, x, grads, options, running);
  const float* gamma = options.gamma ? options.gamma->data : nullptr;
  float* dgamma = grads.dgamma ? grads.dgamma->data : nullptr;
  float* dbeta = grads.dbeta ? grads.dbeta->data : nullptr;
  const cpu::BatchShape shape{layout.batch, layout.channels, layout.length};
  if (options.training) {
    cpu::batch_norm_backward_training(dy.data, x.data, gamma, grads.dx.data, dgamma, dbeta, shape,
                                      options.eps);
  } else {
    cpu::Scratch scratch;
    double* mean = scratch.take<double>(layout.channels);
    double* rstd = scratch.take<double>(layout.channels);
    running_constants(*running, options.eps, layout.channels, mean, rstd);
    cpu::batch_norm_backward_inference(dy.data, x.data, gamma, mean, rstd, grads.dx.data, dgamma,
                                       dbeta, shape);
  }
}

}  // namespace addnorm
