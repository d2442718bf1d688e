// `addnorm run` for the residual ops: add, dropout, and the fused add_norm_pre (GPT-2) and
// add_norm_post (2017 paper).
#include "addnorm/error.hpp"
#include "cli/run_ops.hpp"

namespace addnorm::cli {

namespace {

DropoutOptions dropout_options(const RunSettings& settings) {
  DropoutOptions options;
  options.p = settings.p;
  options.seed = settings.seed;
  options.offset = settings.offset;
  return options;
}

// The per-row statistics a fused forward saves: RMSNorm has no mean.
NormStats add_norm_stats(const NormOptions& options, const Shape& rows, OutputSet& outputs) {
  NormStats stats;
  if (norm_traits(*options.norm).centres) stats.mean = outputs.add("mean", rows).view();
  stats.rstd = outputs.add("rstd", rows).view();
  return stats;
}

// The backward of an elementwise op takes dy of x's shape.
void check_same_shape(const Tensor& dy, const Tensor& x) {
  if (!(dy.shape() == x.shape())) {
    throw Error("dy has shape " + dy.shape().to_string() + ", expected x's shape " +
                x.shape().to_string());
  }
}

}  // namespace

void run_add(const RunSettings& settings, InputSet& inputs, OutputSet& outputs) {
  const Tensor x = inputs.load("x", settings.x);
  const Tensor residual = inputs.load("residual", settings.residual);
  // The forward runs in both modes: it is what checks that x and the residual agree.
  Tensor sum(x.shape());
  add(x.cview(), residual.cview(), sum.view());
  if (!settings.backward) {
    outputs.add_copy("y", sum);
    return;
  }
  // y = x + residual passes its gradient through unchanged to both.
  const Tensor dy = inputs.load_for_backward("dy", settings.dy);
  check_same_shape(dy, x);
  outputs.add_copy("dx", dy);
  outputs.add_copy("dresidual", dy);
}

void run_dropout(const RunSettings& settings, InputSet& inputs, OutputSet& outputs) {
  const Tensor x = inputs.load("x", settings.x);
  const DropoutOptions options = dropout_options(settings);
  if (!settings.backward) {
    dropout(x.cview(), outputs.add("y", x.shape()).view(), options);
    return;
  }
  const Tensor dy = inputs.load_for_backward("dy", settings.dy);
  check_same_shape(dy, x);
  dropout_backward(dy.cview(), outputs.add("dx", x.shape()).view(), options);
}

void run_add_norm_pre(const RunSettings& settings, InputSet& inputs, OutputSet& outputs) {
  const Tensor x = inputs.load("x", settings.x);
  const Tensor residual = inputs.load("residual", settings.residual);
  const std::optional<Tensor> weight = inputs.load_optional("weight", settings.weight);
  const std::optional<Tensor> bias = inputs.load_optional("bias", settings.bias);
  const Shape normalized_shape = resolve_normalized_shape(settings, x.shape());
  const NormOptions options = norm_options(settings, norm_kind_from(settings.norm), weight, bias);

  if (!settings.backward) {
    Tensor& h = outputs.add("h", x.shape());
    Tensor& y = outputs.add("y", x.shape());
    const NormStats stats =
        add_norm_stats(options, row_stats_shape(x.shape(), normalized_shape), outputs);
    add_norm_pre(x.cview(), residual.cview(), normalized_shape, h.view(), y.view(), options, stats);
    return;
  }
  const Tensor dy = inputs.load_for_backward("dy", settings.dy);
  const std::optional<Tensor> dh_next = inputs.load_optional("dh_next", settings.dh_next);
  // The backward reads h = x + residual, recomputed here exactly as the forward rounds it.
  Tensor h(x.shape());
  add(x.cview(), residual.cview(), h.view());
  AddNormPreGrads grads{outputs.add("dh", x.shape()).view(), std::nullopt, std::nullopt};
  if (weight) grads.dgamma = outputs.add("dweight", weight->shape()).view();
  if (bias) grads.dbeta = outputs.add("dbias", bias->shape()).view();
  add_norm_pre_backward(dy.cview(), optional_view(dh_next), h.cview(), normalized_shape, grads,
                        options);
}

void run_add_norm_post(const RunSettings& settings, InputSet& inputs, OutputSet& outputs) {
  const Tensor x = inputs.load("x", settings.x);
  const Tensor s = inputs.load("s", settings.s);
  const std::optional<Tensor> weight = inputs.load_optional("weight", settings.weight);
  const std::optional<Tensor> bias = inputs.load_optional("bias", settings.bias);
  const Shape normalized_shape = resolve_normalized_shape(settings, x.shape());
  const NormOptions options = norm_options(settings, norm_kind_from(settings.norm), weight, bias);
  const DropoutOptions dropout = dropout_options(settings);

  if (!settings.backward) {
    Tensor& y = outputs.add("y", x.shape());
    const NormStats stats =
        add_norm_stats(options, row_stats_shape(x.shape(), normalized_shape), outputs);
    add_norm_post(x.cview(), s.cview(), normalized_shape, y.view(), options, dropout, stats);
    return;
  }
  const Tensor dy = inputs.load_for_backward("dy", settings.dy);
  AddNormPostGrads grads{outputs.add("dx", x.shape()).view(), outputs.add("ds", x.shape()).view(),
                         std::nullopt, std::nullopt};
  if (weight) grads.dgamma = outputs.add("dweight", weight->shape()).view();
  if (bias) grads.dbeta = outputs.add("dbias", bias->shape()).view();
  add_norm_post_backward(dy.cview(), x.cview(), s.cview(), normalized_shape, grads, options,
                         dropout);
}

}  // namespace addnorm::cli
