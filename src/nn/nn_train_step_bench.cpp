// Times one training step (zero_grad, forward, cross-entropy, backward, Adam) of a SequenceModel:
// by default 6 blocks, d_model 256, 8 heads, d_ff 1024, batch 16 x 64 tokens. Prints one JSON
// line with the median step time. nn_train_step_bench.py runs it beside the same model in
// PyTorch and reports the ratio; timings belong in benchmarks, never in tests.
//
// usage: nn_train_step_bench [key=value ...]  keys: depth d_model n_heads d_ff batch seq vocab
//        steps warmup placement norm
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include "addnorm/error.hpp"
#include "addnorm/nn/nn.hpp"
#include "tool_args.hpp"

namespace {

using namespace addnorm::nn;

int run(int argc, char** argv) {
  const ToolArgs args(argc, argv, 1,
                      {"depth", "d_model", "n_heads", "d_ff", "batch", "seq", "vocab", "steps",
                       "warmup", "placement", "norm"});
  SequenceModelConfig config;
  config.stack.depth = args.integer("depth", 6);
  config.stack.block.d_model = args.integer("d_model", 256);
  config.stack.block.n_heads = args.integer("n_heads", 8);
  config.stack.block.d_ff = args.integer("d_ff", 1024);
  config.stack.block.placement = parse_placement(args.text("placement", "pre_norm"));
  config.stack.block.norm = parse_norm_type(args.text("norm", "layer_norm"));
  config.stack.record_stats = false;
  config.vocab_size = args.integer("vocab", 64);
  const int64_t batch = args.integer("batch", 16), seq = args.integer("seq", 64);
  // At least one timed step: the median of none would read past an empty list.
  const int64_t steps = args.integer("steps", 20, 1), warmup = args.integer("warmup", 3, 0);

  SequenceModel model(config);
  AdamOptions adam_options;
  adam_options.schedule.lr = 1e-4;
  Adam adam(model.parameters(), adam_options);
  std::vector<int32_t> tokens(static_cast<size_t>(batch * seq)), targets(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = static_cast<int32_t>((i * 7) % static_cast<size_t>(config.vocab_size));
    targets[i] = static_cast<int32_t>((i * 3 + 1) % static_cast<size_t>(config.vocab_size));
  }
  std::vector<double> times;
  double loss = 0;
  for (int64_t step = 0; step < warmup + steps; ++step) {
    const auto start = std::chrono::steady_clock::now();
    zero_grad(adam.parameters());
    loss = model.forward_backward(tokens, targets, batch, seq);
    adam.step();
    const std::chrono::duration<double, std::milli> elapsed =
        std::chrono::steady_clock::now() - start;
    if (step >= warmup) times.push_back(elapsed.count());
  }
  std::sort(times.begin(), times.end());
  std::cout << "{\"impl\": \"addnorm\", \"median_ms\": " << times[times.size() / 2]
            << ", \"min_ms\": " << times.front() << ", \"loss\": " << loss << "}\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& error) {
    std::cerr << "error: " << error.what() << "\n";
    return 2;
  }
}
