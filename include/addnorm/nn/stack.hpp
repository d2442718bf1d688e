// A stack of N transformer blocks, with the per-layer measurements the lab plots: activation
// statistics of the residual stream after every sub-layer, and the gradient norm reaching it.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "addnorm/nn/block.hpp"
#include "addnorm/nn/norm.hpp"
#include "addnorm/nn/stats.hpp"

namespace addnorm::nn {

struct StackConfig {
  BlockConfig block;
  int64_t depth = 6;
  InitScheme init = InitScheme::xavier_uniform;
  uint64_t seed = 0;
  // A norm after the last block, as GPT-2 has. Default: on for pre_norm, off otherwise.
  std::optional<bool> final_norm;
  // Compute activation_stats of every layer in forward (and residual gradient norms in backward).
  bool record_stats = true;
};

// Throws Error naming the field (depth in 1..kMaxDepth, and validate_block_config).
void validate_stack_config(const StackConfig& config);
inline constexpr int64_t kMaxDepth = 1024;

struct LayerStats {
  ActivationStats after_attention;  // the residual stream between the block's two sub-layers
  ActivationStats output;           // the block's output
};

class Stack {
 public:
  explicit Stack(const StackConfig& config);

  const StackConfig& config() const { return config_; }
  int64_t depth() const { return static_cast<int64_t>(blocks_.size()); }
  bool has_final_norm() const { return final_norm_enabled_; }

  // x [batch, seq, d] -> [batch, seq, d]. The reference stays valid until the next forward.
  const Tensor& forward(const Tensor& x, const AttentionMask& mask = {});
  // dx from the gradient of the last forward's output; accumulates parameter gradients.
  const Tensor& backward(const Tensor& dy);
  // The last forward's output (what forward returned).
  const Tensor& output() const;

  void set_training(bool training);

  // Parameters in order: blocks 0..N-1 (each: attention, FFN, norms/alphas/omegas), then final
  // norm.
  ParameterList parameters();

  // Admin (Liu et al. 2020): one forward on x that sets each box's omega in turn, from the
  // first box (omega = 1) on: omega_{i+1} = sqrt(Var[omega_i x_i] + Var[F_i(x_i)]), where x_i
  // is the stream box i reads and both variances are over all elements of the batch. With the
  // stream after a norm at unit variance this is the paper's omega_i^2 = 1 + sum_{j<i}
  // Var[F_j]. An admin stack runs it on its first forward unless it was called before;
  // calling it again re-profiles. A no-op for the other placements.
  void initialize_admin(const Tensor& x, const AttentionMask& mask = {});
  bool admin_initialized() const { return admin_initialized_; }

  // From the last forward: statistics of the input and of each block's stream.
  const ActivationStats& input_stats() const { return input_stats_; }
  const std::vector<LayerStats>& layer_stats() const { return layer_stats_; }
  // From the last backward: L2 norm of d(loss)/d(stream) entering each block (index l = input of
  // block l) and, at index depth, at the stack's output (before the final norm).
  const std::vector<double>& residual_grad_norms() const { return residual_grad_norms_; }

  TransformerBlock& block(int64_t index) { return blocks_.at(static_cast<size_t>(index)); }
  Norm* final_norm() { return final_norm_enabled_ ? &final_norm_ : nullptr; }

 private:
  StackConfig config_;
  bool training_ = true;
  bool final_norm_enabled_ = false;
  bool admin_initialized_ = false;
  std::vector<TransformerBlock> blocks_;
  Norm final_norm_;
  Tensor before_final_, output_, dbefore_final_;
  ActivationStats input_stats_;
  std::vector<LayerStats> layer_stats_;
  std::vector<double> residual_grad_norms_;
};

}  // namespace addnorm::nn
