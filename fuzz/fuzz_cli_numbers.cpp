// Fuzzes the command line's number options as CLI11 parses them: an app with the same
// validators `addnorm run` puts on --seed, --offset, --eps, --p and --momentum, fed argument
// lists split from the input at NUL bytes, then the check a float32 run adds for --eps and
// --momentum (float32_rounding_problem). A parse error or a refusal is an accepted outcome; an
// accepted value must be one the run's type holds exactly as typed.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <utility>
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
  // As `addnorm run` holds them: doubles as typed (a float64 run), rounded to float32 once for a
  // float32 run.
  double eps = 1e-5, p = 0.0, momentum = 0.1;
  double lr = 1e-3;
  app.add_option("--seed", seed)->check(addnorm::cli::exact_unsigned());
  app.add_option("--offset", offset)->check(addnorm::cli::exact_unsigned());
  app.add_option("--eps", eps)->check(addnorm::cli::finite_double());
  app.add_option("--p", p)->check(addnorm::cli::exact_float32(/*below_one=*/true));
  app.add_option("--momentum", momentum)->check(addnorm::cli::finite_double());
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
  if (!std::isfinite(eps) || !std::isfinite(momentum) || !std::isfinite(lr) || !float32_finite(p)) {
    throw std::logic_error("a validator let a value through that its option cannot hold");
  }
  // What a float32 run accepts of --eps and --momentum, float32 holds: finite, and not 0 unless 0.
  for (const auto& [name, value] : {std::pair{"--eps", eps}, std::pair{"--momentum", momentum}}) {
    if (app.count(name) == 0) continue;
    if (!addnorm::cli::float32_rounding_problem(app[name]->results().back()).empty()) continue;
    if (!float32_finite(value) || (value != 0.0 && static_cast<float>(value) == 0.0f)) {
      throw std::logic_error(std::string("a float32 run would change ") + name + " silently");
    }
  }
  if (app.count("--p") > 0) {
    const double typed = std::strtod(app["--p"]->results().back().c_str(), nullptr);
    if (typed < 1.0 && !(static_cast<float>(p) < 1.0f)) {
      throw std::logic_error("--p below 1 was accepted as 1");
    }
  }
  return 0;
}
