// Initialisation shared by the encoder and decoder blocks.
#pragma once

#include "addnorm/nn/attention.hpp"
#include "addnorm/nn/block.hpp"
#include "addnorm/nn/feed_forward.hpp"
#include "addnorm/nn/init.hpp"

namespace addnorm::nn::detail {

// Draw the weights for `init.scheme` (biases stay 0): in_proj (Q, K, V) then out_proj, and
// linear1 then linear2. DeepNorm scales V, out_proj and both FFN layers by beta.
void init_attention(MultiHeadAttention& attention, const BlockConfig& config, const BlockInit& init,
                    Generator& generator);
void init_feed_forward(FeedForward& ffn, const BlockConfig& config, const BlockInit& init,
                       Generator& generator);

// Sets Parameter::layer of every parameter.
void tag_layer(const ParameterList& parameters, int layer);

}  // namespace addnorm::nn::detail
