// RMSNorm's public entry points: validate every argument, then run the kernel.
#include "addnorm/ops.hpp"
#include "ops/cpu/kernels.hpp"
#include "ops/op_checks.hpp"

namespace addnorm {

void rms_norm(ConstView x, const Shape& normalized_shape, MutableView y,
              const RmsNormOptions& options, OptionalMutable rstd) {
  const detail::RowLayout layout =
      detail::check_rms_norm(x, normalized_shape, y, options, rstd);
  cpu::NormForward args;
  args.x = x.data;
  args.gamma = options.gamma ? options.gamma->data : nullptr;
  args.zero_centered_gamma = options.zero_centered_gamma;
  args.y = y.data;
  args.rstd = rstd ? rstd->data : nullptr;
  args.rows = layout.rows;
  args.dim = layout.dim;
  args.eps = options.eps;
  args.norm = NormKind::rms_norm;
  cpu::norm_forward(args);
}

void rms_norm_backward(ConstView dy, ConstView x, const Shape& normalized_shape,
                       const RmsNormGrads& grads, const RmsNormOptions& options,
                       OptionalConst saved_rstd) {
  const detail::RowLayout layout =
      detail::check_rms_norm_backward(dy, x, normalized_shape, grads, options, saved_rstd);
  cpu::NormBackward args;
  args.dy = dy.data;
  args.x = x.data;
  args.gamma = options.gamma ? options.gamma->data : nullptr;
  args.zero_centered_gamma = options.zero_centered_gamma;
  args.saved_rstd = saved_rstd ? saved_rstd->data : nullptr;
  args.dx = grads.dx.data;
  args.dgamma = grads.dgamma ? grads.dgamma->data : nullptr;
  args.rows = layout.rows;
  args.dim = layout.dim;
  args.eps = options.eps;
  args.norm = NormKind::rms_norm;
  cpu::norm_backward(args);
}

}  // namespace addnorm
