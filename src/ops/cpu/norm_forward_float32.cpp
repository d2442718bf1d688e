// The norm forward (plain and pre-norm) of a float32 residual stream, the branch of any type.
#define ADDNORM_FORWARD_ROWS stream_forward_rows<Float32Rows>
#define ADDNORM_FORWARD_ENTRY norm_forward_float32_stream
#include "ops/cpu/norm_forward_unit.inc"
