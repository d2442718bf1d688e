// A small sequence model: token embedding + positional encoding -> Stack -> Linear head ->
// softmax cross-entropy. Enough to train a stack on a synthetic task (copy, reverse, sort).
#pragma once

#include <cstdint>
#include <span>

#include "addnorm/nn/attention.hpp"
#include "addnorm/nn/embedding.hpp"
#include "addnorm/nn/linear.hpp"
#include "addnorm/nn/stack.hpp"

namespace addnorm::nn {

struct SequenceModelConfig {
  StackConfig stack;
  int64_t vocab_size = 16;
  // Multiply embeddings by sqrt(d_model) (the 2017 paper). With InitScheme::gpt2_scaled the
  // embedding is N(0, 0.02) and this should be off.
  bool scale_embedding = true;
};

class SequenceModel {
 public:
  explicit SequenceModel(const SequenceModelConfig& config);

  // tokens [batch * seq], row-major. Returns logits [batch, seq, vocab].
  const Tensor& forward(std::span<const int32_t> tokens, int64_t batch, int64_t seq,
                        const AttentionMask& mask = {});
  // Forward, mean cross-entropy over targets != ignore_index, and backward (gradients
  // accumulate: zero them first). Returns the loss.
  double forward_backward(std::span<const int32_t> tokens, std::span<const int32_t> targets,
                          int64_t batch, int64_t seq, const AttentionMask& mask = {},
                          int32_t ignore_index = -1);
  // Forward and loss only.
  double loss(std::span<const int32_t> tokens, std::span<const int32_t> targets, int64_t batch,
              int64_t seq, const AttentionMask& mask = {}, int32_t ignore_index = -1);

  // Stack::initialize_admin on these tokens' embeddings (see there).
  void initialize_admin(std::span<const int32_t> tokens, int64_t batch, int64_t seq,
                        const AttentionMask& mask = {});

  void set_training(bool training);
  ParameterList parameters();

  Stack& stack() { return stack_; }
  Embedding& embedding() { return embedding_; }
  Linear& head() { return head_; }

 private:
  SequenceModelConfig config_;
  Embedding embedding_;
  Stack stack_;
  Linear head_;
  Tensor embedded_, logits_, dlogits_, dstack_out_;
};

}  // namespace addnorm::nn
