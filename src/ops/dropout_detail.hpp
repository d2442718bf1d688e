// Dropout pieces shared by the dropout op and the fused post-norm Add&Norm.
#pragma once

#include <cstdint>

#include "addnorm/ops.hpp"

namespace addnorm::detail {

// p in [0, 1) and offset + count within 64 bits.
void check_dropout(const DropoutOptions& options, int64_t count);

// Element i of dropout(x): 0 when dropped, value / (1 - p) when kept, value itself when p = 0.
float dropout_element(float value, int64_t i, const DropoutOptions& options);

}  // namespace addnorm::detail
