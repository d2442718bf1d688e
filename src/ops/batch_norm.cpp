// BatchNorm's public entry points: validate every argument, then describe the call to the kernel
// layer, which runs it whole (src/ops/cpu/batch_norm_calls.cpp).
#include "ops/reference/batch_norm.hpp"
#include "addnorm/ops.hpp"
#include "ops/cpu/batch_norm_kernels.hpp"
#include "ops/empty_batch.hpp"
#include "ops/op_checks.hpp"
#include "ops/storage.hpp"

namespace addnorm {
namespace {

// What a BatchNorm call's forward and backward both tell the kernel layer.
// gamma (and beta) of another storage type are widened to float32 in `scratch`.
template <class KernelArgs>
void describe(KernelArgs& args, const BatchNormOptions& options,
              const reference::BatchLayout& layout, const std::optional<RunningStats>& running,
              cpu::Scratch& scratch) {
  args.gamma = detail::parameter_as_float32(options.gamma, scratch);
  args.shape = {layout.batch, layout.channels, layout.length};
  args.eps = detail::channel_eps(options);
  args.training = options.training;
  args.running_mean = running ? running->mean.data : nullptr;
  args.running_var = running ? running->var.data : nullptr;
}

}  // namespace

void batch_norm(AnyConstView x, AnyMutableView y, const BatchNormOptions& options,
                std::optional<RunningStats> running, std::optional<NormStats> batch_stats) {
  const reference::BatchLayout layout =
      detail::check_batch_norm<float>(x, y, options, running, batch_stats);
  // An empty batch leaves the running statistics as they are.
  if (detail::empty_statistics(layout.elements(), options.training ? batch_stats : std::nullopt,
                               layout.channels)) {
    return;
  }
  cpu::Scratch scratch;
  cpu::BatchNormForward args;
  describe(args, options, layout, running, scratch);
  args.x = x.data;
  args.y = y.data;
  args.storage = x.dtype;
  args.beta = detail::parameter_as_float32(options.beta, scratch);
  args.momentum = options.momentum;
  args.convention = options.convention;
  args.saved_mean = batch_stats ? batch_stats->mean.data : nullptr;
  args.saved_rstd = batch_stats ? batch_stats->rstd.data : nullptr;
  cpu::batch_norm_forward(args);
}

void batch_norm_backward(AnyConstView dy, AnyConstView x, const BatchNormGrads& grads,
                         const BatchNormOptions& options, std::optional<RunningStats> running) {
  const reference::BatchLayout layout =
      detail::check_batch_norm_backward<float>(dy, x, grads, options, running);
  if (detail::empty_gradients(layout.elements(), grads, layout.channels)) return;
  cpu::Scratch scratch;
  cpu::BatchNormBackward args;
  describe(args, options, layout, running, scratch);
  args.dy = dy.data;
  args.x = x.data;
  args.dx = grads.dx.data;
  args.storage = x.dtype;
  args.dgamma = grads.dgamma ? grads.dgamma->data : nullptr;
  args.dbeta = grads.dbeta ? grads.dbeta->data : nullptr;
  cpu::batch_norm_backward(args);
}

}  // namespace addnorm
