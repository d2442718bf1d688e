// Fast BatchNorm kernels over x viewed as [batch, channels, length]: memory is walked sample
// by sample (several distant parts at once: batch_norm_kernels.cpp; the reference walks one
// channel at a time, striding through the whole tensor), threads split the batch, and
// per-channel sums are reduced over fixed chunks of the batch in chunk order, so results are
// bitwise identical for any thread count. Arguments are already validated. Per-call tables come
// from the calling thread's scratch (scratch.hpp): a steady-state call allocates nothing.
#pragma once

#include <cstdint>

#include "addnorm/dtype.hpp"
#include "addnorm/ops.hpp"  // MomentumConvention

namespace addnorm::cpu {

struct BatchShape {
  int64_t batch = 0;
  int64_t channels = 0;
  int64_t length = 1;
};

// x, y, dy and dx below are of one storage type, `storage`: float32, or the bits of bfloat16 or
// float16 (loads widen exactly; each output is the float32 result rounded once). Only float32
// outputs are streamed: on AMD EPYC 16-bit outputs take ordinary stores anyway
// (streams_narrow_outputs, kernels.hpp), and a streamed 16-bit store needs whole registers that
// the passes over (N, C) do not form.

// Per-channel float64 statistics of a training batch (population variance), written to
// mean[C], mean_lo[C] (the mean's low part: RowMoments, norm_numerics.hpp) and variance[C].
void batch_statistics(const void* x, DType storage, const BatchShape& shape, double* mean,
                      double* mean_lo, double* variance);

// y = float((x - (mean_c + mean_lo_c)) * rstd_c) * gamma_c + beta_c (mean_lo, gamma, beta
// nullable); a channel whose mean or rstd is not finite becomes NaN. y may be x. variance_c is the
// channel's spread (the batch's variance, or the running variance in inference): a channel below
// kFloat32LanesMinVariance (norm_numerics.hpp) is normalised in float64 lanes.
void batch_normalise(const void* x, DType storage, const double* mean, const double* mean_lo,
                     const double* rstd, const double* variance, const float* gamma,
                     const float* beta, void* y, const BatchShape& shape);

// Training-mode backward (statistics recomputed from x) and inference-mode backward (running
// statistics as constants). dx may be dy or x; dgamma, dbeta nullable (the inference backward
// without dgamma does not read x).
void batch_norm_backward_training(const void* dy, const void* x, void* dx, DType storage,
                                  const float* gamma, float* dgamma, float* dbeta,
                                  const BatchShape& shape, double eps);
void batch_norm_backward_inference(const void* dy, const void* x, void* dx, DType storage,
                                   const float* gamma, const double* mean, const double* rstd,
                                   float* dgamma, float* dbeta, const BatchShape& shape);

// The training backward's two passes, for a caller that works out pass 2's per-channel constants
// itself (GroupNorm channels last: group_norm_channels_last.cpp).
// Pass 1: per channel, with d = x - shift_c (shift_c, written here, is the channel's first value),
// the totals of d, d^2, dy and dy * d over the batch in float64: each fixed chunk of the batch adds
// its samples in order and the chunks are added in chunk order, the same for any thread count.
struct BatchBackwardTotals {
  double* shift;
  double* d;
  double* d2;
  double* dy;
  double* dy_d;
};
void batch_backward_totals(const void* dy, const void* x, DType storage, const BatchShape& shape,
                           const BatchBackwardTotals& totals);
// Pass 2, in float64 lanes rounded once: with x_hat = ((x - mean_c) - mean_lo_c) * rstd_c,
//   dx = scale_c * ((dy_scale_c * dy - mean_dy_c) - x_hat * mean_dy_xhat_c).
// BatchNorm's own has no dy_scale (1) and scale = gamma * rstd; GroupNorm's scale is its group's
// rstd and dy_scale gamma, which may be 0. dx may be dy or x.
struct BatchBackwardConstants {
  const double* mean;
  const double* mean_lo;  // the mean's low part (RowMoments, norm_numerics.hpp)
  const double* rstd;
  const double* scale;
  const double* dy_scale;  // nullable: 1
  const double* mean_dy;
  const double* mean_dy_xhat;
};
void batch_backward_dx(const void* dy, const void* x, void* dx, DType storage,
                       const BatchShape& shape, const BatchBackwardConstants& constants);

// One BatchNorm call, whole (batch_norm_calls.cpp), so that the op layer (src/ops/batch_norm.cpp)
// only validates and describes it. The forward: in training the batch's statistics, the running
// update (when running statistics are given) and the saved statistics (when asked for); in
// inference the running statistics; then the normalising pass.
struct BatchNormForward {
  const void* x = nullptr;
  void* y = nullptr;               // may be x
  DType storage = DType::float32;  // of x and y
  const float* gamma = nullptr;    // nullable
  const float* beta = nullptr;     // nullable
  BatchShape shape;
  float eps = 0;
  bool training = true;
  float* running_mean = nullptr;  // nullable in training (no update), required in inference
  float* running_var = nullptr;
  float momentum = 0;
  MomentumConvention convention = MomentumConvention::pytorch;
  float* saved_mean = nullptr;  // nullable; training only: the batch's mean and rstd
  float* saved_rstd = nullptr;
};
void batch_norm_forward(const BatchNormForward& args);

// The backward: statistics recomputed from x in training, the running ones in inference.
struct BatchNormBackward {
  const void* dy = nullptr;
  const void* x = nullptr;
  void* dx = nullptr;              // may be dy or x
  DType storage = DType::float32;  // of dy, x and dx
  const float* gamma = nullptr;    // nullable
  float* dgamma = nullptr;         // nullable
  float* dbeta = nullptr;          // nullable
  BatchShape shape;
  float eps = 0;
  bool training = true;
  const float* running_mean = nullptr;  // inference only
  const float* running_var = nullptr;
};
void batch_norm_backward(const BatchNormBackward& args);

}  // namespace addnorm::cpu
