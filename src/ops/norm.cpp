// The one entry point for any row norm: the kind from the description, then the same checks and
// the same engine call as layer_norm and rms_norm make for their own kind.
#include "addnorm/ops.hpp"
#include "ops/op_checks.hpp"
#include "ops/storage.hpp"

namespace addnorm {

void norm(AnyConstView x, const Shape& normalized_shape, AnyMutableView y,
          const NormOptions& options, std::optional<NormStats> stats) {
  const NormKind kind = kind_of(options, NormKind::layer_norm);
  const detail::RowLayout layout = detail::check_norm_forward<float>(
      kind, x, normalized_shape, y, options, detail::norm_mean(stats, kind),
      stats ? &stats->rstd : nullptr);
  detail::run_norm_forward(x, std::nullopt, std::nullopt, y, detail::norm_settings(options, kind),
                           stats, layout);
}

void norm_backward(AnyConstView dy, AnyConstView x, const Shape& normalized_shape,
                   const NormGrads& grads, const NormOptions& options,
                   std::optional<SavedStats> saved) {
  const NormKind kind = kind_of(options, NormKind::layer_norm);
  const detail::RowLayout layout = detail::check_norm_backward<float>(
      kind, dy, x, normalized_shape, grads.dx, grads.dgamma, grads.dbeta, options,
      detail::norm_mean(saved, kind), saved ? &saved->rstd : nullptr);
  detail::run_norm_backward(dy, x, std::nullopt, grads.dx, grads.dgamma, grads.dbeta,
                            detail::norm_settings(options, kind),
                            saved ? OptionalConst(saved->rstd) : std::nullopt, layout);
}

}  // namespace addnorm
