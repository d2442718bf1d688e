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
#include "ops/cpu/row_storage-inl.h"

HWY_BEFORE_NAMESPACE();
namespace addnorm::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// How far ahead the streaming passes prefetch, in floats.
constexpr int64_t kPrefetchFloats = 512;

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
// A run is resumable: step() adds the next two vectors' worth of elements and finish() the rest,
// so the forward can interleave one row's sums with the normalising pass of the row before it
// (its reads from memory then overlap that pass's stores, as in a copy). The elements go to the
// same accumulator lanes in the same order however the steps are interleaved: the sums, and so
// every output, are bit for bit those of an uninterrupted run.
// How far ahead a ShiftedSumsRun prefetches, in floats (4 KiB): interleaved with the forward's
// normalising pass (its one caller that steps) the run advances at that pass's pace, and 4 KiB
// measured 4-10% faster than 2 KiB there (AMD EPYC, Zen 5, 1 and 2 threads, D = 512-8192).
constexpr int64_t kRunPrefetchFloats = 1024;

template <class SR, bool kResidual>
class ShiftedSumsRun {
 public:
  // Elements one step adds.
  static int64_t step_elements() { return 2 * static_cast<int64_t>(hn::Lanes(DoubleTag())); }

  ShiftedSumsRun(const float* HWY_RESTRICT x, const typename SR::Elem* HWY_RESTRICT residual,
                 int64_t dim, double shift)
      : x_(x),
        residual_(residual),
        dim_(dim),
        shift_(shift),
        shift_v_(hn::Set(dd_, shift)),
        sum0_(hn::Zero(dd_)),
        sum1_(hn::Zero(dd_)),
        sq0_(hn::Zero(dd_)),
        sq1_(hn::Zero(dd_)) {}

  double shift() const { return shift_; }
  bool has_step() const { return i_ + step_elements() <= dim_; }

  HWY_INLINE void step() {
    accumulate(i_, sum0_, sum1_, sq0_, sq1_);
    i_ += step_elements();
  }

  // The remaining steps, then the elements short of one. In locals: a caller's run may live
  // in memory, and its accumulators would otherwise go through memory at every step.
  ShiftedSums finish() {
    const int64_t n = static_cast<int64_t>(hn::Lanes(dd_));
    auto sum0 = sum0_, sum1 = sum1_, sq0 = sq0_, sq1 = sq1_;
    int64_t i = i_;
    for (; i + 2 * n <= dim_; i += 2 * n) accumulate(i, sum0, sum1, sq0, sq1);
    for (; i + n <= dim_; i += n) {
      const auto d0 = centred(i);
      sum0 = hn::Add(sum0, d0);
      sq0 = hn::MulAdd(d0, d0, sq0);
    }
    ShiftedSums sums{hn::GetLane(hn::SumOfLanes(dd_, hn::Add(sum0, sum1))),
                     hn::GetLane(hn::SumOfLanes(dd_, hn::Add(sq0, sq1)))};
    for (; i < dim_; ++i) {
      const float v = kResidual ? x_[i] + load_one<SR>(residual_, i) : x_[i];
      const double d = static_cast<double>(v) - shift_;
      sums.sum += d;
      sums.squares += d * d;
    }
    i_ = dim_;
    return sums;
  }

 private:
  using V = hn::Vec<DoubleTag>;
  // Adds elements i... (two vectors) to the accumulators.
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
  V shift_v_, sum0_, sum1_, sq0_, sq1_;
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

}  // namespace HWY_NAMESPACE
}  // namespace addnorm::cpu
HWY_AFTER_NAMESPACE();

#endif  // ADDNORM_OPS_CPU_SHIFTED_SUMS_INL_H_
