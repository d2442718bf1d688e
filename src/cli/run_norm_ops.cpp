// `addnorm run layer_norm`, `rms_norm` and `group_norm`: forward writes y and the per-row
// (per-group) statistics; backward writes dx and the gradients of the weights that were given.
// Each for T = float (the float32 ops) and T = double (the float64 ops), through one overload set.
#include <algorithm>
#include <cstdint>

#include "addnorm/overloads.hpp"
#include "cli/run_ops.hpp"

namespace addnorm::cli {

template <class T>
BasicNormOptions<T> norm_options(const RunSettings& settings, NormKind kind,
                                 const std::optional<BasicTensor<T>>& weight,
                                 const std::optional<BasicTensor<T>>& bias) {
  BasicNormOptions<T> options;
  options.norm = kind;
  options.gamma = optional_view(weight);
  options.beta = optional_view(bias);
  options.zero_centered_gamma = settings.zero_centered_gamma;
  if (settings.eps_given) options.eps = eps_as<T>(settings.eps);
  return options;
}
template BasicNormOptions<float> norm_options(const RunSettings&, NormKind,
                                              const std::optional<BasicTensor<float>>&,
                                              const std::optional<BasicTensor<float>>&);
template BasicNormOptions<double> norm_options(const RunSettings&, NormKind,
                                               const std::optional<BasicTensor<double>>&,
                                               const std::optional<BasicTensor<double>>&);

namespace {

template <class T>
void run_layer_norm(const RunSettings& settings, InputSet<T>& inputs, OutputSet<T>& outputs) {
  const BasicTensor<T> x = inputs.load("x", settings.x);
  const auto weight = inputs.load_optional("weight", settings.weight);
  const auto bias = inputs.load_optional("bias", settings.bias);
  const Shape normalized_shape = resolve_normalized_shape(settings, x.shape());
  const auto options = norm_options<T>(settings, NormKind::layer_norm, weight, bias);

  if (!settings.backward) {
    auto& y = outputs.add("y", x.shape());
    auto& mean = outputs.add("mean", row_stats_shape(x.shape(), normalized_shape));
    auto& rstd = outputs.add("rstd", row_stats_shape(x.shape(), normalized_shape));
    overloads::layer_norm(x.cview(), normalized_shape, y.view(), options,
                          BasicNormStats<T>{mean.view(), rstd.view()});
    return;
  }
  const BasicTensor<T> dy = inputs.load_for_backward("dy", settings.dy);
  BasicLayerNormGrads<T> grads{outputs.add("dx", x.shape()).view(), std::nullopt, std::nullopt};
  add_affine_grads(weight, bias, outputs, grads);
  overloads::layer_norm_backward(dy.cview(), x.cview(), normalized_shape, grads, options);
}

template <class T>
void run_rms_norm(const RunSettings& settings, InputSet<T>& inputs, OutputSet<T>& outputs) {
  const BasicTensor<T> x = inputs.load("x", settings.x);
  const auto weight = inputs.load_optional("weight", settings.weight);
  const Shape normalized_shape = resolve_normalized_shape(settings, x.shape());
  const auto options = norm_options<T>(settings, NormKind::rms_norm, weight, std::nullopt);

  if (!settings.backward) {
    auto& y = outputs.add("y", x.shape());
    auto& rstd = outputs.add("rstd", row_stats_shape(x.shape(), normalized_shape));
    overloads::rms_norm(x.cview(), normalized_shape, y.view(), options, rstd.view());
    return;
  }
  const BasicTensor<T> dy = inputs.load_for_backward("dy", settings.dy);
  BasicRmsNormGrads<T> grads{outputs.add("dx", x.shape()).view(), std::nullopt};
  add_affine_grads(weight, std::optional<BasicTensor<T>>{}, outputs, grads);
  overloads::rms_norm_backward(dy.cview(), x.cview(), normalized_shape, grads, options);
}

template <class T>
void run_group_norm(const RunSettings& settings, InputSet<T>& inputs, OutputSet<T>& outputs) {
  const BasicTensor<T> x = inputs.load("x", settings.x);
  const auto weight = inputs.load_optional("weight", settings.weight);
  const auto bias = inputs.load_optional("bias", settings.bias);
  BasicGroupNormOptions<T> options{norm_options(settings, NormKind::layer_norm, weight, bias)};
  // Above int64's range it cannot divide C: refused here, quoting the value as typed (the
  // library, which takes an int64, would quote its clamp).
  if (settings.num_groups > static_cast<uint64_t>(INT64_MAX)) {
    throw Error(ErrorKind::value, "num_groups",
                "is " + std::to_string(settings.num_groups) + ", expected a divisor of the " +
                    std::to_string(x.shape().rank() >= 2 ? x.shape()[1] : 0) +
                    " channels of x (axis 1 of " + x.shape().to_string() + ")");
  }
  options.num_groups = static_cast<int64_t>(settings.num_groups);

  if (!settings.backward) {
    // Per (sample, group), sized only once num_groups is known to divide C, so at most x's
    // element count; otherwise group_norm refuses x or num_groups before it looks at the
    // statistics. (An x with no elements, whose C = 0 every num_groups divides, is bounded by
    // OutputSet: no output outgrows the largest input.)
    const Shape& shape = x.shape();
    const bool fits =
        shape.rank() >= 2 && options.num_groups >= 1 && shape[1] % options.num_groups == 0;
    const Shape stats = fits ? Shape{shape[0], options.num_groups} : Shape{1};
    auto& y = outputs.add("y", x.shape());
    auto& mean = outputs.add("mean", stats);
    auto& rstd = outputs.add("rstd", stats);
    overloads::group_norm(x.cview(), y.view(), options,
                          BasicNormStats<T>{mean.view(), rstd.view()});
    return;
  }
  const BasicTensor<T> dy = inputs.load_for_backward("dy", settings.dy);
  BasicGroupNormGrads<T> grads{outputs.add("dx", x.shape()).view(), std::nullopt, std::nullopt};
  add_affine_grads(weight, bias, outputs, grads);
  overloads::group_norm_backward(dy.cview(), x.cview(), grads, options);
}

}  // namespace

const OpRunner kRunLayerNorm{run_layer_norm<float>, run_layer_norm<double>};
const OpRunner kRunRmsNorm{run_rms_norm<float>, run_rms_norm<double>};
const OpRunner kRunGroupNorm{run_group_norm<float>, run_group_norm<double>};

}  // namespace addnorm::cli
