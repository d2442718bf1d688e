// Per-target SIMD conversions between float32 and the 16-bit storage types, shared by the
// kernels that read or write bfloat16/float16 (convert_kernels.cpp, narrow_norm_kernels.cpp).
// Highway's "-inl.h" convention: included once per target from a file that uses
// foreach_target.h, so the guard toggles with HWY_TARGET_TOGGLE.
//
// bfloat16 -> float32 is a shift. float32 -> bfloat16 rounds to nearest even with an integer
// bias (Highway 1.0's own DemoteTo truncates) and keeps NaN a NaN. float16 uses the F16C
// instructions (round to nearest even), available from the AVX2 target on: kHasFloat16Vectors.
#if defined(ADDNORM_OPS_CPU_NARROW_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ADDNORM_OPS_CPU_NARROW_INL_H_
#undef ADDNORM_OPS_CPU_NARROW_INL_H_
#else
#define ADDNORM_OPS_CPU_NARROW_INL_H_
#endif

#include <cstdint>

#include "addnorm/dtype.hpp"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace addnorm::cpu {
namespace HWY_NAMESPACE {
namespace narrow {
namespace hn = hwy::HWY_NAMESPACE;

// The 16-bit storage types, by their bits.
enum class Half { bfloat16, float16 };

constexpr bool kHasFloat16Vectors = HWY_TARGET <= HWY_AVX2;

// One value, by the scalar conversions (the same rounding as the vector ones).
inline float widen_one(Half type, uint16_t bits) {
  return type == Half::bfloat16 ? to_float(bfloat16{bits}) : to_float(float16{bits});
}
inline uint16_t narrow_one(Half type, float value) {
  return type == Half::bfloat16 ? to_bfloat16(value).bits : to_float16(value).bits;
}

// float32 lanes from 16-bit lanes: `bits` has as many lanes as df (half a register).
template <Half kType, class DF, class V16>
hn::Vec<DF> widen(DF df, V16 bits) {
  if constexpr (kType == Half::bfloat16) {
    const hn::RebindToUnsigned<DF> du32;
    return hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(du32, bits)));
  } else {
    const hn::Rebind<hwy::float16_t, DF> df16;
    return hn::PromoteTo(df, hn::BitCast(df16, bits));
  }
}

// The bfloat16 bits of float32 lanes, rounded to nearest even, in the low 16 bits of each
// 32-bit lane; a NaN stays a (quiet) NaN. Without kNaNs the caller promises no NaN lanes (the
// rounding bias could carry a NaN's payload into an infinity or zero): three fewer
// instructions. Infinities and overflow to infinity are right either way.
template <bool kNaNs = true, class DF>
hn::Vec<hn::RebindToUnsigned<DF>> bfloat16_bits(DF df, hn::Vec<DF> v) {
  (void)df;
  const hn::RebindToUnsigned<DF> du32;
  const auto bits = hn::BitCast(du32, v);
  const auto lsb = hn::And(hn::ShiftRight<16>(bits), hn::Set(du32, 1u));
  const auto rounded = hn::ShiftRight<16>(hn::Add(hn::Add(bits, hn::Set(du32, 0x7FFFu)), lsb));
  if constexpr (!kNaNs) return rounded;
  const auto nan = hn::Or(hn::ShiftRight<16>(bits), hn::Set(du32, 0x40u));
  return hn::IfThenElse(hn::RebindMask(du32, hn::IsNaN(v)), nan, rounded);
}

// 16-bit lanes (as many as df's, half a register) from float32 lanes.
template <Half kType, bool kNaNs = true, class DF>
hn::Vec<hn::Rebind<uint16_t, DF>> narrow(DF df, hn::Vec<DF> v) {
  const hn::Rebind<uint16_t, DF> du16;
  if constexpr (kType == Half::bfloat16) {
    const hn::RebindToSigned<DF> di32;
    return hn::DemoteTo(du16, hn::BitCast(di32, bfloat16_bits<kNaNs>(df, v)));
  } else {
    const hn::Rebind<hwy::float16_t, DF> df16;
    return hn::BitCast(du16, hn::DemoteTo(df16, v));
  }
}

#if HWY_TARGET != HWY_SCALAR
// One full register of 16-bit lanes from two registers of float32 lanes (lo first), for
// streaming stores, which take whole registers.
template <Half kType, bool kNaNs = true, class DF>
hn::Vec<hn::Repartition<uint16_t, DF>> narrow_pair(DF df, hn::Vec<DF> lo, hn::Vec<DF> hi) {
  const hn::Repartition<uint16_t, DF> du16;
  if constexpr (kType == Half::bfloat16) {
    return hn::ConcatEven(du16, hn::BitCast(du16, bfloat16_bits<kNaNs>(df, hi)),
                          hn::BitCast(du16, bfloat16_bits<kNaNs>(df, lo)));
  } else {
    return hn::Combine(du16, narrow<kType>(df, hi), narrow<kType>(df, lo));
  }
}
#endif

}  // namespace narrow
}  // namespace HWY_NAMESPACE
}  // namespace addnorm::cpu
HWY_AFTER_NAMESPACE();

#endif  // ADDNORM_OPS_CPU_NARROW_INL_H_
