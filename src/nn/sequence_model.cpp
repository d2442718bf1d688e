// SequenceModel: embedding -> stack -> head -> cross-entropy.
#include "addnorm/nn/sequence_model.hpp"

#include <cmath>

#include "addnorm/nn/cross_entropy.hpp"
#include "addnorm/nn/init.hpp"
#include "seeds.hpp"

namespace addnorm::nn {

SequenceModel::SequenceModel(const SequenceModelConfig& config)
    : config_(config),
      embedding_("embedding", config.vocab_size, config.stack.block.d_model,
                 config.scale_embedding),
      stack_(config.stack),
      head_("head", config.stack.block.d_model, config.vocab_size) {
  Generator generator(detail::derive_seed(config.stack.seed, detail::kEmbeddingSalt, 0));
  const int64_t d = config.stack.block.d_model;
  if (config.stack.init == InitScheme::xavier_uniform) {
    // N(0, 1/d), times sqrt(d) in forward when scale_embedding: unit-variance embeddings.
    normal_fill(embedding_.weight.value.view(), 1.0 / std::sqrt(static_cast<double>(d)), generator);
    xavier_uniform(head_.weight.value.view(), d, config.vocab_size, 1.0, generator);
  } else {
    normal_fill(embedding_.weight.value.view(), 0.02, generator);
    normal_fill(head_.weight.value.view(), 0.02, generator);
  }
}

const Tensor& SequenceModel::forward(std::span<const int32_t> tokens, int64_t batch, int64_t seq,
                                     const AttentionMask& mask) {
  embedding_.forward(tokens, batch, seq, embedded_);
  head_.forward(stack_.forward(embedded_, mask), logits_);
  return logits_;
}

double SequenceModel::forward_backward(std::span<const int32_t> tokens,
                                       std::span<const int32_t> targets, int64_t batch, int64_t seq,
                                       const AttentionMask& mask, int32_t ignore_index) {
  const Tensor& logits = forward(tokens, batch, seq, mask);
  ensure_shape(dlogits_, logits.shape());
  const double loss = softmax_cross_entropy(logits.view(), targets, dlogits_.view(), ignore_index);
  head_.backward(stack_.output(), dlogits_, &dstack_out_);
  embedding_.backward(stack_.backward(dstack_out_));
  return loss;
}

double SequenceModel::loss(std::span<const int32_t> tokens, std::span<const int32_t> targets,
                           int64_t batch, int64_t seq, const AttentionMask& mask,
                           int32_t ignore_index) {
  const Tensor& logits = forward(tokens, batch, seq, mask);
  return softmax_cross_entropy(logits.view(), targets, {}, ignore_index);
}

void SequenceModel::initialize_admin(std::span<const int32_t> tokens, int64_t batch, int64_t seq,
                                     const AttentionMask& mask) {
  embedding_.forward(tokens, batch, seq, embedded_);
  stack_.initialize_admin(embedded_, mask);
}

void SequenceModel::set_training(bool training) {
  stack_.set_training(training);
}

ParameterList SequenceModel::parameters() {
  ParameterList list = embedding_.parameters();
  for (Parameter* parameter : stack_.parameters()) list.push_back(parameter);
  for (Parameter* parameter : head_.parameters()) list.push_back(parameter);
  return list;
}

}  // namespace addnorm::nn
