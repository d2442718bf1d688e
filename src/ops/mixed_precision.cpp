// The mixed-precision norms. The kernels read and write the tensors' storage types directly
// where they take them (cpu::norm_supports: float32 anywhere, bfloat16 on every vector target,
// float16 from AVX2): a forward whose x and h (the residual stream) share one type and r and y
// (the branch) another, the two equal or the stream float32; a backward likewise with x, dh_next
// and dx as the stream and dy as the branch. Other calls (say a bfloat16 stream with float32
// activations, or 16-bit rows on the scalar target) widen blocks of rows into per-thread float32 staging buffers (a block stays in
// cache), run them through the float32 kernels, and narrow into their storage once; float32
// tensors are used in place, not staged.
#include "ops/mixed_precision.hpp"

#include <algorithm>
#include <array>
#include <optional>
#include <string>
#include <vector>

#include "addnorm/error.hpp"
#include "ops/cpu/convert.hpp"
#include "ops/cpu/kernels.hpp"
#include "ops/cpu/threading.hpp"
#include "ops/validate.hpp"

namespace addnorm {

namespace {

// ---- validation --------------------------------------------------------------------------

int64_t check_any(const char* name, const AnyConstView& view) {
  const int64_t count = view.shape.numel(name);
  for (int64_t dim : view.shape.dims()) {
    if (dim == 0) {
      throw Error(std::string(name) + " has shape " + view.shape.to_string() +
                  ", expected every dimension to be at least 1");
    }
  }
  if (view.data == nullptr) {
    throw Error(std::string(name) + " has no data (null pointer), expected " +
                std::to_string(count) + " elements of data");
  }
  return count;
}

void check_any_shape(const char* name, const AnyConstView& view, const Shape& expected) {
  if (!(view.shape == expected)) {
    throw Error(std::string(name) + " has shape " + view.shape.to_string() + ", expected " +
                expected.to_string());
  }
  check_any(name, view);
}

detail::Region region(const char* name, const AnyConstView& view) {
  return {name, view.data, view.shape.numel() * dtype_size(view.dtype)};
}
detail::Region region(const char* name, const std::optional<AnyConstView>& view) {
  return view ? region(name, *view) : detail::Region{name, nullptr, 0};
}
template <class T>
detail::Region region(const char* name, const T& view) {
  return detail::region(name, view);
}

detail::RowLayout check_norm(const char* x_name, const AnyConstView& x,
                             const Shape& normalized_shape, const MixedNormOptions& options) {
  check_any(x_name, x);
  const detail::RowLayout layout = detail::row_layout(x.shape, normalized_shape, x_name);
  if (options.gamma) check_any_shape("gamma", *options.gamma, normalized_shape);
  if (options.beta) check_any_shape("beta", *options.beta, normalized_shape);
  if (options.norm == NormKind::rms_norm && options.beta) {
    throw Error("beta was given for rms_norm, expected no beta (RMSNorm has no shift)");
  }
  if (options.norm == NormKind::layer_norm && options.zero_centered_gamma) {
    throw Error("zero_centered_gamma was set for layer_norm, expected it only with rms_norm");
  }
  detail::check_eps(options.eps);
  return layout;
}

void check_stats(const std::optional<NormStats>& stats, const MixedNormOptions& options,
                 int64_t rows) {
  if (!stats) return;
  if (options.norm == NormKind::layer_norm) {
    detail::check_count("mean", stats->mean, rows, "per row");
  }
  detail::check_count("rstd", stats->rstd, rows, "per row");
}

// ---- staging -----------------------------------------------------------------------------

// Rows per staged block: about 16 Ki elements (64 KiB of float32 per buffer), at least one row.
int64_t block_rows(int64_t dim) { return std::max<int64_t>(1, (int64_t{1} << 14) / dim); }

// Runs body(first, rows, at, count) over blocks of rows (at, count: their elements), the blocks
// spread over threads.
template <class Body>
void for_each_block(const detail::RowLayout& layout, const Body& body) {
  const int64_t block = block_rows(layout.dim);
  cpu::parallel_rows(layout.rows, layout.dim, [&](int64_t begin, int64_t end) {
    for (int64_t first = begin; first < end; first += block) {
      const int64_t rows = std::min(block, end - first);
      body(first, rows, first * layout.dim, rows * layout.dim);
    }
  });
}

// Per-thread float32 buffers, one per staged tensor of a call; they only grow.
float* staging(int slot, int64_t count) {
  thread_local std::array<std::vector<float>, 5> buffers;
  auto& buffer = buffers[static_cast<size_t>(slot)];
  if (buffer.size() < static_cast<size_t>(count)) buffer.resize(static_cast<size_t>(count));
  return buffer.data();
}

// Elements [begin, begin + count) of an input as float32: in place, or widened into a slot.
const float* input_rows(const AnyConstView& view, int64_t begin, int64_t count, int slot) {
  if (view.dtype == DType::float32) return static_cast<const float*>(view.data) + begin;
  float* rows = staging(slot, count);
  cpu::to_float32(static_cast<const uint8_t*>(view.data) + begin * dtype_size(view.dtype),
                  view.dtype, rows, count);
  return rows;
}

// Where the kernel writes elements [begin, begin + count) of an output: in place or a slot.
float* output_rows(const AnyMutableView& view, int64_t begin, int64_t count, int slot) {
  if (view.dtype == DType::float32) return static_cast<float*>(view.data) + begin;
  return staging(slot, count);
}

// Narrows staged output rows into their storage (nothing to do for float32), with streaming
// stores when the whole output is larger than the cache.
void store_rows(const AnyMutableView& view, const float* rows, int64_t begin, int64_t count) {
  if (view.dtype == DType::float32) return;
  const bool stream = cpu::streams_output(view.shape.numel() * dtype_size(view.dtype));
  cpu::from_float32(rows, static_cast<uint8_t*>(view.data) + begin * dtype_size(view.dtype),
                    view.dtype, count, stream);
}

// gamma and beta as float32 for the whole call (small: one row each).
struct Parameters {
  std::vector<float> gamma_storage, beta_storage;
  const float* gamma = nullptr;
  const float* beta = nullptr;

  Parameters(const MixedNormOptions& options, int64_t dim) {
    gamma = widen(options.gamma, gamma_storage, dim);
    beta = widen(options.beta, beta_storage, dim);
  }
  static const float* widen(const std::optional<AnyConstView>& view, std::vector<float>& storage,
                            int64_t dim) {
    if (!view) return nullptr;
    if (view->dtype == DType::float32) return static_cast<const float*>(view->data);
    storage.resize(static_cast<size_t>(dim));
    cpu::to_float32(view->data, view->dtype, storage.data(), dim);
    return storage.data();
  }
};

enum Slot { kX = 0, kResidual = 1, kH = 2, kY = 3, kExtra = 4 };

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
// branch) of one, a pair that cpu::norm_pair_supported.
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
  const detail::RowLayout layout = check_norm("x", x, normalized_shape, options);
  check_any_shape("y", y, x.shape);
  check_stats(stats, options, layout.rows);
  const bool y_may_be_x = y.dtype == x.dtype;
  detail::check_disjoint(
      {region("y", AnyConstView(y)), region("mean", stats ? &stats->mean : nullptr),
       region("rstd", stats ? &stats->rstd : nullptr)},
      {region("x", x), region("gamma", options.gamma), region("beta", options.beta)},
      {{"y", y_may_be_x ? "x" : ""}});
  const Parameters parameters(options, layout.dim);
  if (cpu::norm_pair_supported(x.dtype, y.dtype)) {
    forward_directly(x, std::nullopt, std::nullopt, y, parameters, options, stats, layout);
    return;
  }
  for_each_block(layout, [&](int64_t first, int64_t rows, int64_t at, int64_t count) {
    cpu::NormForward args;
    float* y_rows = output_rows(y, at, count, kY);
    args.x = input_rows(x, at, count, kX);
    args.y = y_rows;
    set_norm(args, parameters, options, stats, first, rows, layout.dim);
    cpu::norm_forward_range(args, 0, rows);
    store_rows(y, y_rows, at, count);
  });
}

void add_norm_pre_mixed(AnyConstView x, AnyConstView r, const Shape& normalized_shape,
                        AnyMutableView h, AnyMutableView y, const MixedNormOptions& options,
                        std::optional<NormStats> stats) {
  const detail::RowLayout layout = check_norm("x", x, normalized_shape, options);
  check_any_shape("r", r, x.shape);
  check_any_shape("h", h, x.shape);
  check_any_shape("y", y, x.shape);
  check_stats(stats, options, layout.rows);
  detail::check_disjoint(
      {region("h", AnyConstView(h)), region("y", AnyConstView(y)),
       region("mean", stats ? &stats->mean : nullptr),
       region("rstd", stats ? &stats->rstd : nullptr)},
      {region("x", x), region("r", r), region("gamma", options.gamma),
       region("beta", options.beta)},
      {{"h", h.dtype == x.dtype ? "x" : ""}, {"h", h.dtype == r.dtype ? "r" : ""}});
  const Parameters parameters(options, layout.dim);
  if (h.dtype == x.dtype && y.dtype == r.dtype && cpu::norm_pair_supported(x.dtype, r.dtype)) {
    forward_directly(x, r, h, y, parameters, options, stats, layout);
    return;
  }
  for_each_block(layout, [&](int64_t first, int64_t rows, int64_t at, int64_t count) {
    cpu::NormForward args;
    const float* x_rows = input_rows(x, at, count, kX);
    const float* r_rows = input_rows(r, at, count, kResidual);
    float* h_rows = output_rows(h, at, count, kH);
    float* y_rows = output_rows(y, at, count, kY);
    args.x = x_rows;
    args.residual = r_rows;
    args.h = h_rows;
    args.y = y_rows;
    if (h.dtype != DType::float32) {
      // The norm must see h as stored: form it, store it, and round it to its storage type
      // in cache (narrowed into a scratch slot and widened back; rereading it from h's
      // memory would miss the cache once h is written with streaming stores).
      float* staged_h = h_rows;
      for (int64_t i = 0; i < count; ++i) staged_h[i] = x_rows[i] + r_rows[i];
      store_rows(h, staged_h, at, count);
      void* narrowed = staging(kExtra, count);
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
  const detail::RowLayout layout = check_norm("x", x, normalized_shape, options);
  check_any_shape("dy", dy, x.shape);
  check_any_shape("dx", grads.dx, x.shape);
  if (dh_next) check_any_shape("dh_next", *dh_next, x.shape);
  if (saved_rstd) detail::check_count("rstd", *saved_rstd, layout.rows, "per row");
  const Shape& parameter_shape = normalized_shape;
  if (grads.dgamma) {
    if (!options.gamma) throw Error("dgamma was requested but gamma is absent, expected no dgamma without gamma");
    detail::check_shape("dgamma", *grads.dgamma, parameter_shape);
  }
  if (grads.dbeta) {
    if (!options.beta) throw Error("dbeta was requested but beta is absent, expected no dbeta without beta");
    detail::check_shape("dbeta", *grads.dbeta, parameter_shape);
  }
  const AnyConstView dx_view = grads.dx;
  detail::check_disjoint(
      {region("dx", dx_view), region("dgamma", grads.dgamma), region("dbeta", grads.dbeta)},
      {region("dy", dy), region("x", x), region("dh_next", dh_next),
       region("gamma", options.gamma), region("rstd", saved_rstd)},
      {{"dx", dx_view.dtype == dy.dtype ? "dy" : ""},
       {"dx", dx_view.dtype == x.dtype ? "x" : ""},
       {"dx", dh_next && dx_view.dtype == dh_next->dtype ? "dh_next" : ""}});
  const Parameters parameters(options, layout.dim);
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
  const bool want_partials = grads.dgamma || grads.dbeta;
  const int64_t chunks = want_partials ? cpu::reduction_chunks(layout.rows) : 1;
  cpu::PartialSums partials(want_partials ? chunks : 0, layout.dim, grads.dgamma.has_value(),
                            grads.dbeta.has_value());
  const int64_t block = block_rows(layout.dim);
  cpu::parallel_chunks(chunks, layout.rows, layout.dim,
                       [&](int64_t chunk, int64_t begin, int64_t end) {
    for (int64_t first = begin; first < end; first += block) {
      const int64_t rows = std::min(block, end - first);
      const int64_t at = first * layout.dim, count = rows * layout.dim;
      cpu::NormBackward args;
      args.dy = input_rows(dy, at, count, kY);
      args.x = input_rows(x, at, count, kX);
      args.dh_next = dh_next ? input_rows(*dh_next, at, count, kResidual) : nullptr;
      float* dx_rows = output_rows(grads.dx, at, count, kH);
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
