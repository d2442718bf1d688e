// `addnorm run layer_norm` and `addnorm run rms_norm`: forward writes y and the per-row
// statistics; backward writes dx and the gradients of the weights that were given.
#include "cli/run_ops.hpp"

namespace addnorm::cli {

void run_layer_norm(const RunSettings& settings, InputSet& inputs, OutputSet& outputs) {
  const Tensor x = inputs.load("x", settings.x);
  const std::optional<Tensor> weight = inputs.load_optional("weight", settings.weight);
  const std::optional<Tensor> bias = inputs.load_optional("bias", settings.bias);
  const Shape normalized_shape = resolve_normalized_shape(settings, x.shape());
  LayerNormOptions options;
  options.gamma = optional_view(weight);
  options.beta = optional_view(bias);
  options.eps = settings.eps;

  if (!settings.backward) {
    Tensor& y = outputs.add("y", x.shape());
    Tensor& mean = outputs.add("mean", row_stats_shape(x.shape(), normalized_shape));
    Tensor& rstd = outputs.add("rstd", row_stats_shape(x.shape(), normalized_shape));
    layer_norm(x.cview(), normalized_shape, y.view(), options, NormStats{mean.view(), rstd.view()});
    return;
  }
  const Tensor dy = inputs.load_for_backward("dy", settings.dy);
  LayerNormGrads grads{outputs.add("dx", x.shape()).view(), std::nullopt, std::nullopt};
  if (weight) grads.dgamma = outputs.add("dweight", weight->shape()).view();
  if (bias) grads.dbeta = outputs.add("dbias", bias->shape()).view();
  layer_norm_backward(dy.cview(), x.cview(), normalized_shape, grads, options);
}

void run_rms_norm(const RunSettings& settings, InputSet& inputs, OutputSet& outputs) {
  const Tensor x = inputs.load("x", settings.x);
  const std::optional<Tensor> weight = inputs.load_optional("weight", settings.weight);
  const Shape normalized_shape = resolve_normalized_shape(settings, x.shape());
  RmsNormOptions options;
  options.gamma = optional_view(weight);
  options.zero_centered_gamma = settings.zero_centered_gamma;
  options.eps = settings.eps;

  if (!settings.backward) {
    Tensor& y = outputs.add("y", x.shape());
    Tensor& rstd = outputs.add("rstd", row_stats_shape(x.shape(), normalized_shape));
    rms_norm(x.cview(), normalized_shape, y.view(), options, rstd.view());
    return;
  }
  const Tensor dy = inputs.load_for_backward("dy", settings.dy);
  RmsNormGrads grads{outputs.add("dx", x.shape()).view(), std::nullopt};
  if (weight) grads.dgamma = outputs.add("dweight", weight->shape()).view();
  rms_norm_backward(dy.cview(), x.cview(), normalized_shape, grads, options);
}

}  // namespace addnorm::cli
