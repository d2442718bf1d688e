// /proc/self/status parsing and peak-window bookkeeping (see memory_stats.hpp).
#include "memory_stats.hpp"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace addnorm::bench {
namespace {

// Reads /proc/self/status with open/read into a stack buffer: no malloc, so the bookkeeping
// between samples leaves the heap of the implementations being timed as it was.
int64_t status_field_kib(const char* field) {
  const int fd = ::open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char text[8192];
  size_t used = 0;
  ssize_t got = 0;
  while (used + 1 < sizeof text && (got = ::read(fd, text + used, sizeof text - 1 - used)) > 0) {
    used += static_cast<size_t>(got);
  }
  ::close(fd);
  text[used] = '\0';
  const size_t length = std::strlen(field);
  for (const char* line = text; line && *line;) {
    if (std::strncmp(line, field, length) == 0 && line[length] == ':') {
      return std::strtoll(line + length + 1, nullptr, 10);
    }
    line = std::strchr(line, '\n');
    if (line) ++line;
  }
  return 0;
}

int64_t earlier_windows_peak = 0;

// Where prefault_heap's block is published, so the compiler cannot drop the malloc and the touches.
void* volatile prefault_block = nullptr;

}  // namespace

int64_t current_rss_bytes() {
  return status_field_kib("VmRSS") * 1024;
}

int64_t window_peak_rss_bytes() {
  return status_field_kib("VmHWM") * 1024;
}

bool reset_peak_rss() {
  earlier_windows_peak = std::max(earlier_windows_peak, window_peak_rss_bytes());
  const int fd = ::open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool written = ::write(fd, "5", 1) == 1;
  return ::close(fd) == 0 && written;
}

int64_t process_peak_rss_bytes() {
  return std::max(earlier_windows_peak, window_peak_rss_bytes());
}

int64_t minor_faults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

void prefault_heap(int64_t bytes) {
  if (bytes <= 0) return;
  auto* block = static_cast<volatile unsigned char*>(std::malloc(static_cast<size_t>(bytes)));
  if (!block) return;
  for (int64_t offset = 0; offset < bytes; offset += 4096) block[offset] = 1;
  prefault_block = const_cast<unsigned char*>(block);
  std::free(prefault_block);
  prefault_block = nullptr;
}

}  // namespace addnorm::bench
