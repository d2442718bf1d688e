// Post-norm's backward, y = Norm(x + Dropout(s)): the norm engine's backward run block by block on
// h rebuilt in cache, then the dropout's own backward. It lives beside the engine, not in the op
// layer, so that the op layer only validates and describes the call (issue 32: orchestration in
// the kernel layer).
#pragma once

#include <cstdint>

#include "addnorm/dtype.hpp"
#include "addnorm/ops.hpp"
#include "ops/cpu/kernels.hpp"

namespace addnorm::cpu {

struct PostNormBackward {
  // The norm's part: dy and its storage, gamma, saved_rstd, dgamma, dbeta, rows, dim, eps and the
  // kind. Its x, dx and storage are each block's float32 h, set per block.
  NormBackward norm;
  const void* x = nullptr;
  DType x_storage = DType::float32;
  const void* s = nullptr;
  DType s_storage = DType::float32;
  void* dx = nullptr;  // may be dy or x: its block has been read by then
  DType dx_storage = DType::float32;
  void* ds = nullptr;  // may be s
  DType ds_storage = DType::float32;
  DropoutOptions dropout;
};

// dx = Norm'(dy) at h = x + Dropout(s) and ds = dx * mask / (1 - p), each rounded once to its
// storage type; dgamma/dbeta reduced in fixed chunks, so bitwise identical for any thread count.
void post_norm_backward(const PostNormBackward& args);

}  // namespace addnorm::cpu
