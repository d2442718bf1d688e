// The norm forward's entry points: which translation unit runs a call (one per stream storage,
// and post-norm's: norm_forward_unit.inc), whether its outputs stream, and the rows spread over
// OpenMP threads. The kernels themselves are norm_forward-inl.h.
#include "ops/cpu/cpu_family.hpp"
#include "ops/cpu/kernels.hpp"
#include "ops/cpu/threading.hpp"

namespace addnorm::cpu {

// Defined by the units (norm_forward_<storage>.cpp, norm_forward_post_norm.cpp), each
// dispatching to the best SIMD target it was compiled for.
void norm_forward_float32_stream(const NormForward& args, int64_t begin, int64_t end);
void norm_forward_bfloat16_stream(const NormForward& args, int64_t begin, int64_t end);
void norm_forward_float16_stream(const NormForward& args, int64_t begin, int64_t end);
void norm_forward_post_norm(const NormForward& args, int64_t begin, int64_t end);

namespace {

using ForwardRows = void (*)(const NormForward&, int64_t, int64_t);

ForwardRows forward_rows_for(const NormForward& args) {
  if (args.dropout) return norm_forward_post_norm;
  return for_storage<ForwardRows>(args.storage, norm_forward_float32_stream,
                                  norm_forward_bfloat16_stream, norm_forward_float16_stream);
}

}  // namespace

bool streams_narrow_outputs() {
  return cpu_family() != CpuFamily::amd;
}

void norm_forward(const NormForward& args) {
  NormForward streamed = args;
  // 16-bit outputs per CPU family (streams_narrow_outputs), except post-norm's: its forward is
  // bound by the dropout mask's Philox work, and streaming measured 1.00-1.06x on AMD EPYC too.
  // A call with a float32 output (y, or h where a residual is added) keeps streaming, as float32
  // calls do.
  const bool narrow =
      args.branch_storage != DType::float32 && (!args.residual || args.storage != DType::float32);
  streamed.stream_outputs =
      streams_output(args.rows * args.dim * dtype_size(args.branch_storage)) &&
      (!narrow || args.dropout || streams_narrow_outputs());
  const ForwardRows rows = forward_rows_for(args);
  parallel_rows(args.rows, args.dim,
                [&](int64_t begin, int64_t end) { rows(streamed, begin, end); });
}

void norm_forward_range(const NormForward& args, int64_t begin, int64_t end) {
  forward_rows_for(args)(args, begin, end);
}

}  // namespace addnorm::cpu
