// Scalar operations computed exactly as the target's vector operations compute them, for the
// scalar ends of rows in the fast kernels: an element's bits then do not depend on whether it
// fell in a vector or a tail (which would tie results to alignment, streaming stores and the
// split of rows over threads). Highway's "-inl.h" convention: included once per target.
#if defined(ADDNORM_OPS_CPU_LANE_OPS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ADDNORM_OPS_CPU_LANE_OPS_INL_H_
#undef ADDNORM_OPS_CPU_LANE_OPS_INL_H_
#else
#define ADDNORM_OPS_CPU_LANE_OPS_INL_H_
#endif

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

}  // namespace HWY_NAMESPACE
}  // namespace addnorm::cpu
HWY_AFTER_NAMESPACE();

#endif  // ADDNORM_OPS_CPU_LANE_OPS_INL_H_
