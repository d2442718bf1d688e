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

  // The numbers as typed (finite; p, and in a float32 run eps and momentum, with a finite float32
  // rounding that is not 0 unless typed so); a float32 run rounds them once, by the library's
  // rule (eps_as, momentum_as, dropout_p_as), a float64 run does not.
  double eps = 1e-5;
  uint64_t num_groups = 1;  // GroupNorm
  bool eps_given = false;   // the fused ops: otherwise the norm kind's default
  bool zero_centered_gamma = false;
  std::string norm = "layer_norm";  // the fused ops' norm: layer_norm or rms_norm

  // BatchNorm.
  bool training = true;
  std::string convention = "pytorch";
  double momentum = 0.1;
  bool momentum_given = false;  // otherwise the convention's default: 0.1 PyTorch, 0.9 ONNX

  // Dropout.
  double p = 0.0;
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
template <class T>
BasicNormOptions<T> norm_options(const RunSettings& settings, NormKind kind,
                                 const std::optional<BasicTensor<T>>& weight,
                                 const std::optional<BasicTensor<T>>& bias);

// A backward's parameter gradients, dweight and dbias, for the affine parts that were given
// (`bias` absent for a norm without a shift).
template <class T, class Grads>
void add_affine_grads(const std::optional<BasicTensor<T>>& weight,
                      const std::optional<BasicTensor<T>>& bias, OutputSet<T>& outputs,
                      Grads& grads) {
  if (weight) grads.dgamma = outputs.add("dweight", weight->shape()).view();
  if constexpr (requires { grads.dbeta; }) {
    if (bias) grads.dbeta = outputs.add("dbias", bias->shape()).view();
  }
}

// One op's run for each element type: float32 inputs through the float32 ops, and, when any
// input is stored as float64, all of them through the float64 ops (the reference kernels), the
// outputs then written as float64.
struct OpRunner {
  void (*float32)(const RunSettings&, InputSet<float>&, OutputSet<float>&);
  void (*float64)(const RunSettings&, InputSet<double>&, OutputSet<double>&);
};

extern const OpRunner kRunAdd;
extern const OpRunner kRunDropout;
extern const OpRunner kRunLayerNorm;
extern const OpRunner kRunRmsNorm;
extern const OpRunner kRunBatchNorm;
extern const OpRunner kRunGroupNorm;
extern const OpRunner kRunAddNormPre;
extern const OpRunner kRunAddNormPost;

}  // namespace addnorm::cli
