// RMSNorm's public entry points: validate every argument, then run the kernel.
#include "addnorm/ops.hpp"
#include "ops/op_checks.hpp"
#include "ops/storage.hpp"

namespace addnorm {

void rms_norm(AnyConstView x, const Shape& normalized_shape, AnyMutableView y,
              const NormOptions& options, OptionalMutable rstd) {
  const detail::RowLayout layout = detail::check_rms_norm(x, normalized_shape, y, options, rstd);
  std::optional<NormStats> stats;
  if (rstd) stats = NormStats{{}, *rstd};
  detail::run_norm_forward(x, std::nullopt, std::nullopt, y,
                           detail::norm_settings(options, NormKind::rms_norm), stats, layout);
}

void rms_norm_backward(AnyConstView dy, AnyConstView x, const Shape& normalized_shape,
                       const RmsNormGrads& grads, const NormOptions& options,
                       OptionalConst saved_rstd) {
  const detail::RowLayout layout =
      detail::check_rms_norm_backward(dy, x, normalized_shape, grads, options, saved_rstd);
  detail::run_norm_backward(dy, x, std::nullopt, grads.dx, grads.dgamma, std::nullopt,
                            detail::norm_settings(options, NormKind::rms_norm), saved_rstd, layout);
}

}  // namespace addnorm
