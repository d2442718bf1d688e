// Every tensor the benchmark holds, allocated and touched once before anything is timed, so no
// implementation pays for first-touch page faults on its inputs or (preallocated) outputs, and
// the process's resident memory is this workspace plus whatever an implementation allocates.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace addnorm::bench {

// 2 MiB-aligned memory (so SIMD and non-temporal stores never straddle a line), pre-faulted,
// mapped apart from malloc's heap (workspace.cpp says why).
class AlignedBuffer {
 public:
  explicit AlignedBuffer(size_t bytes);
  ~AlignedBuffer();
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  size_t mapped_bytes_ = 0;
};

struct Workspace {
  // max_elements: the largest [rows, dim] tensor; max_rows, max_dim bound the statistics and
  // the parameters. bf16 copies of the inputs and bf16 outputs exist only when asked for.
  Workspace(int64_t max_elements, int64_t max_rows, int64_t max_dim, bool with_bf16);

  // Inputs (filled once with fixed pseudo-random values; r doubles as post-norm's s).
  float* x = nullptr;
  float* r = nullptr;
  float* dy = nullptr;
  float* dh_next = nullptr;
  // Outputs.
  float* y = nullptr;
  float* h = nullptr;
  float* dx = nullptr;
  float* ds = nullptr;
  // Per column (max_dim) and per row (max_rows).
  float* gamma = nullptr;
  float* beta = nullptr;
  float* dgamma = nullptr;
  float* dbeta = nullptr;
  float* running_mean = nullptr;
  float* running_var = nullptr;
  float* column_stat_a = nullptr;  // per-column scratch for implementations' batch statistics
  float* column_stat_b = nullptr;
  float* mean = nullptr;
  float* rstd = nullptr;
  float* variance = nullptr;  // oneDNN saves the variance, not rstd
  // bfloat16 storage (raw bits), when with_bf16: inputs converted from x, r, dy and dh_next.
  uint16_t* x_bf16 = nullptr;
  uint16_t* r_bf16 = nullptr;
  uint16_t* dy_bf16 = nullptr;
  uint16_t* dh_next_bf16 = nullptr;
  uint16_t* y_bf16 = nullptr;
  uint16_t* h_bf16 = nullptr;
  uint16_t* dx_bf16 = nullptr;
  uint16_t* ds_bf16 = nullptr;  // post-norm backward's second output

  int64_t max_elements = 0;
  // Bytes held by every buffer above: the yardstick for the peak resident memory.
  size_t held_bytes() const;

 private:
  std::vector<std::unique_ptr<AlignedBuffer>> buffers_;
  float* floats(int64_t count);
  uint16_t* halves(int64_t count);
};

// Round-to-nearest-even float32 -> bfloat16 bits, and back.
uint16_t to_bf16(float value);
float from_bf16(uint16_t bits);

}  // namespace addnorm::bench
