// The mixed-precision norms. The kernels read and write the tensors' storage types directly, on
// every SIMD target, for every call whose tensors form two groups of one type each: the residual
// stream (x and h; in the backward x, dh_next and dx) and the branch (r and y; dy), the two types
// equal or either of them float32 (cpu::norm_pair_supported). That covers every layout a model
// uses: one type throughout, a float32 stream with 16-bit activations, a 16-bit stream with
// float32 activations.
//
// What remains staged (staged_calls below): calls that fit no compiled pair, namely a stream of
// one 16-bit type with a branch of the other (bfloat16 with float16), or a group whose tensors
// differ among themselves (h not of x's type, y not of r's, dx or dh_next not of x's). Compiling
// those would multiply the engine's instances (some 30% more for the two 16-bit pairs, far more
// for per-tensor types) for combinations no model uses. They widen blocks of rows into per-thread
// float32 buffers (staged_rows.hpp), run the float32 kernels, and narrow into their storage once;
// float32 tensors are used in place, not staged. The results obey the same bound (docs/numerics.md).
#include "ops/mixed_precision.hpp"

#include <algorithm>
#include <optional>

#include "ops/cpu/convert.hpp"
#include "ops/cpu/kernels.hpp"
#include "ops/cpu/threading.hpp"
#include "ops/staged_rows.hpp"
#include "ops/validate.hpp"

namespace addnorm {

namespace {

using detail::input_rows;
using detail::output_rows;
using detail::store_rows;

// Runs body(first, rows, at, count) over blocks of rows (at, count: their elements), the blocks
// spread over threads.
template <class Body>
void for_each_block(const detail::RowLayout& layout, const Body& body) {
  const int64_t block = detail::block_rows(layout.dim);
  cpu::parallel_rows(layout.rows, layout.dim, [&](int64_t begin, int64_t end) {
    for (int64_t first = begin; first < end; first += block) {
      const int64_t rows = std::min(block, end - first);
      body(first, rows, first * layout.dim, rows * layout.dim);
    }
  });
}

// gamma and beta as float32 for the whole call (one row each: widened once on this thread).
struct Parameters {
  cpu::Scratch scratch;  // before the pointers into it
  const float* gamma = nullptr;
  const float* beta = nullptr;
  explicit Parameters(const MixedNormOptions& options)
      : gamma(detail::parameter_as_float32(options.gamma, scratch)),
        beta(detail::parameter_as_float32(options.beta, scratch)) {}
};

// The norm's settings for a block of `rows` rows starting at row `first`.
void set_norm(cpu::NormForward& args, const Parameters& parameters,
              const MixedNormOptions& options, const std::optional<NormStats>& stats,
              int64_t first, int64_t rows, int64_t dim) {
  args.gamma = parameters.gamma;
  args.beta = parameters.beta;
  args.zero_centered_gamma = options.zero_centered_gamma;
  args.norm = options.norm;
  args.mean = stats && args.norm == NormKind::layer_norm ? stats->mean.data + first : nullptr;
  args.rstd = stats ? stats->rstd.data + first : nullptr;
  args.rows = rows;
  args.dim = dim;
  args.eps = options.eps;
}

// The whole forward in the kernels: x and h (the stream) of one storage type, r and y (the
// branch) of one, a pair that cpu::norm_pair_supported. Every other forward is staged below.
void forward_directly(const AnyConstView& x, const std::optional<AnyConstView>& r,
                      const std::optional<AnyMutableView>& h, const AnyMutableView& y,
                      const Parameters& parameters, const MixedNormOptions& options,
                      const std::optional<NormStats>& stats, const detail::RowLayout& layout) {
  cpu::NormForward args;
  args.x = x.data;
  args.residual = r ? r->data : nullptr;
  args.h = h ? h->data : nullptr;
  args.y = y.data;
  args.storage = x.dtype;
  args.branch_storage = y.dtype;
  set_norm(args, parameters, options, stats, 0, layout.rows, layout.dim);
  cpu::norm_forward(args);
}

}  // namespace

void norm_forward_mixed(AnyConstView x, const Shape& normalized_shape, AnyMutableView y,
                        const MixedNormOptions& options, std::optional<NormStats> stats) {
  const detail::RowLayout layout = detail::row_layout(x.shape, normalized_shape);
  const Parameters parameters(options);
  if (cpu::norm_pair_supported(x.dtype, y.dtype)) {
    forward_directly(x, std::nullopt, std::nullopt, y, parameters, options, stats, layout);
    return;
  }
  // Staged: x and y of the two different 16-bit types.
  for_each_block(layout, [&](int64_t first, int64_t rows, int64_t at, int64_t count) {
    cpu::Scratch scratch;
    cpu::NormForward args;
    float* y_rows = output_rows(y, at, count, scratch);
    args.x = input_rows(x, at, count, scratch);
    args.y = y_rows;
    set_norm(args, parameters, options, stats, first, rows, layout.dim);
    cpu::norm_forward_range(args, 0, rows);
    store_rows(y, y_rows, at, count);
  });
}

void add_norm_pre_mixed(AnyConstView x, AnyConstView r, const Shape& normalized_shape,
                        AnyMutableView h, AnyMutableView y, const MixedNormOptions& options,
                        std::optional<NormStats> stats) {
  const detail::RowLayout layout = detail::row_layout(x.shape, normalized_shape);
  const Parameters parameters(options);
  if (h.dtype == x.dtype && y.dtype == r.dtype && cpu::norm_pair_supported(x.dtype, r.dtype)) {
    forward_directly(x, r, h, y, parameters, options, stats, layout);
    return;
  }
  // Staged: h not of x's type, y not of r's, or a stream and branch of different 16-bit types.
  for_each_block(layout, [&](int64_t first, int64_t rows, int64_t at, int64_t count) {
    cpu::Scratch scratch;
    cpu::NormForward args;
    const float* x_rows = input_rows(x, at, count, scratch);
    const float* r_rows = input_rows(r, at, count, scratch);
    float* h_rows = output_rows(h, at, count, scratch);
    float* y_rows = output_rows(y, at, count, scratch);
    args.x = x_rows;
    args.residual = r_rows;
    args.h = h_rows;
    args.y = y_rows;
    if (h.dtype != DType::float32) {
      // The norm must see h as stored: form it, store it, and round it to its storage type
      // in cache (narrowed into scratch and widened back; rereading it from h's
      // memory would miss the cache once h is written with streaming stores).
      float* staged_h = h_rows;
      for (int64_t i = 0; i < count; ++i) staged_h[i] = x_rows[i] + r_rows[i];
      store_rows(h, staged_h, at, count);
      void* narrowed = scratch.take<float>(count);  // room for any 16-bit type
      cpu::from_float32(staged_h, narrowed, h.dtype, count);
      cpu::to_float32(narrowed, h.dtype, staged_h, count);
      args.x = staged_h;
      args.residual = nullptr;
      args.h = nullptr;
    }
    set_norm(args, parameters, options, stats, first, rows, layout.dim);
    cpu::norm_forward_range(args, 0, rows);
    store_rows(y, y_rows, at, count);
  });
}

void norm_backward_mixed(AnyConstView dy, AnyConstView x, const Shape& normalized_shape,
                         const MixedNormGrads& grads, const MixedNormOptions& options,
                         std::optional<AnyConstView> dh_next, OptionalConst saved_rstd) {
  const detail::RowLayout layout = detail::row_layout(x.shape, normalized_shape);
  const Parameters parameters(options);
  if (grads.dx.dtype == x.dtype && (!dh_next || dh_next->dtype == x.dtype) &&
      cpu::norm_pair_supported(x.dtype, dy.dtype)) {
    cpu::NormBackward args;
    args.dy = dy.data;
    args.x = x.data;
    args.dh_next = dh_next ? dh_next->data : nullptr;
    args.dx = grads.dx.data;
    args.storage = x.dtype;
    args.dy_storage = dy.dtype;
    args.gamma = parameters.gamma;
    args.zero_centered_gamma = options.zero_centered_gamma;
    args.saved_rstd = saved_rstd ? saved_rstd->data : nullptr;
    args.dgamma = grads.dgamma ? grads.dgamma->data : nullptr;
    args.dbeta = grads.dbeta ? grads.dbeta->data : nullptr;
    args.norm = options.norm;
    args.rows = layout.rows;
    args.dim = layout.dim;
    args.eps = options.eps;
    cpu::norm_backward(args);
    return;
  }
  // Staged: dx or dh_next not of x's type, or x and dy of different 16-bit types.
  const bool want_partials = grads.dgamma || grads.dbeta;
  const int64_t chunks = want_partials ? cpu::reduction_chunks(layout.rows) : 1;
  cpu::PartialSums partials(want_partials ? chunks : 0, layout.dim, grads.dgamma.has_value(),
                            grads.dbeta.has_value());
  const int64_t block = detail::block_rows(layout.dim);
  cpu::parallel_chunks(chunks, layout.rows, layout.dim,
                       [&](int64_t chunk, int64_t begin, int64_t end) {
    for (int64_t first = begin; first < end; first += block) {
      const int64_t rows = std::min(block, end - first);
      const int64_t at = first * layout.dim, count = rows * layout.dim;
      cpu::Scratch scratch;
      cpu::NormBackward args;
      args.dy = input_rows(dy, at, count, scratch);
      args.x = input_rows(x, at, count, scratch);
      args.dh_next = dh_next ? input_rows(*dh_next, at, count, scratch) : nullptr;
      float* dx_rows = output_rows(grads.dx, at, count, scratch);
      args.dx = dx_rows;
      args.gamma = parameters.gamma;
      args.zero_centered_gamma = options.zero_centered_gamma;
      args.saved_rstd = saved_rstd ? saved_rstd->data + first : nullptr;
      args.norm = options.norm;
      args.rows = rows;
      args.dim = layout.dim;
      args.eps = options.eps;
      cpu::norm_backward_range(args, 0, rows, partials.dgamma(chunk), partials.dbeta(chunk));
      store_rows(grads.dx, dx_rows, at, count);
    }
  });
  if (grads.dgamma) partials.reduce_dgamma(grads.dgamma->data);
  if (grads.dbeta) partials.reduce_dbeta(grads.dbeta->data);
}

}  // namespace addnorm
