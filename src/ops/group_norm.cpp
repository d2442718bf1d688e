// GroupNorm's public entry points, float32-computed storage (ops.hpp) and float64 (float64.hpp):
// the same checks (op_checks.hpp), then the fast path or the reference kernels.
#include "ops/reference/group_norm.hpp"
#include "addnorm/float64.hpp"
#include "addnorm/ops.hpp"
#include "ops/channel_order.hpp"
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
  // With one position a sample, channels last is channels first.
  if (!options.channels_last || layout.spatial == 1) {
    cpu::group_norm_forward(args);
  } else if (x.dtype == y.dtype &&
             layout.spatial * layout.channels >= cpu::kChannelsLastMinSampleValues) {
    cpu::group_norm_forward_channels_last(args);
  } else {
    const detail::ChannelsFirst x_first(layout, dtype_size(x.dtype), x.data);
    detail::ChannelsFirst y_first(layout, dtype_size(y.dtype));
    args.x = x_first.data();
    args.y = y_first.data();
    cpu::group_norm_forward(args);
    y_first.copy_to(y.data);
  }
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
  if (!options.channels_last || layout.spatial == 1) {
    cpu::group_norm_backward(args);
    return;
  }
  const detail::ChannelsFirst dy_first(layout, dtype_size(dy.dtype), dy.data);
  const detail::ChannelsFirst x_first(layout, dtype_size(x.dtype), x.data);
  detail::ChannelsFirst dx_first(layout, dtype_size(x.dtype));
  args.dy = dy_first.data();
  args.x = x_first.data();
  args.dx = dx_first.data();
  cpu::group_norm_backward(args);
  dx_first.copy_to(grads.dx.data);
}

namespace float64 {

void group_norm(ConstView x, MutableView y, const GroupNormOptions& options,
                std::optional<NormStats> stats) {
  const reference::GroupLayout layout = detail::check_group_norm<double>(x, y, options, stats);
  if (detail::empty_statistics(layout.elements(), stats, layout.rows())) return;
  const bool permuted = options.channels_last && layout.spatial > 1;
  std::optional<detail::ChannelsFirst> x_first, y_first;
  if (permuted) {
    x_first.emplace(layout, sizeof(double), x.data);
    y_first.emplace(layout, sizeof(double));
  }
  reference::group_norm_forward<double>(
      permuted ? static_cast<const double*>(x_first->data()) : x.data,
      options.gamma ? options.gamma->data : nullptr, options.beta ? options.beta->data : nullptr,
      permuted ? static_cast<double*>(y_first->data()) : y.data, stats ? stats->mean.data : nullptr,
      stats ? stats->rstd.data : nullptr, layout, detail::channel_eps(options));
  if (permuted) y_first->copy_to(y.data);
}

void group_norm_backward(ConstView dy, ConstView x, const GroupNormGrads& grads,
                         const GroupNormOptions& options, std::optional<SavedStats> saved) {
  const reference::GroupLayout layout =
      detail::check_group_norm_backward<double>(dy, x, grads, options, saved);
  if (detail::empty_gradients(layout.elements(), grads, layout.channels)) return;
  const bool permuted = options.channels_last && layout.spatial > 1;
  std::optional<detail::ChannelsFirst> dy_first, x_first, dx_first;
  if (permuted) {
    dy_first.emplace(layout, sizeof(double), dy.data);
    x_first.emplace(layout, sizeof(double), x.data);
    dx_first.emplace(layout, sizeof(double));
  }
  reference::group_norm_backward<double>(
      permuted ? static_cast<const double*>(dy_first->data()) : dy.data,
      permuted ? static_cast<const double*>(x_first->data()) : x.data,
      options.gamma ? options.gamma->data : nullptr,
      permuted ? static_cast<double*>(dx_first->data()) : grads.dx.data,
      grads.dgamma ? grads.dgamma->data : nullptr, grads.dbeta ? grads.dbeta->data : nullptr,
      layout, detail::channel_eps(options));
  if (permuted) dx_first->copy_to(grads.dx.data);
}

}  // namespace float64

}  // namespace addnorm
