// MultiHeadAttention: projections through Linear / cblas_sgemm, heads in parallel (OpenMP) with
// the kernels of attention_kernels.cpp.
#include "addnorm/nn/attention.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "addnorm/error.hpp"
#include "attention_kernels.hpp"
#include "matmul.hpp"

namespace addnorm::nn {

using detail::HeadGradRows;
using detail::HeadRows;

MultiHeadAttention::MultiHeadAttention(const std::string& name, int64_t d_model, int64_t n_heads)
    : in_proj(name + ".in_proj", d_model, 3 * d_model),
      out_proj(name + ".out_proj", d_model, d_model),
      d_model_(d_model),
      n_heads_(n_heads) {
  if (n_heads < 1 || d_model % n_heads != 0) {
    throw Error(name + ": n_heads is " + std::to_string(n_heads) +
                ", expected a divisor of d_model " + std::to_string(d_model));
  }
}

namespace {

void check_stream(const Tensor& x, int64_t d_model, const char* what) {
  if (x.shape().rank() != 3 || x.shape()[2] != d_model || x.shape()[0] < 1 || x.shape()[1] < 1) {
    throw Error(std::string(what) + " has shape " + x.shape().to_string() +
                ", expected [batch, seq, " + std::to_string(d_model) + "]");
  }
}

// The visible-key limit of every (batch, query): the padding length, cut by causality.
std::vector<int64_t> key_limits(const AttentionMask& mask, int64_t batch, int64_t seq_q,
                                int64_t seq_k) {
  if (!mask.lengths.empty() && static_cast<int64_t>(mask.lengths.size()) != batch) {
    throw Error("mask.lengths has " + std::to_string(mask.lengths.size()) +
                " entries, expected one per batch item (" + std::to_string(batch) + ")");
  }
  if (mask.causal && seq_q != seq_k) {
    throw Error("a causal mask needs as many queries as keys, got " + std::to_string(seq_q) +
                " and " + std::to_string(seq_k));
  }
  std::vector<int64_t> limits(static_cast<size_t>(batch * seq_q));
  for (int64_t b = 0; b < batch; ++b) {
    int64_t length = seq_k;
    if (!mask.lengths.empty()) {
      length = mask.lengths[static_cast<size_t>(b)];
      if (length < 1 || length > seq_k) {
        throw Error("mask.lengths[" + std::to_string(b) + "] is " + std::to_string(length) +
                    ", expected a value in [1, " + std::to_string(seq_k) + "]");
      }
    }
    for (int64_t i = 0; i < seq_q; ++i) {
      limits[static_cast<size_t>(b * seq_q + i)] = mask.causal ? std::min(length, i + 1) : length;
    }
  }
  return limits;
}

// y[rows, out] = x[rows, in] W^T + b for a block of `out` rows of a weight (stride in).
void project(const float* x, int64_t rows, int64_t in, const float* weight, const float* bias,
             int64_t out, float* y) {
  for (int64_t row = 0; row < rows; ++row) std::copy(bias, bias + out, y + row * out);
  detail::matmul(false, true, rows, out, in, 1.0f, x, in, weight, in, 1.0f, y, out);
}

// Backward of project: dW += dy^T x, db += sum dy, and dx (+)= dy W.
void project_backward(const float* x, int64_t rows, int64_t in, const float* weight, int64_t out,
                      const float* dy, float* dweight, float* dbias, float* dx, bool add_to_dx) {
  detail::matmul(true, false, out, in, rows, 1.0f, dy, out, x, in, 1.0f, dweight, in);
  for (int64_t row = 0; row < rows; ++row) {
    for (int64_t j = 0; j < out; ++j) dbias[j] += dy[row * out + j];
  }
  detail::matmul(false, false, rows, in, out, 1.0f, dy, out, weight, in, add_to_dx ? 1.0f : 0.0f,
                 dx, in);
}

// Multiply-adds below which the head loop runs on one thread.
constexpr int64_t kParallelWork = 1 << 18;

}  // namespace

// Shared head loop: q rows (stride q_stride) and k, v rows (stride kv_stride) per batch item.
static void run_heads_forward(const float* q, int64_t q_stride, const float* k, const float* v,
                              int64_t kv_stride, int64_t batch, int64_t seq_q, int64_t seq_k,
                              int64_t d_model, int64_t n_heads, const std::vector<int64_t>& limits,
                              float* probs, float* context) {
  const int64_t head_dim = d_model / n_heads;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
  const int64_t pairs = batch * n_heads;
  // Threads only pay off when there is real work: small models (tests, toy experiments) stay on
  // one thread instead of waking a team for microseconds.
  const bool parallel = pairs > 1 && pairs * seq_q * seq_k * head_dim >= kParallelWork;
#pragma omp parallel if (parallel)
  {
    std::vector<float> key_t(static_cast<size_t>(head_dim * seq_k));
#pragma omp for schedule(static)
    for (int64_t pair = 0; pair < pairs; ++pair) {
      const int64_t b = pair / n_heads, h = pair % n_heads;
      detail::attention_head_forward(
          {q + b * seq_q * q_stride + h * head_dim, q_stride},
          {k + b * seq_k * kv_stride + h * head_dim, kv_stride},
          {v + b * seq_k * kv_stride + h * head_dim, kv_stride}, seq_q, seq_k, head_dim, scale,
          limits.data() + b * seq_q, probs + pair * seq_q * seq_k,
          context + b * seq_q * d_model + h * head_dim, d_model, key_t.data());
    }
  }
}

static void run_heads_backward(const float* q, int64_t q_stride, const float* k, const float* v,
                               int64_t kv_stride, float* dq, float* dk, float* dv, int64_t batch,
                               int64_t seq_q, int64_t seq_k, int64_t d_model, int64_t n_heads,
                               const std::vector<int64_t>& limits, const float* probs,
                               const float* dcontext) {
  const int64_t head_dim = d_model / n_heads;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
  const int64_t pairs = batch * n_heads;
  const bool parallel = pairs > 1 && pairs * seq_q * seq_k * head_dim >= kParallelWork;
#pragma omp parallel if (parallel)
  {
    std::vector<float> value_t(static_cast<size_t>(head_dim * seq_k));
    std::vector<float> dprobs(static_cast<size_t>(seq_k));
#pragma omp for schedule(static)
    for (int64_t pair = 0; pair < pairs; ++pair) {
      const int64_t b = pair / n_heads, h = pair % n_heads;
      const int64_t q_offset = b * seq_q * q_stride + h * head_dim;
      const int64_t kv_offset = b * seq_k * kv_stride + h * head_dim;
      detail::attention_head_backward(
          {q + q_offset, q_stride}, {k + kv_offset, kv_stride}, {v + kv_offset, kv_stride},
          probs + pair * seq_q * seq_k, {dcontext + b * seq_q * d_model + h * head_dim, d_model},
          seq_q, seq_k, head_dim, scale, limits.data() + b * seq_q, {dq + q_offset, q_stride},
          {dk + kv_offset, kv_stride}, {dv + kv_offset, kv_stride}, value_t.data(), dprobs.data());
    }
  }
}

void MultiHeadAttention::forward(const Tensor& x, const AttentionMask& mask, Tensor& y) {
  check_stream(x, d_model_, "attention input x");
  const int64_t batch = x.shape()[0], seq = x.shape()[1];
  const std::vector<int64_t> limits = key_limits(mask, batch, seq, seq);
  mask_ = mask;
  in_proj.forward(x, qkv_);
  ensure_shape(probabilities_, Shape{batch, n_heads_, seq, seq});
  ensure_shape(context_, Shape{batch, seq, d_model_});
  const float* qkv = qkv_.data();
  run_heads_forward(qkv, 3 * d_model_, qkv + d_model_, qkv + 2 * d_model_, 3 * d_model_, batch, seq,
                    seq, d_model_, n_heads_, limits, probabilities_.data(), context_.data());
  out_proj.forward(context_, y);
}

void MultiHeadAttention::backward(const Tensor& x, const Tensor& dy, Tensor& dx) {
  const int64_t batch = x.shape()[0], seq = x.shape()[1];
  const std::vector<int64_t> limits = key_limits(mask_, batch, seq, seq);
  out_proj.backward(context_, dy, &dcontext_);
  ensure_shape(dqkv_, qkv_.shape());
  std::fill(dqkv_.values().begin(), dqkv_.values().end(), 0.0f);
  const float* qkv = qkv_.data();
  float* dqkv = dqkv_.data();
  run_heads_backward(qkv, 3 * d_model_, qkv + d_model_, qkv + 2 * d_model_, 3 * d_model_, dqkv,
                     dqkv + d_model_, dqkv + 2 * d_model_, batch, seq, seq, d_model_, n_heads_,
                     limits, probabilities_.data(), dcontext_.data());
  in_proj.backward(x, dqkv_, &dx);
}

void MultiHeadAttention::forward_cross(const Tensor& x, const Tensor& memory,
                                       const AttentionMask& mask, Tensor& y) {
  check_stream(x, d_model_, "cross-attention input x");
  check_stream(memory, d_model_, "cross-attention memory");
  if (mask.causal) throw Error("cross-attention mask.causal must be false");
  const int64_t batch = x.shape()[0], seq_q = x.shape()[1], seq_k = memory.shape()[1];
  if (memory.shape()[0] != batch) {
    throw Error("memory has batch " + std::to_string(memory.shape()[0]) + ", expected " +
                std::to_string(batch) + " (x's batch)");
  }
  const std::vector<int64_t> limits = key_limits(mask, batch, seq_q, seq_k);
  mask_ = mask;
  const float* weight = in_proj.weight.value.data();
  const float* bias = in_proj.bias.value.data();
  ensure_shape(qkv_, Shape{batch, seq_q, d_model_});
  ensure_shape(kv_, Shape{batch, seq_k, 2 * d_model_});
  project(x.data(), batch * seq_q, d_model_, weight, bias, d_model_, qkv_.data());
  project(memory.data(), batch * seq_k, d_model_, weight + d_model_ * d_model_, bias + d_model_,
          2 * d_model_, kv_.data());
  ensure_shape(probabilities_, Shape{batch, n_heads_, seq_q, seq_k});
  ensure_shape(context_, Shape{batch, seq_q, d_model_});
  run_heads_forward(qkv_.data(), d_model_, kv_.data(), kv_.data() + d_model_, 2 * d_model_, batch,
                    seq_q, seq_k, d_model_, n_heads_, limits, probabilities_.data(),
                    context_.data());
  out_proj.forward(context_, y);
}

void MultiHeadAttention::backward_cross(const Tensor& x, const Tensor& memory, const Tensor& dy,
                                        Tensor& dx, Tensor& dmemory) {
  const int64_t batch = x.shape()[0], seq_q = x.shape()[1], seq_k = memory.shape()[1];
  if (!(dmemory.shape() == memory.shape())) {
    throw Error("dmemory has shape " + dmemory.shape().to_string() + ", expected " +
                memory.shape().to_string());
  }
  const std::vector<int64_t> limits = key_limits(mask_, batch, seq_q, seq_k);
  out_proj.backward(context_, dy, &dcontext_);
  ensure_shape(dq_scratch_, qkv_.shape());
  ensure_shape(dkv_, kv_.shape());
  std::fill(dkv_.values().begin(), dkv_.values().end(), 0.0f);
  run_heads_backward(qkv_.data(), d_model_, kv_.data(), kv_.data() + d_model_, 2 * d_model_,
                     dq_scratch_.data(), dkv_.data(), dkv_.data() + d_model_, batch, seq_q, seq_k,
                     d_model_, n_heads_, limits, probabilities_.data(), dcontext_.data());
  ensure_shape(dx, x.shape());
  const float* weight = in_proj.weight.value.data();
  float* dweight = in_proj.weight.grad.data();
  float* dbias = in_proj.bias.grad.data();
  project_backward(x.data(), batch * seq_q, d_model_, weight, d_model_, dq_scratch_.data(), dweight,
                   dbias, dx.data(), false);
  project_backward(memory.data(), batch * seq_k, d_model_, weight + d_model_ * d_model_,
                   2 * d_model_, dkv_.data(), dweight + d_model_ * d_model_, dbias + d_model_,
                   dmemory.data(), true);
}

ParameterList MultiHeadAttention::parameters() {
  ParameterList list = in_proj.parameters();
  for (Parameter* parameter : out_proj.parameters()) list.push_back(parameter);
  return list;
}

}  // namespace addnorm::nn
