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
// as SR, row_storage-inl.h): the forward with a fused residual add. h itself is written by its second pass, which reads x and residual
// again from cache: storing it here would either cost a second write of the row or, with
// streaming stores, evict it before that pass.
template <class SR, bool kResidual>
ShiftedSums shifted_sums_of(const float* HWY_RESTRICT x,
                            const typename SR::Elem* HWY_RESTRICT residual, int64_t dim,
                            double shift) {
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> df;  // loaded half a register at a time, promoted
  const int64_t n = static_cast<int64_t>(hn::Lanes(dd));
  const auto shift_v = hn::Set(dd, shift);
  auto centred = [&](int64_t i) HWY_ATTR {
    auto v = hn::LoadU(df, x + i);
    if constexpr (kResidual) v = hn::Add(v, load<SR>(df, residual + i));
    return hn::Sub(hn::PromoteTo(dd, v), shift_v);
  };
  auto sum0 = hn::Zero(dd), sum1 = hn::Zero(dd), sq0 = hn::Zero(dd), sq1 = hn::Zero(dd);
  int64_t i = 0;
  for (; i + 2 * n <= dim; i += 2 * n) {
    // 2 KiB ahead (into the next row near the end: rows are contiguous). The hardware
    // prefetcher alone leaves this compute-heavy float64 pass short of the memory bandwidth.
    hwy::Prefetch(x + i + kPrefetchFloats);
    if constexpr (kResidual) hwy::Prefetch(residual + i + kPrefetchFloats);
    const auto d0 = centred(i);
    const auto d1 = centred(i + n);
    sum0 = hn::Add(sum0, d0);
    sum1 = hn::Add(sum1, d1);
    sq0 = hn::MulAdd(d0, d0, sq0);
    sq1 = hn::MulAdd(d1, d1, sq1);
  }
  for (; i + n <= dim; i += n) {
    const auto d0 = centred(i);
    sum0 = hn::Add(sum0, d0);
    sq0 = hn::MulAdd(d0, d0, sq0);
  }
  ShiftedSums sums{hn::GetLane(hn::SumOfLanes(dd, hn::Add(sum0, sum1))),
                   hn::GetLane(hn::SumOfLanes(dd, hn::Add(sq0, sq1)))};
  for (; i < dim; ++i) {
    const float v = kResidual ? x[i] + load_one<SR>(residual, i) : x[i];
    const double d = static_cast<double>(v) - shift;
    sums.sum += d;
    sums.squares += d * d;
  }
  return sums;
}

inline ShiftedSums shifted_sums_row(const float* HWY_RESTRICT x, int64_t dim, double shift) {
  return shifted_sums_of<Float32Rows, false>(x, nullptr, dim, shift);
}

}  // namespace HWY_NAMESPACE
}  // namespace addnorm::cpu
HWY_AFTER_NAMESPACE();

#endif  // ADDNORM_OPS_CPU_SHIFTED_SUMS_INL_H_
