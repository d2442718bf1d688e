// BatchNorm's public entry points: validate every argument, then normalise channel by channel.
#include <cmath>

#include "addnorm/error.hpp"
#include "addnorm/ops.hpp"
#include "ops/cpu/batch_norm_kernels.hpp"
#include "ops/reference/batch_norm.hpp"
#include "ops/validate.hpp"

namespace addnorm {

using detail::region;

namespace {

reference::BatchLayout batch_layout(const ConstView& x) {
  detail::check_tensor("x", x);
  if (x.shape.rank() != 2 && x.shape.rank() != 3) {
    throw Error("x has shape " + x.shape.to_string() +
                ", expected (N, C) or (N, C, L) with channels on axis 1");
  }
  return {x.shape[0], x.shape[1], x.shape.rank() == 3 ? x.shape[2] : 1};
}

void check_options(const BatchNormOptions& options, const reference::BatchLayout& layout,
                   const std::optional<RunningStats>& running) {
  const Shape channels{layout.channels};
  detail::check_affine(options.gamma, options.beta, channels);
  detail::check_eps(options.eps);
  detail::check_momentum(options.momentum);
  if (running) {
    detail::check_shape("running_mean", running->mean, channels);
    detail::check_shape("running_var", running->var, channels);
  } else if (!options.training) {
    throw Error("running_mean and running_var are absent, expected both in inference mode");
  }
  if (options.training && layout.per_channel() < 2) {
    throw Error("x has shape [" + std::to_string(layout.batch) + ", " +
                std::to_string(layout.channels) + (layout.length > 1 ? ", ..." : "") +
                "] with 1 value per channel, expected more than 1 in training mode");
  }
}

// The running-statistics update after a training batch, in either convention.
void update_running(RunningStats& running, int64_t c, double batch_mean, double batch_var,
                    int64_t count, const BatchNormOptions& options) {
  const double momentum = options.momentum;
  if (options.convention == MomentumConvention::pytorch) {
    // PyTorch: momentum weights the new batch; the stored variance is unbiased (n / (n - 1)).
    const double unbiased = batch_var * double(count) / double(count - 1);
    running.mean.data[c] =
        static_cast<float>((1.0 - momentum) * running.mean.data[c] + momentum * batch_mean);
    running.var.data[c] =
        static_cast<float>((1.0 - momentum) * running.var.data[c] + momentum * unbiased);
  } else {
    // ONNX: momentum weights the old value; the stored variance is the biased batch variance.
    running.mean.data[c] =
        static_cast<float>(momentum * running.mean.data[c] + (1.0 - momentum) * batch_mean);
    running.var.data[c] =
        static_cast<float>(momentum * running.var.data[c] + (1.0 - momentum) * batch_var);
  }
}

// Inference mode's constants: the running mean, and 1 / sqrt(running_var + eps).
void running_constants(const RunningStats& running, float eps, std::vector<double>& mean,
                       std::vector<double>& rstd) {
  for (size_t c = 0; c < mean.size(); ++c) {
    mean[c] = running.mean.data[c];
    rstd[c] = 1.0 / std::sqrt(double(running.var.data[c]) + double(eps));
  }
}

}  // namespace

void batch_norm(ConstView x, MutableView y, const BatchNormOptions& options,
                std::optional<RunningStats> running, std::optional<NormStats> batch_stats) {
  const reference::BatchLayout layout = batch_layout(x);
  detail::check_shape("y", y, x.shape);
  check_options(options, layout, running);
  if (batch_stats) {
    if (!options.training) {
      throw Error("batch_stats was requested in inference mode, expected it only in training");
    }
    detail::check_shape("batch mean", batch_stats->mean, Shape{layout.channels});
    detail::check_shape("batch rstd", batch_stats->rstd, Shape{layout.channels});
  }
  detail::check_disjoint(
      {region("y", y), region("running_mean", running ? &running->mean : nullptr),
       region("running_var", running ? &running->var : nullptr),
       region("batch mean", batch_stats ? &batch_stats->mean : nullptr),
       region("batch rstd", batch_stats ? &batch_stats->rstd : nullptr)},
      {region("x", x), region("gamma", options.gamma), region("beta", options.beta)},
      {{"y", "x"}});
  const cpu::BatchShape shape{layout.batch, layout.channels, layout.length};
  const auto channels = static_cast<size_t>(layout.channels);
  std::vector<double> mean(channels), rstd(channels);
  if (options.training) {
    cpu::ChannelStats batch;
    cpu::batch_statistics(x.data, shape, batch);
    for (int64_t c = 0; c < layout.channels; ++c) {
      mean[c] = batch.mean[c];
      rstd[c] = 1.0 / std::sqrt(batch.variance[c] + double(options.eps));
      if (running) {
        update_running(*running, c, batch.mean[c], batch.variance[c], layout.per_channel(),
                       options);
      }
      if (batch_stats) {
        batch_stats->mean.data[c] = static_cast<float>(mean[c]);
        batch_stats->rstd.data[c] = static_cast<float>(rstd[c]);
      }
    }
  } else {
    running_constants(*running, options.eps, mean, rstd);
  }
  cpu::batch_normalise(x.data, mean.data(), rstd.data(),
                       options.gamma ? options.gamma->data : nullptr,
                       options.beta ? options.beta->data : nullptr, y.data, shape);
}

void batch_norm_backward(ConstView dy, ConstView x, const BatchNormGrads& grads,
                         const BatchNormOptions& options, std::optional<RunningStats> running) {
  const reference::BatchLayout layout = batch_layout(x);
  detail::check_shape("dy", dy, x.shape);
  detail::check_shape("dx", grads.dx, x.shape);
  check_options(options, layout, running);
  const Shape channels{layout.channels};
  detail::check_parameter_grad("dgamma", grads.dgamma, "gamma", options.gamma, channels);
  detail::check_parameter_grad("dbeta", grads.dbeta, "beta", options.beta, channels);
  detail::check_disjoint(
      {region("dx", grads.dx), region("dgamma", grads.dgamma), region("dbeta", grads.dbeta)},
      {region("dy", dy), region("x", x), region("gamma", options.gamma),
       region("running_mean", running ? &running->mean : nullptr),
       region("running_var", running ? &running->var : nullptr)},
      {{"dx", "dy"}, {"dx", "x"}});
  const float* gamma = options.gamma ? options.gamma->data : nullptr;
  float* dgamma = grads.dgamma ? grads.dgamma->data : nullptr;
  float* dbeta = grads.dbeta ? grads.dbeta->data : nullptr;
  const cpu::BatchShape shape{layout.batch, layout.channels, layout.length};
  if (options.training) {
    cpu::batch_norm_backward_training(dy.data, x.data, gamma, grads.dx.data, dgamma, dbeta, shape,
                                      options.eps);
  } else {
    const auto channel_count = static_cast<size_t>(layout.channels);
    std::vector<double> mean(channel_count), rstd(channel_count);
    running_constants(*running, options.eps, mean, rstd);
    cpu::batch_norm_backward_inference(dy.data, x.data, gamma, mean.data(), rstd.data(),
                                       grads.dx.data, dgamma, dbeta, shape);
  }
}

}  // namespace addnorm
