// `addnorm run batch_norm`: forward writes y, and in training mode the batch mean and rstd and
// (when given) the updated running statistics; backward writes dx, dweight and dbias. The input
// running statistics are copied, never modified.
#include "addnorm/error.hpp"
#include "cli/run_ops.hpp"

namespace addnorm::cli {

namespace {

BatchNormOptions batch_norm_options(const RunSettings& settings,
                                    const std::optional<Tensor>& weight,
                                    const std::optional<Tensor>& bias) {
  BatchNormOptions options;
  options.gamma = optional_view(weight);
  options.beta = optional_view(bias);
  options.training = settings.training;
  options.eps = settings.eps;
  options.convention =
      settings.convention == "onnx" ? MomentumConvention::onnx : MomentumConvention::pytorch;
  // Each convention's own default: ONNX's momentum weights the old value, PyTorch's the new.
  options.momentum = settings.momentum_given                          ? settings.momentum
                     : options.convention == MomentumConvention::onnx ? 0.9f
                                                                      : 0.1f;
  return options;
}

}  // namespace

void run_batch_norm(const RunSettings& settings, InputSet& inputs, OutputSet& outputs) {
  const Tensor x = inputs.load("x", settings.x);
  const std::optional<Tensor> weight = inputs.load_optional("weight", settings.weight);
  const std::optional<Tensor> bias = inputs.load_optional("bias", settings.bias);
  const std::optional<Tensor> running_mean =
      inputs.load_optional("running_mean", settings.running_mean);
  const std::optional<Tensor> running_var =
      inputs.load_optional("running_var", settings.running_var);
  if (running_mean.has_value() != running_var.has_value()) {
    throw Error(running_mean ? "--running_var is missing, expected it with --running_mean"
                             : "--running_mean is missing, expected it with --running_var");
  }
  const BatchNormOptions options = batch_norm_options(settings, weight, bias);
  Tensor* y = settings.backward ? nullptr : &outputs.add("y", x.shape());
  // Only a training forward changes the running statistics, and only then are they outputs.
  const bool updates_running = running_mean && options.training && !settings.backward;
  std::optional<Tensor> scratch_mean, scratch_var;
  std::optional<RunningStats> running;
  if (updates_running) {
    running = RunningStats{outputs.add_copy("running_mean", *running_mean).view(),
                           outputs.add_copy("running_var", *running_var).view()};
  } else if (running_mean) {
    scratch_mean = *running_mean;
    scratch_var = *running_var;
    running = RunningStats{scratch_mean->view(), scratch_var->view()};
  }
  // The channel count for the batch statistics; an x that is not (N, C) or (N, C, L) is refused
  // by batch_norm before it looks at them.
  const Shape channels{x.shape().rank() >= 2 ? x.shape()[1] : 1};

  if (!settings.backward) {
    std::optional<NormStats> batch_stats;
    if (options.training) {
      batch_stats =
          NormStats{outputs.add("mean", channels).view(), outputs.add("rstd", channels).view()};
    }
    batch_norm(x.cview(), y->view(), options, running, batch_stats);
    return;
  }
  const Tensor dy = inputs.load_for_backward("dy", settings.dy);
  BatchNormGrads grads{outputs.add("dx", x.shape()).view(), std::nullopt, std::nullopt};
  if (weight) grads.dgamma = outputs.add("dweight", weight->shape()).view();
  if (bias) grads.dbeta = outputs.add("dbias", bias->shape()).view();
  batch_norm_backward(dy.cview(), x.cview(), grads, options, running);
}

}  // namespace addnorm::cli
