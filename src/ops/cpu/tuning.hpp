// The kernels' speed tunables: the numbers that chose a path, a group size, a prefetch distance
// or a threshold are constexpr values defined beside the code they tune as
// `tuned("kName", default)`, the default being the measured winner (a few that shape a loop's
// code, such as BatchNorm's sample groups and Philox's groups a step, are plain constants). What
// was measured, and how to measure it again, is in docs/performance.md ("Tunables: what was
// tried"). No value changes what the numerics contract promises (docs/numerics.md): some change the
// order of a row's additions, and so a last bit; none makes a result depend on the thread count.
//
// A dev/ build overrides them (dev/ab.py): CMake's ADDNORM_TUNING="kName=value,..." reaches
// this file as the string ADDNORM_TUNING_OVERRIDES, and tuned() reads it at compile time.
// cmake/tuning.cmake checks each name against the tunables in src/ops/cpu; a
// release build has none.
#ifndef ADDNORM_OPS_CPU_TUNING_HPP_
#define ADDNORM_OPS_CPU_TUNING_HPP_

#include <cstdint>
#include <string_view>

#ifndef ADDNORM_TUNING_OVERRIDES
#define ADDNORM_TUNING_OVERRIDES ""
#endif

namespace addnorm::cpu {

namespace tuning_detail {

inline constexpr std::string_view kOverrides = ADDNORM_TUNING_OVERRIDES;

// A non-negative decimal integer (CMake has checked the form).
constexpr int64_t parse_count(std::string_view digits) {
  int64_t value = 0;
  for (char c : digits) value = value * 10 + (c - '0');
  return value;
}

}  // namespace tuning_detail

// `name`'s value in `overrides` ("kName=value,..."), or `fallback`.
constexpr int64_t tuned_in(std::string_view overrides, std::string_view name, int64_t fallback) {
  std::string_view rest = overrides;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    const size_t equals = item.find('=');
    if (item.substr(0, equals) == name) return tuning_detail::parse_count(item.substr(equals + 1));
  }
  return fallback;
}

// `name`'s value in this build's ADDNORM_TUNING_OVERRIDES, or `fallback`.
constexpr int64_t tuned(std::string_view name, int64_t fallback) {
  return tuned_in(tuning_detail::kOverrides, name, fallback);
}

}  // namespace addnorm::cpu

#endif  // ADDNORM_OPS_CPU_TUNING_HPP_
