// Experiment 8, rank-collapse: Dong, Cordonnier and Loukas 2021 ("Attention is not all you need:
// pure attention loses rank doubly exponentially with depth") showed that a stack of
// self-attention layers without skip connections drives every token of a sequence to the same
// vector, and that skip connections prevent it while layer norm does not. This experiment builds
// attention-only stacks with addnorm::nn (no FFN; Xavier init; no dropout), feeds them random
// tokens X ~ N(0, 1) [batch, tokens, d_model], and records after every block:
//   - the relative residual ||X - 1 x^T||_F / ||X||_F of each sequence, x the mean token (the x
//     that makes the Frobenius norm of the residual smallest; Dong et al. use a composite l1/linf
//     norm), averaged over the batch: 0 when the sequence has collapsed to one token;
//   - the mean cosine similarity between its tokens (stream_probe.hpp): 1 when collapsed.
// Each placement of the Add & Norm box is one variant: bare (neither skip nor norm: Dong et al.'s
// pure self-attention), no_residual (norm, no skip), no_norm (skip, no norm), post_norm and
// pre_norm (skip and norm). Per block, the median and interquartile range over seeds.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "addnorm/lab/progress.hpp"
#include "addnorm/lab/seed_spread.hpp"
#include "addnorm/lab/sequence_task.hpp"
#include "addnorm/nn/block.hpp"
#include "addnorm/tensor.hpp"

namespace addnorm::lab {

struct RankCollapseParams {
  std::vector<nn::Placement> placements{nn::Placement::bare, nn::Placement::no_residual,
                                        nn::Placement::no_norm, nn::Placement::post_norm,
                                        nn::Placement::pre_norm};  // 1 to 8, distinct
  int depth = 24;                                                  // blocks, [1, 96]
  ModelShape shape{64, 4, 64, Sublayers::attn};  // d_ff unused unless sublayers has the FFN
  int tokens = 16;                               // per sequence, [2, 64]
  int batch = 4;                                 // sequences, [1, 64]
  int seeds = 16;                                // models (and inputs) per placement, [1, 64]
  uint64_t seed = 0;  // model seed s + i and input generator seed s + i for the i-th model
};
// The work cap: placements * seeds * depth * batch * tokens * d_model * (4 d_model + 2 tokens
// + 2 d_ff) multiply-adds.
inline constexpr double kRankCollapseMaxWork = 2e10;
// The parameters of --quick: depth 12, four seeds.
RankCollapseParams rank_collapse_quick();

struct RankCollapseCurve {
  nn::Placement placement = nn::Placement::bare;
  // Index 0: the input; index l + 1: after block l. Median [IQR] over seeds.
  std::vector<Spread> residual;
  std::vector<Spread> cosine;
  // The first block whose median relative residual is below 1e-3 (1-based; 0: never).
  int collapsed_at = 0;
};

struct RankCollapseResult {
  RankCollapseParams params;
  std::vector<RankCollapseCurve> curves;  // in the order of params.placements
};

// x [batch, seq, d]: the mean over sequences of ||X - 1 mean(X)^T||_F / ||X||_F (float64; a zero
// sequence counts as 0; NaN when a value is not finite, so an overflow never reads as collapse).
double relative_residual(const Tensor& x);

void validate(const RankCollapseParams& params);
RankCollapseResult run_rank_collapse(const RankCollapseParams& params,
                                     const Progress& progress = {});

nlohmann::json to_json(const RankCollapseParams& params);
nlohmann::json to_json(const RankCollapseResult& result);
// placement,block,residual_median,residual_q25,residual_q75,cosine_median,cosine_q25,cosine_q75
std::string to_csv(const RankCollapseResult& result);
RankCollapseParams rank_collapse_params_from_json(const nlohmann::json& object);

}  // namespace addnorm::lab
