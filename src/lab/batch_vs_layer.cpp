// Experiment 4: batch norm against layer norm on a table and on padded batches of sentences.
// Sentence 0 is followed through every batch; its output is compared with sentence 0 normalised
// on its own.
#include "addnorm/lab/batch_vs_layer.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "addnorm/numpy_random.hpp"
#include "addnorm/ops.hpp"
#include "lab/checks.hpp"
#include "lab/csv.hpp"
#include "lab/experiment_fields.hpp"
#include "lab/float_math.hpp"
#include "lab/json_params.hpp"

namespace addnorm::lab {
namespace {

// Token vectors of one sentence, [length, width] in C order.
struct Sentence {
  int length = 0;
  std::vector<float> tokens;
};

class SentenceBatcher {
 public:
  SentenceBatcher(int width, float eps) : width_(width), eps_(eps) {}

  // Sentence `watched` (the first of `batch`) as batch norm outputs it when the padded batch,
  // laid out (N, C, T) as BatchNorm1d expects, is normalised with padding counted.
  std::vector<float> batch_norm_padded(const std::vector<const Sentence*>& batch,
                                       std::vector<double>* means = nullptr,
                                       std::vector<double>* stds = nullptr) const {
    const int padded = padded_length(batch);
    const auto n = static_cast<int64_t>(batch.size());
    Tensor x(Shape{n, width_, padded}), y(Shape{n, width_, padded});
    for (int64_t b = 0; b < n; ++b) {
      for (int t = 0; t < batch[b]->length; ++t) {
        for (int c = 0; c < width_; ++c) {
          x[(b * width_ + c) * padded + t] = batch[b]->tokens[t * width_ + c];
        }
      }
    }
    Tensor mean({width_}), rstd({width_});
    batch_norm(x.view(), y.view(), training_options(), std::nullopt,
               NormStats{mean.view(), rstd.view()});
    if (means != nullptr) *means = {mean.values().begin(), mean.values().end()};
    if (stds != nullptr) {
      stds->clear();
      for (float r : rstd.values()) {
        stds->push_back(std::sqrt(std::max(0.0, 1.0 / (double{r} * r) - eps_)));
      }
    }
    std::vector<float> watched(static_cast<size_t>(batch[0]->length * width_));
    for (int t = 0; t < batch[0]->length; ++t) {
      for (int c = 0; c < width_; ++c) watched[t * width_ + c] = y[c * padded + t];
    }
    return watched;
  }

  // The same with only the real tokens as the batch, (tokens, C): masked batch norm.
  std::vector<float> batch_norm_real(const std::vector<const Sentence*>& batch,
                                     std::vector<double>* means = nullptr,
                                     std::vector<double>* stds = nullptr,
                                     std::optional<RunningStats> running = std::nullopt,
                                     bool training = true) const {
    const Tensor x = real_tokens(batch);
    Tensor y(x.shape()), mean({width_}), rstd({width_});
    BatchNormOptions options = training_options();
    options.training = training;
    std::optional<NormStats> stats;
    if (training) stats = NormStats{mean.view(), rstd.view()};
    batch_norm(x.view(), y.view(), options, running, stats);
    if (means != nullptr) *means = {mean.values().begin(), mean.values().end()};
    if (stds != nullptr) {
      stds->clear();
      for (float r : rstd.values()) {
        stds->push_back(std::sqrt(std::max(0.0, 1.0 / (double{r} * r) - eps_)));
      }
    }
    return {y.values().begin(), y.values().begin() + batch[0]->length * width_};
  }

  // Layer norm of the padded batch, (N, T, C) over C; padding rows are zeros (output beta = 0).
  std::vector<float> layer_norm_padded(const std::vector<const Sentence*>& batch) const {
    const int padded = padded_length(batch);
    const auto n = static_cast<int64_t>(batch.size());
    Tensor x(Shape{n, padded, width_}), y(x.shape());
    for (int64_t b = 0; b < n; ++b) {
      std::copy(batch[b]->tokens.begin(), batch[b]->tokens.end(), x.data() + b * padded * width_);
    }
    NormOptions options;
    options.eps = eps_;
    layer_norm(x.view(), Shape{width_}, y.view(), options);
    return {y.values().begin(), y.values().begin() + batch[0]->length * width_};
  }

  static int padded_length(const std::vector<const Sentence*>& batch) {
    int longest = 0;
    for (const Sentence* s : batch) longest = std::max(longest, s->length);
    return longest;
  }

  Tensor real_tokens(const std::vector<const Sentence*>& batch) const {
    int64_t tokens = 0;
    for (const Sentence* s : batch) tokens += s->length;
    std::vector<float> values;
    for (const Sentence* s : batch) values.insert(values.end(), s->tokens.begin(), s->tokens.end());
    return Tensor(Shape{tokens, width_}, std::move(values));
  }

 private:
  BatchNormOptions training_options() const {
    BatchNormOptions options;
    options.training = true;
    options.eps = eps_;
    return options;
  }

  int width_;
  float eps_;
};

double max_abs_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double largest = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    largest = std::max(largest, std::fabs(double{a[i]} - double{b[i]}));
  }
  return largest;
}

std::vector<double> as_doubles(const Tensor& tensor) {
  return {tensor.values().begin(), tensor.values().end()};
}

TableNorms normalise_table(const BatchVsLayerParams& params) {
  TableNorms table;
  table.columns = params.table_columns;
  table.rows = static_cast<int>(params.table.size()) / params.table_columns;
  table.table = params.table;
  const Shape shape{table.rows, table.columns};
  const Tensor x = to_tensor(params.table, shape);
  Tensor bn(shape), ln(shape);
  BatchNormOptions batch_options;
  batch_options.eps = 0.0f;  // the page's (H - mean) / std
  batch_norm(x.view(), bn.view(), batch_options);
  NormOptions layer_options;
  layer_options.eps = 0.0f;
  layer_norm(x.view(), Shape{table.columns}, ln.view(), layer_options);
  table.batch_norm = as_doubles(bn);
  table.layer_norm = as_doubles(ln);
  for (int col = 0; col < table.columns; ++col) {
    std::vector<double> column;
    for (int row = 0; row < table.rows; ++row)
      column.push_back(table.batch_norm[row * table.columns + col]);
    const MeanStd stats = mean_std_of<double>(column);
    table.batch_norm_column_means.push_back(stats.mean);
    table.batch_norm_column_stds.push_back(stats.std);
  }
  for (int row = 0; row < table.rows; ++row) {
    const MeanStd stats = mean_std_of<double>(
        std::span<const double>(table.layer_norm).subspan(row * table.columns, table.columns));
    table.layer_norm_row_means.push_back(stats.mean);
    table.layer_norm_row_stds.push_back(stats.std);
  }
  // Row 0 alone, with the experiment's eps (with eps 0 batch norm would divide 0 by 0).
  const Shape row_shape{1, table.columns};
  const Tensor row0 =
      to_tensor(std::span<const double>(params.table).first(table.columns), row_shape);
  Tensor bn_alone(row_shape), ln_alone(row_shape);
  batch_options.eps = static_cast<float>(params.eps);
  try {
    batch_norm(row0.view(), bn_alone.view(), batch_options);
  } catch (const Error& refused) {
    table.batch_norm_row0_alone_error = refused.what();
  }
  layer_norm(row0.view(), Shape{table.columns}, ln_alone.view(), layer_options);
  table.layer_norm_row0_alone = as_doubles(ln_alone);
  return table;
}

}  // namespace

void validate(const BatchVsLayerParams& params) {
  check_fields(params, kBatchVsLayerFields);
  if (params.table.size() % static_cast<size_t>(params.table_columns) != 0) {
    throw Error("table has " + std::to_string(params.table.size()) +
                " values, expected a whole number of rows of table_columns = " +
                std::to_string(params.table_columns));
  }
  check_integer("table rows", static_cast<int64_t>(params.table.size()) / params.table_columns, 2,
                64);
  if (params.lengths[0] < 2) {
    throw Error(
        "lengths[0] is 1, expected at least 2: sentence 0 is normalised alone, and batch "
        "norm in training mode needs more than one value per feature");
  }
  const int64_t pool_values =
      std::accumulate(params.lengths.begin(), params.lengths.end(), int64_t{0}) * params.width;
  if (pool_values > kBatchVsLayerMaxPoolValues) {
    throw Error("sum(lengths) * width is " + std::to_string(pool_values) + ", expected at most " +
                std::to_string(kBatchVsLayerMaxPoolValues) +
                " (shorter sentences or a smaller width)");
  }
  check_each_integer<int>("batch_sizes", params.batch_sizes, 1,
                          static_cast<int64_t>(params.lengths.size()));
  if (params.running_batches * pool_values > kBatchVsLayerMaxRunningValues) {
    throw Error("running_batches * sum(lengths) * width is " +
                std::to_string(params.running_batches * pool_values) + ", expected at most " +
                std::to_string(kBatchVsLayerMaxRunningValues) + " (fewer running_batches)");
  }
}

BatchVsLayerResult run_batch_vs_layer(const BatchVsLayerParams& params) {
  validate(params);
  BatchVsLayerResult result;
  result.params = params;
  result.table = normalise_table(params);

  // Token features with their own centres and scales, as hidden units have: feature c of every
  // token is mean_c + scale_c * N(0, 1), mean_c ~ N(0, 2), scale_c = exp(N(0, 0.5)).
  numpy_random::Generator rng(params.seed);
  const int width = params.width;
  const std::vector<double> feature_mean = rng.normal(0.0, 2.0, width);
  std::vector<double> feature_scale = rng.normal(0.0, 0.5, width);
  for (double& s : feature_scale) s = std::exp(s);
  const auto draw_sentence = [&](int length) {
    Sentence sentence{length, {}};
    const std::vector<double> z = rng.normal(0.0, 1.0, int64_t{length} * width);
    for (int t = 0; t < length; ++t) {
      for (int c = 0; c < width; ++c) {
        sentence.tokens.push_back(
            static_cast<float>(feature_mean[c] + feature_scale[c] * z[t * width + c]));
      }
    }
    return sentence;
  };
  std::vector<Sentence> pool;
  for (int length : params.lengths) pool.push_back(draw_sentence(length));
  const auto first = [&](size_t count) {
    std::vector<const Sentence*> batch;
    for (size_t i = 0; i < count; ++i) batch.push_back(&pool[i]);
    return batch;
  };

  const auto eps = static_cast<float>(params.eps);
  const SentenceBatcher batcher(width, eps);
  const std::vector<const Sentence*> alone = first(1);
  const std::vector<float> bn_alone = batcher.batch_norm_real(alone);
  const std::vector<float> ln_alone = batcher.layer_norm_padded(alone);

  // Padding leak: the whole pool padded to its longest sentence.
  const std::vector<const Sentence*> all = first(pool.size());
  PaddingLeak& leak = result.padding;
  leak.sentences = static_cast<int>(pool.size());
  leak.padded_length = SentenceBatcher::padded_length(all);
  leak.real_tokens = std::accumulate(params.lengths.begin(), params.lengths.end(), 0);
  leak.padded_tokens = leak.sentences * leak.padded_length;
  const std::vector<float> padded_output =
      batcher.batch_norm_padded(all, &leak.mean_with_padding, &leak.std_with_padding);
  const std::vector<float> real_output =
      batcher.batch_norm_real(all, &leak.mean_real_only, &leak.std_real_only);
  leak.sentence0_output_shift = max_abs_difference(padded_output, real_output);

  const auto effect = [&](const std::vector<const Sentence*>& batch) {
    BatchEffect e;
    e.padded_length = SentenceBatcher::padded_length(batch);
    e.batch_norm_padded = max_abs_difference(batcher.batch_norm_padded(batch), bn_alone);
    e.batch_norm_real = max_abs_difference(batcher.batch_norm_real(batch), bn_alone);
    e.layer_norm = max_abs_difference(batcher.layer_norm_padded(batch), ln_alone);
    return e;
  };
  for (int size : params.batch_sizes) {
    BatchEffect e = effect(first(static_cast<size_t>(size)));
    e.batch_size = size;
    result.batch_sizes.push_back(e);
  }
  for (size_t mate = 1; mate < pool.size(); ++mate) {
    BatchEffect e = effect({&pool[0], &pool[mate]});
    e.batch_size = 2;
    e.mate = static_cast<int>(mate);
    e.mate_length = pool[mate].length;
    result.mates.push_back(e);
  }

  // Training vs inference: running statistics from fresh batches the size of the pool (real
  // tokens only, the best case for batch norm), then sentence 0 in inference mode.
  ModeGap& gap = result.modes;
  Tensor running_mean(Shape{width}), running_var(Shape{width});
  std::fill(running_var.values().begin(), running_var.values().end(), 1.0f);  // PyTorch's start
  const RunningStats running{running_mean.view(), running_var.view()};
  const auto momentum = static_cast<float>(params.momentum);
  for (int step = 0; step < params.running_batches; ++step) {
    std::vector<Sentence> training_batch;
    for (int length : params.lengths) training_batch.push_back(draw_sentence(length));
    std::vector<const Sentence*> batch;
    for (const Sentence& s : training_batch) batch.push_back(&s);
    const Tensor x = batcher.real_tokens(batch);
    Tensor y(x.shape());
    BatchNormOptions options;
    options.eps = eps;
    options.momentum = momentum;
    batch_norm(x.view(), y.view(), options, running);
  }
  gap.running_mean = as_doubles(running_mean);
  gap.running_var = as_doubles(running_var);
  const std::vector<float> inference =
      batcher.batch_norm_real(alone, nullptr, nullptr, running, /*training=*/false);
  gap.batch_norm_in_batch = max_abs_difference(real_output, inference);
  gap.batch_norm_alone = max_abs_difference(bn_alone, inference);
  // Layer norm at "inference" is the same call on sentence 0 alone; in training it saw the pool.
  gap.layer_norm = max_abs_difference(batcher.layer_norm_padded(all), ln_alone);
  return result;
}

nlohmann::json to_json(const BatchVsLayerParams& params) {
  return fields_to_json(params, kBatchVsLayerFields);
}

namespace {

nlohmann::json effect_json(const BatchEffect& e) {
  nlohmann::json out = {{"batch_size", e.batch_size},
                        {"padded_length", e.padded_length},
                        {"batch_norm_padded", e.batch_norm_padded},
                        {"batch_norm_real", e.batch_norm_real},
                        {"layer_norm", e.layer_norm}};
  if (e.mate >= 0) {
    out["mate"] = e.mate;
    out["mate_length"] = e.mate_length;
  }
  return out;
}

}  // namespace

nlohmann::json to_json(const BatchVsLayerResult& result) {
  const TableNorms& t = result.table;
  const PaddingLeak& p = result.padding;
  nlohmann::json sizes = nlohmann::json::array(), mates = nlohmann::json::array();
  for (const BatchEffect& e : result.batch_sizes) sizes.push_back(effect_json(e));
  for (const BatchEffect& e : result.mates) mates.push_back(effect_json(e));
  return {{"experiment", "batch-vs-layer"},
          {"params", to_json(result.params)},
          {"table",
           {{"rows", t.rows},
            {"columns", t.columns},
            {"table", t.table},
            {"batch_norm", t.batch_norm},
            {"layer_norm", t.layer_norm},
            {"batch_norm_column_means", t.batch_norm_column_means},
            {"batch_norm_column_stds", t.batch_norm_column_stds},
            {"layer_norm_row_means", t.layer_norm_row_means},
            {"layer_norm_row_stds", t.layer_norm_row_stds},
            {"batch_norm_row0_alone_error", t.batch_norm_row0_alone_error},
            {"layer_norm_row0_alone", t.layer_norm_row0_alone}}},
          {"padding",
           {{"sentences", p.sentences},
            {"padded_length", p.padded_length},
            {"real_tokens", p.real_tokens},
            {"padded_tokens", p.padded_tokens},
            {"mean_with_padding", p.mean_with_padding},
            {"mean_real_only", p.mean_real_only},
            {"std_with_padding", p.std_with_padding},
            {"std_real_only", p.std_real_only},
            {"sentence0_output_shift", p.sentence0_output_shift}}},
          {"batch_sizes", sizes},
          {"mates", mates},
          {"modes",
           {{"running_mean", result.modes.running_mean},
            {"running_var", result.modes.running_var},
            {"batch_norm_in_batch", result.modes.batch_norm_in_batch},
            {"batch_norm_alone", result.modes.batch_norm_alone},
            {"layer_norm", result.modes.layer_norm}}}};
}

std::string to_csv(const BatchVsLayerResult& result) {
  CsvWriter csv({"section", "case", "quantity", "value"});
  const auto row = [&](const std::string& section, const std::string& which,
                       const std::string& quantity, double value) {
    csv.cell(section).cell(which).cell(quantity).cell(value).end_row();
  };
  const PaddingLeak& p = result.padding;
  for (size_t c = 0; c < p.mean_with_padding.size(); ++c) {
    const std::string feature = "feature " + std::to_string(c);
    row("padding", feature, "mean_with_padding", p.mean_with_padding[c]);
    row("padding", feature, "mean_real_only", p.mean_real_only[c]);
    row("padding", feature, "std_with_padding", p.std_with_padding[c]);
    row("padding", feature, "std_real_only", p.std_real_only[c]);
  }
  row("padding", "sentence 0", "output_shift", p.sentence0_output_shift);
  const auto effect_rows = [&](const std::string& section, const BatchEffect& e,
                               const std::string& which) {
    row(section, which, "batch_norm_padded", e.batch_norm_padded);
    row(section, which, "batch_norm_real", e.batch_norm_real);
    row(section, which, "layer_norm", e.layer_norm);
  };
  for (const BatchEffect& e : result.batch_sizes) {
    effect_rows("batch_size", e, "size " + std::to_string(e.batch_size));
  }
  for (const BatchEffect& e : result.mates) {
    effect_rows("mate", e, "sentence " + std::to_string(e.mate));
  }
  row("modes", "in batch", "batch_norm_gap", result.modes.batch_norm_in_batch);
  row("modes", "alone", "batch_norm_gap", result.modes.batch_norm_alone);
  row("modes", "any", "layer_norm_gap", result.modes.layer_norm);
  return csv.text();
}

BatchVsLayerParams batch_vs_layer_params_from_json(const nlohmann::json& object) {
  return read_params<BatchVsLayerParams>(object, "batch-vs-layer", kBatchVsLayerFields);
}

}  // namespace addnorm::lab
