// LayerNorm's public entry points: validate every argument, then run the kernel.
#include "addnorm/error.hpp"
#include "addnorm/ops.hpp"
#include "ops/cpu/kernels.hpp"
#include "ops/op_checks.hpp"
#include "ops/storage.hpp"

namespace addnorm {

Shape normalized_shape_from_axis(const Shape& x_shape, int64_t axis) {
  const int64_t rank = x_shape.rank();
  const int64_t resolved = axis < 0 ? axis + rank : axis;
  if (resolved < 0 || resolved >= rank) {
    throw Error("axis is " + std::to_string(axis) + ", expected a value in [" +
                std::to_string(-rank) + ", " + std::to_string(rank - 1) + "] for x of shape " +
                x_shape.to_string());
  }
  return x_shape.trailing(static_cast<int>(rank - resolved));
}

void layer_norm(AnyConstView x, const Shape& normalized_shape, AnyMutableView y,
                const LayerNormOptions& options, std::optional<NormStats> stats) {
  const detail::RowLayout layout =
      detail::check_layer_norm(x, normalized_shape, y, options, stats);
  if (!detail::stores_float32({x, y}, {options.gamma, options.beta})) {
    norm_forward_mixed(x, normalized_shape, y, detail::storage_options(options), stats);
    return;
  }
  cpu::NormForward args;
  args.x = detail::float32_data(x);
  args.gamma = detail::float32_data(options.gamma);
  args.beta = detail::float32_data(options.beta);
  args.y = detail::float32_data(y);
  args.mean = stats ? stats->mean.data : nullptr;
  args.rstd = stats ? stats->rstd.data : nullptr;
  args.rows = layout.rows;
  args.dim = layout.dim;
  args.eps = options.eps;
  cpu::norm_forward(args);
}

void layer_norm_backward(AnyConstView dy, AnyConstView x, const Shape& normalized_shape,
                         const LayerNormGrads& grads, const LayerNormOptions& options,
                         std::optional<SavedStats> saved) {
  const detail::RowLayout layout =
      detail::check_layer_norm_backward(dy, x, normalized_shape, grads, options, saved);
  if (!detail::stores_float32({dy, x, grads.dx}, {options.gamma, options.beta})) {
    norm_backward_mixed(dy, x, normalized_shape, {grads.dx, grads.dgamma, grads.dbeta},
                        detail::storage_options(options), std::nullopt,
                        saved ? OptionalConst(saved->rstd) : std::nullopt);
    return;
  }
  cpu::NormBackward args;
  args.dy = detail::float32_data(dy);
  args.x = detail::float32_data(x);
  args.gamma = detail::float32_data(options.gamma);
  args.saved_rstd = saved ? saved->rstd.data : nullptr;
  args.dx = detail::float32_data(grads.dx);
  args.dgamma = grads.dgamma ? grads.dgamma->data : nullptr;
  args.dbeta = grads.dbeta ? grads.dbeta->data : nullptr;
  args.rows = layout.rows;
  args.dim = layout.dim;
  args.eps = options.eps;
  cpu::norm_backward(args);
}

}  // namespace addnorm
