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
namespace {

// Whether a channels-last call runs on BatchNorm's column kernels: its tensors of one storage type
// and its samples large enough to pay for them (kChannelsLastMinSampleValues). Other channels-last
// calls run the channels-first kernels on copies (ChannelsFirstCall).
bool on_column_kernels(const GroupNormOptions& options, const reference::GroupLayout& layout,
                       bool one_storage) {
  return options.channels_last && layout.spatial > 1 && one_storage &&
         layout.spatial * layout.channels >= cpu::kChannelsLastMinSampleValues;
}

}  // namespace

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
  if (on_column_kernels(options, layout, x.dtype == y.dtype)) {
    cpu::group_norm_forward_channels_last(args);
    return;
  }
  detail::ChannelsFirstCall order(layout, options.channels_last);
  args.x = order.input(x.data, dtype_size(x.dtype));
  args.y = order.output(y.data, dtype_size(y.dtype));
  cpu::group_norm_forward(args);
  order.finish();
}

void group_norm_backward(AnyConstView dy, AnyConstView x, const GroupNormGrads& grads,
                         const GroupNormOptions& options, std::optional<SavedStats> saved) {
  const reference::GroupLayout layout =
      detail::check_group_norm_backward<float>(dy, x, grads, options, saved);
  if (detail::empty_gradients(layout.elements(), grads, layout.channels)) return;
  cpu::Scratch scratch;
  cpu::GroupNormBackward args;
  args.dy_storage = dy.dtype;
  args.x_storage = x.dtype;
  args.gamma = detail::parameter_as_float32(options.gamma, scratch);
  args.dgamma = grads.dgamma ? grads.dgamma->data : nullptr;
  args.dbeta = grads.dbeta ? grads.dbeta->data : nullptr;
  args.layout = layout;
  args.eps = detail::channel_eps(options);
  if (on_column_kernels(options, layout, dy.dtype == x.dtype)) {
    args.dy = dy.data;
    args.x = x.data;
    args.dx = grads.dx.data;
    cpu::group_norm_backward_channels_last(args);
    return;
  }
  detail::ChannelsFirstCall order(layout, options.channels_last);
  args.dy = order.input(dy.data, dtype_size(dy.dtype));
  args.x = order.input(x.data, dtype_size(x.dtype));
  args.dx = order.output(grads.dx.data, dtype_size(x.dtype));
  cpu::group_norm_backward(args);
  order.finish();
}

namespace float64 {

void group_norm(ConstView x, MutableView y, const GroupNormOptions& options,
                std::optional<NormStats> stats) {
  const reference::GroupLayout layout = detail::check_group_norm<double>(x, y, options, stats);
  if (detail::empty_statistics(layout.elements(), stats, layout.rows())) return;
  detail::ChannelsFirstCall order(layout, options.channels_last);
  reference::group_norm_forward<double>(
      order.input(x.data), options.gamma ? options.gamma->data : nullptr,
      options.beta ? options.beta->data : nullptr, order.output(y.data),
      stats ? stats->mean.data : nullptr, stats ? stats->rstd.data : nullptr, layout,
      detail::channel_eps(options));
  order.finish();
}

void group_norm_backward(ConstView dy, ConstView x, const GroupNormGrads& grads,
                         const GroupNormOptions& options, std::optional<SavedStats> saved) {
  const reference::GroupLayout layout =
      detail::check_group_norm_backward<double>(dy, x, grads, options, saved);
  if (detail::empty_gradients(layout.elements(), grads, layout.channels)) return;
  detail::ChannelsFirstCall order(layout, options.channels_last);
  reference::group_norm_backward<double>(
      order.input(dy.data), order.input(x.data), options.gamma ? options.gamma->data : nullptr,
      order.output(grads.dx.data), grads.dgamma ? grads.dgamma->data : nullptr,
      grads.dbeta ? grads.dbeta->data : nullptr, layout, detail::channel_eps(options));
  order.finish();
}

}  // namespace float64

}  // namespace addnorm
