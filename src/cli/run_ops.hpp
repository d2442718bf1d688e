// The ops `addnorm run` can apply: the settings its options fill in, and one function per op that
// loads the op's inputs, checks them (through the library) and computes every output in memory.
#pragma once

#include <cstdint>
#include <string>

#include "addnorm/ops.hpp"
#include "addnorm/tensor.hpp"
#include "cli/run_io.hpp"

namespace addnorm::cli {

// Everything the options of one `addnorm run OP` can set. Input paths are empty when not given.
struct RunSettings {
  std::string out;
  bool backward = false;

  // Input files, named as PyTorch and ONNX name the arguments.
  std::string x, residual, s, weight, bias, running_mean, running_var, dy, dh_next;

  // Which trailing dims LayerNorm and RMSNorm normalise: exactly one of the two forms.
  std::string normalized_shape;  // PyTorch: "3,4"
  int64_t axis = -1;             // ONNX: normalise from `axis` to the end
  bool axis_given = false;

  float eps = 1e-5f;
  uint64_t num_groups = 1;  // GroupNorm
  bool eps_given = false;   // the fused ops: otherwise the norm kind's default
  bool zero_centered_gamma = false;
  std::string norm = "layer_norm";  // the fused ops' norm: layer_norm or rms_norm

  // BatchNorm.
  bool training = true;
  std::string convention = "pytorch";
  float momentum = 0.1f;
  bool momentum_given = false;  // otherwise the convention's default: 0.1 PyTorch, 0.9 ONNX

  // Dropout.
  float p = 0.0f;
  uint64_t seed = 0;
  uint64_t offset = 0;
};

// The normalized_shape for x: parsed from --normalized_shape, or derived from --axis.
Shape resolve_normalized_shape(const RunSettings& settings, const Shape& x_shape);

// "3,4" (also "[3, 4]" or "(3,)") as a Shape; throws Error naming --normalized_shape.
Shape parse_normalized_shape(const std::string& text);

// The shape of per-row statistics (mean, rstd): x's leading dims before the normalised ones.
// A normalized_shape longer than x yields an empty shape; the op then refuses the mismatch.
Shape row_stats_shape(const Shape& x_shape, const Shape& normalized_shape);

// The norm's description (addnorm's NormOptions) from the command line, for the plain ops (their
// own kind) and the fused ones (--norm) alike: --eps when given, else the kind's default.
NormOptions norm_options(const RunSettings& settings, NormKind kind,
                         const std::optional<Tensor>& weight, const std::optional<Tensor>& bias);

void run_add(const RunSettings& settings, InputSet& inputs, OutputSet& outputs);
void run_dropout(const RunSettings& settings, InputSet& inputs, OutputSet& outputs);
void run_layer_norm(const RunSettings& settings, InputSet& inputs, OutputSet& outputs);
void run_rms_norm(const RunSettings& settings, InputSet& inputs, OutputSet& outputs);
void run_batch_norm(const RunSettings& settings, InputSet& inputs, OutputSet& outputs);
void run_group_norm(const RunSettings& settings, InputSet& inputs, OutputSet& outputs);
void run_add_norm_pre(const RunSettings& settings, InputSet& inputs, OutputSet& outputs);
void run_add_norm_post(const RunSettings& settings, InputSet& inputs, OutputSet& outputs);

}  // namespace addnorm::cli
