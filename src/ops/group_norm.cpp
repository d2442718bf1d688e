// GroupNorm's public entry points, float32-computed storage (ops.hpp) and float64 (float64.hpp):
// the same checks (op_checks.hpp), then the fast path or the reference kernels.
#include "ops/reference/group_norm.hpp"
#include "addnorm/float64.hpp"
#include "addnorm/ops.hpp"
#include "ops/cpu/group_norm_kernels.hpp"
#include "ops/empty_batch.hpp"
#include "ops/op_checks.hpp"
#include "ops/storage.hpp"

namespace addnorm {

void group_norm(AnyConstView x, AnyMutableView y, const GroupNormOptions& options,
                std::optional<NormStats> stats) {
  const reference::GroupLayout layout = detail::check_group_norm<float>(x, y, options, stats);
  if (detail::empty_statistics(layout.elements(), stats, layout.rows())) return;
  cpu::Scratch scratch;
  cpu::GroupNormForward args;
  args.x = x.data;
  args.x_storage = x.dtype;
  args.y = y.data;
  args.y_storage = y.dtype;
  args.gamma = detail::parameter_as_float32(options.gamma, scratch);
  args.beta = detail::parameter_as_float32(options.beta, scratch);
  args.mean = stats ? stats->mean.data : nullptr;
  args.rstd = stats ? stats->rstd.data : nullptr;
  args.layout = layout;
  args.eps = detail::channel_eps(options);
  cpu::group_norm_forward(args);
}

void group_norm_backward(AnyConstView dy, AnyConstView x, const GroupNormGrads& grads,
                         const GroupNormOptions& options, std::optional<SavedStats> saved) {
  const reference::GroupLayout layout =
      detail::check_group_norm_backward<float>(dy, x, grads, options, saved);
  if (detail::empty_gradients(layout.elements(), grads, layout.channels)) return;
  cpu::Scratch scratch;
  cpu::GroupNormBackward args;
  args.dy = dy.data;
  args.dy_storage = dy.dtype;
  args.x = x.data;
  args.dx = grads.dx.data;
  args.x_storage = x.dtype;
  args.gamma = detail::parameter_as_float32(options.gamma, scratch);
  args.dgamma = grads.dgamma ? grads.dgamma->data : nullptr;
  args.dbeta = grads.dbeta ? grads.dbeta->data : nullptr;
  args.layout = layout;
  args.eps = detail::channel_eps(options);
  cpu::group_norm_backward(args);
}

namespace float64 {

void group_norm(ConstView x, MutableView y, const GroupNormOptions& options,
                std::optional<NormStats> stats) {
  const reference::GroupLayout layout = detail::check_group_norm<double>(x, y, options, stats);
  if (detail::empty_statistics(layout.elements(), stats, layout.rows())) return;
  reference::group_norm_forward<double>(
      x.data, options.gamma ? options.gamma->data : nullptr,
      options.beta ? options.beta->data : nullptr, y.data, stats ? stats->mean.data : nullptr,
      stats ? stats->rstd.data : nullptr, layout, detail::channel_eps(options));
}

void group_norm_backward(ConstView dy, ConstView x, const GroupNormGrads& grads,
                         const GroupNormOptions& options, std::optional<SavedStats> saved) {
  const reference::GroupLayout layout =
      detail::check_group_norm_backward<double>(dy, x, grads, options, saved);
  if (detail::empty_gradients(layout.elements(), grads, layout.channels)) return;
  reference::group_norm_backward<double>(
      dy.data, x.data, options.gamma ? options.gamma->data : nullptr, grads.dx.data,
      grads.dgamma ? grads.dgamma->data : nullptr, grads.dbeta ? grads.dbeta->data : nullptr,
      layout, detail::channel_eps(options));
}

}  // namespace float64

}  // namespace addnorm
