// The shortest text that reads back as the same value (-1e-09, not -0.000000): error messages
// and the lab's CSV. std::to_chars where the C++ library has it for floating point; elsewhere
// (Emscripten 3.1.6's libc++, the WebAssembly build in wasm/) the fewest %g digits that round-trip.
#pragma once

#include <array>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <type_traits>

namespace addnorm {

template <class T>
std::string shortest_text(T value) {
  static_assert(std::is_floating_point_v<T>);
  std::array<char, 40> text{};
#if defined(__cpp_lib_to_chars)
  const auto result = std::to_chars(text.data(), text.data() + text.size(), value);
  return std::string(text.data(), result.ptr);
#else
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(text.data(), text.size(), "%.*g", digits, static_cast<double>(value));
    if (static_cast<T>(std::strtod(text.data(), nullptr)) == value) break;
  }
  return std::string(text.data());
#endif
}

}  // namespace addnorm
