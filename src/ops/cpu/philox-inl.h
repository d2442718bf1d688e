// Dropout's random bits at SIMD speed, per SIMD target: Philox4x32-10 evaluated for many counter
// blocks at once, and the dropped value of a kept element, for the dropout kernels and the
// norm engine's post-norm input stage alike. Bit for bit the stream and values of the scalar
// definition in ops/reference/philox.hpp. Highway's "-inl.h" convention: included once per
// target from a file that uses foreach_target.h.
#if defined(ADDNORM_OPS_CPU_PHILOX_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ADDNORM_OPS_CPU_PHILOX_INL_H_
#undef ADDNORM_OPS_CPU_PHILOX_INL_H_
#else
#define ADDNORM_OPS_CPU_PHILOX_INL_H_
#endif

#include <array>
#include <cstdint>

#include "hwy/highway.h"
#include "ops/reference/philox.hpp"

HWY_BEFORE_NAMESPACE();
namespace addnorm::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// What a dropout needs besides its pointers: the stream's key and the dropout's constants.
struct DropoutConstants {
  uint64_t seed = 0;
  uint32_t threshold = 0;  // drop iff bits < threshold
  double scale = 1.0;      // 1 / (1 - p), in float64 as the definition has it
};

inline DropoutConstants constants_of(uint64_t seed, float p) {
  DropoutConstants c;
  c.seed = seed;
  c.threshold = reference::dropout_threshold(p);
  c.scale = 1.0 / (1.0 - static_cast<double>(p));
  return c;
}

// One element's dropout from its random bits: s * scale (float64, rounded once) or
// reference::dropout_dropped_value (s * 0: NaN and infinities stay NaN, as in PyTorch).
inline float dropped_one(const DropoutConstants& c, uint32_t bits, float s) {
  return bits >= c.threshold ? static_cast<float>(static_cast<double>(s) * c.scale)
                             : reference::dropout_dropped_value(s);
}

// The random bits of elements one at a time, one scalar Philox per block of four: for the
// elements before a block boundary, after the last whole group, and on the scalar target.
class ScalarPhilox {
 public:
  explicit ScalarPhilox(uint64_t seed)
      : key_{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)} {}
  uint32_t bits(uint64_t element) {
    const uint64_t block = element / 4;
    if (block != block_) {
      words_ = reference::philox4x32_10(
          {static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), 0u, 0u}, key_);
      block_ = block;
    }
    return words_[element % 4];
  }

 private:
  std::array<uint32_t, 2> key_;
  std::array<uint32_t, 4> words_{};
  uint64_t block_ = UINT64_MAX;  // no element's block
};

#if HWY_TARGET != HWY_SCALAR

using PhiloxU64Tag = hn::ScalableTag<uint64_t>;
using PhiloxU32Tag = hn::Repartition<uint32_t, PhiloxU64Tag>;
using PhiloxV32 = hn::Vec<PhiloxU32Tag>;

// Philox4x32-10 for Lanes(PhiloxU64Tag) blocks at once (a group, one block per 64-bit lane):
// the group_elements() elements from block first_block on come back in element order as two
// vectors of 32-bit lanes (the first and the second half). Lane k of the 64-bit vectors evaluates
// block k / 2 + (k % 2) * (lanes / 2): interleaving the words per 128-bit unit then leaves the
// blocks in order.
class PhiloxGroups {
 public:
  // Groups a step evaluates side by side. Ten rounds are one chain of dependent multiplies, so
  // one group at a time leaves the multiplier idle (docs/performance.md, "Tunables: what was
  // tried").
  static constexpr int kGroupsPerStep = 4;

  explicit PhiloxGroups(uint64_t seed) {
    const PhiloxU64Tag du64;
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

  // Elements per group: four per block.
  static int64_t group_elements() { return 4 * static_cast<int64_t>(hn::Lanes(PhiloxU64Tag())); }

  // kGroups consecutive groups from block first_block on: group g's halves in bits[2 g] and
  // bits[2 g + 1], so bits[0 .. 2 kGroups) hold the elements in order.
  template <int kGroups>
  HWY_INLINE void run(uint64_t first_block, PhiloxV32* HWY_RESTRICT bits) const {
    static_assert(kGroups >= 1, "a run evaluates at least one group");
    const PhiloxU64Tag du64;
    const PhiloxU32Tag du32;
    const auto multiplier0 = hn::BitCast(du32, hn::Set(du64, 0xD2511F53ull));
    const auto multiplier1 = hn::BitCast(du32, hn::Set(du64, 0xCD9E8D57ull));
    // The high half of a product moves to the low half by swapping the 32-bit halves of each
    // lane (a shuffle, not a shift: on AVX-512 the shifts would compete with the products).
    const auto swap_halves = [du32, du64](hn::Vec<PhiloxU64Tag> v) HWY_ATTR {
      return hn::BitCast(du64, hn::Shuffle2301(hn::BitCast(du32, v)));
    };
    // Only the low 32 bits of each 64-bit lane carry a word; the high halves hold leftovers
    // that MulEven ignores and the final interleave drops.
    hn::Vec<PhiloxU64Tag> c0[kGroups], c1[kGroups], c2[kGroups], c3[kGroups];
    const uint64_t group_blocks = hn::Lanes(du64);
    for (int g = 0; g < kGroups; ++g) {
      // Round 1 with c2 = c3 = 0: product1 = 0.
      const auto block = hn::Add(hn::Set(du64, first_block + g * group_blocks), lane_blocks_);
      const auto product0 = hn::MulEven(hn::BitCast(du32, block), multiplier0);
      c0[g] = hn::Xor(hn::ShiftRight<32>(block), hn::Set(du64, keys_[0][0]));
      c1[g] = hn::Zero(du64);
      c2[g] = hn::Xor(hn::ShiftRight<32>(product0), hn::Set(du64, keys_[0][1]));
      c3[g] = product0;
    }
    for (int round = 1; round < 10; ++round) {
      // Keys kept as 64-bit words load as broadcasts, with no shuffle.
      const auto key0 = hn::Set(du64, keys_[round][0]);
      const auto key1 = hn::Set(du64, keys_[round][1]);
      for (int g = 0; g < kGroups; ++g) {
        const auto product0 = hn::MulEven(hn::BitCast(du32, c0[g]), multiplier0);
        const auto product1 = hn::MulEven(hn::BitCast(du32, c2[g]), multiplier1);
        c0[g] = hn::Xor3(swap_halves(product1), c1[g], key0);
        c1[g] = product1;
        c2[g] = hn::Xor3(swap_halves(product0), c3[g], key1);
        c3[g] = product0;
      }
    }
    for (int g = 0; g < kGroups; ++g) {
      // Per block (64-bit lane): words 0 and 1, words 2 and 3 as 32-bit pairs.
      const auto words01 = hn::BitCast(
          du64, hn::OddEven(hn::BitCast(du32, swap_halves(c1[g])), hn::BitCast(du32, c0[g])));
      const auto words23 = hn::BitCast(
          du64, hn::OddEven(hn::BitCast(du32, swap_halves(c3[g])), hn::BitCast(du32, c2[g])));
      bits[2 * g] = hn::BitCast(du32, hn::InterleaveLower(du64, words01, words23));
      bits[2 * g + 1] = hn::BitCast(du32, hn::InterleaveUpper(du64, words01, words23));
    }
  }

 private:
  hn::Vec<PhiloxU64Tag> lane_blocks_;
  uint64_t keys_[10][2];  // 32-bit keys, widened
};

// Which lanes a dropout keeps, from their random bits.
HWY_INLINE auto kept_lanes(const DropoutConstants& c, PhiloxV32 bits) {
  return hn::Not(hn::Lt(bits, hn::Set(PhiloxU32Tag(), c.threshold)));
}

// The mask of one vector of lanes, a byte per lane: 1 where kept, 0 where dropped.
template <class M>
HWY_INLINE void store_keep_bytes(M kept, uint8_t* HWY_RESTRICT keep) {
  const PhiloxU32Tag du32;
  const hn::Rebind<uint8_t, PhiloxU32Tag> du8;
  const auto ones = hn::IfThenElseZero(kept, hn::Set(du32, 1u));
  hn::StoreU(hn::DemoteTo(du8, hn::BitCast(hn::RebindToSigned<PhiloxU32Tag>(), ones)), du8, keep);
}

// The lanes of s dropped out: s * scale (float64, rounded once) where kept, s * 0 elsewhere
// (dropped_one, reference::dropout_dropped_value).
template <class DF, class M>
HWY_INLINE hn::Vec<DF> dropped_lanes(DF df, hn::Vec<DF> s, M kept, double scale) {
  const hn::Half<DF> dfh;
  const hn::Repartition<double, DF> dd;
  const auto scale_v = hn::Set(dd, scale);
  const auto lower = hn::DemoteTo(dfh, hn::Mul(hn::PromoteTo(dd, hn::LowerHalf(dfh, s)), scale_v));
  const auto upper = hn::DemoteTo(dfh, hn::Mul(hn::PromoteTo(dd, hn::UpperHalf(dfh, s)), scale_v));
  return hn::IfThenElse(hn::RebindMask(df, kept), hn::Combine(df, upper, lower),
                        hn::Mul(s, hn::Zero(df)));
}

#endif  // HWY_TARGET != HWY_SCALAR

}  // namespace HWY_NAMESPACE
}  // namespace addnorm::cpu
HWY_AFTER_NAMESPACE();

#endif  // ADDNORM_OPS_CPU_PHILOX_INL_H_
