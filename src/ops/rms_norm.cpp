// RMSNorm's public entry points: validate every argument, then run the kernel.
#include "addnorm/ops.hpp"
#include "ops/reference/rms_norm.hpp"
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
  reference::rms_norm_forward<float>(x.data, options.gamma ? options.gamma->data : nullptr,
                                     options.zero_centered_gamma, y.data,
                                     rstd ? rstd->data : nullptr, layout.rows, layout.dim,
                                     options.eps);
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
  reference::rms_norm_backward<float>(
      dy.data, x.data, options.gamma ? options.gamma->data : nullptr, options.zero_centered_gamma,
      saved_rstd ? saved_rstd->data : nullptr, nullptr, grads.dx.data,
      grads.dgamma ? grads.dgamma->data : nullptr, layout.rows, layout.dim, options.eps);
}

}  // namespace addnorm
