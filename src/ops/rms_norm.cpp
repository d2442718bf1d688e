// RMSNorm's public entry points: validate every argument, then run the kernel.
#include "addnorm/ops.hpp"
#include "ops/cpu/kernels.hpp"
#include "ops/validate.hpp"

namespace addnorm {

using detail::region;

void rms_norm(ConstView x, const Shape& normalized_shape, MutableView y,
              const RmsNormOptions& options, OptionalMutable rstd) {
  detail::check_tensor("x", x);
  const detail::RowLayout layout = detail::row_layout(x.shape, normalized_shape);
  detail::check_shape("y", y, x.shape);
  detail::check_affine(options.gamma, std::nullopt, normalized_shape);
  detail::check_eps(options.eps);
  if (rstd) detail::check_count("rstd", *rstd, layout.rows, "per row");
  detail::check_disjoint({region("y", y), region("rstd", rstd)},
                         {region("x", x), region("gamma", options.gamma)}, {{"y", "x"}});
  cpu::NormForward args;
  args.x = x.data;
  args.gamma = options.gamma ? options.gamma->data : nullptr;
  args.zero_centred_gamma = options.zero_centered_gamma;
  args.y = y.data;
  args.rstd = rstd ? rstd->data : nullptr;
  args.rows = layout.rows;
  args.dim = layout.dim;
  args.eps = options.eps;
  args.centre = false;
  cpu::norm_forward(args);
}

void rms_norm_backward(ConstView dy, ConstView x, const Shape& normalized_shape,
                       const RmsNormGrads& grads, const RmsNormOptions& options,
                       OptionalConst saved_rstd) {
  detail::check_tensor("x", x);
  const detail::RowLayout layout = detail::row_layout(x.shape, normalized_shape);
  detail::check_shape("dy", dy, x.shape);
  detail::check_shape("dx", grads.dx, x.shape);
  detail::check_affine(options.gamma, std::nullopt, normalized_shape);
  detail::check_eps(options.eps);
  detail::check_parameter_grad("dgamma", grads.dgamma, "gamma", options.gamma, normalized_shape);
  if (saved_rstd) detail::check_count("rstd", *saved_rstd, layout.rows, "per row");
  detail::check_disjoint(
      {region("dx", grads.dx), region("dgamma", grads.dgamma)},
      {region("dy", dy), region("x", x), region("gamma", options.gamma),
       region("rstd", saved_rstd)},
      {{"dx", "dy"}, {"dx", "x"}});
  cpu::NormBackward args;
  args.dy = dy.data;
  args.x = x.data;
  args.gamma = options.gamma ? options.gamma->data : nullptr;
  args.zero_centred_gamma = options.zero_centered_gamma;
  args.saved_rstd = saved_rstd ? saved_rstd->data : nullptr;
  args.dx = grads.dx.data;
  args.dgamma = grads.dgamma ? grads.dgamma->data : nullptr;
  args.rows = layout.rows;
  args.dim = layout.dim;
  args.eps = options.eps;
  args.centre = false;
  cpu::norm_backward(args);
}

}  // namespace addnorm
