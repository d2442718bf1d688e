// The dropout mask's random source: Philox4x32-10 (Salmon et al., "Parallel random numbers: as
// easy as 1, 2, 3", SC 2011), a counter-based generator. Element e of a stream keyed by seed
// takes lane e % 4 of philox(counter = e / 4, key = seed), so any element's bits can be computed
// on their own: a mask is the same for every thread count and is regenerated, never stored.
#pragma once

#include <array>
#include <cstdint>

namespace addnorm::reference {

inline std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> counter,
                                             std::array<uint32_t, 2> key) {
  constexpr uint32_t kMultiplier0 = 0xD2511F53u, kMultiplier1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    const uint64_t product0 = uint64_t{kMultiplier0} * counter[0];
    const uint64_t product1 = uint64_t{kMultiplier1} * counter[2];
    counter = {static_cast<uint32_t>(product1 >> 32) ^ counter[1] ^ key[0],
               static_cast<uint32_t>(product1),
               static_cast<uint32_t>(product0 >> 32) ^ counter[3] ^ key[1],
               static_cast<uint32_t>(product0)};
    key[0] += kWeyl0;
    key[1] += kWeyl1;
  }
  return counter;
}

// The 32 random bits of element `element` of the stream keyed by `seed`.
inline uint32_t philox_bits(uint64_t seed, uint64_t element) {
  const uint64_t block = element / 4;
  const auto out =
      philox4x32_10({static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), 0u, 0u},
                    {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
  return out[element % 4];
}

// Elements whose 32 bits fall below floor(p * 2^32) are dropped: probability p to within 2^-32.
// (Saturates at 2^32 - 1, which no float p < 1 reaches: a float64 p just below 1 rounds to a
// float p of 1.)
inline uint32_t dropout_threshold(float p) {
  const double scaled = static_cast<double>(p) * 4294967296.0;
  return scaled >= 4294967295.0 ? UINT32_MAX : static_cast<uint32_t>(scaled);
}

inline bool dropout_keeps(uint64_t seed, uint64_t element, uint32_t threshold) {
  return philox_bits(seed, element) >= threshold;
}

// The value of a kept element: x * (1 / (1 - p)) in float64, rounded once to float32.
inline float dropout_kept_value(float x, float p) {
  return static_cast<float>(static_cast<double>(x) * (1.0 / (1.0 - static_cast<double>(p))));
}

// The value of a dropped element: x * 0, as PyTorch's x * mask, not 0 in its place: a NaN or an
// infinity stays NaN (a non-finite value still poisons what it reaches), a negative x gives -0.
inline float dropout_dropped_value(float x) {
  return x * 0.0f;
}

}  // namespace addnorm::reference
