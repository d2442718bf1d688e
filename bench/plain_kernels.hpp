// The plain loop (plain_kernels.cpp): the benchmark's implementation `plain` (impl_plain.cpp)
// and the same loop behind the C ABI (dev/plain_abi.cpp), which ab.py --in-process calls beside
// addnorm in one process. Whole registers only: dim a multiple of the lane count.
#pragma once

#include <cstdint>
#include <vector>

namespace addnorm::bench::plain {

// One call: rows x dim elements, float32 or bfloat16 bits; RMSNorm or LayerNorm.
struct Call {
  bool rms = false;
  bool bf16 = false;
  int64_t rows = 0, dim = 0;
  float eps = 0;
};

// The backward's per-thread dgamma/dbeta partials (`threads` of them at most), summed in thread
// order after the rows.
struct Partials {
  Partials(int threads, int64_t width);
  float* part(int thread, int which) { return values.data() + (size_t(thread) * 2 + which) * dim; }
  int64_t dim;
  std::vector<float> values;
};

// y = Norm(x + r) (r may be null), with h = x + r stored where h is not null (pre-norm; the
// post-norm at p = 0 forms it without storing it), mean (LayerNorm only) and rstd per row. Rows
// are split over OpenMP threads; outputs of 8 MiB or more are streamed, as addnorm's are.
void forward(const Call& call, const void* x, const void* r, const float* gamma, const float* beta,
             void* h, void* y, float* mean, float* rstd);

// dx, dgamma and (LayerNorm) dbeta from the rows' saved mean and rstd.
void backward(const Call& call, const void* dy, const void* x, const float* gamma,
              const float* mean, const float* rstd, void* dx, float* dgamma, float* dbeta,
              Partials& partials);

}  // namespace addnorm::bench::plain
