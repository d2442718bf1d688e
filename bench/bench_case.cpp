// Op names and the byte model (see bench_case.hpp and docs/performance.md).
#include "bench_case.hpp"

#include "addnorm/error.hpp"

namespace addnorm::bench {

const std::vector<Op>& all_ops() {
  static const std::vector<Op> ops = {
      Op::layer_norm_fwd,    Op::layer_norm_bwd,       Op::layer_norm_fwdbwd,
      Op::rms_norm_fwd,      Op::rms_norm_bwd,         Op::rms_norm_fwdbwd,
      Op::add_norm_pre_fwd,  Op::add_norm_pre_bwd,     Op::add_norm_post_fwd,
      Op::add_norm_post_bwd, Op::batch_norm_train_fwd, Op::batch_norm_train_bwd};
  return ops;
}

std::string op_name(Op op) {
  switch (op) {
    case Op::layer_norm_fwd:
      return "layer_norm_fwd";
    case Op::layer_norm_bwd:
      return "layer_norm_bwd";
    case Op::layer_norm_fwdbwd:
      return "layer_norm_fwdbwd";
    case Op::rms_norm_fwd:
      return "rms_norm_fwd";
    case Op::rms_norm_bwd:
      return "rms_norm_bwd";
    case Op::rms_norm_fwdbwd:
      return "rms_norm_fwdbwd";
    case Op::add_norm_pre_fwd:
      return "add_norm_pre_fwd";
    case Op::add_norm_pre_bwd:
      return "add_norm_pre_bwd";
    case Op::add_norm_post_fwd:
      return "add_norm_post_fwd";
    case Op::add_norm_post_bwd:
      return "add_norm_post_bwd";
    case Op::batch_norm_train_fwd:
      return "batch_norm_train_fwd";
    case Op::batch_norm_train_bwd:
      return "batch_norm_train_bwd";
  }
  return "?";
}

Op op_from_name(const std::string& name) {
  std::string valid;
  for (Op op : all_ops()) {
    if (op_name(op) == name) return op;
    valid += (valid.empty() ? "" : ", ") + op_name(op);
  }
  throw Error("--ops has '" + name + "', expected one of " + valid);
}

bool is_decode_op(Op op) {
  return op == Op::layer_norm_fwd || op == Op::rms_norm_fwd;
}

std::string dtype_name(DType dtype) {
  return dtype == DType::f32 ? "f32" : "bf16";
}

DType dtype_from_name(const std::string& name) {
  if (name == "f32" || name == "float32") return DType::f32;
  if (name == "bf16" || name == "bfloat16") return DType::bf16;
  throw Error("--dtypes has '" + name + "', expected f32 or bf16");
}

int64_t dtype_bytes(DType dtype) {
  return dtype == DType::f32 ? 4 : 2;
}

ByteModel byte_model(Op op) {
  switch (op) {
    case Op::layer_norm_fwd:
      return {1, 1, "read x; write y (+ mean, rstd)"};
    case Op::layer_norm_bwd:
      return {2, 1, "read dy, x (+ mean, rstd); write dx (+ dgamma, dbeta)"};
    case Op::layer_norm_fwdbwd:
      return {3, 2, "forward (read x, write y) + backward (read dy, x; write dx)"};
    case Op::rms_norm_fwd:
      return {1, 1, "read x; write y (+ rstd)"};
    case Op::rms_norm_bwd:
      return {2, 1, "read dy, x (+ rstd); write dx (+ dgamma)"};
    case Op::rms_norm_fwdbwd:
      return {3, 2, "forward (read x, write y) + backward (read dy, x; write dx)"};
    case Op::add_norm_pre_fwd:
      return {2, 2, "read x, r; write h = x + r, y = LN(h)"};
    case Op::add_norm_pre_bwd:
      return {3, 1, "read dy, dh_next, h; write dh"};
    case Op::add_norm_post_fwd:
      return {2, 1, "read x, s; write y = LN(x + dropout(s)); mask regenerated"};
    case Op::add_norm_post_bwd:
      return {3, 2, "read dy, x, s; write dx, ds; mask regenerated"};
    case Op::batch_norm_train_fwd:
      return {1, 1, "read x; write y (+ per-channel stats)"};
    case Op::batch_norm_train_bwd:
      return {2, 1, "read dy, x; write dx (+ dgamma, dbeta)"};
  }
  return {};
}

double counted_bytes(const Case& c) {
  const ByteModel model = byte_model(c.op);
  const double tensor = static_cast<double>(c.elements() * dtype_bytes(c.dtype));
  const double row_stat = static_cast<double>(c.rows) * 4.0;
  const double column = static_cast<double>(c.dim) * 4.0;
  double small = 0;
  switch (c.op) {
    case Op::layer_norm_fwd:
      small = 2 * row_stat + 2 * column;
      break;  // mean, rstd; gamma, beta
    case Op::layer_norm_bwd:
      small = 2 * row_stat + 3 * column;
      break;  // + gamma, dgamma, dbeta
    case Op::layer_norm_fwdbwd:
      small = 4 * row_stat + 5 * column;
      break;
    case Op::rms_norm_fwd:
      small = row_stat + column;
      break;
    case Op::rms_norm_bwd:
      small = row_stat + 2 * column;
      break;
    case Op::rms_norm_fwdbwd:
      small = 2 * row_stat + 3 * column;
      break;
    case Op::add_norm_pre_fwd:
      small = 2 * row_stat + 2 * column;
      break;
    case Op::add_norm_pre_bwd:
      small = 2 * row_stat + 3 * column;
      break;
    case Op::add_norm_post_fwd:
      small = 2 * row_stat + 2 * column;
      break;
    case Op::add_norm_post_bwd:
      small = 2 * row_stat + 3 * column;
      break;
    case Op::batch_norm_train_fwd:
      small = 6 * column;
      break;  // gamma, beta, 2 running, 2 batch
    case Op::batch_norm_train_bwd:
      small = 3 * column;
      break;  // gamma, dgamma, dbeta (the batch statistics are recomputed from x)
  }
  return tensor * (model.tensors_read + model.tensors_written) + small;
}

}  // namespace addnorm::bench
