#include "cli/exact_numbers.hpp"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "addnorm/ops.hpp"

namespace addnorm::cli {
namespace {

// The double the whole of `text` spells, or nothing (empty, trailing junk, out of range).
std::optional<double> parse_double(const std::string& text) {
  double value = 0.0;
  const char* begin = text.data();
  const char* end = begin + text.size();
  if (begin != end && *begin == '+') ++begin;  // from_chars takes no leading '+'
  const auto [stop, error] = std::from_chars(begin, end, value);
  if (error != std::errc() || stop != end || !std::isfinite(value)) return std::nullopt;
  return value;
}

}  // namespace

CLI::Validator exact_unsigned() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        uint64_t value = 0;
        const char* end = text.data() + text.size();
        const auto [stop, error] = std::from_chars(text.data(), end, value);
        if (text.empty() || text.front() == '-' || text.front() == '+') {
          return "is " + text + ", expected a whole number from 0 to 18446744073709551615";
        }
        if (error == std::errc::result_out_of_range) {
          return "is " + text + ", larger than the largest allowed, 18446744073709551615";
        }
        if (error != std::errc() || stop != end) {
          return "is " + text + ", expected a whole number from 0 to 18446744073709551615";
        }
        return {};
      },
      "UINT64");
}

std::string float32_rounding_problem(const std::string& text, bool below_one) {
  const std::optional<double> value = parse_double(text);
  if (!value) return "is " + text + ", expected a finite decimal number";
  const double magnitude = std::fabs(*value);
  if (magnitude > static_cast<double>(std::numeric_limits<float>::max())) {
    return "is " + text + ", beyond float32's range (" + kFloat32RangeLimit + ")";
  }
  const float rounded = static_cast<float>(*value);
  if (*value != 0.0 && rounded == 0.0f) {
    return "is " + text + ", too small for float32 (it would become 0)";
  }
  // (A value of 1 or more is the option's own range check, with its own message.)
  if (below_one && *value < 1.0 && rounded >= 1.0f) {
    return "is " + text + ", which rounds to 1 in float32; expected a value below 1";
  }
  return {};
}

CLI::Validator exact_float32(bool below_one) {
  return CLI::Validator(
      [below_one](std::string& text) { return float32_rounding_problem(text, below_one); },
      "FLOAT32");
}

CLI::Validator finite_double() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        return parse_double(text) ? std::string() : "is " + text + ", expected a finite number";
      },
      "NUMBER");
}

}  // namespace addnorm::cli
