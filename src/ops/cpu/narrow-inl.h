// Per-target SIMD conversions between float32 and the 16-bit storage types, shared by the
// kernels that read or write bfloat16/float16 (convert_kernels.cpp, row_storage-inl.h), on
// every target, the scalar one included. Highway's "-inl.h" convention: included once per
// target from a file that uses foreach_target.h, so the guard toggles with HWY_TARGET_TOGGLE.
//
// bfloat16 -> float32 is a shift. float32 -> bfloat16 rounds to nearest even with an integer
// bias (Highway 1.0's own DemoteTo truncates) and keeps NaN a NaN. float16 uses the F16C
// instructions from the AVX2 target on (kHasF16C); older targets convert with integer
// operations that give the same bits as F16C for every input (float16_to_float32_lanes,
// float16_bits; Highway 1.0's emulated DemoteTo truncates instead of rounding). The scalar
// conversions of addnorm/dtype.hpp (widen_one, narrow_one) give those bits too.
#if defined(ADDNORM_OPS_CPU_NARROW_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ADDNORM_OPS_CPU_NARROW_INL_H_
#undef ADDNORM_OPS_CPU_NARROW_INL_H_
#else
#define ADDNORM_OPS_CPU_NARROW_INL_H_
#endif

#include <cstdint>
#include <type_traits>

#include "addnorm/dtype.hpp"
#include "hwy/highway.h"
#include "ops/cpu/native_bfloat16.hpp"

HWY_BEFORE_NAMESPACE();
namespace addnorm::cpu {
namespace HWY_NAMESPACE {
namespace narrow {
namespace hn = hwy::HWY_NAMESPACE;

// The 16-bit storage types, by their bits.
enum class Half { bfloat16, float16 };

// Whether this target has the F16C conversion instructions (AVX2 and AVX-512 do).
constexpr bool kHasF16C = HWY_TARGET <= HWY_AVX2;

// One value, by the scalar conversions (the same rounding as the vector ones).
inline float widen_one(Half type, uint16_t bits) {
  return type == Half::bfloat16 ? to_float(bfloat16{bits}) : to_float(float16{bits});
}
inline uint16_t narrow_one(Half type, float value) {
  return type == Half::bfloat16 ? to_bfloat16(value).bits : to_float16(value).bits;
}

// float32 lanes from the float16 bits in the low 16 bits of 32-bit lanes, exactly, with integer
// operations: normal numbers rebias the exponent; subnormals (m * 2^-24) are 2^-14 * (1 + m/1024)
// less 2^-14, an exact float subtraction; infinities keep their sign and NaNs their payload,
// quietened as F16C quietens them.
template <class DF>
hn::Vec<DF> float16_to_float32_lanes(DF df, hn::Vec<hn::RebindToUnsigned<DF>> half_bits) {
  const hn::RebindToSigned<DF> di32;
  const auto bits = hn::BitCast(di32, half_bits);
  const auto magnitude = hn::ShiftLeft<13>(hn::And(bits, hn::Set(di32, 0x7FFF)));
  const auto exponent = hn::And(magnitude, hn::Set(di32, 0x0F800000));
  const auto normal = hn::Add(magnitude, hn::Set(di32, 112 << 23));
  const auto special = hn::Or(magnitude, hn::Set(di32, 0x7F800000));
  const auto nan = hn::Or(special, hn::Set(di32, 0x00400000));
  const auto smallest_normal = hn::Set(df, 0x1p-14f);
  const auto subnormal = hn::BitCast(
      di32,
      hn::Sub(hn::BitCast(df, hn::Add(magnitude, hn::Set(di32, 113 << 23))), smallest_normal));
  auto out = hn::IfThenElse(hn::Eq(exponent, hn::Zero(di32)), subnormal, normal);
  out = hn::IfThenElse(hn::Eq(exponent, hn::Set(di32, 0x0F800000)),
                       hn::IfThenElse(hn::Gt(magnitude, hn::Set(di32, 0x0F800000)), nan, special),
                       out);
  const auto sign = hn::ShiftLeft<16>(hn::And(bits, hn::Set(di32, 0x8000)));
  return hn::BitCast(df, hn::Or(out, sign));
}

// float32 lanes from 16-bit lanes: `bits` has as many lanes as df (half a register).
template <Half kType, class DF, class V16>
hn::Vec<DF> widen(DF df, V16 bits) {
  const hn::RebindToUnsigned<DF> du32;
  if constexpr (kType == Half::bfloat16) {
    return hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(du32, bits)));
  } else if constexpr (kHasF16C) {
    const hn::Rebind<hwy::float16_t, DF> df16;
    return hn::PromoteTo(df, hn::BitCast(df16, bits));
  } else {
    return float16_to_float32_lanes(df, hn::PromoteTo(du32, bits));
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

// The float16 bits of float32 lanes, rounded to nearest even, in the low 16 bits of each 32-bit
// lane, with integer operations (for targets without F16C; the same bits as F16C): normal
// results keep 10 of the 23 mantissa bits with the bfloat16 bias; results below 2^-14 are
// rounded to a multiple of 2^-24 by a float addition of 0.5 (whose unit is 2^-24); magnitudes
// from 65520 on overflow to infinity; a NaN keeps its sign and the top of its payload, quiet.
template <class DF>
hn::Vec<hn::RebindToUnsigned<DF>> float16_bits(DF df, hn::Vec<DF> v) {
  const hn::RebindToSigned<DF> di32;
  const hn::RebindToUnsigned<DF> du32;
  const auto bits = hn::BitCast(di32, v);
  const auto magnitude = hn::And(bits, hn::Set(di32, 0x7FFFFFFF));
  const auto lsb = hn::And(hn::ShiftRight<13>(magnitude), hn::Set(di32, 1));
  const auto normal =
      hn::Sub(hn::ShiftRight<13>(hn::Add(hn::Add(magnitude, hn::Set(di32, 0xFFF)), lsb)),
              hn::Set(di32, 112 << 10));
  const auto half = hn::Set(df, 0.5f);
  const auto subnormal = hn::Sub(hn::BitCast(di32, hn::Add(hn::BitCast(df, magnitude), half)),
                                 hn::BitCast(di32, half));
  const auto nan =
      hn::Or(hn::And(hn::ShiftRight<13>(magnitude), hn::Set(di32, 0x3FF)), hn::Set(di32, 0x7E00));
  auto out = hn::IfThenElse(hn::Lt(magnitude, hn::Set(di32, 0x38800000)), subnormal, normal);
  out = hn::IfThenElse(hn::Lt(magnitude, hn::Set(di32, 0x477FF000)), out, hn::Set(di32, 0x7C00));
  out = hn::IfThenElse(hn::Gt(magnitude, hn::Set(di32, 0x7F800000)), nan, out);
  const auto sign = hn::And(hn::ShiftRight<16>(hn::BitCast(du32, bits)), hn::Set(du32, 0x8000u));
  return hn::Or(hn::BitCast(du32, out), sign);
}

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
// The AVX512_BF16 roundings (native_bfloat16.hpp), for 512- and 256-bit registers of floats:
// written as assembly because Highway's AVX3 target does not enable the instructions for the
// compiler; the caller checks native_bfloat16 and that no lane is a float32 subnormal (which
// they flush).
template <class DF>
constexpr bool kNativeWidth = std::is_same_v<hn::Vec<DF>, hn::Vec512<float>> ||
                              std::is_same_v<hn::Vec<DF>, hn::Vec256<float>>;
HWY_INLINE bool no_subnormal_lanes(hn::Vec512<float> v) {
  return _mm512_fpclass_ps_mask(v.raw, 0x20) == 0;  // 0x20: the denormal class
}
HWY_INLINE bool no_subnormal_lanes(hn::Vec256<float> v) {
  return _mm256_fpclass_ps_mask(v.raw, 0x20) == 0;
}
HWY_INLINE hn::Vec256<uint16_t> native_bfloat16_bits(hn::Vec512<float> v) {
  __m256i out;
  asm("vcvtneps2bf16 %1, %0" : "=v"(out) : "v"(v.raw));
  return hn::Vec256<uint16_t>{out};
}
HWY_INLINE hn::Vec128<uint16_t> native_bfloat16_bits(hn::Vec256<float> v) {
  __m128i out;
  asm("vcvtneps2bf16 %1, %0" : "=v"(out) : "v"(v.raw));
  return hn::Vec128<uint16_t>{out};
}
// Lanes of `lo` in the lower half, of `hi` in the upper.
HWY_INLINE hn::Vec512<uint16_t> native_bfloat16_pair(hn::Vec512<float> lo, hn::Vec512<float> hi) {
  __m512i out;
  asm("vcvtne2ps2bf16 %2, %1, %0" : "=v"(out) : "v"(hi.raw), "v"(lo.raw));
  return hn::Vec512<uint16_t>{out};
}
#endif

// The bits of a 16-bit type computed in 32-bit lanes (bfloat16 always; float16 without F16C).
template <Half kType, bool kNaNs, class DF>
hn::Vec<hn::RebindToUnsigned<DF>> half_bits_in_32(DF df, hn::Vec<DF> v) {
  if constexpr (kType == Half::bfloat16) {
    return bfloat16_bits<kNaNs>(df, v);
  } else {
    return float16_bits(df, v);
  }
}
template <Half kType>
constexpr bool kNarrowsIn32 = kType == Half::bfloat16 || !kHasF16C;

// 16-bit lanes (as many as df's, half a register) from float32 lanes. Inlined by force, as
// narrow_pair: GCC otherwise kept one out-of-line copy that loops such as add_rows called once
// per register (the bfloat16 pre-norm forward then ran 3-6% slower in cache).
template <Half kType, bool kNaNs = true, class DF>
HWY_INLINE hn::Vec<hn::Rebind<uint16_t, DF>> narrow(DF df, hn::Vec<DF> v) {
  const hn::Rebind<uint16_t, DF> du16;
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  if constexpr (kType == Half::bfloat16 && kNativeWidth<DF>) {
    if (native_bfloat16 && no_subnormal_lanes(v)) return native_bfloat16_bits(v);
  }
#endif
  if constexpr (kNarrowsIn32<kType>) {
    const hn::RebindToSigned<DF> di32;
    return hn::DemoteTo(du16, hn::BitCast(di32, half_bits_in_32<kType, kNaNs>(df, v)));
  } else {
    const hn::Rebind<hwy::float16_t, DF> df16;
    return hn::BitCast(du16, hn::DemoteTo(df16, v));
  }
}

#if HWY_TARGET != HWY_SCALAR
// One full register of 16-bit lanes from two registers of float32 lanes (lo first), for
// streaming stores, which take whole registers.
template <Half kType, bool kNaNs = true, class DF>
HWY_INLINE hn::Vec<hn::Repartition<uint16_t, DF>> narrow_pair(DF df, hn::Vec<DF> lo,
                                                              hn::Vec<DF> hi) {
  const hn::Repartition<uint16_t, DF> du16;
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  if constexpr (kType == Half::bfloat16 && std::is_same_v<hn::Vec<DF>, hn::Vec512<float>>) {
    if (native_bfloat16 && no_subnormal_lanes(lo) && no_subnormal_lanes(hi)) {
      return native_bfloat16_pair(lo, hi);
    }
  }
#endif
  if constexpr (kNarrowsIn32<kType>) {
    return hn::ConcatEven(du16, hn::BitCast(du16, half_bits_in_32<kType, kNaNs>(df, hi)),
                          hn::BitCast(du16, half_bits_in_32<kType, kNaNs>(df, lo)));
  } else {
    return hn::Combine(du16, narrow<kType>(df, hi), narrow<kType>(df, lo));
  }
}

// 32-bit lanes each holding a pair of bfloat16 values, `even`'s in the low 16 bits and `odd`'s in
// the high 16 (element pairs as they lie in memory), each rounded as bfloat16_bits<kNaNs>. With
// AVX512_BF16 one rounding of both registers and one permutation of the 16-bit lanes into pairs
// in place of bfloat16_bits' integer steps, twice.
template <bool kNaNs = true, class DF>
hn::Vec<hn::RebindToUnsigned<DF>> bfloat16_pairs(DF df, hn::Vec<DF> even, hn::Vec<DF> odd) {
  const hn::RebindToUnsigned<DF> du32;
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  if constexpr (std::is_same_v<hn::Vec<DF>, hn::Vec512<float>>) {
    if (native_bfloat16 && no_subnormal_lanes(even) && no_subnormal_lanes(odd)) {
      // [even 0..15, odd 0..15] as 16-bit lanes, then lane 2k from k and 2k + 1 from 16 + k.
      const __m512i pairs = native_bfloat16_pair(even, odd).raw;
      const __m512i order =
          _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22,
                           6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
      return hn::Vec512<uint32_t>{_mm512_permutexvar_epi16(order, pairs)};
    }
  }
#endif
  return hn::Or(bfloat16_bits<kNaNs>(df, even), hn::ShiftLeft<16>(bfloat16_bits<kNaNs>(df, odd)));
}
#endif

}  // namespace narrow
}  // namespace HWY_NAMESPACE
}  // namespace addnorm::cpu
HWY_AFTER_NAMESPACE();

#endif  // ADDNORM_OPS_CPU_NARROW_INL_H_
