// DecoderBlock: causal self-attention, cross-attention over the memory, FFN; three Add & Norm
// boxes with the block's placement.
#include "addnorm/nn/decoder_block.hpp"

#include <algorithm>
#include <string>

#include "addnorm/error.hpp"
#include "block_init.hpp"
#include "residual_sublayer.hpp"
#include "seeds.hpp"

namespace addnorm::nn {

DecoderBlock::DecoderBlock(const BlockConfig& config, const BlockInit& init)
    : config_((validate_block_config(config), config)),
      self_attention_("decoder." + std::to_string(init.layer) + ".self_attn", config.d_model,
                      config.n_heads),
      cross_attention_("decoder." + std::to_string(init.layer) + ".cross_attn", config.d_model,
                       config.n_heads),
      feed_forward_("decoder." + std::to_string(init.layer) + ".ffn", config.d_model, config.d_ff,
                    config.activation) {
  if (init.stack_depth < 1) {
    throw Error("stack_depth is " + std::to_string(init.stack_depth) + ", expected >= 1");
  }
  if (config.placement == Placement::admin) {
    throw Error(
        "placement is admin, expected another for a decoder block (Admin's profiling "
        "pass runs in an encoder Stack)");
  }
  if (!config.attention || !config.ffn) {
    throw Error("attention or ffn is false, expected both for a decoder block");
  }
  const std::string prefix = "decoder." + std::to_string(init.layer);
  const double alpha = deep_norm_alpha(init.stack_depth);
  const uint64_t site = 3 * static_cast<uint64_t>(init.layer) + (uint64_t{1} << 40);
  auto seed = [&](uint64_t index) {
    return detail::derive_seed(init.seed, detail::kDropoutSalt, site + index);
  };
  self_box_ = std::make_unique<ResidualSublayer>(prefix + ".self_box", config, alpha, seed(0));
  cross_box_ = std::make_unique<ResidualSublayer>(prefix + ".cross_box", config, alpha, seed(1));
  ffn_box_ = std::make_unique<ResidualSublayer>(prefix + ".ffn_box", config, alpha, seed(2));
  Generator generator(detail::derive_seed(init.seed, detail::kWeightsSalt, site));
  detail::init_attention(self_attention_, config, init, generator);
  detail::init_attention(cross_attention_, config, init, generator);
  detail::init_feed_forward(feed_forward_, config, init, generator);
  detail::tag_layer(parameters(), init.layer);
}

DecoderBlock::~DecoderBlock() = default;
DecoderBlock::DecoderBlock(DecoderBlock&&) noexcept = default;
DecoderBlock& DecoderBlock::operator=(DecoderBlock&&) noexcept = default;

const Tensor& DecoderBlock::forward(const Tensor& x, const Tensor& memory,
                                    const AttentionMask& self_mask,
                                    const AttentionMask& memory_mask) {
  input_ = x;
  memory_ = memory;
  AttentionMask causal = self_mask;
  causal.causal = true;
  self_attention_.forward(self_box_->input(input_, training_), causal, self_out_);
  self_box_->output(input_, self_out_, h1_, training_);
  cross_attention_.forward_cross(cross_box_->input(h1_, training_), memory_, memory_mask,
                                 cross_out_);
  cross_box_->output(h1_, cross_out_, h2_, training_);
  feed_forward_.forward(ffn_box_->input(h2_, training_), ffn_out_);
  ffn_box_->output(h2_, ffn_out_, output_, training_);
  return output_;
}

const Tensor& DecoderBlock::backward(const Tensor& dy, Tensor& dmemory) {
  if (output_.numel() == 0 || !(dy.shape() == output_.shape())) {
    throw Error("dy has shape " + dy.shape().to_string() + ", expected " +
                output_.shape().to_string() + " (the last forward's output)");
  }
  if (!(dmemory.shape() == memory_.shape())) {
    dmemory = Tensor(memory_.shape());
  }
  ffn_box_->output_backward(h2_, ffn_out_, dy, dh2_, d_ffn_out_, training_);
  feed_forward_.backward(ffn_box_->last_input(h2_), d_ffn_out_, d_ffn_in_);
  ffn_box_->input_backward(h2_, d_ffn_in_, dh2_, training_);

  cross_box_->output_backward(h1_, cross_out_, dh2_, dh1_, d_cross_out_, training_);
  cross_attention_.backward_cross(cross_box_->last_input(h1_), memory_, d_cross_out_, d_cross_in_,
                                  dmemory);
  cross_box_->input_backward(h1_, d_cross_in_, dh1_, training_);

  self_box_->output_backward(input_, self_out_, dh1_, dinput_, d_self_out_, training_);
  self_attention_.backward(self_box_->last_input(input_), d_self_out_, d_self_in_);
  self_box_->input_backward(input_, d_self_in_, dinput_, training_);
  return dinput_;
}

void DecoderBlock::set_training(bool training) {
  training_ = training;
}

ParameterList DecoderBlock::parameters() {
  ParameterList list = self_attention_.parameters();
  for (Parameter* parameter : cross_attention_.parameters()) list.push_back(parameter);
  for (Parameter* parameter : feed_forward_.parameters()) list.push_back(parameter);
  for (auto* box : {self_box_.get(), cross_box_.get(), ffn_box_.get()}) {
    for (Parameter* parameter : box->parameters()) list.push_back(parameter);
  }
  return list;
}

}  // namespace addnorm::nn
