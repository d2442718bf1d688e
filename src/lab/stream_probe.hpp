// Measurements of a transformer's residual stream that the experiments share: how similar the
// tokens of a sequence are (rank collapse), and what a norm saw and produced.
#pragma once

#include <cstdint>

#include "addnorm/nn/norm.hpp"
#include "addnorm/tensor.hpp"

namespace addnorm::lab {

// x [batch, seq, d]: the mean over sequences and over ordered pairs of distinct positions
// (i != j) of cos(x_i, x_j). 1 when every token of a sequence points the same way (the stream
// has collapsed to one direction per sequence); about 0 for independent random tokens. A zero
// token counts as cosine 0 with every other. With seq = 1 there is no pair: NaN.
double mean_token_cosine(const Tensor& x);

// Mean over tokens (rows of the last axis) of the L2 norm.
double mean_token_norm(const Tensor& x);

// The mean token norm of the input of a LayerNorm or RMSNorm's last forward, from the row
// statistics it saved, so that no placement has to keep its pre-norm sum: per row
// |x|^2 = D (var + mean^2) with var = 1 / rstd^2 - eps (LayerNorm), and D (1 / rstd^2 - eps)
// for RMSNorm, whose rstd is 1 / sqrt(mean(x^2) + eps). Accurate while the row's variance is
// well above eps. NaN for BatchNorm (its statistics are per feature, not per token).
double norm_input_token_norm(const nn::Norm& norm);

}  // namespace addnorm::lab
