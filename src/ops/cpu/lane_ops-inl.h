// Operations shared by the norm kernels (the SIMD halves of norm_numerics.hpp), and scalar ones
// computed exactly as the target's vector operations compute them, for the scalar ends of rows: an
// element's bits then do not depend on whether it fell in a vector or a tail (which would tie
// results to alignment, streaming stores and the split of rows over threads). Highway's "-inl.h"
// convention: included once per target.
#if defined(ADDNORM_OPS_CPU_LANE_OPS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ADDNORM_OPS_CPU_LANE_OPS_INL_H_
#undef ADDNORM_OPS_CPU_LANE_OPS_INL_H_
#else
#define ADDNORM_OPS_CPU_LANE_OPS_INL_H_
#endif

#include <algorithm>
#include <cstdint>
#include <limits>

#include "hwy/highway.h"
#include "ops/cpu/norm_numerics.hpp"

HWY_BEFORE_NAMESPACE();
namespace addnorm::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// The norm kernels' tags: float64 lanes; float32 lanes as many as those (loaded half a register
// at a time and promoted); a full register of float32 lanes.
using DoubleTag = hn::ScalableTag<double>;
using HalfFloatTag = hn::Rebind<float, DoubleTag>;
using FloatTag = hn::ScalableTag<float>;

// The one loop of the channel kernels (BatchNorm's and GroupNorm's): the elements [begin, end)
// in steps of d's lanes, vector(i) wherever a whole vector fits, then between() once, then
// scalar(i) for each element short of a vector. between() is where a sum over the lanes closes
// before the scalar elements add to it, so every addition keeps the order it had as two loops.
// The lambdas hold the state; they take ADDNORM_LANE_BODY (HWY_ATTR, as every lambda in a
// kernel does, and always_inline).
#ifndef ADDNORM_LANE_BODY
// A walk_lanes body's attributes: the target's, and inlined into the loop, as the bodies of two
// written-out loops are (without it, BatchNorm's backward over bfloat16 channels measured 3%
// slower in one process, AMD EPYC Zen 5).
#define ADDNORM_LANE_BODY HWY_ATTR __attribute__((always_inline))
#endif
template <class D, class Vector, class Between, class Scalar>
HWY_INLINE void walk_lanes(D d, int64_t begin, int64_t end, const Vector& vector,
                           const Between& between, const Scalar& scalar) {
  const auto lanes = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = begin;
  for (; i + lanes <= end; i += lanes) vector(i);
  between();
  for (; i < end; ++i) scalar(i);
}
template <class D, class Vector, class Scalar>
HWY_INLINE void walk_lanes(D d, int64_t begin, int64_t end, const Vector& vector,
                           const Scalar& scalar) {
  walk_lanes(
      d, begin, end, vector, []() ADDNORM_LANE_BODY {}, scalar);
}

// a * b + c as this target's vector MulAdd computes it: fused where the target has FMA
// instructions, a product and a sum (two roundings) on SSE4 and older.
inline float mul_add(float a, float b, float c) {
  const hn::CappedTag<float, 1> d;
  return hn::GetLane(hn::MulAdd(hn::Set(d, a), hn::Set(d, b), hn::Set(d, c)));
}

#if HWY_TARGET != HWY_SCALAR
// A register of floats as float64 lanes, its two halves promoted (exactly) and added: lane k
// holds floats k and k + half. float64_halves_max takes their maximum instead.
inline hn::Vec<DoubleTag> float64_halves(hn::Vec<FloatTag> v) {
  const hn::Half<FloatTag> dfh;
  const DoubleTag dd;
  return hn::Add(hn::PromoteTo(dd, hn::LowerHalf(dfh, v)),
                 hn::PromoteTo(dd, hn::UpperHalf(dfh, v)));
}
inline hn::Vec<DoubleTag> float64_halves_max(hn::Vec<FloatTag> v) {
  const hn::Half<FloatTag> dfh;
  const DoubleTag dd;
  return hn::Max(hn::PromoteTo(dd, hn::LowerHalf(dfh, v)),
                 hn::PromoteTo(dd, hn::UpperHalf(dfh, v)));
}

// The lanes of a register of floats summed in float64 (each promoted exactly): how the float32
// block sums flush a block into float64.
inline double float64_sum_of_lanes(hn::Vec<FloatTag> v) {
  const DoubleTag dd;
  return hn::GetLane(hn::SumOfLanes(dd, float64_halves(v)));
}
#endif

// x_hat = (v - centre) * rstd in float32 lanes from the split constants (norm_numerics.hpp's
// HiLo): centred = (v - hi) - lo, then fma(centred, rstd_hi, centred * rstd_lo).
template <class V>
V x_hat_lanes(V v, V centre_hi, V centre_lo, V rstd_hi, V rstd_lo) {
  const V centred = hn::Sub(hn::Sub(v, centre_hi), centre_lo);
  return hn::MulAdd(centred, rstd_hi, hn::Mul(centred, rstd_lo));
}

// The same for one element, rounded as the vector operations round.
inline float x_hat_one(float v, HiLo centre, HiLo rstd) {
  const float centred = (v - centre.hi) - centre.lo;
  return mul_add(centred, rstd.hi, centred * rstd.lo);
}

// Where a run's vector stores begin: with streaming stores (which need aligned addresses) the
// elements before `out`'s next vector boundary (of d) are written by the scalar code; a run
// not even aligned to its element size is written by the scalar code throughout.
template <class D, class T>
int64_t aligned_start(D d, const T* out, int64_t count, bool stream) {
  if (!stream) return 0;
  const auto bytes = static_cast<uintptr_t>(hn::Lanes(d) * sizeof(hn::TFromD<D>));
  const auto misalignment = reinterpret_cast<uintptr_t>(out) % bytes;
  if (misalignment == 0 || misalignment % sizeof(T) != 0) return misalignment ? count : 0;
  return std::min<int64_t>(count, static_cast<int64_t>((bytes - misalignment) / sizeof(T)));
}

// The affine step for the lanes of x_hat at elements i... of gamma and beta.
template <Affine kAffine, class D>
hn::Vec<D> affine(D d, hn::Vec<D> x_hat, const float* gamma, const float* beta, int64_t i) {
  if constexpr (kAffine == Affine::none) return x_hat;
  if constexpr (kAffine == Affine::gamma) return hn::Mul(x_hat, hn::LoadU(d, gamma + i));
  if constexpr (kAffine == Affine::gamma_beta) {
    return hn::MulAdd(x_hat, hn::LoadU(d, gamma + i), hn::LoadU(d, beta + i));
  }
  if constexpr (kAffine == Affine::beta) return hn::Add(x_hat, hn::LoadU(d, beta + i));
  if constexpr (kAffine == Affine::one_plus_gamma) {
    return hn::MulAdd(x_hat, hn::LoadU(d, gamma + i), x_hat);
  }
}

// Row totals of a group of short rows, one row per lane: given as many vectors as float64 lanes
// (v[k]: row k's partial sums), the vector whose lane k is the sum of v[k]'s lanes. Pairs of
// vectors are folded into each other (a transpose and add, log2(lanes) levels), so a group of
// rows costs one reduction's shuffles instead of one per row, and their quotients and square
// roots then take one vector instruction each. Each lane sees a fixed tree of additions,
// whatever the lane's row. row_fold is the same transpose with any associative `combine`
// (row_maxima: the backward's max |g| a row).
#if HWY_TARGET != HWY_SCALAR
template <class Combine>
hn::Vec<DoubleTag> row_fold(const hn::Vec<DoubleTag>* v, const Combine& combine) {
  const DoubleTag dd;
  constexpr size_t kLanes = hn::MaxLanes(dd);
  static_assert(kLanes == 2 || kLanes == 4 || kLanes == 8, "x86 float64 lanes: 2, 4 or 8");
  // Level 1, within each 128-bit block: [v0's pair total, v1's pair total] for each pair of rows.
  hn::Vec<DoubleTag> pairs[kLanes / 2];
  for (size_t k = 0; k < kLanes / 2; ++k) {
    pairs[k] = combine(hn::InterleaveLower(dd, v[2 * k], v[2 * k + 1]),
                       hn::InterleaveUpper(dd, v[2 * k], v[2 * k + 1]));
  }
  if constexpr (kLanes == 2) {
    return pairs[0];
  } else if constexpr (kLanes == 4) {
    // Level 2: the two blocks of rows (0, 1) beside those of rows (2, 3).
    return combine(hn::ConcatLowerLower(dd, pairs[1], pairs[0]),
                   hn::ConcatUpperUpper(dd, pairs[1], pairs[0]));
  } else {
    // Level 2: adjacent blocks, rows (0, 1) in even blocks and (2, 3) in odd ones; level 3:
    // the two 256-bit halves.
    auto quads = [&](hn::Vec<DoubleTag> a, hn::Vec<DoubleTag> b) HWY_ATTR {
      return combine(hn::OddEvenBlocks(b, a),
                     hn::OddEvenBlocks(hn::SwapAdjacentBlocks(b), hn::SwapAdjacentBlocks(a)));
    };
    const auto low = quads(pairs[0], pairs[1]);
    const auto high = quads(pairs[2], pairs[3]);
    return combine(hn::ConcatLowerLower(dd, high, low), hn::ConcatUpperUpper(dd, high, low));
  }
}
inline hn::Vec<DoubleTag> row_totals(const hn::Vec<DoubleTag>* v) {
  return row_fold(
      v, [](hn::Vec<DoubleTag> a, hn::Vec<DoubleTag> b) HWY_ATTR { return hn::Add(a, b); });
}
inline hn::Vec<DoubleTag> row_maxima(const hn::Vec<DoubleTag>* v) {
  return row_fold(
      v, [](hn::Vec<DoubleTag> a, hn::Vec<DoubleTag> b) HWY_ATTR { return hn::Max(a, b); });
}

// The row that lane k of a group of count rows stands for: lanes past count repeat the last row,
// so a row's results never depend on its group's size, nor on how rows are split over threads.
inline int64_t group_lane_row(size_t k, int64_t count) {
  return std::min<int64_t>(static_cast<int64_t>(k), count - 1);
}

// Fills lane k of each array from lane k - 1 when k is a spare lane (k >= count: it repeats the
// group's last row, group_lane_row), so a group of fewer rows sums each of its rows once: the
// same bits as summing the last row again, without the work (one row, decoding, then costs one
// row's sums instead of a whole group's). Returns whether lane k was spare.
template <class... Lanes>
HWY_INLINE bool fill_spare_lane(size_t k, int64_t count, Lanes*... lanes) {
  if (static_cast<int64_t>(k) < count) return false;
  ((lanes[k] = lanes[k - 1]), ...);
  return true;
}

// Whether a row may take a group path of short rows (one row per float64 lane: the forward's
// short_rows, the backward's short_backward_stats): a whole number of float32 registers, and at
// most max_dim long (each path's limits are measured, per stream type).
inline bool is_short_row(int64_t dim, int64_t max_dim) {
  return dim <= max_dim && dim % static_cast<int64_t>(hn::Lanes(FloatTag())) == 0;
}

// The longest row that one block of float32 sums holds (kFloat32BlockAdditions pairs of
// registers): the short 16-bit paths sum a row as one block, so their limits must not pass it.
// At 16 additions it is 128 with SSE4's 4 lanes.
constexpr int64_t kOneBlockMaxDim =
    2 * kFloat32BlockAdditions * static_cast<int64_t>(hn::MaxLanes(FloatTag()));

// moments_from and 1 / sqrt(variance + eps) (norm_numerics.hpp) for a group of rows, one per
// lane: the same operations, each rounded as the scalar ones (the mean's low part too).
struct MomentLanes {
  hn::Vec<DoubleTag> mean;
  hn::Vec<DoubleTag> variance;
  hn::Vec<DoubleTag> mean_lo;
};
// two_sum_low (norm_numerics.hpp) a lane each.
inline hn::Vec<DoubleTag> two_sum_low_lanes(hn::Vec<DoubleTag> a, hn::Vec<DoubleTag> b,
                                            hn::Vec<DoubleTag> s) {
  const auto b_part = hn::Sub(s, a);
  return hn::Add(hn::Sub(a, hn::Sub(s, b_part)), hn::Sub(b, b_part));
}
inline MomentLanes moments_lanes(hn::Vec<DoubleTag> sum, hn::Vec<DoubleTag> squares,
                                 hn::Vec<DoubleTag> shift, int64_t dim, bool centre) {
  const DoubleTag dd;
  const auto count = hn::Set(dd, static_cast<double>(dim));
  const auto zero = hn::Zero(dd);
  const auto mean_square = hn::Div(squares, count);
  if (!centre) return {zero, mean_square, zero};
  const auto mean_shifted = hn::Div(sum, count);
  const auto variance = hn::Sub(mean_square, hn::Mul(mean_shifted, mean_shifted));
  const auto mean = hn::Add(shift, mean_shifted);
  return {mean, hn::IfThenElse(hn::Lt(variance, zero), zero, variance),  // a NaN stays
          two_sum_low_lanes(shift, mean_shifted, mean)};
}
// rstd_of (norm_numerics.hpp) a lane each: the root's +inf at a sum of 0 stays only for a
// zero-spread row (Sqrt gives NaN below 0 by itself).
inline hn::Vec<DoubleTag> rstd_lanes(hn::Vec<DoubleTag> variance, double eps) {
  const DoubleTag dd;
  const auto zero = hn::Zero(dd);
  const auto sum = hn::Add(variance, hn::Set(dd, eps));
  const auto rstd = hn::Div(hn::Set(dd, 1.0), hn::Sqrt(sum));
  const auto rootless = hn::And(hn::Eq(sum, zero), hn::Ne(variance, zero));
  return hn::IfThenElse(rootless, hn::Set(dd, std::numeric_limits<double>::quiet_NaN()), rstd);
}

// The float32 block sums' checks (norm_numerics.hpp) for a group of rows, one per lane, from
// their moments and, with centre, their shifted sums: shift_estimate_close (the offset from
// mean(d) = sum / dim against the moments' variance, which is the shifted variance clamped at 0:
// a negative one fails block_sums_hold either way) and block_sums_hold. NaN fails.
inline hn::Mask<DoubleTag> block_sums_hold_lanes(const MomentLanes& m, hn::Vec<DoubleTag> sum,
                                                 int64_t dim, bool centre) {
  const DoubleTag dd;
  auto holds = hn::And(hn::Ge(m.variance, hn::Set(dd, kBlockSumsMinVariance)),
                       hn::Le(m.variance, hn::Set(dd, kBlockSumsMaxVariance)));
  if (!centre) return holds;
  const auto offset = hn::Div(sum, hn::Set(dd, static_cast<double>(dim)));
  return hn::And(holds, hn::Le(hn::Mul(offset, offset),
                               hn::Mul(hn::Set(dd, kCloseEstimateSpread), m.variance)));
}

// forward_fits_float32 (norm_numerics.hpp) for a group of rows, one per lane. NaN fails.
inline hn::Mask<DoubleTag> forward_fits_float32_lanes(hn::Vec<DoubleTag> centre,
                                                      hn::Vec<DoubleTag> variance,
                                                      hn::Vec<DoubleTag> rstd) {
  const DoubleTag dd;
  const auto centre_holds = hn::Lt(hn::Abs(centre), hn::Set(dd, kFloat32LanesMaxCentre));
  const auto lanes_hold = hn::And(hn::And(hn::Lt(rstd, hn::Set(dd, kFloat32LanesMaxRstd)),
                                          hn::Ge(rstd, hn::Set(dd, kFloat32LanesMinRstd))),
                                  hn::Ge(variance, hn::Set(dd, kFloat32LanesMinVariance)));
  return hn::And(centre_holds, hn::Or(hn::IsInf(rstd), lanes_hold));
}

// Calls redo(k) for each of a group's first `count` lanes that `holds` does not hold: the rows
// that a group path hands back to the row-at-a-time path.
template <class Redo>
void for_each_failed_lane(hn::Mask<DoubleTag> holds, int64_t count, const Redo& redo) {
  const DoubleTag dd;
  if (HWY_LIKELY(hn::AllTrue(dd, holds))) return;
  HWY_ALIGN uint8_t held[8] = {};
  hn::StoreMaskBits(dd, holds, held);
  for (int64_t k = 0; k < count; ++k) {
    if (!((held[k / 8] >> (k % 8)) & 1)) redo(k);
  }
}
#endif  // HWY_TARGET != HWY_SCALAR

// The same for one element, with the vector operations.
template <Affine kAffine>
float affine_one(float x_hat, const float* gamma, const float* beta, int64_t i) {
  const hn::CappedTag<float, 1> d;
  return hn::GetLane(affine<kAffine>(d, hn::Set(d, x_hat), gamma, beta, i));
}

}  // namespace HWY_NAMESPACE
}  // namespace addnorm::cpu
HWY_AFTER_NAMESPACE();

#endif  // ADDNORM_OPS_CPU_LANE_OPS_INL_H_
