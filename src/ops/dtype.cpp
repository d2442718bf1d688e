// Scalar conversions between float32 and the 16-bit storage types, rounding to nearest even.
// The SIMD kernels (ops/cpu/convert_kernels.cpp) are tested against these on every target.
#include "addnorm/dtype.hpp"

#include <cmath>

namespace addnorm {
namespace {

// std::bit_cast, which the libc++ of Emscripten 3.1.6 (the WebAssembly build, wasm/) lacks.
template <class To, class From>
To bits_as(From value) {
  return __builtin_bit_cast(To, value);
}

}  // namespace

int64_t dtype_size(DType dtype) {
  return dtype == DType::float32 ? 4 : 2;
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::float32:
      return "float32";
    case DType::bfloat16:
      return "bfloat16";
    case DType::float16:
      return "float16";
  }
  return "unknown";
}

float to_float(bfloat16 value) {
  return bits_as<float>(uint32_t{value.bits} << 16);
}

bfloat16 to_bfloat16(float value) {
  const uint32_t bits = bits_as<uint32_t>(value);
  if (std::isnan(value)) return {static_cast<uint16_t>((bits >> 16) | 0x40)};  // keep it quiet
  // Adding 0x7FFF plus the lowest kept bit rounds to nearest, ties to even.
  const uint32_t rounded = bits + 0x7FFFu + ((bits >> 16) & 1u);
  return {static_cast<uint16_t>(rounded >> 16)};
}

// The float16 conversions give the bits of x86's F16C instructions for every input (a NaN keeps
// its sign and the top of its payload, made quiet), as every SIMD target's kernels do
// (src/ops/cpu/narrow-inl.h): the scalar ends of rows then match the vector lanes.
float to_float(float16 value) {
  const uint32_t sign = uint32_t{value.bits & 0x8000u} << 16;
  const uint32_t exponent = (value.bits >> 10) & 0x1Fu;
  const uint32_t mantissa = value.bits & 0x3FFu;
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 31) {  // Inf, or NaN with its payload, quiet (as F16C widens it)
    const uint32_t quiet = mantissa != 0 ? 0x00400000u : 0u;
    return bits_as<float>(sign | 0x7F800000u | quiet | (mantissa << 13));
  }
  return bits_as<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

float16 to_float16(float value) {
  const uint32_t bits = bits_as<uint32_t>(value);
  const auto sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  if (std::isnan(value)) {  // the top of the payload, quiet (as F16C narrows it)
    return {static_cast<uint16_t>(sign | 0x7E00u | ((bits >> 13) & 0x3FFu))};
  }
  const float magnitude = std::fabs(value);
  if (magnitude >= 65520.0f) return {static_cast<uint16_t>(sign | 0x7C00u)};  // rounds to Inf
  if (magnitude < 0x1p-14f) {
    // Subnormal range: a multiple of 2^-24, rounded to nearest even by nearbyint.
    const auto units = static_cast<uint16_t>(std::nearbyint(magnitude * 0x1p24f));
    return {static_cast<uint16_t>(sign | units)};
  }
  // Normal: keep 10 of float32's 23 mantissa bits, rounding to nearest even (a carry into the
  // exponent is the correct result).
  const uint32_t magnitude_bits = bits & 0x7FFFFFFFu;
  const uint32_t rounded = magnitude_bits + 0xFFFu + ((magnitude_bits >> 13) & 1u);
  return {static_cast<uint16_t>(sign | ((rounded >> 13) - (112u << 10)))};
}

}  // namespace addnorm
