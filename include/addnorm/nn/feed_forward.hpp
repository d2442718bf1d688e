// Position-wise feed-forward network: Linear(d, d_ff) -> ReLU or GELU -> Linear(d_ff, d).
#pragma once

#include <cstdint>
#include <string>

#include "addnorm/nn/linear.hpp"
#include "addnorm/nn/parameter.hpp"
#include "addnorm/tensor.hpp"

namespace addnorm::nn {

// GELU is the exact erf form x * Phi(x) (PyTorch's default), not the tanh approximation.
enum class Activation { relu, gelu };

const char* activation_name(Activation activation);    // "relu", "gelu"
Activation parse_activation(const std::string& name);  // throws Error naming the choices

class FeedForward {
 public:
  FeedForward(const std::string& name, int64_t d_model, int64_t d_ff, Activation activation);

  // x [..., d] -> y [..., d]; saves the hidden pre-activation for backward.
  void forward(const Tensor& x, Tensor& y);
  // dx from dy; x is the forward's input. Accumulates both layers' gradients.
  void backward(const Tensor& x, const Tensor& dy, Tensor& dx);

  ParameterList parameters();

  Linear linear1;  // d -> d_ff
  Linear linear2;  // d_ff -> d

 private:
  Activation activation_;
  Tensor pre_activation_, hidden_, dhidden_;
};

}  // namespace addnorm::nn
