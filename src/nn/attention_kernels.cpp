// Attention head kernels. Backward formulas, with P = softmax(S), S = scale * Q K^T, C = P V:
//   dP = dC V^T,   dV = P^T dC,
//   dS_ij = P_ij (dP_ij - sum_k P_ik dP_ik),
//   dQ = scale * dS K,   dK = scale * dS^T Q.
#include "attention_kernels.hpp"

#include <algorithm>
#include <cmath>

// Compiled for AVX-512, AVX2 and the baseline, chosen at load time, so the contiguous loops use
// the machine's widest vectors without changing the order of any sum.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_ADDRESS__)
#define ADDNORM_NN_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define ADDNORM_NN_CLONES
#endif

namespace addnorm::nn::detail {

ADDNORM_NN_CLONES
void attention_head_forward(HeadRows q, HeadRows k, HeadRows v, int64_t seq_q, int64_t seq_k,
                            int64_t head_dim, float scale, const int64_t* limits, float* probs,
                            float* context, int64_t context_stride, float* key_t) {
  for (int64_t j = 0; j < seq_k; ++j) {
    for (int64_t c = 0; c < head_dim; ++c) key_t[c * seq_k + j] = k.data[j * k.stride + c];
  }
  for (int64_t i = 0; i < seq_q; ++i) {
    const int64_t limit = limits[i];
    float* p = probs + i * seq_k;
    std::fill(p, p + seq_k, 0.0f);
    const float* q_row = q.data + i * q.stride;
    for (int64_t c = 0; c < head_dim; ++c) {
      const float qc = q_row[c] * scale;
      const float* kt = key_t + c * seq_k;
      for (int64_t j = 0; j < limit; ++j) p[j] += qc * kt[j];
    }
    float max = p[0];
    for (int64_t j = 1; j < limit; ++j) max = std::max(max, p[j]);
    float sum = 0.0f;
    for (int64_t j = 0; j < limit; ++j) {
      p[j] = std::exp(p[j] - max);
      sum += p[j];
    }
    const float inverse = 1.0f / sum;
    for (int64_t j = 0; j < limit; ++j) p[j] *= inverse;
    float* out = context + i * context_stride;
    std::fill(out, out + head_dim, 0.0f);
    for (int64_t j = 0; j < limit; ++j) {
      const float pj = p[j];
      const float* v_row = v.data + j * v.stride;
      for (int64_t c = 0; c < head_dim; ++c) out[c] += pj * v_row[c];
    }
  }
}

ADDNORM_NN_CLONES
void attention_head_backward(HeadRows q, HeadRows k, HeadRows v, const float* probs,
                             HeadRows dcontext, int64_t seq_q, int64_t seq_k, int64_t head_dim,
                             float scale, const int64_t* limits, HeadGradRows dq, HeadGradRows dk,
                             HeadGradRows dv, float* value_t, float* dprobs) {
  for (int64_t j = 0; j < seq_k; ++j) {
    for (int64_t c = 0; c < head_dim; ++c) value_t[c * seq_k + j] = v.data[j * v.stride + c];
  }
  for (int64_t i = 0; i < seq_q; ++i) {
    const int64_t limit = limits[i];
    const float* p = probs + i * seq_k;
    const float* dc = dcontext.data + i * dcontext.stride;
    // dP_i = dC_i V^T.
    std::fill(dprobs, dprobs + limit, 0.0f);
    for (int64_t c = 0; c < head_dim; ++c) {
      const float dcc = dc[c];
      const float* vt = value_t + c * seq_k;
      for (int64_t j = 0; j < limit; ++j) dprobs[j] += dcc * vt[j];
    }
    // dV_j += P_ij dC_i.
    for (int64_t j = 0; j < limit; ++j) {
      const float pj = p[j];
      float* dv_row = dv.data + j * dv.stride;
      for (int64_t c = 0; c < head_dim; ++c) dv_row[c] += pj * dc[c];
    }
    float dot = 0.0f;
    for (int64_t j = 0; j < limit; ++j) dot += p[j] * dprobs[j];
    // dprobs becomes scale * dS_i.
    for (int64_t j = 0; j < limit; ++j) dprobs[j] = scale * p[j] * (dprobs[j] - dot);
    float* dq_row = dq.data + i * dq.stride;
    std::fill(dq_row, dq_row + head_dim, 0.0f);
    const float* q_row = q.data + i * q.stride;
    for (int64_t j = 0; j < limit; ++j) {
      const float ds = dprobs[j];
      const float* k_row = k.data + j * k.stride;
      float* dk_row = dk.data + j * dk.stride;
      for (int64_t c = 0; c < head_dim; ++c) {
        dq_row[c] += ds * k_row[c];
        dk_row[c] += ds * q_row[c];
      }
    }
  }
}

}  // namespace addnorm::nn::detail
