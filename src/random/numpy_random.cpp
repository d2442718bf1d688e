// np.random.default_rng(seed): PCG64 (128-bit LCG, XSL-RR output) seeded through SeedSequence,
// and Generator.normal by NumPy's ziggurat (random_standard_normal in distributions.c).
#include "addnorm/numpy_random.hpp"

#include <cmath>
#include <string>

#include "addnorm/error.hpp"
#include "random/ziggurat_tables.hpp"

namespace addnorm::numpy_random {
namespace {

__extension__ typedef unsigned __int128 uint128_t;

constexpr uint128_t kPcgMultiplier =
    (static_cast<uint128_t>(0x2360ed051fc65da4ULL) << 64) | 0x4385df649fccf645ULL;

uint128_t join(uint64_t high, uint64_t low) {
  return (static_cast<uint128_t>(high) << 64) | low;
}
uint64_t high_half(uint128_t value) {
  return static_cast<uint64_t>(value >> 64);
}
uint64_t low_half(uint128_t value) {
  return static_cast<uint64_t>(value);
}

// NumPy rejects a negative scale (including -0.0) and lets NaN through.
void check_scale(double scale) {
  if (std::signbit(scale) && !std::isnan(scale)) {
    throw Error("scale is " + std::to_string(scale) + ", expected scale >= 0");
  }
}

uint64_t rotate_right(uint64_t value, unsigned amount) {
  return (value >> amount) | (value << ((64 - amount) & 63));
}

}  // namespace

Generator::Generator(uint64_t seed) {
  // NumPy asks SeedSequence for four uint64 (eight uint32 read little-endian): the first two
  // are the initial state (high word first), the last two the stream selector.
  const std::vector<uint32_t> words = seed_sequence_state(seed, 8);
  uint64_t seed_words[4];
  for (int i = 0; i < 4; ++i) {
    seed_words[i] = words[2 * i] | (static_cast<uint64_t>(words[2 * i + 1]) << 32);
  }
  const uint128_t initial_state = join(seed_words[0], seed_words[1]);
  const uint128_t stream = join(seed_words[2], seed_words[3]);

  // PCG's srandom: the increment must be odd; the state is stepped before and after adding the
  // initial state so that nearby seeds start far apart.
  const uint128_t increment = (stream << 1) | 1;
  uint128_t state = increment;  // one step from state 0
  state += initial_state;
  state = state * kPcgMultiplier + increment;
  state_high_ = high_half(state);
  state_low_ = low_half(state);
  increment_high_ = high_half(increment);
  increment_low_ = low_half(increment);
}

uint64_t Generator::next_uint64() {
  // Step the LCG, then output the new state: xor its halves and rotate by its top 6 bits.
  const uint128_t state =
      join(state_high_, state_low_) * kPcgMultiplier + join(increment_high_, increment_low_);
  state_high_ = high_half(state);
  state_low_ = low_half(state);
  return rotate_right(state_high_ ^ state_low_, static_cast<unsigned>(state_high_ >> 58));
}

double Generator::next_double() {
  return static_cast<double>(next_uint64() >> 11) * (1.0 / 9007199254740992.0);
}

double Generator::standard_normal() {
  const ZigguratTables& tables = normal_ziggurat_tables();
  for (;;) {
    // One draw gives the layer (8 bits), the sign (1 bit) and a 52-bit magnitude.
    const uint64_t bits = next_uint64();
    const int layer = static_cast<int>(bits & 0xff);
    const bool negative = ((bits >> 8) & 1) != 0;
    const uint64_t magnitude = (bits >> 9) & 0x000fffffffffffffULL;
    double x = static_cast<double>(magnitude) * tables.width_scale[layer];
    if (negative) x = -x;
    // Inside the rectangle that lies wholly under the density: about 99% of draws.
    if (magnitude < tables.accept_below[layer]) return x;

    if (layer == 0) {
      // The tail beyond r, by Marsaglia's exponential method. NumPy uses 1 - U (log1p(-U)) so
      // the logarithm never sees zero, and takes the sign from bit 8 of the magnitude.
      for (;;) {
        const double excess = -kZigguratInverseTailStart * std::log1p(-next_double());
        const double exponential = -std::log1p(-next_double());
        if (exponential + exponential > excess * excess) {
          const double value = kZigguratTailStart + excess;
          return ((magnitude >> 8) & 1) != 0 ? -value : value;
        }
      }
    }
    // The wedge between the rectangle and the density: accept under the curve, else redraw.
    const double below = tables.density_at_edge[layer];
    const double above = tables.density_at_edge[layer - 1];
    if ((above - below) * next_double() + below < std::exp(-0.5 * x * x)) return x;
  }
}

double Generator::normal(double loc, double scale) {
  check_scale(scale);
  return loc + scale * standard_normal();
}

std::vector<double> Generator::normal(double loc, double scale, int64_t count) {
  if (count < 0) {
    throw Error("count is " + std::to_string(count) + ", expected a non-negative count");
  }
  check_scale(scale);
  std::vector<double> values(static_cast<size_t>(count));
  for (double& value : values) value = loc + scale * standard_normal();
  return values;
}

}  // namespace addnorm::numpy_random
