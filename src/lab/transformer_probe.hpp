// What the transformer experiments share: building a sequence model for a placement and depth,
// and summing its parameters' gradient norms per block and kind (attention, FFN, the rest).
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "addnorm/lab/sequence_task.hpp"
#include "addnorm/nn/parameter.hpp"
#include "addnorm/nn/sequence_model.hpp"

namespace addnorm::lab {

inline nn::SequenceModelConfig model_config(const ModelShape& shape, nn::Placement placement,
                                            int depth, int vocab, uint64_t seed) {
  nn::SequenceModelConfig config;
  config.stack.block.d_model = shape.d_model;
  config.stack.block.n_heads = shape.n_heads;
  config.stack.block.d_ff = shape.d_ff;
  config.stack.block.placement = placement;
  config.stack.block.attention = shape.sublayers != Sublayers::ffn;
  config.stack.block.ffn = shape.sublayers != Sublayers::attn;
  config.stack.block.dropout = 0.0f;  // measurements, not regularisation
  config.stack.depth = depth;
  config.stack.seed = seed;
  config.vocab_size = vocab;
  return config;
}

// Per block: the L2 norm of all attention weights' gradients, of all FFN weights' gradients,
// and of every other parameter of the block (norms, ReZero's alpha), each over the block's
// parameters of that kind. Parameters outside the blocks (embedding, head, final norm) are left
// out: the experiments are about the stack.
struct LayerGradNorms {
  std::vector<double> attention, ffn, other;
};

inline LayerGradNorms layer_grad_norms(const nn::ParameterList& parameters, int depth) {
  std::vector<double> attention(static_cast<size_t>(depth)), ffn(attention), other(attention);
  for (const nn::ParameterNorm& p : nn::parameter_norms(parameters)) {
    if (p.layer < 0 || p.layer >= depth) continue;
    const std::string prefix = "blocks." + std::to_string(p.layer) + ".";
    const std::string rest = p.name.rfind(prefix, 0) == 0 ? p.name.substr(prefix.size()) : p.name;
    const double square = p.grad_norm * p.grad_norm;
    if (rest.rfind("attn.", 0) == 0) {
      attention[static_cast<size_t>(p.layer)] += square;
    } else if (rest.rfind("ffn.", 0) == 0) {
      ffn[static_cast<size_t>(p.layer)] += square;
    } else {
      other[static_cast<size_t>(p.layer)] += square;
    }
  }
  for (auto* list : {&attention, &ffn, &other}) {
    for (double& v : *list) v = std::sqrt(v);
  }
  return {attention, ffn, other};
}

}  // namespace addnorm::lab
