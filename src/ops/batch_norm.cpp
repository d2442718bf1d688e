// BatchNorm's public entry points: validate every argument, then describe the call to the kernel
// layer, which runs it whole (src/ops/cpu/batch_norm_calls.cpp).
#include "ops/reference/batch_norm.hpp"
#include "addnorm/ops.hpp"
#include "ops/cpu/batch_norm_kernels.hpp"
#include "ops/empty_batch.hpp"
#include "ops/op_checks.hpp"

namespace addnorm {
namespace {

// What a BatchNorm call's forward and backward both tell the kernel layer.
template <class KernelArgs>
void describe(KernelArgs& args, const BatchNormOptions& options,
              const reference::BatchLayout& layout, const std::optional<RunningStats>& running) {
  args.gamma = options.gamma ? options.gamma->data : nullptr;
  args.shape = {layout.batch, layout.channels, layout.length};
  args.eps = options.eps;
  args.training = options.training;
  args.running_mean = running ? running->mean.data : nullptr;
  args.running_var = running ? running->var.data : nullptr;
}

}  // namespace

void batch_norm(ConstView x, MutableView y, const BatchNormOptions& options,
                std::optional<RunningStats> running, std::optional<NormStats> batch_stats) {
  const reference::BatchLayout layout =
      detail::check_batch_norm(x, y, options, running, batch_stats);
  // An empty batch leaves the running statistics as they are.
  if (detail::empty_statistics(layout.elements(), options.training ? batch_stats : std::nullopt,
                               layout.channels)) {
    return;
  }
  cpu::BatchNormForward args;
  describe(args, options, layout, running);
  args.x = x.data;
  args.y = y.data;
  args.beta = options.beta ? options.beta->data : nullptr;
  args.momentum = options.momentum;
  args.convention = options.convention;
  args.saved_mean = batch_stats ? batch_stats->mean.data : nullptr;
  args.saved_rstd = batch_stats ? batch_stats->rstd.data : nullptr;
  cpu::batch_norm_forward(args);
}

void batch_norm_backward(ConstView dy, ConstView x, const BatchNormGrads& grads,
                         const BatchNormOptions& options, std::optional<RunningStats> running) {
  const reference::BatchLayout layout =
      detail::check_batch_norm_backward(dy, x, grads, options, running);
  if (detail::empty_gradients(layout.elements(), grads, layout.channels)) return;
  cpu::BatchNormBackward args;
  describe(args, options, layout, running);
  args.dy = dy.data;
  args.x = x.data;
  args.dx = grads.dx.data;
  args.dgamma = grads.dgamma ? grads.dgamma->data : nullptr;
  args.dbeta = grads.dbeta ? grads.dbeta->data : nullptr;
  cpu::batch_norm_backward(args);
}

}  // namespace addnorm
