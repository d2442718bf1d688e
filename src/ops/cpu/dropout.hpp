// Dropout at SIMD speed, the same stream and values as the definition in
// ops/reference/philox.hpp: element e keeps iff philox_bits(seed, offset + e) >= floor(p 2^32),
// and a kept value is x * (1 / (1 - p)) computed in float64, rounded once.
#pragma once

#include <cstdint>

#include "addnorm/dtype.hpp"
#include "addnorm/ops.hpp"

namespace addnorm::cpu {

// bits[i] = the 32 random bits of element first_element + i of the stream keyed by seed.
void philox_bits(uint64_t seed, uint64_t first_element, uint32_t* bits, int64_t count);

// keep[i] = 1 if element first_element + i of the stream keyed by seed is kept at drop
// probability p, 0 if it is dropped: the dropout's mask.
void keep_mask(uint64_t seed, float p, uint64_t first_element, uint8_t* keep, int64_t count);

// output[i] = dropout of input[i], input[i] being element first_element + i of the tensor's
// stream (so first_element includes options.offset), both stored as `storage`: each output the
// float32 op's value rounded once. output may be input.
void apply_dropout(const void* input, void* output, DType storage, int64_t count,
                   const DropoutOptions& options, uint64_t first_element);

// out[i] = x[i] + dropout(s)[i] in float32, rounded as the unfused dropout -> add (the dropped
// value is rounded to float32, then added), x and s of any storage type (widened exactly), with
// s[i] element first_element + i of the stream; the random bits are generated once per element.
// keep (nullable) receives the mask: 1 for a kept element, 0 for a dropped one (all 1 when
// p = 0). out may be x or s when they are float32. x and s are prefetched ahead up to
// `readable` (>= count) elements from their start.
void add_dropout(const void* x, DType x_storage, const void* s, DType s_storage, float* out,
                 uint8_t* keep, int64_t count, const DropoutOptions& options,
                 uint64_t first_element, int64_t readable = 0);

// Dropout with a mask kept from add_dropout (the backward's ds = dx * mask / (1 - p)):
// dropped[i] = keep[i] ? input[i] * (1 / (1 - p)) (float64, rounded once) : 0, a plain copy when
// p = 0 (keep is then not read), and copy[i] = input[i]; each rounded once to its storage type.
// With `stream`, dropped and copy are written with non-temporal stores where their alignment
// allows. The outputs must not overlap input or each other.
void apply_keep(const float* input, const uint8_t* keep, void* dropped, DType dropped_storage,
                void* copy, DType copy_storage, int64_t count, float p, bool stream);

}  // namespace addnorm::cpu
