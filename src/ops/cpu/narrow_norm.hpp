// LayerNorm and RMSNorm forward on rows stored as bfloat16 or float16 (x and y of the same
// type), without staging through float32 (narrow_norm_kernels.cpp). gamma, beta, mean and rstd
// are float32. Arguments are already validated.
#pragma once

#include <cstdint>

#include "addnorm/dtype.hpp"
#include "addnorm/ops.hpp"

namespace addnorm::cpu {

struct NarrowNormForward {
  const uint16_t* x = nullptr;
  uint16_t* y = nullptr;            // may be x
  DType type = DType::bfloat16;     // of x and y: bfloat16 or float16
  const float* gamma = nullptr;     // nullable
  const float* beta = nullptr;      // nullable; LayerNorm only
  bool zero_centered_gamma = false;  // RMSNorm: scale by 1 + gamma
  float* mean = nullptr;            // nullable, one per row
  float* rstd = nullptr;            // nullable, one per row
  int64_t rows = 0;
  int64_t dim = 0;
  double eps = 0;
  NormKind norm = NormKind::layer_norm;
  bool stream_output = false;  // set by narrow_norm_forward
};

// Runs the rows over OpenMP threads and returns true, or returns false without touching
// anything when the running SIMD target has no vector code for the type (float16 before
// AVX2, the scalar target): the caller then stages through float32.
bool narrow_norm_forward(const NarrowNormForward& args);

// Rows [begin, end) on the calling thread; the same return value.
bool narrow_norm_forward_range(const NarrowNormForward& args, int64_t begin, int64_t end);

}  // namespace addnorm::cpu
