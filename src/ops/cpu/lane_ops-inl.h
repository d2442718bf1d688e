// Operations shared by the norm kernels (the SIMD halves of norm_numerics.hpp), and scalar ones computed exactly as the target's
// vector operations compute them, for the scalar ends of rows: an element's bits then do not
// depend on whether it fell in a vector or a tail (which would tie results to alignment,
// streaming stores and the split of rows over threads). Highway's "-inl.h" convention:
// included once per target.
#if defined(ADDNORM_OPS_CPU_LANE_OPS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ADDNORM_OPS_CPU_LANE_OPS_INL_H_
#undef ADDNORM_OPS_CPU_LANE_OPS_INL_H_
#else
#define ADDNORM_OPS_CPU_LANE_OPS_INL_H_
#endif

#include <algorithm>
#include <cstdint>

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

// a * b + c as this target's vector MulAdd computes it: fused where the target has FMA
// instructions, a product and a sum (two roundings) on SSE4 and older.
inline float mul_add(float a, float b, float c) {
  const hn::CappedTag<float, 1> d;
  return hn::GetLane(hn::MulAdd(hn::Set(d, a), hn::Set(d, b), hn::Set(d, c)));
}

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
