// Builds a SequenceModel from command-line options, runs one forward and backward on seeded
// tokens, and writes everything PyTorch needs to rebuild the same model and check it to a folder
// of .npy files: tokens, targets, every parameter (param.<name>.npy), the loss, the logits and
// every gradient (grad.<name>.npy). tests/python/test_nn_vs_torch.py drives it.
//
// usage: nn_torch_compare_tool OUT_DIR [key=value ...]   keys: placement norm depth d_model
//        n_heads d_ff activation vocab batch seq causal lengths(comma list) seed init
//        sublayers (attn_ffn, attn or ffn)
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "addnorm/error.hpp"
#include "addnorm/nn/nn.hpp"
#include "addnorm/npy.hpp"
#include "tool_args.hpp"

namespace {

using namespace addnorm;
using namespace addnorm::nn;

void save(const std::filesystem::path& path, const Tensor& tensor) {
  write_npy(path, NpyArray(tensor, NpyDtype::float32));
}

int run(int argc, char** argv) {
  if (argc < 2) throw Error("usage: nn_torch_compare_tool OUT_DIR [key=value ...]");
  const std::filesystem::path out = argv[1];
  const ToolArgs args(argc, argv, 2,
                      {"placement", "norm", "depth", "d_model", "n_heads", "d_ff", "activation",
                       "vocab", "batch", "seq", "causal", "lengths", "seed", "init", "sublayers"});

  SequenceModelConfig config;
  config.stack.block.placement = parse_placement(args.text("placement", "pre_norm"));
  config.stack.block.norm = parse_norm_type(args.text("norm", "layer_norm"));
  config.stack.block.d_model = args.integer("d_model", 16);
  config.stack.block.n_heads = args.integer("n_heads", 2);
  config.stack.block.d_ff = args.integer("d_ff", 32);
  config.stack.block.activation = parse_activation(args.text("activation", "relu"));
  const std::string sublayers = args.choice("sublayers", "attn_ffn", {"attn_ffn", "attn", "ffn"});
  config.stack.block.attention = sublayers != "ffn";
  config.stack.block.ffn = sublayers != "attn";
  config.stack.depth = args.integer("depth", 2);
  config.stack.seed = static_cast<uint64_t>(args.integer("seed", 1));
  config.stack.init = args.choice("init", "xavier", {"xavier", "gpt2"}) == "gpt2"
                          ? InitScheme::gpt2_scaled
                          : InitScheme::xavier_uniform;
  config.vocab_size = args.integer("vocab", 11);
  const int64_t batch = args.integer("batch", 2), seq = args.integer("seq", 5);
  AttentionMask mask;
  mask.causal = args.choice("causal", "0", {"0", "1"}) == "1";
  mask.lengths = args.integers("lengths");

  SequenceModel model(config);
  // Perturb gamma/beta/alpha away from their initial 1/0 so their gradients are really tested.
  Generator generator(config.stack.seed + 1000);
  for (Parameter* parameter : model.parameters()) {
    const std::string& name = parameter->name;
    const bool is_norm = name.find("gamma") != std::string::npos ||
                         name.find("beta") != std::string::npos ||
                         name.find("alpha") != std::string::npos;
    if (is_norm || name.find("bias") != std::string::npos) {
      for (float& value : parameter->value.values()) {
        value += static_cast<float>(0.1 * generator.standard_normal()) +
                 (name.find("alpha") != std::string::npos ? 0.5f : 0.0f);
      }
    }
  }
  std::vector<int32_t> tokens(static_cast<size_t>(batch * seq)), targets(tokens.size());
  Tensor tokens_tensor(Shape{batch, seq}), targets_tensor(Shape{batch, seq});
  for (size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] =
        static_cast<int32_t>(generator.next_uint64() % static_cast<uint64_t>(config.vocab_size));
    targets[i] =
        static_cast<int32_t>(generator.next_uint64() % static_cast<uint64_t>(config.vocab_size));
    tokens_tensor[static_cast<int64_t>(i)] = static_cast<float>(tokens[i]);
    targets_tensor[static_cast<int64_t>(i)] = static_cast<float>(targets[i]);
  }
  // Admin's omegas come from its profiling pass on this batch; the file holds the profiled ones.
  model.initialize_admin(tokens, batch, seq, mask);
  std::filesystem::create_directories(out);
  save(out / "tokens.npy", tokens_tensor);
  save(out / "targets.npy", targets_tensor);
  for (Parameter* parameter : model.parameters()) {
    save(out / ("param." + parameter->name + ".npy"), parameter->value);
  }
  const auto parameters = model.parameters();
  zero_grad(parameters);
  const double loss = model.forward_backward(tokens, targets, batch, seq, mask);
  save(out / "loss.npy", Tensor(Shape{1}, {static_cast<float>(loss)}));
  save(out / "logits.npy", model.forward(tokens, batch, seq, mask));
  for (Parameter* parameter : parameters) {
    save(out / ("grad." + parameter->name + ".npy"), parameter->grad);
  }
  std::cout << loss << "\n";
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
