// Stack: N blocks, an optional final norm, and the per-layer measurements.
#include "addnorm/nn/stack.hpp"

#include <string>

#include "addnorm/error.hpp"
#include "addnorm/nn/parameter.hpp"

namespace addnorm::nn {

void validate_stack_config(const StackConfig& config) {
  if (config.depth < 1 || config.depth > kMaxDepth) {
    throw Error("depth is " + std::to_string(config.depth) + ", expected 1.." +
                std::to_string(kMaxDepth));
  }
  validate_block_config(config.block);
}

Stack::Stack(const StackConfig& config) : config_(config) {
  validate_stack_config(config);
  final_norm_enabled_ = config.final_norm.value_or(config.block.placement == Placement::pre_norm);
  blocks_.reserve(static_cast<size_t>(config.depth));
  for (int64_t layer = 0; layer < config.depth; ++layer) {
    BlockInit init{config.init, config.depth, static_cast<int>(layer), config.seed};
    blocks_.emplace_back(config.block, init);
  }
  if (final_norm_enabled_) {
    const Placement placement = config.block.placement;
    const bool block_norm = placement != Placement::no_norm && placement != Placement::rezero &&
                            placement != Placement::bare;
    const NormType type = block_norm ? config.block.norm : NormType::layer_norm;
    final_norm_ = Norm("final_norm", type, config.block.d_model, config.block.eps);
  }
}

void Stack::initialize_admin(const Tensor& x, const AttentionMask& mask) {
  if (config_.block.placement != Placement::admin) return;
  admin_initialized_ = true;  // before forward, which would otherwise profile again
  double ratio = 1.0;
  for (TransformerBlock& block : blocks_) block.set_admin_profile(&ratio);
  try {
    forward(x, mask);
  } catch (...) {
    for (TransformerBlock& block : blocks_) block.set_admin_profile(nullptr);
    admin_initialized_ = false;
    throw;
  }
  for (TransformerBlock& block : blocks_) block.set_admin_profile(nullptr);
}

const Tensor& Stack::forward(const Tensor& x, const AttentionMask& mask) {
  if (config_.block.placement == Placement::admin && !admin_initialized_) initialize_admin(x, mask);
  if (config_.record_stats) {
    input_stats_ = activation_stats(x.view());
    layer_stats_.assign(blocks_.size(), LayerStats{});
  }
  const Tensor* stream = &x;
  for (size_t layer = 0; layer < blocks_.size(); ++layer) {
    stream = &blocks_[layer].forward(*stream, mask);
    if (config_.record_stats) {
      layer_stats_[layer] = {activation_stats(blocks_[layer].after_attention().view()),
                             activation_stats(stream->view())};
    }
  }
  if (!final_norm_enabled_) return *stream;
  final_norm_.forward(*stream, output_, training_);
  return output_;
}

const Tensor& Stack::backward(const Tensor& dy) {
  if (config_.record_stats) residual_grad_norms_.assign(blocks_.size() + 1, 0.0);
  const Tensor* gradient = &dy;
  if (final_norm_enabled_) {
    final_norm_.backward(blocks_.back().output(), dy, dbefore_final_, training_);
    gradient = &dbefore_final_;
  }
  if (config_.record_stats) residual_grad_norms_.back() = l2_norm(gradient->view());
  for (size_t layer = blocks_.size(); layer-- > 0;) {
    gradient = &blocks_[layer].backward(*gradient);
    if (config_.record_stats) residual_grad_norms_[layer] = l2_norm(gradient->view());
  }
  return *gradient;
}

const Tensor& Stack::output() const {
  return final_norm_enabled_ ? output_ : blocks_.back().output();
}

void Stack::set_training(bool training) {
  training_ = training;
  for (TransformerBlock& block : blocks_) block.set_training(training);
}

ParameterList Stack::parameters() {
  ParameterList list;
  for (TransformerBlock& block : blocks_) {
    for (Parameter* parameter : block.parameters()) list.push_back(parameter);
  }
  if (final_norm_enabled_) {
    for (Parameter* parameter : final_norm_.parameters()) list.push_back(parameter);
  }
  return list;
}

}  // namespace addnorm::nn
