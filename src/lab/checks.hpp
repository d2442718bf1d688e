// Parameter checks shared by the experiments. Each throws addnorm::Error naming the parameter,
// the value it got and the limits it expected, so the CLI and the web page can show it as is.
#pragma once

#include <cmath>
#include <cstdint>
#include <span>
#include <sstream>
#include <string>

#include "addnorm/error.hpp"

namespace addnorm::lab {

inline std::string number_text(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

inline void check_integer(const std::string& name, int64_t value, int64_t low, int64_t high) {
  if (value < low || value > high) {
    throw Error(name + " is " + std::to_string(value) + ", expected an integer in [" +
                std::to_string(low) + ", " + std::to_string(high) + "]");
  }
}

// A finite real in [low, high].
inline void check_real(const std::string& name, double value, double low, double high) {
  if (!std::isfinite(value) || value < low || value > high) {
    throw Error(name + " is " + number_text(value) + ", expected a finite number in [" +
                number_text(low) + ", " + number_text(high) + "]");
  }
}

// A value in float32's range that stays nonzero when rounded to float32 if it is nonzero (the
// caller has bounded its magnitude, so the conversion is defined).
inline void check_float32_nonzero(const std::string& name, double value) {
  if (value != 0.0 && static_cast<float>(value) == 0.0f) {
    throw Error(name + " is " + number_text(value) + ", too small for float32 (it would become 0)");
  }
}

// A finite real in [low, high).
inline void check_real_below(const std::string& name, double value, double low, double high) {
  if (!std::isfinite(value) || value < low || value >= high) {
    throw Error(name + " is " + number_text(value) + ", expected a finite number in [" +
                number_text(low) + ", " + number_text(high) + ")");
  }
}

inline void check_count(const std::string& name, size_t count, size_t low, size_t high) {
  if (count < low || count > high) {
    throw Error(name + " has " + std::to_string(count) + " values, expected " +
                std::to_string(low) + (low == high ? "" : " to " + std::to_string(high)));
  }
}

template <class T>
void check_each_integer(const std::string& name, std::span<const T> values, int64_t low,
                        int64_t high) {
  for (size_t i = 0; i < values.size(); ++i) {
    check_integer(name + "[" + std::to_string(i) + "]", static_cast<int64_t>(values[i]), low, high);
  }
}

inline void check_each_real(const std::string& name, std::span<const double> values, double low,
                            double high) {
  for (size_t i = 0; i < values.size(); ++i) {
    check_real(name + "[" + std::to_string(i) + "]", values[i], low, high);
  }
}

}  // namespace addnorm::lab
