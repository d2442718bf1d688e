// Prints the NumPy-compatible generator's output, one value a line, for the Python tests to
// compare with NumPy itself:
//   numpy_random_dump SEED COUNT LOC SCALE        default_rng(SEED).normal(LOC, SCALE, COUNT),
//   %.17g numpy_random_dump --raw SEED COUNT default_rng(SEED).bit_generator.random_raw(COUNT)
//   numpy_random_dump --doubles SEED COUNT        default_rng(SEED).random(COUNT), %.17g
//   numpy_random_dump --seed-state SEED N_WORDS   SeedSequence(SEED).generate_state(N_WORDS)
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>

#include "addnorm/error.hpp"
#include "addnorm/numpy_random.hpp"

namespace {

namespace nr = addnorm::numpy_random;

uint64_t parse_unsigned(const char* text, const char* name) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long value = std::strtoull(text, &end, 10);
  if (text[0] == '\0' || text[0] == '-' || *end != '\0' || errno != 0) {
    throw addnorm::Error(std::string(name) + " is '" + text +
                         "', expected a non-negative integer below 2^64");
  }
  return value;
}

double parse_double(const char* text, const char* name) {
  char* end = nullptr;
  const double value = std::strtod(text, &end);
  if (text[0] == '\0' || *end != '\0') {
    throw addnorm::Error(std::string(name) + " is '" + text + "', expected a number");
  }
  return value;
}

int usage() {
  std::fputs(
      "usage: numpy_random_dump SEED COUNT LOC SCALE\n"
      "       numpy_random_dump --raw SEED COUNT\n"
      "       numpy_random_dump --doubles SEED COUNT\n"
      "       numpy_random_dump --seed-state SEED N_WORDS\n",
      stderr);
  return 2;
}

int run(int argc, char** argv) {
  const std::string_view mode = argc > 1 ? argv[1] : "";
  if (argc == 4 && (mode == "--raw" || mode == "--doubles" || mode == "--seed-state")) {
    const uint64_t seed = parse_unsigned(argv[2], "SEED");
    const uint64_t count = parse_unsigned(argv[3], "COUNT");
    if (mode == "--seed-state") {
      if (count > 1u << 20) throw addnorm::Error("N_WORDS is too large, expected at most 2^20");
      for (uint32_t word : nr::seed_sequence_state(seed, static_cast<int>(count))) {
        std::printf("%" PRIu32 "\n", word);
      }
      return 0;
    }
    nr::Generator generator(seed);
    for (uint64_t i = 0; i < count; ++i) {
      if (mode == "--raw") {
        std::printf("%" PRIu64 "\n", generator.next_uint64());
      } else {
        std::printf("%.17g\n", generator.next_double());
      }
    }
    return 0;
  }
  if (argc == 5 && mode.substr(0, 2) != "--") {
    const uint64_t seed = parse_unsigned(argv[1], "SEED");
    const uint64_t count = parse_unsigned(argv[2], "COUNT");
    const double loc = parse_double(argv[3], "LOC");
    const double scale = parse_double(argv[4], "SCALE");
    nr::Generator generator(seed);
    // One value at a time: the stream is the same as normal(loc, scale, count), without holding
    // millions of values in memory.
    for (uint64_t i = 0; i < count; ++i) std::printf("%.17g\n", generator.normal(loc, scale));
    return 0;
  }
  return usage();
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "numpy_random_dump: %s\n", error.what());
    return 1;
  }
}
