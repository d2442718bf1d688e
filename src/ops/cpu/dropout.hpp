// Dropout at SIMD speed, the same stream and values as the definition in
// ops/reference/philox.hpp: element e keeps iff philox_bits(seed, offset + e) >= floor(p 2^32),
// and a kept value is x * (1 / (1 - p)) computed in float64, rounded once.
#pragma once

#include <cstdint>

#include "addnorm/ops.hpp"

namespace addnorm::cpu {

// bits[i] = the 32 random bits of element first_element + i of the stream keyed by seed.
void philox_bits(uint64_t seed, uint64_t first_element, uint32_t* bits, int64_t count);

// output[i] = dropout of input[i], input[i] being element first_element + i of the tensor's
// stream (so first_element includes options.offset). output may be input.
void apply_dropout(const float* input, float* output, int64_t count,
                   const DropoutOptions& options, uint64_t first_element);

}  // namespace addnorm::cpu
