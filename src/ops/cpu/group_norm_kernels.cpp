// GroupNorm on the norm engine (group_norm_kernels.hpp). A block is a run of whole rows (one row
// per (sample, group)) of at most kGroupNormBlockValues values, or one row when a row is longer:
// the engine writes the block's x_hat into a float32 buffer of the calling thread, still in cache
// when the per-channel passes (SIMD, per target, below) read it back.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/cpu/group_norm_kernels.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include "hwy/highway.h"
#include "ops/cpu/lane_ops-inl.h"

HWY_BEFORE_NAMESPACE();
namespace addnorm::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// One row's channels (per_group runs of `spatial` values) scaled and shifted from source into
// target (which may be source): v * gamma_c + beta_c by the target's MulAdd, the ends of runs by
// the same operation (mul_add). With `stream`, whole aligned registers of target are written
// with non-temporal stores (the caller flushes them).
void scale_shift_row(const float* source, float* target, const float* gamma, const float* beta,
                     int64_t per_group, int64_t spatial, bool stream) {
  const FloatTag df;
  const auto n = static_cast<int64_t>(hn::Lanes(df));
  for (int64_t k = 0; k < per_group; ++k) {
    const float scale = gamma ? gamma[k] : 1.0f;
    const float shift = beta ? beta[k] : 0.0f;
    const auto scale_v = hn::Set(df, scale);
    const auto shift_v = hn::Set(df, shift);
    const float* in = source + k * spatial;
    float* out = target + k * spatial;
    const auto scalar = [&](int64_t i) ADDNORM_LANE_BODY { out[i] = mul_add(in[i], scale, shift); };
    int64_t i = 0;
    if (stream) {
      // One value at a time up to an aligned register, then whole registers streamed.
      const auto bytes = static_cast<uintptr_t>(n) * sizeof(float);
      for (; i < spatial && reinterpret_cast<uintptr_t>(out + i) % bytes != 0; ++i) scalar(i);
    }
    walk_lanes(
        df, i, spatial,
        [&](int64_t at) ADDNORM_LANE_BODY {
          const auto y = hn::MulAdd(hn::LoadU(df, in + at), scale_v, shift_v);
          if (stream) {
            hn::Stream(y, df, out + at);
          } else {
            hn::StoreU(y, df, out + at);
          }
        },
        scalar);
  }
}

// One row's channels in the backward, with d = x - shift (exact in float64 unless the two lie
// more than 2^29 apart, and then within 2^-53 of itself): sum dy * d and
// sum dy over each channel's run into dy_d[k] and dy_sum[k], and the row's sum d and sum d^2
// (its moments, as the forward takes them) into row_sums[0] and row_sums[1], all in float64.
// dx's means are then exact to float64 rounding (sum dy * x_hat = rstd * (sum dy * d - (mean -
// shift) * sum dy)); summed over the forward's float32 x_hat instead, a row of a wide dynamic
// range put dx 8 ulp out (an audit's find).
void channel_sums_row(const float* dy, const float* x, double shift, double* dy_d, double* dy_sum,
                      double* row_sums, int64_t per_group, int64_t spatial) {
  double row_d = 0, row_d2 = 0;
  for (int64_t k = 0; k < per_group; ++k) {
    const int64_t at = k * spatial;
    double a = 0, b = 0, c = 0, e = 0;
    int64_t i = 0;
#if HWY_TARGET != HWY_SCALAR
    const FloatTag df;
    const auto n = static_cast<int64_t>(hn::Lanes(df));
    const DoubleTag dd;
    const hn::Half<FloatTag> dfh;
    const auto shift_v = hn::Set(dd, shift);
    auto a_v = hn::Zero(dd), b_v = hn::Zero(dd), c_v = hn::Zero(dd), e_v = hn::Zero(dd);
    auto add_half = [&](auto dy_half, auto x_half) HWY_ATTR {
      const auto g = hn::PromoteTo(dd, dy_half);
      const auto d = hn::Sub(hn::PromoteTo(dd, x_half), shift_v);
      a_v = hn::MulAdd(g, d, a_v);
      b_v = hn::Add(b_v, g);
      c_v = hn::Add(c_v, d);
      e_v = hn::MulAdd(d, d, e_v);
    };
    for (; i + n <= spatial; i += n) {
      const auto dy_v = hn::LoadU(df, dy + at + i);
      const auto x_v = hn::LoadU(df, x + at + i);
      add_half(hn::LowerHalf(dfh, dy_v), hn::LowerHalf(dfh, x_v));
      add_half(hn::UpperHalf(dfh, dy_v), hn::UpperHalf(dfh, x_v));
    }
    a = hn::GetLane(hn::SumOfLanes(dd, a_v));
    b = hn::GetLane(hn::SumOfLanes(dd, b_v));
    c = hn::GetLane(hn::SumOfLanes(dd, c_v));
    e = hn::GetLane(hn::SumOfLanes(dd, e_v));
#endif
    for (; i < spatial; ++i) {
      const double d = double(x[at + i]) - shift;
      a += double(dy[at + i]) * d;
      b += double(dy[at + i]);
      c += d;
      e += d * d;
    }
    dy_d[k] = a;
    dy_sum[k] = b;
    row_d += c;
    row_d2 += e;
  }
  row_sums[0] = row_d;
  row_sums[1] = row_d2;
}

// dx = rstd * (dy * gamma_c - mean_g - x_hat * mean_g_x_hat) over the lanes of d.
template <class D>
hn::Vec<D> dx_lanes(D d, hn::Vec<D> dy, hn::Vec<D> x_hat, float scale, float mean_g,
                    float mean_g_x_hat, float rstd) {
  const auto centred = hn::Sub(hn::Mul(dy, hn::Set(d, scale)), hn::Set(d, mean_g));
  return hn::Mul(hn::NegMulAdd(x_hat, hn::Set(d, mean_g_x_hat), centred), hn::Set(d, rstd));
}

// One row's dx: LayerNorm's backward with g = dy * gamma_c and the row's means of g and of
// g * x_hat (from channel_sums_row). dx may be dy (each register is read before it is written);
// the ends of runs go through the same operations one lane at a time.
void dx_row(const float* dy, const float* x_hat, const float* gamma, float* dx, int64_t per_group,
            int64_t spatial, float mean_g, float mean_g_x_hat, float rstd) {
  const FloatTag df;
  const hn::CappedTag<float, 1> d1;
  for (int64_t k = 0; k < per_group; ++k) {
    const int64_t at = k * spatial;
    const float scale = gamma ? gamma[k] : 1.0f;
    // The vectors, then the same operations one lane at a time: one body for both tags.
    const auto body = [&](auto d, int64_t i) ADDNORM_LANE_BODY {
      hn::StoreU(dx_lanes(d, hn::LoadU(d, dy + at + i), hn::LoadU(d, x_hat + at + i), scale, mean_g,
                          mean_g_x_hat, rstd),
                 d, dx + at + i);
    };
    walk_lanes(
        df, 0, spatial, [&](int64_t i) ADDNORM_LANE_BODY { body(df, i); },
        [&](int64_t i) ADDNORM_LANE_BODY { body(d1, i); });
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace addnorm::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "ops/cpu/group_norm_kernels.hpp"

#include <algorithm>

#include "hwy/cache_control.h"
#include "ops/cpu/convert.hpp"
#include "ops/cpu/kernels.hpp"
#include "ops/cpu/norm_numerics.hpp"
#include "ops/cpu/scratch.hpp"
#include "ops/cpu/threading.hpp"
#include "ops/cpu/tuning.hpp"

namespace addnorm::cpu {

namespace {

// kGroupNormBlockValues, 32 Ki float32 values (128 KiB) a block: a few blocks of
// buffers fit in one core's L2.
constexpr int64_t kGroupNormBlockValues = tuned("kGroupNormBlockValues", int64_t{1} << 15);
static_assert(kGroupNormBlockValues >= 1, "a block holds at least one row");
int64_t rows_per_block(int64_t dim) {
  return std::max<int64_t>(1, kGroupNormBlockValues / dim);
}

const void* row_at(const void* base, DType storage, int64_t element) {
  return static_cast<const char*>(base) + element * dtype_size(storage);
}
void* row_at(void* base, DType storage, int64_t element) {
  return static_cast<char*>(base) + element * dtype_size(storage);
}

// Runs body(first_row, row_count) over the blocks of [0, rows), blocks spread over threads.
template <class Body>
void for_each_block(int64_t rows, int64_t dim, const Body& body) {
  const int64_t per_block = rows_per_block(dim);
  const int64_t blocks = (rows + per_block - 1) / per_block;
  parallel_chunks(blocks, blocks, per_block * dim, [&](int64_t, int64_t begin, int64_t end) {
    for (int64_t block = begin; block < end; ++block) {
      const int64_t first = block * per_block;
      body(first, std::min(per_block, rows - first));
    }
  });
}

// The engine's LayerNorm of rows [first, first + count) of x into `x_hat` (float32, no affine),
// with their mean and rstd.
void normalise_rows(const void* x, DType x_storage, int64_t first, int64_t count, int64_t dim,
                    double eps, float* x_hat, float* mean, float* rstd) {
  NormForward args;
  args.x = row_at(x, x_storage, first * dim);
  args.storage = x_storage;
  args.y = x_hat;
  args.branch_storage = DType::float32;
  args.mean = mean;
  args.rstd = rstd;
  args.rows = count;
  args.dim = dim;
  args.eps = eps;
  args.norm = NormKind::layer_norm;
  norm_forward_range(args, 0, count);
}

HWY_EXPORT(scale_shift_row);
HWY_EXPORT(channel_sums_row);
HWY_EXPORT(dx_row);

}  // namespace

void group_norm_forward(const GroupNormForward& args) {
  const reference::GroupLayout& layout = args.layout;
  const int64_t rows = layout.rows();
  const int64_t dim = layout.dim();
  if (!args.gamma && !args.beta) {
    // Without parameters GroupNorm is LayerNorm over the rows: the whole engine, streaming
    // stores and all.
    norm_forward({.x = args.x,
                  .y = args.y,
                  .storage = args.x_storage,
                  .branch_storage = args.y_storage,
                  .mean = args.mean,
                  .rstd = args.rstd,
                  .rows = rows,
                  .dim = dim,
                  .eps = args.eps,
                  .norm = NormKind::layer_norm});
    return;
  }
  // Outputs larger than the cache are streamed (kernels.hpp's rule; 16-bit ones per CPU family):
  // the engine writes x_hat into the block's buffer in cache and the affine pass writes y once,
  // without reading it first. A smaller float32 y is its own buffer, rewritten in cache.
  const bool y_is_float32 = args.y_storage == DType::float32;
  const bool stream = streams_output(rows * dim * dtype_size(args.y_storage)) &&
                      (y_is_float32 || streams_narrow_outputs());
  const bool in_place = y_is_float32 && !stream;
  for_each_block(rows, dim, [&](int64_t first, int64_t count) {
    Scratch scratch;
    float* values =
        in_place ? static_cast<float*>(args.y) + first * dim : scratch.take<float>(count * dim);
    float* target = y_is_float32 ? static_cast<float*>(args.y) + first * dim : values;
    float* mean = args.mean ? args.mean + first : nullptr;
    float* rstd = args.rstd ? args.rstd + first : nullptr;
    normalise_rows(args.x, args.x_storage, first, count, dim, args.eps, values, mean, rstd);
    for (int64_t r = 0; r < count; ++r) {
      const int64_t channel0 = ((first + r) % layout.groups) * layout.channels_per_group();
      HWY_DYNAMIC_DISPATCH(scale_shift_row)
      (values + r * dim, target + r * dim, args.gamma ? args.gamma + channel0 : nullptr,
       args.beta ? args.beta + channel0 : nullptr, layout.channels_per_group(), layout.spatial,
       stream && y_is_float32);
    }
    if (!y_is_float32) {
      from_float32(values, row_at(args.y, args.y_storage, first * dim), args.y_storage, count * dim,
                   stream);
    } else if (stream) {
      hwy::FlushStream();
    }
  });
}

void group_norm_backward(const GroupNormBackward& args) {
  const reference::GroupLayout& layout = args.layout;
  const int64_t rows = layout.rows();
  const int64_t dim = layout.dim();
  const int64_t per_group = layout.channels_per_group();
  const int64_t spatial = layout.spatial;
  const bool sums = args.dgamma || args.dbeta;
  // One float64 sum per (sample, channel), each over that channel's positions only: which
  // thread wrote it does not change it, and the samples are added in order below. The same
  // sums, scaled by gamma, give each row's means of g and g * x_hat.
  Scratch scratch;
  double* dgamma_rows = scratch.zeroed<double>(rows * per_group);
  double* dbeta_rows = scratch.zeroed<double>(rows * per_group);
  const bool dx_is_float32 = args.x_storage == DType::float32;
  for_each_block(rows, dim, [&](int64_t first, int64_t count) {
    Scratch block;
    float* x_hat = block.take<float>(count * dim);
    float* rstd = block.take<float>(count);
    normalise_rows(args.x, args.x_storage, first, count, dim, args.eps, x_hat, nullptr, rstd);
    // dy and x as float32: in place when float32, else widened into a buffer.
    const auto widened = [&](const void* base, DType storage) {
      const void* stored = row_at(base, storage, first * dim);
      if (storage == DType::float32) return static_cast<const float*>(stored);
      float* wide = block.take<float>(count * dim);
      to_float32(stored, storage, wide, count * dim);
      return static_cast<const float*>(wide);
    };
    const float* dy = widened(args.dy, args.dy_storage);
    const float* x = widened(args.x, args.x_storage);
    // A float32 dx is written in place; a 16-bit one through a float32 buffer.
    float* dx =
        dx_is_float32 ? static_cast<float*>(args.dx) + first * dim : block.take<float>(count * dim);
    for (int64_t r = 0; r < count; ++r) {
      const int64_t row = first + r;
      const float* gamma = args.gamma ? args.gamma + (row % layout.groups) * per_group : nullptr;
      double* dy_x_hat = dgamma_rows + row * per_group;
      double* dy_sum = dbeta_rows + row * per_group;
      // Shifted by the row's first value, as the float32 forward's moments are (RowMoments).
      const double shift = x[r * dim];
      double row_sums[2];
      HWY_DYNAMIC_DISPATCH(channel_sums_row)
      (dy + r * dim, x + r * dim, shift, dy_x_hat, dy_sum, row_sums, per_group, spatial);
      const RowMoments moments = moments_from(row_sums[0], row_sums[1], shift, dim, true);
      const double x_hat_scale = xhat_scale(rstd_of(moments.variance, args.eps));
      const double offset = (moments.mean - shift) + moments.mean_lo;
      for (int64_t k = 0; k < per_group; ++k) {
        dy_x_hat[k] = x_hat_scale * (dy_x_hat[k] - offset * dy_sum[k]);  // sum dy * x_hat
      }
      double mean_g = 0, mean_g_x_hat = 0;
      for (int64_t k = 0; k < per_group; ++k) {
        const double scale = gamma ? double(gamma[k]) : 1.0;
        mean_g += scale * dy_sum[k];
        mean_g_x_hat += scale * dy_x_hat[k];
      }
      HWY_DYNAMIC_DISPATCH(dx_row)
      (dy + r * dim, x_hat + r * dim, gamma, dx + r * dim, per_group, spatial,
       static_cast<float>(mean_g / double(dim)), static_cast<float>(mean_g_x_hat / double(dim)),
       rstd[r]);
    }
    if (!dx_is_float32) {
      from_float32(dx, row_at(args.dx, args.x_storage, first * dim), args.x_storage, count * dim);
    }
  });
  if (!sums) return;
  for (int64_t c = 0; c < layout.channels; ++c) {
    const int64_t group = c / per_group;
    const int64_t k = c % per_group;
    double dgamma_sum = 0, dbeta_sum = 0;
    for (int64_t n = 0; n < layout.batch; ++n) {
      const int64_t row = n * layout.groups + group;
      dgamma_sum += dgamma_rows[row * per_group + k];
      dbeta_sum += dbeta_rows[row * per_group + k];
    }
    // + 0.0 turns a -0 into +0, as a sum started from 0 would.
    if (args.dgamma) args.dgamma[c] = static_cast<float>(dgamma_sum + 0.0);
    if (args.dbeta) args.dbeta[c] = static_cast<float>(dbeta_sum + 0.0);
  }
}

}  // namespace addnorm::cpu
#endif  // HWY_ONCE
