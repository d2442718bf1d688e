// LayerNorm's public entry points: validate every argument, then run the kernel.
#include "addnorm/error.hpp"
#include "addnorm/ops.hpp"
#include "ops/cpu/kernels.hpp"
#include "ops/validate.hpp"

namespace addnorm {

using detail::region;

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

void layer_norm(ConstView x, const Shape& normalized_shape, MutableView y,
                const LayerNormOptions& options, std::optional<NormStats> stats) {
  detail::check_tensor("x", x);
  const detail::RowLayout layout = detail::row_layout(x.shape, normalized_shape);
  detail::check_shape("y", y, x.shape);
  detail::check_affine(options.gamma, options.beta, normalized_shape);
  detail::check_eps(options.eps);
  if (stats) {
    detail::check_count("mean", stats->mean, layout.rows, "per row");
    detail::check_count("rstd", stats->rstd, layout.rows, "per row");
  }
  detail::check_disjoint(
      {region("y", y), region("mean", stats ? &stats->mean : nullptr),
       region("rstd", stats ? &stats->rstd : nullptr)},
      {region("x", x), region("gamma", options.gamma), region("beta", options.beta)},
      {{"y", "x"}});
  cpu::NormForward args;
  args.x = x.data;
  args.gamma = options.gamma ? options.gamma->data : nullptr;
  args.beta = options.beta ? options.beta->data : nullptr;
  args.y = y.data;
  args.mean = stats ? stats->mean.data : nullptr;
  args.rstd = stats ? stats->rstd.data : nullptr;
  args.rows = layout.rows;
  args.dim = layout.dim;
  args.eps = options.eps;
  cpu::norm_forward(args);
}

void layer_norm_backward(ConstView dy, ConstView x, const Shape& normalized_shape,
                         const LayerNormGrads& grads, const LayerNormOptions& options,
                         std::optional<SavedStats> saved) {
  detail::check_tensor("x", x);
  const detail::RowLayout layout = detail::row_layout(x.shape, normalized_shape);
  detail::check_shape("dy", dy, x.shape);
  detail::check_shape("dx", grads.dx, x.shape);
  detail::check_affine(options.gamma, options.beta, normalized_shape);
  detail::check_eps(options.eps);
  detail::check_parameter_grad("dgamma", grads.dgamma, "gamma", options.gamma, normalized_shape);
  detail::check_parameter_grad("dbeta", grads.dbeta, "beta", options.beta, normalized_shape);
  if (saved) {
    detail::check_count("mean", saved->mean, layout.rows, "per row");
    detail::check_count("rstd", saved->rstd, layout.rows, "per row");
  }
  detail::check_disjoint(
      {region("dx", grads.dx), region("dgamma", grads.dgamma), region("dbeta", grads.dbeta)},
      {region("dy", dy), region("x", x), region("gamma", options.gamma),
       region("beta", options.beta), region("mean", saved ? &saved->mean : nullptr),
       region("rstd", saved ? &saved->rstd : nullptr)},
      {{"dx", "dy"}, {"dx", "x"}});
  cpu::NormBackward args;
  args.dy = dy.data;
  args.x = x.data;
  args.gamma = options.gamma ? options.gamma->data : nullptr;
  args.saved_rstd = saved ? saved->rstd.data : nullptr;
  args.dx = grads.dx.data;
  args.dgamma = grads.dgamma ? grads.dgamma->data : nullptr;
  args.dbeta = grads.dbeta ? grads.dbeta->data : nullptr;
  args.rows = layout.rows;
  args.dim = layout.dim;
  args.eps = options.eps;
  cpu::norm_backward(args);
}

}  // namespace addnorm
