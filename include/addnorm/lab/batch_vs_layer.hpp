// Experiment 4, batch-vs-layer: why transformers use layer norm. Batch norm (statistics per
// feature over the batch) and layer norm (statistics per token over its features), both the
// library's ops, applied to
//   - a table (seed page 000's houses by default): batch norm per column, layer norm per row;
//   - a padded batch of sentences of different lengths (random token vectors whose features have
//     their own means and scales, padding = zeros):
//       * padding leaking into batch statistics (batch norm over the padded batch vs over the real
//         tokens only);
//       * one sentence's output (sentence 0) changing with its batch-mates and the batch size;
//       * the gap between training-mode and inference-mode (running statistics) batch norm.
//     Layer norm is computed on the same inputs in every case; its differences are measured, not
//     assumed (they are exactly 0).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace addnorm::lab {

struct BatchVsLayerParams {
  // The table, C order, table_columns values per row: 2 to 64 rows, 2 to 64 columns.
  std::vector<double> table{1200, 2.0, 45, 1500, 3.0, 70, 2000, 3.5, 80};
  int table_columns = 3;
  // Sentence lengths of the pool (2 to 32 sentences, each 1 to 64 tokens); sentence 0 is watched
  // and needs at least 2 tokens (batch norm of it alone needs more than one value per feature).
  std::vector<int> lengths{5, 3, 8, 2, 6, 4, 7, 1};
  int width = 8;                             // features per token, in [2, 32]
  std::vector<int> batch_sizes{1, 2, 4, 8};  // each in [1, lengths.size()]: sentences 0..k-1
  int running_batches = 200;  // training batches that set the running statistics, [1, 2000]
  double momentum = 0.1;      // PyTorch's convention, in [0, 1]
  double eps = 1e-5;          // in [0, 1]
  uint64_t seed = 42;         // numpy_random::Generator: feature means and scales, the pool,
                              // then the training batches
};

// Caps that keep a run in tens of milliseconds: the pool's values, sum(lengths) * width, and
// the values the running statistics see, running_batches * sum(lengths) * width.
inline constexpr int64_t kBatchVsLayerMaxPoolValues = 4096;
inline constexpr int64_t kBatchVsLayerMaxRunningValues = int64_t{1} << 19;

struct TableNorms {
  int rows = 0, columns = 0;
  std::vector<double> table;
  std::vector<double> batch_norm;  // per column over the rows (eps 0, as the page)
  std::vector<double> layer_norm;  // per row over the columns (eps 0)
  std::vector<double> batch_norm_column_means, batch_norm_column_stds;
  std::vector<double> layer_norm_row_means, layer_norm_row_stds;
  // Row 0 normalised on its own (a batch of one, eps as params): batch norm in training mode
  // refuses it (one value per feature, as PyTorch refuses it); the op's message is kept here.
  // Layer norm returns row 0 of layer_norm.
  std::string batch_norm_row0_alone_error;
  std::vector<double> layer_norm_row0_alone;
};

// The whole pool in one batch, padded to its longest sentence.
struct PaddingLeak {
  int sentences = 0;
  int padded_length = 0;
  int real_tokens = 0;
  int padded_tokens = 0;  // positions, real and padding
  // Per feature: the statistics batch norm uses with the padding and over real tokens only.
  std::vector<double> mean_with_padding, mean_real_only;
  std::vector<double> std_with_padding, std_real_only;
  // Max |difference| in sentence 0's batch-norm output, padded batch vs real tokens only.
  double sentence0_output_shift = 0.0;
};

// Sentence 0's output in a batch, against sentence 0 normalised alone (max |difference|).
struct BatchEffect {
  int batch_size = 0;  // for the batch-size sweep
  int mate = -1;       // for the batch-mates sweep: the other sentence in a batch of two
  int mate_length = 0;
  int padded_length = 0;
  double batch_norm_padded = 0.0;  // padding counted in the statistics
  double batch_norm_real = 0.0;    // real tokens only (masked batch norm)
  double layer_norm = 0.0;         // expected exactly 0
};

struct ModeGap {
  std::vector<double> running_mean, running_var;  // after running_batches training batches
  // Max |training-mode output - inference-mode output| for sentence 0.
  double batch_norm_in_batch = 0.0;  // training mode in the full pool (real tokens only)
  double batch_norm_alone = 0.0;     // training mode with sentence 0 alone
  double layer_norm = 0.0;           // layer norm has no modes: expected exactly 0
};

struct BatchVsLayerResult {
  BatchVsLayerParams params;
  TableNorms table;
  PaddingLeak padding;
  std::vector<BatchEffect> batch_sizes;  // one per params.batch_sizes
  std::vector<BatchEffect> mates;        // one per other sentence of the pool
  ModeGap modes;
};

void validate(const BatchVsLayerParams& params);
BatchVsLayerResult run_batch_vs_layer(const BatchVsLayerParams& params);

nlohmann::json to_json(const BatchVsLayerParams& params);
nlohmann::json to_json(const BatchVsLayerResult& result);
// One row per measured quantity: section,case,quantity,value.
std::string to_csv(const BatchVsLayerResult& result);
BatchVsLayerParams batch_vs_layer_params_from_json(const nlohmann::json& object);

}  // namespace addnorm::lab
