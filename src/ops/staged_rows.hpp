// Blocks of rows in float32 for the calls the kernels cannot take in their storage types
// directly: the few mixed-storage norms the engine has no pair for (mixed_precision.cpp: a
// bfloat16 with a float16 group, or a group of mixed types). A block (about 16 Ki elements)
// stays in cache from being widened to being used. Also gamma and beta as float32 for a call
// (parameter_as_float32: one row, widened once). Staged rows live in the calling thread's
// scratch (ops/cpu/scratch.hpp), so steady-state calls do not allocate.
#pragma once

#include <cstdint>
#include <optional>

#include "addnorm/dtype.hpp"
#include "ops/cpu/scratch.hpp"

namespace addnorm::detail {

// Rows per block: about 16 Ki elements, at least one row.
int64_t block_rows(int64_t dim);

// Elements [begin, begin + count) of an input as float32: in place, or widened into `scratch`.
const float* input_rows(const AnyConstView& view, int64_t begin, int64_t count,
                        cpu::Scratch& scratch);

// Where elements [begin, begin + count) of an output are computed: in place (float32) or in
// `scratch`.
float* output_rows(const AnyMutableView& view, int64_t begin, int64_t count, cpu::Scratch& scratch);

// Narrows output rows computed in scratch into their storage (nothing to do for float32), with
// streaming stores when the whole output is larger than the cache.
void store_rows(const AnyMutableView& view, const float* rows, int64_t begin, int64_t count);

// A parameter (gamma or beta: one row) as float32 for a whole call, widened into `scratch` when
// it is stored narrower; nullptr when absent.
const float* parameter_as_float32(const std::optional<AnyConstView>& view, cpu::Scratch& scratch);

}  // namespace addnorm::detail
