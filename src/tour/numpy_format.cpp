// Python's and NumPy's float printing, rebuilt from the shortest round-trip digits that
// std::to_chars gives (the same digits as Python's repr and NumPy's Dragon4 in unique mode).
#include "tour/numpy_format.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace addnorm::tour {
namespace {

// A finite value as sign, significant digits d1 d2 d3 ... and the decimal exponent of d1:
// value = d1.d2d3... * 10^exponent.
struct DecimalDigits {
  bool negative = false;
  std::string digits;
  int exponent = 0;
};

DecimalDigits from_scientific_text(std::string_view text) {
  DecimalDigits result;
  if (text.front() == '-') {
    result.negative = true;
    text.remove_prefix(1);
  }
  const size_t e = text.find('e');
  for (char c : text.substr(0, e)) {
    if (c != '.') result.digits += c;
  }
  result.exponent =
      static_cast<int>(std::strtol(std::string(text.substr(e + 1)).c_str(), nullptr, 10));
  return result;
}

// The shortest digits that read back as the same value of type T.
template <class T>
DecimalDigits shortest_digits(T value) {
  std::array<char, 64> buffer{};
  const auto result = std::to_chars(buffer.data(), buffer.data() + buffer.size(), value,
                                    std::chars_format::scientific);
  return from_scientific_text({buffer.data(), static_cast<size_t>(result.ptr - buffer.data())});
}

// Digits rounded (correctly, by printf) to `significant` significant digits.
DecimalDigits rounded_digits(double value, int significant) {
  std::array<char, 64> buffer{};
  std::snprintf(buffer.data(), buffer.size(), "%.*e", significant - 1, value);
  return from_scientific_text(buffer.data());
}

std::string printf_text(const char* format, int decimals, double value) {
  std::array<char, 512> buffer{};
  std::snprintf(buffer.data(), buffer.size(), format, decimals, value);
  return buffer.data();
}

// Integer and fraction digits of the positional form (no sign, no trailing fraction zeros).
struct Positional {
  std::string integer;
  std::string fraction;
};

Positional positional(const DecimalDigits& d) {
  Positional p;
  const int count = static_cast<int>(d.digits.size());
  if (d.exponent >= 0) {
    const int integer_count = d.exponent + 1;
    p.integer = d.digits.substr(0, static_cast<size_t>(std::min(integer_count, count)));
    p.integer.append(static_cast<size_t>(std::max(0, integer_count - count)), '0');
    if (count > integer_count) p.fraction = d.digits.substr(static_cast<size_t>(integer_count));
  } else {
    p.integer.push_back('0');
    p.fraction.assign(static_cast<size_t>(-d.exponent - 1), '0');
    p.fraction += d.digits;
  }
  while (!p.fraction.empty() && p.fraction.back() == '0') p.fraction.pop_back();
  return p;
}

std::string exponent_text(int exponent, size_t min_digits) {
  std::string digits = std::to_string(std::abs(exponent));
  if (digits.size() < min_digits) digits.insert(0, min_digits - digits.size(), '0');
  return std::string(exponent < 0 ? "-" : "+") + digits;
}

template <class T>
std::string repr_of(T value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
  const DecimalDigits d = shortest_digits(value);
  const std::string sign = d.negative ? "-" : "";
  // Python switches to exponent notation below 1e-4 and from 1e16 on.
  if (d.exponent >= -4 && d.exponent < 16) {
    const Positional p = positional(d);
    return sign + p.integer + "." + (p.fraction.empty() ? "0" : p.fraction);
  }
  std::string mantissa = d.digits.substr(0, 1);
  if (d.digits.size() > 1) {
    mantissa += '.';
    mantissa += d.digits.substr(1);
  }
  return sign + mantissa + "e" + exponent_text(d.exponent, 2);
}

// NumPy's default print precision: at most 8 digits after the point.
constexpr int kNumpyPrecision = 8;

// One element as NumPy's Dragon4 prints it in unique mode, before padding.
struct NumpyElement {
  bool finite = true;
  std::string special;  // "nan", "inf", "-inf" when not finite
  std::string integer;  // with its sign
  std::string fraction;
  int exponent = 0;  // exponent format only
};

NumpyElement positional_element(double value) {
  DecimalDigits d = shortest_digits(value);
  Positional p = positional(d);
  if (static_cast<int>(p.fraction.size()) > kNumpyPrecision) {
    // More digits than the precision allows: round the exact value to 8 decimals instead.
    const std::string text = printf_text("%.*f", kNumpyPrecision, std::fabs(value));
    const size_t point = text.find('.');
    p.integer = text.substr(0, point);
    p.fraction = text.substr(point + 1);
    while (!p.fraction.empty() && p.fraction.back() == '0') p.fraction.pop_back();
  }
  return {true, "", (d.negative ? "-" : "") + p.integer, p.fraction, 0};
}

NumpyElement scientific_element(double value) {
  DecimalDigits d = shortest_digits(value);
  if (static_cast<int>(d.digits.size()) > kNumpyPrecision + 1) {
    d = rounded_digits(value, kNumpyPrecision + 1);
  }
  while (d.digits.size() > 1 && d.digits.back() == '0') d.digits.pop_back();
  return {true, "", (d.negative ? "-" : "") + d.digits.substr(0, 1), d.digits.substr(1),
          d.exponent};
}

// NumPy switches a whole array to exponent format when its finite non-zero magnitudes span
// more than a factor 1000, or reach below 1e-4 or 1e8.
bool needs_exponent_format(std::span<const double> values) {
  double smallest = INFINITY, largest = 0.0;
  for (double v : values) {
    if (!std::isfinite(v) || v == 0.0) continue;
    smallest = std::min(smallest, std::fabs(v));
    largest = std::max(largest, std::fabs(v));
  }
  if (largest == 0.0) return false;
  return largest >= 1e8 || smallest < 1e-4 || largest / smallest > 1000.0;
}

// Formats every element of an array to the same width, as NumPy's FloatingFormat does.
std::vector<std::string> numpy_elements(std::span<const double> values) {
  const bool exponent_format = needs_exponent_format(values);
  std::vector<NumpyElement> elements;
  for (double v : values) {
    if (!std::isfinite(v)) {
      elements.push_back({false, std::isnan(v) ? "nan" : (v < 0 ? "-inf" : "inf"), "", "", 0});
    } else {
      elements.push_back(exponent_format ? scientific_element(v) : positional_element(v));
    }
  }
  size_t pad_left = 0, pad_right = 0, exponent_digits = 2;
  for (const NumpyElement& e : elements) {
    if (!e.finite) continue;
    pad_left = std::max(pad_left, e.integer.size());
    pad_right = std::max(pad_right, e.fraction.size());
    exponent_digits = std::max(exponent_digits, std::to_string(std::abs(e.exponent)).size());
  }
  const size_t right_of_integer = 1 + pad_right + (exponent_format ? 2 + exponent_digits : 0);
  // "nan" and "inf" (with "-" when a negative infinity is present) must fit in the width.
  bool any_special = false, negative_infinity = false;
  for (const NumpyElement& e : elements) {
    any_special |= !e.finite;
    negative_infinity |= e.special == "-inf";
  }
  const size_t special_width = negative_infinity ? 4 : 3;
  if (any_special && special_width > right_of_integer) {
    pad_left = std::max(pad_left, special_width - right_of_integer);
  }
  const size_t width = pad_left + right_of_integer;
  std::vector<std::string> texts;
  for (const NumpyElement& e : elements) {
    std::string text;
    if (!e.finite) {
      text = std::string(width > e.special.size() ? width - e.special.size() : 0, ' ') + e.special;
    } else if (exponent_format) {
      // Every mantissa gets the same number of digits, padded with zeros.
      text = std::string(pad_left - e.integer.size(), ' ') + e.integer + "." + e.fraction +
             std::string(pad_right - e.fraction.size(), '0') + "e" +
             exponent_text(e.exponent, exponent_digits);
    } else {
      // Integer parts are right-aligned, fractions left-aligned and padded with spaces.
      text = std::string(pad_left - e.integer.size(), ' ') + e.integer + "." + e.fraction +
             std::string(pad_right - e.fraction.size(), ' ');
    }
    texts.push_back(text);
  }
  return texts;
}

std::string bracketed_row(const std::vector<std::string>& texts, size_t begin, size_t end) {
  std::string row = "[";
  for (size_t i = begin; i < end; ++i) {
    if (i > begin) row += " ";
    row += texts[i];
  }
  return row + "]";
}

}  // namespace

std::string python_repr(double value) {
  return repr_of(value);
}
std::string python_repr_float32(float value) {
  return repr_of(value);
}

std::string python_list(std::span<const double> values) {
  std::string text = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) text += ", ";
    text += python_repr(values[i]);
  }
  return text + "]";
}

std::string python_list_float32(std::span<const double> values) {
  std::string text = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) text += ", ";
    text += python_repr_float32(static_cast<float>(values[i]));
  }
  return text + "]";
}

double python_round(double value, int ndigits) {
  if (!std::isfinite(value)) return value;
  // glibc's printf rounds the exact binary value correctly, as Python's round() does.
  return std::strtod(printf_text("%.*f", ndigits, value).c_str(), nullptr);
}

double numpy_round(double value, int decimals) {
  const double scale = std::pow(10.0, decimals);
  return std::rint(value * scale) / scale;
}

std::vector<double> numpy_round(std::span<const double> values, int decimals) {
  std::vector<double> rounded;
  for (double v : values) rounded.push_back(numpy_round(v, decimals));
  return rounded;
}

std::vector<double> plus_zero(std::vector<double> values) {
  for (double& v : values) v += 0.0;
  return values;
}

std::string numpy_str(std::span<const double> values) {
  const std::vector<std::string> texts = numpy_elements(values);
  return bracketed_row(texts, 0, texts.size());
}

std::string numpy_str(std::span<const double> values, int64_t rows, int64_t cols) {
  const std::vector<std::string> texts = numpy_elements(values);
  std::string text = "[";
  for (int64_t row = 0; row < rows; ++row) {
    if (row > 0) text += "\n ";
    const auto begin = static_cast<size_t>(row * cols);
    text += bracketed_row(texts, begin, begin + static_cast<size_t>(cols));
  }
  return text + "]";
}

std::string prose_number(double value, int decimals) {
  std::string text = printf_text("%.*f", decimals, value);
  if (text.find('.') != std::string::npos) {
    while (text.back() == '0') text.pop_back();
    if (text.back() == '.') text.pop_back();
  }
  if (text == "-0") text = "0";
  return text;
}

std::string prose_list(std::span<const double> values, int decimals) {
  std::string text = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) text += ", ";
    text += prose_number(values[i], decimals);
  }
  return text + "]";
}

std::string fixed(double value, int decimals) {
  return printf_text("%.*f", decimals, value);
}
std::string scientific(double value, int decimals) {
  return printf_text("%.*e", decimals, value);
}

}  // namespace addnorm::tour
