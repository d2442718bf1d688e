// The transformer encoder block of the seed page, with every Add & Norm placement:
//
//   post_norm   (2017 paper)  x = Norm(x + Dropout(F(x)))          for F = attention, then FFN
//   pre_norm    (GPT-2)       x = x + Dropout(F(Norm(x)))
//   no_norm                   x = x + Dropout(F(x))
//   no_residual               x = Norm(Dropout(F(x)))              (post-norm without the add)
//   deep_norm   (Wang 2022)   x = Norm(alpha * x + Dropout(F(x))), alpha = (2N)^(1/4), and
//                             beta = (8N)^(-1/4) scaling the init of the FFN, value and output
//                             projections (encoder-only constants, N = stack depth)
//   rezero      (Bachlechner) x = x + alpha * Dropout(F(x)), alpha a learned scalar per
//                             sub-layer initialised to 0; no norm
//   admin       (Liu 2020)    x = Norm(omega * x + Dropout(F(x))), omega a learned vector per
//                             sub-layer (one value per feature), set by a profiling pass on the
//                             first batch (Stack::initialize_admin)
//   bare                      x = Dropout(F(x)): neither residual nor norm (Dong et al. 2021's
//                             pure self-attention network when the blocks are attention only)
//
// Every norm and residual add is one of addnorm's ops (layer_norm, rms_norm, batch_norm, add,
// add_norm_pre, add_norm_post, dropout and their backwards).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "addnorm/nn/attention.hpp"
#include "addnorm/nn/feed_forward.hpp"
#include "addnorm/nn/init.hpp"
#include "addnorm/nn/norm.hpp"
#include "addnorm/nn/parameter.hpp"
#include "addnorm/tensor.hpp"

namespace addnorm::nn {

enum class Placement { post_norm, pre_norm, no_norm, no_residual, deep_norm, rezero, admin, bare };

// "post_norm", "pre_norm", "no_norm", "no_residual", "deep_norm", "rezero", "admin", "bare".
const char* placement_name(Placement placement);
// Accepts the names above (and "post", "pre", "none" as short forms); throws Error otherwise.
Placement parse_placement(const std::string& name);

struct BlockConfig {
  int64_t d_model = 64;
  int64_t n_heads = 4;  // must divide d_model
  int64_t d_ff = 256;
  Activation activation = Activation::relu;
  Placement placement = Placement::pre_norm;
  NormType norm = NormType::layer_norm;  // ignored by no_norm, rezero and bare
  float eps = 1e-5f;
  float dropout = 0.0f;  // on each sub-layer's output, before the residual add; in [0, 1)
  // false: the block is its FFN sub-layer only (one Add & Norm box), the usual block of warmup
  // and signal-propagation studies. The attention weights are still drawn (so the FFN weights
  // are the same as in the full block) but are not parameters and are never run.
  bool attention = true;
  // false: the block is its attention sub-layer only, the block of rank-collapse studies. The
  // FFN weights are drawn all the same and never run. attention and ffn cannot both be false.
  bool ffn = true;
};

// Throws Error naming the field when a value is out of range (sizes >= 1 and below documented
// limits, n_heads dividing d_model, dropout in [0, 1), eps >= 0 and finite, at least one of
// attention and ffn).
void validate_block_config(const BlockConfig& config);

struct BlockInit {
  InitScheme scheme = InitScheme::xavier_uniform;
  int64_t stack_depth = 1;  // N in GPT-2's 0.02 / sqrt(2 N) and in DeepNorm's alpha and beta
  int layer = 0;            // index in the stack; parameters are named "blocks.<layer>.*"
  uint64_t seed = 0;        // weights and dropout masks derive from (seed, layer)
};

// DeepNorm's encoder-only constants for a stack of `depth` blocks.
double deep_norm_alpha(int64_t depth);  // (2 N)^(1/4)
double deep_norm_beta(int64_t depth);   // (8 N)^(-1/4)

class ResidualSublayer;  // one Add & Norm box (src/nn); an implementation detail

class TransformerBlock {
 public:
  TransformerBlock(const BlockConfig& config, const BlockInit& init);
  ~TransformerBlock();
  TransformerBlock(TransformerBlock&&) noexcept;
  TransformerBlock& operator=(TransformerBlock&&) noexcept;

  const BlockConfig& config() const { return config_; }

  // x [batch, seq, d] -> output [batch, seq, d]. The block copies x; the returned reference is
  // valid until the next forward.
  const Tensor& forward(const Tensor& x, const AttentionMask& mask = {});
  // dx from dy (gradient of the output of the last forward); accumulates parameter gradients.
  const Tensor& backward(const Tensor& dy);

  // The last forward's input (the block keeps a copy).
  const Tensor& input() const { return input_; }
  // The residual stream between the two sub-layers (after the attention Add & Norm).
  const Tensor& after_attention() const;
  const Tensor& output() const;
  // What each sub-layer read in the last forward: Norm(x) for pre-norm, x otherwise.
  const Tensor& attention_input() const;
  const Tensor& ffn_input() const;
  // Each Add & Norm box's norm (its saved row statistics describe the norm's last input), or
  // nullptr for placements without a norm.
  const Norm* attention_norm() const;
  const Norm* ffn_norm() const;

  void set_training(bool training);
  bool training() const { return training_; }

  // Admin's profiling: while `ratio` is set, each forward sets every box's omega to *ratio before
  // it runs and then updates *ratio to sqrt(Var[omega * x] + Var[F(x)]) of what the box summed
  // (variances over all elements, in float64). nullptr ends it. Only admin blocks use it.
  void set_admin_profile(double* ratio);

  ParameterList parameters();

  MultiHeadAttention& attention() { return attention_; }
  FeedForward& feed_forward() { return feed_forward_; }

 private:
  BlockConfig config_;
  bool training_ = true;
  MultiHeadAttention attention_;
  FeedForward feed_forward_;
  std::unique_ptr<ResidualSublayer> attention_box_;
  std::unique_ptr<ResidualSublayer> ffn_box_;
  Tensor input_, attention_in_, attention_out_, middle_, ffn_in_, ffn_out_, output_;
  Tensor dffn_out_, dffn_in_, dmiddle_, dattention_out_, dattention_in_, dinput_;
};

}  // namespace addnorm::nn
