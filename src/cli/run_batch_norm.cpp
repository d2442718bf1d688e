// `addnorm run batch_norm`: forward writes y, and in training mode the batch mean and rstd and
// (when given) the updated running statistics; backward writes dx, dweight and dbias. The input
// running statistics are copied, never modified.
#include "addnorm/error.hpp"
#include "addnorm/overloads.hpp"
#include "cli/run_ops.hpp"

namespace addnorm::cli {

namespace {

template <class T>
BasicBatchNormOptions<T> batch_norm_options(const RunSettings& settings,
                                            const std::optional<BasicTensor<T>>& weight,
                                            const std::optional<BasicTensor<T>>& bias) {
  BasicBatchNormOptions<T> options{norm_options(settings, NormKind::layer_norm, weight, bias)};
  options.training = settings.training;
  options.convention =
      settings.convention == "onnx" ? MomentumConvention::onnx : MomentumConvention::pytorch;
  // Each convention's own default: ONNX's momentum weights the old value, PyTorch's the new.
  options.momentum = momentum_as<T>(settings.momentum_given ? settings.momentum
                                    : options.convention == MomentumConvention::onnx ? 0.9
                                                                                     : 0.1);
  return options;
}

template <class T>
void run_batch_norm(const RunSettings& settings, InputSet<T>& inputs, OutputSet<T>& outputs) {
  const BasicTensor<T> x = inputs.load("x", settings.x);
  const auto weight = inputs.load_optional("weight", settings.weight);
  const auto bias = inputs.load_optional("bias", settings.bias);
  const auto running_mean = inputs.load_optional("running_mean", settings.running_mean);
  const auto running_var = inputs.load_optional("running_var", settings.running_var);
  if (running_mean.has_value() != running_var.has_value()) {
    throw Error(running_mean ? "--running_var is missing, expected it with --running_mean"
                             : "--running_mean is missing, expected it with --running_var");
  }
  const auto options = batch_norm_options<T>(settings, weight, bias);
  BasicTensor<T>* y = settings.backward ? nullptr : &outputs.add("y", x.shape());
  // Only a training forward changes the running statistics, and only then are they outputs.
  const bool updates_running = running_mean && options.training && !settings.backward;
  std::optional<BasicTensor<T>> scratch_mean, scratch_var;
  std::optional<BasicRunningStats<T>> running;
  if (updates_running) {
    running = BasicRunningStats<T>{outputs.add_copy("running_mean", *running_mean).view(),
                                   outputs.add_copy("running_var", *running_var).view()};
  } else if (running_mean) {
    scratch_mean = *running_mean;
    scratch_var = *running_var;
    running = BasicRunningStats<T>{scratch_mean->view(), scratch_var->view()};
  }
  // The channel count for the batch statistics; an x that is not (N, C) or (N, C, L) is refused
  // by batch_norm before it looks at them.
  const Shape channels{x.shape().rank() >= 2 ? x.shape()[1] : 1};

  if (!settings.backward) {
    std::optional<BasicNormStats<T>> batch_stats;
    if (options.training) {
      batch_stats = BasicNormStats<T>{outputs.add("mean", channels).view(),
                                      outputs.add("rstd", channels).view()};
    }
    overloads::batch_norm(x.cview(), y->view(), options, running, batch_stats);
    return;
  }
  const BasicTensor<T> dy = inputs.load_for_backward("dy", settings.dy);
  BasicBatchNormGrads<T> grads{outputs.add("dx", x.shape()).view(), std::nullopt, std::nullopt};
  add_affine_grads(weight, bias, outputs, grads);
  overloads::batch_norm_backward(dy.cview(), x.cview(), grads, options, running);
}

}  // namespace

const OpRunner kRunBatchNorm{run_batch_norm<float>, run_batch_norm<double>};

}  // namespace addnorm::cli
