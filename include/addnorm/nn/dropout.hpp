// Dropout as a layer over addnorm::dropout: each forward call draws a fresh mask from
// (seed, offset) with the offset advancing by the tensor size, and the backward regenerates it.
#pragma once

#include <cstdint>

#include "addnorm/ops.hpp"
#include "addnorm/tensor.hpp"

namespace addnorm::nn {

class Dropout {
 public:
  Dropout() = default;
  // p in [0, 1). seed identifies this dropout site in the model.
  Dropout(float p, uint64_t seed);

  float p() const { return p_; }
  bool active(bool training) const { return training && p_ > 0.0f; }

  // y = dropout(x); the identity (a copy) when not training or p = 0.
  void forward(const Tensor& x, Tensor& y, bool training);
  // dx = dy * mask / (1 - p) with the mask of the last forward.
  void backward(const Tensor& dy, Tensor& dx) const;
  // For ops that fuse dropout (add_norm_post): the options a forward of `numel` elements would
  // use (p = 0 when not training), advancing the stream as forward does.
  DropoutOptions next_options(int64_t numel, bool training);
  // The options of the last forward or next_options call.
  const DropoutOptions& last_options() const { return last_; }

 private:
  float p_ = 0.0f;
  uint64_t seed_ = 0;
  uint64_t offset_ = 0;
  DropoutOptions last_{};
  bool last_active_ = false;
};

}  // namespace addnorm::nn
