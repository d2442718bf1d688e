// Fuzzes read_npy with arbitrary file contents, then both conversions a reader's caller makes:
// float32 values widened to float64 (what a float64 `addnorm run` does) and the library's
// float64 -> float32 conversion, NpyArray::to_tensor. The bytes become a file in memory (memfd),
// read through its /proc path exactly as `addnorm run` reads a user's file. Any Error is an
// accepted outcome; a crash, a sanitizer report, a leak or an allocation the file's size does not
// justify is not.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "addnorm/error.hpp"
#include "addnorm/npy.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const int fd = memfd_create("npy", 0);
  if (fd < 0) return 0;
  size_t written = 0;
  while (written < size) {
    const ssize_t n = write(fd, data + written, size - written);
    if (n <= 0) break;
    written += static_cast<size_t>(n);
  }
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  try {
    const addnorm::NpyArray array = addnorm::read_npy(path);
    if (array.dtype() == addnorm::NpyDtype::float32) {
      const std::vector<float>& values = array.float32_values();
      const std::vector<double> widened(values.begin(), values.end());
      (void)widened;
    }
    const addnorm::Tensor tensor = array.to_tensor("x");
    (void)tensor;
  } catch (const addnorm::Error&) {
  }
  close(fd);
  return 0;
}
