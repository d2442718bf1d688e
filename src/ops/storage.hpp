// How the public norms reach the engine (src/ops/cpu/): every call, whatever its storage types,
// hands the kernels the tensors in their own types. A call's row tensors form two groups of one
// type each (op_checks.hpp refuses any other call): the residual stream, x and h (in a backward
// x, dh_next and dx), and the branch, r and y (dy); the two types may be any of float32,
// bfloat16 and float16. gamma and beta are read as float32, widened once per call when stored
// narrower. The arguments are checked before any of this runs.
#pragma once

#include <cstdint>
#include <optional>

#include "addnorm/dtype.hpp"
#include "addnorm/ops.hpp"
#include "ops/cpu/kernels.hpp"
#include "ops/cpu/scratch.hpp"
#include "ops/validate.hpp"

namespace addnorm::detail {

// The description (ops.hpp's NormOptions) resolved for the engine: the kind the call runs and
// the eps it runs with, no longer optional.
struct NormSettings {
  NormKind norm = NormKind::layer_norm;
  std::optional<AnyConstView> gamma;
  std::optional<AnyConstView> beta;
  bool zero_centered_gamma = false;
  float eps = 1e-5f;
};
NormSettings norm_settings(const NormOptions& options, NormKind kind);

// The engine's arguments for y = Norm(x) over the rows of `layout`, gamma and beta as float32
// (widened into `scratch` when stored narrower): for the callers that add an input stage.
cpu::NormForward forward_args(const AnyConstView& x, const AnyMutableView& y,
                              const NormSettings& settings, const std::optional<NormStats>& stats,
                              const RowLayout& layout, cpu::Scratch& scratch);
// The same for dx = Norm'(dy) at x, without the parameters' gradients.
cpu::NormBackward backward_args(const AnyConstView& dy, const AnyConstView& x,
                                const AnyMutableView& dx, const NormSettings& settings,
                                const RowLayout& layout, cpu::Scratch& scratch);

// y = Norm(x), or with a residual r: h = x + r (rounded to h's type) and y = Norm(h). `stats`
// receives the mean (LayerNorm) and rstd per row when given.
void run_norm_forward(const AnyConstView& x, const std::optional<AnyConstView>& r,
                      const std::optional<AnyMutableView>& h, const AnyMutableView& y,
                      const NormSettings& settings, const std::optional<NormStats>& stats,
                      const RowLayout& layout);

// dx = Norm'(dy) at x, plus dh_next when given; dgamma and dbeta (float32) when asked for.
void run_norm_backward(const AnyConstView& dy, const AnyConstView& x,
                       const std::optional<AnyConstView>& dh_next, const AnyMutableView& dx,
                       const OptionalMutable& dgamma, const OptionalMutable& dbeta,
                       const NormSettings& settings, const OptionalConst& saved_rstd,
                       const RowLayout& layout);

// A parameter (gamma or beta: one row) as float32 for a whole call: in place when it stores
// float32, else widened into `scratch`; nullptr when absent.
const float* parameter_as_float32(const std::optional<AnyConstView>& view, cpu::Scratch& scratch);

}  // namespace addnorm::detail
