// A decoder-style block with three Add & Norm boxes: causal self-attention, cross-attention over
// an encoder's output (the memory), and the feed-forward network, each with the placement of
// BlockConfig (see block.hpp).
#pragma once

#include <memory>

#include "addnorm/nn/block.hpp"

namespace addnorm::nn {

class DecoderBlock {
 public:
  DecoderBlock(const BlockConfig& config, const BlockInit& init);
  ~DecoderBlock();
  DecoderBlock(DecoderBlock&&) noexcept;
  DecoderBlock& operator=(DecoderBlock&&) noexcept;

  // x [batch, seq, d], memory [batch, seq_m, d]. Self-attention is always causal (plus
  // self_mask.lengths); memory_mask.lengths pads the memory.
  const Tensor& forward(const Tensor& x, const Tensor& memory, const AttentionMask& self_mask = {},
                        const AttentionMask& memory_mask = {});
  // Returns dx; adds the memory's gradient to dmemory (reshaped to memory's shape and zeroed
  // first if its shape differs).
  const Tensor& backward(const Tensor& dy, Tensor& dmemory);

  void set_training(bool training);
  ParameterList parameters();

 private:
  BlockConfig config_;
  bool training_ = true;
  MultiHeadAttention self_attention_;
  MultiHeadAttention cross_attention_;
  FeedForward feed_forward_;
  std::unique_ptr<ResidualSublayer> self_box_, cross_box_, ffn_box_;
  Tensor input_, memory_, self_in_, self_out_, h1_, cross_in_, cross_out_, h2_, ffn_in_, ffn_out_,
      output_;
  Tensor d_ffn_out_, d_ffn_in_, dh2_, d_cross_out_, d_cross_in_, dh1_, d_self_out_, d_self_in_,
      dinput_;
};

}  // namespace addnorm::nn
