// The norm backward's entry points: which translation unit runs a call (one per stream storage:
// norm_backward_unit.inc), whether dx streams, and the rows spread over OpenMP threads in fixed
// chunks for dgamma and dbeta. The kernels themselves are norm_backward-inl.h.
#include "ops/cpu/kernels.hpp"
#include "ops/cpu/threading.hpp"

namespace addnorm::cpu {

// Defined by the units (norm_backward_<storage>.cpp), each dispatching to the best SIMD target
// it was compiled for.
void norm_backward_float32_stream(const NormBackward& args, int64_t begin, int64_t end,
                                  double* dgamma_partial, double* dbeta_partial);
void norm_backward_bfloat16_stream(const NormBackward& args, int64_t begin, int64_t end,
                                   double* dgamma_partial, double* dbeta_partial);
void norm_backward_float16_stream(const NormBackward& args, int64_t begin, int64_t end,
                                  double* dgamma_partial, double* dbeta_partial);

namespace {

using BackwardRows = void (*)(const NormBackward&, int64_t, int64_t, double*, double*);

BackwardRows backward_rows_for(const NormBackward& args) {
  return for_storage<BackwardRows>(args.storage, norm_backward_float32_stream,
                                   norm_backward_bfloat16_stream, norm_backward_float16_stream);
}

}  // namespace

void norm_backward(const NormBackward& args) {
  // dgamma and dbeta: each fixed chunk of rows sums into its own float64 partials, in row order;
  // the chunks are then added in chunk order. The chunks depend only on the shape, so the result
  // is bitwise the same for any number of threads.
  NormBackward streamed = args;
  streamed.stream_outputs = streams_output(args.rows * args.dim * dtype_size(args.storage));
  const bool want_partials = args.dgamma || args.dbeta;
  const int64_t chunks = want_partials ? row_reduction_chunks(args.rows, args.dim) : 1;
  PartialSums partials(want_partials ? chunks : 0, args.dim, args.dgamma != nullptr,
                       args.dbeta != nullptr);
  const BackwardRows rows = backward_rows_for(args);
  parallel_chunks(chunks, args.rows, args.dim, [&](int64_t chunk, int64_t begin, int64_t end) {
    rows(streamed, begin, end, partials.dgamma(chunk), partials.dbeta(chunk));
  });
  if (args.dgamma) partials.reduce_dgamma(args.dgamma);
  if (args.dbeta) partials.reduce_dbeta(args.dbeta);
}

void norm_backward_range(const NormBackward& args, int64_t begin, int64_t end,
                         double* dgamma_partial, double* dbeta_partial) {
  backward_rows_for(args)(args, begin, end, dgamma_partial, dbeta_partial);
}

}  // namespace addnorm::cpu
