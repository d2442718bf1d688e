// Operations shared by the norm kernels, and scalar ones computed exactly as the target's
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

#include <cstdint>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace addnorm::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// a * b + c as this target's vector MulAdd computes it: fused where the target has FMA
// instructions, a product and a sum (two roundings) on SSE4 and older.
inline float mul_add(float a, float b, float c) {
  const hn::CappedTag<float, 1> d;
  return hn::GetLane(hn::MulAdd(hn::Set(d, a), hn::Set(d, b), hn::Set(d, c)));
}

// The affine step of a norm, its form fixed per call so that each form gets its own
// branch-free loop: y = x_hat * scale + shift, the scale gamma, 1 + gamma (x_hat * gamma +
// x_hat in one multiply-add) or 1, the shift beta or 0.
enum class Affine { none, gamma, gamma_beta, beta, one_plus_gamma };

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
