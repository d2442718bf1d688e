// Embedding lookup plus sinusoidal positions; the backward scatters dy into the table rows.
#include "addnorm/nn/embedding.hpp"

#include <cmath>
#include <string>

#include "addnorm/error.hpp"
#include "addnorm/nn/linear.hpp"

namespace addnorm::nn {

Tensor sinusoidal_positional_encoding(int64_t seq, int64_t d_model) {
  if (seq < 0 || d_model < 1) {
    throw Error("positional encoding: seq must be >= 0 and d_model >= 1, got " +
                std::to_string(seq) + " and " + std::to_string(d_model));
  }
  Tensor encoding(Shape{seq, d_model});
  for (int64_t pos = 0; pos < seq; ++pos) {
    for (int64_t i = 0; i < d_model; ++i) {
      // Pairs (2k, 2k+1) share the frequency 1 / 10000^(2k / d).
      const double exponent = static_cast<double>(i - i % 2) / static_cast<double>(d_model);
      const double angle = static_cast<double>(pos) / std::pow(10000.0, exponent);
      encoding[pos * d_model + i] =
          static_cast<float>(i % 2 == 0 ? std::sin(angle) : std::cos(angle));
    }
  }
  return encoding;
}

Embedding::Embedding(const std::string& name, int64_t vocab_size, int64_t d_model, bool scale)
    : weight(name + ".weight", Shape{vocab_size, d_model}),
      vocab_size_(vocab_size),
      d_model_(d_model),
      scale_(scale) {
  if (vocab_size < 1 || d_model < 1) {
    throw Error(name + ": vocab_size and d_model must be >= 1, got " + std::to_string(vocab_size) +
                " and " + std::to_string(d_model));
  }
}

void Embedding::forward(std::span<const int32_t> tokens, int64_t batch, int64_t seq, Tensor& y) {
  if (batch < 1 || seq < 1 || static_cast<int64_t>(tokens.size()) != batch * seq) {
    throw Error("tokens has " + std::to_string(tokens.size()) +
                " entries, expected batch * seq = " + std::to_string(batch) + " * " +
                std::to_string(seq) + " (both >= 1)");
  }
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= vocab_size_) {
      throw Error("tokens[" + std::to_string(i) + "] is " + std::to_string(tokens[i]) +
                  ", expected a value in [0, " + std::to_string(vocab_size_) + ")");
    }
  }
  tokens_.assign(tokens.begin(), tokens.end());
  if (positional_.shape().rank() != 2 || positional_.shape()[0] < seq) {
    positional_ = sinusoidal_positional_encoding(seq, d_model_);
  }
  ensure_shape(y, Shape{batch, seq, d_model_});
  const float scale = scale_ ? static_cast<float>(std::sqrt(static_cast<double>(d_model_))) : 1.0f;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t t = 0; t < seq; ++t) {
      const float* row = weight.value.data() + tokens_[static_cast<size_t>(b * seq + t)] * d_model_;
      const float* pe = positional_.data() + t * d_model_;
      float* out = y.data() + (b * seq + t) * d_model_;
      for (int64_t i = 0; i < d_model_; ++i) out[i] = scale * row[i] + pe[i];
    }
  }
}

void Embedding::backward(const Tensor& dy) {
  if (dy.numel() != static_cast<int64_t>(tokens_.size()) * d_model_) {
    throw Error(weight.name + ": dy has shape " + dy.shape().to_string() +
                ", expected the last forward's output shape");
  }
  const float scale = scale_ ? static_cast<float>(std::sqrt(static_cast<double>(d_model_))) : 1.0f;
  // In token order, so repeated tokens add up in a fixed order.
  for (size_t position = 0; position < tokens_.size(); ++position) {
    float* grad = weight.grad.data() + tokens_[position] * d_model_;
    const float* in = dy.data() + static_cast<int64_t>(position) * d_model_;
    for (int64_t i = 0; i < d_model_; ++i) grad[i] += scale * in[i];
  }
}

ParameterList Embedding::parameters() {
  return {&weight};
}

}  // namespace addnorm::nn
