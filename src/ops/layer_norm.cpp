// LayerNorm's public entry points: validate every argument, then run the kernel.
#include "addnorm/error.hpp"
#include "addnorm/ops.hpp"
#include "ops/op_checks.hpp"
#include "ops/storage.hpp"

namespace addnorm {

Shape normalized_shape_from_axis(const Shape& x_shape, int64_t axis) {
  const int64_t rank = x_shape.rank();
  const int64_t resolved = axis < 0 ? axis + rank : axis;
  if (resolved < 0 || resolved >= rank) {
    throw Error(ErrorKind::value, "axis",
                "is " + std::to_string(axis) + ", expected a value in [" + std::to_string(-rank) +
                    ", " + std::to_string(rank - 1) + "] for x of shape " + x_shape.to_string());
  }
  return x_shape.trailing(static_cast<int>(rank - resolved));
}

void layer_norm(AnyConstView x, const Shape& normalized_shape, AnyMutableView y,
                const NormOptions& options, std::optional<NormStats> stats) {
  const detail::RowLayout layout = detail::check_layer_norm(x, normalized_shape, y, options, stats);
  detail::run_norm_forward(x, std::nullopt, std::nullopt, y,
                           detail::norm_settings(options, NormKind::layer_norm), stats, layout);
}

void layer_norm_backward(AnyConstView dy, AnyConstView x, const Shape& normalized_shape,
                         const LayerNormGrads& grads, const NormOptions& options,
                         std::optional<SavedStats> saved) {
  const detail::RowLayout layout =
      detail::check_layer_norm_backward(dy, x, normalized_shape, grads, options, saved);
  detail::run_norm_backward(dy, x, std::nullopt, grads.dx, grads.dgamma, grads.dbeta,
                            detail::norm_settings(options, NormKind::layer_norm),
                            saved ? OptionalConst(saved->rstd) : std::nullopt, layout);
}

}  // namespace addnorm
