// Dropout pieces shared by the dropout op and the fused post-norm Add&Norm.
#pragma once

#include <cstdint>

#include "addnorm/ops.hpp"

namespace addnorm::detail {

// output = dropout(input) for a whole tensor of `count` elements (threads over ranges); output
// may be input. A kept value is input / (1 - p) in float64 rounded once; p = 0 copies.
void dropout_elements(const float* input, float* output, int64_t count,
                      const DropoutOptions& options);

}  // namespace addnorm::detail
