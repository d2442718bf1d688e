// /proc/self/status parsing and peak-window bookkeeping (see memory_stats.hpp).
#include "memory_stats.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace addnorm::bench {
namespace {

int64_t status_field_kib(const char* field) {
  std::FILE* file = std::fopen("/proc/self/status", "r");
  if (!file) return 0;
  char line[256];
  int64_t value = 0;
  const size_t length = std::strlen(field);
  while (std::fgets(line, sizeof line, file)) {
    if (std::strncmp(line, field, length) == 0 && line[length] == ':') {
      long long kib = 0;
      std::sscanf(line + length + 1, "%lld", &kib);
      value = kib;
      break;
    }
  }
  std::fclose(file);
  return value;
}

int64_t earlier_windows_peak = 0;

}  // namespace

int64_t current_rss_bytes() {
  return status_field_kib("VmRSS") * 1024;
}

int64_t window_peak_rss_bytes() {
  return status_field_kib("VmHWM") * 1024;
}

bool reset_peak_rss() {
  earlier_windows_peak = std::max(earlier_windows_peak, window_peak_rss_bytes());
  std::FILE* file = std::fopen("/proc/self/clear_refs", "w");
  if (!file) return false;
  const bool written = std::fputs("5", file) >= 0;
  return std::fclose(file) == 0 && written;
}

int64_t process_peak_rss_bytes() {
  return std::max(earlier_windows_peak, window_peak_rss_bytes());
}

int64_t minor_faults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

}  // namespace addnorm::bench
