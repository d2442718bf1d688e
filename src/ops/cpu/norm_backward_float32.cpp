// The norm backward of a float32 residual stream (x, dh_next, dx), dy of any type.
#define ADDNORM_BACKWARD_STREAM Float32Rows
#define ADDNORM_BACKWARD_ENTRY norm_backward_float32_stream
#include "ops/cpu/norm_backward_unit.inc"
