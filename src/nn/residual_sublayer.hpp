// One Add & Norm box around a sub-layer F, for every placement of block.hpp. The block calls
//   u = box.input(x)          what F reads (Norm(x) for pre-norm, x otherwise)
//   box.output(x, F(u), out)  the new residual stream
// and in reverse output_backward, then input_backward. All norms and adds are addnorm's ops.
#pragma once

#include <cstdint>
#include <string>

#include "addnorm/nn/block.hpp"
#include "addnorm/nn/dropout.hpp"
#include "addnorm/nn/norm.hpp"
#include "addnorm/nn/parameter.hpp"

namespace addnorm::nn {

class ResidualSublayer {
 public:
  // alpha: DeepNorm's residual scale (used by deep_norm only).
  ResidualSublayer(const std::string& name, const BlockConfig& config, double alpha,
                   uint64_t dropout_seed);

  const Tensor& input(const Tensor& x, bool training);
  // What the last input(x) returned, for the backward.
  const Tensor& last_input(const Tensor& x) const {
    return placement_ == Placement::pre_norm ? normed_ : x;
  }
  void output(const Tensor& x, const Tensor& s, Tensor& out, bool training);

  // From dout: dx (the gradient reaching x through this box's residual path and norm) and ds.
  void output_backward(const Tensor& x, const Tensor& s, const Tensor& dout, Tensor& dx, Tensor& ds,
                       bool training);
  // Adds the gradient reaching x through input() (du is the gradient of input()'s result).
  void input_backward(const Tensor& x, const Tensor& du, Tensor& dx, bool training);

  ParameterList parameters();
  Norm* norm() { return has_norm_ ? &norm_ : nullptr; }
  Parameter* alpha() { return placement_ == Placement::rezero ? &rezero_alpha_ : nullptr; }
  // Admin's profiling (TransformerBlock::set_admin_profile); admin boxes only.
  void set_admin_profile(double* ratio) { admin_ratio_ = ratio; }

 private:
  Placement placement_;
  bool has_norm_;
  bool fused_;  // post-norm family with LayerNorm/RMSNorm: add_norm_post does add + norm
  float deep_alpha_;
  Norm norm_;
  Dropout dropout_;
  Parameter rezero_alpha_;
  Parameter admin_omega_;          // admin: the shortcut's per-feature scale
  double* admin_ratio_ = nullptr;  // admin: set while profiling
  Tensor normed_, dropped_, scaled_, pre_norm_sum_, dsum_, dnormed_;
};

}  // namespace addnorm::nn
