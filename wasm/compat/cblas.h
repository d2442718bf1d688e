// The part of the CBLAS interface nn's matmul calls (src/nn/matmul.cpp), for the WebAssembly
// build, which has no OpenBLAS: wasm/sgemm.cpp implements it with plain loops.
#pragma once

enum CBLAS_ORDER { CblasRowMajor = 101, CblasColMajor = 102 };
enum CBLAS_TRANSPOSE { CblasNoTrans = 111, CblasTrans = 112 };

void cblas_sgemm(CBLAS_ORDER order, CBLAS_TRANSPOSE trans_a, CBLAS_TRANSPOSE trans_b, int m, int n,
                 int k, float alpha, const float* a, int lda, const float* b, int ldb, float beta,
                 float* c, int ldc);

// One thread is all there is.
inline void openblas_set_num_threads(int) {}
