// What one benchmark case is (op, storage type, shape, threads) and the byte model that turns a
// time into GB/s: the bytes the op must read plus write, whatever an implementation does extra.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace addnorm::bench {

// The options every implementation runs with, so they all compute the same thing.
inline constexpr float kLayerNormEps = 1e-5f;
inline constexpr float kRmsNormEps = 1e-6f;
inline constexpr float kBatchNormMomentum = 0.1f;
inline constexpr float kDropoutP = 0.1f;  // the 2017 paper's post-norm dropout
inline constexpr uint64_t kDropoutSeed = 1234;

enum class Op {
  layer_norm_fwd,
  layer_norm_bwd,
  layer_norm_fwdbwd,
  rms_norm_fwd,
  rms_norm_bwd,
  rms_norm_fwdbwd,
  add_norm_pre_fwd,
  add_norm_pre_bwd,
  add_norm_post_fwd,
  add_norm_post_bwd,
  batch_norm_train_fwd,
  batch_norm_train_bwd,
};

enum class DType { f32, bf16 };

struct Case {
  Op op = Op::layer_norm_fwd;
  DType dtype = DType::f32;
  int64_t rows = 0;
  int64_t dim = 0;
  int threads = 1;
  bool in_cache = false;  // a 1 MiB tensor that stays in cache, instead of ~64 MiB
  // A decode step: a few rows (1, 4, 16) of a wide model, in cache; what matters is the time of
  // one call (ns/call), so the per-call overhead (validation, dispatch, waking threads) shows.
  bool decode = false;

  int64_t elements() const { return rows * dim; }
};

// The ops a decode step runs per token (norms before attention and the MLP).
bool is_decode_op(Op op);

const std::vector<Op>& all_ops();
std::string op_name(Op op);
Op op_from_name(const std::string& name);  // throws addnorm::Error naming the valid ops
std::string dtype_name(DType dtype);
DType dtype_from_name(const std::string& name);
int64_t dtype_bytes(DType dtype);

// The byte model of an op: how many full [rows, dim] tensors it must read and write, plus the
// small per-row statistics and per-column parameters. `description` says which, for the report.
struct ByteModel {
  int tensors_read = 0;
  int tensors_written = 0;
  std::string description;
};
ByteModel byte_model(Op op);
// The bytes counted for GB/s. Tensors in the case's storage type; statistics (mean, rstd: one
// float each per row, or per column for BatchNorm) and parameters (gamma, beta and their
// gradients: one float each per column) in float32.
double counted_bytes(const Case& c);

}  // namespace addnorm::bench
