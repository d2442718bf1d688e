// The fused Add & Norm boxes. Pre-norm (GPT-2) returns both the residual stream h = x + r and
// Norm(h); post-norm (2017 paper) returns Norm(x + Dropout(s)). Both round h to float32 before
// normalising it, exactly as the unfused add -> norm sequence does, so fused and unfused agree.
#include <algorithm>
#include <cstdint>

#include "addnorm/ops.hpp"
#include "ops/cpu/dropout.hpp"
#include "ops/cpu/kernels.hpp"
#include "ops/cpu/threading.hpp"
#include "ops/op_checks.hpp"
#include "ops/storage.hpp"

namespace addnorm {

namespace {

// Where element `element` of a tensor of any storage type starts.
const uint8_t* bytes_at(const AnyConstView& view, int64_t element) {
  return static_cast<const uint8_t*>(view.data) + element * dtype_size(view.dtype);
}
uint8_t* bytes_at(const AnyMutableView& view, int64_t element) {
  return static_cast<uint8_t*>(view.data) + element * dtype_size(view.dtype);
}

// Rows per block of the backward's in-cache h: about 16 Ki elements, at least one row.
int64_t block_rows(int64_t dim) {
  return std::max<int64_t>(1, (int64_t{1} << 14) / dim);
}

}  // namespace

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
  const int64_t count = layout.rows * layout.dim;
  // Block by block, in cache: the forward's h = x + Dropout(s) is rebuilt in a per-thread
  // float32 buffer (scratch.hpp) from x and s in their storage types, generating the Philox bits
  // once and keeping the mask (a byte per element); the norm's backward turns h into dh = dx in
  // place (reading dy in its storage type); then one pass writes dx and ds = dx * mask / (1 - p),
  // the dropout's own backward, each rounded once to its storage type, with streaming stores when
  // the tensors are too large to stay in cache. dx may be dy or x, ds may be s: their block has
  // been read by then. dgamma/dbeta partials per fixed chunk of rows, as cpu::norm_backward does.
  cpu::Scratch scratch;
  // The norm's settings; each block below sets its own rows (x and dx: the block of h).
  const cpu::NormBackward args = detail::backward_args(
      dy, x, grads.dx, detail::norm_settings(options, detail::fused_kind(options)), layout,
      scratch);
  const bool stream = cpu::streams_output(count * dtype_size(grads.dx.dtype));
  const bool with_keep = dropout.p != 0.0f;
  const int64_t rows_per_block = block_rows(layout.dim);
  const bool want_partials = grads.dgamma || grads.dbeta;
  const int64_t chunks = want_partials ? cpu::row_reduction_chunks(layout.rows, layout.dim) : 1;
  cpu::PartialSums partials(want_partials ? chunks : 0, layout.dim, grads.dgamma.has_value(),
                            grads.dbeta.has_value());
  cpu::parallel_chunks(
      chunks, layout.rows, layout.dim, [&](int64_t chunk, int64_t begin, int64_t end) {
        // One block of h and of its mask, in cache from being built to being normalised.
        cpu::Scratch block_scratch;
        float* h = block_scratch.take<float>(rows_per_block * layout.dim);
        uint8_t* keep =
            with_keep ? block_scratch.take<uint8_t>(rows_per_block * layout.dim) : nullptr;
        for (int64_t first = begin; first < end; first += rows_per_block) {
          const int64_t last = std::min(end, first + rows_per_block);
          const int64_t at = first * layout.dim, length = (last - first) * layout.dim;
          cpu::add_dropout(bytes_at(x, at), x.dtype, bytes_at(s, at), s.dtype, h, keep, length,
                           dropout, dropout.offset + static_cast<uint64_t>(at), count - at);
          cpu::NormBackward block = args;
          block.dy = bytes_at(dy, at);
          block.x = h;
          block.dx = h;
          block.storage = DType::float32;
          block.saved_rstd = saved ? saved->rstd.data + first : nullptr;
          block.rows = last - first;
          cpu::norm_backward_range(block, 0, block.rows, partials.dgamma(chunk),
                                   partials.dbeta(chunk));
          cpu::apply_keep(h, keep, bytes_at(grads.ds, at), grads.ds.dtype, bytes_at(grads.dx, at),
                          grads.dx.dtype, length, dropout.p, stream);
        }
      });
  if (grads.dgamma) partials.reduce_dgamma(grads.dgamma->data);
  if (grads.dbeta) partials.reduce_dbeta(grads.dbeta->data);
}

}  // namespace addnorm
