// Section "block": one pre-norm and one post-norm residual block on a short sequence, with the
// fused addnorm::add_norm_pre and addnorm::add_norm_post and a fixed linear sub-layer F.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace addnorm::tour {

struct ResidualBlocks {
  static constexpr int kTokens = 3;
  static constexpr int kDim = 4;
  std::vector<double> x;       // kTokens x kDim, one token per row
  std::vector<double> weight;  // kDim x kDim: the sub-layer F(v) = v W
  double eps = 0.0;            // LayerNorm's, no gamma or beta
  double dropout_p = 0.0;      // 0: inference, where dropout is the identity
  // Pre-norm (GPT-2): out = x + F(LN(x)); the fused op also gives LN(out) for the next layer.
  std::vector<double> pre_normed_input;  // LN(x), addnorm::layer_norm
  std::vector<double> pre_sublayer;      // F(LN(x))
  std::vector<double> pre_out;           // add_norm_pre's h
  std::vector<double> pre_next_input;    // add_norm_pre's y = LN(out)
  // Post-norm (2017 paper): out = LN(x + Dropout(F(x))).
  std::vector<double> post_sublayer;  // F(x)
  std::vector<double> post_out;       // add_norm_post's y
  // np.std(axis=1) of x and of each block's output.
  std::vector<double> x_row_stds;
  std::vector<double> pre_out_row_stds;
  std::vector<double> post_out_row_stds;
};

ResidualBlocks residual_blocks();
std::string blocks_text(const ResidualBlocks& blocks);
nlohmann::json blocks_json(const ResidualBlocks& blocks);

}  // namespace addnorm::tour
