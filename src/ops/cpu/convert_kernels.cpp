// Widening and narrowing rows between float32 and the storage types, per SIMD target.
// bfloat16 -> float32 is a shift; float32 -> bfloat16 rounds to nearest even with an integer
// bias (Highway's own DemoteTo truncates). float16 uses the F16C instructions (which round to
// nearest even) on AVX2 and better, and the scalar conversion elsewhere.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/cpu/convert_kernels.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include "addnorm/dtype.hpp"
#include "hwy/highway.h"
#include "ops/cpu/convert.hpp"

HWY_BEFORE_NAMESPACE();
namespace addnorm::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using FloatTag = hn::ScalableTag<float>;
using U32Tag = hn::RebindToUnsigned<FloatTag>;
using U16Tag = hn::Rebind<uint16_t, FloatTag>;

void widen_bfloat16(const uint16_t* HWY_RESTRICT source, float* HWY_RESTRICT target, int64_t count) {
  const FloatTag df;
  const U32Tag du32;
  const U16Tag du16;
  const int64_t n = static_cast<int64_t>(hn::Lanes(df));
  int64_t i = 0;
  for (; i + n <= count; i += n) {
    const auto wide = hn::PromoteTo(du32, hn::LoadU(du16, source + i));
    hn::StoreU(hn::BitCast(df, hn::ShiftLeft<16>(wide)), df, target + i);
  }
  for (; i < count; ++i) target[i] = to_float(bfloat16{source[i]});
}

void narrow_bfloat16(const float* HWY_RESTRICT source, uint16_t* HWY_RESTRICT target, int64_t count) {
  const FloatTag df;
  const U32Tag du32;
  const U16Tag du16;
  const hn::RebindToSigned<U32Tag> di32;
  const int64_t n = static_cast<int64_t>(hn::Lanes(df));
  const auto bias = hn::Set(du32, 0x7FFFu);
  const auto one = hn::Set(du32, 1u);
  const auto quiet = hn::Set(du32, 0x40u);
  int64_t i = 0;
  for (; i + n <= count; i += n) {
    const auto v = hn::LoadU(df, source + i);
    const auto bits = hn::BitCast(du32, v);
    const auto rounded = hn::ShiftRight<16>(
        hn::Add(hn::Add(bits, bias), hn::And(hn::ShiftRight<16>(bits), one)));
    const auto nan = hn::Or(hn::ShiftRight<16>(bits), quiet);
    const auto result = hn::IfThenElse(hn::RebindMask(du32, hn::IsNaN(v)), nan, rounded);
    hn::StoreU(hn::DemoteTo(du16, hn::BitCast(di32, result)), du16, target + i);
  }
  for (; i < count; ++i) target[i] = to_bfloat16(source[i]).bits;
}

void widen_float16(const uint16_t* HWY_RESTRICT source, float* HWY_RESTRICT target, int64_t count) {
  int64_t i = 0;
#if HWY_TARGET <= HWY_AVX2
  const FloatTag df;
  const hn::Rebind<hwy::float16_t, FloatTag> df16;
  const int64_t n = static_cast<int64_t>(hn::Lanes(df));
  for (; i + n <= count; i += n) {
    const auto half = hn::LoadU(df16, reinterpret_cast<const hwy::float16_t*>(source + i));
    hn::StoreU(hn::PromoteTo(df, half), df, target + i);
  }
#endif
  for (; i < count; ++i) target[i] = to_float(float16{source[i]});
}

void narrow_float16(const float* HWY_RESTRICT source, uint16_t* HWY_RESTRICT target, int64_t count) {
  int64_t i = 0;
#if HWY_TARGET <= HWY_AVX2
  const FloatTag df;
  const hn::Rebind<hwy::float16_t, FloatTag> df16;
  const int64_t n = static_cast<int64_t>(hn::Lanes(df));
  for (; i + n <= count; i += n) {
    hn::StoreU(hn::DemoteTo(df16, hn::LoadU(df, source + i)), df16,
               reinterpret_cast<hwy::float16_t*>(target + i));
  }
#endif
  for (; i < count; ++i) target[i] = to_float16(source[i]).bits;
}

}  // namespace HWY_NAMESPACE
}  // namespace addnorm::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <cstring>

namespace addnorm::cpu {

HWY_EXPORT(widen_bfloat16);
HWY_EXPORT(narrow_bfloat16);
HWY_EXPORT(widen_float16);
HWY_EXPORT(narrow_float16);

void to_float32(const void* source, DType dtype, float* target, int64_t count) {
  const auto* halves = static_cast<const uint16_t*>(source);
  switch (dtype) {
    case DType::float32:
      std::memcpy(target, source, static_cast<size_t>(count) * sizeof(float));
      break;
    case DType::bfloat16:
      HWY_DYNAMIC_DISPATCH(widen_bfloat16)(halves, target, count);
      break;
    case DType::float16:
      HWY_DYNAMIC_DISPATCH(widen_float16)(halves, target, count);
      break;
  }
}

void from_float32(const float* source, void* target, DType dtype, int64_t count) {
  auto* halves = static_cast<uint16_t*>(target);
  switch (dtype) {
    case DType::float32:
      std::memcpy(target, source, static_cast<size_t>(count) * sizeof(float));
      break;
    case DType::bfloat16:
      HWY_DYNAMIC_DISPATCH(narrow_bfloat16)(source, halves, count);
      break;
    case DType::float16:
      HWY_DYNAMIC_DISPATCH(narrow_float16)(source, halves, count);
      break;
  }
}

}  // namespace addnorm::cpu
#endif  // HWY_ONCE
