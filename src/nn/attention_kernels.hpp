// One attention head's forward and backward on strided rows, written as loops whose inner
// dimension is contiguous (so the compiler vectorises them without reassociating sums). Each
// call touches only its own head's columns, so heads run in parallel without races and with
// results independent of the thread count.
#pragma once

#include <cstdint>

namespace addnorm::nn::detail {

struct HeadRows {
  const float* data;  // row 0, column 0 of this head
  int64_t stride;     // distance between rows
};

// For query i the visible keys are 0..limits[i]-1 (padding and causality both give prefixes).
// probs [seq_q, seq_k] receives softmax(scale * q k^T) with masked entries exactly 0; context
// rows (stride context_stride) receive probs v. key_t is scratch of head_dim * seq_k floats.
void attention_head_forward(HeadRows q, HeadRows k, HeadRows v, int64_t seq_q, int64_t seq_k,
                            int64_t head_dim, float scale, const int64_t* limits, float* probs,
                            float* context, int64_t context_stride, float* key_t);

struct HeadGradRows {
  float* data;
  int64_t stride;
};

// Given dcontext, writes dq and *adds* to dk and dv (which the caller zeroes). value_t is
// scratch of head_dim * seq_k floats and dprobs of seq_k floats.
void attention_head_backward(HeadRows q, HeadRows k, HeadRows v, const float* probs,
                             HeadRows dcontext, int64_t seq_q, int64_t seq_k, int64_t head_dim,
                             float scale, const int64_t* limits, HeadGradRows dq, HeadGradRows dk,
                             HeadGradRows dv, float* value_t, float* dprobs);

}  // namespace addnorm::nn::detail
