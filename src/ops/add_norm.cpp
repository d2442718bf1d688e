// The fused Add & Norm boxes. Pre-norm (GPT-2) returns both the residual stream h = x + r and
// Norm(h); post-norm (2017 paper) returns Norm(x + Dropout(s)). Both round h to float32 before
// normalising it, exactly as the unfused add -> norm sequence does, so fused and unfused agree.
#include <algorithm>

#include "addnorm/error.hpp"
#include "addnorm/ops.hpp"
#include "ops/dropout_detail.hpp"
#include "ops/cpu/dropout.hpp"
#include "ops/cpu/kernels.hpp"
#include "ops/cpu/threading.hpp"
#include "ops/validate.hpp"

namespace addnorm {

using detail::region;

namespace {

detail::RowLayout check_add_norm(const char* x_name, const ConstView& x, const char* other_name,
                                 const ConstView& other, const Shape& normalized_shape,
                                 const AddNormOptions& options) {
  detail::check_tensor(x_name, x);
  const detail::RowLayout layout = detail::row_layout(x.shape, normalized_shape, x_name);
  detail::check_shape(other_name, other, x.shape);
  detail::check_affine(options.gamma, options.beta, normalized_shape);
  if (options.norm == NormKind::rms_norm && options.beta) {
    throw Error("beta was given for rms_norm, expected no beta (RMSNorm has no shift)");
  }
  if (options.norm == NormKind::layer_norm && options.zero_centered_gamma) {
    throw Error("zero_centered_gamma was set for layer_norm, expected it only with rms_norm");
  }
  detail::check_eps(options.eps);
  return layout;
}

void check_stats(const std::optional<NormStats>& stats, const AddNormOptions& options,
                 int64_t rows) {
  if (!stats) return;
  if (options.norm == NormKind::layer_norm) detail::check_count("mean", stats->mean, rows, "per row");
  detail::check_count("rstd", stats->rstd, rows, "per row");
}

// Saved statistics of a backward: rstd always, mean too for LayerNorm (unused there beyond its
// shape, but a wrong one means the caller mixed up its tensors).
void check_saved(const std::optional<SavedStats>& saved, const AddNormOptions& options,
                 int64_t rows) {
  if (!saved) return;
  if (options.norm == NormKind::layer_norm) detail::check_count("mean", saved->mean, rows, "per row");
  detail::check_count("rstd", saved->rstd, rows, "per row");
}

const ConstView* saved_mean(const std::optional<SavedStats>& saved, const AddNormOptions& options) {
  return saved && options.norm == NormKind::layer_norm ? &saved->mean : nullptr;
}

void check_grads(const OptionalMutable& dgamma, const OptionalMutable& dbeta,
                 const AddNormOptions& options, const Shape& normalized_shape) {
  detail::check_parameter_grad("dgamma", dgamma, "gamma", options.gamma, normalized_shape);
  detail::check_parameter_grad("dbeta", dbeta, "beta", options.beta, normalized_shape);
}

const float* data_or_null(const OptionalConst& view) { return view ? view->data : nullptr; }
float* data_or_null(const OptionalMutable& view) { return view ? view->data : nullptr; }

// The forward kernel's arguments for the chosen norm: x is normalised (after adding residual,
// when given, into h).
cpu::NormForward forward_args(const float* x, const float* residual, float* h, float* y,
                              const AddNormOptions& options,
                              const std::optional<NormStats>& stats,
                              const detail::RowLayout& layout) {
  cpu::NormForward args;
  args.x = x;
  args.residual = residual;
  args.h = h;
  args.gamma = data_or_null(options.gamma);
  args.beta = data_or_null(options.beta);
  args.zero_centred_gamma = options.zero_centered_gamma;
  args.y = y;
  args.centre = options.norm == NormKind::layer_norm;
  args.mean = stats && args.centre ? stats->mean.data : nullptr;
  args.rstd = stats ? stats->rstd.data : nullptr;
  args.rows = layout.rows;
  args.dim = layout.dim;
  args.eps = options.eps;
  return args;
}

// dh = dh_next + Norm'(dy) at h; dh may be the same memory as h, dy or dh_next.
void norm_backward(const float* dy, const float* h, const float* dh_next, float* dh,
                   const OptionalMutable& dgamma, const OptionalMutable& dbeta,
                   const AddNormOptions& options, const std::optional<SavedStats>& saved,
                   const detail::RowLayout& layout) {
  cpu::NormBackward args;
  args.dy = dy;
  args.x = h;
  args.gamma = data_or_null(options.gamma);
  args.zero_centred_gamma = options.zero_centered_gamma;
  args.saved_rstd = saved ? saved->rstd.data : nullptr;
  args.dh_next = dh_next;
  args.dx = dh;
  args.dgamma = data_or_null(dgamma);
  args.dbeta = data_or_null(dbeta);
  args.centre = options.norm == NormKind::layer_norm;
  args.rows = layout.rows;
  args.dim = layout.dim;
  args.eps = options.eps;
  cpu::norm_backward(args);
}

// Rows per block for the post-norm ops: about 16 Ki elements, so a block stays in cache
// between building h and normalising it.
int64_t block_rows(int64_t dim) { return std::max<int64_t>(1, (int64_t{1} << 14) / dim); }

// out = x + Dropout(s) for `length` elements starting at stream element `element`, rounded as
// the unfused dropout -> add. out may be x or s (the dropped values go through a small buffer).
void add_dropped(const float* x, const float* s, float* out, int64_t length,
                 const DropoutOptions& dropout, uint64_t element) {
  constexpr int64_t kChunk = 1024;
  float dropped[kChunk];
  for (int64_t start = 0; start < length; start += kChunk) {
    const int64_t count = std::min(kChunk, length - start);
    cpu::apply_dropout(s + start, dropped, count, dropout, element + static_cast<uint64_t>(start));
    for (int64_t i = 0; i < count; ++i) out[start + i] = x[start + i] + dropped[i];
  }
}

}  // namespace

void add_norm_pre(ConstView x, ConstView r, const Shape& normalized_shape, MutableView h,
                  MutableView y, const AddNormOptions& options, std::optional<NormStats> stats) {
  const detail::RowLayout layout = check_add_norm("x", x, "r", r, normalized_shape, options);
  detail::check_shape("h", h, x.shape);
  detail::check_shape("y", y, x.shape);
  check_stats(stats, options, layout.rows);
  const bool with_mean = stats && options.norm == NormKind::layer_norm;
  detail::check_disjoint({region("h", h), region("y", y),
                          region("mean", with_mean ? &stats->mean : nullptr),
                          region("rstd", stats ? &stats->rstd : nullptr)},
                         {region("x", x), region("r", r), region("gamma", options.gamma),
                          region("beta", options.beta)},
                         {{"h", "x"}, {"h", "r"}});
  // One pass: each row's h = x + r is written, then normalised while it is still in cache.
  cpu::norm_forward(forward_args(x.data, r.data, h.data, y.data, options, stats, layout));
}

void add_norm_pre_backward(ConstView dy, OptionalConst dh_next, ConstView h,
                           const Shape& normalized_shape, const AddNormPreGrads& grads,
                           const AddNormOptions& options, std::optional<SavedStats> saved) {
  const detail::RowLayout layout = check_add_norm("h", h, "dy", dy, normalized_shape, options);
  if (dh_next) detail::check_shape("dh_next", *dh_next, h.shape);
  detail::check_shape("dh", grads.dh, h.shape);
  check_grads(grads.dgamma, grads.dbeta, options, normalized_shape);
  check_saved(saved, options, layout.rows);
  detail::check_disjoint(
      {region("dh", grads.dh), region("dgamma", grads.dgamma), region("dbeta", grads.dbeta)},
      {region("dy", dy), region("dh_next", dh_next), region("h", h),
       region("gamma", options.gamma), region("beta", options.beta),
       region("mean", saved_mean(saved, options)),
       region("rstd", saved ? &saved->rstd : nullptr)},
      {{"dh", "dy"}, {"dh", "dh_next"}, {"dh", "h"}});
  norm_backward(dy.data, h.data, data_or_null(dh_next), grads.dh.data, grads.dgamma, grads.dbeta,
                options, saved, layout);
}

void add_norm_post(ConstView x, ConstView s, const Shape& normalized_shape, MutableView y,
                   const AddNormOptions& options, const DropoutOptions& dropout,
                   std::optional<NormStats> stats) {
  const detail::RowLayout layout = check_add_norm("x", x, "s", s, normalized_shape, options);
  detail::check_shape("y", y, x.shape);
  const int64_t count = layout.rows * layout.dim;
  detail::check_dropout(dropout, count);
  check_stats(stats, options, layout.rows);
  const bool with_mean = stats && options.norm == NormKind::layer_norm;
  detail::check_disjoint({region("y", y), region("mean", with_mean ? &stats->mean : nullptr),
                          region("rstd", stats ? &stats->rstd : nullptr)},
                         {region("x", x), region("s", s), region("gamma", options.gamma),
                          region("beta", options.beta)},
                         {{"y", "x"}, {"y", "s"}});
  // Per block of rows (in cache): h = x + Dropout(s) is built in y's memory, then normalised
  // in place.
  const cpu::NormForward args =
      forward_args(y.data, nullptr, nullptr, y.data, options, stats, layout);
  cpu::parallel_rows(layout.rows, layout.dim, [&](int64_t begin, int64_t end) {
    for (int64_t first = begin; first < end; first += block_rows(layout.dim)) {
      const int64_t last = std::min(end, first + block_rows(layout.dim));
      const int64_t at = first * layout.dim, length = (last - first) * layout.dim;
      add_dropped(x.data + at, s.data + at, y.data + at, length, dropout,
                  dropout.offset + static_cast<uint64_t>(at));
      cpu::norm_forward_range(args, first, last);
    }
  });
}

void add_norm_post_backward(ConstView dy, ConstView x, ConstView s, const Shape& normalized_shape,
                            const AddNormPostGrads& grads, const AddNormOptions& options,
                            const DropoutOptions& dropout, std::optional<SavedStats> saved) {
  const detail::RowLayout layout = check_add_norm("x", x, "s", s, normalized_shape, options);
  detail::check_shape("dy", dy, x.shape);
  detail::check_shape("dx", grads.dx, x.shape);
  detail::check_shape("ds", grads.ds, x.shape);
  const int64_t count = layout.rows * layout.dim;
  detail::check_dropout(dropout, count);
  check_grads(grads.dgamma, grads.dbeta, options, normalized_shape);
  check_saved(saved, options, layout.rows);
  detail::check_disjoint({region("dx", grads.dx), region("ds", grads.ds),
                          region("dgamma", grads.dgamma), region("dbeta", grads.dbeta)},
                         {region("dy", dy), region("x", x), region("s", s),
                          region("gamma", options.gamma), region("beta", options.beta),
                          region("mean", saved_mean(saved, options)),
                          region("rstd", saved ? &saved->rstd : nullptr)},
                         {{"dx", "dy"}, {"dx", "x"}, {"ds", "s"}});
  // The forward's h is rebuilt in ds's memory (the mask is regenerated, not stored); the norm's
  // backward reads it row by row and writes dh = dx (which may be dy's memory); finally ds is
  // replaced by dx * mask / (1 - p), the dropout's own backward. Block by block, in cache;
  // dgamma/dbeta partials per fixed chunk of rows, as cpu::norm_backward does.
  cpu::NormBackward args;
  args.dy = dy.data;
  args.x = grads.ds.data;
  args.gamma = data_or_null(options.gamma);
  args.zero_centred_gamma = options.zero_centered_gamma;
  args.saved_rstd = saved ? saved->rstd.data : nullptr;
  args.dx = grads.dx.data;
  args.centre = options.norm == NormKind::layer_norm;
  args.rows = layout.rows;
  args.dim = layout.dim;
  args.eps = options.eps;
  const bool want_partials = grads.dgamma || grads.dbeta;
  const int64_t chunks = want_partials ? cpu::reduction_chunks(layout.rows) : 1;
  cpu::PartialSums partials(want_partials ? chunks : 0, layout.dim, grads.dgamma.has_value(),
                            grads.dbeta.has_value());
  cpu::parallel_chunks(chunks, layout.rows, layout.dim,
                       [&](int64_t chunk, int64_t begin, int64_t end) {
    for (int64_t first = begin; first < end; first += block_rows(layout.dim)) {
      const int64_t last = std::min(end, first + block_rows(layout.dim));
      const int64_t at = first * layout.dim, length = (last - first) * layout.dim;
      const uint64_t element = dropout.offset + static_cast<uint64_t>(at);
      float* h = grads.ds.data + at;
      add_dropped(x.data + at, s.data + at, h, length, dropout, element);
      cpu::norm_backward_range(args, first, last, partials.dgamma(chunk), partials.dbeta(chunk));
      cpu::apply_dropout(grads.dx.data + at, h, length, dropout, element);
    }
  });
  if (grads.dgamma) partials.reduce_dgamma(grads.dgamma->data);
  if (grads.dbeta) partials.reduce_dbeta(grads.dbeta->data);
}

}  // namespace addnorm
