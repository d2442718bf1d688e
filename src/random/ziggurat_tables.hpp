// The 256-layer ziggurat tables behind NumPy's Generator.standard_normal, computed once at first
// use. Private to src/random/; the tests include it to compare the tables with NumPy's.
#pragma once

#include <array>
#include <cstdint>

namespace addnorm::numpy_random {

inline constexpr int kZigguratLayers = 256;

// Where the normal's tail starts (the base layer's right edge) and its reciprocal, exactly as
// NumPy spells them (the reciprocal is a literal there, not computed).
inline constexpr double kZigguratTailStart = 3.6541528853610087963519472518;
inline constexpr double kZigguratInverseTailStart = 0.27366123732975827203338247596;

// Layer 0 is the base (rectangle plus tail); layer 255 is the widest ordinary layer, whose edge
// is kZigguratTailStart; layer 1 is the top, narrowest one.
struct ZigguratTables {
  // A 52-bit magnitude m in layer i is accepted at once when m < accept_below[i] (the layer's
  // inner edge over its outer edge, times 2^52).
  std::array<uint64_t, kZigguratLayers> accept_below;
  // The sample is m * width_scale[i] (the layer's outer edge over 2^52).
  std::array<double, kZigguratLayers> width_scale;
  // exp(-x^2/2) at each layer's outer edge, for the wedge test.
  std::array<double, kZigguratLayers> density_at_edge;
};

const ZigguratTables& normal_ziggurat_tables();

}  // namespace addnorm::numpy_random
