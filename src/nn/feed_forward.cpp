// FeedForward: linear1 -> activation -> linear2, with the activation's derivative by hand.
#include "addnorm/nn/feed_forward.hpp"

#include <cmath>
#include <string>

#include "addnorm/error.hpp"

namespace addnorm::nn {

const char* activation_name(Activation activation) {
  return activation == Activation::relu ? "relu" : "gelu";
}

Activation parse_activation(const std::string& name) {
  if (name == "relu") return Activation::relu;
  if (name == "gelu") return Activation::gelu;
  throw Error("activation is \"" + name + "\", expected relu or gelu");
}

FeedForward::FeedForward(const std::string& name, int64_t d_model, int64_t d_ff,
                         Activation activation)
    : linear1(name + ".linear1", d_model, d_ff),
      linear2(name + ".linear2", d_ff, d_model),
      activation_(activation) {}

namespace {

constexpr double kInvSqrt2 = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;

// GELU(x) = x * Phi(x), Phi the standard normal CDF (computed in double, rounded once).
inline float gelu(float x) {
  const double v = x;
  return static_cast<float>(0.5 * v * (1.0 + std::erf(v * kInvSqrt2)));
}

// d GELU / dx = Phi(x) + x * phi(x).
inline float gelu_derivative(float x) {
  const double v = x;
  const double cdf = 0.5 * (1.0 + std::erf(v * kInvSqrt2));
  return static_cast<float>(cdf + v * kInvSqrt2Pi * std::exp(-0.5 * v * v));
}

}  // namespace

void FeedForward::forward(const Tensor& x, Tensor& y) {
  linear1.forward(x, pre_activation_);
  ensure_shape(hidden_, pre_activation_.shape());
  const int64_t count = pre_activation_.numel();
  const float* in = pre_activation_.data();
  float* out = hidden_.data();
  if (activation_ == Activation::relu) {
    for (int64_t i = 0; i < count; ++i) out[i] = in[i] > 0.0f ? in[i] : 0.0f;
  } else {
#pragma omp parallel for schedule(static) if (count > 65536)
    for (int64_t i = 0; i < count; ++i) out[i] = gelu(in[i]);
  }
  linear2.forward(hidden_, y);
}

void FeedForward::backward(const Tensor& x, const Tensor& dy, Tensor& dx) {
  linear2.backward(hidden_, dy, &dhidden_);
  const int64_t count = dhidden_.numel();
  const float* pre = pre_activation_.data();
  float* grad = dhidden_.data();
  if (activation_ == Activation::relu) {
    for (int64_t i = 0; i < count; ++i) grad[i] = pre[i] > 0.0f ? grad[i] : 0.0f;
  } else {
#pragma omp parallel for schedule(static) if (count > 65536)
    for (int64_t i = 0; i < count; ++i) grad[i] *= gelu_derivative(pre[i]);
  }
  linear1.backward(x, dhidden_, &dx);
}

ParameterList FeedForward::parameters() {
  ParameterList list = linear1.parameters();
  for (Parameter* parameter : linear2.parameters()) list.push_back(parameter);
  return list;
}

}  // namespace addnorm::nn
