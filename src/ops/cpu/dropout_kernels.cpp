// Dropout masks at SIMD speed: Philox4x32-10 evaluated for many counter blocks at once (one
// block per 64-bit lane, 32x32 -> 64-bit products with MulEven), then applied to a row.
// Bit for bit the same stream as the scalar definition in ops/reference/philox.hpp.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/cpu/dropout_kernels.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include "hwy/highway.h"
#include "ops/cpu/dropout.hpp"
#include "ops/reference/philox.hpp"

HWY_BEFORE_NAMESPACE();
namespace addnorm::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// bits[i] = the 32 random bits of element first_element + i of the stream keyed by seed.
void philox_bits_range(uint64_t seed, uint64_t first_element, uint32_t* HWY_RESTRICT bits,
                       int64_t count) {
  int64_t i = 0;
  // Scalar until the element index is a multiple of 4 (a block boundary).
  for (; i < count && (first_element + static_cast<uint64_t>(i)) % 4 != 0; ++i) {
    bits[i] = reference::philox_bits(seed, first_element + static_cast<uint64_t>(i));
  }
#if HWY_TARGET != HWY_SCALAR
  const hn::ScalableTag<uint64_t> du64;
  const hn::Repartition<uint32_t, decltype(du64)> du32;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(du64));
  const auto low32 = hn::Set(du64, 0xFFFFFFFFull);
  const auto multiplier0 = hn::BitCast(du32, hn::Set(du64, 0xD2511F53ull));
  const auto multiplier1 = hn::BitCast(du32, hn::Set(du64, 0xCD9E8D57ull));
  uint32_t round_keys[10][2];
  round_keys[0][0] = static_cast<uint32_t>(seed);
  round_keys[0][1] = static_cast<uint32_t>(seed >> 32);
  for (int round = 1; round < 10; ++round) {
    round_keys[round][0] = round_keys[round - 1][0] + 0x9E3779B9u;
    round_keys[round][1] = round_keys[round - 1][1] + 0xBB67AE85u;
  }
  HWY_ALIGN uint64_t words[4][HWY_MAX_BYTES / sizeof(uint64_t)];
  for (; i + 4 * lanes <= count; i += 4 * lanes) {
    const uint64_t first_block = (first_element + static_cast<uint64_t>(i)) / 4;
    const auto block = hn::Iota(du64, first_block);
    auto c0 = hn::And(block, low32);
    auto c1 = hn::ShiftRight<32>(block);
    auto c2 = hn::Zero(du64);
    auto c3 = hn::Zero(du64);
    for (int round = 0; round < 10; ++round) {
      const auto product0 = hn::MulEven(hn::BitCast(du32, c0), multiplier0);
      const auto product1 = hn::MulEven(hn::BitCast(du32, c2), multiplier1);
      const auto key0 = hn::Set(du64, round_keys[round][0]);
      const auto key1 = hn::Set(du64, round_keys[round][1]);
      c0 = hn::Xor(hn::Xor(hn::ShiftRight<32>(product1), c1), key0);
      c1 = hn::And(product1, low32);
      c2 = hn::Xor(hn::Xor(hn::ShiftRight<32>(product0), c3), key1);
      c3 = hn::And(product0, low32);
    }
    hn::Store(c0, du64, words[0]);
    hn::Store(c1, du64, words[1]);
    hn::Store(c2, du64, words[2]);
    hn::Store(c3, du64, words[3]);
    // Element 4b + j is word j of block b.
    for (int64_t b = 0; b < lanes; ++b) {
      for (int j = 0; j < 4; ++j) bits[i + 4 * b + j] = static_cast<uint32_t>(words[j][b]);
    }
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

void philox_bits(uint64_t seed, uint64_t first_element, uint32_t* bits, int64_t count) {
  HWY_DYNAMIC_DISPATCH(philox_bits_range)(seed, first_element, bits, count);
}

void apply_dropout(const float* input, float* output, int64_t count,
                   const DropoutOptions& options, uint64_t first_element) {
  if (options.p == 0.0f) {
    std::copy(input, input + count, output);
    return;
  }
  const uint32_t threshold = reference::dropout_threshold(options.p);
  constexpr int64_t kBlock = 1024;
  uint32_t bits[kBlock];
  for (int64_t start = 0; start < count; start += kBlock) {
    const int64_t length = std::min(kBlock, count - start);
    philox_bits(options.seed, first_element + static_cast<uint64_t>(start), bits, length);
    for (int64_t i = 0; i < length; ++i) {
      output[start + i] =
          bits[i] >= threshold ? reference::dropout_kept_value(input[start + i], options.p) : 0.0f;
    }
  }
}

}  // namespace addnorm::cpu
#endif  // HWY_ONCE
