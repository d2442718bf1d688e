// Number options read exactly as typed. CLI11 hands "-1" to strtoull (which wraps it to
// 2^64 - 1), saturates "2^64", and lets "1e50" become a float infinity: each changed a value
// without a word. These validators look at the text before any conversion and refuse, quoting
// it, whatever the option's type could not hold exactly as asked.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>

namespace addnorm::cli {

// A decimal integer in [0, 2^64 - 1]: digits only, no sign, no exponent.
CLI::Validator exact_unsigned();

// A decimal number whose float32 rounding is finite, and is not 0 unless the text is 0. With
// `below_one`, a value below 1 must also stay below 1 when rounded (dropout's p: 0.99999999999
// rounds to 1).
CLI::Validator exact_float32(bool below_one = false);
// exact_float32's rule as a check of its own, for numbers whose limits depend on the run (eps and
// momentum: a float32 run rounds them, a float64 run takes them as typed): what is wrong with
// `text`, quoting it, or "" when nothing is.
std::string float32_rounding_problem(const std::string& text, bool below_one = false);

// A decimal number that is finite as a double ("1e400" is refused, not taken as infinity).
CLI::Validator finite_double();

}  // namespace addnorm::cli
