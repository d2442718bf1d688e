// Fuzzes the command line's number options as CLI11 parses them: an app with the same
// validators `addnorm run` puts on --seed, --offset, --eps, --p and --momentum, fed argument
// lists split from the input at NUL bytes. A parse error is an accepted outcome; an accepted
// value must be one the option's type holds exactly as typed.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/exact_numbers.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> args;
  std::string current;
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == 0) {
      args.push_back(current);
      current.clear();
    } else {
      current += static_cast<char>(data[i]);
    }
  }
  args.push_back(current);
  if (args.size() > 16) return 0;

  CLI::App app("fuzz");
  uint64_t seed = 0, offset = 0;
  // As `addnorm run` holds them: doubles as typed, rounded to float32 once for a float32 run.
  double eps = 1e-5, p = 0.0, momentum = 0.1;
  double lr = 1e-3;
  app.add_option("--seed", seed)->check(addnorm::cli::exact_unsigned());
  app.add_option("--offset", offset)->check(addnorm::cli::exact_unsigned());
  app.add_option("--eps", eps)->check(addnorm::cli::exact_float32());
  app.add_option("--p", p)->check(addnorm::cli::exact_float32(/*below_one=*/true));
  app.add_option("--momentum", momentum)->check(addnorm::cli::exact_float32());
  app.add_option("--lr", lr)->check(addnorm::cli::finite_double());
  std::vector<const char*> argv{"fuzz"};
  for (const std::string& arg : args) argv.push_back(arg.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), const_cast<char**>(argv.data()));
  } catch (const CLI::Error&) {
    return 0;
  }
  // What was accepted must be what a user could have meant: finite, and a p typed below 1 still
  // below 1 (a p of 1 or more is typed as such and left to the op's own range check).
  const auto float32_finite = [](double value) { return std::isfinite(static_cast<float>(value)); };
  if (!float32_finite(eps) || !float32_finite(momentum) || !std::isfinite(lr) ||
      !float32_finite(p)) {
    throw std::logic_error("a validator let a value through that its option cannot hold");
  }
  if (app.count("--p") > 0) {
    const double typed = std::strtod(app["--p"]->results().back().c_str(), nullptr);
    if (typed < 1.0 && !(static_cast<float>(p) < 1.0f)) {
      throw std::logic_error("--p below 1 was accepted as 1");
    }
  }
  return 0;
}
