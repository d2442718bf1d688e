// The Dropout layer: a (seed, offset) stream per site, advanced by each forward.
#include "addnorm/nn/dropout.hpp"

#include <string>

#include "addnorm/error.hpp"
#include "addnorm/nn/linear.hpp"

namespace addnorm::nn {

Dropout::Dropout(float p, uint64_t seed) : p_(p), seed_(seed) {
  if (!(p >= 0.0f && p < 1.0f)) {
    throw Error("dropout p is " + std::to_string(p) + ", expected a value in [0, 1)");
  }
}

DropoutOptions Dropout::next_options(int64_t numel, bool training) {
  last_active_ = active(training);
  last_ = DropoutOptions{last_active_ ? p_ : 0.0f, seed_, offset_};
  if (last_active_) offset_ += static_cast<uint64_t>(numel);
  return last_;
}

void Dropout::forward(const Tensor& x, Tensor& y, bool training) {
  const DropoutOptions options = next_options(x.numel(), training);
  ensure_shape(y, x.shape());
  if (last_active_) {
    dropout(x.view(), y.view(), options);
  } else {
    std::copy(x.values().begin(), x.values().end(), y.values().begin());
  }
}

void Dropout::backward(const Tensor& dy, Tensor& dx) const {
  ensure_shape(dx, dy.shape());
  if (last_active_) {
    dropout_backward(dy.view(), dx.view(), last_);
  } else {
    std::copy(dy.values().begin(), dy.values().end(), dx.values().begin());
  }
}

}  // namespace addnorm::nn
