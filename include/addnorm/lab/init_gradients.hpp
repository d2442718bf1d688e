// Experiment 5, init-gradients: Xiong et al. 2020 ("On Layer Normalization in the Transformer
// Architecture") measured the gradient of every layer's weights at initialisation: in a post-norm
// stack it grows towards the top (the last layers get the largest gradients, which is why
// post-norm needs a learning-rate warmup), in a pre-norm stack it is about the same in every
// layer and shrinks like 1 / sqrt(L) with depth L. This experiment builds the stacks with
// addnorm::nn (embedding, N blocks, head, cross-entropy on the copy task), runs one forward and
// backward at initialisation and records, per block:
//   - the gradient norm of its attention weights and of its FFN weights;
//   - the residual stream's mean token norm after the block, and the gradient norm reaching it;
//   - the mean token norm of the input and the output of each of its norms (the input of a
//     post-norm block's norm is x + F(x), which the stream never shows);
//   - the mean cosine similarity between the tokens of a sequence after it (rank collapse).
// Per-block curves are means over `seeds` models (each seed: its own weights and batch); the
// headline numbers (the top block's FFN gradient, the top/bottom ratio, the post/pre ratio per
// depth) are medians over seeds with their interquartile range.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "addnorm/lab/progress.hpp"
#include "addnorm/lab/seed_spread.hpp"
#include "addnorm/lab/sequence_task.hpp"
#include "addnorm/nn/block.hpp"

namespace addnorm::lab {

struct InitGradientsParams {
  std::vector<nn::Placement> placements{nn::Placement::post_norm, nn::Placement::pre_norm};
  std::vector<int> depths{6, 12, 24, 48};  // 1 to 8 depths, each in [1, 96]
  ModelShape shape{32, 4, 128};
  SequenceTask task = SequenceTask::copy;
  int length = 8;     // symbols per sequence, [1, 64]; the sequence is 2 length + 1 tokens
  int symbols = 10;   // [2, 100]
  int batch = 8;      // [1, 256]
  int seeds = 64;     // models per stack, [1, 64]
  uint64_t seed = 0;  // model seed s + i and batch generator seed s + i for the i-th model
};
// The work cap: sum(depths) * placements * seeds * batch * seq * d_model * (4 d_model + 2 d_ff)
// multiply-adds (a forward; the backward is about twice that) must stay under this.
inline constexpr double kInitGradientsMaxWork = 5e10;
// The parameters of --quick: depths 6 and 12, d_model 32, four seeds.
InitGradientsParams init_gradients_quick();

struct InitGradientsStack {
  nn::Placement placement = nn::Placement::post_norm;
  int depth = 0;
  double loss = 0.0;  // at initialisation (ln(symbols) is chance)
  // One value per block, bottom (block 0) to top.
  std::vector<double> attention_grad_norm;
  std::vector<double> ffn_grad_norm;
  // Index 0: the embedded input; index l + 1: after block l.
  std::vector<double> stream_norm;
  // Index l: the gradient entering block l from above (its output's gradient is index l + 1);
  // index depth: at the stack's output.
  std::vector<double> stream_grad_norm;
  // Index 0: the embedded input; index l + 1: after block l. Mean over ordered token pairs of a
  // sequence of their cosine similarity (stream_probe.hpp).
  std::vector<double> token_cosine;
  // Per block, the mean token norm of what each norm read and wrote (empty for placements
  // without norms; the attention ones are empty for FFN-only blocks).
  std::vector<double> attention_norm_input, attention_norm_output;
  std::vector<double> ffn_norm_input, ffn_norm_output;
  // Summaries: the top block's FFN gradient / the bottom block's, and the mean over blocks of
  // sqrt(attention^2 + ffn^2): medians over seeds (the per-seed values' spread below).
  double top_to_bottom_ratio = 0.0;
  double mean_layer_grad_norm = 0.0;
  Spread top_ffn_grad;     // the top block's FFN gradient norm
  Spread top_to_bottom;    // per seed: top block's FFN gradient / bottom block's
  Spread mean_layer_grad;  // per seed: mean over blocks of the block's gradient norm
  std::vector<double> top_ffn_grad_per_seed;  // in seed order (seed, seed + 1, ...)
};

// For each depth run with both post_norm and pre_norm: the top block's FFN gradient of the
// post-norm stack over the pre-norm one's, per seed (the two share the seed's batch).
struct PlacementRatio {
  int depth = 0;
  Spread post_over_pre;
};

struct InitGradientsResult {
  InitGradientsParams params;
  std::vector<InitGradientsStack> stacks;     // placements outer, depths inner
  std::vector<PlacementRatio> post_over_pre;  // one per depth when both placements ran
};

void validate(const InitGradientsParams& params);
InitGradientsResult run_init_gradients(const InitGradientsParams& params,
                                       const Progress& progress = {});

nlohmann::json to_json(const InitGradientsParams& params);
nlohmann::json to_json(const InitGradientsResult& result);
// placement,depth,layer,attention_grad_norm,ffn_grad_norm,stream_norm,stream_grad_norm
std::string to_csv(const InitGradientsResult& result);
InitGradientsParams init_gradients_params_from_json(const nlohmann::json& object);

}  // namespace addnorm::lab
