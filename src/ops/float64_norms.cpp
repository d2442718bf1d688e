// LayerNorm, RMSNorm and the entry point of any kind on float64 views (addnorm/float64.hpp): the
// float32 ops' checks (op_checks.hpp), then the reference kernels.
#include "addnorm/float64.hpp"
#include "ops/float64_norm_rows.hpp"
#include "ops/op_checks.hpp"

namespace addnorm::float64 {

using detail_rows::data_or_null;
using detail_rows::norm_backward;
using detail_rows::norm_forward;

void layer_norm(ConstView x, const Shape& normalized_shape, MutableView y,
                const NormOptions& options, std::optional<NormStats> stats) {
  const detail::RowLayout layout = detail::check_layer_norm(x, normalized_shape, y, options, stats);
  norm_forward(x.data, y.data, options, NormKind::layer_norm, stats, layout);
}

void layer_norm_backward(ConstView dy, ConstView x, const Shape& normalized_shape,
                         const LayerNormGrads& grads, const NormOptions& options,
                         std::optional<SavedStats> saved) {
  const detail::RowLayout layout =
      detail::check_layer_norm_backward(dy, x, normalized_shape, grads, options, saved);
  norm_backward(dy.data, x.data, nullptr, grads.dx.data, data_or_null(grads.dgamma),
                data_or_null(grads.dbeta), options, NormKind::layer_norm,
                saved ? saved->rstd.data : nullptr, layout);
}

void rms_norm(ConstView x, const Shape& normalized_shape, MutableView y, const NormOptions& options,
              OptionalMutable rstd) {
  const detail::RowLayout layout = detail::check_rms_norm(x, normalized_shape, y, options, rstd);
  std::optional<NormStats> stats;
  if (rstd) stats = NormStats{{}, *rstd};
  norm_forward(x.data, y.data, options, NormKind::rms_norm, stats, layout);
}

void rms_norm_backward(ConstView dy, ConstView x, const Shape& normalized_shape,
                       const RmsNormGrads& grads, const NormOptions& options,
                       OptionalConst saved_rstd) {
  const detail::RowLayout layout =
      detail::check_rms_norm_backward(dy, x, normalized_shape, grads, options, saved_rstd);
  norm_backward(dy.data, x.data, nullptr, grads.dx.data, data_or_null(grads.dgamma), nullptr,
                options, NormKind::rms_norm, data_or_null(saved_rstd), layout);
}

void norm(ConstView x, const Shape& normalized_shape, MutableView y, const NormOptions& options,
          std::optional<NormStats> stats) {
  const NormKind kind = kind_of(options, NormKind::layer_norm);
  const detail::RowLayout layout = detail::check_norm_forward<double>(
      kind, x, normalized_shape, y, options, detail::norm_mean(stats, kind),
      stats ? &stats->rstd : nullptr);
  if (stats && !norm_traits(kind).centres)
    stats->mean = {};  // a kind that does not centre
                       // writes no mean
  norm_forward(x.data, y.data, options, kind, stats, layout);
}

void norm_backward(ConstView dy, ConstView x, const Shape& normalized_shape, const NormGrads& grads,
                   const NormOptions& options, std::optional<SavedStats> saved) {
  const NormKind kind = kind_of(options, NormKind::layer_norm);
  const detail::RowLayout layout = detail::check_norm_backward<double>(
      kind, dy, x, normalized_shape, grads.dx, grads.dgamma, grads.dbeta, options,
      detail::norm_mean(saved, kind), saved ? &saved->rstd : nullptr);
  norm_backward(dy.data, x.data, nullptr, grads.dx.data, data_or_null(grads.dgamma),
                data_or_null(grads.dbeta), options, kind, saved ? saved->rstd.data : nullptr,
                layout);
}

}  // namespace addnorm::float64
