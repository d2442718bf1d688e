// Dropout at SIMD speed: Philox4x32-10 evaluated for many counter blocks at once (one block per
// 64-bit lane, 32x32 -> 64-bit products with MulEven), its four words interleaved in registers
// into element order, then compared, scaled (in float64 lanes) and, for the post-norm ops,
// added to the residual in the same pass. Bit for bit the same stream and values as the scalar
// definition in ops/reference/philox.hpp.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/cpu/dropout_kernels.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include <algorithm>
#include <array>
#include <cstdint>

#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "ops/cpu/dropout.hpp"
#include "ops/cpu/philox-inl.h"
#include "ops/reference/philox.hpp"

HWY_BEFORE_NAMESPACE();
namespace addnorm::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// The scalar definition of one element: out = x + dropped (x optional), keep = 1 or 0.
template <bool kAdd, bool kKeep>
HWY_INLINE void one_element(const DropoutConstants& c, uint32_t bits, const float* x,
                            const float* s, float* out, uint8_t* keep, int64_t i) {
  const bool kept = bits >= c.threshold;
  const float dropped = dropped_one(c, bits, s[i]);
  if constexpr (kAdd) {
    out[i] = x[i] + dropped;
  } else {
    out[i] = dropped;
  }
  if constexpr (kKeep) keep[i] = kept ? 1 : 0;
}

#if HWY_TARGET != HWY_SCALAR

using U32Tag = PhiloxU32Tag;
using FloatTag = hn::Repartition<float, U32Tag>;
using V32 = PhiloxV32;

// Software prefetch distance (elements) and granularity of the inputs.
constexpr int64_t kPrefetchAhead = 2048;
constexpr int64_t kFloatsPerLine = 16;

inline int64_t group_elements() { return PhiloxGroups::group_elements(); }

// x (optional) + dropout(s) for one vector of 32-bit lanes whose random bits are `bits`.
template <bool kAdd, bool kKeep>
HWY_INLINE void vector_elements(const DropoutConstants& c, V32 bits, const float* x,
                                const float* s, float* out, uint8_t* keep, int64_t i) {
  const FloatTag df;
  const U32Tag du32;
  const auto kept = kept_lanes(c, bits);
  auto result = dropped_lanes(df, hn::LoadU(df, s + i), kept, c.scale);
  if constexpr (kAdd) result = hn::Add(hn::LoadU(df, x + i), result);
  hn::StoreU(result, df, out + i);
  if constexpr (kKeep) {
    const hn::RebindToSigned<U32Tag> di32;
    const hn::Rebind<uint8_t, U32Tag> du8;
    const auto ones = hn::IfThenElseZero(kept, hn::Set(du32, 1u));
    hn::StoreU(hn::DemoteTo(du8, hn::BitCast(di32, ones)), du8, keep + i);
  }
}

#endif  // HWY_TARGET != HWY_SCALAR

// out[i] = x[i] + dropout(s)[i] (or dropout(s)[i] without x) for stream elements
// first_element + i; keep[i] = 1 for a kept element, 0 for a dropped one. out may be x or s.
template <bool kAdd, bool kKeep>
void dropout_add_as(const DropoutConstants& c, const float* x, const float* s, float* out,
                    uint8_t* HWY_RESTRICT keep, int64_t count, uint64_t first_element,
                    const float* next, int64_t readable) {
  ScalarPhilox scalar(c.seed);
  int64_t i = 0;
  // Up to the first block boundary: one scalar Philox.
  for (; i < count && (first_element + static_cast<uint64_t>(i)) % 4 != 0; ++i) {
    one_element<kAdd, kKeep>(c, scalar.bits(first_element + static_cast<uint64_t>(i)), x, s, out,
                             keep, i);
  }
#if HWY_TARGET != HWY_SCALAR
  const PhiloxGroups philox(c.seed);
  const int64_t group = group_elements();
  const int64_t half = group / 2;
  V32 first_half, second_half;
  // Two groups per step: their Philox rounds are independent chains that the core overlaps.
  for (; i + 2 * group <= count; i += 2 * group) {
    // The inputs come from memory: they are asked for a few KiB ahead (the hardware prefetcher
    // restarts on every page and falls behind with the Philox work between the loads), and the
    // caller's next input is brought into L2 alongside.
    if (i + 2 * group + kPrefetchAhead <= readable) {
      for (int64_t line = 0; line < 2 * group; line += kFloatsPerLine) {
        hwy::Prefetch(s + i + line + kPrefetchAhead);
        if constexpr (kAdd) hwy::Prefetch(x + i + line + kPrefetchAhead);
      }
    }
    if (next) {
      for (int64_t line = 0; line < 2 * group; line += kFloatsPerLine) {
        __builtin_prefetch(next + i + line, 0, 2);
      }
    }
    V32 third_half, fourth_half;
    philox.run((first_element + static_cast<uint64_t>(i)) / 4, first_half, second_half);
    philox.run((first_element + static_cast<uint64_t>(i + group)) / 4, third_half, fourth_half);
    vector_elements<kAdd, kKeep>(c, first_half, x, s, out, keep, i);
    vector_elements<kAdd, kKeep>(c, second_half, x, s, out, keep, i + half);
    vector_elements<kAdd, kKeep>(c, third_half, x, s, out, keep, i + group);
    vector_elements<kAdd, kKeep>(c, fourth_half, x, s, out, keep, i + group + half);
  }
  for (; i + group <= count; i += group) {
    philox.run((first_element + static_cast<uint64_t>(i)) / 4, first_half, second_half);
    vector_elements<kAdd, kKeep>(c, first_half, x, s, out, keep, i);
    vector_elements<kAdd, kKeep>(c, second_half, x, s, out, keep, i + half);
  }
  if (i < count) {
    // The last partial group: its bits from one more vector Philox.
    const U32Tag du32;
    HWY_ALIGN uint32_t bits[2 * HWY_MAX_BYTES / sizeof(uint32_t)];
    philox.run((first_element + static_cast<uint64_t>(i)) / 4, first_half, second_half);
    hn::Store(first_half, du32, bits);
    hn::Store(second_half, du32, bits + half);
    for (int64_t j = 0; i < count; ++i, ++j) {
      one_element<kAdd, kKeep>(c, bits[j], x, s, out, keep, i);
    }
  }
#else
  (void)next;
  (void)readable;
  for (; i < count; ++i) {
    one_element<kAdd, kKeep>(c, scalar.bits(first_element + static_cast<uint64_t>(i)), x, s, out,
                             keep, i);
  }
#endif
}

void dropout_add_range(const float* x, const float* s, float* out, uint8_t* keep, int64_t count,
                       uint64_t seed, float p, uint64_t first_element, const float* next,
                       int64_t readable) {
  const DropoutConstants c = constants_of(seed, p);
  readable = std::max(readable, count);
  if (x) {
    if (keep) {
      dropout_add_as<true, true>(c, x, s, out, keep, count, first_element, next, readable);
    } else {
      dropout_add_as<true, false>(c, x, s, out, keep, count, first_element, next, readable);
    }
  } else if (keep) {
    dropout_add_as<false, true>(c, x, s, out, keep, count, first_element, next, readable);
  } else {
    dropout_add_as<false, false>(c, x, s, out, keep, count, first_element, next, readable);
  }
}

// dropped[i] = keep[i] ? input[i] * scale (float64, rounded once) : 0 (a plain copy without
// keep), and copy[i] = input[i] when copy is given; both written with streaming stores when
// `stream` (where their alignment allows).
void apply_keep_range(const float* HWY_RESTRICT input, const uint8_t* HWY_RESTRICT keep,
                      float* HWY_RESTRICT dropped, float* HWY_RESTRICT copy, int64_t count,
                      float p, bool stream) {
  const double scale = 1.0 / (1.0 - static_cast<double>(p));
  auto scalar = [&](int64_t i) {
    const float v = input[i];
    if (copy) copy[i] = v;
    if (keep) {
      dropped[i] = keep[i] ? static_cast<float>(static_cast<double>(v) * scale) : 0.0f;
    } else {
      dropped[i] = v;
    }
  };
  int64_t i = 0;
#if HWY_TARGET != HWY_SCALAR
  const FloatTag df;
  const U32Tag du32;
  const hn::Half<FloatTag> dfh;
  const hn::Repartition<double, FloatTag> dd;
  const hn::Rebind<uint8_t, U32Tag> du8;
  const int64_t n = static_cast<int64_t>(hn::Lanes(df));
  const auto vector_bytes = static_cast<uintptr_t>(n) * sizeof(float);
  if (stream) {
    // Scalar up to dropped's next vector boundary; copy streams only if it is aligned there too.
    const auto misalignment = reinterpret_cast<uintptr_t>(dropped) % vector_bytes;
    if (misalignment % sizeof(float) != 0) {
      stream = false;
    } else if (misalignment != 0) {
      const auto head = static_cast<int64_t>((vector_bytes - misalignment) / sizeof(float));
      for (; i < std::min(head, count); ++i) scalar(i);
    }
  }
  const bool stream_copy =
      stream && copy && reinterpret_cast<uintptr_t>(copy + i) % vector_bytes == 0;
  const auto scale_v = hn::Set(dd, scale);
  const auto zero_u32 = hn::Zero(du32);
  for (; i + n <= count; i += n) {
    const auto v = hn::LoadU(df, input + i);
    if (copy) {
      if (stream_copy) {
        hn::Stream(v, df, copy + i);
      } else {
        hn::StoreU(v, df, copy + i);
      }
    }
    auto result = v;
    if (keep) {
      const auto kept = hn::RebindMask(df, hn::Ne(hn::PromoteTo(du32, hn::LoadU(du8, keep + i)),
                                                  zero_u32));
      const auto lower =
          hn::DemoteTo(dfh, hn::Mul(hn::PromoteTo(dd, hn::LowerHalf(dfh, v)), scale_v));
      const auto upper =
          hn::DemoteTo(dfh, hn::Mul(hn::PromoteTo(dd, hn::UpperHalf(dfh, v)), scale_v));
      result = hn::IfThenElseZero(kept, hn::Combine(df, upper, lower));
    }
    if (stream) {
      hn::Stream(result, df, dropped + i);
    } else {
      hn::StoreU(result, df, dropped + i);
    }
  }
  if (stream) hwy::FlushStream();
#else
  (void)stream;
#endif
  for (; i < count; ++i) scalar(i);
}

// bits[i] = the 32 random bits of element first_element + i of the stream keyed by seed.
void philox_bits_range(uint64_t seed, uint64_t first_element, uint32_t* HWY_RESTRICT bits,
                       int64_t count) {
  ScalarPhilox scalar(seed);
  int64_t i = 0;
  // Scalar until the element index is a multiple of 4 (a block boundary).
  for (; i < count && (first_element + static_cast<uint64_t>(i)) % 4 != 0; ++i) {
    bits[i] = scalar.bits(first_element + static_cast<uint64_t>(i));
  }
#if HWY_TARGET != HWY_SCALAR
  const U32Tag du32;
  const PhiloxGroups philox(seed);
  const int64_t group = group_elements();
  V32 first_half, second_half;
  for (; i + group <= count; i += group) {
    philox.run((first_element + static_cast<uint64_t>(i)) / 4, first_half, second_half);
    hn::StoreU(first_half, du32, bits + i);
    hn::StoreU(second_half, du32, bits + i + group / 2);
  }
#endif
  for (; i < count; ++i) bits[i] = scalar.bits(first_element + static_cast<uint64_t>(i));
}

}  // namespace HWY_NAMESPACE
}  // namespace addnorm::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <algorithm>

namespace addnorm::cpu {

HWY_EXPORT(philox_bits_range);
HWY_EXPORT(dropout_add_range);
HWY_EXPORT(apply_keep_range);

void philox_bits(uint64_t seed, uint64_t first_element, uint32_t* bits, int64_t count) {
  HWY_DYNAMIC_DISPATCH(philox_bits_range)(seed, first_element, bits, count);
}

void apply_dropout(const float* input, float* output, int64_t count,
                   const DropoutOptions& options, uint64_t first_element) {
  if (options.p == 0.0f) {
    if (output != input) std::copy(input, input + count, output);
    return;
  }
  HWY_DYNAMIC_DISPATCH(dropout_add_range)(nullptr, input, output, nullptr, count, options.seed,
                                          options.p, first_element, nullptr, count);
}

void add_dropout(const float* x, const float* s, float* out, uint8_t* keep, int64_t count,
                 const DropoutOptions& options, uint64_t first_element, const float* next,
                 int64_t readable) {
  if (options.p == 0.0f) {
    // Dropout is the identity: no mask, and x + s rounds as x + dropout(s) does.
    for (int64_t i = 0; i < count; ++i) out[i] = x[i] + s[i];
    if (keep) std::fill(keep, keep + count, uint8_t{1});
    return;
  }
  HWY_DYNAMIC_DISPATCH(dropout_add_range)(x, s, out, keep, count, options.seed, options.p,
                                          first_element, next, readable);
}

void apply_keep(const float* input, const uint8_t* keep, float* dropped, float* copy,
                int64_t count, float p, bool stream) {
  HWY_DYNAMIC_DISPATCH(apply_keep_range)(input, p == 0.0f ? nullptr : keep, dropped, copy, count,
                                         p, stream);
}

}  // namespace addnorm::cpu
#endif  // HWY_ONCE
