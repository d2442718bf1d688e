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
#include "ops/reference/philox.hpp"

HWY_BEFORE_NAMESPACE();
namespace addnorm::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// What one call needs besides its pointers: the stream's key and the dropout's constants.
struct DropoutConstants {
  uint64_t seed = 0;
  uint32_t threshold = 0;  // drop iff bits < threshold
  double scale = 1.0;      // 1 / (1 - p), in float64 as the definition has it
};

DropoutConstants constants_of(uint64_t seed, float p) {
  DropoutConstants c;
  c.seed = seed;
  c.threshold = reference::dropout_threshold(p);
  c.scale = 1.0 / (1.0 - static_cast<double>(p));
  return c;
}

// The scalar definition of one element: out = x + dropped (x optional), keep = 1 or 0.
template <bool kAdd, bool kKeep>
HWY_INLINE void one_element(const DropoutConstants& c, uint32_t bits, const float* x,
                            const float* s, float* out, uint8_t* keep, int64_t i) {
  const bool kept = bits >= c.threshold;
  const float dropped = kept ? static_cast<float>(static_cast<double>(s[i]) * c.scale) : 0.0f;
  if constexpr (kAdd) {
    out[i] = x[i] + dropped;
  } else {
    out[i] = dropped;
  }
  if constexpr (kKeep) keep[i] = kept ? 1 : 0;
}

#if HWY_TARGET != HWY_SCALAR

using U64Tag = hn::ScalableTag<uint64_t>;
using U32Tag = hn::Repartition<uint32_t, U64Tag>;
using FloatTag = hn::Repartition<float, U64Tag>;
using V32 = hn::Vec<U32Tag>;

// Philox4x32-10 for 2 * Lanes(U64Tag) blocks at once: the 4 * Lanes(U64Tag) elements from block
// first_block on come back in element order as two vectors of 32-bit lanes (the first and the
// second half). Lane k of the 64-bit vectors evaluates block k / 2 + (k % 2) * (lanes / 2):
// interleaving the words per 128-bit unit then leaves the blocks in order.
class PhiloxGroups {
 public:
  explicit PhiloxGroups(uint64_t seed) {
    const U64Tag du64;
    const size_t lanes = hn::Lanes(du64);
    HWY_ALIGN uint64_t order[HWY_MAX_BYTES / sizeof(uint64_t)];
    for (size_t k = 0; k < lanes; ++k) order[k] = k / 2 + (k % 2) * (lanes / 2);
    lane_blocks_ = hn::Load(du64, order);
    uint32_t key0 = static_cast<uint32_t>(seed), key1 = static_cast<uint32_t>(seed >> 32);
    for (int round = 0; round < 10; ++round) {
      keys_[round][0] = key0;
      keys_[round][1] = key1;
      key0 += 0x9E3779B9u;
      key1 += 0xBB67AE85u;
    }
  }

  HWY_INLINE void run(uint64_t first_block, V32& first_half, V32& second_half) const {
    const U64Tag du64;
    const U32Tag du32;
    const auto multiplier0 = hn::BitCast(du32, hn::Set(du64, 0xD2511F53ull));
    const auto multiplier1 = hn::BitCast(du32, hn::Set(du64, 0xCD9E8D57ull));
    // Only the low 32 bits of each 64-bit lane carry a word; the high halves hold leftovers
    // that MulEven ignores and the final interleave drops.
    const auto block = hn::Add(hn::Set(du64, first_block), lane_blocks_);
    auto c0 = block;
    auto c1 = hn::ShiftRight<32>(block);
    // Round 1 with c2 = c3 = 0: product1 = 0.
    auto product0 = hn::MulEven(hn::BitCast(du32, c0), multiplier0);
    c0 = hn::Xor(c1, hn::Set(du64, keys_[0][0]));
    c1 = hn::Zero(du64);
    auto c2 = hn::Xor(hn::ShiftRight<32>(product0), hn::Set(du64, keys_[0][1]));
    auto c3 = product0;
    // The high half of a product moves to the low half by swapping the 32-bit halves of each
    // lane (a shuffle, not a shift: on AVX-512 the shifts would compete with the products).
    const auto swap_halves = [du32, du64](hn::Vec<U64Tag> v) HWY_ATTR {
      return hn::BitCast(du64, hn::Shuffle2301(hn::BitCast(du32, v)));
    };
    for (int round = 1; round < 10; ++round) {
      product0 = hn::MulEven(hn::BitCast(du32, c0), multiplier0);
      const auto product1 = hn::MulEven(hn::BitCast(du32, c2), multiplier1);
      c0 = hn::Xor3(swap_halves(product1), c1, hn::Set(du64, keys_[round][0]));
      c1 = product1;
      c2 = hn::Xor3(swap_halves(product0), c3, hn::Set(du64, keys_[round][1]));
      c3 = product0;
    }
    // Per block (64-bit lane): words 0 and 1, words 2 and 3 as 32-bit pairs.
    const auto words01 = hn::BitCast(
        du64, hn::OddEven(hn::BitCast(du32, swap_halves(c1)), hn::BitCast(du32, c0)));
    const auto words23 = hn::BitCast(
        du64, hn::OddEven(hn::BitCast(du32, swap_halves(c3)), hn::BitCast(du32, c2)));
    first_half = hn::BitCast(du32, hn::InterleaveLower(du64, words01, words23));
    second_half = hn::BitCast(du32, hn::InterleaveUpper(du64, words01, words23));
  }

 private:
  hn::Vec<U64Tag> lane_blocks_;
  uint32_t keys_[10][2];
};

// Software prefetch distance (elements) and granularity of the inputs.
constexpr int64_t kPrefetchAhead = 2048;
constexpr int64_t kFloatsPerLine = 16;

inline int64_t group_elements() { return 4 * static_cast<int64_t>(hn::Lanes(U64Tag())); }

// x (optional) + dropout(s) for one vector of 32-bit lanes whose random bits are `bits`.
template <bool kAdd, bool kKeep>
HWY_INLINE void vector_elements(const DropoutConstants& c, V32 bits, const float* x,
                                const float* s, float* out, uint8_t* keep, int64_t i) {
  const FloatTag df;
  const U32Tag du32;
  const hn::Half<FloatTag> dfh;
  const hn::Repartition<double, FloatTag> dd;
  const auto kept = hn::Not(hn::Lt(bits, hn::Set(du32, c.threshold)));
  const auto v = hn::LoadU(df, s + i);
  const auto scale = hn::Set(dd, c.scale);
  const auto lower = hn::DemoteTo(dfh, hn::Mul(hn::PromoteTo(dd, hn::LowerHalf(dfh, v)), scale));
  const auto upper =
      hn::DemoteTo(dfh, hn::Mul(hn::PromoteTo(dd, hn::UpperHalf(dfh, v)), scale));
  auto result = hn::IfThenElseZero(hn::RebindMask(df, kept), hn::Combine(df, upper, lower));
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
  const std::array<uint32_t, 2> key{static_cast<uint32_t>(c.seed),
                                    static_cast<uint32_t>(c.seed >> 32)};
  auto scalar_block = [&](uint64_t block) {
    return reference::philox4x32_10(
        {static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), 0u, 0u}, key);
  };
  int64_t i = 0;
  // Up to the first block boundary: one scalar Philox.
  if (first_element % 4 != 0) {
    const auto words = scalar_block(first_element / 4);
    for (; i < count && (first_element + static_cast<uint64_t>(i)) % 4 != 0; ++i) {
      const auto lane = static_cast<size_t>((first_element + static_cast<uint64_t>(i)) % 4);
      one_element<kAdd, kKeep>(c, words[lane], x, s, out, keep, i);
    }
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
  for (; i < count; i += 4) {
    const auto words = scalar_block((first_element + static_cast<uint64_t>(i)) / 4);
    for (int64_t j = 0; j < 4 && i + j < count; ++j) {
      one_element<kAdd, kKeep>(c, words[static_cast<size_t>(j)], x, s, out, keep, i + j);
    }
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
  int64_t i = 0;
  // Scalar until the element index is a multiple of 4 (a block boundary).
  for (; i < count && (first_element + static_cast<uint64_t>(i)) % 4 != 0; ++i) {
    bits[i] = reference::philox_bits(seed, first_element + static_cast<uint64_t>(i));
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
  for (; i < count; ++i) {
    bits[i] = reference::philox_bits(seed, first_element + static_cast<uint64_t>(i));
  }
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
