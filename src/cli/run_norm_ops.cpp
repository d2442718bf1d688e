// `addnorm run layer_norm`, `rms_norm` and `group_norm`: forward writes y and the per-row
// (per-group) statistics; backward writes dx and the gradients of the weights that were given.
#include <algorithm>
#include <cstdint>

#include "cli/run_ops.hpp"

namespace addnorm::cli {

NormOptions norm_options(const RunSettings& settings, NormKind kind,
                         const std::optional<Tensor>& weight, const std::optional<Tensor>& bias) {
  NormOptions options;
  options.norm = kind;
  options.gamma = optional_view(weight);
  options.beta = optional_view(bias);
  options.zero_centered_gamma = settings.zero_centered_gamma;
  if (settings.eps_given) options.eps = settings.eps;
  return options;
}

void run_layer_norm(const RunSettings& settings, InputSet& inputs, OutputSet& outputs) {
  const Tensor x = inputs.load("x", settings.x);
  const std::optional<Tensor> weight = inputs.load_optional("weight", settings.weight);
  const std::optional<Tensor> bias = inputs.load_optional("bias", settings.bias);
  const Shape normalized_shape = resolve_normalized_shape(settings, x.shape());
  const NormOptions options = norm_options(settings, NormKind::layer_norm, weight, bias);

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
  const NormOptions options = norm_options(settings, NormKind::rms_norm, weight, std::nullopt);

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

void run_group_norm(const RunSettings& settings, InputSet& inputs, OutputSet& outputs) {
  const Tensor x = inputs.load("x", settings.x);
  const std::optional<Tensor> weight = inputs.load_optional("weight", settings.weight);
  const std::optional<Tensor> bias = inputs.load_optional("bias", settings.bias);
  GroupNormOptions options;
  // Above int64's range it cannot divide C, and the library says so.
  options.num_groups = static_cast<int64_t>(std::min<uint64_t>(settings.num_groups, INT64_MAX));
  options.gamma = optional_view(weight);
  options.beta = optional_view(bias);
  options.eps = settings.eps;

  if (!settings.backward) {
    // Per (sample, group), sized only once num_groups is known to divide C, so at most x's
    // element count; otherwise group_norm refuses x or num_groups before it looks at the
    // statistics. (An x with no elements, whose C = 0 every num_groups divides, is bounded by
    // OutputSet: no output outgrows the largest input.)
    const Shape& shape = x.shape();
    const bool fits =
        shape.rank() >= 2 && options.num_groups >= 1 && shape[1] % options.num_groups == 0;
    const Shape stats = fits ? Shape{shape[0], options.num_groups} : Shape{1};
    Tensor& y = outputs.add("y", x.shape());
    Tensor& mean = outputs.add("mean", stats);
    Tensor& rstd = outputs.add("rstd", stats);
    group_norm(x.cview(), y.view(), options, NormStats{mean.view(), rstd.view()});
    return;
  }
  const Tensor dy = inputs.load_for_backward("dy", settings.dy);
  GroupNormGrads grads{outputs.add("dx", x.shape()).view(), std::nullopt, std::nullopt};
  if (weight) grads.dgamma = outputs.add("dweight", weight->shape()).view();
  if (bias) grads.dbeta = outputs.add("dbias", bias->shape()).view();
  group_norm_backward(dy.cview(), x.cview(), grads, options);
}

}  // namespace addnorm::cli
