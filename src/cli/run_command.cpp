// `addnorm run OP`: one CLI11 subcommand per op, each with exactly the options that op takes,
// named as PyTorch and ONNX name them. The callback loads the inputs, computes every output in
// memory (the library validates before it writes anything) and only then writes the files, so a
// user error never leaves partial output behind.
#include <iostream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "addnorm/error.hpp"
#include "addnorm/ops.hpp"
#include "cli/commands.hpp"
#include "cli/exact_numbers.hpp"
#include "cli/run_io.hpp"
#include "cli/run_ops.hpp"

namespace addnorm::cli {

namespace {

constexpr const char* kInputs = "Inputs (.npy files)";
constexpr const char* kParameters = "Parameters";
constexpr const char* kOutput = "Output and mode";

constexpr const char* kRunDescription =
    "Apply one Add & Norm op to .npy inputs and write each output as OUT/<name>.npy.\n"
    "Inputs are little-endian float32 or float64 arrays in C order. float32 inputs are computed\n"
    "by the float32 ops (float64 statistics); when any input is float64, every input is taken\n"
    "as float64 and computed by the float64 ops, as the Python module does, and the outputs\n"
    "are written as float64. Each input option's file is read once. --eps and --momentum\n"
    "must have a finite float32 rounding (nonzero unless typed as 0) in a float32 run and be\n"
    "finite in a float64 run; --p is drawn at float32's precision in both. Nothing is written\n"
    "unless every check and computation succeeds.";

// The options one op's subcommand parses into, its input files (argument name and field), and the
// options whose presence (not just their value) matters.
struct OpState {
  RunSettings settings;
  std::vector<std::pair<std::string, std::string RunSettings::*>> inputs;
  CLI::Option* axis = nullptr;
  CLI::Option* momentum = nullptr;
  CLI::Option* eps = nullptr;
};

// One op on inputs and outputs of T, written only once it has succeeded.
template <class T>
void run_as(void (*run)(const RunSettings&, InputSet<T>&, OutputSet<T>&),
            const RunSettings& settings, StoredInputs& stored) {
  InputSet<T> inputs(stored);
  OutputSet<T> outputs(inputs);
  run(settings, inputs, outputs);
  outputs.write_all(settings.out, std::cout);
}

// A float32 run rounds --eps and --momentum to float32 once; a float64 run takes them as typed,
// so their float32 limits are checked only once the inputs have chosen the run.
void check_float32_numbers(const OpState& state) {
  for (const CLI::Option* option : {state.eps, state.momentum}) {
    if (option == nullptr || option->count() == 0) continue;
    const std::string problem = float32_rounding_problem(option->results().back());
    if (!problem.empty()) {
      throw Error(option->get_name() + ": " + problem + "; float64 inputs would take it as typed");
    }
  }
}

// Reads every input the op was given, then runs it in float64 when any is stored so, else in
// float32.
void run_op(const OpState& state, const OpRunner& runner) {
  RunSettings given = state.settings;
  given.axis_given = state.axis != nullptr && state.axis->count() > 0;
  given.momentum_given = state.momentum != nullptr && state.momentum->count() > 0;
  given.eps_given = state.eps != nullptr && state.eps->count() > 0;
  StoredInputs stored;
  for (const auto& [argument, path] : state.inputs) {
    if (!(given.*path).empty()) stored.read(argument, given.*path);
  }
  if (stored.any_float64()) {
    run_as<double>(runner.float64, given, stored);
  } else {
    check_float32_numbers(state);
    run_as<float>(runner.float32, given, stored);
  }
}

// Declares one op's subcommand option by option.
class OpCommand {
 public:
  OpCommand(CLI::App& run, const std::string& name, const std::string& description,
            const OpRunner& runner)
      : app_(run.add_subcommand(name, description)), state_(std::make_shared<OpState>()) {
    RunSettings& settings = state_->settings;
    app_->add_option("--out", settings.out, "Directory for the outputs (created if missing)")
        ->required()
        ->type_name("DIR")
        ->group(kOutput);
    backward_ = app_->add_flag("--backward", settings.backward,
                               "Compute the gradients from --dy instead of the forward outputs")
                    ->group(kOutput);
    app_->callback([state = state_, &runner]() { run_op(*state, runner); });
  }

  OpCommand& input(const std::string& names, std::string RunSettings::*path,
                   const std::string& help, bool required = false) {
    CLI::Option* option =
        app_->add_option(names, state_->settings.*path, help)->type_name("FILE")->group(kInputs);
    if (required) option->required();
    state_->inputs.emplace_back(option->get_lnames().front(), path);
    return *this;
  }

  // An input only the backward reads, such as --dy.
  OpCommand& backward_input(const std::string& names, std::string RunSettings::*path,
                            const std::string& help) {
    CLI::Option* option = app_->add_option(names, state_->settings.*path, help)
                              ->type_name("FILE")
                              ->needs(backward_)
                              ->group(kInputs);
    state_->inputs.emplace_back(option->get_lnames().front(), path);
    return *this;
  }

  OpCommand& normalized_shape() {
    RunSettings& settings = state_->settings;
    CLI::Option* shape = app_->add_option("--normalized_shape", settings.normalized_shape,
                                          "Normalised trailing dims, PyTorch style: 4 or 3,4")
                             ->type_name("DIMS")
                             ->group(kParameters);
    state_->axis = app_->add_option("--axis", settings.axis,
                                    "Normalise from this axis to the end, ONNX style (may be "
                                    "negative); give this or --normalized_shape")
                       ->excludes(shape)
                       ->group(kParameters);
    return *this;
  }

  OpCommand& eps(double default_eps) {
    state_->settings.eps = default_eps;
    state_->eps = app_->add_option("--eps", state_->settings.eps,
                                   "Added to the variance inside the square root")
                      ->check(finite_double())
                      ->capture_default_str()
                      ->group(kParameters);
    return *this;
  }

  // The fused ops' --eps: absent, the --norm kind's default (the plain op's).
  OpCommand& kind_eps() {
    state_->eps = app_->add_option("--eps", state_->settings.eps,
                                   "Added to the variance inside the square root (default: the "
                                   "norm's own, 1e-05 layer_norm, 1e-06 rms_norm)")
                      ->check(finite_double())
                      ->group(kParameters);
    return *this;
  }

  OpCommand& zero_centered_gamma(const std::string& help) {
    // The faces' name (addnorm::face_argument_name), and the C++ name it stands for.
    app_->add_flag("--zero_centered_weight,--zero_centered_gamma",
                   state_->settings.zero_centered_gamma, help)
        ->group(kParameters);
    return *this;
  }

  OpCommand& norm_kind() {
    app_->add_option("--norm", state_->settings.norm, "The norm after the add")
        ->check(CLI::IsMember({"layer_norm", "rms_norm"}))
        ->capture_default_str()
        ->group(kParameters);
    return zero_centered_gamma("rms_norm only: scale by (1 + weight)");
  }

  OpCommand& dropout() {
    RunSettings& settings = state_->settings;
    app_->add_option("--p", settings.p, "Dropout probability in [0, 1)")
        ->check(exact_float32(/*below_one=*/true))
        ->capture_default_str()
        ->group(kParameters);
    app_->add_option("--seed", settings.seed, "Seed of the counter-based mask generator")
        ->check(exact_unsigned())
        ->capture_default_str()
        ->group(kParameters);
    app_->add_option("--offset", settings.offset,
                     "Element offset into the seed's stream; the backward must use the forward's "
                     "--p, --seed and --offset to regenerate its mask")
        ->check(exact_unsigned())
        ->capture_default_str()
        ->group(kParameters);
    return *this;
  }

  OpCommand& num_groups() {
    app_->add_option("--num_groups", state_->settings.num_groups,
                     "Groups of consecutive channels, a divisor of C (axis 1 of x); C groups is "
                     "InstanceNorm")
        ->required()
        ->check(exact_unsigned())
        ->group(kParameters);
    return *this;
  }

  OpCommand& batch_norm_mode() {
    RunSettings& settings = state_->settings;
    app_->add_flag("--training,!--eval", settings.training,
                   "--training (default): normalise with the batch's statistics and update the "
                   "running ones; --eval: normalise with --running_mean and --running_var")
        ->group(kParameters);
    state_->momentum =
        app_->add_option("--momentum", settings.momentum,
                         "Running-statistics momentum, usually in [0, 1]; default 0.1 for "
                         "pytorch, 0.9 for onnx")
            ->check(finite_double())
            ->group(kParameters);
    app_->add_option("--convention", settings.convention,
                     "pytorch: running = (1 - m) * running + m * batch, unbiased variance; onnx: "
                     "running = m * running + (1 - m) * batch, biased variance")
        ->check(CLI::IsMember({"pytorch", "onnx"}))
        ->capture_default_str()
        ->group(kParameters);
    return *this;
  }

  OpCommand& writes(const std::string& outputs) {
    app_->footer(outputs);
    return *this;
  }

 private:
  CLI::App* app_;
  CLI::Option* backward_ = nullptr;
  std::shared_ptr<OpState> state_;
};

constexpr const char* kX = "--x";
constexpr const char* kWeight = "--weight,--gamma";
constexpr const char* kBias = "--bias,--beta";
constexpr const char* kDy = "--dy";

void add_norm_ops(CLI::App& run) {
  OpCommand(run, "layer_norm", "LayerNorm over the trailing dims", kRunLayerNorm)
      .input(kX, &RunSettings::x, "Input", true)
      .input(kWeight, &RunSettings::weight, "Scale, shape normalized_shape (default 1)")
      .input(kBias, &RunSettings::bias, "Shift, shape normalized_shape (default 0)")
      .backward_input(kDy, &RunSettings::dy, "Gradient of y (with --backward)")
      .normalized_shape()
      .eps(norm_traits(NormKind::layer_norm).default_eps)
      .writes(
          "Writes y.npy, mean.npy and rstd.npy (one per row); with --backward dx.npy, and "
          "dweight.npy / dbias.npy when --weight / --bias are given.\n"
          "Example: addnorm run layer_norm --x x.npy --weight w.npy --normalized_shape 512 "
          "--out out");

  OpCommand(run, "rms_norm", "RMSNorm over the trailing dims: x / sqrt(mean(x^2) + eps) * weight",
            kRunRmsNorm)
      .input(kX, &RunSettings::x, "Input", true)
      .input(kWeight, &RunSettings::weight, "Scale, shape normalized_shape (default 1)")
      .backward_input(kDy, &RunSettings::dy, "Gradient of y (with --backward)")
      .normalized_shape()
      .eps(norm_traits(NormKind::rms_norm).default_eps)
      .zero_centered_gamma("Scale by (1 + weight), so that weight 0 is the identity")
      .writes(
          "Writes y.npy and rstd.npy (one per row); with --backward dx.npy, and dweight.npy "
          "when --weight is given.");

  OpCommand(run, "group_norm",
            "GroupNorm over (N, C, *): each sample's groups of channels normalised, then "
            "weight and bias per channel",
            kRunGroupNorm)
      .input(kX, &RunSettings::x, "Input, (N, C, *)", true)
      .input(kWeight, &RunSettings::weight, "Scale, shape [C] (default 1)")
      .input(kBias, &RunSettings::bias, "Shift, shape [C] (default 0)")
      .backward_input(kDy, &RunSettings::dy, "Gradient of y (with --backward)")
      .num_groups()
      .eps(kGroupNormDefaultEps)
      .writes(
          "Writes y.npy, mean.npy and rstd.npy (shape [N, num_groups]); with --backward dx.npy, "
          "and dweight.npy / dbias.npy when --weight / --bias are given.\n"
          "Example: addnorm run group_norm --x x.npy --num_groups 8 --out out");

  OpCommand(run, "batch_norm", "BatchNorm over channel axis 1 of (N, C, *), rank 2 to 5",
            kRunBatchNorm)
      .input(kX, &RunSettings::x, "Input, (N, C, *) of rank 2 to 5", true)
      .input(kWeight, &RunSettings::weight, "Scale, shape [C] (default 1)")
      .input(kBias, &RunSettings::bias, "Shift, shape [C] (default 0)")
      .input("--running_mean", &RunSettings::running_mean,
             "Running mean, shape [C]; required with --eval, updated (as a new file) in training")
      .input("--running_var", &RunSettings::running_var,
             "Running variance, shape [C]; given together with --running_mean")
      .backward_input(kDy, &RunSettings::dy, "Gradient of y (with --backward)")
      .batch_norm_mode()
      .eps(kBatchNormDefaultEps)
      .writes(
          "Writes y.npy; in training mode also mean.npy and rstd.npy (the batch's, per channel) "
          "and, when running statistics are given, their updated values as running_mean.npy and "
          "running_var.npy (the input files are not modified). With --backward: dx.npy, and "
          "dweight.npy / dbias.npy when --weight / --bias are given.");
}

void add_elementwise_ops(CLI::App& run) {
  OpCommand(run, "add", "Residual add: y = x + residual", kRunAdd)
      .input(kX, &RunSettings::x, "Input", true)
      .input("--residual,--r", &RunSettings::residual, "Residual, same shape as x", true)
      .backward_input(kDy, &RunSettings::dy, "Gradient of y (with --backward)")
      .writes("Writes y.npy; with --backward dx.npy and dresidual.npy (both equal to dy).");

  OpCommand(run, "dropout", "Dropout with a counter-based mask keyed by (seed, offset)",
            kRunDropout)
      .input(kX, &RunSettings::x, "Input", true)
      .backward_input(kDy, &RunSettings::dy, "Gradient of y (with --backward)")
      .dropout()
      .writes("Writes y.npy; with --backward dx.npy.");
}

void add_fused_ops(CLI::App& run) {
  OpCommand(run, "add_norm_pre", "Pre-norm Add & Norm (GPT-2): h = x + residual, y = Norm(h)",
            kRunAddNormPre)
      .input(kX, &RunSettings::x, "Input", true)
      .input("--residual,--r", &RunSettings::residual, "Residual, same shape as x", true)
      .input(kWeight, &RunSettings::weight, "Scale, shape normalized_shape (default 1)")
      .input(kBias, &RunSettings::bias, "Shift, shape normalized_shape (layer_norm only)")
      .backward_input(kDy, &RunSettings::dy, "Gradient of y (with --backward)")
      .backward_input("--dh_next", &RunSettings::dh_next,
                      "Gradient of h from the next residual (with --backward; default 0)")
      .normalized_shape()
      .norm_kind()
      .kind_eps()
      .writes(
          "Writes h.npy, y.npy, rstd.npy and (layer_norm) mean.npy; with --backward dh.npy, "
          "the gradient of both x and residual, and dweight.npy / dbias.npy when --weight / "
          "--bias are given.");

  OpCommand(run, "add_norm_post", "Post-norm Add & Norm (2017 paper): y = Norm(x + Dropout(s))",
            kRunAddNormPost)
      .input(kX, &RunSettings::x, "Input (the residual stream)", true)
      .input("--s", &RunSettings::s, "Sub-layer output, same shape as x", true)
      .input(kWeight, &RunSettings::weight, "Scale, shape normalized_shape (default 1)")
      .input(kBias, &RunSettings::bias, "Shift, shape normalized_shape (layer_norm only)")
      .backward_input(kDy, &RunSettings::dy, "Gradient of y (with --backward)")
      .normalized_shape()
      .norm_kind()
      .kind_eps()
      .dropout()
      .writes(
          "Writes y.npy, rstd.npy and (layer_norm) mean.npy; with --backward dx.npy, ds.npy, "
          "and dweight.npy / dbias.npy when --weight / --bias are given.");
}

}  // namespace

void add_run_command(CLI::App& app) {
  CLI::App* run = app.add_subcommand("run", "Apply one op to .npy files (see addnorm run --help)");
  run->description(kRunDescription);
  run->require_subcommand(1);
  add_elementwise_ops(*run);
  add_norm_ops(*run);
  add_fused_ops(*run);
}

}  // namespace addnorm::cli
