// A pre-norm and a post-norm block side by side on the same three tokens. The sub-layer is a
// fixed 4 x 4 linear map, a stand-in for attention or the feed-forward network, so every number
// is deterministic and can be checked by hand.
#include "tour/residual_blocks.hpp"

#include "addnorm/ops.hpp"
#include "tour/float_arrays.hpp"
#include "tour/numpy_format.hpp"

namespace addnorm::tour {
namespace {

std::vector<double> row_stds(const std::vector<double>& matrix) {
  std::vector<double> stds;
  for (int row = 0; row < ResidualBlocks::kTokens; ++row) {
    stds.push_back(std_of(row_of(matrix, ResidualBlocks::kDim, row)));
  }
  return stds;
}

// A matrix rounded to 4 decimals as NumPy prints it, indented by two spaces.
std::string matrix(const std::vector<double>& values, int rows, int cols) {
  std::string text = "  ";
  for (char c : numpy_str(numpy_round(values, 4), rows, cols)) {
    text += c;
    if (c == '\n') text += "  ";
  }
  return text + "\n";
}

}  // namespace

ResidualBlocks residual_blocks() {
  constexpr int tokens = ResidualBlocks::kTokens, dim = ResidualBlocks::kDim;
  ResidualBlocks blocks;
  // "cat", page 001's token after layer 5, and a third small token.
  blocks.x = {2.0, 4.0, 6.0, 8.0, 2.0, -3.0, 1.0, 4.0, 0.5, -1.0, 1.5, 0.0};
  blocks.weight = {0.5,  -0.2, 0.1,  0.0,   //
                   0.1,  0.4,  -0.3, 0.2,   //
                   -0.2, 0.1,  0.3,  -0.1,  //
                   0.0,  0.2,  -0.1, 0.5};
  blocks.eps = 1e-5;
  blocks.dropout_p = 0.0;
  const Shape shape{tokens, dim};
  const Shape row_shape{dim};
  const Tensor x = to_tensor(blocks.x, shape);
  // One LayerNorm description for the plain norm and the fused ops.
  NormOptions norm;
  norm.eps = static_cast<float>(blocks.eps);

  // Pre-norm: the sub-layer reads LN(x); the skip path carries x itself.
  Tensor normed_input(shape);
  layer_norm(x.view(), row_shape, normed_input.view(), norm);
  const Tensor pre_sublayer = times_matrix(normed_input, blocks.weight, dim);
  Tensor pre_out(shape), pre_next(shape);
  add_norm_pre(x.view(), pre_sublayer.view(), row_shape, pre_out.view(), pre_next.view(), norm);
  blocks.pre_normed_input = to_doubles(normed_input);
  blocks.pre_sublayer = to_doubles(pre_sublayer);
  blocks.pre_out = to_doubles(pre_out);
  blocks.pre_next_input = to_doubles(pre_next);

  // Post-norm: the sub-layer reads x; the sum is normalised.
  const Tensor post_sublayer = times_matrix(x, blocks.weight, dim);
  Tensor post_out(shape);
  DropoutOptions dropout;
  dropout.p = static_cast<float>(blocks.dropout_p);
  add_norm_post(x.view(), post_sublayer.view(), row_shape, post_out.view(), norm, dropout);
  blocks.post_sublayer = to_doubles(post_sublayer);
  blocks.post_out = to_doubles(post_out);

  blocks.x_row_stds = row_stds(blocks.x);
  blocks.pre_out_row_stds = row_stds(blocks.pre_out);
  blocks.post_out_row_stds = row_stds(blocks.post_out);
  return blocks;
}

std::string blocks_text(const ResidualBlocks& blocks) {
  constexpr int tokens = ResidualBlocks::kTokens, dim = ResidualBlocks::kDim;
  std::string text;
  text += "x: 3 tokens (rows: \"cat\", page 001's token after layer 5, a third), d = 4\n" +
          matrix(blocks.x, tokens, dim);
  text += "sub-layer F(v) = v W, a fixed linear map standing in for attention or the FFN; W =\n" +
          matrix(blocks.weight, dim, dim);
  text += "LayerNorm: eps " + python_repr(blocks.eps) +
          ", no gamma/beta. Dropout p = " + python_repr(blocks.dropout_p) +
          ": this is inference, where dropout is the identity; in training the 2017 paper drops "
          "F's output with p = 0.1 (add_norm_post takes p and a seed)\n\n";
  text += "pre-norm (GPT-2, page 001's TransformerBlock): out = x + F(LN(x))\n";
  text += " LN(x) (addnorm::layer_norm):\n" + matrix(blocks.pre_normed_input, tokens, dim);
  text += " out = x + F(LN(x)) (addnorm::add_norm_pre):\n" + matrix(blocks.pre_out, tokens, dim);
  text += " LN(out), what the next sub-layer reads (the same call's second output):\n" +
          matrix(blocks.pre_next_input, tokens, dim);
  text += " row stds of out " + numpy_str(numpy_round(blocks.pre_out_row_stds, 4)) + " vs x " +
          numpy_str(numpy_round(blocks.x_row_stds, 4)) +
          ": the skip path carries x untouched, so out keeps x's scale\n\n";
  text += "post-norm (2017 paper): out = LN(x + Dropout(F(x)))\n";
  text += " out (addnorm::add_norm_post):\n" + matrix(blocks.post_out, tokens, dim);
  text += " row stds of out " + numpy_str(numpy_round(blocks.post_out_row_stds, 4)) +
          ": every block's output is renormalised, so the skip path passes through a norm\n";
  return text;
}

nlohmann::json blocks_json(const ResidualBlocks& blocks) {
  return {{"shape", {ResidualBlocks::kTokens, ResidualBlocks::kDim}},
          {"x", blocks.x},
          {"weight", blocks.weight},
          {"eps", blocks.eps},
          {"dropout_p", blocks.dropout_p},
          {"pre_normed_input", blocks.pre_normed_input},
          {"pre_sublayer", blocks.pre_sublayer},
          {"pre_out", blocks.pre_out},
          {"pre_next_input", blocks.pre_next_input},
          {"post_sublayer", blocks.post_sublayer},
          {"post_out", blocks.post_out},
          {"x_row_stds", blocks.x_row_stds},
          {"pre_out_row_stds", blocks.pre_out_row_stds},
          {"post_out_row_stds", blocks.post_out_row_stds}};
}

}  // namespace addnorm::tour
