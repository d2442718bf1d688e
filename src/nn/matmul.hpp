// Row-major single-precision matrix products through cblas_sgemm, threaded by OpenMP.
//
// OpenBLAS runs single-threaded; the rows of C are cut into fixed blocks of kMatmulRowBlock that
// OpenMP threads share out. The cut does not depend on the thread count, so every element of C
// is computed by the same sgemm call on the same data for any number of threads: results are
// bitwise identical. (Letting OpenBLAS's own threads run beside OpenMP's made small products
// wait for each other's spinning threads on a 2-core machine.)
#pragma once

#include <cstdint>

namespace addnorm::nn::detail {

inline constexpr int64_t kMatmulRowBlock = 64;

// C[m, n] = alpha * op(A)[m, k] op(B)[k, n] + beta * C, with op = transpose when asked.
// Leading dimensions are row strides of A, B, C as stored.
void matmul(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha,
            const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
            int64_t ldc);

// Makes OpenBLAS single-threaded (once per process); matmul calls it itself.
void use_single_threaded_blas();

}  // namespace addnorm::nn::detail
