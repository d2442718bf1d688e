// Converting rows between float32 and a storage type (SIMD, dispatched at run time).
#pragma once

#include <cstdint>

#include "addnorm/dtype.hpp"

namespace addnorm::cpu {

void to_float32(const void* source, DType dtype, float* target, int64_t count);
// stream: write 16-bit types with non-temporal stores (for outputs larger than the cache); the
// bits are the same either way.
void from_float32(const float* source, void* target, DType dtype, int64_t count,
                  bool stream = false);

}  // namespace addnorm::cpu
