// The fused Add & Norm boxes. Pre-norm (GPT-2) returns both the residual stream h = x + r and
// Norm(h); post-norm (2017 paper) returns Norm(x + Dropout(s)). Both round h to float32 before
// normalising it, exactly as the unfused add -> norm sequence does, so fused and unfused agree.
#include "addnorm/ops.hpp"
#include "ops/cpu/kernels.hpp"
#include "ops/cpu/post_norm_backward.hpp"
#include "ops/empty_batch.hpp"
#include "ops/op_checks.hpp"
#include "ops/storage.hpp"

namespace addnorm {

void add_norm_pre(AnyConstView x, AnyConstView r, const Shape& normalized_shape, AnyMutableView h,
                  AnyMutableView y, const NormOptions& options, std::optional<NormStats> stats) {
  const detail::RowLayout layout =
      detail::check_add_norm_pre(x, r, normalized_shape, h, y, options, stats);
  // One pass: each row's h = x + r is written, then normalised while it is still in cache.
  detail::run_norm_forward(x, r, h, y, detail::norm_settings(options, detail::fused_kind(options)),
                           stats, layout);
}

void add_norm_pre_backward(AnyConstView dy, std::optional<AnyConstView> dh_next, AnyConstView h,
                           const Shape& normalized_shape, const AddNormPreGrads& grads,
                           const NormOptions& options, std::optional<SavedStats> saved) {
  const detail::RowLayout layout =
      detail::check_add_norm_pre_backward(dy, dh_next, h, normalized_shape, grads, options, saved);
  detail::run_norm_backward(dy, h, dh_next, grads.dh, grads.dgamma, grads.dbeta,
                            detail::norm_settings(options, detail::fused_kind(options)),
                            saved ? OptionalConst(saved->rstd) : std::nullopt, layout);
}

void add_norm_post(AnyConstView x, AnyConstView s, const Shape& normalized_shape, AnyMutableView y,
                   const NormOptions& options, const DropoutOptions& dropout,
                   std::optional<NormStats> stats) {
  const detail::RowLayout layout =
      detail::check_add_norm_post(x, s, normalized_shape, y, options, dropout, stats);
  if (detail::empty_norm_forward(detail::fused_kind(options), stats, layout)) return;
  // In the engine (src/ops/cpu/norm_forward-inl.h): h = x + Dropout(s) is formed in float32, 16 KiB
  // of rows at a time, from x and s in their own storage types, normalised from the L1 cache
  // and written to y in y's type, with streaming stores when y is too large to stay in cache.
  cpu::Scratch scratch;
  cpu::NormForward args = detail::forward_args(
      x, y, detail::norm_settings(options, detail::fused_kind(options)), stats, layout, scratch);
  cpu::DropoutInput stage;
  stage.s = s.data;
  stage.s_storage = s.dtype;
  stage.seed = dropout.seed;
  stage.p = dropout.p;
  stage.first_element = dropout.offset;
  args.dropout = &stage;
  cpu::norm_forward(args);
}

void add_norm_post_backward(AnyConstView dy, AnyConstView x, AnyConstView s,
                            const Shape& normalized_shape, const AddNormPostGrads& grads,
                            const NormOptions& options, const DropoutOptions& dropout,
                            std::optional<SavedStats> saved) {
  const detail::RowLayout layout = detail::check_add_norm_post_backward(
      dy, x, s, normalized_shape, grads, options, dropout, saved);
  if (detail::empty_norm_backward(grads.dgamma, grads.dbeta, layout)) return;
  // The orchestration (h rebuilt block by block in cache, the norm's backward, the dropout's)
  // is the kernel layer's: src/ops/cpu/post_norm_backward.cpp.
  cpu::Scratch scratch;
  cpu::PostNormBackward args;
  args.norm = detail::backward_args(dy, x, grads.dx,
                                    detail::norm_settings(options, detail::fused_kind(options)),
                                    layout, scratch);
  args.norm.saved_rstd = saved ? saved->rstd.data : nullptr;
  args.norm.dgamma = grads.dgamma ? grads.dgamma->data : nullptr;
  args.norm.dbeta = grads.dbeta ? grads.dbeta->data : nullptr;
  args.x = x.data;
  args.x_storage = x.dtype;
  args.s = s.data;
  args.s_storage = s.dtype;
  args.dx = grads.dx.data;
  args.dx_storage = grads.dx.dtype;
  args.ds = grads.ds.data;
  args.ds_storage = grads.ds.dtype;
  args.dropout = dropout;
  cpu::post_norm_backward(args);
}

}  // namespace addnorm
