// Multi-head scaled dot-product attention with a fused [3 d, d] input projection (PyTorch's
// in_proj_weight layout: rows 0..d-1 are W_q, then W_k, then W_v) and an output projection.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "addnorm/nn/linear.hpp"
#include "addnorm/nn/parameter.hpp"
#include "addnorm/tensor.hpp"

namespace addnorm::nn {

// Which keys a query may attend to. Both parts combine.
struct AttentionMask {
  bool causal = false;  // query t sees keys 0..t only
  // Padding: entry b is the true length of sequence b (1..seq); keys at positions >= length are
  // masked for every query. Empty: no padding.
  std::vector<int64_t> lengths;
};

class MultiHeadAttention {
 public:
  MultiHeadAttention(const std::string& name, int64_t d_model, int64_t n_heads);

  int64_t d_model() const { return d_model_; }
  int64_t n_heads() const { return n_heads_; }

  // Self-attention: x [batch, seq, d] -> y [batch, seq, d]. Saves q, k, v and the attention
  // probabilities for backward.
  void forward(const Tensor& x, const AttentionMask& mask, Tensor& y);
  // dx from dy; x is the forward's input. Accumulates the projections' gradients.
  void backward(const Tensor& x, const Tensor& dy, Tensor& dx);

  // Cross-attention: queries from x [batch, seq_q, d], keys and values from memory
  // [batch, seq_k, d]; mask.lengths are memory lengths (causal must be false).
  void forward_cross(const Tensor& x, const Tensor& memory, const AttentionMask& mask, Tensor& y);
  // Writes dx and *adds* to dmemory (which must have memory's shape).
  void backward_cross(const Tensor& x, const Tensor& memory, const Tensor& dy, Tensor& dx,
                      Tensor& dmemory);

  // The attention probabilities of the last forward, [batch, heads, seq_q, seq_k].
  const Tensor& probabilities() const { return probabilities_; }

  ParameterList parameters();

  Linear in_proj;   // d -> 3 d
  Linear out_proj;  // d -> d

 private:
  int64_t d_model_;
  int64_t n_heads_;
  AttentionMask mask_;
  Tensor qkv_;            // [batch, seq, 3 d] (self) ; for cross: q in [.., d], kv separately
  Tensor kv_;             // cross-attention only: [batch, seq_k, 2 d]
  Tensor probabilities_;  // [batch, heads, seq_q, seq_k]
  Tensor context_;        // [batch, seq_q, d]: heads concatenated, input of out_proj
  Tensor dcontext_, dqkv_, dkv_, dq_scratch_;
};

}  // namespace addnorm::nn
