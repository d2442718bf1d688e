// The norm backward of a bfloat16 residual stream (x, dh_next, dx), dy of any type.
#define ADDNORM_BACKWARD_STREAM HalfRows<narrow::Half::bfloat16>
#define ADDNORM_BACKWARD_ENTRY norm_backward_bfloat16_stream
#include "ops/cpu/norm_backward_unit.inc"
