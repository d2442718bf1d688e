// The fast CPU kernels behind the public ops: SIMD written once with Highway and compiled for
// every x86-64 target (SSE4 to AVX-512), chosen at run time; OpenMP threads over contiguous
// chunks of rows. Same numerics as the reference kernels (src/ops/reference/): reductions in
// float64, each output rounded once from a float64 value or by one float32 fused multiply-add.
//
// Arguments are already validated. Pointers marked "nullable" may be null.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "addnorm/dtype.hpp"
#include "addnorm/norm_kind.hpp"
#include "ops/cpu/norm_numerics.hpp"
#include "ops/cpu/tuning.hpp"

namespace addnorm::cpu {

// The one of three entry points (one per storage type of the rows: float32, bfloat16, float16)
// that serves `storage`: how the norm engine picks the translation unit compiled for a stream.
template <class Fn>
Fn for_storage(DType storage, Fn float32, Fn bfloat16, Fn float16) {
  switch (storage) {
    case DType::float32:
      return float32;
    case DType::bfloat16:
      return bfloat16;
    case DType::float16:
      return float16;
  }
  return float32;
}

// Whether an output of this many bytes is written with non-temporal (streaming) stores. Above
// the threshold the output will not stay in cache for the caller anyway, and streaming saves
// the read that an ordinary store's write-allocate costs: a forward then moves 8 bytes per
// element instead of 12. Below it, the output is left in cache for whatever reads it next.
// kStreamingStoreBytes, 8 MiB, is twice this machine's L2 (2 x 2 MiB); the shared
// L3 is not counted on.
inline constexpr int64_t kStreamingStoreBytes = tuned("kStreamingStoreBytes", int64_t{8} << 20);
inline bool streams_output(int64_t bytes) {
  return bytes >= kStreamingStoreBytes;
}

// Whether a norm forward (LayerNorm, RMSNorm, pre-norm; not post-norm) whose outputs (y, and h
// with a residual) are all 16-bit streams them, per CPU family: AMD EPYC (Zen 5) uses ordinary
// stores, where streaming them measured a wash at best; Intel keeps streaming them, as the
// forward was tuned on Xeon. Float32 outputs stream on every CPU; the backward's 16-bit dx never
// does. The measurements: docs/performance.md, "Tunables: what was tried".
bool streams_narrow_outputs();

// Post-norm's input stage: the norm's input is h = x + Dropout(s) (dropout.hpp), formed in
// float32 and not stored; element e of s is element first_element + e of the dropout stream.
struct DropoutInput {
  const void* s = nullptr;
  DType s_storage = DType::float32;  // any type, as x and y
  uint64_t seed = 0;
  float p = 0;
  uint64_t first_element = 0;
};

// LayerNorm or RMSNorm (`norm`) over rows of x, with an optional fused residual add: when
// `residual` is given, h = x + residual is written to `h` (rounded to the storage type; not
// written where h is null) and normalised as stored, instead of x. With `dropout` (post-norm),
// x + Dropout(s) is normalised instead; x may then be of any storage type and y of any other
// (at p = 0 with a float32 x and s of y's type, the residual stage with h null runs it).
// x and h are rows of `storage` (the residual stream), residual and y rows of `branch_storage`:
// float32, or the bits (uint16_t) of a 16-bit type, in any of the nine pairings; gamma, beta,
// mean and rstd are float32 either way.
struct NormForward {
  const void* x = nullptr;
  const void* residual = nullptr;  // nullable
  void* h = nullptr;             // may be x or residual; null with a float32 stream: h is not kept
  const float* gamma = nullptr;  // nullable
  const float* beta = nullptr;   // nullable; LayerNorm only
  bool zero_centered_gamma = false;       // RMSNorm: scale by 1 + gamma
  void* y = nullptr;                      // may be x (or h) when of the same type
  DType storage = DType::float32;         // of x and h
  DType branch_storage = DType::float32;  // of residual and y
  float* mean = nullptr;                  // nullable, one per row
  float* rstd = nullptr;                  // nullable, one per row
  int64_t rows = 0;
  int64_t dim = 0;
  double eps = 0;
  NormKind norm = NormKind::layer_norm;
  const DropoutInput* dropout = nullptr;  // nullable; excludes residual
  // Write y and h with non-temporal stores. norm_forward sets it itself (streams_output);
  // norm_forward_range, whose callers write into buffers they read back at once, takes it as is.
  bool stream_outputs = false;
};
void norm_forward(const NormForward& args);
// h = x + residual alone, rounded to the stream's storage type (the add op): the pre-norm's h bit
// for bit. Reads x, residual, rows, dim, storage and branch_storage; h may be x or residual.
void residual_add(const NormForward& args);
// Backward of norm_forward (without the residual: its gradient is dx itself). dh_next, when
// given, is added to dx before rounding. dgamma/dbeta are reduced over rows in a fixed order,
// so they are bitwise identical for any thread count.
// x, dh_next and dx are rows of `storage`, dy rows of `dy_storage`: float32, or the bits
// (uint16_t) of a 16-bit type, in any pairing; gamma, rstd and the gradients of the parameters
// are float32 either way.
struct NormBackward {
  const void* dy = nullptr;
  const void* x = nullptr;
  const float* gamma = nullptr;       // nullable
  bool zero_centered_gamma = false;   // RMSNorm: scale by 1 + gamma
  const float* saved_rstd = nullptr;  // nullable
  const void* dh_next = nullptr;      // nullable
  void* dx = nullptr;                 // may be dy, x or dh_next
  DType storage = DType::float32;     // of x, dh_next and dx
  DType dy_storage = DType::float32;  // of dy
  float* dgamma = nullptr;            // nullable
  float* dbeta = nullptr;             // nullable; LayerNorm only
  int64_t rows = 0;
  int64_t dim = 0;
  double eps = 0;
  NormKind norm = NormKind::layer_norm;
  // Write dx with non-temporal stores: set by norm_backward itself, as for NormForward.
  bool stream_outputs = false;
};
void norm_backward(const NormBackward& args);
// The same on rows [begin, end) only, on the calling thread: for callers that split the work
// themselves (post-norm's backward builds each block's h in a buffer).
// norm_backward_range adds into the given float64 partials (nullable) instead of dgamma/dbeta.
void norm_forward_range(const NormForward& args, int64_t begin, int64_t end);
void norm_backward_range(const NormBackward& args, int64_t begin, int64_t end,
                         double* dgamma_partial, double* dbeta_partial);

// The SIMD targets compiled into this binary and supported by this CPU, best first, and a way
// to run the kernels on a chosen one (0 restores the best): the tests run every target.
std::vector<int64_t> available_targets();
void force_target(int64_t target);
std::string target_name(int64_t target);
// The target the dispatched kernels run on now.
std::string current_target_name();

}  // namespace addnorm::cpu
