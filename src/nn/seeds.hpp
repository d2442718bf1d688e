// Derived seeds: each block, dropout site and embedding gets its own stream from the model seed,
// so adding a layer never changes the weights or masks of another.
#pragma once

#include <cstdint>

namespace addnorm::nn::detail {

// SplitMix64's finaliser: a bijective mix of 64 bits.
inline uint64_t mix64(uint64_t value) {
  value += 0x9e3779b97f4a7c15ULL;
  value = (value ^ (value >> 30)) * 0xbf58476d1ce4e5b9ULL;
  value = (value ^ (value >> 27)) * 0x94d049bb133111ebULL;
  return value ^ (value >> 31);
}

inline uint64_t derive_seed(uint64_t seed, uint64_t a, uint64_t b = 0) {
  return mix64(seed ^ mix64(a * 0x100000001b3ULL + mix64(b)));
}

// Salts naming what a derived seed is for.
inline constexpr uint64_t kWeightsSalt = 1;
inline constexpr uint64_t kDropoutSalt = 2;
inline constexpr uint64_t kEmbeddingSalt = 3;

}  // namespace addnorm::nn::detail
