// TransformerBlock: attention and FFN sub-layers, each inside a ResidualSublayer (Add & Norm box).
#include "addnorm/nn/block.hpp"

#include <cmath>
#include <string>

#include "addnorm/error.hpp"
#include "block_init.hpp"
#include "residual_sublayer.hpp"
#include "seeds.hpp"

namespace addnorm::nn {

const char* placement_name(Placement placement) {
  switch (placement) {
    case Placement::post_norm:
      return "post_norm";
    case Placement::pre_norm:
      return "pre_norm";
    case Placement::no_norm:
      return "no_norm";
    case Placement::no_residual:
      return "no_residual";
    case Placement::deep_norm:
      return "deep_norm";
    case Placement::rezero:
      return "rezero";
    case Placement::admin:
      return "admin";
    case Placement::bare:
      return "bare";
  }
  return "?";
}

Placement parse_placement(const std::string& name) {
  if (name == "post_norm" || name == "post") return Placement::post_norm;
  if (name == "pre_norm" || name == "pre") return Placement::pre_norm;
  if (name == "no_norm" || name == "none") return Placement::no_norm;
  if (name == "no_residual") return Placement::no_residual;
  if (name == "deep_norm" || name == "deepnorm") return Placement::deep_norm;
  if (name == "rezero") return Placement::rezero;
  if (name == "admin") return Placement::admin;
  if (name == "bare") return Placement::bare;
  throw Error("placement is \"" + name +
              "\", expected one of post_norm, pre_norm, no_norm, no_residual, deep_norm, rezero, "
              "admin, bare");
}

// Limits that keep a model's memory within reason (a 65536-wide, 4096-head layer is far beyond
// anything the lab runs on two cores).
static constexpr int64_t kMaxWidth = 65536;

void validate_block_config(const BlockConfig& config) {
  auto check_size = [](int64_t value, const char* what) {
    if (value < 1 || value > kMaxWidth) {
      throw Error(std::string(what) + " is " + std::to_string(value) + ", expected 1.." +
                  std::to_string(kMaxWidth));
    }
  };
  check_size(config.d_model, "d_model");
  check_size(config.n_heads, "n_heads");
  check_size(config.d_ff, "d_ff");
  if (config.d_model % config.n_heads != 0) {
    throw Error("n_heads is " + std::to_string(config.n_heads) +
                ", expected a divisor of d_model " + std::to_string(config.d_model));
  }
  if (!(config.dropout >= 0.0f && config.dropout < 1.0f)) {
    throw Error("dropout is " + std::to_string(config.dropout) + ", expected a value in [0, 1)");
  }
  if (!(config.eps >= 0.0f) || !std::isfinite(config.eps)) {
    throw Error("eps is " + std::to_string(config.eps) + ", expected a finite value >= 0");
  }
  if (!config.attention && !config.ffn) {
    throw Error("attention and ffn are both false, expected a block with at least one sub-layer");
  }
}

double deep_norm_alpha(int64_t depth) {
  return std::pow(2.0 * static_cast<double>(depth), 0.25);
}
double deep_norm_beta(int64_t depth) {
  return std::pow(8.0 * static_cast<double>(depth), -0.25);
}

namespace detail {

namespace {

double init_beta(const BlockConfig& config, const BlockInit& init) {
  // DeepNorm scales the value, output and FFN projections by beta (the query/key ones stay).
  return config.placement == Placement::deep_norm ? deep_norm_beta(init.stack_depth) : 1.0;
}

double residual_std(const BlockInit& init) {
  return 0.02 / std::sqrt(2.0 * static_cast<double>(init.stack_depth));
}

}  // namespace

void init_attention(MultiHeadAttention& attention, const BlockConfig& config, const BlockInit& init,
                    Generator& generator) {
  const int64_t d = config.d_model;
  const double beta = init_beta(config, init);
  float* in_weight = attention.in_proj.weight.value.data();
  auto block_of = [&](int64_t index) {
    return MutableView{in_weight + index * d * d, Shape{d, d}};
  };
  if (init.scheme == InitScheme::xavier_uniform) {
    // Q, K and V are each a d x d projection, initialised as three separate layers.
    xavier_uniform(block_of(0), d, d, 1.0, generator);
    xavier_uniform(block_of(1), d, d, 1.0, generator);
    xavier_uniform(block_of(2), d, d, beta, generator);
    xavier_uniform(attention.out_proj.weight.value.view(), d, d, beta, generator);
  } else {
    normal_fill(block_of(0), 0.02, generator);
    normal_fill(block_of(1), 0.02, generator);
    normal_fill(block_of(2), 0.02 * beta, generator);
    normal_fill(attention.out_proj.weight.value.view(), residual_std(init) * beta, generator);
  }
}

void init_feed_forward(FeedForward& ffn, const BlockConfig& config, const BlockInit& init,
                       Generator& generator) {
  const int64_t d = config.d_model;
  const double beta = init_beta(config, init);
  if (init.scheme == InitScheme::xavier_uniform) {
    xavier_uniform(ffn.linear1.weight.value.view(), d, config.d_ff, beta, generator);
    xavier_uniform(ffn.linear2.weight.value.view(), config.d_ff, d, beta, generator);
  } else {
    normal_fill(ffn.linear1.weight.value.view(), 0.02 * beta, generator);
    normal_fill(ffn.linear2.weight.value.view(), residual_std(init) * beta, generator);
  }
}

void tag_layer(const ParameterList& parameters, int layer) {
  for (Parameter* parameter : parameters) parameter->layer = layer;
}

}  // namespace detail

TransformerBlock::TransformerBlock(const BlockConfig& config, const BlockInit& init)
    : config_((validate_block_config(config), config)),
      attention_("blocks." + std::to_string(init.layer) + ".attn", config.d_model, config.n_heads),
      feed_forward_("blocks." + std::to_string(init.layer) + ".ffn", config.d_model, config.d_ff,
                    config.activation) {
  if (init.stack_depth < 1) {
    throw Error("stack_depth is " + std::to_string(init.stack_depth) + ", expected >= 1");
  }
  const std::string prefix = "blocks." + std::to_string(init.layer);
  const double alpha = deep_norm_alpha(init.stack_depth);
  const auto layer = static_cast<uint64_t>(init.layer);
  attention_box_ = std::make_unique<ResidualSublayer>(
      prefix + ".attn_box", config, alpha,
      detail::derive_seed(init.seed, detail::kDropoutSalt, 2 * layer));
  ffn_box_ = std::make_unique<ResidualSublayer>(
      prefix + ".ffn_box", config, alpha,
      detail::derive_seed(init.seed, detail::kDropoutSalt, 2 * layer + 1));
  Generator generator(detail::derive_seed(init.seed, detail::kWeightsSalt, layer));
  detail::init_attention(attention_, config, init, generator);
  detail::init_feed_forward(feed_forward_, config, init, generator);
  detail::tag_layer(parameters(), init.layer);
}

TransformerBlock::~TransformerBlock() = default;
TransformerBlock::TransformerBlock(TransformerBlock&&) noexcept = default;
TransformerBlock& TransformerBlock::operator=(TransformerBlock&&) noexcept = default;

const Tensor& TransformerBlock::forward(const Tensor& x, const AttentionMask& mask) {
  const Shape& shape = x.shape();
  if (shape.rank() != 3 || shape[2] != config_.d_model || shape[0] < 1 || shape[1] < 1) {
    throw Error("block input x has shape " + shape.to_string() + ", expected [batch, seq, " +
                std::to_string(config_.d_model) + "]");
  }
  ensure_shape(input_, x.shape());
  std::copy(x.values().begin(), x.values().end(), input_.values().begin());
  if (config_.attention) {
    const Tensor& attention_in = attention_box_->input(input_, training_);
    attention_.forward(attention_in, mask, attention_out_);
    attention_box_->output(input_, attention_out_, middle_, training_);
  } else {
    ensure_shape(middle_, x.shape());
    std::copy(x.values().begin(), x.values().end(), middle_.values().begin());
  }
  if (config_.ffn) {
    const Tensor& ffn_in = ffn_box_->input(middle_, training_);
    feed_forward_.forward(ffn_in, ffn_out_);
    ffn_box_->output(middle_, ffn_out_, output_, training_);
  } else {
    ensure_shape(output_, middle_.shape());
    std::copy(middle_.values().begin(), middle_.values().end(), output_.values().begin());
  }
  return output_;
}

const Tensor& TransformerBlock::backward(const Tensor& dy) {
  if (output_.numel() == 0 || !(dy.shape() == output_.shape())) {
    throw Error("dy has shape " + dy.shape().to_string() + ", expected " +
                output_.shape().to_string() + " (the last forward's output)");
  }
  if (config_.ffn) {
    ffn_box_->output_backward(middle_, ffn_out_, dy, dmiddle_, dffn_out_, training_);
    feed_forward_.backward(ffn_box_->last_input(middle_), dffn_out_, dffn_in_);
    ffn_box_->input_backward(middle_, dffn_in_, dmiddle_, training_);
  } else {
    ensure_shape(dmiddle_, dy.shape());
    std::copy(dy.values().begin(), dy.values().end(), dmiddle_.values().begin());
  }
  if (!config_.attention) return dmiddle_;
  attention_box_->output_backward(input_, attention_out_, dmiddle_, dinput_, dattention_out_,
                                  training_);
  attention_.backward(attention_box_->last_input(input_), dattention_out_, dattention_in_);
  attention_box_->input_backward(input_, dattention_in_, dinput_, training_);
  return dinput_;
}

const Tensor& TransformerBlock::after_attention() const {
  return middle_;
}
const Tensor& TransformerBlock::output() const {
  return output_;
}
const Tensor& TransformerBlock::attention_input() const {
  return config_.attention ? attention_box_->last_input(input_) : input_;
}
const Tensor& TransformerBlock::ffn_input() const {
  return config_.ffn ? ffn_box_->last_input(middle_) : middle_;
}
const Norm* TransformerBlock::attention_norm() const {
  return config_.attention ? attention_box_->norm() : nullptr;
}
const Norm* TransformerBlock::ffn_norm() const {
  return config_.ffn ? ffn_box_->norm() : nullptr;
}

void TransformerBlock::set_training(bool training) {
  training_ = training;
}

void TransformerBlock::set_admin_profile(double* ratio) {
  if (config_.placement != Placement::admin) return;
  attention_box_->set_admin_profile(ratio);
  ffn_box_->set_admin_profile(ratio);
}

ParameterList TransformerBlock::parameters() {
  ParameterList list;
  if (config_.attention) list = attention_.parameters();
  if (config_.ffn) {
    for (Parameter* parameter : feed_forward_.parameters()) list.push_back(parameter);
  }
  if (config_.attention) {
    for (Parameter* parameter : attention_box_->parameters()) list.push_back(parameter);
  }
  if (config_.ffn) {
    for (Parameter* parameter : ffn_box_->parameters()) list.push_back(parameter);
  }
  return list;
}

}  // namespace addnorm::nn
