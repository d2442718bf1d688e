// The norm forward (plain and pre-norm) of a float16 residual stream, the branch of any type.
#define ADDNORM_FORWARD_ROWS stream_forward_rows<HalfRows<narrow::Half::float16>>
#define ADDNORM_FORWARD_ENTRY norm_forward_float16_stream
#include "ops/cpu/norm_forward_unit.inc"
