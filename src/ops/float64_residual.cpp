// The residual side on float64 views (addnorm/float64.hpp): add, dropout and the fused pre-norm
// and post-norm Add & Norm. The float32 ops' checks (op_checks.hpp), then the reference kernels.
#include <algorithm>
#include <vector>

#include "addnorm/float64.hpp"
#include "ops/float64_norm_rows.hpp"
#include "ops/op_checks.hpp"
#include "ops/reference/philox.hpp"

namespace addnorm::float64 {

using detail_rows::data_or_null;
using detail_rows::norm_backward;
using detail_rows::norm_forward;

namespace {

// output = Dropout(input) for `count` elements from stream element options.offset; output may
// be input. Element i is kept iff its bits reach the threshold of p rounded to float32, as the
// float32 op decides (so both dtypes drop the same elements); kept values are input / (1 - p)
// in float64.
void drop_elements(const double* input, double* output, int64_t count,
                   const DropoutOptions& options) {
  if (options.p == 0.0) {
    std::copy(input, input + count, output);
    return;
  }
  const uint32_t threshold = reference::dropout_threshold(static_cast<float>(options.p));
  const double keep = 1.0 - options.p;
  for (int64_t i = 0; i < count; ++i) {
    const bool kept = reference::dropout_keeps(
        options.seed, options.offset + static_cast<uint64_t>(i), threshold);
    output[i] = kept ? input[i] / keep : input[i] * 0.0;  // NaN and Inf stay NaN (dropped_one)
  }
}

// The forward's h = x + Dropout(s), rebuilt from its inputs.
std::vector<double> post_norm_sum(const ConstView& x, const ConstView& s, int64_t count,
                                  const DropoutOptions& dropout) {
  std::vector<double> h(static_cast<size_t>(count));
  drop_elements(s.data, h.data(), count, dropout);
  for (int64_t i = 0; i < count; ++i) h[static_cast<size_t>(i)] += x.data[i];
  return h;
}

}  // namespace

void add(ConstView x, ConstView r, MutableView out) {
  const int64_t count = detail::check_add<double>(x, r, out);
  for (int64_t i = 0; i < count; ++i) out.data[i] = x.data[i] + r.data[i];
}

void dropout(ConstView x, MutableView y, const DropoutOptions& options) {
  drop_elements(x.data, y.data, detail::check_dropout_op<double>("x", x, "y", y, options), options);
}

// The same mask and scale as the forward: the derivative of a kept element is 1 / (1 - p).
void dropout_backward(ConstView dy, MutableView dx, const DropoutOptions& options) {
  drop_elements(dy.data, dx.data, detail::check_dropout_op<double>("dy", dy, "dx", dx, options),
                options);
}

void add_norm_pre(ConstView x, ConstView r, const Shape& normalized_shape, MutableView h,
                  MutableView y, const NormOptions& options, std::optional<NormStats> stats) {
  const detail::RowLayout layout =
      detail::check_add_norm_pre(x, r, normalized_shape, h, y, options, stats);
  for (int64_t i = 0; i < layout.rows * layout.dim; ++i) h.data[i] = x.data[i] + r.data[i];
  norm_forward(h.data, y.data, options, detail::fused_kind(options), stats, layout);
}

void add_norm_pre_backward(ConstView dy, OptionalConst dh_next, ConstView h,
                           const Shape& normalized_shape, const AddNormPreGrads& grads,
                           const NormOptions& options, std::optional<SavedStats> saved) {
  const detail::RowLayout layout =
      detail::check_add_norm_pre_backward(dy, dh_next, h, normalized_shape, grads, options, saved);
  norm_backward(dy.data, h.data, data_or_null(dh_next), grads.dh.data, data_or_null(grads.dgamma),
                data_or_null(grads.dbeta), options, detail::fused_kind(options),
                saved ? saved->rstd.data : nullptr, layout);
}

void add_norm_post(ConstView x, ConstView s, const Shape& normalized_shape, MutableView y,
                   const NormOptions& options, const DropoutOptions& dropout,
                   std::optional<NormStats> stats) {
  const detail::RowLayout layout =
      detail::check_add_norm_post(x, s, normalized_shape, y, options, dropout, stats);
  // h is built apart from y, which may be x or s.
  const std::vector<double> h = post_norm_sum(x, s, layout.rows * layout.dim, dropout);
  norm_forward(h.data(), y.data, options, detail::fused_kind(options), stats, layout);
}

// dx = Norm'(dy) at h, and ds = Dropout'(dx) with the forward's mask, regenerated.
void add_norm_post_backward(ConstView dy, ConstView x, ConstView s, const Shape& normalized_shape,
                            const AddNormPostGrads& grads, const NormOptions& options,
                            const DropoutOptions& dropout, std::optional<SavedStats> saved) {
  const detail::RowLayout layout = detail::check_add_norm_post_backward(
      dy, x, s, normalized_shape, grads, options, dropout, saved);
  const int64_t count = layout.rows * layout.dim;
  // h first: dx may be x, and ds may be s.
  const std::vector<double> h = post_norm_sum(x, s, count, dropout);
  norm_backward(dy.data, h.data(), nullptr, grads.dx.data, data_or_null(grads.dgamma),
                data_or_null(grads.dbeta), options, detail::fused_kind(options),
                saved ? saved->rstd.data : nullptr, layout);
  drop_elements(grads.dx.data, grads.ds.data, count, dropout);
}

}  // namespace addnorm::float64
