// cblas_sgemm for the WebAssembly build (wasm/compat/cblas.h): row-major only, which is all
// nn's matmul asks for. Highway's WASM target (128-bit float32 vectors; this file needs no
// float64, which that target lacks): a block of 4 rows x 2 vectors of C is summed in registers
// over the whole inner dimension, then scaled into C. A transposed B is first copied into
// op(B)'s rows so that every load of op(B) is contiguous. Products are summed in float32 like a
// BLAS, in another order than OpenBLAS's, so results differ from the native build's in the last
// bits (docs/web-lab.md).
#include "cblas.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "hwy/highway.h"

namespace {

namespace hn = hwy::HWY_NAMESPACE;
static_assert(HWY_TARGET == HWY_WASM, "compile sgemm.cpp with -msimd128 for Highway's WASM target");
using Tag = hn::ScalableTag<float>;
using Vec = hn::Vec<Tag>;
constexpr int kRows = 4;

// C[i, j] for `rows` rows from i0 and columns [j0, j0 + 2 lanes), op(B) given by rows.
template <int Rows>
void block(const float* a, int64_t a_row_step, int64_t a_col_step, const float* op_b,
           int64_t b_stride, int k, float alpha, float beta, float* c, int64_t ldc, int j0) {
  const Tag d;
  const size_t lanes = hn::Lanes(d);
  Vec sum[Rows][2];
  for (int r = 0; r < Rows; ++r) sum[r][0] = sum[r][1] = hn::Zero(d);
  for (int p = 0; p < k; ++p) {
    const float* b_row = op_b + p * b_stride + j0;
    const Vec b0 = hn::LoadU(d, b_row), b1 = hn::LoadU(d, b_row + lanes);
    for (int r = 0; r < Rows; ++r) {
      const Vec ai = hn::Set(d, a[r * a_row_step + p * a_col_step]);
      sum[r][0] = hn::MulAdd(ai, b0, sum[r][0]);
      sum[r][1] = hn::MulAdd(ai, b1, sum[r][1]);
    }
  }
  const Vec va = hn::Set(d, alpha), vb = hn::Set(d, beta);
  for (int r = 0; r < Rows; ++r) {
    float* c_row = c + r * ldc + j0;
    for (int h = 0; h < 2; ++h) {
      const Vec scaled = hn::Mul(va, sum[r][h]);
      // beta = 0 overwrites C, NaN included, as BLAS does.
      const Vec out =
          beta == 0.0f ? scaled : hn::MulAdd(vb, hn::LoadU(d, c_row + h * lanes), scaled);
      hn::StoreU(out, d, c_row + h * lanes);
    }
  }
}

}  // namespace

void cblas_sgemm(CBLAS_ORDER, CBLAS_TRANSPOSE trans_a, CBLAS_TRANSPOSE trans_b, int m, int n, int k,
                 float alpha, const float* a, int lda, const float* b, int ldb, float beta,
                 float* c, int ldc) {
  // A's element (i, p) is a[i * a_row_step + p * a_col_step].
  const int64_t a_row_step = trans_a == CblasTrans ? 1 : lda;
  const int64_t a_col_step = trans_a == CblasTrans ? lda : 1;
  // op(B) as k rows of n.
  static std::vector<float> packed;
  const float* op_b = b;
  int64_t b_stride = ldb;
  if (trans_b == CblasTrans) {
    packed.resize(static_cast<size_t>(k) * static_cast<size_t>(n));
    for (int j = 0; j < n; ++j) {
      for (int p = 0; p < k; ++p) packed[int64_t{p} * n + j] = b[int64_t{j} * ldb + p];
    }
    op_b = packed.data();
    b_stride = n;
  }
  const int width = 2 * static_cast<int>(hn::Lanes(Tag()));
  const int vector_columns = n - n % width;
  for (int i0 = 0; i0 < m; i0 += kRows) {
    const int rows = std::min(kRows, m - i0);
    const float* a_rows = a + i0 * a_row_step;
    float* c_rows = c + int64_t{i0} * ldc;
    for (int j0 = 0; j0 < vector_columns; j0 += width) {
      switch (rows) {
        case 4:
          block<4>(a_rows, a_row_step, a_col_step, op_b, b_stride, k, alpha, beta, c_rows, ldc, j0);
          break;
        case 3:
          block<3>(a_rows, a_row_step, a_col_step, op_b, b_stride, k, alpha, beta, c_rows, ldc, j0);
          break;
        case 2:
          block<2>(a_rows, a_row_step, a_col_step, op_b, b_stride, k, alpha, beta, c_rows, ldc, j0);
          break;
        default:
          block<1>(a_rows, a_row_step, a_col_step, op_b, b_stride, k, alpha, beta, c_rows, ldc, j0);
          break;
      }
    }
    // The last columns, fewer than two vectors, one at a time.
    for (int r = 0; r < rows; ++r) {
      for (int j = vector_columns; j < n; ++j) {
        float sum = 0.0f;
        for (int p = 0; p < k; ++p) {
          sum += a_rows[r * a_row_step + p * a_col_step] * op_b[p * b_stride + j];
        }
        float& out = c_rows[int64_t{r} * ldc + j];
        out = beta == 0.0f ? alpha * sum : alpha * sum + beta * out;
      }
    }
  }
}
