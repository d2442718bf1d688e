// The shifted sums of a run of floats, per SIMD target, shared by the norm and BatchNorm
// kernels. Highway's "-inl.h" convention: included once per target from a file that uses
// foreach_target.h, so the guard toggles with HWY_TARGET_TOGGLE.
#if defined(ADDNORM_OPS_CPU_SHIFTED_SUMS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ADDNORM_OPS_CPU_SHIFTED_SUMS_INL_H_
#undef ADDNORM_OPS_CPU_SHIFTED_SUMS_INL_H_
#else
#define ADDNORM_OPS_CPU_SHIFTED_SUMS_INL_H_
#endif

#include <cstdint>

#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "ops/cpu/lane_ops-inl.h"
#include "ops/cpu/norm_numerics.hpp"
#include "ops/cpu/row_storage-inl.h"
#include "ops/cpu/tuning.hpp"

HWY_BEFORE_NAMESPACE();
namespace addnorm::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// How far ahead the streaming passes prefetch, in floats.
constexpr int64_t kPrefetchFloats = tuned("kPrefetchFloats", 512);

// Shifted sums of one row: with d = x - shift, sum(d) and sum(d^2), in float64. Choosing the
// shift from the row itself (its first element) keeps the one-pass variance
// sum(d^2)/D - (sum(d)/D)^2 exact to float64 rounding times D: no element lies further than
// sqrt(D) standard deviations from the mean, so the cancellation is bounded, unlike the
// textbook E[x^2] - E[x]^2 whose error grows with mean^2 / variance.
struct ShiftedSums {
  double sum = 0;
  double squares = 0;
};

// With kResidual, of h = x + residual (one float32 rounding, as the unfused add; residual stored
// as SR, row_storage-inl.h): the forward with a fused residual add. h itself is written by its
// second pass, which reads x and residual again from cache: storing it here would either cost a
// second write of the row or, with streaming stores, evict it before that pass.
//
// Vector v of the row (elements v * n ... v * n + n - 1, n float64 lanes) adds to accumulator
// v % 4: four chains of additions, so that a row in cache is not held to one addition per
// vector per latency of the adder (the sums of a decode-sized row are latency-bound otherwise).
//
// A run is resumable: step() adds the next two vectors and finish() the rest, so the forward
// can interleave one row's sums with the normalising pass of the row before it (its reads from
// memory then overlap that pass's stores, as in a copy). Each element goes to the same
// accumulator lane in the same order however the steps are interleaved: the sums, and so every
// output, are bit for bit those of an uninterrupted run.
//
// A run prefetches kRunPrefetchFloats ahead (4 KiB): interleaved with the forward's
// normalising pass (its one caller that steps) it advances at that pass's pace.
constexpr int64_t kRunPrefetchFloats = tuned("kRunPrefetchFloats", 1024);

template <class SR, bool kResidual>
class ShiftedSumsRun {
 public:
  // Elements one step adds: two vectors.
  static int64_t step_elements() { return 2 * static_cast<int64_t>(hn::Lanes(DoubleTag())); }

  ShiftedSumsRun(const float* HWY_RESTRICT x, const typename SR::Elem* HWY_RESTRICT residual,
                 int64_t dim, double shift)
      : x_(x), residual_(residual), dim_(dim), shift_(shift), shift_v_(hn::Set(dd_, shift)) {
    for (int k = 0; k < 4; ++k) sum_[k] = squares_[k] = hn::Zero(dd_);
  }

  double shift() const { return shift_; }
  bool has_step() const { return i_ + step_elements() <= dim_; }

  // Vectors v and v + 1 (v even) to accumulators 0 and 1, or 2 and 3.
  HWY_INLINE void step() {
    if (i_ % (2 * step_elements()) == 0) {
      accumulate(i_, sum_[0], sum_[1], squares_[0], squares_[1]);
    } else {
      accumulate(i_, sum_[2], sum_[3], squares_[2], squares_[3]);
    }
    i_ += step_elements();
  }

  // The remaining vectors, then the elements short of one. In locals: a caller's run may live
  // in memory, and its accumulators would otherwise go through memory at every step.
  ShiftedSums finish() {
    const int64_t n = static_cast<int64_t>(hn::Lanes(dd_));
    V s0 = sum_[0], s1 = sum_[1], s2 = sum_[2], s3 = sum_[3];
    V q0 = squares_[0], q1 = squares_[1], q2 = squares_[2], q3 = squares_[3];
    int64_t i = i_;
    if (i % (4 * n) != 0 && i + 2 * n <= dim_) {  // the second half of a group of four
      accumulate(i, s2, s3, q2, q3);
      i += 2 * n;
    }
    for (; i + 4 * n <= dim_; i += 4 * n) {
      accumulate(i, s0, s1, q0, q1);
      accumulate(i + 2 * n, s2, s3, q2, q3);
    }
    // Up to three vectors left, starting a group of four: to accumulators 0, 1, 2.
    auto tail_vector = [&](V& sum, V& squares) HWY_ATTR {
      if (i + n > dim_) return false;
      const V d = centred(i);
      sum = hn::Add(sum, d);
      squares = hn::MulAdd(d, d, squares);
      i += n;
      return true;
    };
    if (tail_vector(s0, q0) && tail_vector(s1, q1)) tail_vector(s2, q2);
    ShiftedSums total{hn::GetLane(hn::SumOfLanes(dd_, hn::Add(hn::Add(s0, s1), hn::Add(s2, s3)))),
                      hn::GetLane(hn::SumOfLanes(dd_, hn::Add(hn::Add(q0, q1), hn::Add(q2, q3))))};
    for (; i < dim_; ++i) {
      const float v = kResidual ? x_[i] + load_one<SR>(residual_, i) : x_[i];
      const double d = static_cast<double>(v) - shift_;
      total.sum += d;
      total.squares += d * d;
    }
    i_ = dim_;
    return total;
  }

 private:
  using V = hn::Vec<DoubleTag>;
  // Adds vectors at elements i and i + n to the accumulators.
  HWY_INLINE void accumulate(int64_t i, V& sum0, V& sum1, V& sq0, V& sq1) const {
    const int64_t n = static_cast<int64_t>(hn::Lanes(dd_));
    // Ahead into the next row near the end (rows are contiguous). The hardware prefetcher
    // alone leaves this compute-heavy float64 pass short of the memory bandwidth.
    hwy::Prefetch(x_ + i + kRunPrefetchFloats);
    if constexpr (kResidual) hwy::Prefetch(residual_ + i + kRunPrefetchFloats);
    const V d0 = centred(i);
    const V d1 = centred(i + n);
    sum0 = hn::Add(sum0, d0);
    sum1 = hn::Add(sum1, d1);
    sq0 = hn::MulAdd(d0, d0, sq0);
    sq1 = hn::MulAdd(d1, d1, sq1);
  }

  HWY_INLINE V centred(int64_t i) const {
    auto v = hn::LoadU(df_, x_ + i);
    if constexpr (kResidual) v = hn::Add(v, load<SR>(df_, residual_ + i));
    return hn::Sub(hn::PromoteTo(dd_, v), shift_v_);
  }

  DoubleTag dd_;
  HalfFloatTag df_;  // half a register of floats, promoted
  const float* HWY_RESTRICT x_;
  const typename SR::Elem* HWY_RESTRICT residual_;
  int64_t dim_;
  double shift_;
  int64_t i_ = 0;
  V shift_v_;
  V sum_[4], squares_[4];
};

template <class SR, bool kResidual>
ShiftedSums shifted_sums_of(const float* HWY_RESTRICT x,
                            const typename SR::Elem* HWY_RESTRICT residual, int64_t dim,
                            double shift) {
  return ShiftedSumsRun<SR, kResidual>(x, residual, dim, shift).finish();
}

inline ShiftedSums shifted_sums_row(const float* HWY_RESTRICT x, int64_t dim, double shift) {
  return shifted_sums_of<Float32Rows, false>(x, nullptr, dim, shift);
}

#if HWY_TARGET != HWY_SCALAR
// ---- float32 block sums: the 16-bit streams' statistics, forward and backward -----------------
// A row's sums are taken in float32 blocks (kFloat32BlockAdditions) shifted by a first estimate
// of its mean, and taken again centred on the mean itself where that estimate was poor
// (recentre_at, norm_numerics.hpp): the one rule of the 16-bit forward's statistics and the
// 16-bit backward's pass 1.

// The first estimate: the mean of the row's first register of values, rounded to float.
inline float register_mean(hn::Vec<FloatTag> first) {
  const FloatTag df;
  return hn::GetLane(hn::SumOfLanes(df, first)) / static_cast<float>(hn::Lanes(df));
}

#endif  // HWY_TARGET != HWY_SCALAR

}  // namespace HWY_NAMESPACE
}  // namespace addnorm::cpu
HWY_AFTER_NAMESPACE();

#endif  // ADDNORM_OPS_CPU_SHIFTED_SUMS_INL_H_
