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

// A post-norm call at p = 0 with float32 x and s of y's type runs as the float32 stream's
// residual stage with h not kept: y = Norm(x + s), x + s rounded to float32 in both (the dropout
// stage's kept value is s * 1 exactly), so the same bits; but x and s are read as the pre-norm
// reads x and r, inside the engine's passes (the float32 rows' statistics stepped within the
// normalising pass), instead of each block of h being built in L1 first and normalised after.
NormForward routed(const NormForward& args) {
  const DropoutInput* stage = args.dropout;
  if (!stage || stage->p != 0.0f || args.storage != DType::float32 ||
      stage->s_storage != args.branch_storage) {
    return args;
  }
  NormForward residual = args;
  residual.residual = stage->s;
  residual.h = nullptr;
  residual.dropout = nullptr;
  return residual;
}

}  // namespace

bool streams_narrow_outputs() {
  return cpu_family() != CpuFamily::amd;
}

void norm_forward(const NormForward& call) {
  // Whether the outputs stream is decided for the call as made (a post-norm call keeps post-norm's
  // rule where it then runs as the residual stage). 16-bit outputs per CPU family
  // (streams_narrow_outputs), except post-norm's: its forward is bound by the dropout mask's
  // Philox work, and streaming does not lose on AMD EPYC there. A call with a float32 output
  // (y, or h where a residual is added) keeps streaming, as float32 calls do.
  const bool narrow =
      call.branch_storage != DType::float32 && (!call.residual || call.storage != DType::float32);
  NormForward decided = call;
  decided.stream_outputs = streams_output(call.rows * call.dim * dtype_size(call.branch_storage)) &&
                           (!narrow || call.dropout || streams_narrow_outputs());
  const NormForward args = routed(decided);
  const ForwardRows rows = forward_rows_for(args);
  parallel_rows(args.rows, args.dim, [&](int64_t begin, int64_t end) { rows(args, begin, end); });
}

void norm_forward_range(const NormForward& call, int64_t begin, int64_t end) {
  const NormForward args = routed(call);
  forward_rows_for(args)(args, begin, end);
}

}  // namespace addnorm::cpu
