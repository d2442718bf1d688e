// RMSNorm's public entry points: validate every argument, then run the kernel.
#include "addnorm/ops.hpp"
#include "ops/cpu/kernels.hpp"
#include "ops/op_checks.hpp"
#include "ops/storage.hpp"

namespace addnorm {

void rms_norm(AnyConstView x, const Shape& normalized_shape, AnyMutableView y,
              const RmsNormOptions& options, OptionalMutable rstd) {
  const detail::RowLayout layout =
      detail::check_rms_norm(x, normalized_shape, y, options, rstd);
  if (!detail::stores_float32({x, y}, {options.gamma})) {
    std::optional<NormStats> stats;
    if (rstd) stats = NormStats{{}, *rstd};
    norm_forward_mixed(x, normalized_shape, y, detail::storage_options(options), stats);
    return;
  }
  cpu::NormForward args;
  args.x = detail::float32_data(x);
  args.gamma = detail::float32_data(options.gamma);
  args.zero_centered_gamma = options.zero_centered_gamma;
  args.y = detail::float32_data(y);
  args.rstd = rstd ? rstd->data : nullptr;
  args.rows = layout.rows;
  args.dim = layout.dim;
  args.eps = options.eps;
  args.norm = NormKind::rms_norm;
  cpu::norm_forward(args);
}

void rms_norm_backward(AnyConstView dy, AnyConstView x, const Shape& normalized_shape,
                       const RmsNormGrads& grads, const RmsNormOptions& options,
                       OptionalConst saved_rstd) {
  const detail::RowLayout layout =
      detail::check_rms_norm_backward(dy, x, normalized_shape, grads, options, saved_rstd);
  if (!detail::stores_float32({dy, x, grads.dx}, {options.gamma})) {
    norm_backward_mixed(dy, x, normalized_shape, {grads.dx, grads.dgamma, std::nullopt},
                        detail::storage_options(options), std::nullopt, saved_rstd);
    return;
  }
  cpu::NormBackward args;
  args.dy = detail::float32_data(dy);
  args.x = detail::float32_data(x);
  args.gamma = detail::float32_data(options.gamma);
  args.zero_centered_gamma = options.zero_centered_gamma;
  args.saved_rstd = saved_rstd ? saved_rstd->data : nullptr;
  args.dx = detail::float32_data(grads.dx);
  args.dgamma = grads.dgamma ? grads.dgamma->data : nullptr;
  args.rows = layout.rows;
  args.dim = layout.dim;
  args.eps = options.eps;
  args.norm = NormKind::rms_norm;
  cpu::norm_backward(args);
}

}  // namespace addnorm
