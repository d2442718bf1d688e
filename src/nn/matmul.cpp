// matmul: fixed row blocks of C, each one cblas_sgemm call, shared out by OpenMP.
#include "matmul.hpp"

#include <cblas.h>

#include <algorithm>
#include <mutex>
#include <string>

#include "addnorm/error.hpp"

namespace addnorm::nn::detail {

namespace {

int blas_int(int64_t value, const char* what) {
  if (value < 0 || value > 2147483647) {
    throw Error(std::string(what) + " is " + std::to_string(value) + ", beyond the BLAS int range");
  }
  return static_cast<int>(value);
}

// Below this many multiply-adds a product runs on the calling thread. A product shared out ends
// in a barrier; on a machine where another process is busy the barrier can wait a scheduler time
// slice (milliseconds) for the descheduled thread, so only products of a millisecond or more of
// work (~4M multiply-adds at a few GFLOP/s on one core) are worth splitting. Measured with the
// lab's update-size at d_model 16..512 while another process kept a core busy: docs/lab.md,
// "Threads measured".
constexpr int64_t kParallelWork = 1 << 22;

}  // namespace

void use_single_threaded_blas() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

void matmul(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha,
            const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
            int64_t ldc) {
  if (m == 0 || n == 0) return;
  use_single_threaded_blas();
  blas_int(m, "rows");
  const int ni = blas_int(n, "columns");
  const int ki = blas_int(k, "inner dimension");
  const int lda_i = blas_int(lda, "lda"), ldb_i = blas_int(ldb, "ldb"),
            ldc_i = blas_int(ldc, "ldc");
  const CBLAS_TRANSPOSE op_a = transpose_a ? CblasTrans : CblasNoTrans;
  const CBLAS_TRANSPOSE op_b = transpose_b ? CblasTrans : CblasNoTrans;
  const int64_t blocks = (m + kMatmulRowBlock - 1) / kMatmulRowBlock;
  const bool parallel = blocks > 1 && m * n * k >= kParallelWork;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t block = 0; block < blocks; ++block) {
    const int64_t row = block * kMatmulRowBlock;
    const int rows = static_cast<int>(std::min(kMatmulRowBlock, m - row));
    // Row `row` of op(A): a row of A, or a column of A when transposed.
    const float* a_block = transpose_a ? a + row : a + row * lda;
    cblas_sgemm(CblasRowMajor, op_a, op_b, rows, ni, ki, alpha, a_block, lda_i, b, ldb_i, beta,
                c + row * ldc, ldc_i);
  }
}

}  // namespace addnorm::nn::detail
