// LayerNorm and RMSNorm on float64 views (addnorm/float64.hpp): the float32 ops' checks
// (op_checks.hpp), then the reference kernels.
#include "addnorm/float64.hpp"
#include "ops/op_checks.hpp"
#include "ops/reference/layer_norm.hpp"
#include "ops/reference/rms_norm.hpp"

namespace addnorm::float64 {

namespace {

template <class View>
auto data_or_null(const std::optional<View>& view) {
  return view ? view->data : nullptr;
}

}  // namespace

void layer_norm(ConstView x, const Shape& normalized_shape, MutableView y,
                const LayerNormOptions& options, std::optional<NormStats> stats) {
  const detail::RowLayout layout = detail::check_layer_norm(x, normalized_shape, y, options, stats);
  reference::layer_norm_forward<double>(
      x.data, data_or_null(options.gamma), data_or_null(options.beta), y.data,
      stats ? stats->mean.data : nullptr, stats ? stats->rstd.data : nullptr, layout.rows,
      layout.dim, options.eps);
}

void layer_norm_backward(ConstView dy, ConstView x, const Shape& normalized_shape,
                         const LayerNormGrads& grads, const LayerNormOptions& options,
                         std::optional<SavedStats> saved) {
  const detail::RowLayout layout =
      detail::check_layer_norm_backward(dy, x, normalized_shape, grads, options, saved);
  reference::layer_norm_backward<double>(dy.data, x.data, data_or_null(options.gamma),
                                         saved ? saved->rstd.data : nullptr, nullptr, grads.dx.data,
                                         data_or_null(grads.dgamma), data_or_null(grads.dbeta),
                                         layout.rows, layout.dim, options.eps);
}

void rms_norm(ConstView x, const Shape& normalized_shape, MutableView y,
              const RmsNormOptions& options, OptionalMutable rstd) {
  const detail::RowLayout layout = detail::check_rms_norm(x, normalized_shape, y, options, rstd);
  reference::rms_norm_forward<double>(x.data, data_or_null(options.gamma),
                                      options.zero_centered_gamma, y.data, data_or_null(rstd),
                                      layout.rows, layout.dim, options.eps);
}

void rms_norm_backward(ConstView dy, ConstView x, const Shape& normalized_shape,
                       const RmsNormGrads& grads, const RmsNormOptions& options,
                       OptionalConst saved_rstd) {
  const detail::RowLayout layout =
      detail::check_rms_norm_backward(dy, x, normalized_shape, grads, options, saved_rstd);
  reference::rms_norm_backward<double>(dy.data, x.data, data_or_null(options.gamma),
                                       options.zero_centered_gamma, data_or_null(saved_rstd),
                                       nullptr, grads.dx.data, data_or_null(grads.dgamma),
                                       layout.rows, layout.dim, options.eps);
}

}  // namespace addnorm::float64
