// Token embedding plus the 2017 paper's sinusoidal positional encoding.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "addnorm/nn/parameter.hpp"
#include "addnorm/tensor.hpp"

namespace addnorm::nn {

// PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(pos / 10000^(2i/d)); [seq, d].
Tensor sinusoidal_positional_encoding(int64_t seq, int64_t d_model);

class Embedding {
 public:
  // scale: multiply the looked-up vectors by sqrt(d_model), as the 2017 paper does.
  Embedding(const std::string& name, int64_t vocab_size, int64_t d_model, bool scale);

  int64_t vocab_size() const { return vocab_size_; }
  int64_t d_model() const { return d_model_; }

  // tokens [batch * seq] (row-major) -> y [batch, seq, d] = scale * E[token] + PE[pos].
  // Throws Error for a token outside [0, vocab_size).
  void forward(std::span<const int32_t> tokens, int64_t batch, int64_t seq, Tensor& y);
  // Accumulates the embedding gradient from dy for the tokens of the last forward.
  void backward(const Tensor& dy);

  ParameterList parameters();

  Parameter weight;  // [vocab, d]

 private:
  int64_t vocab_size_;
  int64_t d_model_;
  bool scale_;
  std::vector<int32_t> tokens_;
  Tensor positional_;  // cached [seq, d]
};

}  // namespace addnorm::nn
