// GroupNorm's fast path: each sample's group is one row of the norm engine (kernels.hpp), run a
// block of rows at a time into a float32 buffer that stays in cache, where the per-channel scale
// and shift are applied and the result stored in y's type. The backward runs the engine's
// LayerNorm backward on g = dy * gamma_c, and sums dgamma/dbeta per (sample, channel) in float64
// before adding the samples in order: bitwise identical for any thread count.
// Arguments are already validated (op_checks.hpp).
#pragma once

#include <cstdint>

#include "addnorm/dtype.hpp"
#include "ops/reference/group_norm.hpp"

namespace addnorm::cpu {

struct GroupNormForward {
  const void* x = nullptr;
  DType x_storage = DType::float32;
  void* y = nullptr;  // may be x
  DType y_storage = DType::float32;
  const float* gamma = nullptr;  // nullable, one per channel
  const float* beta = nullptr;   // nullable, one per channel
  float* mean = nullptr;         // nullable, one per (sample, group)
  float* rstd = nullptr;         // nullable, one per (sample, group)
  reference::GroupLayout layout;
  double eps = 0;
};
void group_norm_forward(const GroupNormForward& args);
// The same for x and y stored channels last ((N, positions, C) in memory, the layout's shape
// otherwise as above) and of one storage type (group_norm_channels_last.cpp): each sample on
// BatchNorm's column kernels, small samples spread over the threads whole and large ones a
// sample at a time. Each sample pays BatchNorm's per-call set-up (its channel tables), so it
// takes samples of at least kChannelsLastMinSampleValues values (positions x C); smaller ones go
// through channels-first copies. Measured through the torch face, float32, 2 threads, AMD EPYC
// (docs/performance.md, "GroupNorm on channels-last input"): at 2048 values a sample
// (512, 32, 8, 8) the forward ran 0.3 ms this way against 0.5 by copies and the backward 1.0
// against 1.2; at 1024 (256, 64, 4, 4) 0.2 against 0.1 and 0.4 against 0.4.
constexpr int64_t kChannelsLastMinSampleValues = 2048;
void group_norm_forward_channels_last(const GroupNormForward& args);

struct GroupNormBackward {
  const void* dy = nullptr;
  DType dy_storage = DType::float32;
  const void* x = nullptr;
  void* dx = nullptr;  // may be x or dy; stored as x
  DType x_storage = DType::float32;
  const float* gamma = nullptr;  // nullable
  float* dgamma = nullptr;       // nullable
  float* dbeta = nullptr;        // nullable
  reference::GroupLayout layout;
  double eps = 0;
};
void group_norm_backward(const GroupNormBackward& args);
// The same for dy, x and dx stored channels last and of one storage type, on BatchNorm's two
// backward passes on each sample, spread over the threads as the forward's
// (group_norm_channels_last.cpp), for samples of at least kChannelsLastMinSampleValues values.
void group_norm_backward_channels_last(const GroupNormBackward& args);

}  // namespace addnorm::cpu
