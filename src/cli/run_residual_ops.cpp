// `addnorm run` for the residual ops: add, dropout, and the fused add_norm_pre (GPT-2) and
// add_norm_post (2017 paper).
#include "addnorm/error.hpp"
#include "addnorm/overloads.hpp"
#include "cli/run_ops.hpp"

namespace addnorm::cli {

namespace {

template <class T>
BasicDropoutOptions<T> dropout_options(const RunSettings& settings) {
  BasicDropoutOptions<T> options;
  options.p = dropout_p_as<T>(settings.p);
  options.seed = settings.seed;
  options.offset = settings.offset;
  return options;
}

// The per-row statistics a fused forward saves: RMSNorm has no mean.
template <class T>
BasicNormStats<T> add_norm_stats(const BasicNormOptions<T>& options, const Shape& rows,
                                 OutputSet<T>& outputs) {
  BasicNormStats<T> stats;
  if (norm_traits(*options.norm).centres) stats.mean = outputs.add("mean", rows).view();
  stats.rstd = outputs.add("rstd", rows).view();
  return stats;
}

// The backward of an elementwise op takes dy of x's shape.
template <class T>
void check_same_shape(const BasicTensor<T>& dy, const BasicTensor<T>& x) {
  if (!(dy.shape() == x.shape())) {
    throw Error("dy has shape " + dy.shape().to_string() + ", expected x's shape " +
                x.shape().to_string());
  }
}

template <class T>
void run_add(const RunSettings& settings, InputSet<T>& inputs, OutputSet<T>& outputs) {
  const BasicTensor<T> x = inputs.load("x", settings.x);
  const BasicTensor<T> residual = inputs.load("residual", settings.residual);
  // The forward runs in both modes: it is what checks that x and the residual agree.
  BasicTensor<T> sum(x.shape());
  overloads::add(x.cview(), residual.cview(), sum.view());
  if (!settings.backward) {
    outputs.add_copy("y", sum);
    return;
  }
  // y = x + residual passes its gradient through unchanged to both.
  const BasicTensor<T> dy = inputs.load_for_backward("dy", settings.dy);
  check_same_shape(dy, x);
  outputs.add_copy("dx", dy);
  outputs.add_copy("dresidual", dy);
}

template <class T>
void run_dropout(const RunSettings& settings, InputSet<T>& inputs, OutputSet<T>& outputs) {
  const BasicTensor<T> x = inputs.load("x", settings.x);
  const auto options = dropout_options<T>(settings);
  if (!settings.backward) {
    overloads::dropout(x.cview(), outputs.add("y", x.shape()).view(), options);
    return;
  }
  const BasicTensor<T> dy = inputs.load_for_backward("dy", settings.dy);
  check_same_shape(dy, x);
  overloads::dropout_backward(dy.cview(), outputs.add("dx", x.shape()).view(), options);
}

// What both fused ops take after their two streams: the affine parts, the normalised dims and the
// norm's description (whose views point into the weight's and bias's buffers, which a move keeps).
template <class T>
struct FusedNorm {
  FusedNorm() = default;
  FusedNorm(FusedNorm&&) = default;
  FusedNorm(const FusedNorm&) = delete;  // a copy's options would point into the original
  FusedNorm& operator=(const FusedNorm&) = delete;
  FusedNorm& operator=(FusedNorm&&) = delete;

  std::optional<BasicTensor<T>> weight, bias;
  Shape normalized_shape;
  BasicNormOptions<T> options;
};

template <class T>
FusedNorm<T> load_fused_norm(const RunSettings& settings, InputSet<T>& inputs,
                             const Shape& x_shape) {
  FusedNorm<T> norm;
  norm.weight = inputs.load_optional("weight", settings.weight);
  norm.bias = inputs.load_optional("bias", settings.bias);
  norm.normalized_shape = resolve_normalized_shape(settings, x_shape);
  norm.options = norm_options<T>(settings, norm_kind_from(settings.norm), norm.weight, norm.bias);
  return norm;
}

template <class T>
void run_add_norm_pre(const RunSettings& settings, InputSet<T>& inputs, OutputSet<T>& outputs) {
  const BasicTensor<T> x = inputs.load("x", settings.x);
  const BasicTensor<T> residual = inputs.load("residual", settings.residual);
  const FusedNorm<T> norm = load_fused_norm(settings, inputs, x.shape());
  const Shape& normalized_shape = norm.normalized_shape;
  const BasicNormOptions<T>& options = norm.options;

  if (!settings.backward) {
    auto& h = outputs.add("h", x.shape());
    auto& y = outputs.add("y", x.shape());
    const auto stats =
        add_norm_stats(options, row_stats_shape(x.shape(), normalized_shape), outputs);
    overloads::add_norm_pre(x.cview(), residual.cview(), normalized_shape, h.view(), y.view(),
                            options, stats);
    return;
  }
  const BasicTensor<T> dy = inputs.load_for_backward("dy", settings.dy);
  const auto dh_next = inputs.load_optional("dh_next", settings.dh_next);
  // The backward reads h = x + residual, recomputed here exactly as the forward rounds it.
  BasicTensor<T> h(x.shape());
  overloads::add(x.cview(), residual.cview(), h.view());
  BasicAddNormPreGrads<T> grads{outputs.add("dh", x.shape()).view(), std::nullopt, std::nullopt};
  add_affine_grads(norm.weight, norm.bias, outputs, grads);
  overloads::add_norm_pre_backward(dy.cview(), optional_view(dh_next), h.cview(), normalized_shape,
                                   grads, options);
}

template <class T>
void run_add_norm_post(const RunSettings& settings, InputSet<T>& inputs, OutputSet<T>& outputs) {
  const BasicTensor<T> x = inputs.load("x", settings.x);
  const BasicTensor<T> s = inputs.load("s", settings.s);
  const FusedNorm<T> norm = load_fused_norm(settings, inputs, x.shape());
  const Shape& normalized_shape = norm.normalized_shape;
  const BasicNormOptions<T>& options = norm.options;
  const auto dropout = dropout_options<T>(settings);

  if (!settings.backward) {
    auto& y = outputs.add("y", x.shape());
    const auto stats =
        add_norm_stats(options, row_stats_shape(x.shape(), normalized_shape), outputs);
    overloads::add_norm_post(x.cview(), s.cview(), normalized_shape, y.view(), options, dropout,
                             stats);
    return;
  }
  const BasicTensor<T> dy = inputs.load_for_backward("dy", settings.dy);
  BasicAddNormPostGrads<T> grads{outputs.add("dx", x.shape()).view(),
                                 outputs.add("ds", x.shape()).view(), std::nullopt, std::nullopt};
  add_affine_grads(norm.weight, norm.bias, outputs, grads);
  overloads::add_norm_post_backward(dy.cview(), x.cview(), s.cview(), normalized_shape, grads,
                                    options, dropout);
}

}  // namespace

const OpRunner kRunAdd{run_add<float>, run_add<double>};
const OpRunner kRunDropout{run_dropout<float>, run_dropout<double>};
const OpRunner kRunAddNormPre{run_add_norm_pre<float>, run_add_norm_pre<double>};
const OpRunner kRunAddNormPost{run_add_norm_post<float>, run_add_norm_post<double>};

}  // namespace addnorm::cli
