// The benchmark's tensors: allocation, first touch and the fixed pseudo-random fill.
#include "workspace.hpp"

#include <omp.h>
#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <new>

namespace addnorm::bench {
namespace {

constexpr size_t kAlignment = size_t{2} << 20;

// A counter-based generator, so the fill is the same for any thread count: splitmix64 of the
// index. Four uniforms summed (Irwin-Hall) are close enough to normal for timing purposes and
// keep the fill fast.
uint64_t mix(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

float pseudo_normal(uint64_t stream, uint64_t index) {
  const uint64_t a = mix(stream * 0x100000001B3ull + 2 * index);
  const uint64_t b = mix(stream * 0x100000001B3ull + 2 * index + 1);
  const double scale = 1.0 / 4294967296.0;
  const double sum = double(a & 0xFFFFFFFFu) * scale + double(a >> 32) * scale +
                     double(b & 0xFFFFFFFFu) * scale + double(b >> 32) * scale;
  return static_cast<float>((sum - 2.0) * 1.7320508075688772);  // variance 4/12 -> 1
}

void fill(float* data, int64_t count, uint64_t stream, float offset, float scale) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < count; ++i) {
    data[i] = offset + scale * pseudo_normal(stream, static_cast<uint64_t>(i));
  }
}

void convert(const float* from, uint16_t* to, int64_t count) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < count; ++i) to[i] = to_bf16(from[i]);
}

}  // namespace

uint16_t to_bf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

float from_bf16(uint16_t bits) {
  const uint32_t wide = uint32_t{bits} << 16;
  float value;
  std::memcpy(&value, &wide, sizeof value);
  return value;
}

// Mapped directly, not through malloc: under the tuned allocator (no mmap) an aligned malloc
// would come from the heap and leave the untouched space before each aligned start as free
// chunks there, which PyTorch's outputs would later be carved from, page-faulting as they go.
AlignedBuffer::AlignedBuffer(size_t bytes) : bytes_(bytes) {
  const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  const size_t mapped = rounded + kAlignment;
  void* mapping = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapping == MAP_FAILED) throw std::bad_alloc();
  // Keep the 2 MiB-aligned part; give the rest back.
  const uintptr_t start = reinterpret_cast<uintptr_t>(mapping);
  const uintptr_t aligned = (start + kAlignment - 1) / kAlignment * kAlignment;
  if (aligned > start) munmap(mapping, aligned - start);
  const size_t tail = start + mapped - (aligned + rounded);
  if (tail > 0) munmap(reinterpret_cast<void*>(aligned + rounded), tail);
  data_ = reinterpret_cast<void*>(aligned);
  mapped_bytes_ = rounded;
  // First touch from every thread's share, so the pages are resident before any timing.
  auto* bytes_ptr = static_cast<unsigned char*>(data_);
  const int64_t total = static_cast<int64_t>(rounded);
#pragma omp parallel for schedule(static)
  for (int64_t page = 0; page < total; page += 4096) bytes_ptr[page] = 0;
}

AlignedBuffer::~AlignedBuffer() {
  munmap(data_, mapped_bytes_);
}

float* Workspace::floats(int64_t count) {
  buffers_.push_back(std::make_unique<AlignedBuffer>(static_cast<size_t>(count) * sizeof(float)));
  return static_cast<float*>(buffers_.back()->data());
}

uint16_t* Workspace::halves(int64_t count) {
  buffers_.push_back(
      std::make_unique<AlignedBuffer>(static_cast<size_t>(count) * sizeof(uint16_t)));
  return static_cast<uint16_t*>(buffers_.back()->data());
}

Workspace::Workspace(int64_t elements, int64_t max_rows, int64_t max_dim, bool with_bf16)
    : max_elements(elements) {
  x = floats(elements);
  r = floats(elements);
  dy = floats(elements);
  dh_next = floats(elements);
  y = floats(elements);
  h = floats(elements);
  dx = floats(elements);
  ds = floats(elements);
  gamma = floats(max_dim);
  beta = floats(max_dim);
  dgamma = floats(max_dim);
  dbeta = floats(max_dim);
  running_mean = floats(max_dim);
  running_var = floats(max_dim);
  column_stat_a = floats(max_dim);
  column_stat_b = floats(max_dim);
  mean = floats(max_rows);
  rstd = floats(max_rows);
  variance = floats(max_rows);
  fill(x, elements, 1, 0.5f, 1.0f);
  fill(r, elements, 2, 0.0f, 1.0f);
  fill(dy, elements, 3, 0.0f, 1.0f);
  fill(dh_next, elements, 4, 0.0f, 0.5f);
  fill(gamma, max_dim, 5, 1.0f, 0.1f);
  fill(beta, max_dim, 6, 0.0f, 0.1f);
  fill(running_mean, max_dim, 7, 0.0f, 0.0f);
  fill(running_var, max_dim, 8, 1.0f, 0.0f);
  if (with_bf16) {
    x_bf16 = halves(elements);
    r_bf16 = halves(elements);
    dy_bf16 = halves(elements);
    dh_next_bf16 = halves(elements);
    y_bf16 = halves(elements);
    h_bf16 = halves(elements);
    dx_bf16 = halves(elements);
    ds_bf16 = halves(elements);
    convert(x, x_bf16, elements);
    convert(r, r_bf16, elements);
    convert(dy, dy_bf16, elements);
    convert(dh_next, dh_next_bf16, elements);
  }
}

size_t Workspace::held_bytes() const {
  size_t total = 0;
  for (const auto& buffer : buffers_) total += buffer->bytes();
  return total;
}

}  // namespace addnorm::bench
